/*
 * test_numerics.c — unit tests for include/precc/numerics.h.
 *
 * Every code of every format of at most 16 bits decodes to the value an
 * independent formula gives (double arithmetic from the bit fields) and
 * has the structural properties of its format; every code round-trips
 * through precc_encode in every rounding mode; hand-picked RZ / RU / RNA /
 * SR / saturation / subnormal / -0 cases; the fast RNE paths (scalar and
 * array, on the ISA copy PRECC_INTERP_ISA picks) and precc_decode_n
 * against the generic encoder and decoder (--full: every fp32 pattern);
 * the scale helpers' defined results.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "precc/numerics.h"

static int failures;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		failures++; \
		if (failures <= 40) { \
			printf("%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__); \
			printf("\n"); \
		} \
	} \
} while (0)

static uint32_t
bits(float x)
{
	uint32_t u;

	memcpy(&u, &x, 4);
	return u;
}

static float
flt(uint32_t u)
{
	float x;

	memcpy(&x, &u, 4);
	return x;
}

static bool
same(float a, float b)
{
	return (isnan(a) && isnan(b)) || bits(a) == bits(b);
}

/* Independent decode: the textbook formula in double. kind 0: IEEE-like
 * (exponent all ones = inf/NaN), 1: e4m3fn (only S.1111.111 is NaN),
 * 2: no inf/NaN (fp6/fp4). */
static double
ref_decode(int eb, int mb, int bias, int kind, uint32_t c)
{
	int nb = 1 + eb + mb;
	int s = (c >> (nb - 1)) & 1;
	uint32_t e = (c >> mb) & ((1u << eb) - 1), m = c & ((1u << mb) - 1);
	double v;

	if (kind == 0 && e == (1u << eb) - 1)
		v = m ? NAN : INFINITY;
	else if (kind == 1 && e == (1u << eb) - 1 && m == (1u << mb) - 1)
		v = NAN;
	else if (e == 0)
		v = (double)m / pow(2.0, mb) * pow(2.0, 1 - bias);
	else
		v = (1.0 + (double)m / pow(2.0, mb)) * pow(2.0, (double)e - bias);
	return s ? -v : v;
}

static const struct { precc_format f; int kind; } small[] = {
	{PRECC_FP16, 0}, {PRECC_BF16, 0}, {PRECC_E4M3, 1}, {PRECC_E5M2, 0},
	{PRECC_E2M1, 2}, {PRECC_E3M2, 2}, {PRECC_E2M3, 2},
};
#define NSMALL (int)(sizeof small / sizeof small[0])

static void
test_table(void)
{
	for (int f = 0; f < PRECC_NFORMAT; f++) {
		const precc_format_info *fi = precc_format_get(f);
		CHECK(fi && precc_format_by_name(fi->name) == f, "format %d", f);
		if (fi->bits < 32)
			CHECK(fi->bits == fi->has_sign + fi->ebits + fi->mbits, "%s widths", fi->name);
	}
	CHECK(precc_format_get(PRECC_NFORMAT) == NULL, "out of range");
	CHECK(precc_format_by_name("e4m4") == -1, "unknown");
	CHECK(precc_format_by_name(NULL) == -1, "NULL");
	for (int r = 0; r < PRECC_NROUND; r++)
		CHECK(precc_round_by_name(precc_round_name(r)) == r, "round %d", r);
	CHECK(precc_round_by_name("rn") == -1, "rn is not a name");
}

static void
test_decode_every_code(void)
{
	for (int i = 0; i < NSMALL; i++) {
		precc_format f = small[i].f;
		const precc_format_info *fi = precc_format_get(f);
		int n = 1 << fi->bits;
		float maxv = 0, minsub = INFINITY, minnorm = INFINITY;
		int ninf = 0, nnan = 0;

		for (int c = 0; c < n; c++) {
			float got = precc_decode(f, c);
			double want = ref_decode(fi->ebits, fi->mbits, fi->bias, small[i].kind, c);
			CHECK(same(got, (float)want) && (isnan(want) || (double)got == want),
			      "%s 0x%x: got %a want %a", fi->name, c, got, want);
			/* bits above the width are ignored */
			CHECK(same(precc_decode(f, c | (uint32_t)n), got), "%s high bits", fi->name);
			if (isinf(got))
				ninf++;
			else if (isnan(got))
				nnan++;
			else if (got > 0) {
				maxv = fmaxf(maxv, got);
				minsub = fminf(minsub, got);
				if (c >> fi->mbits)
					minnorm = fminf(minnorm, got);
			}
		}
		CHECK(maxv == fi->max, "%s max %a vs table %a", fi->name, maxv, fi->max);
		CHECK(minsub == fi->min_subnormal, "%s min_subnormal", fi->name);
		CHECK(minnorm == fi->min_normal, "%s min_normal", fi->name);
		CHECK(ninf == (fi->has_inf ? 2 : 0), "%s has %d infs", fi->name, ninf);
		CHECK((nnan > 0) == fi->has_nan, "%s has %d NaNs", fi->name, nnan);
		CHECK(bits(precc_decode(f, 1u << (fi->bits - 1))) == 0x80000000, "%s -0", fi->name);
	}
	/* structural facts, by hand */
	CHECK(isnan(precc_decode(PRECC_E4M3, 0x7f)) && isnan(precc_decode(PRECC_E4M3, 0xff)), "e4m3 NaN");
	CHECK(precc_decode(PRECC_E4M3, 0x7e) == 448 && precc_decode(PRECC_E4M3, 0xfe) == -448, "e4m3 max");
	CHECK(precc_decode(PRECC_E4M3, 0x01) == 0x1p-9f && precc_decode(PRECC_E4M3, 0x08) == 0x1p-6f, "e4m3 small");
	CHECK(precc_decode(PRECC_E4M3, 0x38) == 1.0f, "e4m3 one");
	CHECK(precc_decode(PRECC_E5M2, 0x7c) == INFINITY && precc_decode(PRECC_E5M2, 0xfc) == -INFINITY, "e5m2 inf");
	CHECK(isnan(precc_decode(PRECC_E5M2, 0x7d)) && isnan(precc_decode(PRECC_E5M2, 0x7f)), "e5m2 NaN");
	CHECK(precc_decode(PRECC_E5M2, 0x7b) == 57344 && precc_decode(PRECC_E5M2, 0x01) == 0x1p-16f, "e5m2 range");
	CHECK(precc_decode(PRECC_FP16, 0x7bff) == 65504 && precc_decode(PRECC_FP16, 0x7c00) == INFINITY, "fp16");
	CHECK(precc_decode(PRECC_FP16, 0x0001) == 0x1p-24f, "fp16 subnormal");
	CHECK(precc_decode(PRECC_BF16, 0x3f80) == 1.0f && precc_decode(PRECC_BF16, 0x0001) == 0x1p-133f, "bf16");
	CHECK(precc_decode(PRECC_E2M1, 0x7) == 6 && precc_decode(PRECC_E2M1, 0x1) == 0.5f
	      && precc_decode(PRECC_E2M1, 0xf) == -6, "e2m1");
	CHECK(precc_decode(PRECC_E3M2, 0x1f) == 28 && precc_decode(PRECC_E3M2, 0x01) == 0.0625f, "e3m2");
	CHECK(precc_decode(PRECC_E2M3, 0x1f) == 7.5f && precc_decode(PRECC_E2M3, 0x01) == 0.125f, "e2m3");
	/* e8m0: every code is 2^(c-127), 0xff NaN */
	for (uint32_t c = 0; c < 255; c++)
		CHECK(precc_decode(PRECC_E8M0, c) == ldexpf(1.0f, (int)c - 127), "e8m0 0x%x", c);
	CHECK(isnan(precc_decode(PRECC_E8M0, 0xff)), "e8m0 NaN");
	/* fp32 / tf32 decode is the bit pattern */
	CHECK(bits(precc_decode(PRECC_FP32, 0x12345678)) == 0x12345678, "fp32");
	CHECK(bits(precc_decode(PRECC_TF32, 0x3f802000)) == 0x3f802000, "tf32");
	/* decode tables */
	const int t8[] = {PRECC_E4M3, PRECC_E5M2, PRECC_E8M0, PRECC_E2M1, PRECC_E3M2, PRECC_E2M3};
	for (int i = 0; i < 6; i++) {
		const float *t = precc_decode_table8(t8[i]);
		CHECK(t && t == precc_decode_table8(t8[i]), "table %d", t8[i]);
		for (int c = 0; t && c < 256; c++)
			CHECK(same(t[c], precc_decode(t8[i], c)), "table %d code %d", t8[i], c);
	}
	CHECK(precc_decode_table8(PRECC_FP16) == NULL && precc_decode_table8(PRECC_FP32) == NULL, "wide");
}

/* Every non-NaN code survives encode(decode(c)) in every mode, saturating
 * or not (inf codes: not saturating); NaN codes give the canonical NaN. */
static void
test_round_trip(void)
{
	const precc_format fs[] = {PRECC_FP16, PRECC_BF16, PRECC_E4M3, PRECC_E5M2,
	                           PRECC_E8M0, PRECC_E2M1, PRECC_E3M2, PRECC_E2M3};
	const uint32_t canon[] = {0x7fff, 0x7fff, 0x7f, 0x7f, 0xff, 0, 0, 0};

	for (int i = 0; i < 8; i++) {
		const precc_format_info *fi = precc_format_get(fs[i]);
		for (uint32_t c = 0; c < (1u << fi->bits); c++) {
			float v = precc_decode(fs[i], c);
			for (int r = 0; r < PRECC_NROUND; r++)
				for (int sat = 0; sat < 2; sat++) {
					uint32_t rb = c * 2654435761u;   /* SR: any bits */
					uint32_t got = precc_encode(fs[i], v, r, sat, rb);
					if (isnan(v))
						CHECK(got == canon[i], "%s NaN 0x%x -> 0x%x", fi->name, c, got);
					else if (isinf(v) && sat)
						CHECK(got == ((c & (1u << (fi->bits - 1)))
						              | precc_encode(fs[i], fi->max, PRECC_RNE, false, 0)),
						      "%s inf sat 0x%x -> 0x%x", fi->name, c, got);
					else
						CHECK(got == c, "%s 0x%x (%a) %s sat=%d -> 0x%x", fi->name, c, v,
						      precc_round_name(r), sat, got);
				}
		}
	}
	/* tf32: every sign/exponent with a spread of mantissas */
	for (uint32_t hi = 0; hi < 512; hi++)
		for (uint32_t m = 0; m < 1024; m += 7) {
			uint32_t u = hi << 23 | m << 13;
			if ((u & 0x7fffffff) > 0x7f800000)
				continue;
			for (int r = 0; r < PRECC_NROUND; r++)
				CHECK(precc_encode(PRECC_TF32, flt(u), r, false, 12345) == u, "tf32 0x%x", u);
		}
}

#define E(f, x, r, sat, rb) precc_encode(PRECC_##f, (x), PRECC_##r, (sat), (rb))

static void
test_edges(void)
{
	/* RNE ties, subnormals, -0 */
	CHECK(E(E4M3, 0x1p-10f, RNE, true, 0) == 0x00, "half min subnormal ties to 0");
	CHECK(E(E4M3, 0x1.000002p-10f, RNE, true, 0) == 0x01, "just above half");
	CHECK(E(E4M3, 3 * 0x1p-10f, RNE, true, 0) == 0x02, "1.5 steps ties to even");
	CHECK(E(E4M3, -0x1p-11f, RNE, true, 0) == 0x80, "-tiny -> -0");
	CHECK(E(E4M3, -0.0f, RNE, true, 0) == 0x80 && E(FP16, -0.0f, RNE, false, 0) == 0x8000, "-0");
	CHECK(E(E4M3, 0x1p-6f * 15 / 16, RNE, true, 0) == 0x08, "subnormal rounds up to min normal");
	/* e4m3 saturation boundary: 464 is the tie between 448 and (NaN) 480 */
	CHECK(E(E4M3, 464, RNE, false, 0) == 0x7e, "464 -> 448 (tie to even)");
	CHECK(E(E4M3, 0x1.d00002p8f, RNE, false, 0) == 0x7f, "above 464 -> NaN without satfinite");
	CHECK(E(E4M3, -500, RNE, false, 0) == 0xff, "-500 -> NaN, sign kept");
	CHECK(E(E4M3, 500, RNE, true, 0) == 0x7e && E(E4M3, -1e30f, RNE, true, 0) == 0xfe, "satfinite");
	CHECK(E(E4M3, INFINITY, RNE, true, 0) == 0x7e && E(E4M3, -INFINITY, RNE, true, 0) == 0xfe, "inf sat");
	CHECK(E(E4M3, INFINITY, RNE, false, 0) == 0x7f && E(E4M3, -INFINITY, RZ, false, 0) == 0xff, "inf nosat");
	CHECK(E(E4M3, NAN, RNE, true, 0) == 0x7f && E(E4M3, -NAN, RNE, false, 0) == 0x7f, "NaN");
	/* e5m2: 61440 is the tie between 57344 and inf */
	CHECK(E(E5M2, 61440, RNE, false, 0) == 0x7c && E(E5M2, 61440, RNE, true, 0) == 0x7b, "e5m2 tie");
	CHECK(E(E5M2, 0x1.dffffep15f, RNE, false, 0) == 0x7b, "below the tie");
	CHECK(E(E5M2, -INFINITY, RNE, false, 0) == 0xfc && E(E5M2, INFINITY, RNE, true, 0) == 0x7b, "e5m2 inf");
	CHECK(E(E5M2, -NAN, RNE, false, 0) == 0x7f, "e5m2 NaN");
	/* RZ and RU */
	CHECK(E(E4M3, 1.12f, RZ, true, 0) == 0x38 && E(E4M3, -1.12f, RZ, true, 0) == 0xb8, "rz");
	CHECK(E(E4M3, 1.12f, RU, true, 0) == 0x39 && E(E4M3, -1.12f, RU, true, 0) == 0xb8, "ru");
	CHECK(E(E4M3, 500, RZ, false, 0) == 0x7e, "rz never overflows to NaN");
	CHECK(E(E4M3, -500, RU, false, 0) == 0xfe && E(E4M3, 449, RU, false, 0) == 0x7f, "ru overflow");
	CHECK(E(E4M3, 0x1p-20f, RZ, true, 0) == 0 && E(E4M3, 0x1p-20f, RU, true, 0) == 1, "rz/ru tiny");
	CHECK(E(E4M3, -0x1p-20f, RU, true, 0) == 0x80, "ru of -tiny is -0");
	CHECK(E(FP16, 1e9f, RZ, false, 0) == 0x7bff && E(FP16, INFINITY, RZ, false, 0) == 0x7c00, "fp16 rz");
	CHECK(E(FP16, 65520, RNE, false, 0) == 0x7c00 && E(FP16, 65519.99f, RNE, false, 0) == 0x7bff, "fp16 tie");
	CHECK(E(FP16, 65520, RNE, true, 0) == 0x7bff && E(FP16, -INFINITY, RNE, true, 0) == 0xfbff, "fp16 satfinite");
	CHECK(E(FP16, 0x1p-25f, RNE, false, 0) == 0 && E(FP16, 0x1p-25f, RU, false, 0) == 1, "fp16 subnormal");
	CHECK(E(BF16, 0x1.01p0f, RNE, false, 0) == 0x3f80 && E(BF16, 0x1.03p0f, RNE, false, 0) == 0x3f82, "bf16 ties");
	CHECK(E(BF16, FLT_MAX, RNE, false, 0) == 0x7f80 && E(BF16, FLT_MAX, RZ, false, 0) == 0x7f7f, "bf16 overflow");
	CHECK(E(FP16, NAN, RNE, false, 0) == 0x7fff && E(BF16, -NAN, RNE, false, 0) == 0x7fff, "16-bit NaN");
	/* fp6 / fp4: no inf, no NaN: always saturate, NaN -> +max */
	CHECK(E(E2M1, 100, RNE, false, 0) == 0x7 && E(E2M1, -INFINITY, RNE, false, 0) == 0xf, "e2m1 sat");
	CHECK(E(E2M1, NAN, RNE, false, 0) == 0x7 && E(E2M1, -NAN, RNE, true, 0) == 0x7, "e2m1 NaN");
	CHECK(E(E2M1, 5, RNE, true, 0) == 0x6 && E(E2M1, 0.25f, RNE, true, 0) == 0 && E(E2M1, 0.75f, RNE, true, 0) == 2,
	      "e2m1 ties: 5 -> 4, 0.25 -> 0, 0.75 -> 1");
	CHECK(E(E3M2, 30, RNE, false, 0) == 0x1f && E(E2M3, -8, RNE, false, 0) == 0x3f, "fp6 sat");
	CHECK(E(E3M2, NAN, RNE, false, 0) == 0x1f && E(E2M3, NAN, RNE, false, 0) == 0x1f, "fp6 NaN");
	/* e8m0 */
	CHECK(E(E8M0, 1.0f, RZ, true, 0) == 0x7f && E(E8M0, 1.5f, RZ, true, 0) == 0x7f, "e8m0 rz");
	CHECK(E(E8M0, 1.5f, RU, true, 0) == 0x80 && E(E8M0, 1.0f, RU, true, 0) == 0x7f, "e8m0 ru");
	CHECK(E(E8M0, 1.5f, RNE, true, 0) == 0x80 && E(E8M0, 3.0f, RNE, true, 0) == 0x80
	      && E(E8M0, 1.49f, RNE, true, 0) == 0x7f, "e8m0 rne: ties to the even code");
	CHECK(E(E8M0, -2.0f, RU, true, 0) == 0x80, "e8m0 ignores the sign");
	CHECK(E(E8M0, 0.0f, RU, true, 0) == 0 && E(E8M0, 0x1p-140f, RZ, true, 0) == 0, "e8m0 tiny -> 2^-127");
	CHECK(E(E8M0, flt(0x00400001), RU, true, 0) == 1, "e8m0 just above 2^-127");
	CHECK(E(E8M0, INFINITY, RZ, true, 0) == 0xfe && E(E8M0, INFINITY, RZ, false, 0) == 0xff, "e8m0 inf");
	CHECK(E(E8M0, 0x1.8p127f, RU, true, 0) == 0xfe && E(E8M0, 0x1.8p127f, RU, false, 0) == 0xff, "e8m0 overflow");
	CHECK(E(E8M0, NAN, RU, true, 0) == 0xff, "e8m0 NaN");
	/* tf32: RNE vs RNA (the default) */
	CHECK(E(TF32, 0x1.002p0f, RNE, false, 0) == 0x3f800000, "tf32 rne tie to even");
	CHECK(E(TF32, 0x1.002p0f, RNA, false, 0) == 0x3f802000, "tf32 rna tie away");
	CHECK(E(TF32, -0x1.002p0f, RNA, false, 0) == 0xbf802000, "tf32 rna negative");
	CHECK(E(TF32, 0x1.006p0f, RNE, false, 0) == 0x3f804000, "tf32 rne tie up to even");
	CHECK(precc_encode_default(PRECC_TF32, 0x1.002p0f) == 0x3f802000, "tf32 default is rna");
	CHECK(E(TF32, FLT_MAX, RNA, false, 0) == 0x7f800000 && E(TF32, FLT_MAX, RNA, true, 0) == 0x7f7fe000, "tf32 max");
	CHECK(E(TF32, NAN, RNA, false, 0) == 0x7fffffff, "tf32 NaN");
	CHECK(E(TF32, 0x1p-149f, RNE, false, 0) == 0 && E(TF32, 0x1p-149f, RU, false, 0) == 0x2000, "tf32 subnormal");
	/* fp32 */
	CHECK(E(FP32, -INFINITY, RNE, true, 0) == bits(-FLT_MAX) && E(FP32, 1.1f, RZ, false, 0) == bits(1.1f), "fp32");
	/* defaults */
	CHECK(precc_default_saturate(PRECC_E4M3) && precc_default_saturate(PRECC_E2M1)
	      && precc_default_saturate(PRECC_E8M0) && !precc_default_saturate(PRECC_FP16)
	      && !precc_default_saturate(PRECC_BF16), "default saturate");
	CHECK(precc_default_round(PRECC_E8M0) == PRECC_RU && precc_default_round(PRECC_E4M3) == PRECC_RNE, "default round");
	CHECK(precc_encode_default(PRECC_FP16, 1e6f) == 0x7c00 && precc_encode_default(PRECC_E4M3, 1e6f) == 0x7e, "defaults");
}

static void
test_sr(void)
{
	/* 1 + 2^-5 in e4m3: a quarter of the step 2^-3; s = 20, D = 2^18 */
	float x = 1.03125f;
	CHECK(E(E4M3, x, SR, true, 0xbffff) == 0x38 && E(E4M3, x, SR, true, 0xc0000) == 0x39, "sr threshold");
	CHECK(E(E4M3, x, SR, true, 0xfff00000u | 0xbffff) == 0x38, "sr uses only the low s bits");
	CHECK(E(E4M3, -x, SR, true, 0xc0000) == 0xb9, "sr rounds away from zero for negatives too");
	unsigned up = 0;
	for (uint32_t r = 0; r < (1u << 20); r++)
		up += E(E4M3, x, SR, true, r) == 0x39;
	CHECK(up == (1u << 18), "sr unbiased: %u of 2^20 rounded up", up);
	/* subnormal target: 2^-10 is half of e4m3's step 2^-9; s = 24 */
	CHECK(E(E4M3, 0x1p-10f, SR, true, 0x7fffff) == 0 && E(E4M3, 0x1p-10f, SR, true, 0x800000) == 1, "sr subnormal");
	up = 0;
	for (uint32_t r = 0; r < (1u << 26); r += 256)  /* s = 26 */
		up += E(E4M3, 0x1.8p-12f, SR, true, r);       /* 3/16 of a step */
	CHECK(up == (3u << 14), "sr subnormal unbiased: %u", up);
	/* far below the smallest step: s > 32, still rounds up sometimes */
	CHECK(E(E4M3, 0x1p-40f, SR, true, 0xffffffffu) == 1 && E(E4M3, 0x1p-40f, SR, true, 0) == 0, "sr tiny");
	/* exact values never move */
	CHECK(E(E4M3, 1.125f, SR, true, 0xffffffffu) == 0x39, "sr exact");
	/* SR overflow follows saturation */
	CHECK(E(E5M2, 58344, SR, true, 0xffffffffu) == 0x7b && E(E5M2, 58344, SR, false, 0xffffffffu) == 0x7c, "sr overflow");
	CHECK(E(E4M3, 440, SR, true, 0xffffffffu) == 0x7e, "sr to max");
	CHECK(E(E8M0, 1.5f, SR, true, 0x3fffff) == 0x7f && E(E8M0, 1.5f, SR, true, 0x400000) == 0x80, "sr e8m0");
	CHECK(E(BF16, 0x1.01p0f, SR, false, 0x7fff) == 0x3f80 && E(BF16, 0x1.01p0f, SR, false, 0x8000) == 0x3f81, "sr bf16");
}

/* The fast RNE paths (precc_encode's own, and the array loops of the ISA
 * this process runs: PRECC_INTERP_ISA, see CMakeLists.txt) against the
 * generic encoder. */
static const precc_format fast_fmts[] = {
	PRECC_BF16, PRECC_FP16, PRECC_E4M3, PRECC_E5M2, PRECC_E2M1, PRECC_E3M2, PRECC_E2M3,
};
enum { NFAST = sizeof fast_fmts / sizeof fast_fmts[0], BATCH = 4096 };

static uint32_t
packed_code(precc_format f, const uint8_t *buf, int i)
{
	if (f == PRECC_E2M1)
		return buf[i / 2] >> (4 * (i & 1)) & 0xf;
	if (precc_format_get(f)->bits == 16)
		return ((const uint16_t *)(const void *)buf)[i];
	return buf[i];
}

/* Mismatches over xs[0..n): the array path at scale 1 and at `scale`, and
 * the scalar path, each against precc_encode_generic. */
static long
check_batch(precc_format f, bool sat, const float *xs, int n, float scale)
{
	static _Thread_local _Alignas(64) uint8_t out[2 * BATCH], outs[2 * BATCH];
	long bad = 0;

	precc_encode_rne_n(f, sat, xs, 1.0f, out, n);
	precc_encode_rne_n(f, sat, xs, scale, outs, n);
	for (int i = 0; i < n; i++) {
		uint32_t g = precc_encode_generic(f, xs[i], PRECC_RNE, sat, 0);
		uint32_t gs = precc_encode_generic(f, xs[i] * scale, PRECC_RNE, sat, 0);
		bool ok = packed_code(f, out, i) == g && packed_code(f, outs, i) == gs
		          && precc_encode(f, xs[i], PRECC_RNE, sat, 0) == g;
		if (!ok && bad++ < 3)
			printf("fast path: %s sat %d x %a (0x%08x) scale %a: generic 0x%x array 0x%x "
			       "scaled 0x%x/0x%x scalar 0x%x\n", precc_format_get(f)->name, sat, xs[i],
			       bits(xs[i]), scale, g, packed_code(f, out, i), gs,
			       packed_code(f, outs, i), precc_encode(f, xs[i], PRECC_RNE, sat, 0));
	}
	return bad;
}

static int only_fmt = -1;   /* --full FORMAT: that format alone */

/* Patterns lo .. hi-1 by stride, in batches, every format both ways. */
static long
sweep(uint64_t lo, uint64_t hi, uint64_t stride)
{
	static _Thread_local float xs[BATCH];
	long bad = 0;

	for (uint64_t u = lo; u < hi;) {
		int n = 0;
		for (; n < BATCH && u < hi; n++, u += stride)
			xs[n] = flt((uint32_t)u);
		for (int k = 0; k < NFAST; k++)
			if (only_fmt < 0 || (int)fast_fmts[k] == only_fmt)
				for (int sat = 0; sat < 2; sat++)
					bad += check_batch(fast_fmts[k], sat, xs, n, 0x1.8p-3f);
	}
	return bad;
}

static void
test_fast_paths(void)
{
	static float xs[BATCH];
	long bad = 0;

	printf("test_numerics: conversions on the %s copy\n", precc_convert_isa());
	/* a stride through all patterns (odd, so every low-bit pattern comes) */
	bad += sweep(0, (uint64_t)1 << 32, 4099);
	/* every pattern whose low 16 bits are 0, 1, 0x7fff, 0x8000, 0x8001 or
	 * 0xffff: the bf16 rounding boundaries */
	for (uint32_t lo16 = 0; lo16 < 6; lo16++) {
		static const uint32_t low[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff};
		for (uint32_t hi = 0; hi < 0x10000;) {
			int n = 0;
			for (; n < BATCH && hi < 0x10000; n++, hi++)
				xs[n] = flt(hi << 16 | low[lo16]);
			for (int k = 0; k < NFAST; k++)
				for (int sat = 0; sat < 2; sat++)
					bad += check_batch(fast_fmts[k], sat, xs, n, 1.5f);
		}
	}
	/* every rounding boundary of every format: the midpoint between two
	 * neighbouring codes' values, and 2 ulps either side */
	for (int k = 0; k < NFAST; k++) {
		precc_format f = fast_fmts[k];
		uint32_t ncode = 1u << (precc_format_get(f)->bits - 1), c = 0;
		while (c + 1 < ncode) {
			int n = 0;
			for (; n + 10 <= BATCH && c + 1 < ncode; c++) {
				float a = precc_decode(f, c), b = precc_decode(f, c + 1);
				double mid = ((double)a + (double)b) / 2;
				if (isnan(a) || isnan(b) || isinf(b))
					continue;
				for (int d = -2; d <= 2; d++) {
					float x = flt(bits((float)mid) + (uint32_t)d);
					xs[n++] = x;
					xs[n++] = -x;
				}
			}
			for (int sat = 0; sat < 2; sat++)
				bad += check_batch(f, sat, xs, n, 1.0f);
		}
	}
	CHECK(bad == 0, "%ld fast-path mismatches", bad);
}

/* Every code of every format the decoder serves, at every offset parity. */
static void
test_decode_n(void)
{
	static const precc_format fs[] = {
		PRECC_BF16, PRECC_FP16, PRECC_E4M3, PRECC_E5M2, PRECC_E8M0,
		PRECC_E2M1, PRECC_E3M2, PRECC_E2M3, PRECC_FP32,
	};
	static uint8_t codes[4 * 0x10000];
	static float out[0x10000 + 8];
	long bad = 0;

	for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++) {
		precc_format f = fs[k];
		int b = precc_format_get(f)->bits;
		uint32_t n = b >= 16 ? 0x10000 : 1u << b;
		for (uint32_t c = 0; c < n; c++) {
			uint32_t code = b == 32 ? c * 0x10001u + 0x3f : c;
			if (f == PRECC_E2M1)
				codes[c / 2] = (uint8_t)((codes[c / 2] & ~(0xfu << 4 * (c & 1))) | c << 4 * (c & 1));
			else if (b == 32)
				memcpy(codes + 4 * c, &code, 4);
			else if (b == 16)
				memcpy(codes + 2 * c, &code, 2);
			else
				codes[c] = (uint8_t)c;
		}
		for (uint32_t off = 0; off < 3; off++) {
			precc_decode_n(f, codes, off, out, (long)(n - off));
			for (uint32_t c = off; c < n; c++) {
				uint32_t code = b == 32 ? c * 0x10001u + 0x3f : c;
				float want = precc_decode(f, code);
				if (bits(out[c - off]) != bits(want) && bad++ < 3)
					printf("decode_n %s code 0x%x off %u: %a, want %a\n",
					       precc_format_get(f)->name, code, off, out[c - off], want);
			}
		}
	}
	CHECK(bad == 0, "%ld decode_n mismatches", bad);
	CHECK(!precc_encode_rne_n(PRECC_E8M0, true, (const float *)codes, 1.0f, out, 1)
	      && !precc_encode_rne_n(PRECC_FP32, true, (const float *)codes, 1.0f, out, 1)
	      && !precc_encode_rne_n(PRECC_TF32, true, (const float *)codes, 1.0f, out, 1),
	      "no fast path for e8m0, fp32, tf32");
}

static void
test_scale(void)
{
	precc_scale_params p = {.fmax = 448, .margin = 0, .pow2 = false, .eps = 0};
	bool nf = true;

	CHECK(precc_compute_scale(0, &p, &nf) == 1.0f && !nf, "amax 0 -> 1");
	CHECK(isnan(precc_compute_scale(INFINITY, &p, &nf)) && nf, "amax inf -> NaN, flagged");
	CHECK(isnan(precc_compute_scale(NAN, &p, &nf)) && nf, "amax NaN -> NaN, flagged");
	CHECK(isnan(precc_compute_scale(-INFINITY, &p, NULL)), "nonfinite may be NULL");
	CHECK(precc_compute_scale(448, &p, &nf) == 1.0f && !nf, "amax = fmax");
	CHECK(precc_compute_scale(2, &p, NULL) == 224 && precc_compute_scale(-2, &p, NULL) == 224, "|amax|");
	CHECK(precc_compute_scale(3, &p, NULL) == 448.0f / 3.0f, "one fp32 division");
	CHECK(precc_compute_scale(0x1p-149f, &p, NULL) == FLT_MAX, "overflow -> FLT_MAX");
	p.margin = 2;
	CHECK(precc_compute_scale(2, &p, NULL) == 56, "margin 2");
	p.margin = -1;
	CHECK(precc_compute_scale(2, &p, NULL) == 448, "negative margin");
	p.margin = 0;
	p.pow2 = true;
	CHECK(precc_compute_scale(3, &p, NULL) == 128, "pow2 rounds 149.3 down to 128");
	CHECK(precc_compute_scale(448, &p, NULL) == 1 && precc_compute_scale(449, &p, NULL) == 0.5f, "pow2 edges");
	CHECK(precc_compute_scale(0x1p-149f, &p, NULL) == 0x1p127f, "pow2 overflow -> 2^127");
	CHECK(precc_compute_scale(0, &p, NULL) == 1.0f, "pow2 amax 0");
	p.margin = 140;                          /* subnormal scale */
	CHECK(precc_compute_scale(3, &p, NULL) == 0x1p-133f, "pow2 subnormal scale");
	p.margin = 0;
	p.pow2 = false;
	p.eps = 1e-12f;
	CHECK(precc_compute_scale(0, &p, &nf) == (float)(448.0 / (double)1e-12f) && !nf, "eps clamps amax 0");
	CHECK(precc_compute_scale(1e-20f, &p, NULL) == (float)(448.0 / (double)1e-12f), "eps clamps tiny amax");
	CHECK(precc_compute_scale(2, &p, NULL) == 224, "eps leaves large amax");
	CHECK(isnan(precc_compute_scale(NAN, &p, &nf)) && nf, "eps does not hide NaN");
}

#include <pthread.h>

typedef struct Part { uint64_t lo, hi; long bad; } Part;

static void *
part_main(void *arg)
{
	Part *p = arg;
	p->bad = sweep(p->lo, p->hi, 1);
	return NULL;
}

/* --full [THREADS [FORMAT]]: every fp32 pattern through every fast path
 * (or FORMAT's), on THREADS threads (`make sweep` runs it). */
static int
full_sweep(int threads)
{
	enum { MAXT = 64 };
	pthread_t tid[MAXT];
	Part part[MAXT];
	long bad = 0;

	if (threads < 1 || threads > MAXT)
		threads = 2;
	for (int t = 0; t < threads; t++) {
		part[t].lo = ((uint64_t)1 << 32) / threads * t;
		part[t].hi = t + 1 == threads ? (uint64_t)1 << 32 : ((uint64_t)1 << 32) / threads * (t + 1);
		pthread_create(&tid[t], NULL, part_main, &part[t]);
	}
	for (int t = 0; t < threads; t++) {
		pthread_join(tid[t], NULL);
		bad += part[t].bad;
	}
	printf("test_numerics --full: 2^32 patterns x %s x sat/nosat on the %s copy: "
	       "%ld mismatches\n", only_fmt < 0 ? "every fast format" : precc_format_get(only_fmt)->name,
	       precc_convert_isa(), bad);
	return bad != 0;
}

int
main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--full")) {
		if (argc > 3 && (only_fmt = precc_format_by_name(argv[3])) < 0) {
			fprintf(stderr, "test_numerics: unknown format %s\n", argv[3]);
			return 2;
		}
		return full_sweep(argc > 2 ? atoi(argv[2]) : 2);
	}
	test_table();
	test_decode_every_code();
	test_round_trip();
	test_edges();
	test_sr();
	test_fast_paths();
	test_decode_n();
	test_scale();
	if (failures) {
		printf("test_numerics: %d failures\n", failures);
		return 1;
	}
	printf("test_numerics: all passed\n");
	return 0;
}
