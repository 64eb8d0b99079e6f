/*
 * bench_convert.c — conversions per second per format, on one core.
 *
 *   [PRECC_INTERP_ISA=baseline|avx2|avx512] bench_convert [SECONDS_PER_ROW]
 *
 * For each format the interpreter converts on its hot paths, fp32 ->
 * format in RNE with the format's default saturation: the generic encoder
 * (precc_encode_generic, element by element), precc_encode (its scalar
 * fast path), and the array path precc_encode_rne_n at scale 1 and with a
 * fused scale (the ISA copy the process runs: the widest the CPU has, or
 * PRECC_INTERP_ISA's); and back, precc_decode element by element against
 * precc_decode_n. Inputs are 64 Ki fp32 values (L2-resident) spread over
 * the format's range, with some subnormal, overflowing and NaN values.
 * The array path's codes are checked against the generic encoder's.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime, CLOCK_THREAD_CPUTIME_ID */
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
static float back[N];
static volatile uint32_t sink;

/* Code i of the array path's output in `codes` (stored at f's width). */
static uint32_t
precc_interp_code_of(precc_format f, int i)
{
	const uint8_t *b = (const uint8_t *)codes;

	if (f == PRECC_E2M1)
		return b[i / 2] >> (4 * (i & 1)) & 0xf;
	if (precc_format_get(f)->bits == 16)
		return ((const uint16_t *)codes)[i];
	return b[i];
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);   /* CPU time: the machine is shared */
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

/* RNE with the format's default saturation (fp8/fp6/fp4 satfinite,
 * bf16/fp16 overflow to inf), as the kernels convert. */
static bool
sat_of(precc_format f)
{
	return precc_default_saturate(f);
}

static void
generic_pass(precc_format f)
{
	bool sat = sat_of(f);

	for (int i = 0; i < N; i++)
		codes[i] = precc_encode_generic(f, xs[i], PRECC_RNE, sat, 0);
	sink = codes[N / 2];
}

static void
encode_pass(precc_format f)
{
	bool sat = sat_of(f);

	for (int i = 0; i < N; i++)
		codes[i] = precc_encode(f, xs[i], PRECC_RNE, sat, 0);
	sink = codes[N / 2];
}

static void
array_pass(precc_format f)
{
	precc_encode_rne_n(f, sat_of(f), xs, 1.0f, codes, N);
	sink = codes[N / 8];
}

static void
array_scaled_pass(precc_format f)
{
	precc_encode_rne_n(f, sat_of(f), xs, 0.75f, codes, N);
	sink = codes[N / 8];
}

static void
decode_pass(precc_format f)
{
	for (int i = 0; i < N; i++)
		back[i] = precc_decode(f, precc_interp_code_of(f, i));
	sink = (uint32_t)back[N / 2];
}

static void
decode_n_pass(precc_format f)
{
	precc_decode_n(f, codes, 0, back, N);
	sink = (uint32_t)back[N / 2];
}

int
main(int argc, char **argv)
{
	static const precc_format fs[] = {
		PRECC_BF16, PRECC_FP16, PRECC_E4M3, PRECC_E5M2, PRECC_E2M1, PRECC_E3M2, PRECC_E2M3,
	};
	double secs = argc > 1 ? atof(argv[1]) : 0.25;
	int bad = 0;

	if (secs <= 0)
		secs = 0.25;
	__builtin_cpu_init();
	printf("bench_convert: one core, %d fp32 inputs a pass, M conversions per CPU-second; CPU has avx2 %s, "
	       "avx512f %s; the array paths run the %s copy (PRECC_INTERP_ISA caps it)\n\n", N,
	       __builtin_cpu_supports("avx2") ? "yes" : "no",
	       __builtin_cpu_supports("avx512f") ? "yes" : "no", precc_convert_isa());
	printf("%-6s %9s %9s %9s %9s | %9s %9s\n", "fp32->", "generic", "encode", "array",
	       "array*s", "decode", "decode_n");
	for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++) {
		precc_format f = fs[k];
		const precc_format_info *fi = precc_format_get(f);
		fill(fi);
		double gen = rate(generic_pass, f, secs), enc = rate(encode_pass, f, secs);
		double arr = rate(array_pass, f, secs), arrs = rate(array_scaled_pass, f, secs);
		/* the array's codes against the generic encoder's, then decode them */
		array_pass(f);
		for (int i = 0; i < N; i++)
			if (precc_interp_code_of(f, i) != precc_encode_generic(f, xs[i], PRECC_RNE, sat_of(f), 0)) {
				fprintf(stderr, "bench_convert: %s array path differs at %a\n", fi->name, xs[i]);
				bad = 1;
				break;
			}
		double dec = rate(decode_pass, f, secs), decn = rate(decode_n_pass, f, secs);
		printf("%-6s %9.0f %9.0f %9.0f %9.0f | %9.0f %9.0f\n", fi->name, gen, enc, arr, arrs,
		       dec, decn);
	}
	return bad;
}
