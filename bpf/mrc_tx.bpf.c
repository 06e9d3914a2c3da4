// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
/*
 * mrc_tx: transmission of frames user space wrote into a ring of slots, as
 * XDP "live frames" (BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES).
 *
 * User space (user/xdp/live_tx.cc) writes whole frames into mrc_tx_slots,
 * lists them in mrc_tx_descs, sets mrc_tx_ctl.prod and runs mrc_tx with
 * repeat = frames queued. The kernel gives every run a fresh page-pool frame;
 * the program takes the next descriptor, sizes the frame
 * (bpf_xdp_adjust_tail), copies the slot into it (bpf_xdp_store_bytes) and
 * redirects it to the descriptor's port through mrc_tx_devmap. Outcomes are
 * written into the descriptor (MRC_TX_ST_*) and counted per port in
 * mrc_tx_stats.
 *
 * What happens after the redirect is not visible to the program: the
 * devmap enqueue can fail (interface down, frame over the MTU) and the
 * driver can refuse frames at the flush (veth: peer ring full, peer without
 * XDP). Two tracing programs count those from the xdp tracepoints, for the
 * devmap and the interfaces of this object only:
 *   mrc_tx_xmit       tp_btf/xdp_devmap_xmit  -> xmit_sent, xmit_drops
 *   mrc_tx_redir_err  tp_btf/xdp_redirect_err -> redirect_err
 *
 * mrc_tx_probe drops every frame; user space uses it to find the largest
 * frame live mode accepts. Include/mrc/uapi/tx.h has the map layouts,
 * Documentation/xdp-tx.md the design. Helpers: Linux 5.18+ (live frames and
 * bpf_xdp_store_bytes came with 5.18), tp_btf since 5.5.
 */
#include <linux/bpf.h>

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "mrc/uapi/tx.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MRC_LOOPBACK_IFINDEX 1

/* Entries of mrc_tx_descs - 1; set by user space before loading. */
const volatile __u32 desc_mask = 0;

/* Frame slots (max_entries set by user space before loading). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct mrc_tx_slot);
} mrc_tx_slots SEC(".maps");

/* Descriptors in send order, a ring as large as mrc_tx_slots. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct mrc_tx_desc);
} mrc_tx_descs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mrc_tx_ctl);
} mrc_tx_ctl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MRC_TX_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct mrc_tx_port);
} mrc_tx_ports SEC(".maps");

/* Egress interface of each 1-based port. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, MRC_TX_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} mrc_tx_devmap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MRC_TX_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct mrc_tx_stats);
} mrc_tx_stats SEC(".maps");

static __always_inline struct mrc_tx_stats *stats_of(__u32 port)
{
	return bpf_map_lookup_elem(&mrc_tx_stats, &port);
}

static __always_inline int fail(struct mrc_tx_desc *d, __u64 *counter, __u8 status)
{
	if (counter)
		(*counter)++;
	d->status = status;
	return XDP_DROP;
}

SEC("xdp")
int mrc_tx(struct xdp_md *ctx)
{
	struct mrc_tx_stats *st, *none;
	__u32 zero = 0, cons, idx, port, slot, cur;
	__u64 len; /* 64-bit: the bound checked is the register passed to the helper */
	struct mrc_tx_port *pi;
	struct mrc_tx_desc *d;
	struct mrc_tx_ctl *c;
	void *buf;
	long act;

	c = bpf_map_lookup_elem(&mrc_tx_ctl, &zero);
	none = stats_of(0);
	if (!c || !none)
		return XDP_DROP;
	cons = c->cons;
	if (cons == c->prod) {
		/* More runs than descriptors: user space asked for too many. */
		c->empty++;
		none->err_empty++;
		return XDP_DROP;
	}
	c->cons = cons + 1;

	idx = cons & desc_mask;
	d = bpf_map_lookup_elem(&mrc_tx_descs, &idx);
	if (!d) {
		none->err_empty++;
		return XDP_DROP;
	}
	port = d->port;
	len = d->len;
	slot = d->slot;

	pi = port ? bpf_map_lookup_elem(&mrc_tx_ports, &port) : NULL;
	if (!pi || !pi->max_frame)
		return fail(d, &none->err_bad_port, MRC_TX_ST_BAD_PORT);
	st = stats_of(port);
	if (!st)
		return fail(d, &none->err_bad_port, MRC_TX_ST_BAD_PORT);
	if (len < MRC_TX_MIN_FRAME)
		return fail(d, &st->err_bad_len, MRC_TX_ST_BAD_LEN);
	if (len > pi->max_frame || len > MRC_TX_SLOT_SIZE)
		return fail(d, &st->err_oversize, MRC_TX_ST_OVERSIZE);
	buf = bpf_map_lookup_elem(&mrc_tx_slots, &slot);
	if (!buf)
		return fail(d, &st->err_bad_slot, MRC_TX_ST_BAD_SLOT);

	/*
	 * Every run starts at the template length (MRC_TX_TEMPLATE_LEN): a
	 * fresh page holds the template, a recycled one is reset to it. Growing
	 * clears the new bytes; the copy overwrites them.
	 */
	cur = (__u32)bpf_xdp_get_buff_len(ctx);
	if (bpf_xdp_adjust_tail(ctx, (int)len - (int)cur))
		return fail(d, &st->err_resize, MRC_TX_ST_RESIZE);

	/* The verifier must see the bound on the very register passed to
	 * the helper; 6.1 does not carry it over from a zero-extended copy. */
	barrier_var(len);
	if (len < MRC_TX_MIN_FRAME || len > MRC_TX_SLOT_SIZE)
		return fail(d, &st->err_bad_len, MRC_TX_ST_BAD_LEN);
	if (bpf_xdp_store_bytes(ctx, 0, buf, len))
		return fail(d, &st->err_store, MRC_TX_ST_STORE);

	act = bpf_redirect_map(&mrc_tx_devmap, port, 0);
	if (act != XDP_REDIRECT)
		return fail(d, &st->err_no_dev, MRC_TX_ST_NO_DEV);
	st->tx_frames++;
	st->tx_bytes += len;
	d->status = MRC_TX_ST_REDIRECTED;
	return XDP_REDIRECT;
}

SEC("xdp")
int mrc_tx_probe(struct xdp_md *ctx) { return XDP_DROP; }

/* ------------------------------------------------------------------ */
/* What the driver did with the frames (xdp tracepoints)               */
/* ------------------------------------------------------------------ */

/* The few kernel fields read, relocated by CO-RE against vmlinux BTF. */
struct net___mrc {
	__u64 net_cookie;
} __attribute__((preserve_access_index));

struct net_device___mrc {
	int ifindex;
	struct {
		struct net___mrc *net;
	} nd_net;
} __attribute__((preserve_access_index));

/* The 1-based port of (ifindex, namespace), 0 if it is none of ours. */
static __always_inline __u32 port_of(const void *dev)
{
	const struct net_device___mrc *nd = dev;
	__u64 cookie = BPF_CORE_READ(nd, nd_net.net, net_cookie);
	__u32 ifindex = BPF_CORE_READ(nd, ifindex);
	__u32 p;

	for (p = 1; p < MRC_TX_MAX_PORTS; p++) {
		__u32 key = p;
		struct mrc_tx_port *pi = bpf_map_lookup_elem(&mrc_tx_ports, &key);

		if (pi && pi->max_frame && pi->ifindex == ifindex && pi->netns_cookie == cookie)
			return p;
	}
	return 0;
}

/*
 * One bulk of frames handed to a driver's ndo_xdp_xmit. Live frames come in
 * "from" the loopback device of the namespace that ran the program; frames
 * bound for our ports from anywhere else are not ours.
 */
SEC("tp_btf/xdp_devmap_xmit")
int BPF_PROG(mrc_tx_xmit, const void *from_dev, const void *to_dev, int sent, int drops, int err)
{
	const struct net_device___mrc *from = from_dev;
	struct mrc_tx_stats *st;
	__u32 zero = 0, port;
	struct mrc_tx_ctl *c;

	if (BPF_CORE_READ(from, ifindex) != MRC_LOOPBACK_IFINDEX)
		return 0;
	port = port_of(to_dev);
	if (!port || port >= MRC_TX_MAX_PORTS)
		return 0;
	c = bpf_map_lookup_elem(&mrc_tx_ctl, &zero);
	if (c) {
		__sync_fetch_and_add(&c->port[port].xmit_sent, (__u64)sent);
		__sync_fetch_and_add(&c->port[port].xmit_drops, (__u64)drops);
	}
	st = stats_of(port);
	if (st) {
		st->xmit_sent += sent;
		st->xmit_drops += drops;
	}
	return 0;
}

/* A redirect that failed at the enqueue, identified by our devmap's id. */
SEC("tp_btf/xdp_redirect_err")
int BPF_PROG(mrc_tx_redir_err, const void *dev, const void *xdp, const void *tgt, int err,
	     int map_type, __u32 map_id, __u32 index)
{
	struct mrc_tx_stats *st;
	struct mrc_tx_ctl *c;
	__u32 zero = 0;

	c = bpf_map_lookup_elem(&mrc_tx_ctl, &zero);
	if (!c || !c->devmap_id || map_id != c->devmap_id)
		return 0;
	if (index == 0 || index >= MRC_TX_MAX_PORTS)
		return 0;
	__sync_fetch_and_add(&c->port[index].redirect_err, 1);
	st = stats_of(index);
	if (st)
		st->redirect_err++;
	return 0;
}
