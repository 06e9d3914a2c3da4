// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
/*
 * mrc_xdp_rx: the XDP receive program of mrc.
 *
 *   not MRC (not IPv4/IPv6 UDP to the MRC port)  -> XDP_PASS, untouched
 *   malformed MRC                                 -> XDP_DROP + drop_<reason>
 *   trimmed data for a known QP                   -> rewritten into a NACK, XDP_TX
 *   EV probe (ENDPOINT_REQUEST, op EV_PROBE)      -> rewritten into an
 *                                                    ENDPOINT_RESPONSE, XDP_TX
 *   every other MRC packet                        -> AF_XDP socket of the rx
 *                                                    queue, struct mrc_xdp_meta
 *                                                    in front of the frame
 *
 * Wire layouts: include/mrc/uapi/wire.h; maps and metadata:
 * include/mrc/uapi/maps.h; Documentation/xdp.md explains the behaviour, the
 * counters and how to inspect them. Only helpers of Linux <= 5.15 and bounded
 * loops are used, so the program also loads on Debian 12's 6.1 kernel.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "mrc/uapi/maps.h"
#include "mrc/uapi/wire.h"
#include "mrc_icrc.h"
#include "mrc_xdp_maps.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MRC_IPPROTO_FRAGMENT 44
#define MRC_IPV4_FRAG_MASK 0x3fff /* MF + fragment offset */
#define MRC_IPV4_DF 0x4000
#define MRC_REPLY_TTL 64

struct mrc_vlan_hdr {
	__be16 tci;
	__be16 proto;
};

struct mrc_frag6_hdr {
	__u8 nexthdr;
	__u8 resv;
	__be16 frag_off;
	__be32 id;
};

/* What the parser learned about an MRC packet; all offsets from ctx->data. */
struct mrc_pkt {
	__u32 l3;     /* IP header */
	__u32 ip_len; /* 20 or 40 */
	__u32 bth;    /* BTH */
	__u32 xlen;   /* header stack after the BTH */
	__u32 after;  /* bytes after the header stack (payload + pad + ICRC) */
	__u32 dqpn;
	__u32 psn;
	__u32 flow_label; /* IPv6 */
	__u16 sport;
	__u8 v6;
	__u8 dscp;
	__u8 ecn;
	__u8 opcode;
	__u8 kind; /* MRC_META_KIND_* */
	__u8 ts;
	__u8 pad; /* BTH PadCnt (data) */
};

/* DSCP classes in force (an all-zero triple in mrc_cfg means the defaults). */
struct mrc_dscp {
	__u8 trimmed;
	__u8 lasthop;
	__u8 control;
};

/*
 * Offsets read back from struct mrc_pkt can lose their bounds in the verifier
 * (32-bit stack slots). mrc_clamp() restores them with a mask the compiler
 * cannot drop; the masks are wider than any offset the parser accepts.
 */
#define MRC_L3_MASK 0x1f    /* l3 <= 18 */
#define MRC_IPLEN_MASK 0x3f /* ip_len <= 40 */
#define MRC_BTH_MASK 0x7f   /* bth <= 66 */
#define MRC_FRAME_MASK 0xff /* replies <= 118 bytes */

static __always_inline __u32 mrc_clamp(__u32 v, __u32 mask)
{
	barrier_var(v);
	return v & mask;
}

static __always_inline int drop(__u64 *counter)
{
	(*counter)++;
	return XDP_DROP;
}

/* ------------------------------------------------------------------ */
/* Replies built in place (NACK, ENDPOINT_RESPONSE)                    */
/* ------------------------------------------------------------------ */

/*
 * Rewrites Ethernet/IP/UDP/BTH of the frame (already resized to new_len) into
 * a reply: MACs and IPs swapped, UDP sport kept (the reverse path carries the
 * same EV), dport = MRC port. Variant fields covered by the ICRC mask are
 * written as all ones; mrc_reply_finish() sets their real values.
 */
static __always_inline int mrc_reply_headers(void *data, void *data_end, const struct mrc_pkt *p,
					     __u32 new_len, __be16 mrc_port_be, __u8 opcode,
					     __u32 dqpn, __u32 psn)
{
	__u32 l3 = mrc_clamp(p->l3, MRC_L3_MASK);
	__u32 ip_len = mrc_clamp(p->ip_len, MRC_IPLEN_MASK);
	__u32 bth_off = mrc_clamp(p->bth, MRC_BTH_MASK);
	struct ethhdr *eth = data;
	struct udphdr *udp;
	struct mrc_bth *bth;
	__u8 mac[ETH_ALEN];

	new_len = mrc_clamp(new_len, MRC_FRAME_MASK);
	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);

	if (p->v6) {
		struct ipv6hdr *ip6 = data + l3;
		struct in6_addr a;

		if ((void *)(ip6 + 1) > data_end)
			return -1;
		/* version 6, traffic class and flow label all ones (ICRC mask) */
		*(__be32 *)ip6 = bpf_htonl(0x6fffffff);
		ip6->payload_len = bpf_htons(new_len - l3 - sizeof(*ip6));
		ip6->nexthdr = IPPROTO_UDP;
		ip6->hop_limit = 0xff;
		a = ip6->saddr;
		ip6->saddr = ip6->daddr;
		ip6->daddr = a;
	} else {
		struct iphdr *ip = data + l3;
		__be32 a;

		if ((void *)(ip + 1) > data_end)
			return -1;
		*(__u8 *)ip = 0x45;
		ip->tos = 0xff;
		ip->tot_len = bpf_htons(new_len - l3);
		ip->frag_off = bpf_htons(MRC_IPV4_DF);
		ip->ttl = 0xff;
		ip->protocol = IPPROTO_UDP;
		ip->check = 0xffff;
		a = ip->saddr;
		ip->saddr = ip->daddr;
		ip->daddr = a;
	}

	udp = data + l3 + ip_len;
	if ((void *)(udp + 1) > data_end)
		return -1;
	udp->dest = mrc_port_be;
	udp->len = bpf_htons(new_len - l3 - ip_len);
	udp->check = 0xffff;

	bth = data + bth_off;
	if ((void *)(bth + 1) > data_end)
		return -1;
	bth->opcode = opcode;
	bth->se_m_pad_tver = MRC_BTH_TVER;
	bth->pkey = bpf_htons(MRC_PKEY_DEFAULT);
	bth->resv_dqpn = bpf_htonl(0xff000000u | (dqpn & MRC_QPN_MASK)); /* resv8a: ICRC mask */
	bth->flags_psn = bpf_htonl(psn & MRC_PSN_MASK);
	return 0;
}

/* Computes and stores the ICRC, then writes the real variant fields. */
static __always_inline int mrc_reply_finish(void *data, void *data_end, const struct mrc_pkt *p,
					    __u32 new_len, __u8 dscp_control, __u32 dqpn)
{
	__u32 l3 = mrc_clamp(p->l3, MRC_L3_MASK);
	__u32 ip_len = mrc_clamp(p->ip_len, MRC_IPLEN_MASK);
	__u32 bth_off = mrc_clamp(p->bth, MRC_BTH_MASK);
	struct udphdr *udp;
	struct mrc_bth *bth;
	__u32 *trailer;
	__u32 crc;

	new_len = mrc_clamp(new_len, MRC_FRAME_MASK);
	if (new_len < l3 + MRC_ICRC_LEN)
		return -1;
	if (mrc_icrc(data, data_end, l3, new_len - MRC_ICRC_LEN - l3, &crc))
		return -1;
	trailer = data + mrc_clamp(new_len - MRC_ICRC_LEN, MRC_FRAME_MASK);
	if ((void *)(trailer + 1) > data_end)
		return -1;
	*trailer = crc; /* least significant byte first */

	if (p->v6) {
		struct ipv6hdr *ip6 = data + l3;

		if ((void *)(ip6 + 1) > data_end)
			return -1;
		*(__be32 *)ip6 = bpf_htonl(6u << 28 | (__u32)(dscp_control << 2) << 20 |
					   (p->flow_label & 0xfffff));
		ip6->hop_limit = MRC_REPLY_TTL;
	} else {
		struct iphdr *ip = data + l3;

		if ((void *)(ip + 1) > data_end)
			return -1;
		ip->tos = dscp_control << 2; /* ECN 0 */
		ip->ttl = MRC_REPLY_TTL;
		ip->check = 0;
		ip->check = (__u16)~mrc_ip4_fold((const __u16 *)ip);
	}
	udp = data + l3 + ip_len;
	if ((void *)(udp + 1) > data_end)
		return -1;
	udp->check = 0;
	bth = data + bth_off;
	if ((void *)(bth + 1) > data_end)
		return -1;
	bth->resv_dqpn = bpf_htonl(dqpn & MRC_QPN_MASK);
	return 0;
}

/* Resizes the frame to new_len bytes. */
static __always_inline int mrc_resize(struct xdp_md *ctx, __u32 new_len)
{
	int delta = (int)new_len - (int)bpf_xdp_get_buff_len(ctx);

	if (delta == 0)
		return 0;
	return bpf_xdp_adjust_tail(ctx, delta);
}

/*
 * Trimmed data packet of a known QP -> NACK (reason TRIMMED or
 * TRIMMED_LASTHOP) back to the sender, in place.
 */
static __always_inline int mrc_trim_nack(struct xdp_md *ctx, struct mrc_xdp_stats *st,
					 const struct mrc_pkt *p, const struct mrc_dscp *dscp,
					 __be16 mrc_port_be, __u32 remote_qpn)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 bth_off = mrc_clamp(p->bth, MRC_BTH_MASK);
	__u32 new_len = bth_off + sizeof(struct mrc_bth) + sizeof(struct mrc_neth) + MRC_ICRC_LEN;
	__u16 tx_ts_echo = 0;
	struct mrc_neth *neth;
	__u32 entropy;

	if (p->ts) {
		/* TSETH follows the METH */
		struct mrc_tseth *ts =
		    data + bth_off + sizeof(struct mrc_bth) + sizeof(struct mrc_meth);

		if ((void *)(ts + 1) > data_end)
			return drop(&st->drop_tx_error);
		tx_ts_echo = ts->tx_ts; /* stays in network order */
	}
	entropy = p->v6 ? (p->flow_label & 0xffff) << 16 | p->sport : p->sport;

	if (mrc_resize(ctx, new_len))
		return drop(&st->drop_tx_error);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (mrc_reply_headers(data, data_end, p, new_len, mrc_port_be, MRC_OP_NACK, remote_qpn,
			      p->psn))
		return drop(&st->drop_tx_error);

	neth = data + bth_off + sizeof(struct mrc_bth);
	if ((void *)(neth + 1) > data_end)
		return drop(&st->drop_tx_error);
	neth->hdr = bpf_htons(MRC_XH_TYPE_NACK << MRC_XH_TYPE_SHIFT | MRC_XH_NEXT_NONE
									  << MRC_XH_NEXT_SHIFT);
	neth->reason = p->dscp == dscp->lasthop ? MRC_NACK_TRIMMED_LASTHOP : MRC_NACK_TRIMMED;
	neth->vendor_info = 0;
	neth->entropy = bpf_htonl(entropy);
	neth->spdcid = bpf_htons(p->dqpn & 0xffff);
	neth->dpdcid = bpf_htons(remote_qpn & 0xffff);
	neth->resv_psn = bpf_htonl(p->psn & MRC_PSN_MASK);
	neth->cc_type_flags = MRC_CC_TYPE_NSCC << 4 | (p->ecn == MRC_ECN_CE ? MRC_CC_F_ECN_CE : 0);
	neth->resv = 0;
	neth->tx_ts_echo = tx_ts_echo;

	if (mrc_reply_finish(data, data_end, p, new_len, dscp->control, remote_qpn))
		return drop(&st->drop_tx_error);
	st->tx_trim_nack++;
	return XDP_TX;
}

/* EV probe -> ENDPOINT_RESPONSE, in place (the frame grows by 20 bytes). */
static __always_inline int mrc_ep_response(struct xdp_md *ctx, struct mrc_xdp_stats *st,
					   const struct mrc_pkt *p, const struct mrc_dscp *dscp,
					   __be16 mrc_port_be, __u32 port, __u16 port_up_mask,
					   __u64 t_entry)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 bth_off = mrc_clamp(p->bth, MRC_BTH_MASK);
	__u32 new_len = bth_off + sizeof(struct mrc_bth) + sizeof(struct mrc_eeth) + MRC_ICRC_LEN;
	struct mrc_erth *erth = data + bth_off + sizeof(struct mrc_bth);
	struct mrc_eeth *eeth;
	__be16 req_id, tx_ts;
	__be32 entropy;
	__u8 vendor_info;
	__u64 now;

	if ((void *)(erth + 1) > data_end)
		return drop(&st->drop_tx_error);
	vendor_info = erth->vendor_info; /* echoed: MRC_EP_VI_CONTROLLER */
	req_id = erth->req_id;
	tx_ts = erth->tx_ts;
	entropy = erth->entropy;

	if (mrc_resize(ctx, new_len))
		return drop(&st->drop_tx_error);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (mrc_reply_headers(data, data_end, p, new_len, mrc_port_be, MRC_OP_EP_RESPONSE,
			      MRC_QPN_ENDPOINT, 0))
		return drop(&st->drop_tx_error);

	eeth = data + bth_off + sizeof(struct mrc_bth);
	if ((void *)(eeth + 1) > data_end)
		return drop(&st->drop_tx_error);
	eeth->op = MRC_EP_OP_EV_PROBE << MRC_EP_OP_SHIFT;
	eeth->vendor_info = vendor_info;
	eeth->req_id = req_id;
	eeth->port_status = bpf_htonl(port_up_mask);
	eeth->tx_ts_echo = tx_ts;
	eeth->resv0 = 0;
	eeth->entropy = entropy;
	eeth->rx_port = port;
	eeth->flags = MRC_EETH_F_SVC_TIME;
	eeth->resv1 = 0;
	now = bpf_ktime_get_ns();
	eeth->svc_time_ns = bpf_htonl((__u32)(now - t_entry));
	eeth->rsp_ts_ns = bpf_cpu_to_be64(now);
	eeth->resv2 = 0;

	if (mrc_reply_finish(data, data_end, p, new_len, dscp->control, MRC_QPN_ENDPOINT))
		return drop(&st->drop_tx_error);
	st->tx_ep_response++;
	return XDP_TX;
}

/* ------------------------------------------------------------------ */
/* Hand-off to the AF_XDP socket of the rx queue                       */
/* ------------------------------------------------------------------ */

static __always_inline int mrc_to_xsk(struct xdp_md *ctx, struct mrc_xdp_stats *st,
				      const struct mrc_pkt *p, __u8 cfg_flags, __u32 port,
				      __u64 t_entry)
{
	__u32 queue = ctx->rx_queue_index;
	struct mrc_xdp_meta *m;
	void *data;
	long act = XDP_DROP;

	/* One socket per (plane port, rx queue): interfaces share the map. */
	if (queue < MRC_XSK_QUEUES_PER_PORT && port < MRC_MAX_PORTS)
		act = bpf_redirect_map(&mrc_xsks, MRC_XSK_KEY(port, queue), XDP_DROP);
	if (act != XDP_REDIRECT) {
		if (cfg_flags & MRC_XDP_CFG_F_PASS_NO_XSK)
			return XDP_PASS;
		return drop(&st->drop_no_xsk);
	}

	/* Metadata is best effort: without headroom the frame goes alone. */
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct mrc_xdp_meta)) == 0) {
		data = (void *)(long)ctx->data;
		m = (void *)(long)ctx->data_meta;
		if ((void *)(m + 1) <= data) {
			m->rx_ts_ns = t_entry;
			m->magic = MRC_XDP_META_MAGIC;
			m->l3_off = p->l3;
			m->bth_off = p->bth;
			if (p->kind == MRC_META_KIND_DATA) {
				m->payload_off = p->bth + sizeof(struct mrc_bth) + p->xlen;
				m->payload_len = p->after - MRC_ICRC_LEN - p->pad;
			} else {
				m->payload_off = 0;
				m->payload_len = 0;
			}
			m->port = port;
			m->kind = p->kind;
			m->opcode = p->opcode;
			m->ecn = p->ecn;
			m->rx_queue = queue;
			m->resv = 0;
		}
	}

	switch (p->kind) {
	case MRC_META_KIND_DATA:
		st->redirect_data++;
		break;
	case MRC_META_KIND_TRIMMED:
		st->redirect_trimmed++;
		break;
	default:
		st->redirect_ctrl++;
		break;
	}
	return XDP_REDIRECT;
}

/* ------------------------------------------------------------------ */
/* The program                                                         */
/* ------------------------------------------------------------------ */

SEC("xdp.frags")
int mrc_xdp_rx(struct xdp_md *ctx)
{
	__u64 t_entry = bpf_ktime_get_ns();
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 key = 0, ifindex = ctx->ingress_ifindex, port = 0;
	struct mrc_port_info *pi;
	struct mrc_xdp_stats *st;
	struct mrc_xdp_cfg *cfg;
	struct mrc_pkt p = {};
	struct mrc_dscp dscp;
	struct ethhdr *eth;
	struct udphdr *udp;
	struct mrc_bth *bth;
	__be16 mrc_port_be, proto;
	__u32 l3_end, udp_len, fp, flen;
	__u8 b1;

	pi = bpf_map_lookup_elem(&mrc_ports, &ifindex);
	if (pi && pi->port < MRC_MAX_PORTS)
		port = pi->port;
	st = bpf_map_lookup_elem(&mrc_stats, &port);
	cfg = bpf_map_lookup_elem(&mrc_cfg, &key);
	if (!st || !cfg)
		return XDP_PASS;
	/* the whole frame: a multi-buffer frame has only its first buffer
	 * between data and data_end (the headers always fit there) */
	flen = bpf_xdp_get_buff_len(ctx);
	st->rx_packets++;
	st->rx_bytes += flen;

	mrc_port_be = bpf_htons(cfg->udp_port ? cfg->udp_port : MRC_UDP_PORT_DEFAULT);
	dscp.trimmed = cfg->dscp_trimmed;
	dscp.lasthop = cfg->dscp_trimmed_lasthop;
	dscp.control = cfg->dscp_control;
	if (!(dscp.trimmed | dscp.lasthop | dscp.control)) {
		dscp.trimmed = MRC_DSCP_TRIMMED_DEFAULT;
		dscp.lasthop = MRC_DSCP_TRIMMED_LASTHOP_DEFAULT;
		dscp.control = MRC_DSCP_CONTROL_DEFAULT;
	}

	/* --- L2 ------------------------------------------------------- */
	eth = data;
	if ((void *)(eth + 1) > data_end)
		goto pass;
	p.l3 = sizeof(*eth);
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		struct mrc_vlan_hdr *vh = data + sizeof(*eth);

		if ((void *)(vh + 1) > data_end)
			goto pass;
		proto = vh->proto;
		p.l3 += sizeof(*vh);
	}

	/* --- L3: decide whether it is ours, then validate ------------- */
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = data + p.l3;
		__u32 ihl, tot;
		__u8 b0;

		if ((void *)(ip + 1) > data_end)
			goto pass;
		if (ip->protocol != IPPROTO_UDP)
			goto pass;
		b0 = *(__u8 *)ip;
		ihl = b0 & 0x0f;
		if (ihl < 5)
			goto pass;
		udp = (void *)ip + ihl * 4;
		if ((void *)(udp + 1) > data_end)
			goto pass;
		if (udp->dest != mrc_port_be)
			goto pass;
		/* MRC from here on: malformations are dropped and counted */
		if (ihl != 5 || (b0 >> 4) != 4)
			return drop(&st->drop_bad_ip);
		if (ip->frag_off & bpf_htons(MRC_IPV4_FRAG_MASK))
			return drop(&st->drop_ip_fragment);
		tot = bpf_ntohs(ip->tot_len);
		if (tot < sizeof(*ip) + sizeof(*udp) || p.l3 + tot > flen)
			return drop(&st->drop_bad_ip);
		if (mrc_ip4_fold((const __u16 *)ip) != 0xffff)
			return drop(&st->drop_bad_ip);
		p.ip_len = sizeof(*ip);
		p.dscp = ip->tos >> 2;
		p.ecn = ip->tos & 3;
		l3_end = p.l3 + tot;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = data + p.l3;
		__u32 plen, w0;

		if ((void *)(ip6 + 1) > data_end)
			goto pass;
		if (ip6->nexthdr == MRC_IPPROTO_FRAGMENT) {
			struct mrc_frag6_hdr *fh = (void *)(ip6 + 1);

			if ((void *)(fh + 1) > data_end || fh->nexthdr != IPPROTO_UDP)
				goto pass;
			udp = (void *)(fh + 1);
			if ((void *)(udp + 1) > data_end || udp->dest != mrc_port_be)
				goto pass;
			return drop(&st->drop_ip_fragment);
		}
		if (ip6->nexthdr != IPPROTO_UDP)
			goto pass;
		udp = (void *)(ip6 + 1);
		if ((void *)(udp + 1) > data_end)
			goto pass;
		if (udp->dest != mrc_port_be)
			goto pass;
		w0 = bpf_ntohl(*(__be32 *)ip6);
		if ((w0 >> 28) != 6)
			return drop(&st->drop_bad_ip);
		plen = bpf_ntohs(ip6->payload_len);
		if (plen < sizeof(*udp) || p.l3 + sizeof(*ip6) + plen > flen)
			return drop(&st->drop_bad_ip);
		p.v6 = 1;
		p.ip_len = sizeof(*ip6);
		p.dscp = (w0 >> 22) & 0x3f;
		p.ecn = (w0 >> 20) & 3;
		p.flow_label = w0 & 0xfffff;
		l3_end = p.l3 + sizeof(*ip6) + plen;
	} else {
		goto pass;
	}

	/* --- UDP ------------------------------------------------------ */
	udp = data + p.l3 + p.ip_len;
	if ((void *)(udp + 1) > data_end)
		goto pass;
	udp_len = bpf_ntohs(udp->len);
	if (udp_len != l3_end - (p.l3 + p.ip_len))
		return drop(&st->drop_bad_udp);
	p.sport = bpf_ntohs(udp->source);

	/* --- BTH ------------------------------------------------------ */
	if (udp_len < sizeof(*udp) + sizeof(*bth))
		return drop(&st->drop_truncated);
	p.bth = p.l3 + p.ip_len + sizeof(*udp);
	bth = data + p.bth;
	if ((void *)(bth + 1) > data_end)
		return drop(&st->drop_truncated);
	b1 = bth->se_m_pad_tver;
	fp = bpf_ntohl(bth->flags_psn);
	if ((b1 & MRC_BTH_TVER_MASK) != MRC_BTH_TVER ||
	    (fp & (MRC_BTH_F_RESV6 | MRC_BTH_F_RESV_LOW)))
		return drop(&st->drop_bad_bth);
	p.opcode = bth->opcode;
	p.dqpn = bpf_ntohl(bth->resv_dqpn) & MRC_QPN_MASK;
	p.psn = fp & MRC_PSN_MASK;
	p.ts = !!(fp & MRC_BTH_F_TS);

	switch (p.opcode) {
	case MRC_OP_WRITE_FIRST:
	case MRC_OP_WRITE_MIDDLE:
	case MRC_OP_WRITE_LAST:
	case MRC_OP_WRITE_ONLY:
		p.kind = MRC_META_KIND_DATA;
		p.xlen = MRC_DATA_HDR_LEN;
		break;
	case MRC_OP_WRITE_LAST_IMM:
	case MRC_OP_WRITE_ONLY_IMM:
		p.kind = MRC_META_KIND_DATA;
		p.xlen = MRC_DATA_HDR_LEN + sizeof(struct mrc_immdt);
		break;
	case MRC_OP_ACK:
		p.kind = MRC_META_KIND_CONTROL;
		p.xlen = sizeof(struct mrc_aeth);
		break;
	case MRC_OP_SACK: {
		/* SETH next = CC_STATE_SVC: a service time follows CC_STATE */
		struct mrc_seth *seth = (void *)(bth + 1);

		p.kind = MRC_META_KIND_CONTROL;
		p.xlen = MRC_SACK_HDR_LEN;
		if ((void *)seth + sizeof(seth->hdr) <= data_end &&
		    ((bpf_ntohs(seth->hdr) & MRC_XH_NEXT_MASK) >> MRC_XH_NEXT_SHIFT) ==
			MRC_XH_NEXT_CC_STATE_SVC)
			p.xlen = MRC_SACK_SVC_HDR_LEN;
		break;
	}
	case MRC_OP_NACK:
		p.kind = MRC_META_KIND_CONTROL;
		p.xlen = sizeof(struct mrc_neth);
		break;
	case MRC_OP_PROBE:
		p.kind = MRC_META_KIND_CONTROL;
		p.xlen = sizeof(struct mrc_peth);
		break;
	case MRC_OP_EP_REQUEST:
		p.kind = MRC_META_KIND_ENDPOINT;
		p.xlen = sizeof(struct mrc_erth);
		break;
	case MRC_OP_EP_RESPONSE:
		p.kind = MRC_META_KIND_ENDPOINT;
		p.xlen = sizeof(struct mrc_eeth);
		break;
	default:
		return drop(&st->drop_bad_opcode);
	}
	if (p.ts) {
		/* TSETH exists on data packets only */
		if (p.kind != MRC_META_KIND_DATA)
			return drop(&st->drop_bad_bth);
		p.xlen += sizeof(struct mrc_tseth);
	}

	/* --- header stack and what follows it ------------------------- */
	if (udp_len - sizeof(*udp) - sizeof(*bth) < p.xlen)
		return drop(&st->drop_bad_length);
	p.after = udp_len - sizeof(*udp) - sizeof(*bth) - p.xlen;
	if (p.kind == MRC_META_KIND_DATA) {
		if (p.after == 0 || p.dscp == dscp.trimmed || p.dscp == dscp.lasthop) {
			p.kind = MRC_META_KIND_TRIMMED;
		} else {
			p.pad = (b1 & MRC_BTH_PAD_MASK) >> MRC_BTH_PAD_SHIFT;
			if (p.after < MRC_ICRC_LEN + p.pad)
				return drop(&st->drop_bad_length);
		}
	} else if (p.after != MRC_ICRC_LEN) {
		return drop(&st->drop_bad_length);
	}
	if ((p.kind == MRC_META_KIND_ENDPOINT) != (p.dqpn == MRC_QPN_ENDPOINT))
		return drop(&st->drop_bad_qpn);
	if (pi && (pi->flags & MRC_PORT_F_ADMIN_DOWN))
		return drop(&st->drop_admin_down);
	if ((p.kind == MRC_META_KIND_DATA || p.kind == MRC_META_KIND_TRIMMED) &&
	    p.ecn == MRC_ECN_CE)
		st->ecn_ce++;

	/* --- act ------------------------------------------------------ */
	if (p.kind == MRC_META_KIND_TRIMMED) {
		if (!(cfg->flags & MRC_XDP_CFG_F_NO_TRIM_NACK)) {
			struct mrc_qp_info *qi = bpf_map_lookup_elem(&mrc_qps, &p.dqpn);

			if (qi && !(qi->flags & MRC_QP_F_NO_TRIM_NACK))
				return mrc_trim_nack(ctx, st, &p, &dscp, mrc_port_be,
						     qi->remote_qpn);
		}
	} else if (p.opcode == MRC_OP_EP_REQUEST && !(cfg->flags & MRC_XDP_CFG_F_NO_EP_PROBE)) {
		struct mrc_erth *erth = data + p.bth + sizeof(*bth);

		if ((void *)(erth + 1) > data_end)
			return drop(&st->drop_truncated);
		if (((erth->op & MRC_EP_OP_MASK) >> MRC_EP_OP_SHIFT) == MRC_EP_OP_EV_PROBE)
			return mrc_ep_response(ctx, st, &p, &dscp, mrc_port_be, port,
					       cfg->port_up_mask, t_entry);
	} else if (p.opcode == MRC_OP_EP_RESPONSE && (cfg->flags & MRC_XDP_CFG_F_PASS_EP_RSP)) {
		/* a response to the controller's request: mrcd reads it (AF_PACKET) */
		struct mrc_eeth *eeth = data + p.bth + sizeof(*bth);

		if ((void *)(eeth + 1) > data_end)
			return drop(&st->drop_truncated);
		if (eeth->vendor_info & MRC_EP_VI_CONTROLLER)
			return XDP_PASS;
	}
	return mrc_to_xsk(ctx, st, &p, cfg->flags, port, t_entry);

pass:
	st->pass_non_mrc++;
	return XDP_PASS;
}
