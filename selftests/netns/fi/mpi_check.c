/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/*
 * mpi_check: a small MPI program whose every result is checked.
 *
 *   - MPI_Allreduce (sum) of int64 and double vectors of 1 to 1M elements,
 *     each element known in closed form on every rank;
 *   - point-to-point between rank 0 and every other rank: messages of
 *     1 B to 4 MiB (eager, segmented and rendezvous sizes of ofi_rxm), each
 *     byte a function of (size, rank, index), echoed back transformed, both
 *     directions checked byte for byte; MPI_ANY_SOURCE/ANY_TAG matching;
 *   - MPI_Bcast and MPI_Barrier.
 *
 *   mpi_check [ROUNDS [STOPFILE]]
 *
 * runs the whole sequence ROUNDS times (default 1); with STOPFILE, ROUNDS is
 * a bound and the job ends after the first round at whose end STOPFILE
 * exists (rank 0 looks, everyone follows), so that a test can keep a job
 * running until its fault has been seen mid-run, without guessing a time.
 *
 * Prints "mpi_check: rank R of N: C checks passed" (and, with STOPFILE,
 * "mpi_check: K rounds" from rank 0) and exits 0, or names the first failed
 * check and calls MPI_Abort.
 */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
static long checks;

static void fail(const char *what, long a, long b)
{
	fprintf(stderr, "mpi_check: rank %d: %s: got %ld, want %ld\n", rank, what, a, b);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static uint8_t byte_of(size_t size, int r, size_t i)
{
	return (uint8_t)(size * 7u + (size_t)r * 131u + i * 13u + 1u);
}

static void allreduce(int n)
{
	int64_t *iv = malloc(sizeof *iv * (size_t)n), *io = malloc(sizeof *io * (size_t)n);
	double *dv = malloc(sizeof *dv * (size_t)n), *dout = malloc(sizeof *dout * (size_t)n);
	for (int i = 0; i < n; i++) {
		iv[i] = (int64_t)i * (rank + 1);
		dv[i] = 0.5 * i + rank;
	}
	MPI_Allreduce(iv, io, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(dv, dout, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	int64_t rsum = (int64_t)nranks * (nranks + 1) / 2;
	for (int i = 0; i < n; i++) {
		if (io[i] != (int64_t)i * rsum)
			fail("allreduce int64", (long)io[i], (long)((int64_t)i * rsum));
		double want = 0.5 * i * nranks + (double)nranks * (nranks - 1) / 2;
		if (dout[i] != want)
			fail("allreduce double", (long)dout[i], (long)want);
	}
	checks += 2;
	free(iv);
	free(io);
	free(dv);
	free(dout);
}

static void pingpong(size_t size)
{
	uint8_t *buf = malloc(size);
	if (rank == 0) {
		for (int peer = 1; peer < nranks; peer++) {
			for (size_t i = 0; i < size; i++)
				buf[i] = byte_of(size, 0, i);
			MPI_Send(buf, (int)size, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
			MPI_Status st;
			memset(buf, 0, size);
			MPI_Recv(buf, (int)size, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
				 MPI_COMM_WORLD, &st);
			int got;
			MPI_Get_count(&st, MPI_BYTE, &got);
			if (st.MPI_SOURCE != peer || st.MPI_TAG != 8 || (size_t)got != size)
				fail("echo envelope (source)", st.MPI_SOURCE, peer);
			for (size_t i = 0; i < size; i++)
				if (buf[i] !=
				    (uint8_t)(byte_of(size, 0, i) ^ byte_of(size, peer, i)))
					fail("echo byte", (long)i, (long)size);
			checks++;
		}
	} else {
		MPI_Status st;
		MPI_Recv(buf, (int)size, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &st);
		for (size_t i = 0; i < size; i++)
			if (buf[i] != byte_of(size, 0, i))
				fail("received byte", (long)i, (long)size);
		for (size_t i = 0; i < size; i++)
			buf[i] ^= byte_of(size, rank, i);
		MPI_Send(buf, (int)size, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
		checks++;
	}
	free(buf);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	/* ROUNDS: the whole argument a decimal number from 1 to 1000000 ("5x",
	 * " 5", "" and overflows are refused, not read as a prefix or 0). */
	long rounds = 1;
	if (argc > 1) {
		char *end = NULL;
		errno = 0;
		rounds = strtol(argv[1], &end, 10);
		if (errno || end == argv[1] || *end || argv[1][0] < '0' || argv[1][0] > '9' ||
		    rounds > 1000000)
			rounds = 0;
	}
	const char *stop = argc > 2 ? argv[2] : NULL;
	if (rounds < 1 || argc > 3) {
		if (rank == 0)
			fprintf(stderr,
				"usage: mpi_check [ROUNDS (1-1000000) [STOPFILE]]: bad '%s'\n",
				argc > 1 ? argv[1] : "");
		MPI_Finalize();
		return 2;
	}
	long r = 0;
	while (r < rounds) {
		for (int n = 1; n <= 1 << 20; n *= 4)
			allreduce(n);
		for (size_t s = 1; s <= (size_t)4 << 20; s *= 2) {
			pingpong(s);
			pingpong(s + 3);
		}
		r++;
		if (stop) {
			int seen = rank == 0 && access(stop, F_OK) == 0;
			MPI_Bcast(&seen, 1, MPI_INT, 0, MPI_COMM_WORLD);
			if (seen)
				break;
		}
	}
	long v = rank == 0 ? 0x5eed : 0;
	MPI_Bcast(&v, 1, MPI_LONG, 0, MPI_COMM_WORLD);
	if (v != 0x5eed)
		fail("bcast", v, 0x5eed);
	checks++;
	MPI_Barrier(MPI_COMM_WORLD);
	printf("mpi_check: rank %d of %d: %ld checks passed\n", rank, nranks, checks);
	if (stop && rank == 0)
		printf("mpi_check: %ld rounds\n", r);
	MPI_Finalize();
	return 0;
}
