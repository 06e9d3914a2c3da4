// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
/*
 * Fault injection for the veth fabric: a tc clsact program for the egress or
 * ingress of a fabric link or host port. One loaded instance per attachment,
 * configured through fault_cfg (BTF-typed, updated at run time by the
 * mrc_fault CLI), counting what it did in fault_stats.
 *
 * Faults, applied in this order to packets inside the match: blackhole,
 * random loss, trim beyond a rate (MRC data is cut to its headers, other
 * traffic beyond the rate is dropped), ECN-CE beyond a rate, corruption (a
 * payload byte flipped), duplication (bpf_clone_redirect).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "mrc/uapi/wire.h"
#include "mrc_fault.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mrc_fault_cfg);
} fault_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mrc_fault_stats);
} fault_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mrc_fault_tb);
} fault_tb SEC(".maps");

#define ETH_HLEN_ 14
#define IPV4_HLEN 20
#define IPV6_HLEN 40
#define UDP_HLEN 8
#define MAX_BURST_NS 1000000000ull

struct pkt {
	__u32 l3; /* offset of the IP header */
	__u32 l4; /* offset of the L4 header */
	__u8 v6;
	__u8 proto;
	__u8 tos; /* IPv4 TOS / IPv6 traffic class */
	__u16 sport, dport;
	__u8 mrc;	   /* UDP to the MRC port with a BTH */
	__u8 mrc_data;	   /* a WRITE packet */
	__u32 mrc_hdr_end; /* end of the headers a trim keeps */
};

static __always_inline void count(struct mrc_fault_stats *st, int i)
{
	if (st && i >= 0 && i < MRC_FAULT_ST_MAX)
		st->c[i]++;
}

/* Parses Eth/IP/L4 (and the BTH of MRC packets) through bpf_skb_load_bytes. */
static __always_inline int parse(struct __sk_buff *skb, const struct mrc_fault_cfg *cfg,
				 struct pkt *p)
{
	__u16 proto = bpf_ntohs(skb->protocol);
	__u8 b[4];

	p->l3 = ETH_HLEN_;
	if (proto == ETH_P_IP) {
		__u8 h[IPV4_HLEN];

		if (bpf_skb_load_bytes(skb, p->l3, h, sizeof(h)))
			return -1;
		if ((h[0] >> 4) != 4)
			return -1;
		p->v6 = 0;
		p->tos = h[1];
		p->proto = h[9];
		p->l4 = p->l3 + (h[0] & 0xf) * 4;
		/* later fragments have no L4 header */
		if ((h[6] & 0x1f) || h[7])
			return 0;
	} else if (proto == ETH_P_IPV6) {
		__u8 h[8];

		if (bpf_skb_load_bytes(skb, p->l3, h, sizeof(h)))
			return -1;
		p->v6 = 1;
		p->tos = (h[0] << 4) | (h[1] >> 4);
		p->proto = h[6];
		p->l4 = p->l3 + IPV6_HLEN;
	} else {
		return -1;
	}
	if (p->proto != IPPROTO_UDP && p->proto != IPPROTO_TCP)
		return 0;
	if (bpf_skb_load_bytes(skb, p->l4, b, 4))
		return 0;
	p->sport = (b[0] << 8) | b[1];
	p->dport = (b[2] << 8) | b[3];
	if (p->proto == IPPROTO_UDP &&
	    p->dport == (cfg->mrc_port ? cfg->mrc_port : MRC_UDP_PORT_DEFAULT)) {
		struct mrc_bth bth;
		__u32 len;
		__u8 op;

		if (bpf_skb_load_bytes(skb, p->l4 + UDP_HLEN, &bth, sizeof(bth)))
			return 0;
		p->mrc = 1;
		op = bth.opcode;
		if (op >= MRC_OP_WRITE_FIRST && op <= MRC_OP_WRITE_ONLY_IMM) {
			p->mrc_data = 1;
			len = sizeof(struct mrc_bth) + sizeof(struct mrc_meth) +
			      sizeof(struct mrc_reth);
			if (bpf_ntohl(bth.flags_psn) & MRC_BTH_F_TS)
				len += sizeof(struct mrc_tseth);
			if (op == MRC_OP_WRITE_LAST_IMM || op == MRC_OP_WRITE_ONLY_IMM)
				len += sizeof(struct mrc_immdt);
			p->mrc_hdr_end = p->l4 + UDP_HLEN + len;
		}
	}
	return 0;
}

static __always_inline int matches(const struct mrc_fault_cfg *cfg, const struct pkt *p)
{
	if (cfg->match_ipver == 4 && p->v6)
		return 0;
	if (cfg->match_ipver == 6 && !p->v6)
		return 0;
	if (cfg->match_proto) {
		if (cfg->match_proto == IPPROTO_ICMP) {
			if (p->proto != IPPROTO_ICMP && p->proto != 58 /* ICMPv6 */)
				return 0;
		} else if (cfg->match_proto != p->proto) {
			return 0;
		}
	}
	if (cfg->match_sport_mask) {
		if ((p->sport & cfg->match_sport_mask) != cfg->match_sport)
			return 0;
	} else if (cfg->match_sport && cfg->match_sport != p->sport) {
		return 0;
	}
	if (cfg->match_dport && cfg->match_dport != p->dport)
		return 0;
	return 1;
}

static __always_inline int chance(__u32 ppm)
{
	return ppm && (bpf_get_prandom_u32() % MRC_FAULT_PPM) < ppm;
}

/* Takes len bytes from a bucket; returns 1 when the packet is beyond the rate. */
static __always_inline int over_rate(__u64 *tokens, __u64 *last, __u64 rate, __u32 burst, __u64 now,
				     __u32 len)
{
	__u64 dt = now - *last;
	__u64 t;

	if (dt > MAX_BURST_NS)
		dt = MAX_BURST_NS;
	t = *tokens + dt * rate / 1000000000ull;
	if (t > burst)
		t = burst;
	*last = now;
	if (t >= len) {
		*tokens = t - len;
		return 0;
	}
	*tokens = t;
	return 1;
}

/* Cuts an MRC data packet after its headers, fixes the IP and UDP lengths
 * (and the IPv4 checksum), sets the trimmed DSCP. */
static __always_inline int trim(struct __sk_buff *skb, const struct mrc_fault_cfg *cfg,
				const struct pkt *p)
{
	__u32 end = p->mrc_hdr_end;
	__be16 zero = 0, ulen;
	__u8 tos;

	if (end >= skb->len)
		return 0; /* nothing to cut */
	if (bpf_skb_change_tail(skb, end, 0))
		return -1;
	ulen = bpf_htons(end - p->l4);
	tos = (cfg->trim_dscp << 2) | (p->tos & 3);
	if (!p->v6) {
		__be16 old[2], new[2];

		if (bpf_skb_load_bytes(skb, p->l3, old, 4))
			return -1;
		new[0] = bpf_htons((bpf_ntohs(old[0]) & 0xff00) | tos);
		new[1] = bpf_htons(end - p->l3);
		if (bpf_skb_store_bytes(skb, p->l3, new, 4, 0))
			return -1;
		if (bpf_l3_csum_replace(skb, p->l3 + 10, old[0], new[0], 2) ||
		    bpf_l3_csum_replace(skb, p->l3 + 10, old[1], new[1], 2))
			return -1;
	} else {
		__u8 h[2];
		__be16 plen = bpf_htons(end - p->l4);

		if (bpf_skb_load_bytes(skb, p->l3, h, 2))
			return -1;
		h[0] = (h[0] & 0xf0) | (tos >> 4);
		h[1] = (h[1] & 0x0f) | (tos << 4);
		if (bpf_skb_store_bytes(skb, p->l3, h, 2, 0) ||
		    bpf_skb_store_bytes(skb, p->l3 + 4, &plen, 2, 0))
			return -1;
	}
	/* UDP length; the checksum (0 in RoCEv2 framing) is cleared */
	if (bpf_skb_store_bytes(skb, p->l4 + 4, &ulen, 2, 0) ||
	    bpf_skb_store_bytes(skb, p->l4 + 6, &zero, 2, 0))
		return -1;
	return 1;
}

static __always_inline int mark_ce(struct __sk_buff *skb, const struct pkt *p)
{
	if ((p->tos & 3) == MRC_ECN_NOT_ECT || (p->tos & 3) == MRC_ECN_CE)
		return 0;
	if (!p->v6) {
		__be16 old, new;

		if (bpf_skb_load_bytes(skb, p->l3, &old, 2))
			return -1;
		new = bpf_htons((bpf_ntohs(old) & 0xff00) | p->tos | MRC_ECN_CE);
		if (bpf_skb_store_bytes(skb, p->l3, &new, 2, 0) ||
		    bpf_l3_csum_replace(skb, p->l3 + 10, old, new, 2))
			return -1;
	} else {
		__u8 b;

		if (bpf_skb_load_bytes(skb, p->l3 + 1, &b, 1))
			return -1;
		b |= MRC_ECN_CE << 4;
		if (bpf_skb_store_bytes(skb, p->l3 + 1, &b, 1, 0))
			return -1;
	}
	return 1;
}

/* Flips the last payload byte: the one before the ICRC of an MRC packet,
 * else the frame's last byte. No checksum is fixed: the receiver must see it. */
static __always_inline int corrupt(struct __sk_buff *skb, const struct mrc_fault_cfg *cfg,
				   const struct pkt *p)
{
	__u32 tail = p->mrc ? MRC_ICRC_LEN + 1 : 1;
	__u32 off;
	__u8 b;

	if (skb->len <= p->l4 + tail)
		return 0;
	off = skb->len - tail;
	if (bpf_skb_load_bytes(skb, off, &b, 1))
		return -1;
	b ^= cfg->corrupt_xor ? cfg->corrupt_xor : 0xff;
	if (bpf_skb_store_bytes(skb, off, &b, 1, 0))
		return -1;
	return 1;
}

static __always_inline int fault(struct __sk_buff *skb, int ingress)
{
	__u32 zero = 0;
	struct mrc_fault_cfg *cfg = bpf_map_lookup_elem(&fault_cfg, &zero);
	struct mrc_fault_stats *st = bpf_map_lookup_elem(&fault_stats, &zero);
	struct pkt p = {};
	__u64 now;
	int over;

	if (skb->mark == MRC_FAULT_DUP_MARK) {
		/* our own copy coming back through the hook */
		skb->mark = 0;
		return TC_ACT_OK;
	}
	count(st, MRC_FAULT_ST_SEEN);
	if (!cfg || !cfg->flags || parse(skb, cfg, &p) || !matches(cfg, &p)) {
		count(st, MRC_FAULT_ST_UNMATCHED);
		return TC_ACT_OK;
	}
	if (cfg->flags & MRC_FAULT_F_BLACKHOLE) {
		count(st, MRC_FAULT_ST_BLACKHOLED);
		return TC_ACT_SHOT;
	}
	if ((cfg->flags & MRC_FAULT_F_FLAP) && cfg->flap_period_ns) {
		now = bpf_ktime_get_ns();
		if (now >= cfg->flap_start_ns &&
		    (now - cfg->flap_start_ns) % cfg->flap_period_ns < cfg->flap_down_ns) {
			count(st, MRC_FAULT_ST_FLAPPED);
			return TC_ACT_SHOT;
		}
	}
	if ((cfg->flags & MRC_FAULT_F_LOSS) && chance(cfg->loss_ppm)) {
		count(st, MRC_FAULT_ST_DROPPED);
		return TC_ACT_SHOT;
	}
	if (cfg->flags & (MRC_FAULT_F_TRIM | MRC_FAULT_F_ECN)) {
		struct mrc_fault_tb *tb = bpf_map_lookup_elem(&fault_tb, &zero);
		int trim_over = 0, ecn_over = 0;

		now = bpf_ktime_get_ns();
		if (tb) {
			bpf_spin_lock(&tb->lock);
			/* MRC control packets ride the control class: never trimmed */
			if ((cfg->flags & MRC_FAULT_F_TRIM) && !(p.mrc && !p.mrc_data))
				trim_over =
				    over_rate(&tb->trim_tokens, &tb->trim_last_ns, cfg->trim_rate,
					      cfg->trim_burst, now, skb->len);
			if (cfg->flags & MRC_FAULT_F_ECN)
				ecn_over = over_rate(&tb->ecn_tokens, &tb->ecn_last_ns,
						     cfg->ecn_rate, cfg->ecn_burst, now, skb->len);
			bpf_spin_unlock(&tb->lock);
		}
		if (trim_over) {
			if (!p.mrc_data || skb->gso_segs > 1) {
				count(st, MRC_FAULT_ST_OVERRATE_DROPPED);
				return TC_ACT_SHOT;
			}
			over = trim(skb, cfg, &p);
			if (over < 0) {
				count(st, MRC_FAULT_ST_OVERRATE_DROPPED);
				return TC_ACT_SHOT;
			}
			if (over)
				count(st, MRC_FAULT_ST_TRIMMED);
			p.tos = (cfg->trim_dscp << 2) | (p.tos & 3);
		}
		if (ecn_over && mark_ce(skb, &p) > 0)
			count(st, MRC_FAULT_ST_MARKED);
	}
	if ((cfg->flags & MRC_FAULT_F_CORRUPT) && chance(cfg->corrupt_ppm) &&
	    corrupt(skb, cfg, &p) > 0)
		count(st, MRC_FAULT_ST_CORRUPTED);
	if ((cfg->flags & MRC_FAULT_F_DUP) && chance(cfg->dup_ppm)) {
		__u32 mark = skb->mark;

		skb->mark = MRC_FAULT_DUP_MARK;
		if (bpf_clone_redirect(skb, skb->ifindex, ingress ? BPF_F_INGRESS : 0) == 0)
			count(st, MRC_FAULT_ST_DUPLICATED);
		skb->mark = mark;
	}
	count(st, MRC_FAULT_ST_PASSED);
	return TC_ACT_OK;
}

SEC("tc")
int mrc_fault_egress(struct __sk_buff *skb) { return fault(skb, 0); }

SEC("tc")
int mrc_fault_ingress(struct __sk_buff *skb) { return fault(skb, 1); }
