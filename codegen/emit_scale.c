/*
 * emit_scale.c — per-block scalars: scales, MX e8m0 and NVFP4 block codes,
 * reciprocals, in the Func's op order with the interpreter's arithmetic
 * (docs/codegen.md, "Arithmetic").
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "precc/interp.h"
#include "emit.h"

/* Decode an 8-bit scale code (i32) of format f to f32. */
LLVMValueRef
decode8(E *e, precc_format f, LLVMValueRef code)
{
	if (f == PRECC_E8M0) {
		LLVMValueRef v = LLVMBuildShl(e->b, code, c32(e, 23), "");
		v = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, code, c32(e, 0), ""),
		                    c32(e, 0x00400000), v, "");
		v = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, code, c32(e, 0xff), ""),
		                    c32(e, 0x7fffffff), v, "");
		return LLVMBuildBitCast(e->b, v, e->g->f32, "");
	}
	LLVMValueRef h = asm_cvt_f16x2_from_f8x2(e->g, f, LLVMBuildTrunc(e->b, code, e->g->i16, ""));
	h = LLVMBuildTrunc(e->b, h, e->g->i16, "");
	return LLVMBuildFPExt(e->b, LLVMBuildBitCast(e->b, h, e->g->f16, ""), e->g->f32, "");
}

static LLVMValueRef pow2_log2(E *, LLVMValueRef);

/* The scale op in as precc_scales computes it: precc_compute_scale(amax,
 * {fmax, margin, pow2, eps}); inf/NaN -> prev (keep), 1 (one) or the
 * formula unguarded (ieee); zero=keep: amax 0 -> prev; form=amax_over_fmax:
 * the decode scale max(amax, eps) / fmax in fp32. */
static LLVMValueRef
compute_scale(E *e, const Ins *in, LLVMValueRef amax, float fmax, LLVMValueRef prev)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef a = fabs_(e, amax), fin = is_finite(e, a);
	float eps = in->eps;
	int margin = in->margin, pow2 = in->pow2;
	LLVMValueRef one = cf(e, 1.0), nf = in->nonfinite == NF_ONE || !prev ? one : prev;

	if (eps > 0)
		a = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, a, cf(e, eps), ""), cf(e, eps), a, "");
	LLVMValueRef zero = LLVMBuildFCmp(b, LLVMRealOEQ, a, cf(e, 0), "");
	if (in->inv) {
		LLVMValueRef sf = LLVMBuildFDiv(b, a, cf(e, fmax), "");
		sf = LLVMBuildSelect(b, zero, one, sf, "");
		return in->nonfinite == NF_IEEE ? sf : LLVMBuildSelect(b, fin, sf, one, "");
	}
	LLVMValueRef d = LLVMBuildFDiv(b, LLVMConstReal(e->g->f64, fmax),
	                               LLVMBuildFPExt(b, a, e->g->f64, ""), "");
	if (margin)
		d = LLVMBuildFMul(b, d, LLVMConstReal(e->g->f64, ldexp(1.0, -margin)), "");
	LLVMValueRef over = LLVMBuildFCmp(b, LLVMRealOGT, d, LLVMConstReal(e->g->f64, FLT_MAX), "");
	LLVMValueRef s = LLVMBuildFPTrunc(b, d, e->g->f32, "");
	if (in->nonfinite == NF_IEEE)
		nf = s;           /* fmax/inf = 0, NaN stays NaN (no pow2, no clamp) */
	if (pow2 && in->pow2_log2) {
		s = pow2_log2(e, s);
	} else if (pow2) {
		LLVMValueRef bits = LLVMBuildBitCast(b, s, e->g->i32, "");
		LLVMValueRef nrm = LLVMBuildAnd(b, bits, c32(e, 0xff800000), "");
		LLVMTypeRef t = e->g->i32;
		LLVMValueRef ca[2] = {bits, LLVMConstInt(e->g->i1, 1, 0)};
		LLVMValueRef lz = intrin(e, "llvm.ctlz", &t, 1, ca, 2);
		LLVMValueRef zb = LLVMBuildICmp(b, LLVMIntEQ, bits, c32(e, 0), "");
		LLVMValueRef top = LLVMBuildLShr(b, c32(e, 0x80000000),
		                                 LLVMBuildSelect(b, zb, c32(e, 0), lz, ""), "");
		top = LLVMBuildSelect(b, zb, c32(e, 0), top, "");
		bits = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGE, bits, c32(e, 0x00800000), ""),
		                       nrm, top, "");
		s = LLVMBuildBitCast(b, bits, e->g->f32, "");
	}
	s = LLVMBuildSelect(b, over, pow2 ? cf(e, 0x1p127) : cf(e, FLT_MAX), s, "");
	s = LLVMBuildSelect(b, zero, in->zero_keep && prev ? prev : one, s, "");
	return LLVMBuildSelect(b, fin, s, nf, "");
}

/* pow2=log2, torchao's exp2(floor(log2(s))) (float8_utils.py:244-247):
 * the power of two of s's binade, or of the next one where log2f rounds
 * up to its exponent. lup[k] is the smallest s (bits) of binade k whose
 * floorf(log2f(s)) is the next exponent (0xffffffff: none), found with the
 * host's log2f, the one the interpreter uses. Binades 1..254 are the
 * normal exponents, 255 + p the subnormals whose top bit is bit p. */
enum { NLUP = 255 + 23 };
static uint32_t lup[NLUP];
static pthread_once_t lup_once = PTHREAD_ONCE_INIT;

static int
log2_floor(uint32_t bits)
{
	float x;

	memcpy(&x, &bits, 4);
	return (int)floorf(log2f(x));
}

static void
lup_init(void)
{
	for (int k = 1; k < NLUP; k++) {
		uint32_t lo = k < 255 ? (uint32_t)k << 23 : 1u << (k - 255);
		uint32_t hi = k < 255 ? (uint32_t)(k + 1) << 23 : 1u << (k - 254);
		int ex = log2_floor(lo);
		lup[k] = 0xffffffffu;
		if (log2_floor(hi - 1) == ex)
			continue;
		while (lo < hi) {          /* log2f is monotonic */
			uint32_t mid = lo + (hi - lo) / 2;
			if (log2_floor(mid) > ex)
				hi = mid;
			else
				lo = mid + 1;
		}
		lup[k] = lo;
	}
}

static LLVMValueRef
pow2_log2(E *e, LLVMValueRef s)
{
	LLVMBuilderRef b = e->b;
	LLVMTypeRef at = LLVMArrayType2(e->g->i32, NLUP), t = e->g->i32;
	LLVMValueRef gv = LLVMGetNamedGlobal(e->g->mod, "precc_log2_up");

	pthread_once(&lup_once, lup_init);
	if (!gv) {
		LLVMValueRef c[NLUP];
		for (int k = 0; k < NLUP; k++)
			c[k] = c32(e, lup[k]);
		gv = LLVMAddGlobalInAddressSpace(e->g->mod, at, "precc_log2_up", e->g->host ? 0 : 1);
		LLVMSetInitializer(gv, LLVMConstArray2(e->g->i32, c, NLUP));
		LLVMSetGlobalConstant(gv, 1);
		LLVMSetLinkage(gv, LLVMInternalLinkage);
		LLVMSetAlignment(gv, 4);
	}
	LLVMValueRef bits = LLVMBuildBitCast(b, s, e->g->i32, "");
	LLVMValueRef ca[2] = {bits, LLVMConstInt(e->g->i1, 0, 0)};
	LLVMValueRef p = LLVMBuildSub(b, c32(e, 31), intrin(e, "llvm.ctlz", &t, 1, ca, 2), "");
	LLVMValueRef nrm = LLVMBuildICmp(b, LLVMIntUGE, bits, c32(e, 0x00800000), "");
	LLVMValueRef k = LLVMBuildSelect(b, nrm, LLVMBuildLShr(b, bits, c32(e, 23), ""),
	                                 LLVMBuildAdd(b, p, c32(e, 255), ""), "");
	LLVMValueRef zero = LLVMBuildICmp(b, LLVMIntEQ, bits, c32(e, 0), "");
	k = LLVMBuildSelect(b, zero, c32(e, 0), k, "");
	LLVMValueRef off = LLVMBuildMul(b, LLVMBuildZExt(b, k, e->g->i64, ""), c64(e, 4), "");
	LLVMValueRef up = LLVMBuildICmp(b, LLVMIntUGE, bits, load_al(e, t, gep(e, gv, off), 4), "");
	LLVMValueRef base = LLVMBuildSelect(b, nrm, LLVMBuildAnd(b, bits, c32(e, 0xff800000), ""),
	                                    LLVMBuildShl(b, c32(e, 1), p, ""), "");
	/* the next power: + one exponent (254 -> inf, as exp2f(128)), or the
	 * subnormal bit shifted up (bit 22 -> FLT_MIN) */
	LLVMValueRef next = LLVMBuildSelect(b, nrm, LLVMBuildAdd(b, base, c32(e, 0x00800000), ""),
	                                    LLVMBuildShl(b, base, c32(e, 1), ""), "");
	LLVMValueRef r = LLVMBuildSelect(b, up, next, base, "");
	return LLVMBuildBitCast(b, LLVMBuildSelect(b, zero, c32(e, 0), r, ""), e->g->f32, "");
}

static LLVMValueRef
load_scalar(E *e, int v, LLVMValueRef bidx)
{
	const Type *t = &e->k->f->val[v].type;
	int one = (t->is_scale && t->block[0] == 0 && t->block[1] == 0)
	          || (t->rank == 2 && t->dim[0] == 1 && t->dim[1] == 1) || !bidx;
	LLVMValueRef ix = one ? c64(e, 0) : bidx;

	if (precc_interp_elem_bytes(t->fmt) == 1)
		return LLVMBuildZExt(e->b, load_al(e, e->g->i8, gep(e, e->ptr[v], ix), 1), e->g->i32, "");
	return load_al(e, e->g->f32, gep(e, e->ptr[v], LLVMBuildMul(e->b, ix, c64(e, 4), "")), 4);
}

/* NVFP4's genc = 2688 / global amax, from the global scale value gs, as
 * the interpreter's op_block_scale and precc_nvfp4_scales compute it. */
static LLVMValueRef
nvfp4_genc(E *e, int gs, LLVMValueRef bidx)
{
	LLVMBuilderRef b = e->b;
	const Ins *d = ir_def_ins(e->k->f, gs);
	LLVMValueRef ga;

	if (d && d->op == OP_scale && d->has_blockfmt) {
		ga = scalar(e, d->arg[0], bidx);
	} else {
		LLVMValueRef s = scalar(e, gs, bidx);
		ga = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, s, cf(e, 0), ""),
		                     LLVMBuildFDiv(b, cf(e, 2688.0), s, ""), cf(e, 0), "");
	}
	ga = fabs_(e, ga);
	if (d && d->op == OP_scale && d->has_blockfmt && d->eps > 0.0f)  /* as the scale op */
		ga = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, ga, cf(e, d->eps), ""),
		                     cf(e, d->eps), ga, "");
	LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealOGT, ga, cf(e, 0), ""),
	                               is_finite(e, ga), "");
	LLVMValueRef genc = LLVMBuildSelect(b, ok, LLVMBuildFDiv(b, cf(e, 2688.0), ga, ""),
	                                    cf(e, 1.0), "");
	return LLVMBuildSelect(b, is_finite(e, genc), genc, cf(e, FLT_MAX), "");
}

LLVMValueRef
scalar(E *e, int v, LLVMValueRef bidx)
{
	const Func *f = e->k->f;
	const Ins *in = ir_def_ins(f, v);
	LLVMBuilderRef b = e->b;
	LLVMValueRef r;

	if (e->sc[v])
		return e->sc[v];
	if (!in || in->op == OP_param) {
		r = load_scalar(e, v, bidx);
	} else if (in->op == OP_scale) {
		float fmax = ir_fmt_max(in->fmt) * (in->has_blockfmt ? ir_fmt_max(in->blockfmt) : 1.0f);
		LLVMValueRef prev = in->narg == 2 ? scalar(e, in->arg[1], bidx) : NULL;
		r = compute_scale(e, in, scalar(e, in->arg[0], bidx), fmax, prev);
	} else if (in->op == OP_mx_scale) {
		SwProg p;
		LLVMValueRef a = fabs_(e, scalar(e, in->arg[0], bidx));
		float fmax = ir_fmt_max(in->fmt);
		LLVMValueRef rr = in->mxmode == MX_RCEIL_TE   /* TE: amax * max_norm_rcp */
		                  ? LLVMBuildFMul(b, a, cf(e, (float)(1.0 / fmax)), "")
		                  : LLVMBuildFDiv(b, a, cf(e, fmax), "");
		sw_mx_e8m0(&p, in->fmt, in->mxmode);
		r = sw_emit(e->g, &p, LLVMBuildBitCast(b, a, e->g->i32, ""),
		            LLVMBuildBitCast(b, rr, e->g->i32, ""));
	} else if (in->op == OP_block_scale) {
		LLVMValueRef d, a = scalar(e, in->arg[0], bidx);
		if (in->nvfp4 != NV_PRECC) {
			/* as precc_nvfp4_block_scale: TE >= 2.14 amax * (genc * (1/6)),
			 * TE 2.8-2.13 amax / 6 * genc; torchao clamp(amax / 6 / gdec,
			 * 2^-6, 448) (a NaN passes) */
			LLVMValueRef gs = scalar(e, in->arg[1], bidx);
			if (in->nvfp4 == NV_TE214) {
				d = LLVMBuildFMul(b, a, LLVMBuildFMul(b, gs, cf(e, 1.0f / 6.0f), ""), "");
			} else if (in->nvfp4 == NV_TE28) {
				d = LLVMBuildFMul(b, LLVMBuildFDiv(b, a, cf(e, 6.0), ""), gs, "");
			} else {
				d = LLVMBuildFDiv(b, LLVMBuildFDiv(b, a, cf(e, 6.0), ""), gs, "");
				d = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, d, cf(e, 0x1p-6f), ""),
				                    cf(e, 0x1p-6f), d, "");
				d = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, d, cf(e, 448.0), ""),
				                    cf(e, 448.0), d, "");
			}
		} else {
			LLVMValueRef genc = nvfp4_genc(e, in->arg[1], bidx);
			d = LLVMBuildFMul(b, LLVMBuildFDiv(b, a, cf(e, 6.0), ""), genc, "");
		}
		r = LLVMBuildZExt(b, asm_cvt_f8x2(e->g, PRECC_E4M3, d, cf(e, 0)), e->g->i32, "");
		r = LLVMBuildAnd(b, r, c32(e, 0xff), "");
	} else if (in->op == OP_transpose) {
		r = scalar(e, in->arg[0], bidx);   /* stored at the transposed index */
	} else if (in->op == OP_recip) {
		precc_format af = f->val[in->arg[0]].type.fmt;
		LLVMValueRef x = scalar(e, in->arg[0], bidx);
		if (af != PRECC_FP32)
			x = decode8(e, af, x);
		r = LLVMBuildFDiv(b, cf(e, 1.0), x, "");
	} else {
		abort();      /* classify() let through an op scalar() cannot do */
	}
	e->sc[v] = r;
	return r;
}

/* Check that every op scalar() may meet is one it can do, here, so that
 * errors come out as messages. */
int
check_scalar_ops(E *e)
{
	const Func *f = e->k->f;

	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (!kin(e->k, i))
			continue;
		if (in->op == OP_scale && (in->nonfinite == NF_SKIP || in->nonfinite == NF_ERROR))
			return kfail(e->k, "%%%s = scale: nonfinite=%s needs a status output (not "
			             "generated yet)", f->val[in->res].name, nonfinite_name(in->nonfinite));
		if (in->op == OP_block_scale && (in->fmt != PRECC_E2M1 || in->type.fmt != PRECC_E4M3))
			return kfail(e->k, "%%%s = block_scale: NVFP4 only (e2m1, e4m3 scales)",
			             f->val[in->res].name);
		if (in->op == OP_mx_scale) {
			SwProg p;
			if (sw_mx_e8m0(&p, in->fmt, in->mxmode))
				return kfail(e->k, "%%%s = mx_scale: fmt=%s", f->val[in->res].name,
				             ir_fmt_name(in->fmt));
		}
		if (in->op == OP_recip && in->type.fmt != PRECC_FP32)
			return kfail(e->k, "%%%s = recip: f32 results only", f->val[in->res].name);
		if (in->op == OP_recip) {
			precc_format af = f->val[in->arg[0]].type.fmt;
			if (af != PRECC_FP32 && af != PRECC_E8M0 && af != PRECC_E4M3)
				return kfail(e->k, "%%%s = recip: operand %s", f->val[in->res].name,
				             ir_fmt_name(af));
		}
	}
	return 0;
}

int
is_tensorwise_t(const Type *t)
{
	return t->is_scale && t->block[0] == 0 && t->block[1] == 0;
}

int
is_out(E *e, int v)
{
	for (int i = 0; i < e->k->nout; i++)
		if (e->k->out[i] == v)
			return 1;
	return 0;
}

/* Write every per-block scalar output (not amax {*x*}, not quantize) at
 * bidx, under cond. */
void
store_scalars(E *e, LLVMValueRef cond, LLVMValueRef bidx, LLVMValueRef tbidx)
{
	const Func *f = e->k->f;
	LLVMBasicBlockRef cont = begin_if(e, cond);

	for (int i = 0; i < e->k->nout; i++) {
		int v = e->k->out[i];
		const Ins *d = ir_def_ins(f, v);
		const Type *t = &f->val[v].type;
		int trs = d->op == OP_transpose && ir_def_ins(f, d->arg[0])->op != OP_quantize;
		if (d->op == OP_quantize || d->op == OP_dequantize || (d->op == OP_transpose && !trs)
		    || d->op == OP_history_push)
			continue;
		if (d->op == OP_amax && is_tensorwise_t(t))
			continue;
		int one = t->is_scale && t->block[0] == 0 && t->block[1] == 0;
		LLVMValueRef ix = one ? c64(e, 0) : trs ? tbidx : bidx, val = e->sc[v];
		if (precc_interp_elem_bytes(t->fmt) == 1)
			store_al(e, LLVMBuildTrunc(e->b, val, e->g->i8, ""), gep(e, e->ptr[v], ix), 1);
		else
			store_al(e, val, gep(e, e->ptr[v], LLVMBuildMul(e->b, ix, c64(e, 4), "")), 4);
	}
	end_if(e, cont);
}

/* A block's amax bits m become the values of the kernel's (or phase's)
 * block amaxes; its scalars are computed and stored under cond; returns
 * the quantize's multiplier (the column and row + column families). */
LLVMValueRef
block_scalars(E *e, const Ins *q, LLVMValueRef m, LLVMValueRef bidx, LLVMValueRef cond)
{
	Kern *k = e->k;

	for (int n = 0; n < k->f->nins; n++)
		if (kin(k, n) && k->f->ins[n].op == OP_amax)
			e->sc[k->f->ins[n].res] = LLVMBuildBitCast(e->b, m, e->g->f32, "");
	LLVMValueRef mult = quant_multiplier(e, q, bidx);
	for (int n = 0; n < k->nout; n++)
		if (ir_def_ins(k->f, k->out[n])->op != OP_quantize)
			scalar(e, k->out[n], bidx);
	store_scalars(e, cond, bidx, NULL);
	return mult;
}
