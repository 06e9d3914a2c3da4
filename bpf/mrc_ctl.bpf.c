// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
/*
 * mrc_ctl: the maps of the controller state (include/mrc/uapi/ctl.h). No
 * programs: mrcd creates these maps from this object and pins them; libmrc
 * and mrcctl open the pins. The mmapable arrays let applications read
 * policy (EV states, port admin state, profiles) without a syscall.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "mrc/uapi/ctl.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mrc_ctl_dev);
} mrc_ctl_dev SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MRC_CTL_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct mrc_ctl_port);
} mrc_ctl_port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MRC_CTL_MAX_FMT_PROFILES);
	__type(key, __u32);
	__type(value, struct mrc_ctl_fmt);
} mrc_ctl_fmt SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MRC_CTL_MAX_EV_PROFILES);
	__type(key, __u32);
	__type(value, struct mrc_ctl_evp);
} mrc_ctl_evp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MRC_CTL_EV_POOL);
	__type(key, __u32);
	__type(value, struct mrc_ctl_ev_entry);
} mrc_ctl_evs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MRC_CTL_MAX_CC_PROFILES);
	__type(key, __u32);
	__type(value, struct mrc_ctl_cc);
} mrc_ctl_cc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, MRC_CTL_EVQ_DEPTH);
	__type(value, struct mrc_ctl_ev_report);
} mrc_ctl_evq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MRC_CTL_MAX_QPS);
	__type(key, struct mrc_ctl_qp_key);
	__type(value, struct mrc_ctl_qp_report);
} mrc_ctl_qps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MRC_CTL_MAX_EVSTATS);
	__type(key, struct mrc_ctl_evstat_key);
	__type(value, struct mrc_ctl_evstat);
} mrc_ctl_evstat SEC(".maps");
