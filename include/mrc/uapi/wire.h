/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * MRC 1.0 wire format, shared by the BPF programs (bpf/) and the C++ code
 * (user/). Plain C, fixed-width kernel types, every multi-byte field in
 * network byte order. Documentation/wire-format.md draws every header and
 * lists the choices we made where the public record is silent.
 *
 * Sub-byte fields are packed into whole bytes/words and accessed through the
 * MRC_* shift/mask constants below, never through C bit-fields (their layout
 * is implementation-defined).
 */
#ifndef MRC_UAPI_WIRE_H
#define MRC_UAPI_WIRE_H

#include <linux/types.h>

#ifdef __cplusplus
#define MRC_ASSERT_SIZE(type, size)                                                                \
	static_assert(sizeof(type) == (size), #type " has the wrong size")
#else
#define MRC_ASSERT_SIZE(type, size)                                                                \
	_Static_assert(sizeof(type) == (size), #type " has the wrong size")
#endif

#define MRC_PACKED __attribute__((packed))

/* Default UDP destination port (RoCEv2); configurable at run time. */
#define MRC_UDP_PORT_DEFAULT 4791
/* Reserved QPN for connectionless endpoint operations (EV probe, port status). */
#define MRC_QPN_ENDPOINT 0x2
#define MRC_QPN_MASK 0xffffffu
#define MRC_PSN_MASK 0xffffffu
#define MRC_PSN_BITS 24
/* BTH transport header version we emit and accept. */
#define MRC_BTH_TVER 0
#define MRC_PKEY_DEFAULT 0xffff

/* ------------------------------------------------------------------ */
/* Opcodes (MRC range; MRC and RC are not interoperable on the wire).  */
/* ------------------------------------------------------------------ */
enum mrc_opcode {
	MRC_OP_WRITE_FIRST = 0xc6,
	MRC_OP_WRITE_MIDDLE = 0xc7,
	MRC_OP_WRITE_LAST = 0xc8,
	MRC_OP_WRITE_LAST_IMM = 0xc9,
	MRC_OP_WRITE_ONLY = 0xca,
	MRC_OP_WRITE_ONLY_IMM = 0xcb,
	MRC_OP_ACK = 0xd1,
	MRC_OP_EP_REQUEST = 0xd8,
	MRC_OP_EP_RESPONSE = 0xd9,
	MRC_OP_SACK = 0xdc,
	MRC_OP_NACK = 0xdd,
	MRC_OP_PROBE = 0xde,
};

/* ------------------------------------------------------------------ */
/* BTH: base transport header, 12 bytes, IBTA layout.                  */
/* ------------------------------------------------------------------ */
struct mrc_bth {
	__u8 opcode;
	__u8 se_m_pad_tver; /* SE(7) M(6) PadCnt(5:4) TVer(3:0) */
	__be16 pkey;
	__be32 resv_dqpn; /* resv8a(31:24) DestQP(23:0) */
	__be32 flags_psn; /* A(31) resv(30) RTX(29) TS(28) resv(27:24) PSN(23:0) */
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_bth, 12);

#define MRC_BTH_SE 0x80
#define MRC_BTH_MIG 0x40
#define MRC_BTH_PAD_SHIFT 4
#define MRC_BTH_PAD_MASK 0x30
#define MRC_BTH_TVER_MASK 0x0f
/* bits of the host-order flags_psn word */
#define MRC_BTH_F_ACKREQ 0x80000000u
#define MRC_BTH_F_RESV6 0x40000000u
#define MRC_BTH_F_RTX 0x20000000u
#define MRC_BTH_F_TS 0x10000000u
#define MRC_BTH_F_RESV_LOW 0x0f000000u

/* METH: MRC extended transport header, in every request packet. */
struct mrc_meth {
	__be16 rqmsn; /* WriteIMM message number (repeated in all its packets) */
	__be16 msn;   /* message sequence number of the requester */
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_meth, 4);

/* TSETH: optional transmit timestamp (present iff BTH TS flag). */
struct mrc_tseth {
	__be16 tx_ts;	  /* sender clock, MRC_TS_SHIFT ns units, wraps */
	__be16 tsr_ftype; /* tsr(15) resv(14:4) ftype(3:0) */
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_tseth, 4);
#define MRC_TSETH_TSR 0x8000
#define MRC_TSETH_FTYPE_MASK 0x000f
/* 16-bit timestamps count units of 2^MRC_TS_SHIFT ns (256 ns, wrap 16.8 ms). */
#define MRC_TS_SHIFT 8

/* RETH: remote address, in every data packet (FIRST/MIDDLE/LAST/ONLY). */
struct mrc_reth {
	__be64 va; /* address of this packet's first payload byte */
	__be32 rkey;
	__be32 dma_len; /* length of the whole message */
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_reth, 16);

struct mrc_immdt {
	__be32 imm;
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_immdt, 4);

/* AETH: RC transport ACK (opcode ACKNOWLEDGE). */
struct mrc_aeth {
	__be32 syndrome_msn; /* syndrome(31:24) MSN(23:0) */
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_aeth, 4);

/* Common first 16 bits of SETH/NETH/PETH: type(15:12) next(11:7) ... */
#define MRC_XH_TYPE_SHIFT 12
#define MRC_XH_TYPE_MASK 0xf000
#define MRC_XH_NEXT_SHIFT 7
#define MRC_XH_NEXT_MASK 0x0f80
enum mrc_xh_type {
	MRC_XH_TYPE_SACK = 1,
	MRC_XH_TYPE_NACK = 2,
	MRC_XH_TYPE_PROBE = 3,
};
/* "next" names the header following the reliability header. */
enum mrc_xh_next {
	MRC_XH_NEXT_NONE = 0,
	MRC_XH_NEXT_CC_STATE = 1,
	/* CC_STATE followed by the responder's service time (struct
	 * mrc_cc_svc): sent unless the QP has SVC_TIME_DEST_UNSUPPORTED. */
	MRC_XH_NEXT_CC_STATE_SVC = 2,
};

/* ------------------------------------------------------------------ */
/* SACK: SETH (28 bytes) + CC_STATE (8 bytes).                         */
/* ------------------------------------------------------------------ */
struct mrc_seth {
	__be16 hdr;	       /* type(15:12) next(11:7) M(6:5) resv(4:2) PR(1) resv(0) */
	__be16 ack_psn_offset; /* signed: triggering PSN = cack_psn + offset */
	__be32 entropy;	       /* EV of the triggering packet, reflected */
	__be16 spdcid;	       /* low 16 bits of the sender's (responder's) QPN */
	__be16 dpdcid;	       /* low 16 bits of the destination (requester) QPN */
	__be32 pdown_cack;     /* port_down_mask(31:24) cack_psn(23:0) */
	__u8 cc_type_flags;    /* cc_type(7:4) cc_flags(3:0) */
	__u8 mpr;	       /* current MPR (x128 PSNs) with dynamic MPR, else 0 */
	__be16 sack_offset;    /* signed: bitmap base = cack_psn + offset */
	__be64 sack_bitmap;    /* bit 63 = base PSN, bit 62 = base + 1, ... */
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_seth, 28);
#define MRC_SETH_M_SHIFT 5
#define MRC_SETH_M_MASK 0x0060
#define MRC_SETH_PR 0x0002
#define MRC_SETH_RESV_MASK 0x001d

/* Multipath verdict (SETH M) on the reflected EV. */
enum mrc_mp_verdict {
	MRC_MP_NONE = 0,
	MRC_MP_SKIP_ONCE = 1,
	MRC_MP_ALWAYS_SKIP = 2,
};

enum mrc_cc_type {
	MRC_CC_TYPE_NONE = 0,
	MRC_CC_TYPE_NSCC = 1,
};
/* cc_flags */
#define MRC_CC_F_ECN_CE 0x1 /* triggering packet arrived ECN-CE */

struct mrc_cc_state {
	__be16 tx_ts_echo; /* TSETH tx_ts of the triggering packet, 0 if none */
	__be16 ooo_count;  /* resv(15) out-of-order count(14:0) */
	__be32 pen_rcvd;   /* restore_cwnd(31) rcv_cwnd_pen(30:24) rcvd_bytes(23:0) */
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_cc_state, 8);
#define MRC_CC_OOO_MASK 0x7fff
#define MRC_CC_RESTORE_CWND 0x80000000u
#define MRC_CC_PEN_SHIFT 24
#define MRC_CC_PEN_MASK 0x7f000000u
#define MRC_CC_RCVD_MASK 0x00ffffffu
/* rcvd_bytes counts units of 2^MRC_RCVD_SHIFT bytes (256 B), modulo 2^24. */
#define MRC_RCVD_SHIFT 8

/* Service time, after CC_STATE when SETH next = CC_STATE_SVC: nanoseconds
 * from the arrival of the triggering packet at the responder to the SACK's
 * build (saturating). The requester subtracts it, and its own time from
 * the SACK's arrival to its processing, from the RTT it measures:
 * what remains is the fabric's part, which quick adapt acts on. */
struct mrc_cc_svc {
	__be32 svc_time_ns;
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_cc_svc, 4);

/* ------------------------------------------------------------------ */
/* NACK: NETH, 20 bytes.                                               */
/* ------------------------------------------------------------------ */
struct mrc_neth {
	__be16 hdr; /* type(15:12) next(11:7) resv(6:0) */
	__u8 reason;
	__u8 vendor_info;
	__be32 entropy; /* EV of the NACKed packet, reflected */
	__be16 spdcid;
	__be16 dpdcid;
	__be32 resv_psn; /* resv(31:24) nack_psn(23:0) */
	__u8 cc_type_flags;
	__u8 resv;
	__be16 tx_ts_echo;
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_neth, 20);

enum mrc_nack_reason {
	MRC_NACK_TRIMMED = 0x01,
	MRC_NACK_TRIMMED_LASTHOP = 0x02,
	MRC_NACK_NO_BITMAP = 0x06,
	MRC_NACK_NO_PKT_BUFFER = 0x07,
	MRC_NACK_NO_RESOURCE = 0x0a,
	MRC_NACK_PSN_OOR_WINDOW = 0x0b,
	MRC_NACK_UNEXP_EVENT = 0x19,
};

/* ------------------------------------------------------------------ */
/* Reliability probe request: PETH, 16 bytes (consumes no PSN).        */
/* ------------------------------------------------------------------ */
struct mrc_peth {
	__be16 hdr; /* type(15:12) next(11:7) resv(6:0) */
	__u8 resv0;
	__u8 vendor_info;
	__be16 probe_id;
	__be16 resv1;
	__be16 spdcid;
	__be16 dpdcid;
	__be16 tx_ts;
	__be16 tsr_ftype; /* tsr(15) resv(14:4) ftype(3:0) */
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_peth, 16);

/* ------------------------------------------------------------------ */
/* Endpoint operations (QPN 0x2): ERTH request 16 B, EETH response 36 B */
/* ------------------------------------------------------------------ */
enum mrc_ep_op {
	MRC_EP_OP_PORT_STATUS_UPDATE = 0,
	MRC_EP_OP_EV_PROBE = 1,
};
#define MRC_EP_OP_MASK 0xc0
#define MRC_EP_OP_SHIFT 6

struct mrc_erth {
	__u8 op; /* op(7:6) resv(5:0) */
	__u8 vendor_info;
	__be16 req_id;
	__be32 port_status; /* bit N-1 = local port N up (PORT_STATUS_UPDATE) */
	__be16 tx_ts;
	__be16 resv;
	__be32 entropy; /* EV the request was sent on (full 32 bits) */
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_erth, 16);

struct mrc_eeth {
	__u8 op; /* op(7:6) resv(5:0) */
	__u8 vendor_info;
	__be16 req_id;	    /* echoed */
	__be32 port_status; /* responder's port-up mask */
	__be16 tx_ts_echo;
	__be16 resv0;
	__be32 entropy; /* echoed from ERTH */
	__u8 rx_port;	/* responder port (1-based) the request arrived on */
	__u8 flags;	/* MRC_EETH_F_* */
	__be16 resv1;
	__be32 svc_time_ns; /* responder service time, valid with SVC_TIME */
	__be64 rsp_ts_ns;   /* responder clock at reply (informational) */
	__be32 resv2;
} MRC_PACKED;
MRC_ASSERT_SIZE(struct mrc_eeth, 36);
#define MRC_EETH_F_SVC_TIME 0x01

/* ICRC trailer: CRC-32 (IEEE 802.3, as the Ethernet FCS) over the masked
 * invariant fields, stored least-significant byte first like RoCEv2. */
#define MRC_ICRC_LEN 4

/* Header stack sizes after the BTH, for each opcode. */
#define MRC_DATA_HDR_LEN (sizeof(struct mrc_meth) + sizeof(struct mrc_reth))
#define MRC_SACK_HDR_LEN (sizeof(struct mrc_seth) + sizeof(struct mrc_cc_state))
#define MRC_SACK_SVC_HDR_LEN (MRC_SACK_HDR_LEN + sizeof(struct mrc_cc_svc))

/* Default DSCP classes (configuration; see Documentation/wire-format.md). */
#define MRC_DSCP_CONTROL_DEFAULT 46
#define MRC_DSCP_TRIMMABLE_DEFAULT 10
#define MRC_DSCP_TRIMMABLE_RETX_DEFAULT 12
#define MRC_DSCP_NO_TRIM_DEFAULT 8
#define MRC_DSCP_TRIMMED_DEFAULT 47
#define MRC_DSCP_TRIMMED_LASTHOP_DEFAULT 45

/* ECN codepoints (low two bits of the IPv4 TOS / IPv6 traffic class). */
#define MRC_ECN_NOT_ECT 0
#define MRC_ECN_ECT1 1
#define MRC_ECN_ECT0 2
#define MRC_ECN_CE 3

#endif /* MRC_UAPI_WIRE_H */
