/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * Live-frames transmission: the maps of bpf/mrc_tx.bpf.c, shared with
 * user/xdp/live_tx.{hpp,cc}. User space writes whole frames into slots of
 * mrc_tx_slots, lists them in mrc_tx_descs and runs the program with
 * BPF_PROG_TEST_RUN + BPF_F_TEST_XDP_LIVE_FRAMES (repeat = frames queued);
 * each run of the program sends the next frame through mrc_tx_devmap.
 * Documentation/xdp-tx.md describes the design and every counter.
 *
 * Ports are 1-based here (key 0 = "no valid port"), as in the other mrc maps;
 * LiveTx numbers them from 0 like xdp::Device (BPF port = index + 1).
 */
#ifndef MRC_UAPI_TX_H
#define MRC_UAPI_TX_H

#include <linux/types.h>

#include "maps.h"
#include "wire.h"

/* Bytes per slot of mrc_tx_slots: a page, more than any live frame. */
#define MRC_TX_SLOT_SIZE 4096
/* Smallest frame: an Ethernet header (the kernel refuses shorter ones). */
#define MRC_TX_MIN_FRAME 14
/* Frame length the program starts from (BPF_PROG_TEST_RUN data_size_in). */
#define MRC_TX_TEMPLATE_LEN 64
/* Port entries (key 0 unused): 1-based ports 1..MRC_TX_MAX_PORTS-1. */
#define MRC_TX_MAX_PORTS MRC_MAX_PORTS

/* mrc_tx_slots (ARRAY, BPF_F_MMAPABLE): one frame per slot, from byte 0. */
struct mrc_tx_slot {
	__u8 data[MRC_TX_SLOT_SIZE];
};
MRC_ASSERT_SIZE(struct mrc_tx_slot, MRC_TX_SLOT_SIZE);

/*
 * mrc_tx_descs (ARRAY, BPF_F_MMAPABLE, one entry per slot, power of two):
 * the frames queued for the next run, in send order. Entry i is used for
 * ring index i (free-running) & (entries - 1).
 */
struct mrc_tx_desc {
	__u32 slot;  /* index in mrc_tx_slots */
	__u16 len;   /* frame bytes (Ethernet header .. ICRC) */
	__u8 port;   /* 1-based port: mrc_tx_devmap / mrc_tx_ports key */
	__u8 status; /* MRC_TX_ST_*: written by the program */
};
MRC_ASSERT_SIZE(struct mrc_tx_desc, 8);

/* What became of a descriptor (mrc_tx_desc.status). */
enum mrc_tx_status {
	MRC_TX_ST_QUEUED = 0,	  /* not taken yet (user space writes 0) */
	MRC_TX_ST_REDIRECTED = 1, /* handed to the devmap: see the xmit counters */
	MRC_TX_ST_BAD_PORT = 2,	  /* port 0, beyond the table, or not configured */
	MRC_TX_ST_NO_DEV = 3,	  /* no devmap entry (interface gone) */
	MRC_TX_ST_BAD_LEN = 4,	  /* shorter than MRC_TX_MIN_FRAME */
	MRC_TX_ST_OVERSIZE = 5,	  /* longer than the port's max_frame or a slot */
	MRC_TX_ST_BAD_SLOT = 6,	  /* slot index beyond mrc_tx_slots */
	MRC_TX_ST_RESIZE = 7,	  /* bpf_xdp_adjust_tail refused (kernel frame limit) */
	MRC_TX_ST_STORE = 8,	  /* bpf_xdp_store_bytes failed */
};

/* mrc_tx_ports (ARRAY, MRC_TX_MAX_PORTS, key = 1-based port). */
struct mrc_tx_port {
	__u32 ifindex;	    /* in the namespace of the interface */
	__u32 max_frame;    /* largest frame accepted; 0 = port not configured */
	__u64 netns_cookie; /* SO_NETNS_COOKIE of the interface's namespace */
};
MRC_ASSERT_SIZE(struct mrc_tx_port, 16);

/* Per-port feedback in mrc_tx_ctl, from the xdp tracepoints. */
struct mrc_tx_port_fb {
	__u64 xmit_sent;    /* frames the driver accepted (xdp:xdp_devmap_xmit) */
	__u64 xmit_drops;   /* frames the driver refused: ring full, peer without
			     * XDP/NAPI, too long (xdp:xdp_devmap_xmit) */
	__u64 redirect_err; /* devmap enqueue failed: interface down, frame over
			     * the MTU, no ndo_xdp_xmit (xdp:xdp_redirect_err) */
};
MRC_ASSERT_SIZE(struct mrc_tx_port_fb, 24);

/*
 * mrc_tx_ctl (ARRAY, BPF_F_MMAPABLE, 1 entry): the ring indices and counters
 * user space reads after every run without a syscall.
 */
struct mrc_tx_ctl {
	__u32 prod;	 /* descriptors written (user space), free-running */
	__u32 cons;	 /* descriptors taken (program), free-running */
	__u32 devmap_id; /* map id of mrc_tx_devmap (user space, once) */
	__u32 empty;	 /* program runs that found no descriptor */
	__u64 resv[2];
	struct mrc_tx_port_fb port[MRC_TX_MAX_PORTS]; /* index = 1-based port */
};
MRC_ASSERT_SIZE(struct mrc_tx_ctl, 32 + 24 * MRC_TX_MAX_PORTS);

/*
 * mrc_tx_stats (PERCPU_ARRAY, MRC_TX_MAX_PORTS, key = 1-based port; key 0
 * counts descriptors that name no valid port): every outcome by name.
 */
struct mrc_tx_stats {
	__u64 tx_frames; /* redirected (MRC_TX_ST_REDIRECTED) */
	__u64 tx_bytes;
	__u64 xmit_sent; /* as mrc_tx_port_fb */
	__u64 xmit_drops;
	__u64 redirect_err;
	__u64 err_bad_port; /* MRC_TX_ST_BAD_PORT (key 0) */
	__u64 err_no_dev;   /* MRC_TX_ST_NO_DEV */
	__u64 err_bad_len;  /* MRC_TX_ST_BAD_LEN */
	__u64 err_oversize; /* MRC_TX_ST_OVERSIZE */
	__u64 err_bad_slot; /* MRC_TX_ST_BAD_SLOT */
	__u64 err_resize;   /* MRC_TX_ST_RESIZE */
	__u64 err_store;    /* MRC_TX_ST_STORE */
	__u64 err_empty;    /* runs without a descriptor (key 0) */
	__u64 resv[3];
};
MRC_ASSERT_SIZE(struct mrc_tx_stats, 128);

#endif /* MRC_UAPI_TX_H */
