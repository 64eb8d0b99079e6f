/*
 * launch_hooks.c — runs every generated launcher of a build's
 * precc_kernels.c once (calls.inc, which launch_calls.awk writes from
 * precc_kernels.h) on fake device pointers, with hooks that print what
 * each launch would get: its tensor maps as encoded (the param they map,
 * element bytes, rows x cols at the run's m, box, swizzle) and the launch
 * itself (grid, threads, dynamic shared memory, flags, and whether its
 * last arguments are the tensor maps just encoded).
 *
 *   launch_hooks M
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "precc_kernels.h"

/* pointer param i of a launcher: a fake device address that names i */
#define P(i) ((void *)(uintptr_t)(((uintptr_t)(i) + 1) << 20))

static const void *encoded[8];
static int nencoded;

static int
launch(void *ctx, const char *name, const char *entry, const unsigned grid[3], unsigned threads,
       unsigned smem, unsigned flags, void **args, void *stream)
{
	(void)ctx, (void)stream;
	printf("launch %s %s grid %u %u %u threads %u smem %u flags %u", name, entry, grid[0], grid[1],
	       grid[2], threads, smem, flags);
	if (nencoded) {
		/* the maps are the last args, in order: find the first */
		int i = 0;
		while (args[i] != encoded[0])
			i++;
		int ok = 1;
		for (int t = 0; t < nencoded; t++)
			ok &= args[i + t] == encoded[t];
		printf(", tensor maps %s", ok ? "last" : "misplaced");
	}
	printf("\n");
	nencoded = 0;
	return 0;
}

static int
zero(void *ctx, void *ptr, size_t bytes, void *stream)
{
	(void)ctx, (void)ptr, (void)bytes, (void)stream;
	return 0;
}

static int
tmap(void *ctx, precc_tmap *out, const void *base, unsigned elem_bytes, int64_t rows, int64_t cols,
     unsigned box_rows, unsigned box_cols, unsigned swizzle)
{
	(void)ctx;
	printf("tmap param %lu: %u-byte %lld x %lld, box %u x %u, swizzle %u%s\n",
	       (unsigned long)(((uintptr_t)base >> 20) - 1), elem_bytes, (long long)rows, (long long)cols,
	       box_rows, box_cols, swizzle, (uintptr_t)out % 64 ? ", misaligned" : "");
	memset(out, 0, sizeof *out);
	encoded[nencoded++] = out;
	return 0;
}

int
main(int argc, char **argv)
{
	int64_t m = argc > 1 ? atoll(argv[1]) : 128;
	precc_kernels_hooks h;
	memset(&h, 0, sizeof h);
	h.launch = launch;
	h.zero = zero;
	h.tmap = tmap;
	precc_kernels_set_hooks(&h);
#include "calls.inc"
	return 0;
}
