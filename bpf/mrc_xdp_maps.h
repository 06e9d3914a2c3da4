/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * Maps of mrc_xdp.bpf.c. Keys and values are the types of
 * include/mrc/uapi/maps.h, so user space (user/loader/) and bpftool see the same
 * BTF. Names are at most 15 characters (BPF_OBJ_NAME_LEN) and start with
 * "mrc_" so `bpftool map list` is easy to grep. Documentation/xdp.md
 * describes every map and field.
 */
#ifndef MRC_BPF_XDP_MAPS_H
#define MRC_BPF_XDP_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "mrc/uapi/maps.h"

/* Interfaces the program may know about (ifindex -> plane port). */
#define MRC_XDP_MAX_IFACES 256

/* AF_XDP sockets by rx queue index (user/xdp binds one per plane queue). */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MRC_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} mrc_xsks SEC(".maps");

/* Global configuration, one entry (key 0), changeable while attached. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mrc_xdp_cfg);
} mrc_cfg SEC(".maps");

/* Ingress ifindex -> plane port and its admin state. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MRC_XDP_MAX_IFACES);
	__type(key, __u32);
	__type(value, struct mrc_port_info);
} mrc_ports SEC(".maps");

/* Local QPN -> what XDP needs to NACK trimmed packets of that QP. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MRC_MAX_QPS);
	__type(key, __u32);
	__type(value, struct mrc_qp_info);
} mrc_qps SEC(".maps");

/* Per-CPU counters by plane port (0 = ingress interface not in mrc_ports). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MRC_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct mrc_xdp_stats);
} mrc_stats SEC(".maps");

#endif /* MRC_BPF_XDP_MAPS_H */
