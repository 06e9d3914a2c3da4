/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * A C11 translation unit (-std=c11 -pedantic-errors) over include/mrc/mrc.h:
 * the header must be valid C, its constants must have the libibverbs and
 * OCP mrc.h values, and every call must refuse NULL arguments with EINVAL.
 * capi_unit_test.cc compares the layouts seen here with the C++ compiler's.
 */
#include "capi_c11.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mrc/mrc.h"

/* libibverbs numbering (enum ibv_wc_status, ibv_wc_opcode, ibv_qp_state,
 * ibv_qp_attr_mask, ibv_wr_opcode, ibv_send_flags, ibv_access_flags,
 * ibv_event_type, ibv_port_state). */
_Static_assert(MRC_WC_SUCCESS == 0 && MRC_WC_LOC_LEN_ERR == 1 && MRC_WC_LOC_QP_OP_ERR == 2,
	       "wc status");
_Static_assert(MRC_WC_LOC_PROT_ERR == 4 && MRC_WC_WR_FLUSH_ERR == 5 && MRC_WC_LOC_ACCESS_ERR == 8,
	       "wc status");
_Static_assert(MRC_WC_REM_INV_REQ_ERR == 9 && MRC_WC_REM_ACCESS_ERR == 10 &&
		   MRC_WC_REM_OP_ERR == 11,
	       "wc status");
_Static_assert(MRC_WC_RETRY_EXC_ERR == 12 && MRC_WC_FATAL_ERR == 19 && MRC_WC_GENERAL_ERR == 21,
	       "wc status");
_Static_assert(MRC_WC_RDMA_WRITE == 1 && MRC_WC_RECV_RDMA_WITH_IMM == 129 && MRC_WC_WITH_IMM == 2,
	       "wc opcode");
_Static_assert(MRC_QPS_RESET == 0 && MRC_QPS_INIT == 1 && MRC_QPS_RTR == 2 && MRC_QPS_RTS == 3 &&
		   MRC_QPS_ERR == 6,
	       "qp state");
_Static_assert(MRC_IBV_QP_STATE == 1 && MRC_IBV_QP_CUR_STATE == 2 && MRC_IBV_QP_ACCESS_FLAGS == 8,
	       "ibv mask");
_Static_assert(MRC_IBV_QP_PKEY_INDEX == 16 && MRC_IBV_QP_PORT == 32 && MRC_IBV_QP_AV == 128,
	       "ibv mask");
_Static_assert(MRC_IBV_QP_PATH_MTU == 256 && MRC_IBV_QP_TIMEOUT == 512 &&
		   MRC_IBV_QP_RETRY_CNT == 1024,
	       "ibv mask");
_Static_assert(MRC_IBV_QP_RNR_RETRY == 2048 && MRC_IBV_QP_RQ_PSN == 4096 &&
		   MRC_IBV_QP_MAX_QP_RD_ATOMIC == 8192,
	       "ibv mask");
_Static_assert(MRC_IBV_QP_ALT_PATH == 16384 && MRC_IBV_QP_MIN_RNR_TIMER == 32768 &&
		   MRC_IBV_QP_SQ_PSN == 65536,
	       "ibv mask");
_Static_assert(MRC_IBV_QP_MAX_DEST_RD_ATOMIC == 131072 && MRC_IBV_QP_PATH_MIG_STATE == 262144 &&
		   MRC_IBV_QP_CAP == 524288 && MRC_IBV_QP_DEST_QPN == 1048576,
	       "ibv mask");
_Static_assert(MRC_WR_RDMA_WRITE == 0 && MRC_WR_RDMA_WRITE_WITH_IMM == 1 && MRC_SEND_SIGNALED == 2,
	       "wr");
_Static_assert(MRC_ACCESS_LOCAL_WRITE == 1 && MRC_ACCESS_REMOTE_WRITE == 2 &&
		   MRC_ACCESS_REMOTE_READ == 4,
	       "access");
_Static_assert(MRC_QP_EX_WITH_RDMA_WRITE == 1 && MRC_QP_EX_WITH_RDMA_WRITE_WITH_IMM == 2,
	       "send ops");
_Static_assert(MRC_EVENT_CQ_ERR == 0 && MRC_EVENT_QP_FATAL == 1 && MRC_EVENT_PORT_ACTIVE == 9 &&
		   MRC_EVENT_PORT_ERR == 10,
	       "events");
_Static_assert(MRC_PORT_DOWN == 1 && MRC_PORT_ACTIVE == 4, "port state");

/* OCP mrc.h numbering. */
_Static_assert(MRC_PROTOCOL_VERSION_0 == 0 && MRC_PROTOCOL_VERSION_1 == 1, "protocol");
_Static_assert(MRC_DEVICE_CAP_TRIM_NACK == 1 && MRC_DEVICE_CAP_DYNAMIC_MPR == 2 &&
		   MRC_DEVICE_CAP_SVC_TIME == 4,
	       "device cap");
_Static_assert(MRC_QP_MAX_WIMM == 1 && MRC_QP_MAX_WIMM_DEST == 2 && MRC_QP_MPR == 4 &&
		   MRC_QP_MPR_DEST == 8,
	       "mask");
_Static_assert(MRC_QP_TIMEOUT == 16 && MRC_QP_EV_PROFILE_ID == 32 && MRC_QP_CC_PROFILE_ID == 64 &&
		   MRC_QP_HINT == 128,
	       "mask");
_Static_assert(MRC_QP_RETRY_CNT == 256 && MRC_QP_CAP == 512, "mask");
_Static_assert((unsigned)MRC_QP_VENDOR_CFG == 0x80000000u &&
		   (unsigned)MRC_QP_HINT_VENDOR_CFG == 0x80000000u,
	       "vendor cfg bit 31");
_Static_assert(MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED == 1 && MRC_QP_CAP_DYNAMIC_MPR == 2 &&
		   MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED == 4,
	       "qp cap");
_Static_assert(MRC_QP_HINT_NUM_QPS_PER_PEER == 1 && MRC_QP_HINT_NUM_SEND_PEERS == 2 &&
		   MRC_QP_HINT_NUM_REMOTE_RECV_PEERS == 4,
	       "hint mask");
_Static_assert(MRC_API_VER(1, 0, 1) == 0x01000001u && MRC_API_CURRENT_VERSION == 0x01000001u,
	       "version");
_Static_assert(MRC_MAX_VENDOR_CFG_SIZE == 128 && sizeof(union mrc_gid) == 16, "sizes");
_Static_assert(sizeof(struct mrc_sge) == 16, "ibv_sge layout");

#define LAYOUT(type)                                                                               \
	{                                                                                          \
#type, sizeof(type), _Alignof(type)                                                \
	}
#define FIELD(type, field)                                                                         \
	{                                                                                          \
#type "." #field, offsetof(type, field), sizeof(((type *)0)->field)                \
	}

static const struct capi_layout kLayouts[] = {
    LAYOUT(struct mrc_device_opts),
    LAYOUT(struct mrc_device_attr),
    LAYOUT(union mrc_gid),
    LAYOUT(struct mrc_port_attr),
    LAYOUT(struct mrc_context_attr),
    LAYOUT(struct mrc_mr),
    LAYOUT(struct mrc_wc),
    LAYOUT(struct mrc_qp_hint_attr),
    LAYOUT(struct mrc_qp_hint_init_attr),
    LAYOUT(struct mrc_ibv_qp_cap),
    LAYOUT(struct mrc_qp_init_attr),
    LAYOUT(struct mrc_ah_attr),
    LAYOUT(struct mrc_ibv_qp_attr),
    LAYOUT(struct mrc_qp_attr),
    LAYOUT(struct mrc_sge),
    LAYOUT(struct mrc_send_wr),
    LAYOUT(struct mrc_recv_wr),
    LAYOUT(struct mrc_async_event),
    LAYOUT(struct mrc_endpoint),
};

static const struct capi_layout kFields[] = {
    FIELD(struct mrc_device_attr, wimm_attr.max_wimm_dest),
    FIELD(struct mrc_device_attr, qp_attr.max_qp_hint),
    FIELD(struct mrc_device_attr, cap),
    FIELD(struct mrc_wc, status),
    FIELD(struct mrc_wc, byte_len),
    FIELD(struct mrc_wc, imm_data),
    FIELD(struct mrc_wc, wc_flags),
    FIELD(struct mrc_qp_init_attr, cap),
    FIELD(struct mrc_qp_init_attr, pd),
    FIELD(struct mrc_qp_init_attr, send_ops_flags),
    FIELD(struct mrc_qp_init_attr, protocol_version),
    FIELD(struct mrc_ibv_qp_attr, path_mtu),
    FIELD(struct mrc_ibv_qp_attr, dest_qp_num),
    FIELD(struct mrc_ibv_qp_attr, ah_attr),
    FIELD(struct mrc_ibv_qp_attr, ah_attr.peer_max_wimm_dest),
    FIELD(struct mrc_qp_attr, wimm.max_wimm_dest),
    FIELD(struct mrc_qp_attr, profile.cc_profile_id),
    FIELD(struct mrc_qp_attr, retry.exp_cnt),
    FIELD(struct mrc_qp_attr, qp_hint),
    FIELD(struct mrc_qp_attr, vendor_cfg),
    FIELD(struct mrc_send_wr, num_sge),
    FIELD(struct mrc_send_wr, imm_data),
    FIELD(struct mrc_send_wr, wr.rdma.remote_addr),
    FIELD(struct mrc_send_wr, wr.rdma.rkey),
    FIELD(struct mrc_recv_wr, num_sge),
    FIELD(struct mrc_async_event, event_type),
    FIELD(struct mrc_endpoint, gid),
    FIELD(struct mrc_mr, lkey),
    FIELD(struct mrc_mr, rkey),
};

const struct capi_layout *capi_c_layouts(size_t *n)
{
	*n = sizeof kLayouts / sizeof kLayouts[0];
	return kLayouts;
}

const struct capi_layout *capi_c_fields(size_t *n)
{
	*n = sizeof kFields / sizeof kFields[0];
	return kFields;
}

/* Expects call() to have returned `got` with errno == want. */
static int expect(const char *what, int ok, int want, char *msg, size_t len, int *fails)
{
	if (ok && errno == want)
		return 1;
	if (!*fails)
		snprintf(msg, len, "%s: errno %d (%s), want %d; last error '%s'", what, errno,
			 strerror(errno), want, mrc_last_error());
	++*fails;
	return 0;
}

#define EXPECT_INT(call, want)                                                                     \
	do {                                                                                       \
		errno = 0;                                                                         \
		int r_ = (call);                                                                   \
		expect(#call, r_ == -1, (want), msg, len, &fails);                                 \
	} while (0)
#define EXPECT_NULL(call, want)                                                                    \
	do {                                                                                       \
		errno = 0;                                                                         \
		const void *p_ = (const void *)(call);                                             \
		expect(#call, p_ == NULL, (want), msg, len, &fails);                               \
	} while (0)

int capi_c_null_arguments(char *msg, size_t len)
{
	int fails = 0;
	uint32_t u32 = 0;
	int i = 0;
	union mrc_gid gid;
	struct mrc_device_attr dattr;
	struct mrc_port_attr pattr;
	struct mrc_comp_channel *ch = NULL;
	struct mrc_cq *cq = NULL;
	void *cq_ctx = NULL;
	struct mrc_wc wc;
	struct mrc_qp_hint_init_attr hinit;
	struct mrc_qp_hint_attr hattr;
	struct mrc_qp_init_attr qinit;
	struct mrc_ibv_qp_attr vattr;
	struct mrc_qp_attr mattr;
	struct mrc_send_wr swr;
	struct mrc_recv_wr rwr;
	struct mrc_send_wr *bad_s = &swr;
	struct mrc_recv_wr *bad_r = &rwr;
	struct mrc_async_event ev;
	const char *names[1] = {"lo"};

	memset(&hinit, 0, sizeof hinit);
	memset(&qinit, 0, sizeof qinit);
	memset(&vattr, 0, sizeof vattr);
	memset(&mattr, 0, sizeof mattr);
	memset(&swr, 0, sizeof swr);
	memset(&rwr, 0, sizeof rwr);

	EXPECT_NULL(mrc_open_device(NULL, 1, NULL), EINVAL);
	EXPECT_NULL(mrc_open_device(names, 0, NULL), EINVAL);
	EXPECT_INT(mrc_close_device(NULL), EINVAL);
	EXPECT_INT(mrc_query_device(NULL, &dattr, &i), EINVAL);
	EXPECT_INT(mrc_query_device_ex(NULL, NULL, &dattr, &i), EINVAL);
	EXPECT_INT(mrc_num_ports(NULL), EINVAL);
	EXPECT_INT(mrc_query_port(NULL, 1, &pattr), EINVAL);
	EXPECT_INT(mrc_query_gid(NULL, 1, 0, &gid), EINVAL);
	EXPECT_INT(mrc_query_path_mtu(NULL, 4, &u32), EINVAL);
	EXPECT_NULL(mrc_create_context(NULL, NULL), EINVAL);
	EXPECT_INT(mrc_destroy_context(NULL), EINVAL);
	EXPECT_NULL(mrc_alloc_pd(NULL), EINVAL);
	EXPECT_INT(mrc_dealloc_pd(NULL), EINVAL);
	EXPECT_NULL(mrc_reg_mr(NULL, &i, sizeof i, MRC_ACCESS_LOCAL_WRITE), EINVAL);
	EXPECT_INT(mrc_dereg_mr(NULL), EINVAL);
	EXPECT_INT(mrc_create_comp_channel(NULL, &ch), EINVAL);
	EXPECT_INT(mrc_get_comp_channel_fd(NULL, &i), EINVAL);
	EXPECT_INT(mrc_destroy_comp_channel(NULL), EINVAL);
	EXPECT_NULL(mrc_create_cq(NULL, 16, NULL, NULL, 0), EINVAL);
	EXPECT_INT(mrc_destroy_cq(NULL), EINVAL);
	EXPECT_INT(mrc_poll_cq(NULL, 1, &wc), EINVAL);
	EXPECT_INT(mrc_req_notify_cq(NULL, 0), EINVAL);
	EXPECT_INT(mrc_get_cq_event(NULL, &cq, &cq_ctx), EINVAL);
	EXPECT_NULL(mrc_create_qp_hint(NULL, &hinit), EINVAL);
	EXPECT_INT(mrc_destroy_qp_hint(NULL), EINVAL);
	EXPECT_INT(mrc_query_qp_hint(NULL, &hattr, MRC_QP_HINT_NUM_SEND_PEERS), EINVAL);
	EXPECT_INT(mrc_modify_qp_hint(NULL, &hattr, MRC_QP_HINT_NUM_SEND_PEERS), EINVAL);
	EXPECT_NULL(mrc_create_qp(NULL, &qinit), EINVAL);
	EXPECT_INT(mrc_destroy_qp(NULL), EINVAL);
	EXPECT_INT(mrc_get_qpn(NULL, &u32), EINVAL);
	EXPECT_INT(mrc_query_qp(NULL, &vattr, MRC_IBV_QP_STATE, &mattr, 0, NULL), EINVAL);
	EXPECT_INT(mrc_modify_qp(NULL, &vattr, MRC_IBV_QP_STATE, &mattr, 0), EINVAL);
	EXPECT_INT(mrc_post_send(NULL, &swr, &bad_s), EINVAL);
	if (bad_s != NULL) {
		snprintf(msg, len, "mrc_post_send(NULL QP) left *bad_wr set");
		fails++;
	}
	EXPECT_INT(mrc_post_recv(NULL, &rwr, &bad_r), EINVAL);
	EXPECT_INT(mrc_get_async_fd(NULL, &i), EINVAL);
	EXPECT_INT(mrc_get_async_event(NULL, &ev), EINVAL);
	mrc_ack_cq_events(NULL, 1); /* no effect, no crash */
	mrc_ack_async_event(NULL);
	EXPECT_INT(mrc_exchange_connect(NULL, 1, 0), EINVAL);
	EXPECT_INT(mrc_exchange_endpoints(-1, NULL, 0, NULL, 0, 0), EBADF);
	EXPECT_INT(mrc_exchange_send_line(-1, "x"), EBADF);
	return fails;
}

uint32_t capi_c_api_version(void)
{
	uint32_t cur = 0, last = 0, vendor = 0, last_vendor = 0;

	mrc_query_version(&cur, &last, &vendor, &last_vendor);
	mrc_query_version(NULL, NULL, NULL, NULL); /* every pointer may be NULL */
	return cur;
}
