/*
 * ref.h — the test side of tests/refsem: independent element encoders
 * (a value table from the formats' definitions, nearest value with ties
 * to the even code, satfinite) and the data cases every recipe is run on.
 * Nothing here calls precc; the tests compare precc's interpreter with
 * these and with the transcriptions in each test file.
 */
#ifndef REFSEM_REF_H
#define REFSEM_REF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; if (fails < 30) { \
	printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); \
	printf("\n"); } } } while (0)

static uint32_t
fbits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

/* Same fp32, or both NaN. */
static int
same(float a, float b)
{
	return (isnan(a) && isnan(b)) || fbits(a) == fbits(b);
}

/* ---- formats from their definitions (OCP FP8 / MX specs) ---- */
enum { R_E4M3, R_E5M2, R_E2M1 };

static double
rdecode(int f, unsigned c)
{
	int s = (c >> (f == R_E2M1 ? 3 : 7)) & 1, e, m;
	double v;

	if (f == R_E4M3) {
		e = (c >> 3) & 15, m = c & 7;
		if (e == 15 && m == 7)
			return NAN;
		v = e ? (1 + m / 8.0) * ldexp(1, e - 7) : m * ldexp(1, -9);
	} else if (f == R_E5M2) {
		e = (c >> 2) & 31, m = c & 3;
		if (e == 31)
			return m ? NAN : (s ? -INFINITY : INFINITY);
		v = e ? (1 + m / 4.0) * ldexp(1, e - 15) : m * ldexp(1, -16);
	} else {
		e = (c >> 1) & 3, m = c & 1;
		v = e ? (1 + m / 2.0) * ldexp(1, e - 1) : m * 0.5;
	}
	return s ? -v : v;
}

/* Largest positive finite code. */
static unsigned
rmaxcode(int f)
{
	return f == R_E4M3 ? 0x7e : f == R_E5M2 ? 0x7b : 7;
}

/* RNE with satfinite (cvt.rn.satfinite): |x| beyond max (inf too) -> max;
 * NaN -> the canonical NaN (e2m1 has none: -1). Codes are ordered by
 * magnitude, so "even code" is "even mantissa". */
static int
rencode(int f, float x)
{
	unsigned top = rmaxcode(f), sbit = f == R_E2M1 ? 8 : 0x80, c, best = 0;
	double a = fabs((double)x);

	if (isnan(x))
		return f == R_E2M1 ? -1 : 0x7f;
	if (a >= rdecode(f, top))
		best = top;
	else {
		for (c = 0; c < top; c++) {
			double lo = rdecode(f, c), hi = rdecode(f, c + 1);
			if (a >= lo && a <= hi) {
				if (a - lo < hi - a)
					best = c;
				else if (a - lo > hi - a)
					best = c + 1;
				else
					best = c & 1 ? c + 1 : c;
				break;
			}
		}
	}
	return (int)(signbit(x) ? best | sbit : best);
}

/* ---- data cases ---- */
static uint64_t rng = 88172645463325252ull;

static float
urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

enum {
	C_NORMAL, C_OUTLIERS, C_ZERO_BLOCKS, C_DENORMAL, C_AT_MAX, C_POW2_AMAX,
	C_INF, C_NAN, C_ALL_ZERO, NCASE
};
static const char *case_name[NCASE] = {
	"normal", "outlier channels", "all-zero blocks", "all-denormal",
	"values at the format max", "power-of-two amax", "inf", "NaN",
	"all-zero tensor",
};

/* x[rows*cols] for a case; fmax is the target format's max. Blocks of
 * interest are 16/32/128 wide: the zero/denormal cases cover whole rows
 * and 128-column stripes so every block size sees them. */
static void
fill(float *x, long rows, long cols, int kase, float fmax)
{
	long r, c, n = rows * cols;

	for (r = 0; r < rows; r++)
		for (c = 0; c < cols; c++) {
			float v = urand() * 3.0f;
			if (kase == C_OUTLIERS && c % 37 == 5)
				v *= 4000.0f;
			if (kase == C_ZERO_BLOCKS && (r % 3 == 1 || (c / 128) % 2 == 1))
				v = 0.0f;
			if (kase == C_DENORMAL)
				v = urand() * 1e-39f;   /* fp32 subnormals */
			if (kase == C_AT_MAX)
				v = (c % 3 == 0) ? fmax : (c % 3 == 1 ? -fmax : v * fmax / 4);
			if (kase == C_ALL_ZERO)
				v = 0.0f;
			x[r * cols + c] = v;
		}
	if (kase == C_POW2_AMAX)
		for (r = 0; r < rows; r++)
			x[r * cols + (r * 7) % cols] = r % 2 ? -4.0f : 4.0f;
	if (kase == C_INF) {
		x[n / 3] = INFINITY;
		x[n / 2 + 17] = -INFINITY;
	}
	if (kase == C_NAN) {
		x[n / 3] = NAN;
		x[5] = NAN;
	}
}

#endif
