/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * Keys and values of the maps of bpf/mrc_xdp.bpf.c and the XDP metadata
 * handed to AF_XDP sockets. Shared by BPF and C++; every map is BTF-typed so
 * `bpftool map dump pinned /sys/fs/bpf/mrc/<map>` prints field names.
 * Documentation/observability.md describes each map and field.
 */
#ifndef MRC_UAPI_MAPS_H
#define MRC_UAPI_MAPS_H

#include <linux/types.h>
#include "wire.h"

/* Upper bounds of the fixed-size maps. */
#define MRC_MAX_PORTS 16	   /* plane ports per node, 1-based; index 0 = unknown */
#define MRC_XSK_QUEUES_PER_PORT 64 /* rx queues per plane port with an XSK slot */
/* XSKMAP entries: one per (port, rx queue); port 0 = interface not in mrc_ports. */
#define MRC_MAX_QUEUES (MRC_MAX_PORTS * MRC_XSK_QUEUES_PER_PORT)
#define MRC_XSK_KEY(port, queue) ((port)*MRC_XSK_QUEUES_PER_PORT + (queue))
#define MRC_MAX_QPS 65536 /* entries of the QP table */

/* mrc_cfg (ARRAY, 1 entry): global knobs the loader sets, changeable live. */
struct mrc_xdp_cfg {
	__u16 udp_port; /* host order; 0 means MRC_UDP_PORT_DEFAULT */
	__u8 dscp_trimmed;
	__u8 dscp_trimmed_lasthop;
	__u8 dscp_control;
	__u8 flags;	    /* MRC_XDP_CFG_F_* */
	__u16 port_up_mask; /* bit N-1 = local plane port N up (EETH port_status) */
};
MRC_ASSERT_SIZE(struct mrc_xdp_cfg, 8);
#define MRC_XDP_CFG_F_NO_TRIM_NACK 0x01 /* never answer trimmed packets in XDP */
#define MRC_XDP_CFG_F_NO_EP_PROBE 0x02	/* never answer EV probes in XDP */
#define MRC_XDP_CFG_F_PASS_NO_XSK 0x04	/* pass MRC packets when no XSK is bound */
#define MRC_XDP_CFG_F_PASS_EP_RSP 0x08	/* pass controller EP responses to the stack */

/*
 * ERTH/EETH vendor_info bit: the endpoint request came from the controller
 * (mrcd). Responders echo vendor_info; with MRC_XDP_CFG_F_PASS_EP_RSP the
 * response is passed to the kernel (where mrcd reads it on an AF_PACKET
 * socket) instead of going to the AF_XDP socket of the application.
 */
#define MRC_EP_VI_CONTROLLER 0x80

/* mrc_xsks (XSKMAP, key MRC_XSK_KEY(port, rx queue)): the AF_XDP socket of
 * each plane port's rx queue. */

/* mrc_ports (HASH ifindex -> port): which plane port an interface is. */
struct mrc_port_info {
	__u32 port;  /* 1-based plane port number */
	__u32 flags; /* MRC_PORT_F_* */
};
MRC_ASSERT_SIZE(struct mrc_port_info, 8);
#define MRC_PORT_F_ADMIN_DOWN 0x1 /* port administratively disabled */

/* mrc_qps (HASH local QPN -> info): what XDP needs to answer for a QP. */
struct mrc_qp_info {
	__u32 remote_qpn; /* peer QPN, DestQP of the NACK XDP generates */
	__u32 flags;	  /* MRC_QP_F_* */
};
MRC_ASSERT_SIZE(struct mrc_qp_info, 8);
#define MRC_QP_F_NO_TRIM_NACK 0x1 /* trim NACKs disabled for this QP */

/*
 * mrc_stats (PERCPU_ARRAY, key = port 0..MRC_MAX_PORTS-1, 0 = interface not
 * in mrc_ports): per-port counters of the XDP program. Every drop reason is
 * its own field so bpftool prints it by name.
 */
struct mrc_xdp_stats {
	__u64 rx_packets; /* every frame the program saw */
	__u64 rx_bytes;
	__u64 pass_non_mrc;	/* not MRC: XDP_PASS untouched */
	__u64 redirect_data;	/* MRC data packets to the XSK */
	__u64 redirect_ctrl;	/* MRC control packets (SACK/NACK/ACK/probe/EP rsp) */
	__u64 redirect_trimmed; /* trimmed data handed to user space (no XDP NACK) */
	__u64 tx_trim_nack;	/* trimmed data answered with NACK via XDP_TX */
	__u64 tx_ep_response;	/* EV probes answered via XDP_TX */
	__u64 ecn_ce;		/* MRC data packets that arrived ECN-CE */
	__u64 drop_truncated;	/* frame shorter than its headers */
	__u64 drop_bad_ip;	/* IP version/IHL/length inconsistent */
	__u64 drop_ip_fragment; /* IPv4 fragment or IPv6 fragment header */
	__u64 drop_bad_udp;	/* UDP length inconsistent with IP length */
	__u64 drop_bad_bth;	/* TVer or reserved bits wrong */
	__u64 drop_bad_opcode;	/* not an MRC opcode */
	__u64 drop_bad_length;	/* header stack/payload length inconsistent */
	__u64 drop_bad_qpn;	/* endpoint op not to QPN 2 or vice versa */
	__u64 drop_no_xsk;	/* no AF_XDP socket on the rx queue */
	__u64 drop_admin_down;	/* port administratively disabled */
	__u64 drop_tx_error;	/* could not rewrite a frame for XDP_TX */
};
MRC_ASSERT_SIZE(struct mrc_xdp_stats, 20 * 8);

/*
 * Metadata the XDP program writes in front of each redirected frame
 * (bpf_xdp_adjust_meta). User space finds it right before the packet data
 * in the UMEM frame. Size is a multiple of 4 as the kernel requires.
 */
struct mrc_xdp_meta {
	__u64 rx_ts_ns;	   /* bpf_ktime_get_ns() at XDP entry (CLOCK_MONOTONIC) */
	__u32 magic;	   /* MRC_XDP_META_MAGIC: the fields below are valid */
	__u16 l3_off;	   /* offset of the IP header */
	__u16 bth_off;	   /* offset of the BTH */
	__u16 payload_off; /* offset of the payload (data) or 0 */
	__u16 payload_len; /* payload bytes (data) */
	__u8 port;	   /* receiving plane port, 1-based, 0 unknown */
	__u8 kind;	   /* MRC_META_KIND_* */
	__u8 opcode;
	__u8 ecn; /* ECN codepoint of the IP header */
	__u32 rx_queue;
	__u32 resv;
};
MRC_ASSERT_SIZE(struct mrc_xdp_meta, 32);
#define MRC_XDP_META_MAGIC 0x4d524331u /* "MRC1" */

enum mrc_meta_kind {
	MRC_META_KIND_DATA = 1,
	MRC_META_KIND_TRIMMED = 2,
	MRC_META_KIND_CONTROL = 3,
	MRC_META_KIND_ENDPOINT = 4,
};

/* Names of the pinned objects under the pin directory (default /sys/fs/bpf/mrc). */
#define MRC_PIN_DIR_DEFAULT "/sys/fs/bpf/mrc"

#endif /* MRC_UAPI_MAPS_H */
