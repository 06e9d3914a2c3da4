/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * write_imm_client: the sending half of the smallest MRC program.
 *
 *   write_imm_client [-p PORT] [-n MESSAGES] [-s BYTES] SERVER_ADDR IF[,IF...]
 *
 * Opens an MRC device on the plane interfaces, swaps endpoint descriptions
 * with write_imm_server over TCP (SERVER_ADDR may be any of its addresses),
 * brings its QP to RTS and writes MESSAGES messages into the server's buffer,
 * each an RDMA WRITE with immediate data 0x1000 + its index. MRC sprays the
 * packets of every message over all planes. See examples/README.md.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mrc/mrc.h"

#define MAX_WIMM 64 /* WRITE_WITH_IMMs in flight */
#define MPR 8	    /* send window, units of 128 packets */

static void die(const char *what)
{
	fprintf(stderr, "write_imm_client: %s: %s\n", what, mrc_last_error());
	exit(1);
}

/* The bytes of message i (the server checks them). */
static uint8_t pattern(uint32_t i, size_t j) { return (uint8_t)(i * 31u + j * 7u + 1u); }

int main(int argc, char **argv)
{
	uint16_t port = 18516;
	uint32_t count = 4, size = 65536;
	int opt;

	while ((opt = getopt(argc, argv, "p:n:s:")) != -1) {
		if (opt == 'p')
			port = (uint16_t)atoi(optarg);
		else if (opt == 'n')
			count = (uint32_t)atoi(optarg);
		else if (opt == 's')
			size = (uint32_t)atoi(optarg);
		else
			return 2;
	}
	if (optind + 2 != argc || count == 0 || count > MAX_WIMM || size == 0) {
		fprintf(stderr,
			"usage: write_imm_client [-p PORT] [-n 1..%d] [-s BYTES] SERVER_ADDR "
			"IF[,IF...]\n",
			MAX_WIMM);
		return 2;
	}
	const char *server = argv[optind];

	/* 1. The device, a context, a PD; the messages in one registered buffer. */
	const char *ifs[MRC_MAX_PORTS];
	int nifs = 0;
	for (char *s = strtok(argv[optind + 1], ","); s && nifs < MRC_MAX_PORTS;
	     s = strtok(NULL, ","))
		ifs[nifs++] = s;
	struct mrc_device *dev = mrc_open_device(ifs, nifs, NULL);
	if (!dev)
		die("mrc_open_device");
	struct mrc_context *ctx = mrc_create_context(dev, NULL);
	struct mrc_pd *pd = mrc_alloc_pd(dev);
	size_t len = (size_t)count * size;
	uint8_t *buf = malloc(len);
	if (!ctx || !pd || !buf)
		die("context/PD/buffer");
	for (uint32_t i = 0; i < count; i++)
		for (size_t j = 0; j < size; j++)
			buf[(size_t)i * size + j] = pattern(i, j);
	struct mrc_mr *mr = mrc_reg_mr(pd, buf, len, MRC_ACCESS_LOCAL_WRITE);
	struct mrc_cq *cq = mrc_create_cq(ctx, MAX_WIMM, NULL, NULL, 0);
	struct mrc_qp_init_attr init = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .pd = pd,
	    .cap = {.max_send_wr = MAX_WIMM, .max_recv_wr = 0, .max_send_sge = 1},
	    .send_ops_flags = MRC_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
	};
	struct mrc_qp *qp = mr && cq ? mrc_create_qp(ctx, &init) : NULL;
	if (!qp)
		die("MR/CQ/QP");

	/* 2. RESET -> INIT. */
	struct mrc_ibv_qp_attr va = {
	    .qp_state = MRC_QPS_INIT,
	    .qp_access_flags = MRC_ACCESS_LOCAL_WRITE,
	};
	struct mrc_qp_attr ma = {.qp_hint = NULL};
	if (mrc_modify_qp(qp, &va,
			  MRC_IBV_QP_STATE | MRC_IBV_QP_PKEY_INDEX | MRC_IBV_QP_ACCESS_FLAGS, &ma,
			  MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID))
		die("modify to INIT");

	/* 3. Swap endpoints: ours has no buffer to offer, the server's does. */
	struct mrc_endpoint me = {
	    .psn = mrc_random_psn(), .max_wimm_dest = MAX_WIMM, .mpr_dest = MPR, .mtu = 0};
	mrc_get_qpn(qp, &me.qpn);
	me.num_gids = (uint32_t)mrc_num_ports(dev);
	for (uint8_t p = 1; p <= me.num_gids; p++)
		if (mrc_query_gid(dev, p, 0, &me.gid[p - 1]))
			die("GID"); /* GID 0 is the port's IPv4 address */
	/* The largest payload per packet every plane and the device carry. */
	if (mrc_query_path_mtu(dev, 4, &me.mtu))
		die("path MTU");
	int fd = mrc_exchange_connect(server, port, 30000);
	struct mrc_endpoint peer;
	if (fd < 0 || mrc_exchange_endpoints(fd, &me, 1, &peer, 1, 10000) != 1)
		die("endpoint exchange");
	if (peer.len < len) {
		fprintf(stderr, "client: the server's buffer holds %llu bytes, %zu needed\n",
			(unsigned long long)peer.len, len);
		return 1;
	}

	/* 4. INIT -> RTR (the server's GID on every plane) -> RTS. */
	va = (struct mrc_ibv_qp_attr){
	    .qp_state = MRC_QPS_RTR,
	    .path_mtu = peer.mtu < me.mtu ? peer.mtu : me.mtu,
	    .dest_qp_num = peer.qpn,
	    .rq_psn = peer.psn,
	};
	memcpy(va.ah_attr.dgid, peer.gid, sizeof peer.gid);
	va.ah_attr.peer_max_wimm_dest = peer.max_wimm_dest;
	ma = (struct mrc_qp_attr){.wimm.max_wimm_dest = MAX_WIMM, .mpr.mpr_dest = MPR};
	if (mrc_modify_qp(qp, &va,
			  MRC_IBV_QP_STATE | MRC_IBV_QP_AV | MRC_IBV_QP_PATH_MTU |
			      MRC_IBV_QP_DEST_QPN | MRC_IBV_QP_RQ_PSN,
			  &ma, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST))
		die("modify to RTR");
	va = (struct mrc_ibv_qp_attr){.qp_state = MRC_QPS_RTS, .sq_psn = me.psn};
	ma = (struct mrc_qp_attr){
	    .wimm.max_wimm = MAX_WIMM,
	    .mpr.mpr = peer.mpr_dest < MPR ? peer.mpr_dest : MPR,
	    .timeout = 14, /* ACK timeout 1.024 us x 2^14 = 16.8 ms */
	    .retry = {.linear_cnt = 7, .exp_cnt = 7},
	};
	if (mrc_modify_qp(qp, &va, MRC_IBV_QP_STATE | MRC_IBV_QP_SQ_PSN, &ma,
			  MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT))
		die("modify to RTS");

	/* 5. Every message as an RDMA WRITE with immediate, each signaled. */
	for (uint32_t i = 0; i < count; i++) {
		struct mrc_sge sge = {
		    .addr = (uintptr_t)(buf + (size_t)i * size), .length = size, .lkey = mr->lkey};
		struct mrc_send_wr wr = {
		    .wr_id = i,
		    .sg_list = &sge,
		    .num_sge = 1,
		    .opcode = MRC_WR_RDMA_WRITE_WITH_IMM,
		    .send_flags = MRC_SEND_SIGNALED,
		    .imm_data = htonl(0x1000 + i),
		    .wr.rdma = {.remote_addr = peer.addr + (uint64_t)i * size, .rkey = peer.rkey},
		};
		struct mrc_send_wr *bad;
		if (mrc_post_send(qp, &wr, &bad))
			die("mrc_post_send");
	}

	/* 6. A completion means the server acknowledged every byte of the message. */
	time_t deadline = time(NULL) + 60;
	for (uint32_t done = 0; done < count;) {
		struct mrc_wc wc;
		int n = mrc_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("mrc_poll_cq");
		if (n == 0 && time(NULL) > deadline) {
			fprintf(stderr, "client: %u of %u completions after 60 s\n", done, count);
			return 1;
		}
		if (n == 0)
			continue;
		if (wc.status != MRC_WC_SUCCESS) {
			fprintf(stderr, "client: message %llu failed: %s\n",
				(unsigned long long)wc.wr_id, mrc_wc_status_str(wc.status));
			return 1;
		}
		done++;
	}
	printf("client: wrote %u messages of %u bytes with immediates 0x%08x..0x%08x\n", count,
	       size, 0x1000u, 0x1000u + count - 1);

	/* 7. Tell the server we are done and print its verdict. */
	char line[64];
	if (mrc_exchange_send_line(fd, "done") ||
	    mrc_exchange_recv_line(fd, line, sizeof line, 30000) < 0)
		die("talking to the server");
	printf("client: server says: %s\n", line);
	close(fd);
	mrc_destroy_qp(qp);
	mrc_destroy_cq(cq);
	mrc_dereg_mr(mr);
	mrc_dealloc_pd(pd);
	mrc_destroy_context(ctx);
	mrc_close_device(dev);
	free(buf);
	char want[64];
	snprintf(want, sizeof want, "verified %u of %u", count, count);
	return strcmp(line, want) == 0 ? 0 : 1;
}
