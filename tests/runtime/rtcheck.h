/*
 * rtcheck.h — the runtime tests' harness: CHECK, CHECK_STR (exact string,
 * both printed on a mismatch), SKIP (ctest SKIP_RETURN_CODE 77, with why).
 */
#ifndef PRECC_TEST_RTCHECK_H
#define PRECC_TEST_RTCHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures __attribute__((unused));

#define CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
		        #cond); \
		failures++; \
	} \
} while (0)

#define CHECK_STR(got, want) do { \
	const char *got_ = (got), *want_ = (want); \
	if (!got_ || strcmp(got_, want_) != 0) { \
		fprintf(stderr, "%s:%d: CHECK_STR failed: %s\n  got:  %s\n  want: %s\n", \
		        __FILE__, __LINE__, #got, got_ ? got_ : "(null)", want_); \
		failures++; \
	} \
} while (0)

#define SKIP_CODE 77

static int finish(const char *name) __attribute__((unused));
static int finish(const char *name)
{
	if (failures)
		fprintf(stderr, "%s: %d check%s failed\n", name, failures,
		        failures == 1 ? "" : "s");
	else
		printf("%s: ok\n", name);
	return failures ? 1 : 0;
}

#endif
