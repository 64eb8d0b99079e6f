/*
 * gemm_check.c — how far a GEMM kernel's outputs may differ between two
 * backends that both follow the kernel's accumulation model (the cuda
 * kernel and the cpu interpreter), and the comparison against that bound.
 * The derivation is docs/numerics.md, "The GEMM check bound"; precc-run
 * --check uses it (runtime/precc_run.c).
 *
 * For output element (i, j) with S = Σ_k |a_ik|·|b_jk|·|sa·sb| (the GEMM of
 * the operands' magnitudes, computed here by the interpreter on |inputs|),
 * each side's accumulator is within c·S of the exact sum, so the two are
 * within (c_gpu + c_cpu)·S; every rounding of the epilogue (bias, main_grad
 * add, output cast) adds one ulp at the magnitude it rounds.
 *
 * Floor 4 (rt.h) of the runtime; base.h lists the floors.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precc/interp.h"
#include "precc/numerics.h"
#include "rt.h"

/* Higham's γ_n = n·u / (1 - n·u); inf when n·u >= 1 (no bound). */
double rt_gamma(double n, double u)
{
	double nu = n * u;

	return nu < 1 ? nu / (1 - nu) : INFINITY;
}

/* One side's accumulation of K products in chunks of P (P = K: one chunk)
 * with a chunk (inner) accumulator of unit roundoff u_in, each chunk then
 * scaled and added into an fp32 outer sum (RNE, u = 2^-24):
 *   |ŝ - s| <= [γ_P(u_in) + γ_{nc+1}(u) + γ_P(u_in)·γ_{nc+1}(u)] · S,
 * nc = ceil(K / P). */
static double side_bound(long K, long P, double u_in)
{
	long nc = (K + P - 1) / P;
	double gi = rt_gamma((double)P, u_in), go = rt_gamma((double)nc + 1, 0x1p-24);

	return gi + go + gi * go;
}

double rt_gemm_rel_bound(int accum, int accum_n, long K, long P, int mma_bits,
                         int cpu_promote_bits)
{
	double ucpu, ugpu;

	if (P <= 0 || P > K)
		P = K;
	switch (accum) {
	case ACC_FAST:       /* both keep B mantissa bits, truncating */
		ucpu = ugpu = ldexp(1, -accum_n);
		break;
	case ACC_PROMOTE:    /* the model's tensor-core chunk sum, both sides */
		ucpu = cpu_promote_bits > 0 && cpu_promote_bits < 23 ? ldexp(1, -cpu_promote_bits)
		                                                     : 0x1p-24;
		ugpu = ucpu > ldexp(1, -mma_bits) ? ucpu : ldexp(1, -mma_bits);
		break;
	default:             /* exact fp32 on cpu; the mma's sum on the GPU */
		ucpu = 0x1p-24;
		ugpu = ldexp(1, -mma_bits);
		break;
	}
	return side_bound(K, P, ucpu) + side_bound(K, P, ugpu);
}

/* ulp of format f at magnitude |x| (the spacing of f's values there; the
 * subnormal spacing below the smallest normal). */
double rt_ulp(precc_format f, double x)
{
	int mb = f == PRECC_BF16 ? 7 : f == PRECC_FP16 ? 10 : f == PRECC_E4M3 ? 3
	       : f == PRECC_E5M2 ? 2 : 23;
	int emin = f == PRECC_BF16 ? -126 : f == PRECC_FP16 ? -14 : f == PRECC_E4M3 ? -6
	         : f == PRECC_E5M2 ? -14 : -126;
	int e;

	x = fabs(x);
	if (!isfinite(x))
		return INFINITY;
	frexp(x, &e);     /* x = m·2^e, m in [0.5, 1) */
	e -= 1;
	if (x == 0 || e < emin)
		e = emin;
	return ldexp(1, e - mb);
}

/* The kernel's gemm and what its epilogue rounds. */
typedef struct Epi {
	const Ins *gm;
	int accum_out;        /* the f32 value before the cast (or the result) */
	int nround;           /* f32 roundings after the accumulator: bias, accumulate */
	int bias, old;        /* bias and main_grad params, -1 */
} Epi;

static int epi_of(const Func *f, Epi *e)
{
	memset(e, 0, sizeof *e);
	e->bias = e->old = -1;
	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		/* gemm_grouped: each expert's GEMM over its rows (m) or tokens
		 * (k); S from the same op on the magnitudes is each expert's, and
		 * K (the tokens for k) bounds every expert's */
		if (in->op == OP_gemm || in->op == OP_gemm_grouped) {
			if (e->gm)
				return -1;
			e->gm = in;
			e->accum_out = in->res;
		}
	}
	if (!e->gm)
		return -1;
	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (in->op == OP_bias || in->op == OP_accumulate) {
			e->nround++;
			e->accum_out = in->res;
		}
	}
	return 0;
}

int rt_kernel_is_gemm(const Func *f)
{
	Epi e;

	return f && epi_of(f, &e) == 0;
}

/* |x| in x's own format, element by element (e8m0 scales are positive);
 * with zero_nonfinite, inf and NaN become 0. */
static void *abs_copy(const void *src, size_t bytes, precc_format f, int zero_nonfinite)
{
	unsigned char *d = malloc(bytes ? bytes : 1);
	size_t es = precc_interp_elem_bytes(f);
	/* e2m1: two codes a byte */
	size_t n = f == PRECC_E2M1 ? 2 * bytes : es ? bytes / es : 0;

	if (!d)
		return NULL;
	memcpy(d, src, bytes);
	if (f == PRECC_E8M0)
		return d;
	for (size_t i = 0; i < n; i++) {
		uint32_t c = precc_interp_code(d, f, i);
		float v = precc_decode(f, c);
		if (zero_nonfinite && !isfinite(v))
			precc_interp_set_code(d, f, i, precc_encode(f, 0.0f, PRECC_RNE, false, 0));
		else if (v < 0 || (v == 0 && signbit(v)))
			precc_interp_set_code(d, f, i, precc_encode(f, fabsf(v), PRECC_RNE, false, 0));
	}
	return d;
}

/* The interpreter run of f on the magnitudes of its operands (inf and NaN
 * made 0 with zero_nonfinite), fp32_accum; NULL with err set. The
 * copies are in cp[0..nparam), for the caller to free. */
static IrInterp *abs_run(const Func *f, long m, int nparam, const char *const *pname,
                         const void *const *pdata, const size_t *pbytes, int zero_nonfinite,
                         void **cp, char *err, size_t errsz)
{
	IrInterpOpts o;
	IrInterp *ip;

	ir_interp_opts_init(&o);
	o.m = m;
	o.fp32_accum = true;             /* S in fp32, as exactly as it goes: a
	                                    fast:B sum would truncate it low */
	o.threads = 1;
	if (!(ip = ir_interp_new(f, &o, err, errsz)))
		return NULL;
	for (int p = 0; p < nparam; p++) {
		const Ins *d = NULL;
		for (int i = 0; i < f->nins; i++)
			if (f->ins[i].op == OP_param && !strcmp(f->val[f->ins[i].res].name, pname[p]))
				d = &f->ins[i];
		if (!d)
			continue;
		if (!(cp[p] = abs_copy(pdata[p], pbytes[p], f->val[d->res].type.fmt, zero_nonfinite)) ||
		    ir_interp_bind(ip, pname[p], cp[p], pbytes[p])) {
			snprintf(err, errsz, "%s", cp[p] ? ir_interp_error(ip) : "out of memory");
			ir_interp_free(ip);
			return NULL;
		}
	}
	if (ir_interp_run(ip)) {
		snprintf(err, errsz, "%s", ir_interp_error(ip));
		ir_interp_free(ip);
		return NULL;
	}
	return ip;
}

int rt_gemm_tolerance(const Func *f, long m, int nparam, const char *const *pname,
                      const void *const *pdata, const size_t *pbytes, int out,
                      int mma_bits, float *tol, size_t ntol, char *err, size_t errsz)
{
	Epi e;
	IrInterpOpts o;
	IrInterp *ip = NULL, *ipf = NULL;
	void **cp = calloc(2 * (size_t)nparam + 1, sizeof *cp);
	int rc = -1;
	long rows, cols, srows, scols, orows, ocols;

	if (!cp || epi_of(f, &e)) {
		snprintf(err, errsz, "not a GEMM kernel");
		goto out;
	}
	ir_interp_opts_init(&o);
	int cpu_bits = o.promote_bits;   /* what the cpu backend runs */
	if (!(ip = abs_run(f, m, nparam, pname, pdata, pbytes, 0, cp, err, errsz)))
		goto out;
	const float *S = ir_interp_value(ip, e.gm->res), *Mg = ir_interp_value(ip, e.accum_out);
	ir_interp_value_bytes(ip, e.gm->res, &srows, &scols);
	ir_interp_value_bytes(ip, e.accum_out, &rows, &cols);
	ir_interp_value_bytes(ip, out, &orows, &ocols);
	/* Where S overflows fp32, the finite products alone may reach inf in
	 * one summation order and not in another: the GPU's tensor cores sum
	 * a k-group's products in a wider range than fp32, so where the cpu's
	 * running fp32 sum goes +inf then NaN, the GPU gave -inf or a finite
	 * value (seen on an H200, tests/gpu/lease.sh, 2026-12-04). Those
	 * elements get no bound (tol NaN): S' over the finite operands alone,
	 * which runs only when some S is not finite. */
	const float *Sf = NULL;
	for (long i = 0; i < srows * scols && !Sf; i++)
		if (!isfinite(S[i])) {
			if (!(ipf = abs_run(f, m, nparam, pname, pdata, pbytes, 1, cp + nparam, err,
			                    errsz)))
				goto out;
			Sf = ir_interp_value(ipf, e.gm->res);
		}
	long K = f->val[e.gm->arg[0]].type.dim[1];
	if (K == DIM_M)
		K = m;
	/* the chunk length: promote:N, else the scales' K block, else K */
	long P = e.gm->accum == ACC_PROMOTE ? e.gm->accum_n : 0;
	int s0 = e.gm->op == OP_gemm_grouped ? 3 : 2;   /* after gemm_grouped's %offs */
	for (int s = s0; s < s0 + 2 && s < e.gm->narg && e.gm->accum != ACC_PROMOTE; s++) {
		long kb = f->val[e.gm->arg[s]].type.block[1];
		if (kb > 0 && (P == 0 || kb < P))
			P = kb;
	}
	double c = rt_gemm_rel_bound(e.gm->accum, e.gm->accum_n, K, P, mma_bits, cpu_bits);
	/* S was summed in fp32 over nonnegative terms: S <= S' / (1 - γ) */
	double sfix = 1 / (1 - rt_gamma((double)K + 2, 0x1p-24));
	const Type *ot = &f->val[out].type;
	int is_amax = ot->is_scale;
	precc_format of = ot->fmt;
	double worst = 0;
	for (long r = 0; r < (is_amax ? rows : orows); r++)
		for (long q = 0; q < (is_amax ? cols : ocols); q++) {
			double s = (double)S[r * scols + q] * sfix, mag = (double)Mg[r * cols + q] + s * c;
			double t = c * s + e.nround * rt_ulp(PRECC_FP32, mag)
			         + (of != PRECC_FP32 && !is_amax ? rt_ulp(of, mag) : 0);
			if (!(t == t))
				t = INFINITY;
			if (Sf && !((double)Sf[r * scols + q] * sfix <= FLT_MAX) && !is_amax)
				t = NAN;         /* finite products that overflow: no bound */
			if (is_amax) {
				if (t > worst)
					worst = t;
			} else if ((size_t)(r * ocols + q) < ntol)
				tol[r * ocols + q] = (float)t;
		}
	if (is_amax)
		for (size_t i = 0; i < ntol; i++)
			tol[i] = (float)worst;
	rc = 0;
out:
	if (ip)
		ir_interp_free(ip);
	if (ipf)
		ir_interp_free(ipf);
	for (int p = 0; cp && p < 2 * nparam; p++)
		free(cp[p]);
	free(cp);
	return rc;
}

void rt_gemm_compare(precc_format f, const void *a, const void *b, const float *tol, long n,
                     rt_gemm_diff *d)
{
	size_t es = precc_interp_elem_bytes(f);

	memset(d, 0, sizeof *d);
	d->n = n;
	d->first_over = -1;
	for (long i = 0; i < n; i++) {
		uint32_t ca = 0, cb = 0;
		memcpy(&ca, (const char *)a + (size_t)i * es, es);
		memcpy(&cb, (const char *)b + (size_t)i * es, es);
		if (ca == cb)
			continue;
		double x = precc_decode(f, ca), y = precc_decode(f, cb);
		double ad = fabs(x - y), mx = fmax(fabs(x), fabs(y));
		int bad;
		if (isnan(tol[i])) {
			/* finite products overflow fp32 here: no bound (above) */
			d->unbounded++;
			bad = 0;
		} else if (isinf(x) != isinf(y) && !isnan(x) && !isnan(y) && isfinite(tol[i]) &&
		           signbit(x) == signbit(y)) {
			/* one side's output cast overflowed: it rounds to inf from
			 * max + ulp/2 up (the H200 gave f16 65504 where the cpu gave
			 * inf, 2026-12-04), so the inf stands for that threshold */
			double th = precc_format_get(f)->max + rt_ulp(f, precc_format_get(f)->max) / 2;
			double xe = isinf(x) ? copysign(th, x) : x, ye = isinf(y) ? copysign(th, y) : y;
			ad = fabs(xe - ye);
			bad = ad > (double)tol[i];
			if (tol[i] > 0 && ad / tol[i] > d->max_ratio)
				d->max_ratio = ad / tol[i];
		} else if (!isfinite(x) || !isfinite(y))
			/* nonfinite: the same class (NaN payloads may differ) */
			bad = !(isnan(x) && isnan(y)) && x != y;
		else {
			bad = ad > (double)tol[i];
			if (ad > d->max_abs)
				d->max_abs = ad;
			if (mx > 0 && ad / mx > d->max_rel)
				d->max_rel = ad / mx;
			double ul = ad / rt_ulp(f, mx);
			if (ul > d->max_ulps)
				d->max_ulps = ul;
			if (tol[i] > 0 && ad / tol[i] > d->max_ratio)
				d->max_ratio = ad / tol[i];
		}
		d->differ++;
		if (bad && !d->over++)
			d->first_over = i;
	}
}

int rt_layer_gemm_tols(precc_rt *rt, int layer, long m, int nbuf, const size_t *bytes,
                       const int *fmt, void *const *cpu, int mma_bits, float **tol,
                       const char **kname, char *err, size_t errsz)
{
	const rt_layer *l = rt_need_layer(rt, layer);
	enum { MAXP = 64 };

	if (!l) {
		snprintf(err, errsz, "%s", precc_rt_last_error());
		return -1;
	}
	for (int st = 0; st < l->nstep; st++) {
		const rt_kdesc *k = &rt->art->kern[l->step[st].kernel];
		const char *names[MAXP];
		const void *data[MAXP];
		size_t pb[MAXP];
		if (!rt_kernel_is_gemm(k->fn) || k->nparam > MAXP)
			continue;
		for (int p = 0; p < k->nparam; p++) {
			int b = l->step[st].arg[p];
			names[p] = k->fn->val[k->abi_value[p]].name;
			data[p] = cpu[b];
			pb[p] = bytes[b];
		}
		for (int p = 0; p < k->nparam; p++) {
			int b = l->step[st].arg[p];
			if (!k->param[p].out || b >= nbuf || tol[b])
				continue;
			/* a GEMM's outputs are f32, 16-bit or fp8: whole bytes */
			size_t n = bytes[b] / precc_interp_elem_bytes((precc_format)fmt[b]);
			char e2[768];
			if (!(tol[b] = malloc((n + 1) * sizeof(float)))) {
				snprintf(err, errsz, "out of memory");
				return -1;
			}
			if (rt_gemm_tolerance(k->fn, m, k->nparam, names, data, pb, k->abi_value[p],
			                      mma_bits, tol[b], n, e2, sizeof e2)) {
				snprintf(err, errsz, "layer '%s' kernel '%s': the GEMM bound: %s", l->fqn,
				         k->name, e2);
				return -1;
			}
			/* the kernel launched at m (the m_variant's body is the same) */
			kname[b] = rt->art->kern[precc_rt_step_kernel(rt, layer, st, m)].name;
		}
	}
	return 0;
}
