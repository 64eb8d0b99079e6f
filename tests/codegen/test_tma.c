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
	printf(fails ? "test_tma: %d FAILED\n" : "test_tma: all passed\n", fails);
	return fails != 0;
}
