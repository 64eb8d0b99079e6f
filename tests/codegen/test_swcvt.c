/*
 * test_swcvt — the software conversions codegen emits (codegen/swcvt.c)
 * evaluated on the host with sw_eval, against ir/numerics.c: every
 * encode program (e4m3 e5m2 e2m1 e3m2 e2m3 x rne/rz/sr x sat/not) on all
 * 2^16 top halves of fp32 times a set of low halves around every rounding
 * boundary, plus a strided sweep; SR with edge and pseudo-random bits;
 * the MX e8m0 programs against precc_mx_scales. The LLVM side emits the
 * same instruction list one op per op (sw_emit), so this is the CPU
 * evidence that the GPU computes numerics.c's algorithm.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cg.h"
#include "precc/interp.h"

static uint32_t
f2u(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return u;
}

static float
u2f(uint32_t u)
{
	float x;
	memcpy(&x, &u, 4);
	return x;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint32_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static const uint16_t lows[] = {0, 1, 2, 0x7fff, 0x8000, 0x8001, 0xffff, 0xfffe, 0x4000,
                                0xc000, 0x1000, 0x0fff};

int
main(void)
{
	static const precc_format fmts[] = {PRECC_E4M3, PRECC_E5M2, PRECC_E2M1, PRECC_E3M2, PRECC_E2M3};
	static const precc_round rounds[] = {PRECC_RNE, PRECC_RZ, PRECC_SR};
	long checks = 0, fails = 0;

	for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++)
		for (size_t ri = 0; ri < 3; ri++)
			for (int sat = 0; sat < 2; sat++) {
				SwProg p;
				precc_format f = fmts[fi];
				precc_round r = rounds[ri];
				long bad = 0;
				if (sw_encode(&p, f, r, sat)) {
					printf("FAIL: no program for %s %s sat=%d\n",
					       precc_format_get(f)->name, precc_round_name(r), sat);
					fails++;
					continue;
				}
				for (uint32_t hi = 0; hi < 0x10000; hi++) {
					int nl = r == PRECC_SR ? 4 : (int)(sizeof lows / sizeof *lows);
					for (int li = 0; li < nl + 2; li++) {
						uint32_t u = hi << 16 | (li < nl ? lows[li] : next() & 0xffff);
						uint32_t rb = r == PRECC_SR ? (li & 1 ? next() : (li & 2 ? 0xffffffffu : 0))
						                            : 0;
						uint64_t args[2] = {u, rb};
						uint32_t want = precc_encode(f, u2f(u), r, sat, rb);
						uint32_t got = (uint32_t)sw_eval(&p, args);
						checks++;
						if (got != want && bad++ < 5)
							printf("FAIL %s %s sat=%d x=0x%08x rbits=0x%08x: sw 0x%x, "
							       "precc_encode 0x%x\n", precc_format_get(f)->name,
							       precc_round_name(r), sat, u, rb, got, want);
					}
				}
				fails += bad;
			}
	/* MX scales: rceil and floor for every element format */
	for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++)
		for (int rc = 0; rc < 2; rc++) {
			SwProg p;
			precc_format f = fmts[fi];
			float fmax = precc_format_get(f)->max;
			long bad = 0;
			sw_mx_e8m0(&p, f, rc);
			for (uint32_t hi = 0; hi < 0x10000; hi++)
				for (int li = 0; li < 6; li++) {
					uint32_t u = hi << 16 | (li < 4 ? lows[li] : next() & 0xffff);
					float a = fabsf(u2f(u)), r = a / fmax;
					uint8_t want;
					precc_mx_scales(&a, 1, f, rc ? PRECC_MX_RCEIL : PRECC_MX_FLOOR, &want,
					                NULL, NULL, NULL);
					uint64_t args[2] = {f2u(a), f2u(r)};
					uint32_t got = (uint32_t)sw_eval(&p, args);
					checks++;
					if (got != want && bad++ < 5)
						printf("FAIL mx %s %s amax=0x%08x: sw 0x%x, precc_mx_scales 0x%x\n",
						       precc_format_get(f)->name, rc ? "rceil" : "floor", u, got, want);
				}
			fails += bad;
		}
	printf("%ld checks, %ld failures\n", checks, fails);
	return fails ? 1 : 0;
}
