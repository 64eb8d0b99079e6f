/* LD_PRELOAD hook for publish.test: with KILL_AT_RENAME=N, SIGKILL the
 * process just before its Nth rename(2)/renameat(2)/renameat2(2), as an
 * OOM kill or a power cut would, wherever the build is at that moment. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>

static int calls;

static void
count(void)
{
	const char *at = getenv("KILL_AT_RENAME");

	if (at && __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST) >= atoi(at))
		raise(SIGKILL);
}

int
rename(const char *a, const char *b)
{
	count();
	return ((int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename"))(a, b);
}

int
renameat(int fa, const char *a, int fb, const char *b)
{
	count();
	return ((int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat"))(fa, a, fb, b);
}

int
renameat2(int fa, const char *a, int fb, const char *b, unsigned flags)
{
	count();
	return ((int (*)(int, const char *, int, const char *, unsigned))dlsym(RTLD_NEXT, "renameat2"))(
		fa, a, fb, b, flags);
}
