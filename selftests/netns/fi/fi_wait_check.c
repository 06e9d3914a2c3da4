/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * fi_wait_check: the wait objects of a libfabric provider's completion
 * queue, through the public API only, between two hosts over FI_EP_MSG
 * (Documentation/libfabric.md, "Wait objects"). Host B sends, host A waits:
 *
 *   sread    A posts a receive and blocks in fi_cq_sread (10 s bound); B
 *            sends 300 ms after A said it is ready;
 *   trywait  A posts a receive, then fi_trywait on the CQ and poll(2) on its
 *            FI_GETWAIT fd (10 s bound per poll) until the completion is
 *            read; B sends 300 ms after A said it is ready;
 *   thread   B's message is already in A's receive ring (B wrote a marker
 *            into A's memory after it, with fi_write, and A saw it), no
 *            receive posted. A's main thread arms the CQ (fi_trywait) and
 *            polls its fd (5 s bound); only then a second thread posts the
 *            receive, which completes at once in that thread without any
 *            new packet: only the provider's own write of the CQ's fd can
 *            wake the first thread.
 *
 *   burst    (-b) A posts 300 receives of 64 KiB at once, then B sends 300
 *            messages of 64 KiB, up to 48 in flight: each must complete
 *            its own receive, in order, every byte as sent. Over the mrc
 *            provider they go straight into A's advertised receives
 *            (libfabric.md, "Direct messages"), which A advertises at most
 *            64 ahead: the test script checks the counts both log.
 *
 *   yield    (-y US: the FI_MRC_YIELD_US both hosts run with) A posts a
 *            receive and spins on fi_cq_read, B sends 300 ms later (more
 *            than US). This program's own sched_yield counts the provider's
 *            yields in A's main thread: none in the reads that ended within
 *            US of the first empty read, some after it; after the message,
 *            none again within US (the run of empty reads starts over).
 *
 * Every message is 4096 bytes, each byte a function of (test, index), and
 * checked. A wait that reaches its bound (or, for fi_cq_sread, half of it:
 * the read after its timeout finds the completion) is a lost wake-up: the
 * program says which and exits 1. A wait that returned before the sender could have sent
 * (under 100 ms) did not wait: also a failure.
 *
 *   fi_wait_check [-P PORT] [-p PROVIDER]               host B (server, sender)
 *   fi_wait_check [-P PORT] [-p PROVIDER] [-y US] [-b] ADDR  host A (client, waiter)
 *
 * The server prints "listening" when it accepts connections. Both print
 * "fi_wait_check: N checks passed" and exit 0.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define MSG_LEN 4096
#define DELAY_MS 300
#define MIN_WAIT_MS 100
#define BOUND_MS 10000
#define THREAD_BOUND_MS 5000

enum kind { K_HELLO = 1, K_READY, K_DATA, K_BYE };
enum test { T_SREAD = 1, T_TRYWAIT, T_THREAD, T_YIELD, T_BURST };

#define BURST_N 300
#define BURST_LEN 65536
#define BURST_INFLIGHT 48

struct msg {
	uint32_t kind, test;
	uint64_t addr, key; /* K_HELLO: A's marker (fi_write target) */
	uint8_t data[MSG_LEN - 24];
};

/* The registered buffer: receive and send slots, the marker. */
struct area {
	struct msg rx[2];
	struct msg tx;
	uint64_t src;		  /* the fi_write source (B) */
	volatile uint64_t marker; /* B writes the test number here (A) */
};

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_eq *eq;
static struct fid_cq *txcq, *rxcq;
static struct fid_ep *ep;
static struct fid_mr *mr;
static struct area *area;
static struct fi_info *conn_info; /* B: the FI_CONNREQ's */
static const char *role = "B";
static int checks;
static long yield_us = -1; /* -y: the yield test's threshold */
static int burst;	   /* -b: the burst test */
static uint8_t *bulk;	   /* BURST_N x BURST_LEN, registered as bulk_mr */
static struct fid_mr *bulk_mr;

/*
 * Takes the place of libc's sched_yield for the provider too (the build
 * exports it: -Wl,--export-dynamic-symbol): counts the calls of the thread
 * that set count_yields, then yields.
 */
static __thread int count_yields;
static __thread long yields;

int sched_yield(void)
{
	if (count_yields)
		yields++;
	return (int)syscall(SYS_sched_yield);
}

static void die(const char *what, long v)
{
	printf("FAIL fi_wait_check %s: %s: %ld (%s)\n", role, what, v,
	       v < 0 ? fi_strerror((int)-v) : "");
	fflush(stdout);
	exit(1);
}

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("FAIL fi_wait_check %s: %s\n", role, what);
		fflush(stdout);
		exit(1);
	}
	printf("ok   %s: %s\n", role, what);
	checks++;
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static long now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static uint8_t byte_of(uint32_t test, size_t i) { return (uint8_t)(test * 37u + i * 13u + 5u); }

static void *desc(void) { return fi_mr_desc(mr); }

static void post_recv(int slot)
{
	long r = fi_recv(ep, &area->rx[slot], sizeof area->rx[slot], desc(), 0, &area->rx[slot]);
	if (r)
		die("fi_recv", r);
}

/* Sends KIND for TEST (data filled for K_DATA) and reaps its completion. */
static void send_msg(uint32_t kind, uint32_t test)
{
	struct fi_cq_msg_entry c;
	long r, t0 = now_ms();

	memset(&area->tx, 0, sizeof area->tx);
	area->tx.kind = kind;
	area->tx.test = test;
	if (kind == K_HELLO) {
		area->tx.addr = (uint64_t)(uintptr_t)&area->marker;
		area->tx.key = fi_mr_key(mr);
	}
	for (size_t i = 0; kind == K_DATA && i < sizeof area->tx.data; i++)
		area->tx.data[i] = byte_of(test, i);
	while ((r = fi_send(ep, &area->tx, sizeof area->tx, desc(), 0, &area->tx)) == -FI_EAGAIN)
		fi_cq_read(txcq, &c, 1);
	if (r)
		die("fi_send", r);
	while ((r = fi_cq_read(txcq, &c, 1)) == -FI_EAGAIN)
		if (now_ms() - t0 > BOUND_MS)
			die("send completion not seen", 0);
	if (r != 1)
		die("send completion", r);
}

/* Spins on the CQ (no wait object) for one receive completion. */
static struct msg *poll_recv(void)
{
	struct fi_cq_msg_entry c;
	long r, t0 = now_ms();

	while ((r = fi_cq_read(rxcq, &c, 1)) == -FI_EAGAIN)
		if (now_ms() - t0 > BOUND_MS)
			die("receive not seen", 0);
	if (r != 1)
		die("fi_cq_read", r);
	return c.op_context;
}

static void check_data(struct msg *m, uint32_t test, const char *what)
{
	size_t bad = 0;

	for (size_t i = 0; i < sizeof m->data; i++)
		bad += m->data[i] != byte_of(test, i);
	check(m->kind == K_DATA && m->test == test && bad == 0, what);
}

static int wait_event(uint32_t want, struct fi_eq_cm_entry *e)
{
	struct fi_eq_err_entry err = {0};
	uint32_t ev;
	long r = fi_eq_sread(eq, &ev, e, sizeof *e, 20000, 0);

	if (r == -FI_EAVAIL) {
		fi_eq_readerr(eq, &err, 0);
		die("EQ error", -err.err);
	}
	if (r < 0)
		die("fi_eq_sread", r);
	if (ev != want)
		die("unexpected EQ event", ev);
	return 0;
}

static void open_common(void)
{
	struct fi_eq_attr eqa = {.wait_obj = FI_WAIT_FD};
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_FD, .size = 64};
	long r;

	if ((r = fi_fabric(info->fabric_attr, &fabric, NULL)))
		die("fi_fabric", r);
	if ((r = fi_eq_open(fabric, &eqa, &eq, NULL)))
		die("fi_eq_open", r);
	if ((r = fi_domain(fabric, info, &domain, NULL)))
		die("fi_domain", r);
	if ((r = fi_cq_open(domain, &cqa, &txcq, NULL)) ||
	    (r = fi_cq_open(domain, &cqa, &rxcq, NULL)))
		die("fi_cq_open", r);
	if (posix_memalign((void **)&area, 4096, sizeof *area))
		die("posix_memalign", 0);
	memset(area, 0, sizeof *area);
	r = fi_mr_reg(domain, area, sizeof *area, FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE, 0,
		      0, 0, &mr, NULL);
	if (r)
		die("fi_mr_reg", r);
	if (posix_memalign((void **)&bulk, 4096, (size_t)BURST_N * BURST_LEN))
		die("posix_memalign", 0);
	memset(bulk, 0, (size_t)BURST_N * BURST_LEN);
	r = fi_mr_reg(domain, bulk, (size_t)BURST_N * BURST_LEN, FI_SEND | FI_RECV, 0, 0, 0,
		      &bulk_mr, NULL);
	if (r)
		die("fi_mr_reg", r);
}

static uint8_t burst_byte(uint32_t k, size_t i)
{
	return (uint8_t)(k * 101u + i * 7u + (i >> 12) + 3u);
}

/* B: the burst's messages, at most BURST_INFLIGHT sends outstanding. */
static void burst_send(void)
{
	struct fi_cq_msg_entry c;
	long r, t0 = now_ms();
	int k = 0, out = 0;

	for (int m = 0; m < BURST_N; m++)
		for (size_t i = 0; i < BURST_LEN; i++)
			bulk[(size_t)m * BURST_LEN + i] = burst_byte((uint32_t)m, i);
	while (k < BURST_N || out) {
		if (now_ms() - t0 > BOUND_MS)
			die("burst: sends not completed", k);
		if (k < BURST_N && out < BURST_INFLIGHT) {
			uint8_t *b = bulk + (size_t)k * BURST_LEN;

			r = fi_send(ep, b, BURST_LEN, fi_mr_desc(bulk_mr), 0, b);
			if (r == 0) {
				k++;
				out++;
				continue;
			}
			if (r != -FI_EAGAIN)
				die("burst: fi_send", r);
		}
		r = fi_cq_read(txcq, &c, 1);
		if (r == 1)
			out--;
		else if (r != -FI_EAGAIN)
			die("burst: send completion", r);
	}
}

/* A: BURST_N receives posted at once, each completed by its message. */
static void test_burst(void)
{
	struct fi_cq_msg_entry c;
	size_t bad = 0, misplaced = 0;
	long r, t0;

	for (int k = 0; k < BURST_N; k++) {
		uint8_t *b = bulk + (size_t)k * BURST_LEN;

		r = fi_recv(ep, b, BURST_LEN, fi_mr_desc(bulk_mr), 0, b);
		if (r)
			die("burst: fi_recv", r);
	}
	send_msg(K_READY, T_BURST);
	t0 = now_ms();
	for (int k = 0; k < BURST_N; k++) {
		uint8_t *b = bulk + (size_t)k * BURST_LEN;

		while ((r = fi_cq_read(rxcq, &c, 1)) == -FI_EAGAIN)
			if (now_ms() - t0 > BOUND_MS)
				die("burst: receive not seen", k);
		if (r != 1)
			die("burst: fi_cq_read", r);
		misplaced += c.op_context != b || c.len != BURST_LEN;
		for (size_t i = 0; i < BURST_LEN; i++)
			bad += b[i] != burst_byte((uint32_t)k, i);
	}
	check(misplaced == 0, "burst: 300 messages, each completing its own receive in order");
	check(bad == 0, "burst: every byte of the 300 messages of 64 KiB as sent");
}

static void open_ep(struct fi_info *fi)
{
	long r;

	if ((r = fi_endpoint(domain, fi, &ep, NULL)))
		die("fi_endpoint", r);
	if ((r = fi_ep_bind(ep, &eq->fid, 0)) || (r = fi_ep_bind(ep, &txcq->fid, FI_TRANSMIT)) ||
	    (r = fi_ep_bind(ep, &rxcq->fid, FI_RECV)))
		die("fi_ep_bind", r);
	if ((r = fi_enable(ep)))
		die("fi_enable", r);
}

static struct fi_info *hints_new(const char *prov)
{
	struct fi_info *h = fi_allocinfo();

	h->ep_attr->type = FI_EP_MSG;
	h->caps = FI_MSG | FI_RMA;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->fabric_attr->prov_name = strdup(prov);
	return h;
}

static void connect_server(const char *prov, const char *port)
{
	struct fi_info *h = hints_new(prov);
	struct fid_pep *pep;
	struct fi_eq_cm_entry e;
	long r;

	if ((r = fi_getinfo(FI_VERSION(1, 17), NULL, port, FI_SOURCE, h, &info)))
		die("fi_getinfo", r);
	open_common();
	if ((r = fi_passive_ep(fabric, info, &pep, NULL)) || (r = fi_pep_bind(pep, &eq->fid, 0)) ||
	    (r = fi_listen(pep)))
		die("fi_listen", r);
	printf("listening\n");
	fflush(stdout);
	wait_event(FI_CONNREQ, &e);
	conn_info = e.info;
	open_ep(conn_info);
	post_recv(0);
	if ((r = fi_accept(ep, NULL, 0)))
		die("fi_accept", r);
	wait_event(FI_CONNECTED, &e);
	fi_freeinfo(h);
	(void)pep; /* closed at exit */
}

static void connect_client(const char *prov, const char *addr, const char *port)
{
	struct fi_info *h = hints_new(prov);
	struct fi_eq_cm_entry e;
	long r;

	if ((r = fi_getinfo(FI_VERSION(1, 17), addr, port, 0, h, &info)))
		die("fi_getinfo", r);
	open_common();
	open_ep(info);
	if ((r = fi_connect(ep, info->dest_addr, NULL, 0)))
		die("fi_connect", r);
	wait_event(FI_CONNECTED, &e);
	fi_freeinfo(h);
}

/* B: answers each K_READY (after DELAY_MS, or with the marker) until K_BYE. */
static void server_loop(void)
{
	struct fi_cq_msg_entry c;
	uint64_t addr = 0, key = 0;
	struct timespec d = {0, DELAY_MS * 1000000L};
	long r, t0;

	for (int slot = 0;; slot ^= 1) {
		struct msg *m = poll_recv();
		uint32_t kind = m->kind, test = m->test;

		if (kind == K_HELLO) {
			addr = m->addr;
			key = m->key;
		}
		post_recv(slot ^ 1);
		if (kind == K_BYE)
			break;
		if (kind != K_READY)
			continue;
		if (test == T_BURST) {
			burst_send();
			continue;
		}
		if (test != T_THREAD)
			nanosleep(&d, NULL);
		send_msg(K_DATA, test);
		if (test != T_THREAD)
			continue;
		/* after the message, in order: when A sees it, it is there */
		area->src = test;
		r = fi_write(ep, &area->src, sizeof area->src, desc(), 0, addr, key, &area->src);
		if (r)
			die("fi_write", r);
		t0 = now_ms();
		while ((r = fi_cq_read(txcq, &c, 1)) == -FI_EAGAIN)
			if (now_ms() - t0 > BOUND_MS)
				die("write completion not seen", 0);
		if (r != 1)
			die("write completion", r);
	}
	check(1, "served every test");
}

/* A: one receive by fi_cq_sread. */
static void test_sread(void)
{
	struct fi_cq_msg_entry c;
	long r, t0;

	post_recv(0);
	send_msg(K_READY, T_SREAD);
	t0 = now_ms();
	r = fi_cq_sread(rxcq, &c, 1, NULL, BOUND_MS);
	if (r == -FI_EAGAIN)
		die("fi_cq_sread: no completion within the bound (lost wake-up)", now_ms() - t0);
	if (r != 1)
		die("fi_cq_sread", r);
	t0 = now_ms() - t0;
	printf("     sread: woke after %ld ms\n", t0);
	check(t0 >= MIN_WAIT_MS, "sread: it blocked until B sent");
	/* a read after the timed-out wait finds it too: that is a lost wake-up */
	check(t0 < BOUND_MS / 2, "sread: the completion woke it, not its timeout");
	check_data(c.op_context, T_SREAD, "sread: the message's data");
}

/*
 * Waits for one receive the fi_trywait way: trywait, poll the fd (bounded),
 * read; again on a spurious wake-up. Returns the wake-ups by the fd.
 */
static int trywait_read(int fd, int bound_ms, struct fi_cq_msg_entry *c, const char *what)
{
	struct fid *fids[1] = {&rxcq->fid};
	int wakes = 0;
	long r, t0 = now_ms();

	for (;;) {
		r = fi_trywait(fabric, fids, 1);
		if (r == FI_SUCCESS) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			int n = poll(&p, 1, bound_ms);
			if (n == 0) {
				printf("FAIL fi_wait_check A: %s: the fd stayed silent %d ms after "
				       "fi_trywait (lost wake-up)\n",
				       what, bound_ms);
				exit(1);
			}
			if (n < 0 && errno != EINTR)
				die("poll", -errno);
			wakes++;
		} else if (r != -FI_EAGAIN) {
			die("fi_trywait", r);
		}
		r = fi_cq_read(rxcq, c, 1);
		if (r == 1)
			return wakes;
		if (r != -FI_EAGAIN)
			die("fi_cq_read", r);
		if (now_ms() - t0 > BOUND_MS)
			die("trywait: no completion within the bound", 0);
	}
}

static void test_trywait(int fd)
{
	struct fi_cq_msg_entry c;
	long t0;
	int wakes;

	post_recv(1);
	send_msg(K_READY, T_TRYWAIT);
	t0 = now_ms();
	wakes = trywait_read(fd, BOUND_MS, &c, "trywait");
	printf("     trywait: woke after %ld ms, %d wake-up(s) by the fd\n", now_ms() - t0, wakes);
	check(wakes >= 1, "trywait: fi_trywait armed and the fd woke the poll");
	check(now_ms() - t0 >= MIN_WAIT_MS, "trywait: it waited until B sent");
	check_data(c.op_context, T_TRYWAIT, "trywait: the message's data");
}

static atomic_int armed;

static void *poster(void *arg)
{
	long t0 = now_ms();

	(void)arg;
	while (!atomic_load(&armed))
		if (now_ms() - t0 > BOUND_MS)
			return NULL;
	post_recv(0);
	return NULL;
}

static void test_thread(int fd)
{
	struct fid *fids[1] = {&rxcq->fid};
	struct fi_cq_msg_entry c;
	pthread_t th;
	long r, t0 = now_ms();

	send_msg(K_READY, T_THREAD);
	/* B's message, then its marker, are in our memory (no receive yet) */
	while (area->marker != T_THREAD) {
		if (now_ms() - t0 > BOUND_MS)
			die("the marker did not arrive", (long)area->marker);
		sched_yield();
	}
	printf("     thread: marker after %ld ms\n", now_ms() - t0);
	/* the message waits in the ring: the CQ stays empty */
	t0 = now_ms();
	while ((r = fi_trywait(fabric, fids, 1)) == -FI_EAGAIN) {
		if ((r = fi_cq_read(rxcq, &c, 1)) != -FI_EAGAIN)
			die("thread: a completion without a receive", r);
		if (now_ms() - t0 > BOUND_MS)
			die("fi_trywait never succeeded", 0);
	}
	if (r)
		die("fi_trywait", r);
	if (pthread_create(&th, NULL, poster, NULL))
		die("pthread_create", 0);
	atomic_store(&armed, 1);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n = poll(&p, 1, THREAD_BOUND_MS);
	pthread_join(th, NULL);
	if (n == 0) {
		printf("FAIL fi_wait_check A: thread: the fd stayed silent %d ms after another "
		       "thread's receive completed (lost wake-up)\n",
		       THREAD_BOUND_MS);
		exit(1);
	}
	check(n == 1, "thread: the fd woke the poll");
	trywait_read(fd, BOUND_MS, &c, "thread");
	check_data(c.op_context, T_THREAD, "thread: the message's data");
}

/*
 * Reads rxcq (empty) from t0 until stop_us, or a completion when want is
 * set: the yields of the reads that ended before t0 + yield_us in *early,
 * the others' in *late. Returns the completion's read result.
 */
static long yield_reads(long t0, long stop_us, int want, struct fi_cq_msg_entry *c, long *early,
			long *late, long *reads)
{
	long r, before, t;

	for (;;) {
		before = yields;
		r = fi_cq_read(rxcq, c, 1);
		t = now_us();
		(*reads)++;
		*(t - t0 < yield_us ? early : late) += yields - before;
		if (r != -FI_EAGAIN)
			return r;
		if ((!want && t >= stop_us) || t - t0 > BOUND_MS * 1000L)
			return r;
	}
}

/* A: the yields of fi_cq_read spinning on an empty CQ (-y). */
static void test_yield(void)
{
	struct fi_cq_msg_entry c;
	long r, t0, e1 = 0, l1 = 0, n1 = 0, e2 = 0, l2 = 0, n2 = 0;

	post_recv(0);
	send_msg(K_READY, T_YIELD);
	count_yields = 1;
	/* the last read of rxcq returned a completion: its empty run starts now */
	t0 = now_us();
	r = yield_reads(t0, 0, 1, &c, &e1, &l1, &n1);
	if (r != 1)
		die("yield: no completion within the bound", r);
	t0 = now_us() - t0;
	printf(
	    "     yield: %ld reads in %ld ms; yields: %ld within %ld us of the first, %ld after\n",
	    n1, t0 / 1000, e1, yield_us, l1);
	check_data(c.op_context, T_YIELD, "yield: the message's data");
	check(t0 >= 2 * yield_us, "yield: the CQ read empty for over twice the threshold");
	check(e1 == 0, "yield: no yield within the threshold");
	check(l1 > 0, "yield: empty reads past the threshold yield");
	/* after a completion: the threshold counts from the next empty read */
	t0 = now_us();
	yield_reads(t0, t0 + 3 * yield_us / 2, 0, &c, &e2, &l2, &n2);
	count_yields = 0;
	printf("     yield: after the completion %ld reads; yields: %ld within the threshold, "
	       "%ld after\n",
	       n2, e2, l2);
	check(e2 == 0, "yield: a completion starts the count over");
	check(l2 > 0, "yield: and past the threshold the reads yield again");
}

static void client_run(void)
{
	int fd = -1;
	long r = fi_control(&rxcq->fid, FI_GETWAIT, &fd);

	if (r)
		die("fi_control(FI_GETWAIT)", r);
	check(fd >= 0, "FI_GETWAIT gives a file descriptor");
	send_msg(K_HELLO, 0);
	test_sread();
	test_trywait(fd);
	test_thread(fd);
	if (yield_us > 0)
		test_yield();
	if (burst)
		test_burst();
	send_msg(K_BYE, 0);
}

int main(int argc, char **argv)
{
	const char *prov = "mrc", *port = "47611";
	int o;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((o = getopt(argc, argv, "P:p:y:b")) != -1) {
		switch (o) {
		case 'P':
			port = optarg;
			break;
		case 'p':
			prov = optarg;
			break;
		case 'y':
			yield_us = strtol(optarg, NULL, 10);
			break;
		case 'b':
			burst = 1;
			break;
		default:
			fprintf(stderr, "usage: %s [-P PORT] [-p PROVIDER] [-y US] [-b] [ADDR]\n",
				argv[0]);
			return 2;
		}
	}
	alarm(60); /* a hang anywhere ends the run (SIGALRM: failure) */
	if (optind < argc) {
		role = "A";
		connect_client(prov, argv[optind], port);
		client_run();
	} else {
		connect_server(prov, port);
		server_loop();
	}
	fi_shutdown(ep, 0);
	fi_close(&ep->fid);
	fi_close(&mr->fid);
	fi_close(&bulk_mr->fid);
	fi_close(&rxcq->fid);
	fi_close(&txcq->fid);
	fi_close(&domain->fid);
	fi_close(&eq->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	if (conn_info)
		fi_freeinfo(conn_info);
	printf("fi_wait_check: %s: %d checks passed\n", role, checks);
	return 0;
}
