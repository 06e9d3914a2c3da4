/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * Persistent controller state of mrc (the device state of OCP mrc_ctl.h):
 * EV format profiles, EV profiles and their EV arrays, CC profiles, port
 * administrative state, the EV report queue and the per-QP / per-EV reports
 * applications publish. Every object lives in a BPF map created from
 * bpf/mrc_ctl.bpf.c and pinned by mrcd next to the XDP maps (default
 * /sys/fs/bpf/mrc/), so the state survives an mrcd restart and applications
 * keep reading it while mrcd is down.
 *
 *   map             type                     key                  value
 *   mrc_ctl_dev     ARRAY[1], mmapable       0                    mrc_ctl_dev
 *   mrc_ctl_port    ARRAY[16], mmapable      port number (1-based) mrc_ctl_port
 *   mrc_ctl_fmt     ARRAY[64], mmapable      slot                 mrc_ctl_fmt
 *   mrc_ctl_evp     ARRAY[64], mmapable      slot                 mrc_ctl_evp
 *   mrc_ctl_evs     ARRAY[65536], mmapable   pool index           mrc_ctl_ev_entry
 *   mrc_ctl_cc      ARRAY[64], mmapable      slot                 mrc_ctl_cc
 *   mrc_ctl_evq     QUEUE[4096]              -                    mrc_ctl_ev_report
 *   mrc_ctl_qps     HASH[16384]              mrc_ctl_qp_key       mrc_ctl_qp_report
 *   mrc_ctl_evstat  HASH[65536]              mrc_ctl_evstat_key   mrc_ctl_evstat
 *
 * Writers: mrcd alone writes the mmapable maps (single writer); every record
 * starts with a sequence counter (seqlock: odd while a write is in progress)
 * and mrc_ctl_dev.gen is bumped after every committed change, so a reader
 * notices any change with one load. Applications (libmrc) push to
 * mrc_ctl_evq (counting failed pushes in mrc_ctl_dev.evq_dropped) and write
 * their own entries of mrc_ctl_qps / mrc_ctl_evstat.
 *
 * Constants that mirror OCP mrc_ctl.h carry their own prefixes (MRC_PS_,
 * MRC_EVS_, MRC_EVM_, MRC_EVF_) so this header can be included next to it.
 * Documentation/observability.md describes every field.
 */
#ifndef MRC_UAPI_CTL_H
#define MRC_UAPI_CTL_H

#include <linux/types.h>
#include "wire.h"

#define MRC_CTL_MAGIC 0x4d524343u /* "MRCC" */
#define MRC_CTL_LAYOUT_VERSION 1

/* Sizes of the maps (device limits reported by mrcctl dev show). */
#define MRC_CTL_MAX_PORTS 16 /* port records 1..15; record 0 unused */
#define MRC_CTL_MAX_FMT_PROFILES 64
#define MRC_CTL_MAX_EV_PROFILES 64
#define MRC_CTL_MAX_CC_PROFILES 64
#define MRC_CTL_MAX_FMT_FIELDS 16
#define MRC_CTL_MAX_EV_FIELDS 16
#define MRC_CTL_EV_POOL 65536		/* EV array entries across all profiles */
#define MRC_CTL_EV_MAX_PER_PROFILE 4096 /* entries of one profile */
#define MRC_CTL_EV_BYTES 32		/* MRC_CTL_EV_MAX_BYTES */
#define MRC_CTL_EVQ_DEPTH 4096		/* EV reports queued for mrcd */
#define MRC_CTL_MAX_QPS 16384		/* QP reports */
#define MRC_CTL_MAX_EVSTATS 65536	/* per-EV counter records */

/* Profile states (mrc_ctl_profile_state). */
#define MRC_PS_INIT 0
#define MRC_PS_OFFLINE 1
#define MRC_PS_ONLINE 2

/* EV format modes (mrc_ctl_ev_fmt_mode bits). */
#define MRC_EVF_STEV (1u << 0)
#define MRC_EVF_SRV6 (1u << 1)
#define MRC_EVF_UDP (1u << 2)

/* EV modes (mrc_ctl_ev_mode bits). */
#define MRC_EVM_AUTO (1u << 0)
#define MRC_EVM_EXP (1u << 1)
#define MRC_EVM_GEN (1u << 2)

/* EV states (mrc_ctl_ev_state bits). */
#define MRC_EVS_GOOD (1u << 0)
#define MRC_EVS_ASSUMED_BAD (1u << 1)
#define MRC_EVS_DENIED (1u << 2)
#define MRC_EVS_UNKNOWN (1u << 31)

/* Port administrative state (mrc_ctl_port_admin_state). */
#define MRC_CTL_PORT_DISABLED 0
#define MRC_CTL_PORT_ENABLED 1

/* XDP attach mode of a port's interface, as mrcd attached it. */
#define MRC_CTL_XDP_NONE 0
#define MRC_CTL_XDP_NATIVE 1
#define MRC_CTL_XDP_GENERIC 2

/* CC algorithms (index into the device's algorithm list; 0 = CC disabled). */
#define MRC_CTL_CC_NONE 0
#define MRC_CTL_CC_NSCC 1 /* "uet-1.0-nscc" */

/* set_mask bits: which attributes a profile has been given so far. */
#define MRC_CTL_SET_MODE (1u << 0)
#define MRC_CTL_SET_FIELDS (1u << 1)
#define MRC_CTL_SET_FMT_ID (1u << 2)
#define MRC_CTL_SET_COUNT (1u << 3)
#define MRC_CTL_SET_MIN_ACTIVE (1u << 4)
#define MRC_CTL_SET_EVENT_MASK (1u << 5)
#define MRC_CTL_SET_ALGORITHM (1u << 6)
#define MRC_CTL_SET_CONFIG (1u << 7)

/* mrc_ctl_dev (key 0): device-wide state. */
struct mrc_ctl_dev {
	__u32 magic;	       /* MRC_CTL_MAGIC once mrcd initialised the maps */
	__u32 version;	       /* MRC_CTL_LAYOUT_VERSION */
	__u64 gen;	       /* bumped after every committed change of any record */
	__u64 evq_pushed;      /* EV reports applications queued (atomic add) */
	__u64 evq_dropped;     /* EV reports lost because mrc_ctl_evq was full (atomic add) */
	__u32 port_mask;       /* bit N: port N is configured (phy_port_mask) */
	__u32 port_down_mask;  /* bit N: port N must not be used (admin or link down) */
	__u32 admin_down_mask; /* bit N: port N administratively disabled */
	__u32 link_down_mask;  /* bit N: port N link down as mrcd last saw it */
	__u32 mrcd_pid;	       /* pid of the running mrcd, 0 after a clean exit */
	__u32 udp_port;	       /* MRC UDP destination port in use */
	__u64 mrcd_start_ns;   /* CLOCK_REALTIME when that mrcd started */
	__u64 heartbeat_ns;    /* CLOCK_MONOTONIC of mrcd's last tick */
	__u64 restarts;	       /* mrcd starts that found the state already there */
	__u64 resv[4];
};
MRC_ASSERT_SIZE(struct mrc_ctl_dev, 112);

/* mrc_ctl_port (key = port number): one plane port. */
struct mrc_ctl_port {
	__u64 seq;	   /* seqlock */
	__u32 port;	   /* 1-based port number (== key) */
	__u32 configured;  /* 1: an interface of mrcd's configuration is this port */
	__u32 admin_state; /* MRC_CTL_PORT_ENABLED / _DISABLED */
	__u32 link_up;	   /* 1: operstate up */
	__u32 ifindex;
	__u32 xdp_mode; /* MRC_CTL_XDP_* */
	char ifname[16];
	__u64 admin_changes; /* admin state modifications */
	__u32 queues;	     /* rx queues that carry MRC traffic (configuration) */
	__u32 resv;
};
MRC_ASSERT_SIZE(struct mrc_ctl_port, 64);

/* mrc_ctl_fmt (key = slot): one EV format profile. */
struct mrc_ctl_fmt {
	__u64 seq;	 /* seqlock */
	__u64 id;	 /* profile id (valid when used) */
	__u32 used;	 /* 1: the slot holds profile `id` */
	__u32 state;	 /* requested state (profile_state), MRC_PS_* */
	__u32 cur_state; /* current state (cur_profile_state), MRC_PS_* */
	__u32 mode;	 /* MRC_EVF_* */
	__u32 set_mask;	 /* MRC_CTL_SET_* */
	__u32 field_count;
	__u8 width[MRC_CTL_MAX_FMT_FIELDS]; /* field widths in bits */
};
MRC_ASSERT_SIZE(struct mrc_ctl_fmt, 56);

/* One EV profile field (mrc_ctl_ev_field). */
struct mrc_ctl_ev_field {
	__u32 width;
	__u32 init_val;
	__u32 min_val;
	__u32 max_val;
	__u32 mask;
};
MRC_ASSERT_SIZE(struct mrc_ctl_ev_field, 20);

/* mrc_ctl_evp (key = slot): one EV profile; its EVs are
 * mrc_ctl_evs[base .. base + ev_count - 1] (EXPLICIT and GENERATED). */
struct mrc_ctl_evp {
	__u64 seq;    /* seqlock; also covers the profile's EV entries */
	__u64 id;     /* profile id (valid when used) */
	__u64 fmt_id; /* EV format profile */
	__u32 used;
	__u32 state;	 /* requested state, MRC_PS_* */
	__u32 cur_state; /* current state, MRC_PS_* */
	__u32 mode;	 /* MRC_EVM_* */
	__u32 fmt_mode;	 /* MRC_EVF_* of the format (how `wire` is carried) */
	__u32 ev_count;
	__u32 min_active; /* ev_min_active */
	__u32 event_mask; /* MRC_EVS_GOOD | MRC_EVS_ASSUMED_BAD */
	__u32 set_mask;	  /* MRC_CTL_SET_* */
	__u32 field_count;
	__u32 base;	/* first entry in mrc_ctl_evs */
	__u32 n_denied; /* entries in state DENIED */
	__u64 changes;	/* committed modifications */
	struct mrc_ctl_ev_field field[MRC_CTL_MAX_EV_FIELDS];
};
MRC_ASSERT_SIZE(struct mrc_ctl_evp, 400);

/* mrc_ctl_evs (key = pool index): one EV of a profile's array. */
struct mrc_ctl_ev_entry {
	__u8 val[MRC_CTL_EV_BYTES]; /* compact EV, big-endian bit string (byte 0 bit 7 first) */
	__u32 wire;		    /* expanded 32-bit entropy as put on the wire */
	__u32 state;		    /* MRC_EVS_GOOD / _ASSUMED_BAD / _DENIED */
	__u8 port;		    /* 1-based port, 0 with populated == 0 */
	__u8 populated;		    /* 0: MRC_CTL_EV_UNPOPULATED (explicit, not replaced yet) */
	__u16 resv;
	__u32 resv2;
};
MRC_ASSERT_SIZE(struct mrc_ctl_ev_entry, 48);

/* mrc_ctl_cc_nscc_cfg, units as there (0 = engine default). */
struct mrc_ctl_nscc {
	__u32 adjust_bytes_threshold;  /* bytes */
	__u32 adjust_period_threshold; /* ns */
	__u32 base_rtt;		       /* ns */
	__u32 max_cwnd;		       /* bytes */
	__u32 qa_threshold;	       /* ns */
	__u32 target_delay;	       /* ns */
	float eta;
	float fi;
	float fi_scale;
	float gamma;
	float max_md_jump;
	__u8 disable_qa;
	__u8 qa_gate;
	__u16 resv;
};
MRC_ASSERT_SIZE(struct mrc_ctl_nscc, 48);

/* mrc_ctl_cc (key = slot): one CC profile. */
struct mrc_ctl_cc {
	__u64 seq; /* seqlock */
	__u64 id;
	__u32 used;
	__u32 state;	 /* requested state, MRC_PS_* */
	__u32 cur_state; /* current state, MRC_PS_* */
	__u32 set_mask;	 /* MRC_CTL_SET_* */
	__u32 algorithm; /* MRC_CTL_CC_* */
	__u32 resv;
	__u64 changes;
	struct mrc_ctl_nscc nscc;
};
MRC_ASSERT_SIZE(struct mrc_ctl_cc, 96);

/* mrc_ctl_evq value: one EV state change of one QP, pushed by an application.
 * States are the engine's (0 GOOD, 1 SKIP, 2 ASSUMED_BAD, 3 DENIED). */
struct mrc_ctl_ev_report {
	__u64 profile_id;
	__u64 time_ns;	    /* CLOCK_MONOTONIC */
	__u64 dropped_seen; /* mrc_ctl_dev.evq_dropped when the producer pushed this */
	__u32 pid;
	__u32 dev; /* device index within the process */
	__u32 qpn;
	__u32 wire;	    /* 32-bit entropy of the EV */
	__u32 engine_drops; /* reports the producer's own ring dropped before this one */
	__u8 port;
	__u8 from;
	__u8 to;
	__u8 reason; /* engine EvEventReason */
};
MRC_ASSERT_SIZE(struct mrc_ctl_ev_report, 48);
#define MRC_CTL_ENGINE_GOOD 0
#define MRC_CTL_ENGINE_SKIP 1
#define MRC_CTL_ENGINE_ASSUMED_BAD 2
#define MRC_CTL_ENGINE_DENIED 3

/* mrc_ctl_qps: what an application reports about each of its QPs. */
struct mrc_ctl_qp_key {
	__u32 pid;
	__u32 dev;
	__u32 qpn;
	__u32 resv;
};
MRC_ASSERT_SIZE(struct mrc_ctl_qp_key, 16);

struct mrc_ctl_qp_report {
	__u64 ev_profile_id;
	__u64 cc_profile_id;
	__u64 update_ns; /* CLOCK_MONOTONIC of the last update */
	__u32 state;	 /* QP state (ibv_qp_state value) */
	__u32 remote_qpn;
	__u32 ev_good; /* EVs of the QP per state */
	__u32 ev_skip;
	__u32 ev_assumed_bad;
	__u32 ev_denied;
	__u64 tx_pkts;
	__u64 tx_bytes;
	__u64 rtx_pkts;
	__u64 rx_pkts;
	__u64 rx_bytes;
	__u64 rx_sacks;
	__u64 rx_nacks;
	__u64 timeouts;
	__u64 cwnd_bytes;
	__u64 inflight_bytes;
	__u64 srtt_ns;
	char comm[16]; /* process name */
};
MRC_ASSERT_SIZE(struct mrc_ctl_qp_report, 152);

/* mrc_ctl_evstat: per-EV counters of one process, summed over its QPs. */
struct mrc_ctl_evstat_key {
	__u64 profile_id;
	__u32 pid;
	__u32 dev;
	__u32 wire;
	__u8 port;
	__u8 resv[3];
};
MRC_ASSERT_SIZE(struct mrc_ctl_evstat_key, 24);

struct mrc_ctl_evstat {
	__u64 update_ns; /* CLOCK_MONOTONIC */
	__u64 tx_pkts;
	__u64 acked;
	__u64 lost;
	__u64 ecn;
	__u64 trims;
	__u64 probes_ok;
	__u64 probes_failed;
	__u64 rtt_sum_ns;
	__u64 rtt_samples;
	__u32 rtt_min_ns;
	__u32 rtt_last_ns;
	__u32 qps;     /* QPs of the process that have this EV */
	__u32 qps_bad; /* ... of which hold it ASSUMED_BAD */
};
MRC_ASSERT_SIZE(struct mrc_ctl_evstat, 96);

/* Names of the pinned maps (under the pin directory, default /sys/fs/bpf/mrc). */
#define MRC_CTL_MAP_DEV "mrc_ctl_dev"
#define MRC_CTL_MAP_PORT "mrc_ctl_port"
#define MRC_CTL_MAP_FMT "mrc_ctl_fmt"
#define MRC_CTL_MAP_EVP "mrc_ctl_evp"
#define MRC_CTL_MAP_EVS "mrc_ctl_evs"
#define MRC_CTL_MAP_CC "mrc_ctl_cc"
#define MRC_CTL_MAP_EVQ "mrc_ctl_evq"
#define MRC_CTL_MAP_QPS "mrc_ctl_qps"
#define MRC_CTL_MAP_EVSTAT "mrc_ctl_evstat"

#endif /* MRC_UAPI_CTL_H */
