/*
 * interp_amax.c — amax (max |x|) of a [rows, cols] tensor at any block
 * granularity, plus the global amax. NaN in a block makes its amax NaN.
 */
#include <math.h>

#include "interp_util.h"

enum { CHUNK = 512 };

/* max |v[i]| over n values; *nan set if any is NaN. */
static float
span_amax(const float *v, long n, int *nan)
{
	float m = 0.0f;
	int bad = 0;
	long i;

	for (i = 0; i < n; i++) {
		float a = fabsf(v[i]);
		bad |= a != a;
		m = a > m ? a : m;
	}
	*nan |= bad;
	return m;
}

static void
merge(float *dst, float m, int nan)
{
	if (nan || isnan(*dst))
		*dst = NAN;
	else if (m > *dst)
		*dst = m;
}

int
precc_amax(const void *x, precc_format xf, long rows, long cols,
           precc_block blk, float *out, float *global)
{
	long br, bc, nbc, nb, r, c0, b;
	float buf[CHUNK], g = 0.0f;
	int e, gnan = 0;

	if (!x || !out)
		return interp_fail(PRECC_IEINVAL, "amax: NULL buffer");
	if (!interp_input_format(xf))
		return interp_fail(PRECC_IEINVAL, "amax: unsupported input format");
	if ((e = interp_check_tensor("amax", rows, cols,
	                             precc_interp_elem_bytes(xf))) != 0)
		return e;
	if ((e = interp_block("amax", rows, cols, blk, &br, &bc)) != 0)
		return e;
	nb = precc_block_count(rows, cols, blk, NULL, &nbc);
	for (b = 0; b < nb; b++)
		out[b] = 0.0f;
	for (r = 0; r < rows; r++) {
		float *orow = out + (r / br) * nbc;
		for (c0 = 0; c0 < cols; c0 += CHUNK) {
			long n = cols - c0 < CHUNK ? cols - c0 : CHUNK, s;
			interp_load(x, xf, (size_t)r * (size_t)cols + (size_t)c0, n, buf);
			/* split the chunk at block boundaries */
			for (s = 0; s < n;) {
				long c = c0 + s, end = (c / bc + 1) * bc - c0;
				int nan = 0;
				float m;
				if (end > n)
					end = n;
				m = span_amax(buf + s, end - s, &nan);
				merge(&orow[c / bc], m, nan);
				gnan |= nan;
				g = m > g ? m : g;
				s = end;
			}
		}
	}
	if (global)
		*global = gnan ? NAN : g;
	return PRECC_IOK;
}
