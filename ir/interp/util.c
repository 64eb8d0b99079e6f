/*
 * interp/util.c — error messages, size checks and element loading for the
 * interpreter's kernels.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "util.h"

static _Thread_local char errmsg[256];

const char *
precc_interp_error(void)
{
	return errmsg;
}

int
interp_fail(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errmsg, sizeof errmsg, fmt, ap);
	va_end(ap);
	return code;
}

size_t
precc_interp_elem_bytes(precc_format f)
{
	switch (f) {
	case PRECC_FP32: case PRECC_TF32: return 4;
	case PRECC_FP16: case PRECC_BF16: return 2;
	case PRECC_E4M3: case PRECC_E5M2: case PRECC_E8M0:
	case PRECC_E3M2: case PRECC_E2M3: return 1;
	default: return 0;       /* e2m1: two codes share a byte */
	}
}

int
precc_interp_codes_per_byte(precc_format f)
{
	return f == PRECC_E2M1 ? 2 : 1;
}

size_t
precc_interp_tensor_bytes(precc_format f, long rows, long cols)
{
	size_t n, es = f == PRECC_E2M1 ? 1 : precc_interp_elem_bytes(f);

	if (rows < 0 || cols < 0 || es == 0 || (f == PRECC_E2M1 && cols % 2)
	    || interp_mul((size_t)rows, (size_t)cols, &n) != 0 || interp_mul(n, es, &n) != 0)
		return 0;
	return f == PRECC_E2M1 ? n / 2 : n;
}

void
precc_e2m1_pack(const uint8_t *codes, size_t n, uint8_t *packed)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		packed[i / 2] = (uint8_t)((codes[i] & 0xf) | (codes[i + 1] & 0xf) << 4);
	if (n % 2)
		packed[n / 2] = codes[n - 1] & 0xf;
}

void
precc_e2m1_unpack(const uint8_t *packed, size_t n, uint8_t *codes)
{
	for (size_t i = 0; i < n; i++)
		codes[i] = (uint8_t)(packed[i / 2] >> (4 * (i & 1)) & 0xf);
}

uint32_t
precc_interp_code(const void *buf, precc_format f, size_t i)
{
	uint32_t c = 0;

	switch (f == PRECC_E2M1 ? 8 : precc_interp_elem_bytes(f)) {
	case 8: return ((const uint8_t *)buf)[i / 2] >> (4 * (i & 1)) & 0xf;
	case 1: return ((const uint8_t *)buf)[i];
	case 2: return ((const uint16_t *)buf)[i];
	case 4: memcpy(&c, (const uint32_t *)buf + i, 4); return c;
	default: return 0;
	}
}

void
precc_interp_set_code(void *buf, precc_format f, size_t i, uint32_t code)
{
	switch (f == PRECC_E2M1 ? 8 : precc_interp_elem_bytes(f)) {
	case 8: {
		uint8_t *b = (uint8_t *)buf + i / 2;
		unsigned sh = 4 * (i & 1);
		*b = (uint8_t)((*b & ~(0xfu << sh)) | (code & 0xf) << sh);
		return;
	}
	case 1: ((uint8_t *)buf)[i] = (uint8_t)code; return;
	case 2: ((uint16_t *)buf)[i] = (uint16_t)code; return;
	case 4: memcpy((uint32_t *)buf + i, &code, 4); return;
	default: return;
	}
}

/* The process's default thread count (precc_interp_set_threads); 0: not
 * set, then PRECC_NUM_THREADS, then every online core. */
static atomic_int default_threads;

void
precc_interp_set_threads(int threads)
{
	atomic_store_explicit(&default_threads, threads > 0
	                      ? (threads > 1024 ? 1024 : threads) : 0,
	                      memory_order_relaxed);
}

int
precc_interp_threads(int threads)
{
	const char *e;
	long n;

	if (threads > 0)
		return threads;
	if ((n = atomic_load_explicit(&default_threads, memory_order_relaxed)) > 0)
		return (int)n;
	if ((e = getenv("PRECC_NUM_THREADS")) && (n = atol(e)) > 0)
		return (int)(n > 1024 ? 1024 : n);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)(n > 1024 ? 1024 : n) : 1;
}

int
interp_mul(size_t a, size_t b, size_t *r)
{
	if (a != 0 && b > SIZE_MAX / a)
		return -1;
	*r = a * b;
	return 0;
}

size_t
interp_phys_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	size_t r;

	if (pages <= 0 || psize <= 0
	    || interp_mul((size_t)pages, (size_t)psize, &r) != 0)
		return SIZE_MAX;
	return r;
}

int
interp_check_tensor(const char *name, long rows, long cols, size_t esize)
{
	size_t n, bytes;

	if (rows < 0 || cols < 0)
		return interp_fail(PRECC_IESHAPE, "%s: negative shape [%ld, %ld]",
		                   name, rows, cols);
	if (rows == 0 || cols == 0)
		return interp_fail(PRECC_IEEMPTY, "%s: zero-size tensor [%ld, %ld]",
		                   name, rows, cols);
	if (esize == 0)
		return interp_fail(PRECC_IEINVAL, "%s: unsupported format", name);
	if (interp_mul((size_t)rows, (size_t)cols, &n) != 0
	    || interp_mul(n, esize, &bytes) != 0 || n > (size_t)INT64_MAX / 8)
		return interp_fail(PRECC_IETOOBIG,
		                   "%s: [%ld, %ld] overflows the address space",
		                   name, rows, cols);
	if (bytes > interp_phys_bytes())
		return interp_fail(PRECC_IETOOBIG,
		                   "%s: [%ld, %ld] needs %zu bytes, more than the "
		                   "%zu bytes of physical memory", name, rows, cols,
		                   bytes, interp_phys_bytes());
	return PRECC_IOK;
}

int
interp_check_fmt(const char *name, precc_format f, long rows, long cols)
{
	int e;

	if (f != PRECC_E2M1)
		return interp_check_tensor(name, rows, cols, precc_interp_elem_bytes(f));
	if ((e = interp_check_tensor(name, rows, cols, 1)) != 0)
		return e;
	if (cols % 2)
		return interp_fail(PRECC_IESHAPE, "%s: e2m1 is stored two codes per byte along "
		                   "the last dim, which must be even: [%ld, %ld]", name, rows, cols);
	return PRECC_IOK;
}

int
interp_input_format(precc_format f)
{
	switch (f) {
	case PRECC_FP32: case PRECC_TF32: case PRECC_FP16: case PRECC_BF16:
	case PRECC_E4M3: case PRECC_E5M2: case PRECC_E8M0:
	case PRECC_E2M1: case PRECC_E3M2: case PRECC_E2M3:
		return 1;
	default:
		return 0;
	}
}

void
interp_load(const void *x, precc_format f, size_t off, long n, float *dst)
{
	precc_decode_n(f, x, off, dst, n);   /* vectorized per ISA (numerics.h) */
}

int
interp_block(const char *name, long rows, long cols, precc_block blk,
             long *br, long *bc)
{
	if (blk.br < 0 || blk.bc < 0)
		return interp_fail(PRECC_IESHAPE, "%s: negative block {%ld x %ld}",
		                   name, blk.br, blk.bc);
	*br = blk.br == 0 || blk.br > rows ? rows : blk.br;
	*bc = blk.bc == 0 || blk.bc > cols ? cols : blk.bc;
	return PRECC_IOK;
}

long
precc_block_count(long rows, long cols, precc_block blk, long *nbr, long *nbc)
{
	long br = 1, bc = 1, r, c;
	int e;

	if ((e = interp_check_tensor("block count", rows, cols, 1)) != 0)
		return e;
	if ((e = interp_block("block count", rows, cols, blk, &br, &bc)) != 0)
		return e;
	r = (rows + br - 1) / br;
	c = (cols + bc - 1) / bc;
	if (nbr)
		*nbr = r;
	if (nbc)
		*nbc = c;
	return r * c;
}

typedef struct Range {
	void (*fn)(void *, int, long, long);
	void *ctx;
	int part;
	long r0, r1;
} Range;

static void *
range_main(void *arg)
{
	Range *g = arg;
	g->fn(g->ctx, g->part, g->r0, g->r1);
	return NULL;
}

int
interp_parallel_parts(long rows, long cols, int threads)
{
	enum { MIN_ELEMS = 1 << 17 };
	int nt = precc_interp_threads(threads);

	if (nt > INTERP_MAX_PARTS)
		nt = INTERP_MAX_PARTS;
	if ((double)rows * (double)cols < (double)MIN_ELEMS)
		nt = 1;
	if (nt > rows)
		nt = (int)rows;
	return nt < 1 ? 1 : nt;
}

void
interp_parallel_rows(long rows, long cols, int threads,
                     void (*fn)(void *ctx, int part, long r0, long r1),
                     void *ctx)
{
	pthread_t tid[INTERP_MAX_PARTS];
	Range g[INTERP_MAX_PARTS];
	int nt = interp_parallel_parts(rows, cols, threads), i;
	int started[INTERP_MAX_PARTS] = { 0 };
	long per;

	if (nt <= 1) {
		fn(ctx, 0, 0, rows);
		return;
	}
	per = (rows + nt - 1) / nt;
	for (i = 0; i < nt; i++) {
		g[i].fn = fn;
		g[i].ctx = ctx;
		g[i].part = i;
		g[i].r0 = i * per < rows ? i * per : rows;
		g[i].r1 = (i + 1) * per < rows ? (i + 1) * per : rows;
	}
	for (i = 1; i < nt; i++)
		started[i] = pthread_create(&tid[i], NULL, range_main, &g[i]) == 0;
	fn(ctx, 0, g[0].r0, g[0].r1);
	for (i = 1; i < nt; i++) {
		if (started[i])
			pthread_join(tid[i], NULL);
		else
			fn(ctx, i, g[i].r0, g[i].r1);   /* could not start: do it here */
	}
}
