/*
 * interp/scale.c — scales from amax: per-block scale/scale_inv with the
 * inf/NaN policy, MX e8m0 shared exponents, NVFP4 two-level scales, and
 * the delayed-scaling amax history (push, reduce).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "util.h"

/* The scale formula for an inf/NaN amax with no special case. */
static float
ieee_scale(float a, const precc_scale_params *p, float *si)
{
	float s;

	if (p->amax_over_fmax) {
		*si = a / p->fmax;
		return 1.0f / *si;
	}
	s = (float)ldexp((double)p->fmax / (double)a, -p->margin);
	*si = 1.0f / s;
	return s;
}

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
	if ((unsigned)nf > PRECC_NF_IEEE)
		return interp_fail(PRECC_IEINVAL, "scales: unknown inf/NaN policy %d",
		                   (int)nf);
	for (i = 0; i < n; i++) {
		bool nonfinite = false;
		float s = precc_compute_scale(amax[i], p, &nonfinite);
		float a = fabsf(amax[i]), si;
		if (p->eps > 0 && a < p->eps)
			a = p->eps;
		si = 1.0f / s;
		if (nonfinite || !isfinite(amax[i])) {
			bad++;
			if (nf == PRECC_NF_PROPAGATE)
				s = NAN;
			else if (nf == PRECC_NF_IEEE)
				s = ieee_scale(a, p, &si);
			else if (nf == PRECC_NF_ONE)
				s = 1.0f;
			else
				s = prev ? prev[i] : 1.0f;
			if (nf != PRECC_NF_IEEE)
				si = 1.0f / s;
		} else if (a == 0.0f && p->zero_keep) {
			s = prev ? prev[i] : 1.0f;
			si = 1.0f / s;
		} else if (p->amax_over_fmax && a != 0.0f) {
			si = a / p->fmax;    /* the sf DeepSeek multiplies back by */
		}
		scale[i] = s;
		if (scale_inv)
			scale_inv[i] = si;
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

/* TE's ptx::float_to_e8m0 (util/ptx_arch_spec.cuh:72-104, the software
 * path; cvt.rp.satfinite.ue8m0x2.f32 on Blackwell gives the same codes)
 * of amax * max_norm_rcp (utils.cuh:1044), and exp2f_rcp (util/ptx.cuh:
 * 309-318) for the quantize multiplier. */
static int
mx_scales_te(const float *amax, long n, precc_format elem, uint8_t *e8m0,
             float *scale, float *scale_inv, long *n_nonfinite)
{
	float rcp = (float)(1.0 / (double)precc_format_get(elem)->max);
	long i, bad = 0;

	for (i = 0; i < n; i++) {
		float v = fabsf(amax[i]) * rcp;
		uint32_t u, m;
		unsigned ex;
		memcpy(&u, &v, 4);
		ex = u >> 23;
		m = u & 0x7fffff;
		if (isnan(v))
			ex = 0xff;
		else if (isinf(v))
			ex = 0xfe;
		else if (v != 0.0f && m > 0 && ex != 0xfe && !(ex == 0 && m <= 0x400000))
			ex++;
		if (!isfinite(amax[i]))
			bad++;
		e8m0[i] = (uint8_t)ex;
		if (scale) {
			uint32_t b = ex == 255 ? 0x7fffffffu : ex == 254 ? 0x00400000u
			             : (254u - ex) << 23;
			memcpy(&scale[i], &b, 4);
		}
		if (scale_inv)
			scale_inv[i] = ex == 255 ? NAN : ldexpf(1.0f, (int)ex - 127);
	}
	if (n_nonfinite)
		*n_nonfinite = bad;
	return PRECC_IOK;
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
	if (mode == PRECC_MX_RCEIL_TE)
		return mx_scales_te(amax, n, elem, e8m0, scale, scale_inv, n_nonfinite);
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

uint8_t
precc_nvfp4_block_scale(precc_nvfp4_formula f, float amax, float gs)
{
	float d;

	if (f == PRECC_NVFP4_TE214_TRANSPOSE) {
		d = amax * (gs * (1.0f / 6.0f));
	} else if (f == PRECC_NVFP4_TE28_TRANSPOSE) {
		d = amax / 6.0f * gs;
	} else {
		/* torchao clamps before the cast, so it writes no e4m3
		 * subnormal; a NaN passes (torch.clamp) */
		d = amax / 6.0f / gs;
		d = d < 0x1p-6f ? 0x1p-6f : d > 448.0f ? 448.0f : d;
	}
	return (uint8_t)precc_encode(PRECC_E4M3, d, PRECC_RNE, true, 0);
}

int
precc_nvfp4_scales_ref(const float *amax, long n, float global_amax,
                       precc_nvfp4_formula f, uint8_t *e4m3,
                       float *global_scale_inv, float *scale, float *scale_inv)
{
	float gs, gdec;
	long i;

	if (!amax || !e4m3)
		return interp_fail(PRECC_IEINVAL, "nvfp4 scales: NULL argument");
	if (n <= 0)
		return interp_fail(PRECC_IEEMPTY, "nvfp4 scales: %ld amax values", n);
	if ((unsigned)f > PRECC_NVFP4_TORCHAO)
		return interp_fail(PRECC_IEINVAL, "nvfp4 scales: unknown formula %d",
		                   (int)f);
	if (f == PRECC_NVFP4_TORCHAO) {
		gs = gdec = global_amax / (448.0f * 6.0f);
	} else {
		gs = fminf(448.0f * 6.0f / global_amax, FLT_MAX);
		if (global_amax == 0.0f || gs == 0.0f)
			gs = 1.0f;
		gdec = 1.0f / gs;
	}
	if (global_scale_inv)
		*global_scale_inv = gdec;
	for (i = 0; i < n; i++) {
		float dq;
		e4m3[i] = precc_nvfp4_block_scale(f, amax[i], gs);
		dq = precc_decode(PRECC_E4M3, e4m3[i]);
		if (scale)
			scale[i] = f == PRECC_NVFP4_TORCHAO ? 1.0f / gdec / dq
			           : fminf(1.0f / (dq * gdec), FLT_MAX);
		if (scale_inv)
			scale_inv[i] = dq * gdec;
	}
	return PRECC_IOK;
}

int
precc_history_update_te(precc_amax_history *h, const float *amax,
                        precc_history_algo a, float fmax, int margin,
                        float *scale)
{
	float last, m = 0.0f, s;
	float smax = fmax * powf(2.0f, (float)-margin);
	int k;

	if (!h || !h->buf || !amax || !scale || h->len <= 0 || h->pos < 0
	    || h->pos >= h->len)
		return interp_fail(PRECC_IEINVAL, "history update: bad history");
	if (h->n != 1)
		return interp_fail(PRECC_IEINVAL, "history update: TE's update is "
		                   "per scale (n = 1), not %ld", h->n);
	if (a != PRECC_HIST_MAX && a != PRECC_HIST_MOST_RECENT)
		return interp_fail(PRECC_IEINVAL, "history update: unknown algo %d",
		                   (int)a);
	last = amax[0];
	if (last != 0.0f) {      /* NaN != 0: a NaN step rolls */
		precc_history_push(h, &last);
		for (k = 0; k < h->len; k++)
			m = fmaxf(m, h->buf[k]);
	}
	if (a == PRECC_HIST_MOST_RECENT)
		m = last;
	s = isfinite(m) && m > 0.0f ? smax / m : scale[0];
	if (isinf(s))
		s = FLT_MAX;
	scale[0] = s;
	return PRECC_IOK;
}
