/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * libmrc C API: the OCP MRC 1.0 application API (mrc.h) over mrc's software
 * data path, usable from C11 and C++.
 *
 * The objects, names, attribute masks and return conventions follow OCP
 * mrc.h; the verbs objects mrc.h borrows from libibverbs (device context,
 * PD, MR, work requests, work completions, QP attributes) are defined here
 * with libibverbs' numbering, because libmrc does not use libibverbs:
 *
 *   ibv_open_device(dev)        -> mrc_open_device(plane interface names)
 *   ibv_alloc_pd / ibv_reg_mr   -> mrc_alloc_pd / mrc_reg_mr
 *   struct ibv_qp_attr + IBV_QP_* -> struct mrc_ibv_qp_attr + MRC_IBV_QP_*
 *   struct ibv_send_wr / ibv_recv_wr / ibv_wc / ibv_sge
 *                               -> struct mrc_send_wr / mrc_recv_wr / mrc_wc / mrc_sge
 *
 * Return values: 0 on success and -1 with errno set on failure; functions
 * returning a pointer return NULL with errno set; mrc_poll_cq returns the
 * number of completions or -1. A call that fails on a bad argument changes
 * nothing. mrc_last_error() gives a sentence about the last failure of the
 * calling thread.
 *
 * Threads: every call may be made from any thread. mrc_post_send,
 * mrc_post_recv and mrc_poll_cq take no lock; control calls (create, modify,
 * destroy, reg_mr) are serialized with the device's engine thread.
 *
 * Documentation/api.md has the full table of calls next to their mrc.h and
 * verbs names, the QP state machine and the errno of every failure.
 */
#ifndef MRC_MRC_H
#define MRC_MRC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libmrc.so exports exactly the declarations of this header: it is built with
 * -fvisibility=hidden and a version script (symbol version MRC_1). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ------------------------------------------------------------------------
 * Versions (MAJOR << 24 | MINOR << 16 | SUBMINOR, as OCP mrc_api_ver.h)
 */
#define MRC_API_VER(major, minor, sub)                                                             \
	((uint32_t)(major) << 24 | (uint32_t)(minor) << 16 | (uint32_t)(sub))
#define MRC_API_VER_LATEST MRC_API_VER(0xFF, 0xFF, 0xFFFF)
#define MRC_API_CURRENT_VERSION MRC_API_VER(1, 0, 1)
#define MRC_API_LAST_SUPPORTED_VERSION MRC_API_VER(1, 0, 0)
#define MRC_VENDOR_API_CURRENT_VERSION MRC_API_VER(0, 1, 0)
#define MRC_VENDOR_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 1, 0)

#define MRC_MAX_VENDOR_CFG_SIZE 128
#define MRC_MAX_PORTS 16 /* plane interfaces per device */
#define MRC_MAX_SGE 16	 /* scatter/gather entries per work request */

/* Bit 31 of the attribute masks (an int enumerator, as mask types are int). */
#define MRC_MASK_BIT31 (-2147483647 - 1)

enum mrc_protocol_version {
	MRC_PROTOCOL_VERSION_0 = 0, /* provider default */
	MRC_PROTOCOL_VERSION_1 = 1 << 0,
};

struct mrc_device;
struct mrc_context;
struct mrc_pd;
struct mrc_qp_hint;
struct mrc_qp;
struct mrc_cq;
struct mrc_comp_channel;

/* Message of the last failed call made by this thread ("" if none). */
const char *mrc_last_error(void);

/* ------------------------------------------------------------------------
 * Versions and devices
 */

/* Any pointer may be NULL. */
void mrc_query_version(uint32_t *current_version, uint32_t *last_supported_version,
		       uint32_t *vendor_version, uint32_t *last_supported_vendor_version);

/* mrc_device_opts.flags */
enum mrc_device_flags {
	/* Load and attach libmrc's own XDP program even when mrcd's pinned
	 * maps are present (default: use mrcd's when found). */
	MRC_DEVICE_NO_MRCD = 1 << 0,
	/* SO_PREFER_BUSY_POLL sockets and a spinning engine thread. */
	MRC_DEVICE_BUSY_POLL = 1 << 1,
	/* Attach XDP in generic (SKB) mode. */
	MRC_DEVICE_XDP_GENERIC = 1 << 2,
	/* Pin the engine thread to engine_cpu. */
	MRC_DEVICE_PIN_CPU = 1 << 3,
	/* Application progress: mrc_poll_cq with nothing to return and
	 * mrc_progress run the engine in the calling thread; the engine thread
	 * stands in only after 1 ms without such a call. Lowest latency for
	 * applications that poll (Documentation/api.md, "Progress"). */
	MRC_DEVICE_APP_PROGRESS = 1 << 4,
	/* Exclusive mode: this process owns the planes even when the host
	 * service mrc-serviced runs (then the open fails with EBUSY naming
	 * it). Without the flag the device uses the service when its socket
	 * accepts the connection (MRC_MODE=auto|service|exclusive and
	 * MRC_SERVICE_SOCKET refine this; Documentation/service.md). */
	MRC_DEVICE_EXCLUSIVE = 1 << 5,
	/* TX backend of an exclusive device (Documentation/xdp-tx.md): send
	 * the engine's larger batches as XDP live frames (BPF_PROG_TEST_RUN,
	 * Linux 5.18+; one kernel copy less than AF_XDP copy mode, path MTU
	 * at most ~3.2 KB, so frame_chunks is then ignored). TX_LIVE fails the
	 * open where live frames are unavailable; TX_AUTO falls back to
	 * AF_XDP. Neither: AF_XDP TX. Both: EINVAL. A device through the host
	 * service sends as the service is configured. */
	MRC_DEVICE_TX_LIVE = 1 << 6,
	MRC_DEVICE_TX_AUTO = 1 << 7,
	/* NSCC's quick adapt judges the fabric's part of each RTT: the RTT
	 * less the peer's service time (carried in its SACKs), the SACK's wait
	 * here and the packet's time in this host's transmit. For bursty,
	 * CPU-bound traffic (request/response, MPI); off, the whole RTT
	 * (Documentation/design.md, "Quick adapt can measure the fabric").
	 * MRC_ENGINE=cc_qa_fabric=0 overrides it. An exclusive device only. */
	MRC_DEVICE_QA_FABRIC = 1 << 8,
};

/* What mrc_device_mode reports. */
enum mrc_device_mode_kind {
	MRC_DEVICE_MODE_EXCLUSIVE = 1, /* the device runs in this process */
	MRC_DEVICE_MODE_SERVICE = 2,   /* through mrc-serviced */
};

/* Options of mrc_open_device; a zeroed struct (or NULL) means defaults. */
struct mrc_device_opts {
	uint32_t flags;	       /* enum mrc_device_flags */
	uint16_t udp_port;     /* 0: 4791 */
	uint32_t queues;       /* rx queues per interface with a socket; 0: all */
	uint32_t frame_size;   /* UMEM frame size: 0 (4096), 2048 or 4096 */
	uint32_t umem_frames;  /* 0: 16384 */
	int engine_cpu;	       /* with MRC_DEVICE_PIN_CPU */
	const char *pin_dir;   /* mrcd's bpffs directory; NULL: /sys/fs/bpf/mrc */
	uint32_t frame_chunks; /* UMEM frames one packet may fill: 0 or 1
				* single-buffer; 2..17 multi-buffer AF_XDP
				* (Linux 6.6+), path MTU up to ~frame_chunks x
				* 3.8 KB (Documentation/afxdp.md) */
};

/*
 * Opens a device on plane interfaces (port 1 is ifnames[0]) and starts its
 * engine thread: our replacement for ibv_open_device. Needs CAP_NET_ADMIN,
 * CAP_BPF (root) and an IP address on every interface. Errors: EINVAL (bad
 * list or options), ENODEV (no such interface), EADDRNOTAVAIL (an interface
 * without an IP address), EPERM, or what loading XDP / AF_XDP reported.
 */
struct mrc_device *mrc_open_device(const char *const *ifnames, int num_ifnames,
				   const struct mrc_device_opts *opts);
/* EBUSY while contexts or protection domains of the device exist. */
int mrc_close_device(struct mrc_device *device);

enum mrc_device_cap {
	MRC_DEVICE_CAP_TRIM_NACK = 1 << 0,
	MRC_DEVICE_CAP_DYNAMIC_MPR = 1 << 1,
	MRC_DEVICE_CAP_SVC_TIME = 1 << 2,
};

struct mrc_device_attr {
	uint32_t mrc_protocol_version; /* bitmap of enum mrc_protocol_version */
	struct {
		uint16_t max_wimm;	/* as requester */
		uint16_t max_wimm_dest; /* as responder */
	} wimm_attr;
	struct {
		uint8_t max_mpr;	/* units of 128 PSNs */
		uint8_t mpr_resolution; /* units of 128 PSNs */
	} mpr_attr;
	struct {
		uint32_t max_qp_hint;
	} qp_attr;
	uint32_t cap; /* enum mrc_device_cap */
};

/* *supported is set to 1: every device libmrc opens speaks MRC. */
int mrc_query_device(struct mrc_device *device, struct mrc_device_attr *attr, int *supported);
/* The same for an application using API 1.0.1; mcontext must be a context
 * of this device. */
int mrc_query_device_ex(struct mrc_device *device, struct mrc_context *mcontext,
			struct mrc_device_attr *attr, int *supported);

/* A GID: 16 bytes in network order; an IPv4 address is IPv4-mapped
 * (::ffff:a.b.c.d) as in RoCEv2. All zero means "no address". */
union mrc_gid {
	uint8_t raw[16];
	struct {
		uint64_t subnet_prefix;
		uint64_t interface_id;
	} global;
};

enum mrc_port_state {
	MRC_PORT_DOWN = 1,   /* IBV_PORT_DOWN */
	MRC_PORT_ACTIVE = 4, /* IBV_PORT_ACTIVE */
};

struct mrc_port_attr {
	enum mrc_port_state state; /* carrier and admin state */
	uint32_t mtu;		   /* interface MTU (IP bytes) */
	int gid_tbl_len;	   /* addresses usable as GIDs */
	int ifindex;
	char ifname[16];
	uint8_t mac[6];
	uint32_t num_queues; /* AF_XDP sockets on the interface */
	char xdp_mode[16];   /* "native", "generic", ... */
	char xsk_mode[16];   /* "copy" or "zero-copy" */
};

/* Number of ports (plane interfaces) of the device, or -1. */
int mrc_num_ports(struct mrc_device *device);
/* port_num: 1..mrc_num_ports(). EINVAL for another port. */
int mrc_query_port(struct mrc_device *device, uint8_t port_num, struct mrc_port_attr *attr);
/* The port's addresses: IPv4 first, then IPv6 (link-local excluded).
 * ENOENT when index >= gid_tbl_len. */
int mrc_query_gid(struct mrc_device *device, uint8_t port_num, int index, union mrc_gid *gid);
/* The largest path MTU (payload bytes, a multiple of 64) a QP of this device
 * can use toward peers of IP version ip_version (4 or 6): the smallest plane
 * interface MTU less the IP, UDP and MRC headers (72 bytes IPv4, 92 IPv6),
 * and at most what the device sends and receives in one packet (3392 for
 * single-buffer AF_XDP, whatever the planes' MTU; more with
 * mrc_device_opts.frame_chunks). What to put in mrc_endpoint.mtu and to take
 * the smaller of with the peer's. EINVAL for another ip_version, EMSGSIZE
 * when a plane's MTU leaves less than 256. Symbol version MRC_2. */
int mrc_query_path_mtu(struct mrc_device *device, int ip_version, uint32_t *path_mtu);

/* ------------------------------------------------------------------------
 * Contexts
 */

/* Zero fields: the latest version. Otherwise within
 * [MRC_API_LAST_SUPPORTED_VERSION, MRC_API_CURRENT_VERSION] (ENOTSUP). */
struct mrc_context_attr {
	uint32_t mrc_api_version_used;
	uint32_t mrc_vendor_api_version_used;
};

/* context_attr may be NULL. A device may have several contexts. */
struct mrc_context *mrc_create_context(struct mrc_device *device,
				       struct mrc_context_attr *context_attr);
/* Destroys what the context still holds (QPs, CQs, QP hints, completion
 * channels), then the context. */
int mrc_destroy_context(struct mrc_context *mrc_ctx);

/* ------------------------------------------------------------------------
 * Protection domains and memory regions (on the device, as in verbs)
 */

enum mrc_access_flags {
	MRC_ACCESS_LOCAL_WRITE = 1 << 0,
	MRC_ACCESS_REMOTE_WRITE = 1 << 1,
	MRC_ACCESS_REMOTE_READ = 1 << 2, /* accepted; MRC has no READ */
};

struct mrc_mr {
	struct mrc_device *device;
	struct mrc_pd *pd;
	void *addr;
	size_t length;
	uint32_t lkey;
	uint32_t rkey;
};

struct mrc_pd *mrc_alloc_pd(struct mrc_device *device);
/* EBUSY while memory regions or QPs use it. */
int mrc_dealloc_pd(struct mrc_pd *pd);
/* REMOTE_WRITE needs LOCAL_WRITE (EINVAL), as in verbs. */
struct mrc_mr *mrc_reg_mr(struct mrc_pd *pd, void *addr, size_t length, int access);
int mrc_dereg_mr(struct mrc_mr *mr);
/* Memory that the host service places into with no copy and no remapping of
 * the application's pages (Documentation/service.md, "Memory"): length bytes
 * rounded up to whole pages, zeroed, read-write; register it with mrc_reg_mr
 * in either mode. Needs no device. NULL with errno EINVAL (zero length, more
 * than 1 TiB) or the mapping's error. */
void *mrc_alloc_buf(size_t length);
/* Frees what mrc_alloc_buf returned, with the same length. EINVAL for any
 * other address or length (nothing is unmapped); EBUSY while a memory region
 * of this process covers part of it: deregister it first. */
int mrc_free_buf(void *buf, size_t length);

/* ------------------------------------------------------------------------
 * Completion channels and completion queues
 */

int mrc_create_comp_channel(struct mrc_context *mrc_ctx, struct mrc_comp_channel **channel);
/* The fd is readable when a CQ event is pending (poll/epoll); set
 * O_NONBLOCK on it to make mrc_get_cq_event return EAGAIN instead of
 * blocking. */
int mrc_get_comp_channel_fd(struct mrc_comp_channel *channel, int *fd);
/* EBUSY while CQs use it. */
int mrc_destroy_comp_channel(struct mrc_comp_channel *channel);

/* cqe: 1..4194304; comp_vector: 0 (one engine thread per device). */
struct mrc_cq *mrc_create_cq(struct mrc_context *mrc_ctx, int cqe, void *cq_context,
			     struct mrc_comp_channel *channel, int comp_vector);
/* EBUSY while QPs use it. Waits until every event returned by
 * mrc_get_cq_event for it has been acknowledged. */
int mrc_destroy_cq(struct mrc_cq *cq);

enum mrc_wc_status {
	MRC_WC_SUCCESS = 0,
	MRC_WC_LOC_LEN_ERR = 1,
	MRC_WC_LOC_QP_OP_ERR = 2,
	MRC_WC_LOC_PROT_ERR = 4,
	MRC_WC_WR_FLUSH_ERR = 5,
	MRC_WC_LOC_ACCESS_ERR = 8,
	MRC_WC_REM_INV_REQ_ERR = 9,
	MRC_WC_REM_ACCESS_ERR = 10,
	MRC_WC_REM_OP_ERR = 11,
	MRC_WC_RETRY_EXC_ERR = 12,
	MRC_WC_FATAL_ERR = 19,
	MRC_WC_GENERAL_ERR = 21,
};
const char *mrc_wc_status_str(enum mrc_wc_status status);

enum mrc_wc_opcode {
	MRC_WC_RDMA_WRITE = 1,		 /* a WRITE or WRITE_WITH_IMM we sent */
	MRC_WC_RECV_RDMA_WITH_IMM = 129, /* a WRITE_WITH_IMM we received */
};

enum mrc_wc_flags {
	MRC_WC_WITH_IMM = 1 << 1,
};

struct mrc_wc {
	uint64_t wr_id;
	enum mrc_wc_status status;
	enum mrc_wc_opcode opcode;
	uint32_t vendor_err;
	uint32_t byte_len; /* message length (sends and WRITE_WITH_IMM receives) */
	uint32_t imm_data; /* network byte order, as in verbs */
	uint32_t qp_num;
	unsigned int wc_flags; /* enum mrc_wc_flags */
};

/* Returns 0..num_entries completions, or -1 (EINVAL; EOVERFLOW once the CQ
 * has overrun). */
int mrc_poll_cq(struct mrc_cq *cq, int num_entries, struct mrc_wc *wc);
/* MRC_DEVICE_APP_PROGRESS: one pass of the device's engine in the calling
 * thread; when it found nothing to do and timeout_ms > 0, sleeps on the
 * plane sockets and the engine's timers (at most timeout_ms) and runs
 * another. Returns 1 if a pass did something, 0 if not, -1 with errno
 * EINVAL without MRC_DEVICE_APP_PROGRESS or with a negative timeout. */
int mrc_progress(struct mrc_device *device, int timeout_ms);

/* The mode the device got (enum mrc_device_mode_kind) and, when why is not
 * NULL, why, as a NUL-terminated sentence cut to len bytes. -1 and EINVAL
 * for a NULL device. An extension (no OCP mrc.h counterpart). */
int mrc_device_mode(struct mrc_device *device, char *why, size_t len);
/* What mrc_device_tx reports. */
enum mrc_device_tx_kind {
	MRC_DEVICE_TX_KIND_XSK = 1,  /* AF_XDP TX rings */
	MRC_DEVICE_TX_KIND_LIVE = 2, /* XDP live frames (MRC_DEVICE_TX_LIVE) */
};
/* The TX backend the device's engine sends through (enum
 * mrc_device_tx_kind) and, when note is not NULL, why MRC_DEVICE_TX_AUTO
 * fell back to AF_XDP ("" otherwise), cut to len bytes. -1 and EINVAL for
 * a NULL device. An extension (since MRC_3). */
int mrc_device_tx(struct mrc_device *device, char *note, size_t len);
/* Arms the CQ's channel for its next completion. solicited_only must be 0
 * (EOPNOTSUPP): MRC has no solicited events. EINVAL without a channel. */
int mrc_req_notify_cq(struct mrc_cq *cq, int solicited_only);
int mrc_get_cq_event(struct mrc_comp_channel *channel, struct mrc_cq **cq, void **cq_context);
void mrc_ack_cq_events(struct mrc_cq *cq, unsigned int nevents);

/* ------------------------------------------------------------------------
 * QP hints
 */

struct mrc_qp_hint_attr {
	int num_qps_per_peer;
	int num_send_peers;
	int num_remote_recv_peers;
	uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE]; /* none defined: all zero */
};

enum mrc_qp_hint_attr_mask {
	MRC_QP_HINT_NUM_QPS_PER_PEER = 1 << 0,
	MRC_QP_HINT_NUM_SEND_PEERS = 1 << 1,
	MRC_QP_HINT_NUM_REMOTE_RECV_PEERS = 1 << 2,
	MRC_QP_HINT_VENDOR_CFG = MRC_MASK_BIT31,
};

struct mrc_qp_hint_init_attr {
	struct mrc_qp_hint_attr attr;
};

/* ENOMEM beyond mrc_device_attr.qp_attr.max_qp_hint hints per device. */
struct mrc_qp_hint *mrc_create_qp_hint(struct mrc_context *mrc_ctx,
				       struct mrc_qp_hint_init_attr *init_attr);
/* EBUSY while a QP uses it. */
int mrc_destroy_qp_hint(struct mrc_qp_hint *qp_hint);
int mrc_query_qp_hint(struct mrc_qp_hint *qp_hint, struct mrc_qp_hint_attr *qp_hint_attr,
		      int qp_hint_attr_mask);
int mrc_modify_qp_hint(struct mrc_qp_hint *qp_hint, struct mrc_qp_hint_attr *qp_hint_attr,
		       int qp_hint_attr_mask);

/* ------------------------------------------------------------------------
 * QPs
 */

/* The verbs limits of a QP (struct ibv_qp_cap). */
struct mrc_ibv_qp_cap {
	uint32_t max_send_wr;	  /* 1..65536 */
	uint32_t max_recv_wr;	  /* 0..65536 */
	uint32_t max_send_sge;	  /* 1..MRC_MAX_SGE */
	uint32_t max_recv_sge;	  /* 0..MRC_MAX_SGE (WRITE_WITH_IMM places nothing) */
	uint32_t max_inline_data; /* 0: no inline data */
};

/* mrc_qp_init_attr.send_ops_flags (IBV_QP_EX_WITH_*); 0 means both. */
enum mrc_send_ops_flags {
	MRC_QP_EX_WITH_RDMA_WRITE = 1 << 0,
	MRC_QP_EX_WITH_RDMA_WRITE_WITH_IMM = 1 << 1,
};

struct mrc_qp_init_attr {
	void *qp_context;
	struct mrc_cq *send_cq;
	struct mrc_cq *recv_cq;
	struct mrc_ibv_qp_cap cap;
	int sq_sig_all;
	struct mrc_pd *pd;
	uint64_t send_ops_flags;
	enum mrc_protocol_version protocol_version;
};

struct mrc_qp *mrc_create_qp(struct mrc_context *mrc_ctx, struct mrc_qp_init_attr *mrc_qp_attr);
/* Waits until every async event returned for the QP has been acknowledged. */
int mrc_destroy_qp(struct mrc_qp *qp);
int mrc_get_qpn(struct mrc_qp *qp, uint32_t *qpn);

enum mrc_qp_state {
	MRC_QPS_RESET = 0,
	MRC_QPS_INIT = 1,
	MRC_QPS_RTR = 2,
	MRC_QPS_RTS = 3,
	MRC_QPS_ERR = 6,
};

/* The address vector: one destination GID per plane port (dgid[port - 1];
 * all zero: not on that plane). The source address on each plane is that
 * port's address of the same IP version. */
struct mrc_ah_attr {
	union mrc_gid dgid[MRC_MAX_PORTS];
	/* Extension: the peer's max_wimm_dest learned out of band (0: unknown).
	 * The requester keeps at most min(max_wimm, this) WRITE_WITH_IMMs in
	 * flight. */
	uint16_t peer_max_wimm_dest;
};

/* The verbs part of the QP attributes (struct ibv_qp_attr, the fields MRC
 * uses). path_mtu is in bytes (256..9000, a multiple of 64), not enum
 * ibv_mtu. */
struct mrc_ibv_qp_attr {
	enum mrc_qp_state qp_state;
	enum mrc_qp_state cur_qp_state;
	uint32_t path_mtu;
	uint32_t qp_access_flags; /* enum mrc_access_flags */
	uint16_t pkey_index;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	struct mrc_ibv_qp_cap cap;
	struct mrc_ah_attr ah_attr;
};

/* enum ibv_qp_attr_mask values. PORT, TIMEOUT, RETRY_CNT, RNR_RETRY,
 * MIN_RNR_TIMER, MAX_QP_RD_ATOMIC, MAX_DEST_RD_ATOMIC, ALT_PATH and
 * PATH_MIG_STATE are defined so that they can be refused (EINVAL), as
 * OCP mrc.h specifies. */
enum mrc_ibv_qp_attr_mask {
	MRC_IBV_QP_STATE = 1 << 0,
	MRC_IBV_QP_CUR_STATE = 1 << 1,
	MRC_IBV_QP_ACCESS_FLAGS = 1 << 3,
	MRC_IBV_QP_PKEY_INDEX = 1 << 4,
	MRC_IBV_QP_PORT = 1 << 5,
	MRC_IBV_QP_AV = 1 << 7,
	MRC_IBV_QP_PATH_MTU = 1 << 8,
	MRC_IBV_QP_TIMEOUT = 1 << 9,
	MRC_IBV_QP_RETRY_CNT = 1 << 10,
	MRC_IBV_QP_RNR_RETRY = 1 << 11,
	MRC_IBV_QP_RQ_PSN = 1 << 12,
	MRC_IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
	MRC_IBV_QP_ALT_PATH = 1 << 14,
	MRC_IBV_QP_MIN_RNR_TIMER = 1 << 15,
	MRC_IBV_QP_SQ_PSN = 1 << 16,
	MRC_IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
	MRC_IBV_QP_PATH_MIG_STATE = 1 << 18,
	MRC_IBV_QP_CAP = 1 << 19,
	MRC_IBV_QP_DEST_QPN = 1 << 20,
};

enum mrc_qp_attr_mask {
	MRC_QP_MAX_WIMM = 1 << 0,
	MRC_QP_MAX_WIMM_DEST = 1 << 1,
	MRC_QP_MPR = 1 << 2,
	MRC_QP_MPR_DEST = 1 << 3,
	MRC_QP_TIMEOUT = 1 << 4,
	MRC_QP_EV_PROFILE_ID = 1 << 5,
	MRC_QP_CC_PROFILE_ID = 1 << 6,
	MRC_QP_HINT = 1 << 7,
	MRC_QP_RETRY_CNT = 1 << 8,
	MRC_QP_CAP = 1 << 9,
	MRC_QP_VENDOR_CFG = MRC_MASK_BIT31, /* none defined: EINVAL */
};

enum mrc_qp_cap {
	MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED = 1 << 0,
	MRC_QP_CAP_DYNAMIC_MPR = 1 << 1,
	MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED = 1 << 2,
};

struct mrc_qp_attr {
	struct {
		uint8_t mpr;	  /* as requester, units of 128 PSNs */
		uint8_t mpr_dest; /* as responder */
	} mpr;
	struct {
		uint16_t max_wimm;	/* WRITE_WITH_IMMs in flight as requester */
		uint16_t max_wimm_dest; /* as responder */
	} wimm;
	uint8_t timeout; /* ACK timeout 1.024 us x 2^timeout, 0..24 */
	struct {
		uint64_t ev_profile_id; /* 0: automatic EVs */
		uint64_t cc_profile_id; /* 0: the default congestion control */
	} profile;
	struct {
		uint8_t linear_cnt; /* 0..7 */
		uint8_t exp_cnt;    /* 0..25, 25 = infinite */
	} retry;
	struct mrc_qp_hint *qp_hint; /* NULL: none */
	uint32_t cap;		     /* enum mrc_qp_cap */
	uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

/* Every field of the non-NULL structs is filled (like ibv_query_qp); the
 * masks must only name known attributes. init_attr may be NULL. */
int mrc_query_qp(struct mrc_qp *qp, struct mrc_ibv_qp_attr *vattr, int vattr_mask,
		 struct mrc_qp_attr *mrc_attr, int mrc_attr_mask,
		 struct mrc_qp_init_attr *init_attr);
/* The transitions and the attributes each requires: Documentation/api.md.
 * With MRC_IBV_QP_AV the next hop of every plane is resolved (route and
 * neighbour tables of the calling thread's network namespace). */
int mrc_modify_qp(struct mrc_qp *qp, struct mrc_ibv_qp_attr *vattr, int vattr_mask,
		  struct mrc_qp_attr *mrc_attr, int mrc_attr_mask);

/* ------------------------------------------------------------------------
 * Work requests
 */

struct mrc_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

enum mrc_wr_opcode {
	MRC_WR_RDMA_WRITE = 0,
	MRC_WR_RDMA_WRITE_WITH_IMM = 1,
};

enum mrc_send_flags {
	MRC_SEND_SIGNALED = 1 << 1,
};

struct mrc_send_wr {
	uint64_t wr_id;
	struct mrc_send_wr *next;
	struct mrc_sge *sg_list;
	int num_sge;
	enum mrc_wr_opcode opcode;
	unsigned int send_flags; /* enum mrc_send_flags */
	uint32_t imm_data;	 /* network byte order, as in verbs */
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
	} wr;
};

struct mrc_recv_wr {
	uint64_t wr_id;
	struct mrc_recv_wr *next;
	struct mrc_sge *sg_list;
	int num_sge;
};

/*
 * Posts a list of WRITE / WRITE_WITH_IMM requests (QP in RTS). Every request
 * is checked before any is posted: a bad one (EINVAL) posts nothing and
 * *bad_wr names it. A full send queue (ENOMEM) leaves the requests from
 * *bad_wr on unposted. An SGE whose lkey or range its MR does not cover
 * completes with MRC_WC_LOC_QP_OP_ERR. bad_wr may be NULL.
 */
int mrc_post_send(struct mrc_qp *qp, struct mrc_send_wr *wr, struct mrc_send_wr **bad_wr);
/* Receive requests for WRITE_WITH_IMM (QP not in RESET), same rules. */
int mrc_post_recv(struct mrc_qp *qp, struct mrc_recv_wr *wr, struct mrc_recv_wr **bad_wr);

/* ------------------------------------------------------------------------
 * Asynchronous events
 */

enum mrc_event_type {
	MRC_EVENT_CQ_ERR = 0,	    /* IBV_EVENT_CQ_ERR */
	MRC_EVENT_QP_FATAL = 1,	    /* IBV_EVENT_QP_FATAL: the QP went to ERR */
	MRC_EVENT_DEVICE_FATAL = 8, /* IBV_EVENT_DEVICE_FATAL: service mode, mrc-serviced exited */
	MRC_EVENT_PORT_ACTIVE = 9,  /* IBV_EVENT_PORT_ACTIVE */
	MRC_EVENT_PORT_ERR = 10,    /* IBV_EVENT_PORT_ERR */
};

struct mrc_async_event {
	union {
		struct mrc_cq *cq;
		struct mrc_qp *qp;
		int port_num;
	} element;
	enum mrc_event_type event_type;
};

/* Readable while an event is pending; O_NONBLOCK makes
 * mrc_get_async_event return EAGAIN instead of blocking. */
int mrc_get_async_fd(struct mrc_context *mrc_ctx, int *fd);
/* QP and CQ events go to the context that owns the object, port events
 * to every context of the device. */
int mrc_get_async_event(struct mrc_context *mrc_ctx, struct mrc_async_event *event);
void mrc_ack_async_event(struct mrc_async_event *event);

/* ------------------------------------------------------------------------
 * Out-of-band exchange (optional helpers; the line format of mrc_perf,
 * Documentation/api.md). Sockets are plain fds: close() them.
 */

struct mrc_endpoint {
	uint32_t qpn;
	uint32_t psn;
	uint64_t addr; /* a buffer the peer may write */
	uint64_t len;
	uint32_t rkey;
	uint16_t max_wimm_dest;
	uint8_t mpr_dest;
	uint32_t mtu; /* path MTU (bytes) the sender wants; 0: none */
	uint32_t num_gids;
	union mrc_gid gid[MRC_MAX_PORTS]; /* gid[port - 1] */
};

/* A random first PSN (24 bits, from the kernel's CSPRNG): use it as the
 * endpoint's psn, so an attacker off the path cannot guess the QP's window
 * (Documentation/security.md). */
uint32_t mrc_random_psn(void);

/* Returns a listening TCP socket (bind_addr NULL: any IPv4 address). */
int mrc_exchange_listen(const char *bind_addr, uint16_t port);
int mrc_exchange_accept(int listen_fd, int timeout_ms);
/* Retries until the peer listens or timeout_ms passes. */
int mrc_exchange_connect(const char *host, uint16_t port, int timeout_ms);
/* Sends ours, receives the peer's (both sides may call it at once).
 * Returns the number of peer endpoints (EOVERFLOW above max_theirs). */
int mrc_exchange_endpoints(int fd, const struct mrc_endpoint *ours, int num_ours,
			   struct mrc_endpoint *theirs, int max_theirs, int timeout_ms);
/* One text line (without the newline) each way, e.g. "done". */
int mrc_exchange_send_line(int fd, const char *line);
/* Returns the length copied to buf (NUL-terminated; EMSGSIZE if longer). */
int mrc_exchange_recv_line(int fd, char *buf, size_t size, int timeout_ms);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* MRC_MRC_H */
