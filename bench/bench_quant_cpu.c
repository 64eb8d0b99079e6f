/*
 * bench_quant_cpu.c — the interpreter's element-wise kernels on one
 * Llama-3-8B weight (4096 x 4096 fp32), one thread, in CPU time:
 * amax and quantize at the granularities the bundled recipes use, and
 * 1- and 2-byte transposes of the model's weight shapes.
 *
 *   [PRECC_INTERP_ISA=baseline|avx2|avx512] bench_quant_cpu [REPEATS]
 *
 * Uses the public interp API only, so the same file builds against an
 * older precc_ir for a before/after comparison (bench/RESULTS.md).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime, CLOCK_PROCESS_CPUTIME_ID */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "precc/interp.h"

enum { ROWS = 4096, COLS = 4096 };

static double
cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 3;
	long n = (long)ROWS * COLS;
	float *x = malloc(n * 4), *am = malloc(n / 16 * 4), *s = malloc(n / 16 * 4);
	uint16_t *xb = malloc(n * 2);
	uint8_t *q = malloc(n * 2);
	uint64_t r = 88172645463325252ull;
	static const struct {
		const char *name;
		precc_format qf;
		precc_block blk;
		int bf16_in;
	} rows[] = {
		{"fp32 -> bf16 (cast)", PRECC_BF16, {0, 0}, 0},
		{"fp32 -> e4m3 tensorwise", PRECC_E4M3, {0, 0}, 0},
		{"bf16 -> e4m3 tensorwise", PRECC_E4M3, {0, 0}, 1},
		{"fp32 -> e4m3 1x128", PRECC_E4M3, {1, 128}, 0},
		{"fp32 -> e4m3 MX 1x32", PRECC_E4M3, {1, 32}, 0},
		{"fp32 -> e2m1 NVFP4 1x16", PRECC_E2M1, {1, 16}, 0},
		{"fp32 -> e5m2 tensorwise", PRECC_E5M2, {0, 0}, 0},
	};

	if (reps < 1)
		reps = 1;
	for (long i = 0; i < n; i++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		x[i] = ((float)(r >> 40) / 16777216.0f - 0.5f) * 8.0f;
		uint32_t u;
		__builtin_memcpy(&u, &x[i], 4);
		xb[i] = (uint16_t)(u >> 16);
	}
	printf("bench_quant_cpu: [%d, %d], one thread, CPU ms a call (best of %d)\n", ROWS, COLS,
	       reps);
	printf("%-26s %9s %9s\n", "", "amax", "quantize");
	for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
		const void *in = rows[k].bf16_in ? (const void *)xb : (const void *)x;
		precc_format xf = rows[k].bf16_in ? PRECC_BF16 : PRECC_FP32;
		long nb = precc_block_count(ROWS, COLS, rows[k].blk, NULL, NULL);
		double best_a = 1e9, best_q = 1e9;
		for (long b = 0; b < nb; b++)
			s[b] = 0.75f;
		for (int i = 0; i < reps; i++) {
			double t0 = cpu();
			precc_amax_policy(in, xf, ROWS, COLS, rows[k].blk, PRECC_AMAX_NAN_PROPAGATE, am,
			                  NULL);
			double t1 = cpu();
			precc_quant_opts o = {.qf = rows[k].qf, .round = PRECC_RNE,
			                      .saturate = rows[k].qf != PRECC_BF16, .blk = rows[k].blk,
			                      .scale = nb > 1 || rows[k].qf != PRECC_BF16 ? s : NULL,
			                      .threads = 1};
			precc_quantize(in, xf, ROWS, COLS, &o, q);
			double t2 = cpu();
			best_a = t1 - t0 < best_a ? t1 - t0 : best_a;
			best_q = t2 - t1 < best_q ? t2 - t1 : best_q;
		}
		printf("%-26s %9.1f %9.1f\n", rows[k].name, best_a * 1e3, best_q * 1e3);
	}
	static const long shapes[][2] = {
		{4096, 4096}, {4096, 1024}, {4096, 128}, {128, 4096}, {14336, 4096}, {4096, 14336},
	};
	uint8_t *a = malloc((size_t)14336 * 4096 * 2), *b = malloc((size_t)14336 * 4096 * 2);
	for (size_t i = 0; i < (size_t)14336 * 4096 * 2; i++)
		a[i] = (uint8_t)(i * 7);
	for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
		for (size_t es = 1; es <= 2; es++) {
			double best = 1e9;
			for (int i = 0; i < reps; i++) {
				double t0 = cpu();
				precc_transpose(a, es, shapes[k][0], shapes[k][1], b);
				double dt = cpu() - t0;
				best = dt < best ? dt : best;
			}
			printf("transpose %zu-byte [%5ld, %5ld] %9.1f\n", es, shapes[k][0], shapes[k][1],
			       best * 1e3);
		}
	return 0;
}
