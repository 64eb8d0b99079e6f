/*
 * interp/scale.c — scales from amax: per-block scale/scale_inv with the
 * inf/NaN policy, MX e8m0 shared exponents, NVFP4 two-level scales, and
 * the delayed-scaling amax history (push, reduce).
 */
#include <math.h>
#include <string.h>

#include "util.h"

int
precc_scales(const float *amax, long n, const precc_scale_params *p,
             precc_nonfinite nf, const float *prev, float *scale,
             float *scale_inv, long *n_nonfinite)
{
	long i, bad = 0;

	if (!amax || !p || !scale)
		return interp_fail(PRECC_IEINVAL, "scales: NULL argument");
	if (n <= 0)
		return interp_fail(PRECC_IEEMPTY, "scales: %ld amax values", n);
	if (!(p->fmax > 0.0f) || !isfinite(p->fmax))
		return interp_fail(PRECC_IEINVAL, "scales: fmax %g is not a "
		                   "positive finite number", (double)p->fmax);
	for (i = 0; i < n; i++) {
		bool nonfinite = false;
		float s = precc_compute_scale(amax[i], p, &nonfinite);
		if (nonfinite || !isfinite(amax[i])) {
			bad++;
			if (nf == PRECC_NF_PROPAGATE)
				s = NAN;
			else
				s = prev ? prev[i] : 1.0f;
		}
		scale[i] = s;
		if (scale_inv)
			scale_inv[i] = 1.0f / s;
	}
	if (n_nonfinite)
		*n_nonfinite = bad;
	if (bad && nf == PRECC_NF_ERROR)
		return interp_fail(PRECC_IENONFINITE, "scales: %ld of %ld amax "
		                   "values are inf or NaN", bad, n);
	return PRECC_IOK;
}

int
precc_mx_emax(precc_format elem)
{
	switch (elem) {
	case PRECC_E4M3: case PRECC_E5M2: case PRECC_E2M1: case PRECC_E3M2: case PRECC_E2M3:
		return ilogbf(precc_format_get(elem)->max);
	default:
		return -1;
	}
}

/* 2^e as an exact fp32, e in [-127, 127]. */
static float
pow2f(int e)
{
	return ldexpf(1.0f, e);
}

int
precc_mx_scales(const float *amax, long n, precc_format elem,
                precc_mx_mode mode, uint8_t *e8m0, float *scale,
                float *scale_inv, long *n_nonfinite)
{
	int emax = precc_mx_emax(elem);
	float fmax;
	long i, bad = 0;

	if (!amax || !e8m0)
		return interp_fail(PRECC_IEINVAL, "mx scales: NULL argument");
	if (n <= 0)
		return interp_fail(PRECC_IEEMPTY, "mx scales: %ld amax values", n);
	if (emax < 0)
		return interp_fail(PRECC_IEINVAL, "mx scales: %s is not an MX "
		                   "element format", precc_format_get(elem)->name);
	if (mode != PRECC_MX_FLOOR && mode != PRECC_MX_RCEIL)
		return interp_fail(PRECC_IEINVAL, "mx scales: unknown mode %d",
		                   (int)mode);
	fmax = precc_format_get(elem)->max;
	for (i = 0; i < n; i++) {
		float a = fabsf(amax[i]);
		int e, x;
		if (!isfinite(a)) {
			bad++;
			e8m0[i] = 0xff;
			if (scale)
				scale[i] = NAN;
			if (scale_inv)
				scale_inv[i] = NAN;
			continue;
		}
		if (a == 0.0f) {
			e = -127;
		} else if (mode == PRECC_MX_FLOOR) {
			frexpf(a, &x);          /* a = f * 2^x, f in [0.5, 1) */
			e = (x - 1) - emax;     /* floor(log2 a) - emax */
		} else {
			float r = a / fmax;
			float f = frexpf(r, &x);
			/* ceil(log2 r): exact powers of two (f == 0.5) stay */
			e = f == 0.5f ? x - 1 : x;
			if (r == 0.0f)
				e = -127;
		}
		if (e < -127)
			e = -127;
		if (e > 127)
			e = 127;
		e8m0[i] = (uint8_t)(e + 127);
		if (scale)
			scale[i] = pow2f(-e);
		if (scale_inv)
			scale_inv[i] = pow2f(e);
	}
	if (n_nonfinite)
		*n_nonfinite = bad;
	return PRECC_IOK;
}

int
precc_nvfp4_scales(const float *amax, long n, float global_amax,
                   uint8_t *e4m3, float *global_scale_inv, float *scale,
                   float *scale_inv)
{
	float genc, gdec;
	long i;

	if (!amax || !e4m3)
		return interp_fail(PRECC_IEINVAL, "nvfp4 scales: NULL argument");
	if (n <= 0)
		return interp_fail(PRECC_IEEMPTY, "nvfp4 scales: %ld amax values", n);
	global_amax = fabsf(global_amax);
	genc = global_amax > 0.0f && isfinite(global_amax)
	       ? (448.0f * 6.0f) / global_amax : 1.0f;
	if (!isfinite(genc))
		genc = 3.40282347e38f;
	gdec = 1.0f / genc;
	if (global_scale_inv)
		*global_scale_inv = gdec;
	for (i = 0; i < n; i++) {
		float d = amax[i] / 6.0f * genc, dq;
		e4m3[i] = (uint8_t)precc_encode(PRECC_E4M3, d, PRECC_RNE, true, 0);
		dq = precc_decode(PRECC_E4M3, e4m3[i]);
		if (scale)
			scale[i] = dq == 0.0f ? 0.0f : genc / dq;
		if (scale_inv)
			scale_inv[i] = dq * gdec;
	}
	return PRECC_IOK;
}

int
precc_history_init(precc_amax_history *h, float *buf, int len, long n)
{
	size_t cnt;

	if (!h || !buf)
		return interp_fail(PRECC_IEINVAL, "history: NULL argument");
	if (len <= 0 || n <= 0)
		return interp_fail(PRECC_IEEMPTY, "history: length %d x %ld", len, n);
	if (interp_mul((size_t)len, (size_t)n, &cnt) != 0
	    || cnt > interp_phys_bytes() / sizeof(float))
		return interp_fail(PRECC_IETOOBIG, "history: %d x %ld is too big",
		                   len, n);
	h->buf = buf;
	h->len = len;
	h->n = n;
	h->pos = 0;
	memset(buf, 0, cnt * sizeof *buf);
	return PRECC_IOK;
}

int
precc_history_push(precc_amax_history *h, const float *amax)
{
	if (!h || !h->buf || !amax || h->len <= 0 || h->pos < 0
	    || h->pos >= h->len)
		return interp_fail(PRECC_IEINVAL, "history push: bad history");
	memcpy(h->buf + (size_t)h->pos * (size_t)h->n, amax,
	       (size_t)h->n * sizeof *amax);
	h->pos = (h->pos + 1) % h->len;
	return PRECC_IOK;
}

int
precc_history_reduce(const precc_amax_history *h, precc_history_algo a,
                     float *out)
{
	long j;
	int s;

	if (!h || !h->buf || !out || h->len <= 0 || h->pos < 0
	    || h->pos >= h->len)
		return interp_fail(PRECC_IEINVAL, "history reduce: bad history");
	if (a == PRECC_HIST_MOST_RECENT) {
		s = (h->pos + h->len - 1) % h->len;
		memcpy(out, h->buf + (size_t)s * (size_t)h->n,
		       (size_t)h->n * sizeof *out);
		return PRECC_IOK;
	}
	if (a != PRECC_HIST_MAX)
		return interp_fail(PRECC_IEINVAL, "history reduce: unknown algo %d",
		                   (int)a);
	for (j = 0; j < h->n; j++) {
		float m = h->buf[j];
		for (s = 1; s < h->len; s++) {
			float v = h->buf[(size_t)s * (size_t)h->n + (size_t)j];
			if (isnan(v) || isnan(m))
				m = NAN;
			else if (v > m)
				m = v;
		}
		out[j] = m;
	}
	return PRECC_IOK;
}
