/*
 * test_cluster.c — the emulator's thread-block clusters (emu.c "clusters",
 * emu_tma.c's remote arrivals and multicast), driven by kernels written in
 * C against the host ABI.
 *
 * ids: every CTA of a grid of clusters reads the %cluster_* registers
 * (PTX ISA, "Special Registers": %cluster_ctarank is the CTA's linear rank
 * in its cluster, x fastest; %clusterid the cluster's index in the grid;
 * %cluster_ctaid the CTA's in the cluster), stores its rank into each
 * peer's shared memory through mapa (st.shared::cluster), and after a
 * cluster barrier finds its peers' ranks in its own; a thread's local
 * store before the barrier and another's load after it are no race.
 *
 * pipe: the multicast pipeline of the sm_90a GEMM's cluster of 2
 * (DeepGEMM's sm90_fp8_gemm_1d2d.cuh: each CTA loads half of the shared
 * operand's tile and multicasts it to both; the empty barrier counts the
 * consumers of both CTAs, each arriving on every CTA's barrier,
 * empty_barrier_arrive): thread 0 of each CTA is the producer, warp 1 the
 * consumers, which check every byte of every stage against the tensor
 * (zero past its last row); the barriers' init is fenced and published by
 * a cluster barrier, and the kernel ends with one.
 *
 * Then each rule must report: a consumer that frees only its own CTA's
 * stage (the peer producer overwrites a stage still read: racecheck), a
 * ctaMask naming a CTA outside the cluster, no final cluster barrier (a
 * peer touches shared memory of a CTA that may have gone), no
 * fence.mbarrier_init, a divergent cluster barrier, a wait with no arrive,
 * a grid not a multiple of the cluster, a cluster of 9 (16 only with the
 * non-portable opt-in), mapa to a rank outside the cluster.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "codegen.h"
#include "emu.h"
#include "emu_int.h"

enum { THREADS = 64 };
static int mode;

/* ---- ids and DSMEM ------------------------------------------------------ */
enum { MAXCTA = 32 };
static uint32_t ids[MAXCTA][6];
static int id_bad;

static void
ids_kernel(void **args)
{
	(void)args;
	unsigned tid = precc_emu_sreg(0), cx = precc_emu_sreg(1), cy = precc_emu_sreg(2);
	unsigned gx = precc_emu_sreg(3), rank = precc_emu_sreg(4), n = precc_emu_sreg(5);
	uint32_t *sm = precc_emu_shared(0, 4 * 64 + 4 * THREADS);
	if (tid == 0) {
		uint32_t *o = ids[cy * gx + cx];
		for (unsigned i = 0; i < 6; i++)
			o[i] = precc_emu_sreg(4 + i);
	}
	/* every CTA of the cluster has started (its shared memory exists)
	 * before a peer touches it: CUDA's cluster.sync() before DSMEM use */
	precc_emu_cluster_arrive(3);
	precc_emu_cluster_wait();
	/* thread t < n stores this CTA's rank + 1 into slot `rank` of peer t */
	if (tid < n) {
		uint32_t *peer = precc_emu_mapa(&sm[rank], mode == 1 ? n : tid);
		*(uint32_t *)precc_emu_check(peer, 4, 4, 1) = rank + 1;
	}
	*(uint32_t *)precc_emu_check(&sm[64 + tid], 4, 4, 1) = tid * 7 + rank;
	precc_emu_cluster_arrive(1);
	precc_emu_cluster_wait();
	if (tid < n && *(uint32_t *)precc_emu_check(&sm[tid], 4, 4, 0) != tid + 1)
		__atomic_add_fetch(&id_bad, 1, __ATOMIC_RELAXED);
	unsigned o = (tid + 1) % THREADS;
	if (*(uint32_t *)precc_emu_check(&sm[64 + o], 4, 4, 0) != o * 7 + rank)
		__atomic_add_fetch(&id_bad, 1, __ATOMIC_RELAXED);
	/* nobody may leave while a peer may still store into it */
	precc_emu_cluster_arrive(2);
	precc_emu_cluster_wait();
}

/* the registers each CTA must read, and the launch's errors (-1: refused) */
static int
run_ids(unsigned gx, unsigned gy, unsigned kx, unsigned ky, int np, int m, char *msg, size_t n)
{
	mode = m, id_bad = 0;
	memset(ids, 0xff, sizeof ids);
	emu_reset();
	emu_set_cluster(kx, ky, np);
	if (emu_launch(ids_kernel, NULL, THREADS, gx, gy, 0))
		return emu_errors(msg, n) ? -1 : (snprintf(msg, n, "emu_launch refused the grid"), -2);
	int e = emu_errors(msg, n);
	if (e)
		return e;
	for (unsigned cy = 0; cy < gy; cy++)
		for (unsigned cx = 0; cx < gx; cx++) {
			const uint32_t *o = ids[cy * gx + cx];
			uint32_t want[6] = {cx % kx + cy % ky * kx, kx * ky, cx / kx, cy / ky, cx % kx, cy % ky};
			for (int i = 0; i < 6; i++)
				if (o[i] != want[i])
					return snprintf(msg, n, "CTA (%u,%u) register %d = %u, want %u", cx, cy, 4 + i,
					                o[i], want[i]), -3;
		}
	if (id_bad)
		return snprintf(msg, n, "%d threads read a wrong value after the cluster barrier", id_bad), -3;
	return 0;
}

/* ---- the multicast pipeline --------------------------------------------- */
enum { STAGES = 2, HALF = 16, BOXC = 64, ROWS = 5 * 2 * HALF - 8, NT = 5,
       HALF_BYTES = HALF * BOXC, STAGE = 2 * HALF_BYTES };
static uint8_t tensor[ROWS * BOXC] __attribute__((aligned(64)));
static unsigned char tmap[128] __attribute__((aligned(64)));
static int bad_bytes;

static void
pipe_kernel(void **args)
{
	(void)args;
	unsigned tid = precc_emu_sreg(0), rank = precc_emu_sreg(4), n = precc_emu_sreg(5);
	uint8_t *sm = precc_emu_shared(0, STAGES * STAGE + 16 * STAGES);
	uint64_t *full = (uint64_t *)(sm + STAGES * STAGE), *empty = full + STAGES;

	if (tid == 0) {
		for (int s = 0; s < STAGES; s++) {
			precc_emu_mbar_init(&full[s], 1);
			/* one arrival per consumer of every CTA of the cluster */
			precc_emu_mbar_init(&empty[s], mode == 1 ? 32 : 32 * n);
		}
		if (mode != 4)
			precc_emu_fence_mbar_init();
	}
	/* the init is published to the cluster before any peer uses it */
	precc_emu_cluster_arrive(1);
	precc_emu_cluster_wait();
	for (int t = 0; t < NT; t++) {
		int s = t % STAGES, round = t / STAGES;
		if (tid == 0) {
			precc_emu_mbar_try_wait(&empty[s], (uint32_t)(round & 1) ^ 1);
			/* this CTA's full barrier gets both halves: its own and the peer's */
			precc_emu_mbar_arrive_expect_tx(&full[s], STAGE);
			precc_emu_tma_load_2d_mc(sm + (uint64_t)s * STAGE + rank * HALF_BYTES, tmap, 0,
			                         (int32_t)(t * 2 * HALF + (int)rank * HALF), &full[s],
			                         mode == 2 ? 0x5u : (1u << n) - 1);
		} else if (tid >= 32) {
			unsigned l = tid - 32;
			precc_emu_mbar_try_wait(&full[s], (uint32_t)(round & 1));
			int gr = t * 2 * HALF + (int)l;
			for (int c = 0; c < BOXC; c++) {
				uint8_t want = gr < ROWS ? tensor[gr * BOXC + c] : 0;
				uint8_t *q = precc_emu_check(sm + (uint64_t)s * STAGE + l * BOXC + c, 1, 1, 0);
				if (*q != want)
					__atomic_add_fetch(&bad_bytes, 1, __ATOMIC_RELAXED);
			}
			/* the stage is free once every CTA's consumers are done with it:
			 * each arrives on each CTA's empty barrier (its own only: mode 1) */
			for (unsigned r = 0; r < n; r++)
				if (mode != 1 || r == rank)
					precc_emu_mbar_arrive_cluster(precc_emu_mapa(&empty[s], r));
		}
	}
	if (mode == 5 && rank == 1 && tid == 7) {
		precc_emu_cluster_arrive(9);
		precc_emu_cluster_wait();
		return;
	}
	if (mode == 6 && rank == 0 && tid == 3) {
		precc_emu_cluster_wait();
		return;
	}
	if (mode != 3) {
		precc_emu_cluster_arrive(2);
		precc_emu_cluster_wait();
	}
}

static int
run_pipe(unsigned gx, int m, char *msg, size_t n)
{
	CodegenTmap t = {.param = 0, .elem_bytes = 1, .rows = ROWS, .cols = BOXC,
	                 .box_rows = HALF, .box_cols = BOXC, .swizzle = 0};
	char err[200];

	mode = m, bad_bytes = 0;
	emu_reset();
	emu_region(tensor, sizeof tensor, 0, "tensor");
	emu_set_cluster(2, 1, 0);
	if (emu_tmap_encode(tmap, &t, tensor, 0, err, sizeof err))
		return snprintf(msg, n, "encode: %s", err), -1;
	if (emu_launch(pipe_kernel, NULL, THREADS, gx, 1, 0))
		return snprintf(msg, n, "emu_launch refused the grid"), -1;
	return emu_errors(msg, n);
}

int
main(void)
{
	char msg[600];
	int fails = 0;

	emu_init();
	for (int i = 0; i < ROWS * BOXC; i++)
		tensor[i] = (uint8_t)(i * 29 + i / BOXC * 3 + 1);

	/* registers and DSMEM: clusters of 2 x 1, 2 x 2, 1 x 1 (no cluster set), 16 x 1 */
	static const unsigned g[][5] = {{4, 1, 2, 1, 0}, {4, 2, 2, 2, 0}, {6, 2, 3, 1, 0},
	                                {16, 1, 16, 1, 1}};
	for (int i = 0; i < 4; i++) {
		int e = run_ids(g[i][0], g[i][1], g[i][2], g[i][3], (int)g[i][4], 0, msg, sizeof msg);
		if (e) {
			printf("FAIL ids grid %ux%u cluster %ux%u: %d: %s\n", g[i][0], g[i][1], g[i][2],
			       g[i][3], e, msg);
			fails++;
		} else
			printf("grid %2ux%u cluster %2ux%u: %%cluster_* as the PTX ISA numbers them; "
			       "mapa + st.shared::cluster lands in each peer; clean\n", g[i][0], g[i][1],
			       g[i][2], g[i][3]);
	}
	for (unsigned gx = 2; gx <= 4; gx += 2) {
		int e = run_pipe(gx, 0, msg, sizeof msg);
		if (e || bad_bytes) {
			printf("FAIL multicast pipeline on %u CTAs: %d errors, %d wrong bytes; %s\n", gx, e,
			       bad_bytes, e ? msg : "");
			fails++;
		} else
			printf("multicast pipeline, %u CTAs in clusters of 2: every byte of every stage in "
			       "both CTAs, zero past the edge; racecheck/synccheck/memcheck clean\n", gx);
	}
	static const char *const want[] = {NULL, "racecheck", "outside the cluster of 2",
	                                   "not ordered before the CTA's exit",
	                                   "no fence.mbarrier_init", "divergent barrier.cluster",
	                                   "wait with no barrier.cluster.arrive"};
	for (int m = 1; m <= 6; m++) {
		/* mode 3's check either way round: the CTA left first, or the peer */
		int e = run_pipe(4, m, msg, sizeof msg);
		int ok = e > 0 && (strstr(msg, want[m]) || (m == 3 && strstr(msg, "which has exited")));
		if (!ok) {
			printf("FAIL pipeline check %d: %d errors, first: %s (want \"%s\")\n", m, e, msg,
			       want[m]);
			fails++;
		} else
			printf("pipeline check %d reports: %s\n", m, msg);
	}
	static const struct { unsigned gx, gy, kx, ky; int np, m; const char *want; } bad[] = {
		{3, 1, 2, 1, 0, 0, "not a multiple of the cluster"},
		{9, 1, 9, 1, 0, 0, "over the 8 a cluster may have"},
		{16, 1, 16, 1, 0, 0, "over the 8 a cluster may have"},
		{32, 1, 32, 1, 1, 0, "over the 16 a cluster may have"},
		{4, 1, 2, 1, 0, 1, "mapa: CTA rank 2 outside the cluster of 2"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		int e = run_ids(bad[i].gx, bad[i].gy, bad[i].kx, bad[i].ky, bad[i].np, bad[i].m, msg,
		                sizeof msg);
		if (e == 0 || !strstr(msg, bad[i].want)) {
			printf("FAIL launch check %zu: %d, %s (want \"%s\")\n", i, e, msg, bad[i].want);
			fails++;
		} else
			printf("launch check %zu reports: %s\n", i, msg);
	}
	printf(fails ? "test_cluster: %d FAILED\n" : "test_cluster: all passed\n", fails);
	return fails != 0;
}
