/*
 * fuzz.h — what the libFuzzer harnesses share: the input as a file in a
 * private temporary directory (every reader here opens a path), and, for
 * the frontend, a way back from errorf's exit(1).
 *
 * The frontend reports a user error by exiting, which is right for precc
 * and fatal for a fuzzer. The frontend harnesses link with
 * -Wl,--wrap=exit,--wrap=_exit (the sandbox's watchdog ends with _exit):
 * inside FUZZ_TRY an exit jumps back to the harness, which takes it as
 * the clean "error, exit 1" outcome; outside, exit is exit.
 */
#ifndef PRECC_FUZZ_H
#define PRECC_FUZZ_H

#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static char fz_dir[64];

/* A private directory for this process's files (tmpfs when there is one). */
static const char *
fz_tmpdir(void)
{
	if (!fz_dir[0]) {
		snprintf(fz_dir, sizeof fz_dir, "%s/precc_fuzz_XXXXXX",
		         access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		if (!mkdtemp(fz_dir))
			abort();
	}
	return fz_dir;
}

/* Writes data to DIR/name; returns the path (static). */
static __attribute__((unused)) const char *
fz_write(const char *name, const uint8_t *data, size_t size)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", fz_tmpdir(), name);
	if (!(f = fopen(path, "wb")) || fwrite(data, 1, size, f) != size || fclose(f))
		abort();
	return path;
}

#ifdef FUZZ_WRAP_EXIT
static sigjmp_buf fz_env;
static volatile int fz_in;
void __real_exit(int);
void __real__exit(int);

void
__wrap_exit(int code)
{
	if (fz_in) {
		fz_in = 0;
		siglongjmp(fz_env, 1);
	}
	__real_exit(code);
}

void
__wrap__exit(int code)
{
	if (fz_in) {
		fz_in = 0;
		siglongjmp(fz_env, 1);
	}
	__real__exit(code);
}

/* The sandbox's limits for fuzzing: a tenth of precc's steps, a quarter of
 * its heap and 2 s of CPU, so that a runaway input (an endless loop, a
 * table bomb) costs the fuzzer milliseconds where precc would spend
 * seconds; every seed loads within them as it does within precc's
 * (docs/testing.md). PRECC_FUZZ_FULL_LIMITS=1 keeps precc's. */
#include "sandbox.h"
static void
fz_fuzz_limits(void)
{
	if (getenv("PRECC_FUZZ_FULL_LIMITS"))
		return;
	sandbox_limits.load_steps = SANDBOX_LOAD_STEPS / 10;
	sandbox_limits.call_steps = SANDBOX_CALL_STEPS / 10;
	sandbox_limits.mem = SANDBOX_MEM_LIMIT / 4;
	sandbox_limits.cpu_s = 2;
}

/* Run stmt; an exit inside it comes back here. The sandbox's watchdog
 * timer is disarmed either way. */
#define FUZZ_TRY(stmt) do { \
	if (sigsetjmp(fz_env, 1) == 0) { fz_in = 1; stmt; } \
	fz_in = 0; \
	struct itimerval fz_off = {{0, 0}, {0, 0}}; \
	setitimer(ITIMER_PROF, &fz_off, NULL); \
} while (0)
#endif

#endif
