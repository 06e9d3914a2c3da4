// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
/*
 * XDP_PASS for the fabric side of host ports (fabric.sh, xdp_pass=on). A
 * veth only delivers the frames its peer sends with XDP_TX (a host's trim
 * NACKs and EV probe responses) when it runs NAPI, which an attached XDP
 * program turns on; this one lets every packet through to the stack.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("xdp")
int fabric_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
