/*
 * bench_convert.c — conversions per second per format, on one core.
 *
 *   bench_convert [SECONDS_PER_ROW]     (default 0.25)
 *
 * For each format: fp32 -> format with precc_encode(f, x, RNE, saturate=true)
 * and decode with precc_decode; for e4m3/e5m2 also the interpreter's fast
 * paths (precc_encode_*_rne_sat) and the 256-entry decode table. Inputs are
 * 64 Ki fp32 values (L2-resident) spread over the format's range, with
 * some subnormal, overflowing and NaN values. The fast paths are checked
 * against precc_encode on the same inputs before they are timed.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "precc/numerics.h"

enum { N = 1 << 16 };

static float xs[N];
static uint32_t codes[N];
static uint8_t codes8[N];
static float back[N];
static volatile uint32_t sink;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x853c49e6748fea9bull;

static double
uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) * 0x1p-53;
}

/* Log-uniform magnitudes from min_subnormal/4 to 2*max, random sign, and
 * one NaN in 1024. */
static void
fill(const precc_format_info *fi)
{
	double lo = log2(fi->min_subnormal) - 2, hi = log2(fi->max) + 1;

	if (hi > 127)
		hi = 127;
	for (int i = 0; i < N; i++) {
		double m = exp2(lo + (hi - lo) * uniform());
		xs[i] = (float)(uniform() < 0.5 ? -m : m);
		if (i % 1024 == 1023)
			xs[i] = NAN;
	}
}

/* Million operations per second of one pass-function, run for `secs`. */
typedef void (*pass_fn)(precc_format f);

static double
rate(pass_fn run, precc_format f, double secs)
{
	long passes = 0;
	double t0 = now(), t;

	run(f);                                 /* warm up */
	do {
		run(f);
		passes++;
		t = now() - t0;
	} while (t < secs);
	return passes * (double)N / t / 1e6;
}

static void
encode_pass(precc_format f)
{
	for (int i = 0; i < N; i++)
		codes[i] = precc_encode(f, xs[i], PRECC_RNE, true, 0);
	sink = codes[N / 2];
}

static void
decode_pass(precc_format f)
{
	for (int i = 0; i < N; i++)
		back[i] = precc_decode(f, codes[i]);
	sink = (uint32_t)back[N / 2];
}

static void
fast_pass(precc_format f)
{
	if (f == PRECC_E4M3)
		precc_encode_e4m3_rne_sat(xs, codes8, N);
	else
		precc_encode_e5m2_rne_sat(xs, codes8, N);
	sink = codes8[N / 2];
}

static void
table_pass(precc_format f)
{
	const float *t = precc_decode_table8(f);

	for (int i = 0; i < N; i++)
		back[i] = t[codes8[i]];
	sink = (uint32_t)back[N / 2];
}

int
main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 0.25;
	int bad = 0;

	if (secs <= 0)
		secs = 0.25;
	printf("bench_convert: one core, %d fp32 inputs per pass, M conversions/s\n\n", N);
	printf("%-6s %14s %14s %14s %14s\n", "format", "encode rne sat", "fast path", "decode", "decode table");
	for (int f = 0; f < PRECC_NFORMAT; f++) {
		const precc_format_info *fi = precc_format_get(f);
		fill(fi);
		double enc = rate(encode_pass, f, secs);
		double dec = rate(decode_pass, f, secs);
		printf("%-6s %14.0f", fi->name, enc);
		if (f == PRECC_E4M3 || f == PRECC_E5M2) {
			fast_pass(f);
			for (int i = 0; i < N; i++)
				if (codes8[i] != precc_encode(f, xs[i], PRECC_RNE, true, 0)) {
					fprintf(stderr, "bench_convert: %s fast path differs at %a\n", fi->name, xs[i]);
					bad = 1;
					break;
				}
			printf(" %14.0f %14.0f %14.0f\n", rate(fast_pass, f, secs), dec, rate(table_pass, f, secs));
		} else {
			printf(" %14s %14.0f %14s\n", "-", dec, "-");
		}
	}
	return bad;
}
