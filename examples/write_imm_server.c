/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * write_imm_server: the receiving half of the smallest MRC program.
 *
 *   write_imm_server [-p PORT] [-n MESSAGES] [-s BYTES] IF[,IF...]
 *
 * Opens an MRC device on the plane interfaces, registers a buffer the client
 * may write, posts one receive per expected WRITE_WITH_IMM, swaps endpoint
 * descriptions with the client over TCP, and brings its QP to RTR (a
 * responder needs no more). Each completion carries the client's immediate;
 * the message it ends is then in the buffer, and the server checks it byte
 * for byte. See examples/README.md.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mrc/mrc.h"

#define MAX_WIMM 64 /* WRITE_WITH_IMMs in flight we accept */
#define MPR 8	    /* receive window, units of 128 packets */

static void die(const char *what)
{
	fprintf(stderr, "write_imm_server: %s: %s\n", what, mrc_last_error());
	exit(1);
}

/* The bytes the client writes as message i (the client has the same). */
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
	if (optind + 1 != argc || count == 0 || count > MAX_WIMM || size == 0) {
		fprintf(stderr,
			"usage: write_imm_server [-p PORT] [-n 1..%d] [-s BYTES] IF[,IF...]\n",
			MAX_WIMM);
		return 2;
	}

	/* 1. The device: one port per plane interface, in the order given. */
	const char *ifs[MRC_MAX_PORTS];
	int nifs = 0;
	for (char *s = strtok(argv[optind], ","); s && nifs < MRC_MAX_PORTS; s = strtok(NULL, ","))
		ifs[nifs++] = s;
	struct mrc_device *dev = mrc_open_device(ifs, nifs, NULL);
	if (!dev)
		die("mrc_open_device");
	struct mrc_context *ctx = mrc_create_context(dev, NULL);
	struct mrc_pd *pd = mrc_alloc_pd(dev);
	if (!ctx || !pd)
		die("context/PD");

	/* 2. A buffer the client may write, a CQ and a QP. */
	size_t len = (size_t)count * size;
	uint8_t *buf = calloc(1, len);
	struct mrc_mr *mr =
	    mrc_reg_mr(pd, buf, len, MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE);
	struct mrc_cq *cq = mrc_create_cq(ctx, 2 * MAX_WIMM, NULL, NULL, 0);
	if (!buf || !mr || !cq)
		die("buffer/MR/CQ");
	struct mrc_qp_init_attr init = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .pd = pd,
	    .cap = {.max_send_wr = 1, .max_recv_wr = MAX_WIMM, .max_send_sge = 1},
	};
	struct mrc_qp *qp = mrc_create_qp(ctx, &init);
	if (!qp)
		die("mrc_create_qp");

	/* 3. RESET -> INIT (no QP hint, automatic EVs, default congestion control). */
	struct mrc_ibv_qp_attr va = {
	    .qp_state = MRC_QPS_INIT,
	    .qp_access_flags = MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE,
	};
	struct mrc_qp_attr ma = {.qp_hint = NULL};
	if (mrc_modify_qp(qp, &va,
			  MRC_IBV_QP_STATE | MRC_IBV_QP_PKEY_INDEX | MRC_IBV_QP_ACCESS_FLAGS, &ma,
			  MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID))
		die("modify to INIT");

	/* 4. One receive per WRITE_WITH_IMM: its completion carries the immediate. */
	for (uint32_t i = 0; i < count; i++) {
		struct mrc_recv_wr rw = {.wr_id = i};
		struct mrc_recv_wr *bad;
		if (mrc_post_recv(qp, &rw, &bad))
			die("mrc_post_recv");
	}

	/* 5. Our endpoint: QPN, first PSN, a GID per plane, the buffer and its rkey. */
	struct mrc_endpoint me = {.psn = mrc_random_psn(),
				  .addr = (uintptr_t)buf,
				  .len = len,
				  .rkey = mr->rkey,
				  .max_wimm_dest = MAX_WIMM,
				  .mpr_dest = MPR,
				  .mtu = 0};
	mrc_get_qpn(qp, &me.qpn);
	me.num_gids = (uint32_t)mrc_num_ports(dev);
	for (uint8_t p = 1; p <= me.num_gids; p++)
		if (mrc_query_gid(dev, p, 0, &me.gid[p - 1]))
			die("GID"); /* GID 0 is the port's IPv4 address */
	/* The largest payload per packet every plane and the device carry. */
	if (mrc_query_path_mtu(dev, 4, &me.mtu))
		die("path MTU");
	printf("server: QP %u listening on TCP port %u\n", me.qpn, port);
	fflush(stdout);
	int lfd = mrc_exchange_listen(NULL, port);
	int fd = lfd < 0 ? -1 : mrc_exchange_accept(lfd, 60000);
	struct mrc_endpoint peer;
	if (fd < 0 || mrc_exchange_endpoints(fd, &me, 1, &peer, 1, 10000) != 1)
		die("endpoint exchange");

	/* 6. INIT -> RTR: the client's GIDs form the address vector. */
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

	/* 7. Completions arrive in the order the client sent; verify each message. */
	uint32_t verified = 0;
	time_t deadline = time(NULL) + 60;
	for (uint32_t got = 0; got < count;) {
		struct mrc_wc wc;
		int n = mrc_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("mrc_poll_cq");
		if (n == 0 && time(NULL) > deadline) {
			fprintf(stderr, "server: %u of %u messages after 60 s\n", got, count);
			return 1;
		}
		if (n == 0)
			continue; /* a real program would block on a completion channel */
		if (wc.status != MRC_WC_SUCCESS) {
			fprintf(stderr, "server: receive failed: %s\n",
				mrc_wc_status_str(wc.status));
			return 1;
		}
		uint32_t imm = ntohl(wc.imm_data), i = imm - 0x1000;
		int ok = i < count && wc.byte_len == size;
		for (size_t j = 0; ok && j < size; j++)
			ok = buf[(size_t)i * size + j] == pattern(i, j);
		printf("server: immediate 0x%08x, %u bytes: %s\n", imm, wc.byte_len,
		       ok ? "verified" : "MISMATCH");
		verified += (uint32_t)ok;
		got++;
	}

	/* 8. Tell the client, once it has its completions, and clean up. */
	char line[64];
	if (mrc_exchange_recv_line(fd, line, sizeof line, 30000) < 0)
		die("waiting for the client");
	snprintf(line, sizeof line, "verified %u of %u", verified, count);
	mrc_exchange_send_line(fd, line);
	printf("server: %s\n", line);
	close(fd);
	close(lfd);
	mrc_destroy_qp(qp);
	mrc_destroy_cq(cq);
	mrc_dereg_mr(mr);
	mrc_dealloc_pd(pd);
	mrc_destroy_context(ctx);
	mrc_close_device(dev);
	free(buf);
	return verified == count ? 0 : 1;
}
