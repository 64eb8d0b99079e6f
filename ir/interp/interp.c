/*
 * interp/interp.c — run a Func on host buffers: the IR-walking interpreter.
 *
 * A value table holds one buffer per SSA value, sized from its type with
 * the dynamic dim M bound at run time (storage per precc_interp_tensor_bytes:
 * f32 4 bytes, bf16/f16 2, 8- and 6-bit formats one code a byte, e2m1 two
 * a byte, low nibble first, so its last dim must be even).
 * Params are bound by the caller; every other value is allocated once,
 * after the total has been checked against available memory. Each op maps
 * onto one buffer kernel of precc/interp.h (docs/interpreter.md has the
 * arithmetic; docs/sim.md how `precc sim` drives this file).
 *
 * Conventions the IR leaves to the interpreter:
 *  - history_push shifts: slot 0 is the newest amax, slot i is i steps old
 *    (Transformer Engine's roll); history_reduce most_recent reads slot 0.
 *  - accum=promote:N keeps promote_bits (default 14) mantissa bits inside
 *    each N-element chunk, the tensor core's partial sum, and adds chunks
 *    in fp32 with the block scales (DeepGEMM); fast:B keeps B bits across
 *    the whole K (or across each scale block along K: a block scale can
 *    only be applied at a promotion); fp32 is exact fp32 throughout.
 *  - inf/NaN amax (scale): keep -> the previous scale (1.0 without one),
 *    skip -> the same, and the step is marked skipped (ir_interp_commit
 *    then writes no state), error -> the run fails.
 *  - update writes nothing during the run: ir_interp_commit copies the new
 *    values into the bound state buffers, so every GEMM of a step can read
 *    the state as it was when the step began.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "util.h"
#include "grouped.h"

struct Interp {
	const Func *f;
	IrInterpOpts o;
	void **buf;               /* per value: data (bound or owned) */
	size_t *bytes;            /* per value: size at the bound M */
	long (*shape)[2];         /* per value: rows, cols (rank 1: 1, n) */
	bool *owned, *bound;
	IrQuantStats *qs;         /* per instruction, when o.stats */
	int *ret; int nret;
	bool ran, skipped;
	long nonfinite;
	char err[768];
};

static int
fail(IrInterp *ip, const Ins *i, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int k = 0;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (i && i->res >= 0)
		k = snprintf(ip->err, sizeof ip->err, "@%s: %%%s = %s: ", ip->f->name,
		             ip->f->val[i->res].name, opinfo[i->op].name);
	else if (i)
		k = snprintf(ip->err, sizeof ip->err, "@%s: %s: ", ip->f->name, opinfo[i->op].name);
	else
		k = snprintf(ip->err, sizeof ip->err, "@%s: ", ip->f->name);
	if (k < 0 || (size_t)k >= sizeof ip->err)
		k = 0;
	snprintf(ip->err + k, sizeof ip->err - (size_t)k, "%s", msg);
	return -1;
}

void
ir_interp_opts_init(IrInterpOpts *o)
{
	memset(o, 0, sizeof *o);
	o->promote_bits = 14;
}

size_t
ir_interp_mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	unsigned long long kb;

	if (f) {
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
				fclose(f);
				return kb > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kb * 1024;
			}
		fclose(f);
	}
	return interp_phys_bytes();
}

/* Extent of dim d at M: static, or ceil(M / -d). */
static long
extent(long d, long m)
{
	return d >= 0 ? d : m / -d + (m % -d != 0);
}

static precc_block
block_of(const Type *t)
{
	precc_block b = {t->block[0], t->block[1]};
	return b;
}

static size_t
esize(precc_format f)
{
	return precc_interp_elem_bytes(f);
}

static long
nelem(const IrInterp *ip, int v)
{
	return ip->shape[v][0] * ip->shape[v][1];
}

static const Type *
vtype(const IrInterp *ip, int v)
{
	return &ip->f->val[v].type;
}

static float *
fbuf(const IrInterp *ip, int v)
{
	return ip->buf[v];
}

void
ir_interp_free(IrInterp *ip)
{
	if (!ip)
		return;
	if (ip->buf)
		for (int v = 0; v < ip->f->nval; v++)
			if (ip->owned[v])
				free(ip->buf[v]);
	free(ip->buf);
	free(ip->bytes);
	free(ip->shape);
	free(ip->owned);
	free(ip->bound);
	free(ip->qs);
	free(ip->ret);
	free(ip);
}

/* Extra bytes op i needs beyond its result (conversions of scale_inv and
 * sub-byte operands, fp32 staging); SIZE_MAX on overflow. */
static size_t
scratch_bytes(const IrInterp *ip, const Ins *i)
{
	size_t s = 0;

	if (i->op == OP_gemm_grouped)   /* its scales, and group=k's column copies */
		return (size_t)(nelem(ip, i->arg[0]) + nelem(ip, i->arg[1])) * 4
		     + (i->narg == 5 ? (size_t)(nelem(ip, i->arg[3]) + nelem(ip, i->arg[4])) * 4 : 0);
	if (i->op != OP_gemm && i->op != OP_quantize && i->op != OP_dequantize && i->op != OP_bias)
		return 0;
	for (int k = 0; k < i->narg && (i->op != OP_gemm || k < 4); k++) {
		size_t e = (size_t)nelem(ip, i->arg[k]) * (i->op == OP_gemm && k < 2 ? 1 : 4);
		if (__builtin_add_overflow(s, e, &s))   /* e itself fits: values are < 2^62 */
			return SIZE_MAX;
	}
	return s;
}

IrInterp *
ir_interp_new(const Func *f, const IrInterpOpts *opts, char *err, size_t errsz)
{
	IrInterp *ip = calloc(1, sizeof *ip);
	size_t total = 0, scratch = 0, avail;
	long m;

	if (!ip) {
		snprintf(err, errsz, "@%s: out of memory", f->name);
		return NULL;
	}
	ip->f = f;
	if (opts)
		ip->o = *opts;
	else
		ir_interp_opts_init(&ip->o);
	m = ip->o.m;
	ip->buf = calloc((size_t)f->nval + 1, sizeof *ip->buf);
	ip->bytes = calloc((size_t)f->nval + 1, sizeof *ip->bytes);
	ip->shape = calloc((size_t)f->nval + 1, sizeof *ip->shape);
	ip->owned = calloc((size_t)f->nval + 1, sizeof *ip->owned);
	ip->bound = calloc((size_t)f->nval + 1, sizeof *ip->bound);
	ip->qs = calloc((size_t)f->nins + 1, sizeof *ip->qs);
	ip->ret = calloc((size_t)f->nins + 1, sizeof *ip->ret);
	if (!ip->buf || !ip->bytes || !ip->shape || !ip->owned || !ip->bound || !ip->qs
	    || !ip->ret) {
		fail(ip, NULL, "out of memory");
		goto bad;
	}
	if (m <= 0) {
		bool dyn = false;
		for (int v = 0; v < f->nval; v++)
			for (int d = 0; d < f->val[v].type.rank; d++)
				dyn |= f->val[v].type.dim[d] < 0;
		if (dyn || m < 0) {
			fail(ip, NULL, "M = %ld: the token count M must be positive", m);
			goto bad;
		}
	}
	/* size every value at M */
	for (int v = 0; v < f->nval; v++) {
		const Type *t = &f->val[v].type;
		size_t es = t->fmt == PRECC_E2M1 ? 1 : esize(t->fmt), n;
		long r = 1, c;
		if (f->val[v].def < 0) {
			fail(ip, NULL, "%%%s is never defined", f->val[v].name);
			goto bad;
		}
		if (t->rank == 2)
			r = extent(t->dim[0], m), c = extent(t->dim[1], m);
		else if (t->rank == 1)
			c = extent(t->dim[0], m);
		else {
			fail(ip, &f->ins[f->val[v].def], "rank %d is not 1 or 2", t->rank);
			goto bad;
		}
		if (r <= 0 || c <= 0) {
			fail(ip, &f->ins[f->val[v].def], "zero-size or negative shape [%ld, %ld]", r, c);
			goto bad;
		}
		if (es == 0) {
			fail(ip, &f->ins[f->val[v].def], "format %s has no buffer layout",
			     ir_fmt_name(t->fmt));
			goto bad;
		}
		if (t->fmt == PRECC_E2M1 && c % 2) {
			fail(ip, &f->ins[f->val[v].def], "e2m1 is stored two codes per byte along the "
			     "last dim, which must be even: %%%s is [%ld, %ld] at M=%ld", f->val[v].name,
			     r, c, m);
			goto bad;
		}
		if (interp_mul((size_t)r, (size_t)c, &n) != 0 || interp_mul(n, es, &n) != 0
		    || n > SIZE_MAX / 4 || total + n < total) {
			fail(ip, &f->ins[f->val[v].def], "[%ld, %ld] at M=%ld overflows the address space",
			     r, c, m);
			goto bad;
		}
		if (t->fmt == PRECC_E2M1)
			n /= 2;
		ip->shape[v][0] = r, ip->shape[v][1] = c;
		ip->bytes[v] = n;
		if (f->ins[f->val[v].def].op != OP_param)
			total += n;
	}
	for (int k = 0; k < f->nins; k++) {
		size_t s = scratch_bytes(ip, &f->ins[k]);
		if (s > scratch)
			scratch = s;
	}
	avail = ip->o.mem_limit ? ip->o.mem_limit : ir_interp_mem_available();
	if (total + scratch < total || total + scratch > avail) {
		fail(ip, NULL, "needs %zu bytes at M=%ld (values %zu, scratch %zu), more than "
		     "the %zu bytes available", total + scratch, m, total, scratch, avail);
		goto bad;
	}
	for (int v = 0; v < f->nval; v++) {
		if (f->ins[f->val[v].def].op == OP_param)
			continue;
		if (!(ip->buf[v] = calloc(1, ip->bytes[v]))) {
			fail(ip, NULL, "out of memory (%zu bytes for %%%s)", ip->bytes[v],
			     f->val[v].name);
			goto bad;
		}
		ip->owned[v] = true;
	}
	return ip;
bad:
	snprintf(err, errsz, "%s", ip->err);
	ir_interp_free(ip);
	return NULL;
}

const char *
ir_interp_error(const IrInterp *ip)
{
	return ip->err;
}

int
ir_interp_bind(IrInterp *ip, const char *name, void *data, size_t bytes)
{
	int v = ir_find_value(ip->f, name);
	const Ins *d;

	if (v < 0)
		return fail(ip, NULL, "no value %%%s to bind", name);
	d = &ip->f->ins[ip->f->val[v].def];
	if (d->op != OP_param)
		return fail(ip, d, "%%%s is not a param", name);
	if (!data)
		return fail(ip, d, "NULL buffer for %%%s", name);
	if (bytes != ip->bytes[v])
		return fail(ip, d, "%%%s %s is [%ld, %ld] at M=%ld: %zu bytes, got a buffer of %zu",
		            name, ir_fmt_name(vtype(ip, v)->fmt), ip->shape[v][0], ip->shape[v][1],
		            ip->o.m, ip->bytes[v], bytes);
	ip->buf[v] = data;
	ip->bound[v] = true;
	return 0;
}

size_t
ir_interp_value_bytes(const IrInterp *ip, int v, long *rows, long *cols)
{
	if (v < 0 || v >= ip->f->nval)
		return 0;
	if (rows)
		*rows = ip->shape[v][0];
	if (cols)
		*cols = ip->shape[v][1];
	return ip->bytes[v];
}

const void *
ir_interp_value(const IrInterp *ip, int v)
{
	return v >= 0 && v < ip->f->nval && ip->ran ? ip->buf[v] : NULL;
}

int
ir_interp_nresults(const IrInterp *ip)
{
	return ip->nret;
}

int
ir_interp_result(const IrInterp *ip, int k)
{
	return k >= 0 && k < ip->nret ? ip->ret[k] : -1;
}

const IrQuantStats *
ir_interp_quant_stats(const IrInterp *ip, int ins)
{
	if (!ip->o.stats || ins < 0 || ins >= ip->f->nins || !ip->ran)
		return NULL;
	Op op = ip->f->ins[ins].op;
	return op == OP_quantize || op == OP_cast ? &ip->qs[ins] : NULL;
}

bool
ir_interp_skipped(const IrInterp *ip)
{
	return ip->skipped;
}

long
ir_interp_nonfinite(const IrInterp *ip)
{
	return ip->nonfinite;
}

/* ---- ops ------------------------------------------------------------- */

/* A kernel failed: add its message. */
static int
kfail(IrInterp *ip, const Ins *i, int status)
{
	(void)status;
	return fail(ip, i, "%s", precc_interp_error());
}

/* The number of blocks of granularity t over data [rows, cols] must be the
 * element count of the scale value s. */
static int
check_cover(IrInterp *ip, const Ins *i, int data, int s)
{
	long nbr, nbc, n;
	const Type *st = vtype(ip, s);

	if (!st->is_scale)
		return fail(ip, i, "%%%s is not a scale tensor", ip->f->val[s].name);
	n = precc_block_count(ip->shape[data][0], ip->shape[data][1], block_of(st), &nbr, &nbc);
	if (n < 0)
		return kfail(ip, i, (int)n);
	if (nbr != ip->shape[s][0] || nbc != ip->shape[s][1])
		return fail(ip, i, "%%%s is [%ld, %ld] at M=%ld, but its granularity over %%%s "
		            "[%ld, %ld] needs [%ld, %ld]", ip->f->val[s].name, ip->shape[s][0],
		            ip->shape[s][1], ip->o.m, ip->f->val[data].name, ip->shape[data][0],
		            ip->shape[data][1], nbr, nbc);
	return 0;
}

static int
need_f32(IrInterp *ip, const Ins *i, int v)
{
	if (vtype(ip, v)->fmt != PRECC_FP32)
		return fail(ip, i, "%%%s must be f32, got %s", ip->f->val[v].name,
		            ir_fmt_name(vtype(ip, v)->fmt));
	return 0;
}

static int
same_shape(IrInterp *ip, const Ins *i, int a, int b)
{
	if (ip->shape[a][0] != ip->shape[b][0] || ip->shape[a][1] != ip->shape[b][1])
		return fail(ip, i, "shape mismatch: %%%s is [%ld, %ld], %%%s is [%ld, %ld]",
		            ip->f->val[a].name, ip->shape[a][0], ip->shape[a][1], ip->f->val[b].name,
		            ip->shape[b][0], ip->shape[b][1]);
	return 0;
}

static int
op_amax(IrInterp *ip, const Ins *i)
{
	int x = i->arg[0], e;

	if (i->narg == 2) {     /* one per group of rows of %offs (grouped.c) */
		int o = i->arg[1], ng = (int)nelem(ip, o);
		if (need_f32(ip, i, i->res) || !vtype(ip, o)->index || ip->shape[i->res][0] != ng
		    || ip->shape[i->res][1] != 1)
			return fail(ip, i, "an amax per group of rows is f32[G,1]{gx*} of an i32[G]");
		e = precc_amax_grouped(ip->buf[x], vtype(ip, x)->fmt, ip->shape[x][0],
		                       ip->shape[x][1], ip->buf[o], ng,
		                       i->nan_ignore ? PRECC_AMAX_NAN_IGNORE : PRECC_AMAX_NAN_PROPAGATE,
		                       fbuf(ip, i->res));
		return e ? kfail(ip, i, e) : 0;
	}
	if (need_f32(ip, i, i->res) || check_cover(ip, i, x, i->res))
		return -1;
	e = precc_amax_policy(ip->buf[x], vtype(ip, x)->fmt, ip->shape[x][0], ip->shape[x][1],
	                      block_of(vtype(ip, i->res)),
	                      i->nan_ignore ? PRECC_AMAX_NAN_IGNORE : PRECC_AMAX_NAN_PROPAGATE,
	                      fbuf(ip, i->res), NULL);
	return e ? kfail(ip, i, e) : 0;
}

static int
op_scale(IrInterp *ip, const Ins *i)
{
	int a = i->arg[0], e;
	long n = nelem(ip, a), bad = 0;
	precc_scale_params p = {.fmax = ir_fmt_max(i->fmt), .margin = i->margin, .pow2 = i->pow2,
	                        .eps = i->eps, .amax_over_fmax = i->inv, .zero_keep = i->zero_keep,
	                        .pow2_log2 = i->pow2_log2};
	static const precc_nonfinite nfs[NNONFINITE_IR] = {
		[NF_KEEP] = PRECC_NF_KEEP_PREV, [NF_SKIP] = PRECC_NF_KEEP_PREV,
		[NF_ERROR] = PRECC_NF_ERROR, [NF_ONE] = PRECC_NF_ONE, [NF_IEEE] = PRECC_NF_IEEE};
	precc_nonfinite nf = nfs[i->nonfinite];
	const float *prev = NULL;
	float *tmp = NULL;

	if (need_f32(ip, i, a) || need_f32(ip, i, i->res) || same_shape(ip, i, a, i->res))
		return -1;
	if (i->has_blockfmt)     /* NVFP4 global scale: element max x block-scale max */
		p.fmax *= ir_fmt_max(i->blockfmt);
	if (i->narg == 2) {
		if (need_f32(ip, i, i->arg[1]) || same_shape(ip, i, i->arg[1], i->res))
			return -1;
		prev = fbuf(ip, i->arg[1]);
	}
	if (i->inv) {
		/* form=amax_over_fmax: the result is the decode scale sf, which
		 * precc_scales gives as scale_inv (the multiplier is recip's) */
		if (!(tmp = malloc((size_t)n * sizeof *tmp)))
			return fail(ip, i, "out of memory");
		e = precc_scales(fbuf(ip, a), n, &p, nf, NULL, tmp, fbuf(ip, i->res), &bad);
		free(tmp);
	} else
		e = precc_scales(fbuf(ip, a), n, &p, nf, prev, fbuf(ip, i->res), NULL, &bad);
	ip->nonfinite += bad;
	if (bad && i->nonfinite == NF_SKIP)
		ip->skipped = true;
	if (e == PRECC_IENONFINITE)
		return fail(ip, i, "%ld of %ld amax values are inf or NaN (nonfinite=error)", bad, n);
	return e ? kfail(ip, i, e) : 0;
}

static int
op_mx_scale(IrInterp *ip, const Ins *i)
{
	int a = i->arg[0], e;
	long bad = 0;

	if (need_f32(ip, i, a) || same_shape(ip, i, a, i->res))
		return -1;
	if (vtype(ip, i->res)->fmt != PRECC_E8M0)
		return fail(ip, i, "result must be e8m0");
	e = precc_mx_scales(fbuf(ip, a), nelem(ip, a), i->fmt,
	                    i->mxmode == MX_FLOOR ? PRECC_MX_FLOOR
	                    : i->mxmode == MX_RCEIL_TE ? PRECC_MX_RCEIL_TE : PRECC_MX_RCEIL,
	                    ip->buf[i->res], NULL, NULL, &bad);
	ip->nonfinite += bad;
	return e ? kfail(ip, i, e) : 0;
}

/* The global amax behind an NVFP4 global scale: the amax its scale op
 * read, or (a hand-written param) the one the scale stands for. */
static float
global_amax(const IrInterp *ip, int gs)
{
	const Ins *d = ir_def_ins(ip->f, gs);
	float s = fbuf(ip, gs)[0];

	if (d && d->op == OP_scale && d->has_blockfmt) {
		/* the scale op's eps clamp, so block scales and the global
		 * scale describe the same amax */
		float a = fabsf(fbuf(ip, d->arg[0])[0]);
		return d->eps > 0.0f && a < d->eps ? d->eps : a;
	}
	return s > 0.0f ? 448.0f * 6.0f / s : 0.0f;
}

static int
op_block_scale(IrInterp *ip, const Ins *i)
{
	int a = i->arg[0], gs = i->arg[1], e;

	if (need_f32(ip, i, a) || need_f32(ip, i, gs) || same_shape(ip, i, a, i->res))
		return -1;
	if (i->fmt != PRECC_E2M1 || vtype(ip, i->res)->fmt != PRECC_E4M3)
		return fail(ip, i, "only NVFP4 block scales (e2m1 elements, e4m3 scales) are "
		            "supported, got fmt=%s with %s scales", ir_fmt_name(i->fmt),
		            ir_fmt_name(vtype(ip, i->res)->fmt));
	if (nelem(ip, gs) != 1)
		return fail(ip, i, "the global scale must be a single value");
	if (i->nvfp4 != NV_PRECC) {
		/* TE (core_nvfp4.cuh): genc is the global scale itself;
		 * torchao: the global scale is the decode scale */
		const float *am = fbuf(ip, a);
		uint8_t *r = ip->buf[i->res];
		for (long k = 0; k < nelem(ip, a); k++)
			r[k] = precc_nvfp4_block_scale(i->nvfp4 == NV_TE214 ? PRECC_NVFP4_TE214_TRANSPOSE
			                               : i->nvfp4 == NV_TE28 ? PRECC_NVFP4_TE28_TRANSPOSE
			                               : PRECC_NVFP4_TORCHAO, am[k], fbuf(ip, gs)[0]);
		return 0;
	}
	e = precc_nvfp4_scales(fbuf(ip, a), nelem(ip, a), global_amax(ip, gs), ip->buf[i->res],
	                       NULL, NULL, NULL);
	return e ? kfail(ip, i, e) : 0;
}

static int
op_recip(IrInterp *ip, const Ins *i)
{
	int a = i->arg[0];
	precc_format af = vtype(ip, a)->fmt, rf = vtype(ip, i->res)->fmt;
	long n = nelem(ip, a);

	if (same_shape(ip, i, a, i->res))
		return -1;
	if (rf != PRECC_FP32)
		return fail(ip, i, "result must be f32, got %s", ir_fmt_name(rf));
	if (af != PRECC_FP32 && esize(af) != 1)
		return fail(ip, i, "operand must be f32 or an 8-bit scale format, got %s",
		            ir_fmt_name(af));
	for (long k = 0; k < n; k++) {
		float x = af == PRECC_FP32 ? fbuf(ip, a)[k]
		        : precc_decode(af, ((const uint8_t *)ip->buf[a])[k]);
		fbuf(ip, i->res)[k] = 1.0f / x;
	}
	return 0;
}

static int
op_history_push(IrInterp *ip, const Ins *i)
{
	int h = i->arg[0], a = i->arg[1], e;
	long len = nelem(ip, h);
	precc_amax_history hist;
	float *out = fbuf(ip, i->res);

	if (need_f32(ip, i, h) || need_f32(ip, i, a) || same_shape(ip, i, h, i->res))
		return -1;
	if (nelem(ip, a) != 1)
		return fail(ip, i, "only tensorwise histories (one amax per step) are supported");
	if (i->zero_keep && fbuf(ip, a)[0] == 0.0f) {
		/* TE's fused update does not roll on a zero amax (NaN rolls) */
		memcpy(out, fbuf(ip, h), (size_t)len * sizeof *out);
		return 0;
	}
	memmove(out + 1, fbuf(ip, h), (size_t)(len - 1) * sizeof *out);
	/* a ring at slot 0: precc_history_push writes the newest amax there */
	hist.buf = out, hist.len = (int)len, hist.n = 1, hist.pos = 0;
	if (len > (1L << 30))
		return fail(ip, i, "history of %ld slots is too long", len);
	e = precc_history_push(&hist, fbuf(ip, a));
	return e ? kfail(ip, i, e) : 0;
}

static int
op_history_reduce(IrInterp *ip, const Ins *i)
{
	int h = i->arg[0], e;
	long len = nelem(ip, h);
	precc_amax_history hist;

	if (need_f32(ip, i, h) || nelem(ip, i->res) != 1)
		return fail(ip, i, "result must be one f32 amax");
	if (len > (1L << 30))
		return fail(ip, i, "history of %ld slots is too long", len);
	if (i->nan_ignore && i->algo == HIST_MAX) {
		/* TE's kernel_bulk: fmaxf from 0 over the history, NaN ignored */
		float m = 0.0f;
		for (long k = 0; k < len; k++)
			m = fmaxf(m, fbuf(ip, h)[k]);
		fbuf(ip, i->res)[0] = m;
		return 0;
	}
	hist.buf = fbuf(ip, h), hist.len = (int)len, hist.n = 1, hist.pos = len > 1 ? 1 : 0;
	e = precc_history_reduce(&hist, i->algo == HIST_MOST_RECENT ? PRECC_HIST_MOST_RECENT
	                                                            : PRECC_HIST_MAX, fbuf(ip, i->res));
	return e ? kfail(ip, i, e) : 0;
}

/* Per-block fp32 scale_inv (dequant factors) of scale value s, with the
 * NVFP4 global factor g (-1: none): f32 as is, e8m0 decoded, e4m3 block
 * scales decoded times the global scale_inv. *tmp owns a conversion. */
static const float *
dequant_factors(IrInterp *ip, const Ins *i, int s, int g, float **tmp)
{
	precc_format sf = vtype(ip, s)->fmt;
	long n = nelem(ip, s);
	float gv = 1.0f;

	*tmp = NULL;
	if (sf == PRECC_FP32 && g < 0)
		return fbuf(ip, s);
	if (sf != PRECC_FP32 && esize(sf) != 1) {
		fail(ip, i, "scale %%%s must be f32 or an 8-bit scale format, got %s",
		     ip->f->val[s].name, ir_fmt_name(sf));
		return NULL;
	}
	if (g >= 0) {
		if (need_f32(ip, i, g) || nelem(ip, g) != 1) {
			fail(ip, i, "global scale %%%s must be one f32 value", ip->f->val[g].name);
			return NULL;
		}
		gv = fbuf(ip, g)[0];
	}
	if (!(*tmp = malloc((size_t)n * sizeof **tmp))) {
		fail(ip, i, "out of memory");
		return NULL;
	}
	for (long k = 0; k < n; k++) {
		float d = sf == PRECC_FP32 ? fbuf(ip, s)[k]
		        : precc_decode(sf, ((const uint8_t *)ip->buf[s])[k]);
		(*tmp)[k] = g >= 0 ? d * gv : d;
	}
	return *tmp;
}

/* Saturation and flush counts of a cast x -> q under per-block scale
 * (NULL = 1), over x's first `rows` rows (< 0: all): finite x with
 * |x·scale| >= fmax + ulp(fmax)/2, and x != 0 with decode(q) == 0. */
static void
quant_stats(IrInterp *ip, const Ins *i, int x, const float *scale, precc_block blk, int q, long rows)
{
	IrQuantStats *st = &ip->qs[i - ip->f->ins];
	precc_format xf = vtype(ip, x)->fmt, qf = vtype(ip, q)->fmt;
	long cols = ip->shape[x][1], br, bc, nbc;
	const precc_format_info *fi = precc_format_get(qf);
	float row[256];
	int ex;
	/* saturated: beyond what rounding to nearest brings back to fmax,
	 * fmax + ulp(fmax)/2 (e4m3: 464) */
	double sat;

	frexp(fi->max, &ex);
	sat = fi->max + ldexp(1.0, ex - 2 - fi->mbits);
	size_t qes = esize(qf);

	if (interp_block("stats", ip->shape[x][0], cols, blk, &br, &bc) != 0)
		return;
	if (rows < 0 || rows > ip->shape[x][0])
		rows = ip->shape[x][0];
	nbc = (cols + bc - 1) / bc;
	memset(st, 0, sizeof *st);
	for (long r = 0; r < rows; r++)
		for (long c0 = 0; c0 < cols; c0 += 256) {
			long n = cols - c0 < 256 ? cols - c0 : 256;
			size_t off = (size_t)r * (size_t)cols + (size_t)c0;
			interp_load(ip->buf[x], xf, off, n, row);
			for (long j = 0; j < n; j++) {
				float v = row[j], s = scale ? scale[(r / br) * nbc + (c0 + j) / bc] : 1.0f;
				float y = v * s, d;
				uint32_t code;
				st->n++;
				if (!isfinite(v)) {
					st->nonfinite++;
					continue;
				}
				if (isfinite(y) ? fabs((double)y) >= sat : !isnan(y))
					st->saturated++;
				if (v == 0.0f)
					continue;
				if (qf == PRECC_E2M1)
					code = ((const uint8_t *)ip->buf[q])[(off + j) / 2] >> (4 * ((off + j) & 1));
				else if (qes == 1)
					code = ((const uint8_t *)ip->buf[q])[off + j];
				else if (qes == 2)
					code = ((const uint16_t *)ip->buf[q])[off + j];
				else
					memcpy(&code, (const uint32_t *)ip->buf[q] + off + j, 4);
				d = precc_decode(qf, code);
				if (d == 0.0f)
					st->flushed++;
			}
		}
}

/* The counts of a quantize with a scale per group of rows (%offs, the
 * validated offsets): each routed row under its group's scale (1 / the
 * divisor: near enough for statistics), the padding rows past the last
 * offset not counted (they are code 0, not a cast of x) */
static int
grouped_stats(IrInterp *ip, const Ins *i, int x, const precc_quant_opts *o, int ng)
{
	const int32_t *offs = ip->buf[i->arg[2]];
	long rows = ip->shape[x][0], end = offs[ng - 1];
	float *rs = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *rs);
	if (!rs)
		return fail(ip, i, "out of memory");
	for (long r = 0, g = 0; r < rows; r++) {
		while (g < ng - 1 && r >= offs[g])
			g++;
		rs[r] = r >= end ? 0.0f : o->scale ? o->scale[g] : 1.0f / o->divisor[g];
	}
	quant_stats(ip, i, x, rs, (precc_block){1, 0}, i->res, end);
	free(rs);
	return 0;
}

static int
op_quantize(IrInterp *ip, const Ins *i)
{
	int x = i->arg[0], s = i->arg[1], e;
	precc_quant_opts o = {0};
	float *tmp = NULL;
	long n = nelem(ip, s);
	bool grp = i->narg == 3 && vtype(ip, i->arg[2])->index;

	if (same_shape(ip, i, x, i->res) || (!grp && check_cover(ip, i, x, s)))
		return -1;
	if (grp) {     /* a scale per group of rows of %offs (grouped.c) */
		int ng = (int)nelem(ip, i->arg[2]);
		if (need_f32(ip, i, s) || n != ng)
			return fail(ip, i, "a scale per group of rows is f32[G,1]{gx*} of an i32[G]");
		o.qf = vtype(ip, i->res)->fmt;
		o.round = i->round;
		o.saturate = i->sat;
		o.threads = ip->o.threads;
		if (i->divide)
			o.divisor = fbuf(ip, s);
		else
			o.scale = fbuf(ip, s);
		e = precc_quantize_grouped(ip->buf[x], vtype(ip, x)->fmt, ip->shape[x][0],
		                           ip->shape[x][1], ip->buf[i->arg[2]], ng, &o, ip->buf[i->res]);
		if (!e && ip->o.stats)
			e = grouped_stats(ip, i, x, &o, ng);
		return e ? kfail(ip, i, e) : 0;
	}
	o.qf = vtype(ip, i->res)->fmt;
	o.round = i->round;
	o.saturate = i->sat;
	o.blk = block_of(vtype(ip, s));
	o.seed = ip->o.seed;
	o.stream = (uint32_t)i->stream;
	o.threads = ip->o.threads;
	if (i->narg == 3) {
		/* NVFP4: scale = global_scale / decode(block scale), 0 for a zero block */
		int g = i->arg[2];
		precc_format sf = vtype(ip, s)->fmt;
		if (need_f32(ip, i, g) || nelem(ip, g) != 1 || esize(sf) != 1)
			return fail(ip, i, "two-level scales need 8-bit block scales and one f32 "
			            "global scale");
		if (!(tmp = malloc((size_t)n * sizeof *tmp)))
			return fail(ip, i, "out of memory");
		/* TE (quantize_transpose_nvfp4.cuh:531): fminf(1 / (dq * (1 / gs)),
		 * FLT_MAX); torchao (nvfp4_tensor.py:844): (1 / gs) / dq, gs the
		 * decode scale */
		float gs = fbuf(ip, g)[0], rgs = 1.0f / gs;
		for (long k = 0; k < n; k++) {
			float d = precc_decode(sf, ((const uint8_t *)ip->buf[s])[k]);
			tmp[k] = i->nvfp4 == NV_TORCHAO ? rgs / d
			       : i->nvfp4 != NV_PRECC ? fminf(1.0f / (d * rgs), FLT_MAX)
			       : d == 0.0f ? 0.0f : gs / d;
		}
		o.scale = tmp;
	} else {
		if (need_f32(ip, i, s))
			return -1;
		if (i->divide)        /* x / s (DeepSeek-V3 inference/kernel.py:31) */
			o.divisor = fbuf(ip, s);
		else
			o.scale = fbuf(ip, s);
	}
	e = precc_quantize(ip->buf[x], vtype(ip, x)->fmt, ip->shape[x][0], ip->shape[x][1], &o,
	                   ip->buf[i->res]);
	if (!e && ip->o.stats && o.divisor) {
		/* counted with the multiplier 1/s: near enough for statistics */
		if (!(tmp = malloc((size_t)n * sizeof *tmp)))
			return fail(ip, i, "out of memory");
		for (long k = 0; k < n; k++)
			tmp[k] = 1.0f / o.divisor[k];
		quant_stats(ip, i, x, tmp, o.blk, i->res, -1);
	} else if (!e && ip->o.stats)
		quant_stats(ip, i, x, o.scale, o.blk, i->res, -1);
	free(tmp);
	return e ? kfail(ip, i, e) : 0;
}

static int
op_cast(IrInterp *ip, const Ins *i)
{
	int x = i->arg[0], e;
	precc_quant_opts o = {0};
	precc_block whole = {0, 0};

	if (same_shape(ip, i, x, i->res))
		return -1;
	o.qf = vtype(ip, i->res)->fmt;
	o.round = i->round;
	o.saturate = i->sat;
	o.seed = ip->o.seed;
	o.stream = 0x10000u + (uint32_t)(i - ip->f->ins);
	o.threads = ip->o.threads;
	e = precc_quantize(ip->buf[x], vtype(ip, x)->fmt, ip->shape[x][0], ip->shape[x][1], &o,
	                   ip->buf[i->res]);
	if (!e && ip->o.stats)
		quant_stats(ip, i, x, NULL, whole, i->res, -1);
	return e ? kfail(ip, i, e) : 0;
}

static int
op_dequantize(IrInterp *ip, const Ins *i)
{
	int q = i->arg[0], s = i->arg[1], g = i->narg == 3 ? i->arg[2] : -1, e;
	float *tmp, *y;
	const float *f;
	precc_format rf = vtype(ip, i->res)->fmt;

	if (same_shape(ip, i, q, i->res) || check_cover(ip, i, q, s))
		return -1;
	if (!(f = dequant_factors(ip, i, s, g, &tmp)))
		return -1;
	y = rf == PRECC_FP32 ? fbuf(ip, i->res) : malloc((size_t)nelem(ip, q) * sizeof *y);
	if (!y) {
		free(tmp);
		return fail(ip, i, "out of memory");
	}
	e = precc_dequantize(ip->buf[q], vtype(ip, q)->fmt, ip->shape[q][0], ip->shape[q][1],
	                     block_of(vtype(ip, s)), f, y);
	if (!e && rf != PRECC_FP32) {
		precc_quant_opts o = {.qf = rf, .round = PRECC_RNE, .threads = ip->o.threads};
		e = precc_quantize(y, PRECC_FP32, ip->shape[q][0], ip->shape[q][1], &o,
		                   ip->buf[i->res]);
	}
	if (y != ip->buf[i->res])
		free(y);
	free(tmp);
	return e ? kfail(ip, i, e) : 0;
}

static int
op_transpose(IrInterp *ip, const Ins *i)
{
	int x = i->arg[0], e;
	size_t es = esize(vtype(ip, x)->fmt);
	long r = ip->shape[x][0], c = ip->shape[x][1];

	if (vtype(ip, x)->fmt != vtype(ip, i->res)->fmt || r != ip->shape[i->res][1]
	    || c != ip->shape[i->res][0])
		return fail(ip, i, "result [%ld, %ld] is not the transpose of [%ld, %ld]",
		            ip->shape[i->res][0], ip->shape[i->res][1], r, c);
	if (vtype(ip, x)->fmt == PRECC_E2M1) {
		/* packed codes: unpack, transpose the bytes, pack (both dims are
		 * last dims of one of the two, so both are even) */
		size_t n = (size_t)r * (size_t)c;
		uint8_t *u = malloc(2 * n);
		if (!u)
			return fail(ip, i, "out of memory");
		precc_e2m1_unpack(ip->buf[x], n, u);
		e = precc_transpose(u, 1, r, c, u + n);
		if (!e)
			precc_e2m1_pack(u + n, n, ip->buf[i->res]);
		free(u);
		return e ? kfail(ip, i, e) : 0;
	}
	e = precc_transpose(ip->buf[x], es, r, c, ip->buf[i->res]);
	return e ? kfail(ip, i, e) : 0;
}

static int
op_hadamard(IrInterp *ip, const Ins *i)
{
	int x = i->arg[0], e;

	if (same_shape(ip, i, x, i->res))
		return -1;
	e = precc_hadamard16(ip->buf[x], vtype(ip, x)->fmt, ip->shape[x][0], ip->shape[x][1],
	                     i->signs, ip->buf[i->res], vtype(ip, i->res)->fmt, ip->o.threads);
	return e ? kfail(ip, i, e) : 0;
}

/* pad: zero-fill and copy into the top-left; slice: the top-left part. */
static int
op_pad_slice(IrInterp *ip, const Ins *i)
{
	int x = i->arg[0], y = i->res;
	size_t es = esize(vtype(ip, x)->fmt);
	long xr = ip->shape[x][0], xc = ip->shape[x][1], yr = ip->shape[y][0], yc = ip->shape[y][1];
	bool pad = i->op == OP_pad;
	long r = pad ? xr : yr, c = pad ? xc : yc;

	if (vtype(ip, x)->fmt != vtype(ip, y)->fmt || (pad ? (yr < xr || yc < xc)
	                                                   : (yr > xr || yc > xc)))
		return fail(ip, i, "cannot %s [%ld, %ld] to [%ld, %ld]", pad ? "pad" : "slice", xr, xc,
		            yr, yc);
	if (vtype(ip, x)->fmt == PRECC_E2M1) {
		/* rows of packed codes: every row starts a byte (even last dims) */
		es = 1, xc /= 2, yc /= 2, c /= 2;
	}
	if (pad)
		memset(ip->buf[y], 0, ip->bytes[y]);
	for (long k = 0; k < r; k++)
		memcpy((char *)ip->buf[y] + (size_t)k * (size_t)yc * es,
		       (const char *)ip->buf[x] + (size_t)k * (size_t)xc * es, (size_t)c * es);
	return 0;
}

/* fp4/fp6 codes re-encoded as e4m3 (every e2m1, e3m2, e2m3 value is an
 * e4m3 value), for the GEMM's fp8 decode tables. Exact: a table of
 * encode(e4m3, decode(f, code)) over the 256 byte values. */
static uint8_t *
widen_to_e4m3(IrInterp *ip, const Ins *i, int v)
{
	precc_format f = vtype(ip, v)->fmt;
	long n = nelem(ip, v), k;
	uint8_t *w = malloc((size_t)n), lut[256];
	const uint8_t *s = ip->buf[v];

	if (!w) {
		fail(ip, i, "out of memory");
		return NULL;
	}
	for (int c = 0; c < 256; c++)
		lut[c] = (uint8_t)precc_encode(PRECC_E4M3, precc_decode(f, (uint32_t)c), PRECC_RNE,
		                               true, 0);
	if (f != PRECC_E2M1) {
		for (k = 0; k < n; k++)
			w[k] = lut[s[k]];
		return w;
	}
	for (k = 0; k + 1 < n; k += 2) {       /* two codes a byte, low first */
		w[k] = lut[s[k / 2] & 0xf];
		w[k + 1] = lut[s[k / 2] >> 4];
	}
	if (k < n)
		w[k] = lut[s[k / 2] & 0xf];
	return w;
}

static bool
narrow(precc_format f)
{
	return f == PRECC_E2M1 || f == PRECC_E3M2 || f == PRECC_E2M3;
}

static int
op_gemm(IrInterp *ip, const Ins *i)
{
	int A = i->arg[0], B = i->arg[1], C = i->res, e = -1;
	long m = ip->shape[A][0], k = ip->shape[A][1], n = ip->shape[B][0];
	/* gemm_grouped (ir/interp/grouped.c): %offs before the scales; B
	 * stacks the groups' weights by rows (group=m) or along K (group=m,
	 * B[N, G*K]: dgrad), C the groups' dW (group=k) */
	bool grp = i->op == OP_gemm_grouped;
	int so = grp ? 3 : 2, ng = grp ? (int)nelem(ip, i->arg[2]) : 1;
	bool kstack = grp && !i->group_k && ng > 1 && ip->shape[B][1] == ng * k;
	long cm = grp && i->group_k ? ng * m : m, cn = grp && !i->group_k && !kstack ? n / ng : n;
	AccumKind acc = i->accum;
	int accn = i->accum_n;
	precc_gemm_desc d;
	float *ts[2] = {NULL, NULL};
	uint8_t *w[2] = {NULL, NULL};
	const float *sinv[2] = {NULL, NULL};

	if (ip->shape[B][1] != (kstack ? ng * k : k))
		return fail(ip, i, "K mismatch: A %%%s is [%ld, %ld], B %%%s is [%ld, %ld]",
		            ip->f->val[A].name, m, k, ip->f->val[B].name, n, ip->shape[B][1]);
	if (ip->shape[C][0] != cm || ip->shape[C][1] != cn || vtype(ip, C)->fmt != PRECC_FP32
	    || (grp && (!vtype(ip, i->arg[2])->index || (!i->group_k && !kstack && n % ng))))
		return fail(ip, i, "result must be f32[%ld, %ld]", cm, cn);
	if ((acc == ACC_PROMOTE && accn < 1) || (acc == ACC_FAST && (accn < 1 || accn > 23)))
		return fail(ip, i, "accum %s:%d is out of range", accum_kind_name(acc), accn);
	if (grp ? i->narg != 3 && i->narg != 5 : i->narg != 2 && i->narg != 4 && i->narg != 6)
		return fail(ip, i, "takes %s operands, got %d", grp ? "3 or 5" : "2, 4 or 6", i->narg);
	precc_gemm_desc_init(&d);
	d.m = m, d.n = cn, d.k = k;
	d.threads = ip->o.threads;
	d.c = ip->buf[C];
	if (i->narg >= so + 2)
		for (int o = 0; o < 2; o++) {
			int s = i->arg[so + o], g = i->narg == 6 ? i->arg[4 + o] : -1;
			long kb = vtype(ip, s)->block[1];
			/* a scale per group ({gx*}, {*xg}): G of them (grouped.c) */
			bool gs = grp && (vtype(ip, s)->block[0] == BLOCK_GROUP || kb == BLOCK_GROUP);
			if (gs && nelem(ip, s) != ng) {
				fail(ip, i, "%%%s: a scale per group needs %d, one per group",
				     ip->f->val[s].name, ng);
				goto out;
			}
			if (!gs && check_cover(ip, i, i->arg[o], s))
				goto out;
			if (kb > 0 && k % kb && !(grp && i->group_k)) {   /* group=k: per group */
				fail(ip, i, "K=%ld is not a multiple of the K block %ld of %%%s: blocks "
				     "along K may not be partial", k, kb, ip->f->val[s].name);
				goto out;
			}
			if (acc == ACC_PROMOTE && kb > 0 && kb < k && kb % accn) {
				fail(ip, i, "promote:%d does not divide the K block %ld of %%%s", accn, kb,
				     ip->f->val[s].name);
				goto out;
			}
			if (!(sinv[o] = dequant_factors(ip, i, s, g, &ts[o])))
				goto out;
		}
	for (int o = 0; o < 2; o++) {
		int v = i->arg[o];
		precc_gemm_operand *op = o ? &d.b : &d.a;
		op->fmt = vtype(ip, v)->fmt;
		op->data = ip->buf[v];
		if (narrow(op->fmt)) {
			if (!(w[o] = widen_to_e4m3(ip, i, v)))
				goto out;
			op->fmt = PRECC_E4M3, op->data = w[o];
		}
		op->scale_inv = sinv[o];
		if (sinv[o])
			op->blk = block_of(vtype(ip, i->arg[so + o]));
	}
	if (acc == ACC_PROMOTE)
		d.promote_every = accn, d.acc_mbits = ip->o.promote_bits;
	else if (acc == ACC_FAST)
		d.acc_mbits = accn;
	if (ip->o.fp32_accum)
		d.acc_mbits = 0;
	if ((e = grp ? precc_gemm_grouped(&d, i->group_k ? GROUP_K : kstack ? GROUP_M_KSTACK
	                                                  : GROUP_M, ip->buf[i->arg[2]], ng)
	             : precc_gemm(&d)) != 0)
		kfail(ip, i, e);
out:
	free(ts[0]), free(ts[1]), free(w[0]), free(w[1]);
	return e ? -1 : 0;
}

static int
op_bias(IrInterp *ip, const Ins *i)
{
	int a = i->arg[0], b = i->arg[1];
	long rows = ip->shape[a][0], cols = ip->shape[a][1];
	float *bv, *y = fbuf(ip, i->res);

	if (need_f32(ip, i, a) || same_shape(ip, i, a, i->res))
		return -1;
	if (nelem(ip, b) != cols)
		return fail(ip, i, "bias %%%s has %ld elements, the accumulator %ld columns",
		            ip->f->val[b].name, nelem(ip, b), cols);
	if (!(bv = malloc((size_t)cols * sizeof *bv)))
		return fail(ip, i, "out of memory");
	int e = precc_dequantize(ip->buf[b], vtype(ip, b)->fmt, 1, cols, (precc_block){0, 0}, NULL,
	                         bv);
	if (e) {
		free(bv);
		return kfail(ip, i, e);
	}
	for (long r = 0; r < rows; r++)
		for (long c = 0; c < cols; c++)
			y[r * cols + c] = fbuf(ip, a)[r * cols + c] + bv[c];
	free(bv);
	return 0;
}

/* r = fl(old + y), f32: wgrad into main_grad (docs/ir.md) */
static int
op_accumulate(IrInterp *ip, const Ins *i)
{
	int a = i->arg[0], o = i->arg[1];
	long n = nelem(ip, a);
	float *y = fbuf(ip, i->res);

	if (need_f32(ip, i, a) || need_f32(ip, i, o) || same_shape(ip, i, a, i->res)
	    || same_shape(ip, i, o, i->res))
		return -1;
	for (long e = 0; e < n; e++)
		y[e] = fbuf(ip, o)[e] + fbuf(ip, a)[e];
	return 0;
}

/* A kernel runs on the caller's buffers: its params bound to the call's
 * operands in order, its ret operands copied into the call's results (on
 * a GPU the kernel writes them in place; the copy is the interpreter's).
 * A nonfinite=skip inside marks the caller's step skipped. */
static int
op_call(IrInterp *ip, const Ins *i)
{
	const Func *k;
	IrInterp *sub;
	char err[768];
	int e = -1;

	if (!ip->o.module)
		return fail(ip, i, "call @%s: no module to find kernels in (IrInterpOpts.module)",
		            i->callee);
	if (!(k = ir_find_func(ip->o.module, i->callee)) || !k->kernel)
		return fail(ip, i, "call @%s: no such kernel", i->callee);
	if (!(sub = ir_interp_new(k, &ip->o, err, sizeof err)))
		return fail(ip, i, "call @%s: %s", i->callee, err);
	int a = 0;
	for (int j = 0; j < k->nins && k->ins[j].op == OP_param; j++, a++) {
		int pv = k->ins[j].res;
		if (a >= i->narg) {
			fail(ip, i, "call @%s: %d operands for more params", i->callee, i->narg);
			goto out;
		}
		if (ir_interp_bind(sub, k->val[pv].name, ip->buf[i->arg[a]], ip->bytes[i->arg[a]])) {
			fail(ip, i, "call @%s: %s", i->callee, ir_interp_error(sub));
			goto out;
		}
	}
	if (a != i->narg) {
		fail(ip, i, "call @%s: %d operands, %d params", i->callee, i->narg, a);
		goto out;
	}
	if (ir_interp_run(sub)) {
		fail(ip, i, "call @%s: %s", i->callee, ir_interp_error(sub));
		goto out;
	}
	if (ir_interp_nresults(sub) != 1 + i->nmore) {
		fail(ip, i, "call @%s: the kernel returns %d values, the call takes %d", i->callee,
		     ir_interp_nresults(sub), 1 + i->nmore);
		goto out;
	}
	for (int r = 0; r <= i->nmore; r++) {
		int v = r ? i->more[r - 1] : i->res, kv = ir_interp_result(sub, r);
		long rows, cols;
		size_t b = ir_interp_value_bytes(sub, kv, &rows, &cols);
		if (b != ip->bytes[v]) {
			fail(ip, i, "call @%s: result %d is %zu bytes, %%%s %zu", i->callee, r, b,
			     ip->f->val[v].name, ip->bytes[v]);
			goto out;
		}
		memcpy(ip->buf[v], ir_interp_value(sub, kv), b);
	}
	ip->skipped |= ir_interp_skipped(sub);
	ip->nonfinite += ir_interp_nonfinite(sub);
	e = 0;
out:
	ir_interp_free(sub);
	return e;
}

/* The ops whose f32 results come out of the GPU's fp32 arithmetic (div,
 * mul, add, fma) give its canonical NaN 0x7fffffff whatever NaN went in,
 * where C on the host keeps the input's payload or makes 0xffc00000 (an
 * H200 gave 0x7fffffff for a scale_inv of a NaN amax: tests/gpu/lease.sh,
 * 2026-12-04; test_emu's emulator models the same, emu_gpu_nan). Ops that
 * move bits (transpose, pad, slice, casts) or compare them (amax, the
 * history) keep them. */
static void
gpu_nans(IrInterp *ip, const Ins *i)
{
	switch (i->op) {
	case OP_scale: case OP_block_scale: case OP_recip: case OP_dequantize:
	case OP_hadamard: case OP_gemm: case OP_gemm_grouped: case OP_bias: case OP_accumulate:
		break;
	default:
		return;
	}
	if (i->res < 0 || vtype(ip, i->res)->fmt != PRECC_FP32 || !ip->buf[i->res])
		return;
	/* |bits| as int32 above inf's is a NaN; a block of 32 is checked
	 * first with a loop that vectorizes, and rewritten only if one is in. */
	int32_t *u = ip->buf[i->res];
	long e = 0, n = nelem(ip, i->res);
	for (; e + 32 <= n; e += 32) {
		int32_t any = 0;
		for (int j = 0; j < 32; j++)
			any |= (u[e + j] & 0x7fffffff) > 0x7f800000;
		if (any)
			for (int j = 0; j < 32; j++)
				if ((u[e + j] & 0x7fffffff) > 0x7f800000)
					u[e + j] = 0x7fffffff;
	}
	for (; e < n; e++)
		if ((u[e] & 0x7fffffff) > 0x7f800000)
			u[e] = 0x7fffffff;
}

int
ir_interp_run(IrInterp *ip)
{
	const Func *f = ip->f;

	ip->err[0] = 0;
	ip->nret = 0;
	ip->ran = false;
	ip->skipped = false;
	ip->nonfinite = 0;
	for (int k = 0; k < f->nins; k++) {
		const Ins *i = &f->ins[k];
		int r = 0;
		if (i->op != OP_param && i->op != OP_ret && i->op != OP_update && i->res < 0)
			return fail(ip, i, "has no result");
		switch (i->op) {
		case OP_param:
			if (!ip->bound[i->res])
				return fail(ip, i, "param %s %%%s (%ld x %ld %s) is not bound",
				            param_kind_name(i->param), f->val[i->res].name,
				            ip->shape[i->res][0], ip->shape[i->res][1],
				            ir_fmt_name(vtype(ip, i->res)->fmt));
			break;
		case OP_amax: r = op_amax(ip, i); break;
		case OP_scale: r = op_scale(ip, i); break;
		case OP_mx_scale: r = op_mx_scale(ip, i); break;
		case OP_block_scale: r = op_block_scale(ip, i); break;
		case OP_recip: r = op_recip(ip, i); break;
		case OP_history_push: r = op_history_push(ip, i); break;
		case OP_history_reduce: r = op_history_reduce(ip, i); break;
		case OP_quantize: r = op_quantize(ip, i); break;
		case OP_dequantize: r = op_dequantize(ip, i); break;
		case OP_cast: r = op_cast(ip, i); break;
		case OP_transpose: r = op_transpose(ip, i); break;
		case OP_hadamard: r = op_hadamard(ip, i); break;
		case OP_pad:
		case OP_slice: r = op_pad_slice(ip, i); break;
		case OP_gemm: case OP_gemm_grouped: r = op_gemm(ip, i); break;
		case OP_bias: r = op_bias(ip, i); break;
		case OP_accumulate: r = op_accumulate(ip, i); break;
		case OP_call: r = op_call(ip, i); break;
		case OP_update: {
			const Ins *d = ir_def_ins(f, i->arg[0]);
			if (!d || d->op != OP_param || d->param != PARAM_STATE)
				return fail(ip, i, "%%%s is not a state param", f->val[i->arg[0]].name);
			if (ip->bytes[i->arg[0]] != ip->bytes[i->arg[1]])
				return fail(ip, i, "%%%s and %%%s differ in size", f->val[i->arg[0]].name,
				            f->val[i->arg[1]].name);
			break;
		}
		case OP_ret:
			for (int a = 0; a < i->narg; a++)
				ip->ret[ip->nret++] = i->arg[a];
			ip->ran = true;
			return 0;
		default:
			return fail(ip, i, "op %d is not supported by the interpreter", (int)i->op);
		}
		if (r)
			return -1;
		gpu_nans(ip, i);
	}
	return fail(ip, NULL, "no ret");
}

int
ir_interp_commit(IrInterp *ip)
{
	if (!ip->ran)
		return fail(ip, NULL, "commit before a successful run");
	if (ip->skipped)
		return 0;
	for (int k = 0; k < ip->f->nins; k++) {
		const Ins *i = &ip->f->ins[k];
		if (i->op == OP_update)
			memcpy(ip->buf[i->arg[0]], ip->buf[i->arg[1]], ip->bytes[i->arg[0]]);
	}
	return 0;
}
