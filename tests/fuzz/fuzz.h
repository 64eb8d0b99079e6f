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
#include <sanitizer/allocator_interface.h>
#include <sanitizer/lsan_interface.h>
static sigjmp_buf fz_env;
static volatile int fz_in;
void __real_exit(int);
void __real__exit(int);

/* The watchdog's _exit comes from a signal handler in the middle of a
 * load: precc exits there and the OS takes its memory, but the harness
 * jumps back and LeakSanitizer would report whatever the load held. So
 * the blocks allocated inside FUZZ_TRY are logged (the sanitizer's malloc
 * hook; the hook may not allocate: a fixed array, its pages touched only
 * as used), and after a watchdog exit, and only then, those still
 * allocated are ignored: nothing else allocates between the jump and the
 * check, so a logged address that is allocated holds a block of this
 * run. A leak on any other path is still a finding. A tick that lands
 * inside malloc, after the allocation and before the hook, loses that
 * block to the log; the hard stop comes only for C code that runs on past
 * the first tick (sandbox.c), which Lua's matcher does without allocating. */
#define FZ_LOG (1u << 23)
static void *fz_log[FZ_LOG];
static size_t fz_nlog;
static volatile int fz_track, fz_overflow;

static void
fz_on_malloc(const volatile void *p, size_t n)
{
	(void)n;
	if (!fz_track || !p)
		return;
	if (fz_nlog < FZ_LOG)
		fz_log[fz_nlog++] = (void *)p;
	else
		fz_overflow = 1;
}

/* the sanitizer installs hooks only in pairs */
static void
fz_on_free(const volatile void *p)
{
	(void)p;
}

/* Start logging (FUZZ_TRY calls it). */
static void
fz_track_begin(void)
{
	static int hooked;
	if (!hooked)
		hooked = __sanitizer_install_malloc_and_free_hooks(fz_on_malloc, fz_on_free);
	if (!hooked) {
		fputs("fuzz: cannot install the malloc hook\n", stderr);
		abort();
	}
	fz_nlog = 0;
	fz_overflow = 0;
	fz_track = 1;
}

/* After a watchdog exit: ignore this run's blocks that are still held. */
static void
fz_track_end(int watchdog)
{
	fz_track = 0;
	if (!watchdog)
		return;
	if (fz_overflow) {
		fputs("fuzz: more allocations than the log holds before a watchdog exit\n", stderr);
		abort();
	}
	for (size_t k = 0; k < fz_nlog; k++)
		if (__sanitizer_get_ownership(fz_log[k]))
			__lsan_ignore_object(fz_log[k]);
}

static volatile int fz_watchdog;

void
__wrap_exit(int code)
{
	if (fz_in) {
		fz_in = 0;
		siglongjmp(fz_env, 1);
	}
	__real_exit(code);
}

/* only the sandbox's watchdog calls _exit */
void
__wrap__exit(int code)
{
	if (fz_in) {
		fz_in = 0;
		fz_watchdog = 1;
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
	fz_watchdog = 0; \
	fz_track_begin(); \
	if (sigsetjmp(fz_env, 1) == 0) { fz_in = 1; stmt; } \
	fz_in = 0; \
	struct itimerval fz_off = {{0, 0}, {0, 0}}; \
	setitimer(ITIMER_PROF, &fz_off, NULL); \
	fz_track_end(fz_watchdog); \
} while (0)
#endif

#endif
