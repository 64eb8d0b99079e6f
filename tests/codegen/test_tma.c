/*
 * test_tma.c — the emulator's mbarrier and TMA (emu_tma.c) driven by a
 * kernel written in C: one producer thread streams the boxes of a tensor
 * through a ring of 4 stages (full/empty barriers, CUTLASS's
 * PipelineTmaAsync protocol), a warp of consumers checks every byte of
 * every stage, for each swizzle mode and with boxes past the tensor's
 * edge (zero fill). The expected byte is placed by CuTe's Swizzle<B,4,3>
 * as include/cute/swizzle.hpp writes it (yyy_msk = ((1 << B) - 1) <<
 * (M + S), offset ^ ((offset & yyy_msk) >> S), M = 4, S = 3), not by the
 * model's function. Then each check of the model must report: a missing
 * expect_tx (a deadlock), a thread arriving twice in a phase, a misaligned
 * destination.
 *
 * The epilogue's path out (issue 28 §3): one warp stmatrix.x4 (and .trans)
 * four 8 x 8 matrices into a 128-byte-swizzled 64-row x 128-byte box, each
 * element where the PTX ISA's fragment says (lane l's register i holds
 * matrix i's row l/4, columns 2(l%4) and 2(l%4)+1: "Warp-level matrix
 * store instruction: stmatrix", the layout of ldmatrix's "Matrix fragments"
 * figure), placed here element by element, not by the model's gather; the
 * other warps fill the rest of the box with plain stores; every thread
 * fence.proxy.async, a barrier, thread 0 TMA-stores the box past the
 * tensor's edge, commits and waits (wait_group.read 0): the tensor gets the
 * box's bytes inside it only. Then the model must report a store without
 * the fences, a store into the box before the wait, and a thread that
 * exits with its store in flight.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "codegen.h"
#include "emu.h"
#include "emu_int.h"

enum { STAGES = 4, ROWS = 100, COLS = 208, BOXR = 32, THREADS = 64 };

static uint8_t tensor[ROWS * COLS] __attribute__((aligned(64)));
static unsigned char tmap[128] __attribute__((aligned(64)));
static int box_cols, swizzle, mode, bad_bytes;

static uint64_t
cute_swizzle(uint64_t off, int sw)
{
	int B = sw == 128 ? 3 : sw == 64 ? 2 : sw == 32 ? 1 : 0;
	uint64_t yyy = ((1u << B) - 1) << (4 + 3);
	return off ^ ((off & yyy) >> 3);
}

static void
kernel(void **args)
{
	(void)args;
	unsigned tid = (unsigned)precc_emu_sreg(0);
	uint32_t box = (uint32_t)(box_cols * BOXR);
	uint8_t *sm = precc_emu_shared(0, STAGES * (uint64_t)box + 64 + 1024);
	uint8_t *ring = sm + 1024 - (uintptr_t)sm % 1024;     /* atom-aligned */
	uint64_t *full = (uint64_t *)(sm + STAGES * (uint64_t)box + (ring - sm)), *empty = full + STAGES;
	int ntr = (ROWS + BOXR - 1) / BOXR + 1, ntc = (COLS + box_cols - 1) / box_cols;

	if (ring + STAGES * box + 2 * STAGES * 8 > sm + STAGES * (uint64_t)box + 64 + 1024)
		abort();
	if (tid == 0)
		for (int s = 0; s < STAGES; s++) {
			precc_emu_mbar_init(&full[s], 1);
			precc_emu_mbar_init(&empty[s], 32);
		}
	precc_emu_fence_mbar_init();
	precc_emu_barrier(1);
	for (int t = 0; t < ntr * ntc; t++) {
		int s = t % STAGES, round = t / STAGES;
		int c0 = t % ntc * box_cols, c1 = t / ntc * BOXR - (t / ntc == ntr - 1 ? BOXR / 2 : 0);
		if (tid == 0) {
			precc_emu_mbar_try_wait(&empty[s], (uint32_t)(round & 1) ^ 1);
			if (!(mode == 1 && t == 5))
				precc_emu_mbar_arrive_expect_tx(&full[s], box);
			/* a second arrival while the phase still waits for its bytes:
			 * always in the same phase (a consumer's second arrival was not,
			 * when its first one happened to complete the phase) */
			if (mode == 2 && t == 2)
				precc_emu_mbar_arrive(&full[s]);
			uint8_t *dst = ring + (uint64_t)s * box + (mode == 3 ? 128 : 0);
			precc_emu_tma_load_2d(dst, tmap, c0, c1, &full[s]);
		} else if (tid >= 32) {
			unsigned l = tid - 32;
			precc_emu_mbar_try_wait(&full[s], (uint32_t)(round & 1));
			for (int r = (int)l; r < BOXR; r += 32)
				for (int c = 0; c < box_cols; c++) {
					int gr = c1 + r, gc = c0 + c;
					uint8_t want = gr >= 0 && gr < ROWS && gc < COLS ? tensor[gr * COLS + gc] : 0;
					uint8_t *p = ring + (uint64_t)s * box +
					             cute_swizzle((uint64_t)r * (uint64_t)box_cols + (uint64_t)c, swizzle);
					uint8_t *q = precc_emu_check(p, 1, 1, 0);
					if (*q != want)
						__atomic_add_fetch(&bad_bytes, 1, __ATOMIC_RELAXED);
				}
			precc_emu_mbar_arrive(&empty[s]);
		}
	}
}

/* ---- stmatrix + TMA store -------------------------------------------- */
enum { OROWS = 40, OCOLS = 104, SBOXR = 64, SBOXC = 64 };   /* 2-byte elements; rows of 208 bytes */
static uint16_t out[OROWS * OCOLS] __attribute__((aligned(64)));
static unsigned char otmap[128] __attribute__((aligned(64)));
static int smode, strans;

/* the value lane l's register i holds in its half h */
static uint16_t
frag_val(unsigned l, unsigned i, unsigned h)
{
	return (uint16_t)(0x4000 | l << 4 | i << 1 | h);
}

/* box element (r, c) (c in 2-byte elements) -> its byte in the swizzled box */
static uint64_t
box_at(unsigned r, unsigned c)
{
	return cute_swizzle((uint64_t)r * SBOXC * 2 + 2 * c, 128);
}

/* what the box holds at (r, c): matrix i = r / 8 of the first 32 rows,
 * columns 0..7, from the warp's fragments; else the other warps' value */
static uint16_t
box_want(unsigned r, unsigned c)
{
	if (r < 32 && c < 8) {
		unsigned i = r / 8, rr = r % 8;
		/* the stored matrix's (rr, c): the fragment's (rr, c), or its (c, rr) */
		unsigned fr = strans ? c : rr, fc = strans ? rr : c;
		return frag_val(4 * fr + fc / 2, i, fc % 2);
	}
	return (uint16_t)(0x1000 + r * 131 + c);
}

static void
store_kernel(void **args)
{
	(void)args;
	unsigned tid = (unsigned)precc_emu_sreg(0), lane = tid % 32;
	uint8_t *sm = precc_emu_shared(0, SBOXR * SBOXC * 2 + 1024);
	uint8_t *box = sm + 1024 - (uintptr_t)sm % 1024;
	if (tid < 32) {
		/* lane 8i + j names row j of matrix i: box row 8i + j, columns 0..7 */
		uint32_t r[4];
		for (unsigned i = 0; i < 4; i++)
			r[i] = (uint32_t)frag_val(lane, i, 0) | (uint32_t)frag_val(lane, i, 1) << 16;
		precc_emu_stmatrix((uint32_t)strans, box + box_at(lane, 0), r[0], r[1], r[2], r[3]);
	} else
		for (unsigned e = tid - 32; e < SBOXR * SBOXC; e += 96) {
			unsigned rr = e / SBOXC, c = e % SBOXC;
			if (rr < 32 && c < 8)
				continue;
			uint16_t *p = precc_emu_check(box + box_at(rr, c), 2, 2, 1 /* a store */);
			*p = box_want(rr, c);
		}
	if (!(smode == 1 && tid == 40))
		precc_emu_fence_proxy_async();
	precc_emu_barrier(1);
	if (tid == 0) {
		precc_emu_tma_store_2d(otmap, 70, 8, box);     /* columns 70..133, rows 8..71 */
		precc_emu_bulk_commit();
		if (smode == 2) {
			uint8_t *p = precc_emu_check(box + 64, 1, 1, 1);
			*p = 0;
		}
		if (smode != 3)
			precc_emu_bulk_wait_read(0);
	}
	precc_emu_barrier(2);
}

static int
run_store(int m, int trans, char *msg, size_t n)
{
	CodegenTmap t = {.param = 0, .elem_bytes = 2, .rows = OROWS, .cols = OCOLS,
	                 .box_rows = SBOXR, .box_cols = SBOXC, .swizzle = 128};
	char err[200];

	smode = m, strans = trans;
	memset(out, 0x5a, sizeof out);
	emu_reset();
	emu_region(out, sizeof out, 1, "out");
	emu_set_dynamic_smem(SBOXR * SBOXC * 2 + 1024);
	if (emu_tmap_encode(otmap, &t, out, 0, err, sizeof err))
		return snprintf(msg, n, "encode: %s", err), -1;
	if (emu_launch(store_kernel, NULL, 128, 1, 1, 0))
		return snprintf(msg, n, "emu_launch refused the grid"), -1;
	int e = emu_errors(msg, n);
	if (e)
		return e;
	int bad = 0;
	for (unsigned r = 0; r < OROWS; r++)
		for (unsigned c = 0; c < OCOLS; c++) {
			int in = r >= 8 && c >= 70;
			uint16_t want = in ? box_want(r - 8, c - 70) : 0x5a5a;
			if (out[r * OCOLS + c] != want && !bad++)
				snprintf(msg, n, "out[%u][%u] = 0x%04x, want 0x%04x", r, c, out[r * OCOLS + c], want);
		}
	return bad ? -1 : 0;
}

static int
run(int sw, int cols, int m, char *msg, size_t n)
{
	CodegenTmap t = {.param = 0, .elem_bytes = 1, .rows = ROWS, .cols = COLS,
	                 .box_rows = BOXR, .box_cols = cols, .swizzle = sw};
	char err[200];

	swizzle = sw, box_cols = cols, mode = m, bad_bytes = 0;
	emu_reset();
	emu_region(tensor, sizeof tensor, 0, "tensor");
	emu_set_dynamic_smem(STAGES * (uint64_t)(cols * BOXR) + 64 + 1024);
	if (emu_tmap_encode(tmap, &t, tensor, 0, err, sizeof err)) {
		snprintf(msg, n, "encode: %s", err);
		return -1;
	}
	if (emu_launch(kernel, NULL, THREADS, 1, 1, 0))
		return snprintf(msg, n, "emu_launch refused the grid"), -1;
	return emu_errors(msg, n);
}

int
main(void)
{
	char msg[600];
	int fails = 0;

	emu_init();
	for (int i = 0; i < ROWS * COLS; i++)
		tensor[i] = (uint8_t)(i * 37 + i / COLS * 11 + 1);
	static const int sws[] = {0, 32, 64, 128}, cols[] = {128, 32, 64, 128};
	for (int i = 0; i < 4; i++) {
		int e = run(sws[i], cols[i], 0, msg, sizeof msg);
		if (e || bad_bytes) {
			printf("FAIL swizzle %d box %dx%d: %d errors, %d wrong bytes; %s\n", sws[i], BOXR,
			       cols[i], e, bad_bytes, e ? msg : "");
			fails++;
		} else
			printf("swizzle %3d, box %dx%3d: every byte of every stage as CuTe places it, "
			       "zero past the edges\n", sws[i], BOXR, cols[i]);
	}
	/* the box may not be wider than the swizzle span */
	if (run(32, 64, 0, msg, sizeof msg) >= 0 || !strstr(msg, "over the 32-byte swizzle span")) {
		printf("FAIL: a 64-byte box under 32B swizzle was encoded (%s)\n", msg);
		fails++;
	}
	static const char *const want[] = {NULL, "deadlock", "arrives twice in phase",
	                                   "not 1024-byte aligned"};
	for (int m = 1; m <= 3; m++) {
		int e = run(128, 128, m, msg, sizeof msg);
		if (e <= 0 || !strstr(msg, want[m])) {
			printf("FAIL check %d: %d errors, first: %s (want \"%s\")\n", m, e, msg, want[m]);
			fails++;
		} else
			printf("check %d reports: %s\n", m, msg);
	}
	for (int tr = 0; tr < 2; tr++) {
		if (run_store(0, tr, msg, sizeof msg)) {
			printf("FAIL stmatrix.x4%s + TMA store: %s\n", tr ? ".trans" : "", msg);
			fails++;
		} else
			printf("stmatrix.x4%s + fence.proxy.async + TMA store + wait_group.read: every element "
			       "where the PTX ISA puts it, the box clipped at the tensor's edge\n", tr ? ".trans" : "");
	}
	static const char *const swant[] = {NULL, "no fence.proxy.async", "still reads it", "exits with 1 TMA store"};
	for (int m = 1; m <= 3; m++) {
		int e = run_store(m, 0, msg, sizeof msg);
		if (e <= 0 || !strstr(msg, swant[m])) {
			printf("FAIL store check %d: %d errors, first: %s (want \"%s\")\n", m, e, msg, swant[m]);
			fails++;
		} else
			printf("store check %d reports: %s\n", m, msg);
	}
	printf(fails ? "test_tma: %d FAILED\n" : "test_tma: all passed\n", fails);
	return fails != 0;
}
