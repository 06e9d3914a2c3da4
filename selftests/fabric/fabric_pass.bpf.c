// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
/*
 * XDP_PASS for the fabric side of host ports (fabric.sh, xdp_pass=on). A
 * veth only delivers the frames its peer sends with XDP_TX (a host's trim
 * NACKs and EV probe responses) when it runs NAPI, which an attached XDP
 * program turns on; this one lets every packet through to the stack. It is
 * multi-buffer aware ("xdp.frags"): with it a veth takes MTUs above the
 * ~3.5 KB that fit one page (fabric.sh mtu=, up to 65535).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("xdp.frags")
int fabric_pass(struct xdp_md *ctx) { return XDP_PASS; }
