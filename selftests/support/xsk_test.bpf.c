// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
/*
 * Tiny XDP programs for the AF_XDP layer's tests and bench (not the MRC data
 * path, which is bpf/mrc_xdp.bpf.c):
 *   xsk_redirect  test frames (ethertype XSK_TEST_ETHERTYPE, or all frames
 *                 with cfg.match_all) -> XSKMAP at key if_base[ifindex] +
 *                 rx_queue_index; optionally writes struct mrc_xdp_meta in
 *                 front of the frame; everything else -> XDP_PASS
 *   xsk_drop      counts and drops every frame (generator baseline)
 *   xsk_tx        XDP_TX: run with BPF_F_TEST_XDP_LIVE_FRAMES it transmits
 *                 its test frame out of the ingress interface (generator)
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "mrc/uapi/maps.h"

#define XSK_TEST_ETHERTYPE 0x88b5 /* IEEE 802 local experimental 1 */

struct xsk_test_cfg {
	__u32 write_meta; /* write struct mrc_xdp_meta before redirecting */
	__u32 match_all;  /* redirect every frame, not only test frames */
};

enum xsk_test_counter {
	XSK_CNT_SEEN,	  /* frames xsk_redirect saw */
	XSK_CNT_REDIRECT, /* test frames handed to bpf_redirect_map */
	XSK_CNT_PASS,	  /* other frames passed to the stack */
	XSK_CNT_META_ERR, /* bpf_xdp_adjust_meta failed */
	XSK_CNT_DROP,	  /* frames xsk_drop dropped */
	XSK_CNT_TX,	  /* frames xsk_tx transmitted */
	XSK_CNT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* ifindex -> first XSKMAP key of that interface (several interfaces share
 * one program and one XSKMAP). Missing: 0. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} if_base SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xsk_test_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XSK_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);

	if (c)
		*c += 1;
}

/* multi-buffer aware: only the Ethernet header is read (always in the first
 * buffer), so veths of any MTU take it */
SEC("xdp.frags")
int xsk_redirect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct xsk_test_cfg *c;
	__u32 zero = 0, key, ifindex;
	__u32 *base;

	count(XSK_CNT_SEEN);
	c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c)
		return XDP_PASS;
	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (!c->match_all && eth->h_proto != bpf_htons(XSK_TEST_ETHERTYPE)) {
		count(XSK_CNT_PASS);
		return XDP_PASS;
	}

	ifindex = ctx->ingress_ifindex;
	key = ctx->rx_queue_index;
	base = bpf_map_lookup_elem(&if_base, &ifindex);
	if (base)
		key += *base;

	if (c->write_meta) {
		struct mrc_xdp_meta *meta;

		if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta))) {
			count(XSK_CNT_META_ERR);
		} else {
			data = (void *)(long)ctx->data;
			meta = (void *)(long)ctx->data_meta;
			if ((void *)(meta + 1) > data)
				return XDP_PASS;
			meta->rx_ts_ns = bpf_ktime_get_ns();
			meta->magic = MRC_XDP_META_MAGIC;
			meta->l3_off = sizeof(struct ethhdr);
			meta->bth_off = 0;
			meta->payload_off = 0;
			meta->payload_len = 0;
			meta->port = base ? (__u8)(*base >> 4) + 1 : 0;
			meta->kind = 0;
			meta->opcode = 0;
			meta->ecn = 0;
			meta->rx_queue = ctx->rx_queue_index;
			meta->resv = ifindex;
		}
	}
	count(XSK_CNT_REDIRECT);
	return bpf_redirect_map(&xsks, key, XDP_PASS);
}

SEC("xdp")
int xsk_drop(struct xdp_md *ctx)
{
	count(XSK_CNT_DROP);
	return XDP_DROP;
}

SEC("xdp")
int xsk_tx(struct xdp_md *ctx)
{
	count(XSK_CNT_TX);
	return XDP_TX;
}

char _license[] SEC("license") = "Dual BSD/GPL";
