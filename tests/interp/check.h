/*
 * check.h — the interpreter tests' tiny harness: CHECK, a float64 error
 * bound check that reports the worst element, and a seeded generator.
 */
#ifndef PRECC_TEST_CHECK_H
#define PRECC_TEST_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precc/interp.h"

#if defined(PRECC_TEST_SMALL) || defined(__SANITIZE_ADDRESS__)
#define SMALL 1
#else
#define SMALL 0
#endif

static int failures __attribute__((unused));

#define CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
		        #cond); \
		failures++; \
	} \
} while (0)

#define CHECK_OK(call) do { \
	int rc_ = (call); \
	if (rc_ != 0) { \
		fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, \
		        #call, rc_, precc_interp_error()); \
		failures++; \
	} \
} while (0)

/* An expected failure: call returns code, and the message is not empty. */
#define CHECK_ERR(call, code) do { \
	int rc_ = (call); \
	if (rc_ != (code) || precc_interp_error()[0] == 0) { \
		fprintf(stderr, "%s:%d: %s returned %d (want %d), msg '%s'\n", \
		        __FILE__, __LINE__, #call, rc_, (code), \
		        precc_interp_error()); \
		failures++; \
	} \
} while (0)

/* bits of a float, for bit-exact comparisons */
static inline uint32_t
fbits(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return u;
}

/* |got[i] - want[i]| <= bound[i] for all i; report the worst offender
 * (largest error / bound). */
static inline int
check_bound(const char *what, const float *got, const double *want,
            const double *bound, long n)
{
	long worst = -1;
	double wr = 1.0;

	for (long i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]);
		double r = bound[i] > 0 ? e / bound[i] : (e > 0 ? INFINITY : 0);
		if (!(r <= wr) || isnan((double)got[i])) {
			wr = isnan(r) ? INFINITY : r;
			worst = i;
		}
	}
	if (worst >= 0) {
		fprintf(stderr, "%s: worst element %ld: got %.9g want %.9g "
		        "bound %.3g (error/bound %.3g)\n", what, worst,
		        (double)got[worst], want[worst], bound[worst], wr);
		failures++;
		return 1;
	}
	return 0;
}

/* xorshift64*, seeded */
static uint64_t test_rng = 88172645463325252ull;

static inline double
urand(void)
{
	test_rng ^= test_rng >> 12;
	test_rng ^= test_rng << 25;
	test_rng ^= test_rng >> 27;
	return (double)((test_rng * 2685821657736338717ull) >> 11) * 0x1p-53;
}

static inline float
nrand(void)
{
	double u = urand(), v = urand();
	return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

static inline int
finish(const char *name)
{
	if (failures) {
		fprintf(stderr, "%s: %d failure(s)\n", name, failures);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

#endif
