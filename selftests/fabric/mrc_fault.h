/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * Fault injection on fabric links: configuration and counters shared by the
 * tc program (mrc_fault.bpf.c) and its CLI (mrc_fault.cc). One instance of
 * the program (with its own maps) per attachment: a (namespace, interface,
 * hook) triple. Documentation/fabric.md describes every field.
 */
#ifndef MRC_FABRIC_FAULT_H
#define MRC_FABRIC_FAULT_H

#include <linux/bpf.h> /* struct bpf_spin_lock */
#include <linux/types.h>

/* mrc_fault_cfg.flags */
#define MRC_FAULT_F_BLACKHOLE 0x01 /* drop every matching packet */
#define MRC_FAULT_F_LOSS 0x02	   /* drop loss_ppm of matching packets */
#define MRC_FAULT_F_TRIM 0x04	   /* trim MRC data beyond trim_rate */
#define MRC_FAULT_F_ECN 0x08	   /* mark ECT packets CE beyond ecn_rate */
#define MRC_FAULT_F_CORRUPT 0x10   /* flip a payload byte in corrupt_ppm */
#define MRC_FAULT_F_DUP 0x20	   /* send a copy of dup_ppm of packets */
#define MRC_FAULT_F_FLAP                                                                           \
	0x40 /* drop every matching packet in the down part of each                                \
	      * flap period: a link flapping faster than a script can                              \
	      * toggle carrier (the carrier itself stays up) */

#define MRC_FAULT_PPM 1000000u
/* skb->mark of the copies the program makes (they pass unchanged). */
#define MRC_FAULT_DUP_MARK 0x4d524344u

struct mrc_fault_cfg {
	__u32 flags;
	__u32 loss_ppm; /* parts per million */
	__u32 corrupt_ppm;
	__u32 dup_ppm;
	__u64 trim_rate;  /* bytes per second */
	__u64 ecn_rate;	  /* bytes per second */
	__u32 trim_burst; /* bytes (token bucket depth) */
	__u32 ecn_burst;
	/* Which packets the faults apply to; the rest pass untouched. */
	__u8 match_ipver;  /* 0 = IPv4 and IPv6, 4, 6 */
	__u8 match_proto;  /* 0 = any, else an IP protocol (1 = ICMP and ICMPv6) */
	__u16 match_sport; /* host order, 0 = any (UDP and TCP only) */
	__u16 match_dport;
	__u16 mrc_port;	  /* UDP destination port of MRC packets, 0 = 4791 */
	__u8 trim_dscp;	  /* DSCP of trimmed headers */
	__u8 corrupt_xor; /* XOR mask applied to the corrupted byte, 0 = 0xff */
	/* Non-zero: match when (sport & mask) == match_sport (a set of source
	 * ports, e.g. a share of MRC's entropy values); match_sport 0 is then
	 * a value, not "any".
	 */
	__u16 match_sport_mask;
	__u8 pad[4];
	/* Flap: with flap_start_ns (CLOCK_MONOTONIC, the CLI's time of the
	 * update) as phase 0, every matching packet whose time within its
	 * flap_period_ns is below flap_down_ns is dropped: down first, then up.
	 */
	__u64 flap_period_ns;
	__u64 flap_down_ns;
	__u64 flap_start_ns;
};

/* Token bucket state of the rate-based faults (trim, ECN). */
struct mrc_fault_tb {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 trim_tokens; /* bytes */
	__u64 trim_last_ns;
	__u64 ecn_tokens;
	__u64 ecn_last_ns;
};

enum mrc_fault_stat {
	MRC_FAULT_ST_SEEN = 0,	/* every packet the program ran on */
	MRC_FAULT_ST_UNMATCHED, /* outside the match: passed untouched */
	MRC_FAULT_ST_PASSED,	/* matched and let through (maybe altered) */
	MRC_FAULT_ST_DROPPED,	/* random loss */
	MRC_FAULT_ST_BLACKHOLED,
	MRC_FAULT_ST_TRIMMED,
	MRC_FAULT_ST_OVERRATE_DROPPED, /* beyond trim_rate but not trimmable */
	MRC_FAULT_ST_MARKED,	       /* set to ECN-CE */
	MRC_FAULT_ST_CORRUPTED,
	MRC_FAULT_ST_DUPLICATED,
	MRC_FAULT_ST_FLAPPED, /* dropped in a flap's down part */
	MRC_FAULT_ST_MAX,
};

struct mrc_fault_stats {
	__u64 c[MRC_FAULT_ST_MAX];
};

#endif /* MRC_FABRIC_FAULT_H */
