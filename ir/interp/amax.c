/*
 * interp/amax.c — amax (max |x|) of a [rows, cols] tensor at any block
 * granularity, plus the global amax. NaN in a block makes its amax NaN,
 * or (PRECC_AMAX_NAN_IGNORE, TE's fmaxf) is skipped.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

enum { CHUNK = 512 };

/* max |v[i]| over n values; *nan set if any is NaN. On the bit patterns
 * of |v[i]|, which order like the values (NaN above inf) and are
 * non-negative as int32 (SSE2 has signed compares only); NaN counts 0 in
 * mm and only in tt. Long spans keep 32 running maxima, elementwise so
 * that the loop vectorizes; short ones (MX, NVFP4 blocks) and the tail
 * take the float loop. */
static float
span_amax(const float *v, long n, int ignore, int *nan)
{
	int32_t mm = 0, tt = 0;
	float r;
	long i = 0;
	int j, bad = 0;

	if (n >= 64) {
		int32_t m[32] = {0}, top[32] = {0}, u[32];
		for (; i + 32 <= n; i += 32) {
			memcpy(u, v + i, sizeof u);
			for (j = 0; j < 32; j++) {
				int32_t b = u[j] & 0x7fffffff, c = b > 0x7f800000 ? 0 : b;
				top[j] = b > top[j] ? b : top[j];
				m[j] = c > m[j] ? c : m[j];
			}
		}
		for (j = 0; j < 32; j++) {
			mm = m[j] > mm ? m[j] : mm;
			tt = top[j] > tt ? top[j] : tt;
		}
	}
	memcpy(&r, &mm, 4);
	for (; i < n; i++) {
		float f = fabsf(v[i]);
		bad |= f != f;
		r = f > r ? f : r;              /* false for NaN: skipped */
	}
	*nan |= (tt > 0x7f800000 || bad) & !ignore;
	return r;
}

static void
merge(float *dst, float m, int nan)
{
	if (nan || isnan(*dst))
		*dst = NAN;
	else if (m > *dst)
		*dst = m;
}

typedef struct Amax {
	const void *x;
	precc_format xf;
	long rows, cols, br, bc, nbc, nb;
	int by_block_rows;          /* parts are block rows, else data rows */
	int ignore_nan;
	float *out;                 /* by_block_rows: the result, else nb per part */
	float g[INTERP_MAX_PARTS];  /* global max per part */
	int gnan[INTERP_MAX_PARTS];
} Amax;

/* Data rows [r0, r1) into out (indexed like the result). */
static void
amax_rows(const Amax *k, long r0, long r1, float *out, float *gp, int *gnanp)
{
	float buf[CHUNK], g = 0.0f;
	long r, c0, bc = k->bc;
	int gnan = 0;

	for (r = r0; r < r1; r++) {
		float *orow = out + (r / k->br) * k->nbc;
		for (c0 = 0; c0 < k->cols; c0 += CHUNK) {
			long n = k->cols - c0 < CHUNK ? k->cols - c0 : CHUNK, s;
			size_t off = (size_t)r * (size_t)k->cols + (size_t)c0;
			const float *src = buf;
			if (k->xf == PRECC_FP32 || k->xf == PRECC_TF32)
				src = (const float *)k->x + off;   /* in place */
			else
				interp_load(k->x, k->xf, off, n, buf);
			/* split the chunk at block boundaries */
			for (s = 0; s < n;) {
				long c = c0 + s, end = (c / bc + 1) * bc - c0;
				int nan = 0;
				float m;
				if (end > n)
					end = n;
				m = span_amax(src + s, end - s, k->ignore_nan, &nan);
				merge(&orow[c / bc], m, nan);
				gnan |= nan;
				g = m > g ? m : g;
				s = end;
			}
		}
	}
	*gp = g;
	*gnanp = gnan;
}

/* amax_rows for bc = 1, an amax per column over each block of br rows
 * (rowwise recipes' wgrad operands): span_amax would take one element a
 * call. Chunk by chunk of columns, an elementwise max of |x|'s bits into
 * the block row's results (NaN above inf, as in span_amax; with
 * ignore_nan a NaN counts 0), then NaN made the one quiet NaN merge()
 * writes. Only this part's results are touched, so the global max and
 * NaN come from them. */
static void
amax_cols(const Amax *k, long r0, long r1, float *out, float *gp, int *gnanp)
{
	float buf[CHUNK], g = 0.0f;
	uint32_t acc[CHUNK], u[CHUNK];
	long c0, r, j;
	int gnan = 0;

	for (c0 = 0; c0 < k->cols; c0 += CHUNK) {
		long n = k->cols - c0 < CHUNK ? k->cols - c0 : CHUNK, brow = -1;
		for (r = r0; r <= r1; r++) {
			long b = r < r1 ? r / k->br : -2;
			if (b != brow) {
				if (brow >= 0) {
					float *o = out + brow * k->nbc + c0;
					for (j = 0; j < n; j++) {
						if (acc[j] > 0x7f800000u) {
							gnan = 1;
							o[j] = NAN;
							continue;
						}
						memcpy(&o[j], &acc[j], 4);
						g = o[j] > g ? o[j] : g;
					}
				}
				if (b < 0)
					break;
				memset(acc, 0, sizeof acc);
				brow = b;
			}
			size_t off = (size_t)r * (size_t)k->cols + (size_t)c0;
			const float *src = buf;
			if (k->xf == PRECC_FP32 || k->xf == PRECC_TF32)
				src = (const float *)k->x + off;
			else
				interp_load(k->x, k->xf, off, n, buf);
			memcpy(u, src, (size_t)n * 4);
			if (k->ignore_nan)
				for (j = 0; j < n; j++) {
					uint32_t v = u[j] & 0x7fffffffu;
					v = v > 0x7f800000u ? 0 : v;
					acc[j] = v > acc[j] ? v : acc[j];
				}
			else
				for (j = 0; j < n; j++) {
					uint32_t v = u[j] & 0x7fffffffu;
					acc[j] = v > acc[j] ? v : acc[j];
				}
		}
	}
	*gp = g;
	*gnanp = gnan && !k->ignore_nan;
}

static void
amax_part(void *ctx, int part, long u0, long u1)
{
	Amax *k = ctx;

	if (k->by_block_rows) {
		long r1 = u1 * k->br < k->rows ? u1 * k->br : k->rows;
		(k->bc == 1 ? amax_cols : amax_rows)(k, u0 * k->br, r1, k->out,
		                                     &k->g[part], &k->gnan[part]);
	} else {
		float *o = k->out + (size_t)part * (size_t)k->nb;
		for (long b = 0; b < k->nb; b++)
			o[b] = 0.0f;
		(k->bc == 1 ? amax_cols : amax_rows)(k, u0, u1, o, &k->g[part],
		                                     &k->gnan[part]);
	}
}

/*
 * Threads take whole block rows when there are enough of them (each block
 * has one writer); otherwise ranges of data rows into private arrays that
 * are merged after. max is order-free and NaN is sticky, so the result
 * does not depend on the split.
 */
int
precc_amax(const void *x, precc_format xf, long rows, long cols,
           precc_block blk, float *out, float *global)
{
	return precc_amax_policy(x, xf, rows, cols, blk,
	                         PRECC_AMAX_NAN_PROPAGATE, out, global);
}

int
precc_amax_policy(const void *x, precc_format xf, long rows, long cols,
                  precc_block blk, precc_amax_nan nan, float *out,
                  float *global)
{
	Amax k;
	long nbr, b;
	int e, nt, i;
	float g = 0.0f;
	int gnan = 0;
	float *priv = NULL;

	if (!x || !out)
		return interp_fail(PRECC_IEINVAL, "amax: NULL buffer");
	if (!interp_input_format(xf))
		return interp_fail(PRECC_IEINVAL, "amax: unsupported input format");
	if ((e = interp_check_fmt("amax", xf, rows, cols)) != 0)
		return e;
	if ((e = interp_block("amax", rows, cols, blk, &k.br, &k.bc)) != 0)
		return e;
	memset(k.g, 0, sizeof k.g);
	memset(k.gnan, 0, sizeof k.gnan);
	if (nan != PRECC_AMAX_NAN_PROPAGATE && nan != PRECC_AMAX_NAN_IGNORE)
		return interp_fail(PRECC_IEINVAL, "amax: unknown NaN policy %d",
		                   (int)nan);
	k.ignore_nan = nan == PRECC_AMAX_NAN_IGNORE;
	k.x = x;
	k.xf = xf;
	k.rows = rows;
	k.cols = cols;
	k.nb = precc_block_count(rows, cols, blk, &nbr, &k.nbc);
	for (b = 0; b < k.nb; b++)
		out[b] = 0.0f;
	nt = interp_parallel_parts(rows, cols, 0);
	k.by_block_rows = nbr >= nt;
	k.out = out;
	if (!k.by_block_rows) {
		priv = malloc((size_t)nt * (size_t)k.nb * sizeof *priv);
		if (!priv) {
			nt = 1;
			k.by_block_rows = 1;
		} else {
			k.out = priv;
		}
	}
	if (k.by_block_rows)
		interp_parallel_rows(nbr, (rows / nbr + 1) * cols, nt, amax_part, &k);
	else
		interp_parallel_rows(rows, cols, nt, amax_part, &k);
	for (i = 0; i < INTERP_MAX_PARTS; i++) {
		gnan |= k.gnan[i];
		g = k.g[i] > g ? k.g[i] : g;
	}
	if (priv) {
		for (i = 0; i < nt; i++)
			for (b = 0; b < k.nb; b++) {
				float v = priv[(size_t)i * (size_t)k.nb + (size_t)b];
				merge(&out[b], v, isnan(v));
			}
		free(priv);
	}
	if (global)
		*global = gnan ? NAN : g;
	return PRECC_IOK;
}
