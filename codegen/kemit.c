/*
 * kemit.c — the LLVM function of each kernel shape (docs/codegen.md).
 *
 * Every thread owns VEC (16) consecutive elements of one row: 16-byte
 * vector loads (two of bf16, four of f32) and one 16-byte store of the
 * 8-bit codes. Block amaxes reduce the |x| bit patterns with unsigned max
 * (non-negative floats order like their bits; NaN is made 0x7fc00000, C's
 * NAN, which is above inf, so NaN anywhere gives NaN as in the
 * interpreter): within a thread, then across the block's lanes with
 * shfl.sync.bfly, across warps through shared memory, and across CTAs
 * with atom.global.max.u32. Per-block values (scales, MX and NVFP4 codes)
 * are computed redundantly by every lane of the block, in the op order of
 * the Func, with the interpreter's arithmetic (fp32 ops, the scale
 * division in fp64 as precc_compute_scale does, no FMA: there is no add).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "precc/interp.h"
#include "kern.h"

typedef struct E {
	Cg *g;
	Kern *k;
	LLVMBuilderRef b;
	LLVMValueRef *ptr;        /* value -> pointer param */
	LLVMValueRef *sc;         /* value -> per-block scalar (f32, or i32 code) */
	LLVMValueRef m, seed;
	LLVMValueRef red;         /* shared i32[32] */
	LLVMValueRef vcx, vcy;    /* a phase's own CTA ids (i32), or NULL */
	LLVMValueRef sync;        /* grid-sync scratch (u32 pairs), or NULL */
	LLVMValueRef ncta;        /* CTAs of this phase (i64) */
	int slot;                 /* this phase's pair in sync */
} E;

static LLVMValueRef c32(E *e, uint64_t v) { return LLVMConstInt(e->g->i32, v, 0); }
static LLVMValueRef c64(E *e, uint64_t v) { return LLVMConstInt(e->g->i64, v, 0); }
static LLVMValueRef cf(E *e, double v) { return LLVMConstReal(e->g->f32, v); }

static LLVMValueRef
cfbits(E *e, uint32_t bits)
{
	return LLVMBuildBitCast(e->b, c32(e, bits), e->g->f32, "");
}

/* Host emulation: a call to the external function `name`. */
static LLVMValueRef
emu_call(Cg *g, const char *name, LLVMTypeRef rt, LLVMValueRef *args, int nargs)
{
	LLVMTypeRef at[8];

	for (int i = 0; i < nargs; i++)
		at[i] = LLVMTypeOf(args[i]);
	LLVMTypeRef ft = LLVMFunctionType(rt, at, (unsigned)nargs, 0);
	LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
	if (!fn)
		fn = LLVMAddFunction(g->mod, name, ft);
	return LLVMBuildCall2(g->b, ft, fn, args, (unsigned)nargs, "");
}

static LLVMValueRef
intrin(E *e, const char *name, LLVMTypeRef *tys, int ntys, LLVMValueRef *args, int nargs)
{
	if (e->g->host && !strncmp(name, "llvm.nvvm.", 10)) {
		if (!strncmp(name, "llvm.nvvm.read.ptx.sreg.", 24)) {
			const char *r = name + 24;
			LLVMValueRef which = LLVMConstInt(e->g->i32, !strcmp(r, "tid.x") ? 0
			                                  : !strcmp(r, "ctaid.x") ? 1 : 2, 0);
			return emu_call(e->g, "precc_emu_sreg", e->g->i32, &which, 1);
		}
		if (!strcmp(name, "llvm.nvvm.shfl.sync.bfly.i32"))
			return emu_call(e->g, "precc_emu_shfl_bfly", e->g->i32, args + 1, 2);
		return emu_call(e->g, "precc_emu_barrier", e->g->vd, NULL, 0);
	}
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->g->mod, id, tys, (size_t)ntys);
	LLVMTypeRef ft = LLVMIntrinsicGetType(e->g->ctx, id, tys, (size_t)ntys);

	return LLVMBuildCall2(e->b, ft, fn, args, (unsigned)nargs, "");
}

static LLVMValueRef
sreg(E *e, const char *name)
{
	char buf[64];

	if (e->vcx && !strcmp(name, "ctaid.x"))
		return e->vcx;
	if (e->vcx && !strcmp(name, "ctaid.y"))
		return e->vcy;
	snprintf(buf, sizeof buf, "llvm.nvvm.read.ptx.sreg.%s", name);
	return intrin(e, buf, NULL, 0, NULL, 0);
}

static void
barrier(E *e)
{
	intrin(e, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
}

static LLVMValueRef
shfl_xor(E *e, LLVMValueRef v, int lanemask)
{
	LLVMValueRef a[4] = {c32(e, 0xffffffff), v, c32(e, (unsigned)lanemask), c32(e, 0x1f)};

	return intrin(e, "llvm.nvvm.shfl.sync.bfly.i32", NULL, 0, a, 4);
}

static LLVMValueRef
umax(E *e, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntUGT, a, b, ""), a, b, "");
}

static LLVMValueRef
gep(E *e, LLVMValueRef p, LLVMValueRef byteoff)
{
	return LLVMBuildGEP2(e->b, e->g->i8, p, &byteoff, 1, "");
}

/* Extent of dim d at run time (i64). */
static LLVMValueRef
dimv(E *e, long d)
{
	if (d >= 0)
		return c64(e, (uint64_t)d);
	if (d == DIM_M)
		return e->m;
	return LLVMBuildUDiv(e->b, LLVMBuildAdd(e->b, e->m, c64(e, (uint64_t)(-d - 1)), ""),
	                     c64(e, (uint64_t)-d), "");
}

/* if (cond) { ... } : returns the continuation block; call end_if after. */
static LLVMBasicBlockRef
begin_if(E *e, LLVMValueRef cond)
{
	LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "then");
	LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "cont");

	LLVMBuildCondBr(e->b, cond, then, cont);
	LLVMPositionBuilderAtEnd(e->b, then);
	return cont;
}

static void
end_if(E *e, LLVMBasicBlockRef cont)
{
	LLVMBuildBr(e->b, cont);
	LLVMPositionBuilderAtEnd(e->b, cont);
}

/* A CTA's shared-memory array: a .shared global on the GPU; on the host
 * (emulation) precc_emu_shared(id, bytes) returns the running CTA's copy. */
static LLVMValueRef
shared_array(E *e, const char *name, int id, LLVMTypeRef at, unsigned align)
{
	if (e->g->host) {
		LLVMValueRef a[2] = {LLVMConstInt(e->g->i32, (unsigned)id, 0),
		                     LLVMSizeOf(at)};
		return emu_call(e->g, "precc_emu_shared", e->g->gptr, a, 2);
	}
	LLVMValueRef gv = LLVMAddGlobalInAddressSpace(e->g->mod, at, name, 3);
	LLVMSetInitializer(gv, LLVMGetUndef(at));
	LLVMSetLinkage(gv, LLVMInternalLinkage);
	LLVMSetAlignment(gv, align);
	return gv;
}

/* ---- loads and stores -------------------------------------------------- */

static LLVMValueRef
load_al(E *e, LLVMTypeRef t, LLVMValueRef p, unsigned align)
{
	LLVMValueRef l = LLVMBuildLoad2(e->b, t, p, "");

	LLVMSetAlignment(l, align);
	return l;
}

static void
store_al(E *e, LLVMValueRef v, LLVMValueRef p, unsigned align)
{
	LLVMSetAlignment(LLVMBuildStore(e->b, v, p), align);
}

/* VEC elements of high-precision data at element index idx -> floats. */
static void
load_vec(E *e, int v, LLVMValueRef idx, LLVMValueRef out[VEC])
{
	precc_format f = e->k->f->val[v].type.fmt;
	LLVMTypeRef v4i = LLVMVectorType(e->g->i32, 4);
	LLVMValueRef base = e->ptr[v];

	if (f == PRECC_FP32 || f == PRECC_TF32) {
		for (int j = 0; j < VEC / 4; j++) {
			LLVMValueRef off = LLVMBuildMul(e->b, LLVMBuildAdd(e->b, idx, c64(e, 4 * j), ""),
			                                c64(e, 4), "");
			LLVMValueRef w = load_al(e, LLVMVectorType(e->g->f32, 4), gep(e, base, off), 16);
			for (int i = 0; i < 4; i++)
				out[4 * j + i] = LLVMBuildExtractElement(e->b, w, c32(e, i), "");
		}
		return;
	}
	for (int j = 0; j < VEC / 8; j++) {
		LLVMValueRef off = LLVMBuildMul(e->b, LLVMBuildAdd(e->b, idx, c64(e, 8 * j), ""),
		                                c64(e, 2), "");
		LLVMValueRef w = load_al(e, v4i, gep(e, base, off), 16);
		for (int i = 0; i < 4; i++) {
			LLVMValueRef u = LLVMBuildExtractElement(e->b, w, c32(e, i), "");
			LLVMValueRef lo, hi;
			if (f == PRECC_BF16) {
				lo = LLVMBuildShl(e->b, u, c32(e, 16), "");
				hi = LLVMBuildAnd(e->b, u, c32(e, 0xffff0000), "");
				lo = LLVMBuildBitCast(e->b, lo, e->g->f32, "");
				hi = LLVMBuildBitCast(e->b, hi, e->g->f32, "");
			} else {
				lo = LLVMBuildTrunc(e->b, u, e->g->i16, "");
				hi = LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, u, c32(e, 16), ""), e->g->i16, "");
				lo = LLVMBuildFPExt(e->b, LLVMBuildBitCast(e->b, lo, e->g->f16, ""), e->g->f32, "");
				hi = LLVMBuildFPExt(e->b, LLVMBuildBitCast(e->b, hi, e->g->f16, ""), e->g->f32, "");
			}
			out[8 * j + 2 * i] = lo;
			out[8 * j + 2 * i + 1] = hi;
		}
	}
}

/* Store VEC 8-bit codes (i32 each) at element index idx of value v. */
static void
store_codes(E *e, int v, LLVMValueRef idx, LLVMValueRef code[VEC])
{
	LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(e->g->i32, 4));

	for (int w = 0; w < 4; w++) {
		LLVMValueRef word = c32(e, 0);
		for (int i = 0; i < 4; i++) {
			LLVMValueRef c = LLVMBuildAnd(e->b, code[4 * w + i], c32(e, 0xff), "");
			word = LLVMBuildOr(e->b, word, LLVMBuildShl(e->b, c, c32(e, 8 * i), ""), "");
		}
		vec = LLVMBuildInsertElement(e->b, vec, word, c32(e, w), "");
	}
	store_al(e, vec, gep(e, e->ptr[v], idx), 16);
}

/* |x| bits with NaN made 0x7fc00000, unsigned-max over the VEC values. */
static LLVMValueRef
vec_amax_bits(E *e, LLVMValueRef *x, int n)
{
	LLVMValueRef m = c32(e, 0);

	for (int i = 0; i < n; i++) {
		LLVMValueRef a = LLVMBuildAnd(e->b, LLVMBuildBitCast(e->b, x[i], e->g->i32, ""),
		                              c32(e, 0x7fffffff), "");
		a = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntUGT, a, c32(e, 0x7f800000), ""),
		                    c32(e, 0x7fc00000), a, "");
		m = umax(e, m, a);
	}
	return m;
}

static LLVMValueRef
group_max(E *e, LLVMValueRef m, int lanes)
{
	for (int o = 1; o < lanes; o <<= 1)
		m = umax(e, m, shfl_xor(e, m, o));
	return m;
}

/* The max over the CTA: warps, then shared memory; every thread gets it. */
static LLVMValueRef
cta_max(E *e, LLVMValueRef m)
{
	LLVMValueRef tid = sreg(e, "tid.x");
	LLVMValueRef warp = LLVMBuildLShr(e->b, tid, c32(e, 5), "");
	LLVMValueRef lane = LLVMBuildAnd(e->b, tid, c32(e, 31), "");
	LLVMTypeRef at = LLVMArrayType2(e->g->i32, 32);
	int nw = e->k->threads / 32;

	m = group_max(e, m, 32);
	LLVMBasicBlockRef cont = begin_if(e, LLVMBuildICmp(e->b, LLVMIntEQ, lane, c32(e, 0), ""));
	LLVMValueRef ix[2] = {c32(e, 0), warp};
	store_al(e, m, LLVMBuildGEP2(e->b, at, e->red, ix, 2, ""), 4);
	end_if(e, cont);
	barrier(e);
	for (int w = 0; w < nw; w++) {
		LLVMValueRef jx[2] = {c32(e, 0), c32(e, (unsigned)w)};
		m = umax(e, m, load_al(e, e->g->i32, LLVMBuildGEP2(e->b, at, e->red, jx, 2, ""), 4));
	}
	barrier(e);
	return m;
}

/* ---- per-block scalars ------------------------------------------------- */

static LLVMValueRef
fabs_(E *e, LLVMValueRef x)
{
	LLVMTypeRef t = e->g->f32;

	return intrin(e, "llvm.fabs", &t, 1, &x, 1);
}

static LLVMValueRef
is_finite(E *e, LLVMValueRef x)
{
	return LLVMBuildFCmp(e->b, LLVMRealOLT, fabs_(e, x), cf(e, INFINITY), "");
}

/* Decode an 8-bit scale code (i32) of format f to f32. */
static LLVMValueRef
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

/* precc_compute_scale(amax, {fmax, margin, pow2, eps}), inf/NaN -> prev. */
static LLVMValueRef
compute_scale(E *e, LLVMValueRef amax, float fmax, int margin, int pow2, float eps,
              LLVMValueRef prev)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef a = fabs_(e, amax), fin = is_finite(e, a);

	if (eps > 0)
		a = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, a, cf(e, eps), ""), cf(e, eps), a, "");
	LLVMValueRef d = LLVMBuildFDiv(b, LLVMConstReal(e->g->f64, fmax),
	                               LLVMBuildFPExt(b, a, e->g->f64, ""), "");
	if (margin)
		d = LLVMBuildFMul(b, d, LLVMConstReal(e->g->f64, ldexp(1.0, -margin)), "");
	LLVMValueRef over = LLVMBuildFCmp(b, LLVMRealOGT, d, LLVMConstReal(e->g->f64, FLT_MAX), "");
	LLVMValueRef s = LLVMBuildFPTrunc(b, d, e->g->f32, "");
	if (pow2) {
		LLVMValueRef bits = LLVMBuildBitCast(b, s, e->g->i32, "");
		LLVMValueRef nrm = LLVMBuildAnd(b, bits, c32(e, 0xff800000), "");
		LLVMTypeRef t = e->g->i32;
		LLVMValueRef ca[2] = {bits, LLVMConstInt(e->g->i1, 1, 0)};
		LLVMValueRef lz = intrin(e, "llvm.ctlz", &t, 1, ca, 2);
		LLVMValueRef zero = LLVMBuildICmp(b, LLVMIntEQ, bits, c32(e, 0), "");
		LLVMValueRef top = LLVMBuildLShr(b, c32(e, 0x80000000),
		                                 LLVMBuildSelect(b, zero, c32(e, 0), lz, ""), "");
		top = LLVMBuildSelect(b, zero, c32(e, 0), top, "");
		bits = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGE, bits, c32(e, 0x00800000), ""),
		                       nrm, top, "");
		s = LLVMBuildBitCast(b, bits, e->g->f32, "");
	}
	s = LLVMBuildSelect(b, over, pow2 ? cf(e, 0x1p127) : cf(e, FLT_MAX), s, "");
	s = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, a, cf(e, 0), ""), cf(e, 1.0), s, "");
	return LLVMBuildSelect(b, fin, s, prev ? prev : cf(e, 1.0), "");
}

/* Scalar value v of the current block (bidx), loading params on demand. */
static LLVMValueRef scalar(E *e, int v, LLVMValueRef bidx);

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
	LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealOGT, ga, cf(e, 0), ""),
	                               is_finite(e, ga), "");
	LLVMValueRef genc = LLVMBuildSelect(b, ok, LLVMBuildFDiv(b, cf(e, 2688.0), ga, ""),
	                                    cf(e, 1.0), "");
	return LLVMBuildSelect(b, is_finite(e, genc), genc, cf(e, FLT_MAX), "");
}

static LLVMValueRef
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
		r = compute_scale(e, scalar(e, in->arg[0], bidx), fmax, in->margin, in->pow2, in->eps,
		                  prev);
	} else if (in->op == OP_mx_scale) {
		SwProg p;
		LLVMValueRef a = fabs_(e, scalar(e, in->arg[0], bidx));
		LLVMValueRef rr = LLVMBuildFDiv(b, a, cf(e, ir_fmt_max(in->fmt)), "");
		sw_mx_e8m0(&p, in->fmt, in->mxmode == MX_RCEIL);
		r = sw_emit(e->g, &p, LLVMBuildBitCast(b, a, e->g->i32, ""),
		            LLVMBuildBitCast(b, rr, e->g->i32, ""));
	} else if (in->op == OP_block_scale) {
		LLVMValueRef genc = nvfp4_genc(e, in->arg[1], bidx);
		LLVMValueRef d = LLVMBuildFMul(b, LLVMBuildFDiv(b, scalar(e, in->arg[0], bidx),
		                                                cf(e, 6.0), ""), genc, "");
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
static int
check_scalar_ops(E *e)
{
	const Func *f = e->k->f;

	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (!kin(e->k, i))
			continue;
		if (in->op == OP_scale && in->nonfinite != NF_KEEP)
			return kfail(e->k, "%%%s = scale: nonfinite=%s needs a status output (not "
			             "generated yet)", f->val[in->res].name, nonfinite_name(in->nonfinite));
		if (in->op == OP_block_scale && (in->fmt != PRECC_E2M1 || in->type.fmt != PRECC_E4M3))
			return kfail(e->k, "%%%s = block_scale: NVFP4 only (e2m1, e4m3 scales)",
			             f->val[in->res].name);
		if (in->op == OP_mx_scale) {
			SwProg p;
			if (sw_mx_e8m0(&p, in->fmt, in->mxmode == MX_RCEIL))
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

static int
is_tensorwise_t(const Type *t)
{
	return t->is_scale && t->block[0] == 0 && t->block[1] == 0;
}

static int
is_out(E *e, int v)
{
	for (int i = 0; i < e->k->nout; i++)
		if (e->k->out[i] == v)
			return 1;
	return 0;
}

/* Write every per-block scalar output (not amax {*x*}, not quantize) at
 * bidx, under cond. */
static void
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

/* ---- quantize ---------------------------------------------------------- */

static LLVMValueRef
mulhilo(Cg *g, uint32_t mconst, LLVMValueRef x, LLVMValueRef *lo)
{
	LLVMValueRef p = LLVMBuildMul(g->b, LLVMBuildZExt(g->b, x, g->i64, ""),
	                              LLVMConstInt(g->i64, mconst, 0), "");
	*lo = LLVMBuildTrunc(g->b, p, g->i32, "");
	return LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, p, LLVMConstInt(g->i64, 32, 0), ""), g->i32, "");
}

/* Philox-4x32-10 (ir/philox.c), in place on the counter c. */
void
cg_philox(Cg *g, LLVMValueRef c[4], LLVMValueRef k0, LLVMValueRef k1)
{
	LLVMBuilderRef b = g->b;

	for (int r = 0; r < 10; r++) {
		if (r > 0) {
			k0 = LLVMBuildAdd(b, k0, LLVMConstInt(g->i32, 0x9E3779B9u, 0), "");
			k1 = LLVMBuildAdd(b, k1, LLVMConstInt(g->i32, 0xBB67AE85u, 0), "");
		}
		LLVMValueRef lo0, lo1;
		LLVMValueRef hi0 = mulhilo(g, 0xD2511F53u, c[0], &lo0);
		LLVMValueRef hi1 = mulhilo(g, 0xCD9E8D57u, c[2], &lo1);
		LLVMValueRef n0 = LLVMBuildXor(b, LLVMBuildXor(b, hi1, c[1], ""), k0, "");
		LLVMValueRef n2 = LLVMBuildXor(b, LLVMBuildXor(b, hi0, c[3], ""), k1, "");
		c[0] = n0;
		c[1] = lo1;
		c[2] = n2;
		c[3] = lo0;
	}
}

/* SR bits of elements idx .. idx+VEC-1 (idx a multiple of 4). */
static void
sr_bits(E *e, uint32_t stream, LLVMValueRef idx, LLVMValueRef rb[VEC])
{
	LLVMValueRef k0 = LLVMBuildTrunc(e->b, e->seed, e->g->i32, "");
	LLVMValueRef k1 = LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, e->seed, c64(e, 32), ""),
	                                 e->g->i32, "");

	for (int j = 0; j < VEC / 4; j++) {
		LLVMValueRef i = LLVMBuildAdd(e->b, idx, c64(e, 4 * j), "");
		LLVMValueRef c[4] = {
			LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, i, c64(e, 2), ""), e->g->i32, ""),
			LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, i, c64(e, 34), ""), e->g->i32, ""),
			c32(e, stream), c32(e, 0),
		};
		cg_philox(e->g, c, k0, k1);
		for (int w = 0; w < 4; w++)
			rb[4 * j + w] = c[w];
	}
}

static int
check_quantize(E *e, const Ins *q)
{
	precc_format qf = e->k->f->val[q->res].type.fmt;
	SwProg p;

	if ((qf == PRECC_E4M3 || qf == PRECC_E5M2) && q->round == PRECC_RNE && q->sat)
		return 0;
	if (sw_encode(&p, qf, q->round, q->sat))
		return kfail(e->k, "%%%s = quantize: %s with round=%s is not generated yet",
		             e->k->f->val[q->res].name, ir_fmt_name(qf), precc_round_name(q->round));
	return 0;
}

/* Scale multiplier m of the quantize at bidx (two-level: gs / dec(bs)). */
static LLVMValueRef
quant_multiplier(E *e, const Ins *q, LLVMValueRef bidx)
{
	if (q->narg == 3) {
		precc_format sf = e->k->f->val[q->arg[1]].type.fmt;
		LLVMValueRef dq = decode8(e, sf, scalar(e, q->arg[1], bidx));
		LLVMValueRef gs = scalar(e, q->arg[2], bidx);
		return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOEQ, dq, cf(e, 0), ""),
		                       cf(e, 0), LLVMBuildFDiv(e->b, gs, dq, ""), "");
	}
	return scalar(e, q->arg[1], bidx);
}

/* code[i] = enc(fl(x[i] * m)) for the quantize q; idx: element index of
 * x[0] (for SR). */
static void
quantize_vec(E *e, const Ins *q, LLVMValueRef m, LLVMValueRef x[VEC], LLVMValueRef idx,
             LLVMValueRef code[VEC])
{
	precc_format qf = e->k->f->val[q->res].type.fmt;
	LLVMValueRef y[VEC], rb[VEC];

	for (int i = 0; i < VEC; i++)
		y[i] = LLVMBuildFMul(e->b, x[i], m, "");
	if ((qf == PRECC_E4M3 || qf == PRECC_E5M2) && q->round == PRECC_RNE && q->sat) {
		for (int i = 0; i < VEC; i += 2) {
			LLVMValueRef p = LLVMBuildZExt(e->b, asm_cvt_f8x2(e->g, qf, y[i], y[i + 1]),
			                               e->g->i32, "");
			code[i] = p;
			code[i + 1] = LLVMBuildLShr(e->b, p, c32(e, 8), "");
		}
		return;
	}
	SwProg p;
	sw_encode(&p, qf, q->round, q->sat);
	if (q->round == PRECC_SR)
		sr_bits(e, (uint32_t)q->stream, idx, rb);
	for (int i = 0; i < VEC; i++)
		code[i] = sw_emit(e->g, &p, LLVMBuildBitCast(e->b, y[i], e->g->i32, ""),
		                  q->round == PRECC_SR ? rb[i] : NULL);
}

/* ---- shapes ------------------------------------------------------------ */

static LLVMValueRef
gid64(E *e)
{
	LLVMValueRef c = LLVMBuildZExt(e->b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef t = LLVMBuildZExt(e->b, sreg(e, "tid.x"), e->g->i64, "");

	return LLVMBuildAdd(e->b, LLVMBuildMul(e->b, c, c64(e, (uint64_t)e->k->threads), ""), t, "");
}

/* Atomic max of the CTA's amax bits into every amax {*x*} output. */
static void
tensor_amax_out(E *e, LLVMValueRef mbits)
{
	const Func *f = e->k->f;
	LLVMValueRef m = cta_max(e, mbits);
	LLVMValueRef t0 = LLVMBuildICmp(e->b, LLVMIntEQ, sreg(e, "tid.x"), c32(e, 0), "");
	LLVMBasicBlockRef cont = begin_if(e, t0);

	for (int i = 0; i < e->k->nout; i++) {
		const Ins *d = ir_def_ins(f, e->k->out[i]);
		if (d->op == OP_amax && is_tensorwise_t(&d->type))
			LLVMBuildAtomicRMW(e->b, LLVMAtomicRMWBinOpUMax, e->ptr[e->k->out[i]], m,
			                   LLVMAtomicOrderingMonotonic, 0);
	}
	end_if(e, cont);
}

static int
check_amax_ops(E *e, int no_tensorwise)
{
	const Func *f = e->k->f;

	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (in->op != OP_amax || !kin(e->k, i))
			continue;
		int src = e->k->qsrc >= 0 ? e->k->qsrc : e->k->x;
		if (in->arg[0] != src)
			return kfail(e->k, "%%%s = amax: of %%%s, not of %%%s", f->val[in->res].name,
			             f->val[in->arg[0]].name, f->val[src].name);
		int tw = in->type.block[0] == 0 && in->type.block[1] == 0;
		int grid = tw && in->pattr[PA_AMAX_SCHEME] && !strcmp(in->pattr[PA_AMAX_SCHEME], "grid");
		if (grid) {
			/* amax_scheme=grid: atomic max + a grid-wide barrier, then every
			 * CTA reads the amax (a cooperative launch) */
			if (e->k->gridamax >= 0 && e->k->gridamax != in->res)
				return kfail(e->k, "%%%s = amax: one grid-wide amax per quantize",
				             f->val[in->res].name);
			e->k->gridamax = in->res;
			continue;
		}
		if (no_tensorwise && tw)
			return kfail(e->k, "%%%s = amax: a tensorwise amax does not fuse with tiles "
			             "(unless amax_scheme=grid)", f->val[in->res].name);
		if (tw) {
			for (int j = 0; j < f->nins; j++)
				for (int a = 0; a < f->ins[j].narg && kin(e->k, j); a++)
					if (f->ins[j].arg[a] == in->res && f->ins[j].op != OP_ret
					    && f->ins[j].op != OP_update)
						return kfail(e->k, "%%%s = amax: a tensorwise amax is not known "
						             "until every CTA is done: %s must run in the next kernel "
						             "(or amax_scheme=grid)",
						             f->val[in->res].name, opinfo[f->ins[j].op].name);
		} else if (e->k->q >= 0
		           && (in->type.block[0] != f->val[f->ins[e->k->q].arg[1]].type.block[0]
		               || in->type.block[1] != f->val[f->ins[e->k->q].arg[1]].type.block[1])) {
			return kfail(e->k, "%%%s = amax: granularity differs from the quantize's",
			             f->val[in->res].name);
		}
	}
	return 0;
}

/* amax_scheme=grid: the CTA's max into sync[2 slot] (atom.max), arrive at
 * sync[2 slot + 1], wait for every CTA of the phase, read the amax. Needs
 * every CTA resident at once (cooperative launch). */
static LLVMValueRef
grid_amax(E *e, LLVMValueRef mbits)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef m = cta_max(e, mbits);
	LLVMValueRef am = gep(e, e->sync, c64(e, 8 * (uint64_t)e->slot));
	LLVMValueRef cnt = gep(e, e->sync, c64(e, 8 * (uint64_t)e->slot + 4));
	LLVMValueRef t0 = LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "tid.x"), c32(e, 0), "");
	LLVMBasicBlockRef cont = begin_if(e, t0);
	LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpUMax, am, m, LLVMAtomicOrderingMonotonic, 0);
	asm_fence_gpu(e->g);
	LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpAdd, cnt, c32(e, 1), LLVMAtomicOrderingMonotonic, 0);
	LLVMBasicBlockRef spin = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "spin");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "arrived");
	LLVMBuildBr(b, spin);
	LLVMPositionBuilderAtEnd(b, spin);
	if (e->g->host) {
		LLVMTypeRef ft = LLVMFunctionType(e->g->vd, NULL, 0, 0);
		LLVMValueRef fn = LLVMGetNamedFunction(e->g->mod, "precc_emu_yield");
		if (!fn)
			fn = LLVMAddFunction(e->g->mod, "precc_emu_yield", ft);
		LLVMBuildCall2(b, ft, fn, NULL, 0, "");
	}
	LLVMValueRef n = load_al(e, e->g->i32, cnt, 4);
	LLVMSetVolatile(n, 1);
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntULT, LLVMBuildZExt(b, n, e->g->i64, ""), e->ncta, ""),
	                spin, done);
	LLVMPositionBuilderAtEnd(b, done);
	asm_fence_gpu(e->g);
	end_if(e, cont);
	barrier(e);
	LLVMValueRef a = load_al(e, e->g->i32, am, 4);
	LLVMSetVolatile(a, 1);
	return LLVMBuildBitCast(b, a, e->g->f32, "");
}

/* Rowwise rows wider than the CTA (T threads x 16 elements): one row per
 * CTA, thread t takes vectors t, t+T, ... of the row. Pass 1 reduces the
 * row's amax, pass 2 reads the row again and quantizes it. */
static int
emit_rowwide(E *e)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	LLVMValueRef row = LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef t = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef rowok = LLVMBuildICmp(b, LLVMIntULT, row, dimv(e, k->rows), "");
	LLVMValueRef base = LLVMBuildMul(b, row, c64(e, (uint64_t)k->cols), "");
	LLVMValueRef x[VEC], code[VEC], valid[64], idx[64];
	LLVMValueRef mbits = c32(e, 0);

	if (k->nchunk > 64)
		return kfail(k, "%%%s: rowwise over %ld columns: more than %d", k->f->val[k->x].name,
		             k->cols, 64 * k->threads * VEC);
	if (check_amax_ops(e, 0) || check_scalar_ops(e) || check_quantize(e, q))
		return -1;
	if (k->gridamax >= 0)
		return kfail(k, "%%%s: rowwise rows wider than %d with a grid amax", k->f->val[k->x].name,
		             1024 * VEC);
	for (int i = 0; i < k->nout; i++)
		if (ir_def_ins(k->f, k->out[i])->op == OP_amax
		    && is_tensorwise_t(&k->f->val[k->out[i]].type))
			return kfail(k, "%%%s: rowwise rows wider than %d with a tensorwise amax output",
			             k->f->val[k->x].name, 1024 * VEC);
	for (int c = 0; c < k->nchunk; c++) {
		LLVMValueRef v = LLVMBuildAdd(b, t, c64(e, (uint64_t)c * k->threads), "");
		valid[c] = LLVMBuildAnd(b, rowok, LLVMBuildICmp(b, LLVMIntULT, v,
		                        c64(e, (uint64_t)k->cols / VEC), ""), "");
		idx[c] = LLVMBuildSelect(b, valid[c], LLVMBuildAdd(b, base,
		                         LLVMBuildMul(b, v, c64(e, VEC), ""), ""), c64(e, 0), "");
		load_vec(e, k->x, idx[c], x);
		for (int i = 0; i < VEC; i++)
			x[i] = LLVMBuildSelect(b, valid[c], x[i], cf(e, 0), "");
		mbits = umax(e, mbits, vec_amax_bits(e, x, VEC));
	}
	LLVMValueRef g = cta_max(e, mbits);
	for (int i = 0; i < k->f->nins; i++)
		if (kin(k, i) && k->f->ins[i].op == OP_amax && !is_tensorwise_t(&k->f->ins[i].type))
			e->sc[k->f->ins[i].res] = LLVMBuildBitCast(b, g, e->g->f32, "");
	LLVMValueRef mult = quant_multiplier(e, q, row);
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(k->f, k->out[i]);
		if (d->op != OP_quantize && d->op != OP_amax)
			scalar(e, k->out[i], row);
	}
	store_scalars(e, LLVMBuildAnd(b, rowok, LLVMBuildICmp(b, LLVMIntEQ, t, c64(e, 0), ""), ""),
	              row, NULL);
	for (int c = 0; c < k->nchunk; c++) {
		load_vec(e, k->x, idx[c], x);
		quantize_vec(e, q, mult, x, idx[c], code);
		if (is_out(e, q->res)) {
			LLVMBasicBlockRef cont = begin_if(e, valid[c]);
			store_codes(e, q->res, idx[c], code);
			end_if(e, cont);
		}
	}
	return 0;
}

/* Flat shapes: amax_tensor, quant_tensor, quant_rowblock. */
static int
emit_flat(E *e)
{
	Kern *k = e->k;
	const Ins *q = k->q >= 0 ? &k->f->ins[k->q] : NULL;

	if (k->rowcta && k->nchunk > 1 && q)
		return emit_rowwide(e);
	LLVMValueRef total = LLVMBuildMul(e->b, dimv(e, k->rows), dimv(e, k->cols), "");
	LLVMValueRef gid = gid64(e);
	LLVMValueRef e0 = LLVMBuildMul(e->b, gid, c64(e, VEC), "");
	LLVMValueRef valid = LLVMBuildICmp(e->b, LLVMIntULT, e0, total, "");
	if (k->rowcta) {
		/* one row per CTA: thread t has elements 16t.. of row ctaid */
		LLVMValueRef row = LLVMBuildZExt(e->b, sreg(e, "ctaid.x"), e->g->i64, "");
		LLVMValueRef t = LLVMBuildZExt(e->b, sreg(e, "tid.x"), e->g->i64, "");
		e0 = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, row, c64(e, (uint64_t)k->cols), ""),
		                  LLVMBuildMul(e->b, t, c64(e, VEC), ""), "");
		valid = LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntULT, t, c64(e, (uint64_t)k->cols / VEC), ""),
		                     LLVMBuildICmp(e->b, LLVMIntULT, row, dimv(e, k->rows), ""), "");
		gid = LLVMBuildMul(e->b, t, c64(e, 1024), "");   /* leader: t == 0 */
	}
	LLVMValueRef idx = LLVMBuildSelect(e->b, valid, e0, c64(e, 0), "");
	LLVMValueRef x[VEC], code[VEC];

	if (check_amax_ops(e, 0) || check_scalar_ops(e) || (q && check_quantize(e, q)))
		return -1;
	load_vec(e, k->x, idx, x);
	for (int i = 0; i < VEC; i++)
		x[i] = LLVMBuildSelect(e->b, valid, x[i], cf(e, 0), "");
	LLVMValueRef mbits = vec_amax_bits(e, x, VEC);
	if (k->shape == CG_AMAX_TENSOR) {
		tensor_amax_out(e, mbits);
		return 0;
	}
	LLVMValueRef bidx = NULL, leader;
	if (k->shape == CG_QUANT_ROWBLOCK) {
		int lanes = k->rowcta ? 1024 : (int)(k->blen / VEC);
		LLVMValueRef g = lanes <= 32 ? group_max(e, mbits, lanes) : cta_max(e, mbits);
		bidx = LLVMBuildUDiv(e->b, idx, c64(e, (uint64_t)k->blen), "");
		for (int i = 0; i < k->f->nins; i++)
			if (kin(k, i) && k->f->ins[i].op == OP_amax && !is_tensorwise_t(&k->f->ins[i].type))
				e->sc[k->f->ins[i].res] = LLVMBuildBitCast(e->b, g, e->g->f32, "");
		leader = LLVMBuildICmp(e->b, LLVMIntEQ,
		                       LLVMBuildURem(e->b, gid, c64(e, (uint64_t)lanes), ""), c64(e, 0), "");
	} else {
		leader = LLVMBuildICmp(e->b, LLVMIntEQ, gid, c64(e, 0), "");
	}
	if (k->gridamax >= 0)
		e->sc[k->gridamax] = grid_amax(e, mbits);
	LLVMValueRef mult = quant_multiplier(e, q, bidx);
	/* the scalars every output needs, before any branch */
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(k->f, k->out[i]);
		if (d->op != OP_quantize && d->op != OP_amax)
			scalar(e, k->out[i], bidx);
	}
	quantize_vec(e, q, mult, x, idx, code);
	store_scalars(e, LLVMBuildAnd(e->b, valid, leader, ""), bidx ? bidx : c64(e, 0), NULL);
	if (is_out(e, q->res)) {
		LLVMBasicBlockRef cont = begin_if(e, valid);
		store_codes(e, q->res, idx, code);
		end_if(e, cont);
	}
	for (int i = 0; i < k->nout; i++)
		if (ir_def_ins(k->f, k->out[i])->op == OP_amax
		    && is_tensorwise_t(&k->f->val[k->out[i]].type)) {
			tensor_amax_out(e, mbits);
			break;
		}
	return 0;
}

/* quant_tensor with a fused transpose: 64x64 tiles (partial at the edges:
 * rows and columns % 16), 256 threads, each one row segment of 16; the
 * codes go through shared memory. */
static int
emit_transpose(E *e)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q], *tr = &k->f->ins[k->tr];
	enum { T = 64, PITCH = 80 };
	LLVMBuilderRef b = e->b;

	if (tr->arg[0] != q->res)
		return kfail(k, "%%%s = transpose: of the quantized data only",
		             k->f->val[tr->res].name);
	if (k->threads != 256)
		return kfail(k, "fused transpose kernels are generated for 256 threads");
	if (!is_out(e, tr->res))
		return kfail(k, "%%%s = transpose: not an output", k->f->val[tr->res].name);
	if (check_amax_ops(e, 0) || check_scalar_ops(e) || check_quantize(e, q))
		return -1;
	k->tiled = 1;
	k->tile_rows = k->tile_cols = T;
	LLVMTypeRef at = LLVMArrayType2(e->g->i8, T * PITCH);
	LLVMValueRef tile = shared_array(e, "tile", 1, at, 16);

	LLVMValueRef rows = dimv(e, k->rows), cols = dimv(e, k->cols);
	LLVMValueRef tid = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef tc = LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef trw = LLVMBuildZExt(b, sreg(e, "ctaid.y"), e->g->i64, "");
	LLVMValueRef r = LLVMBuildUDiv(b, tid, c64(e, 4), "");
	LLVMValueRef seg = LLVMBuildMul(b, LLVMBuildURem(b, tid, c64(e, 4), ""), c64(e, VEC), "");
	LLVMValueRef grow = LLVMBuildAdd(b, LLVMBuildMul(b, trw, c64(e, T), ""), r, "");
	LLVMValueRef gcol = LLVMBuildAdd(b, LLVMBuildMul(b, tc, c64(e, T), ""), seg, "");
	LLVMValueRef valid = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, grow, rows, ""),
	                                  LLVMBuildICmp(b, LLVMIntULT, gcol, cols, ""), "");
	LLVMValueRef idx = LLVMBuildSelect(b, valid, LLVMBuildAdd(b, LLVMBuildMul(b, grow, cols, ""),
	                                                          gcol, ""), c64(e, 0), "");
	LLVMValueRef x[VEC], code[VEC];

	load_vec(e, k->x, idx, x);
	for (int i = 0; i < VEC; i++)
		x[i] = LLVMBuildSelect(b, valid, x[i], cf(e, 0), "");
	if (k->gridamax >= 0)
		e->sc[k->gridamax] = grid_amax(e, vec_amax_bits(e, x, VEC));
	LLVMValueRef mult = quant_multiplier(e, q, NULL);
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(k->f, k->out[i]);
		if (d->op != OP_quantize && d->op != OP_amax && d->op != OP_transpose)
			scalar(e, k->out[i], NULL);
	}
	quantize_vec(e, q, mult, x, idx, code);
	LLVMValueRef first = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, tid, c64(e, 0), ""),
	                                  LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildOr(b, tc, trw, ""),
	                                                c64(e, 0), ""), "");
	store_scalars(e, first, c64(e, 0), c64(e, 0));
	if (is_out(e, q->res)) {
		LLVMBasicBlockRef c0 = begin_if(e, valid);
		store_codes(e, q->res, idx, code);
		end_if(e, c0);
	}
	/* the tile in shared memory: row r, bytes seg..seg+15 */
	LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(e->g->i32, 4));
	for (int w = 0; w < 4; w++) {
		LLVMValueRef word = c32(e, 0);
		for (int i = 0; i < 4; i++)
			word = LLVMBuildOr(b, word, LLVMBuildShl(b, LLVMBuildAnd(b, code[4 * w + i],
			                   c32(e, 0xff), ""), c32(e, 8 * i), ""), "");
		vec = LLVMBuildInsertElement(b, vec, word, c32(e, w), "");
	}
	LLVMValueRef soff = LLVMBuildAdd(b, LLVMBuildMul(b, r, c64(e, PITCH), ""), seg, "");
	store_al(e, vec, LLVMBuildGEP2(b, e->g->i8, tile, &soff, 1, ""), 16);
	barrier(e);
	/* transposed: column c = tid/4 of the tile, rows seg..seg+15 */
	LLVMValueRef tcode[VEC];
	for (int i = 0; i < VEC; i++) {
		LLVMValueRef o = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, seg, c64(e, i), ""),
		                                              c64(e, PITCH), ""), r, "");
		tcode[i] = LLVMBuildZExt(b, load_al(e, e->g->i8, LLVMBuildGEP2(b, e->g->i8, tile, &o, 1, ""),
		                                    1), e->g->i32, "");
	}
	LLVMValueRef trow = LLVMBuildAdd(b, LLVMBuildMul(b, tc, c64(e, T), ""), r, "");
	LLVMValueRef tcol = LLVMBuildAdd(b, LLVMBuildMul(b, trw, c64(e, T), ""), seg, "");
	LLVMValueRef tok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, trow, cols, ""),
	                                LLVMBuildICmp(b, LLVMIntULT, tcol, rows, ""), "");
	LLVMBasicBlockRef c1 = begin_if(e, tok);
	store_codes(e, tr->res, LLVMBuildAdd(b, LLVMBuildMul(b, trow, rows, ""), tcol, ""), tcode);
	end_if(e, c1);
	for (int i = 0; i < k->nout; i++)
		if (ir_def_ins(k->f, k->out[i])->op == OP_amax) {
			tensor_amax_out(e, vec_amax_bits(e, x, VEC));
			break;
		}
	return 0;
}

/* The tile's codes through shared memory to the transposed result
 * (rows of x % 16). 128x128: thread t writes transposed row t/2, source
 * rows (t%2)*64 .. +64 as four 16-byte stores; 16x16: lane l of a block
 * writes transposed row l of its block. */
static void
tile_transpose(E *e, const Ins *tr_ins, int big, LLVMValueRef code[4][VEC], LLVMValueRef tid,
               LLVMValueRef tr, LLVMValueRef tc, LLVMValueRef tcok, LLVMValueRef rows,
               LLVMValueRef cols)
{
	LLVMBuilderRef b = e->b;
	enum { PITCH = 144 };   /* 128 + 16: rows land on different banks */
	long bytes = big ? 128 * PITCH : (long)e->k->threads * VEC;
	LLVMTypeRef at = LLVMArrayType2(e->g->i8, (uint64_t)bytes);
	LLVMValueRef sm = shared_array(e, "ttile", 2, at, 16);
	int passes = big ? 4 : 1;

	for (int p = 0; p < passes; p++) {
		LLVMValueRef off;
		if (big) {
			LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildUDiv(b, tid, c64(e, 8), ""), c64(e, 32 * p), "");
			off = LLVMBuildAdd(b, LLVMBuildMul(b, r, c64(e, PITCH), ""),
			                   LLVMBuildMul(b, LLVMBuildURem(b, tid, c64(e, 8), ""), c64(e, VEC), ""), "");
		} else {
			off = LLVMBuildMul(b, tid, c64(e, VEC), "");
		}
		for (int i = 0; i < VEC; i++)
			store_al(e, LLVMBuildTrunc(b, code[p][i], e->g->i8, ""),
			         LLVMBuildGEP2(b, e->g->i8, sm, (LLVMValueRef[]){LLVMBuildAdd(b, off, c64(e, i), "")}, 1, ""), 1);
	}
	barrier(e);
	for (int s = 0; s < (big ? 4 : 1); s++) {
		LLVMValueRef t[VEC], orow, ocol, ok;
		if (big) {
			LLVMValueRef j = LLVMBuildUDiv(b, tid, c64(e, 2), "");
			LLVMValueRef r0 = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildURem(b, tid, c64(e, 2), ""),
			                                               c64(e, 64), ""), c64(e, 16 * s), "");
			for (int i = 0; i < VEC; i++) {
				LLVMValueRef o = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, r0, c64(e, i), ""),
				                                              c64(e, PITCH), ""), j, "");
				t[i] = LLVMBuildZExt(b, load_al(e, e->g->i8, LLVMBuildGEP2(b, e->g->i8, sm, &o, 1, ""), 1),
				                     e->g->i32, "");
			}
			orow = LLVMBuildAdd(b, LLVMBuildMul(b, tc, c64(e, 128), ""), j, "");
			ocol = LLVMBuildAdd(b, LLVMBuildMul(b, tr, c64(e, 128), ""), r0, "");
			ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, ocol, rows, ""),
			                  LLVMBuildICmp(b, LLVMIntULT, orow, cols, ""), "");
		} else {
			LLVMValueRef l = LLVMBuildURem(b, tid, c64(e, 16), "");
			LLVMValueRef g0 = LLVMBuildMul(b, LLVMBuildSub(b, tid, l, ""), c64(e, VEC), "");
			for (int i = 0; i < VEC; i++) {
				LLVMValueRef o = LLVMBuildAdd(b, g0, LLVMBuildAdd(b, LLVMBuildMul(b, c64(e, (uint64_t)i),
				                              c64(e, VEC), ""), l, ""), "");
				t[i] = LLVMBuildZExt(b, load_al(e, e->g->i8, LLVMBuildGEP2(b, e->g->i8, sm, &o, 1, ""), 1),
				                     e->g->i32, "");
			}
			orow = LLVMBuildAdd(b, LLVMBuildMul(b, tc, c64(e, 16), ""), l, "");
			ocol = LLVMBuildMul(b, tr, c64(e, 16), "");
			ok = LLVMBuildAnd(b, tcok, LLVMBuildICmp(b, LLVMIntULT, ocol, rows, ""), "");
		}
		LLVMBasicBlockRef cont = begin_if(e, ok);
		store_codes(e, tr_ins->res, LLVMBuildAdd(b, LLVMBuildMul(b, orow, rows, ""), ocol, ""), t);
		end_if(e, cont);
	}
}

/* quant_tile: 128x128 (one CTA of 256 threads per tile, 4 passes of 32
 * rows) or 16x16 (16 lanes per tile, one row each). */
static int
emit_tile(E *e)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	int big = k->br == 128, passes = big ? 4 : 1;

	if (check_amax_ops(e, 1) || check_scalar_ops(e) || check_quantize(e, q))
		return -1;
	k->tiled = 1;
	k->tile_rows = k->br;
	k->tile_cols = big ? 128 : k->threads;
	LLVMValueRef rows = dimv(e, k->rows), cols = dimv(e, k->cols);
	LLVMValueRef ntc = LLVMBuildUDiv(b, LLVMBuildAdd(b, cols, c64(e, (uint64_t)k->bc - 1), ""),
	                                 c64(e, (uint64_t)k->bc), "");
	LLVMValueRef tid = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef cx = LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef tr = LLVMBuildZExt(b, sreg(e, "ctaid.y"), e->g->i64, "");
	LLVMValueRef tc, r0, col, rstep, leader, tcok;
	if (big) {
		tc = cx;
		col = LLVMBuildAdd(b, LLVMBuildMul(b, tc, c64(e, 128), ""),
		                   LLVMBuildMul(b, LLVMBuildURem(b, tid, c64(e, 8), ""), c64(e, VEC), ""), "");
		r0 = LLVMBuildAdd(b, LLVMBuildMul(b, tr, c64(e, 128), ""), LLVMBuildUDiv(b, tid, c64(e, 8), ""), "");
		rstep = c64(e, 32);
		leader = LLVMBuildICmp(b, LLVMIntEQ, tid, c64(e, 0), "");
		tcok = LLVMBuildICmp(b, LLVMIntULT, col, cols, "");   /* partial right tiles */
	} else {
		LLVMValueRef l = LLVMBuildURem(b, tid, c64(e, 16), "");
		tc = LLVMBuildAdd(b, LLVMBuildMul(b, cx, c64(e, (uint64_t)k->threads / 16), ""),
		                  LLVMBuildUDiv(b, tid, c64(e, 16), ""), "");
		col = LLVMBuildMul(b, tc, c64(e, 16), "");
		r0 = LLVMBuildAdd(b, LLVMBuildMul(b, tr, c64(e, 16), ""), l, "");
		rstep = c64(e, 0);
		leader = LLVMBuildICmp(b, LLVMIntEQ, l, c64(e, 0), "");
		tcok = LLVMBuildICmp(b, LLVMIntULT, tc, ntc, "");
	}
	LLVMValueRef x[4][VEC], idx[4], valid[4], m = c32(e, 0);
	for (int p = 0; p < passes; p++) {
		LLVMValueRef row = LLVMBuildAdd(b, r0, LLVMBuildMul(b, rstep, c64(e, p), ""), "");
		valid[p] = LLVMBuildAnd(b, tcok, LLVMBuildICmp(b, LLVMIntULT, row, rows, ""), "");
		idx[p] = LLVMBuildSelect(b, valid[p], LLVMBuildAdd(b, LLVMBuildMul(b, row, cols, ""),
		                                                    col, ""), c64(e, 0), "");
		load_vec(e, k->x, idx[p], x[p]);
		for (int i = 0; i < VEC; i++)
			x[p][i] = LLVMBuildSelect(b, valid[p], x[p][i], cf(e, 0), "");
		m = umax(e, m, vec_amax_bits(e, x[p], VEC));
	}
	if (k->gridamax >= 0)
		e->sc[k->gridamax] = grid_amax(e, m);
	m = big ? cta_max(e, m) : group_max(e, m, 16);
	LLVMValueRef tcc = big ? tc : LLVMBuildSelect(b, tcok, tc, c64(e, 0), "");
	LLVMValueRef bidx = LLVMBuildAdd(b, LLVMBuildMul(b, tr, ntc, ""), tcc, "");
	for (int i = 0; i < k->f->nins; i++)
		if (kin(k, i) && k->f->ins[i].op == OP_amax && k->f->ins[i].res != k->gridamax)
			e->sc[k->f->ins[i].res] = LLVMBuildBitCast(b, m, e->g->f32, "");
	LLVMValueRef mult = quant_multiplier(e, q, bidx);
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(k->f, k->out[i]);
		if (d->op != OP_quantize && !(d->op == OP_transpose && d->arg[0] == q->res))
			scalar(e, k->out[i], bidx);
	}
	LLVMValueRef code[4][VEC];
	for (int p = 0; p < passes; p++) {
		quantize_vec(e, q, mult, x[p], idx[p], code[p]);
		if (is_out(e, q->res)) {
			LLVMBasicBlockRef cont = begin_if(e, valid[p]);
			store_codes(e, q->res, idx[p], code[p]);
			end_if(e, cont);
		}
	}
	/* scale transposes: block (tr, tc) of an [ntr, ntc] grid is (tc, tr) */
	LLVMValueRef ntr = LLVMBuildUDiv(b, LLVMBuildAdd(b, rows, c64(e, (uint64_t)k->br - 1), ""),
	                                 c64(e, (uint64_t)k->br), "");
	LLVMValueRef tbidx = LLVMBuildAdd(b, LLVMBuildMul(b, tcc, ntr, ""), tr, "");
	store_scalars(e, LLVMBuildAnd(b, leader, big ? LLVMConstInt(e->g->i1, 1, 0) : valid[0], ""),
	              bidx, tbidx);
	(void)cols;
	if (k->tr >= 0)
		tile_transpose(e, &k->f->ins[k->tr], big, code, tid, tr, tc, tcok, rows, cols);
	return 0;
}

/* A counted loop i = lo .. hi-1 (i64); body emitted by the caller between
 * loop_begin and loop_end. */
typedef struct Loop {
	LLVMBasicBlockRef head, body, exit, pre;
	LLVMValueRef i, hi;
} Loop;

static LLVMValueRef
loop_begin(E *e, Loop *l, LLVMValueRef lo, LLVMValueRef hi)
{
	l->pre = LLVMGetInsertBlock(e->b);
	l->head = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "head");
	l->body = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "body");
	l->exit = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "exit");
	l->hi = hi;
	LLVMBuildBr(e->b, l->head);
	LLVMPositionBuilderAtEnd(e->b, l->head);
	l->i = LLVMBuildPhi(e->b, e->g->i64, "i");
	LLVMAddIncoming(l->i, &lo, &l->pre, 1);
	LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntULT, l->i, hi, ""), l->body, l->exit);
	LLVMPositionBuilderAtEnd(e->b, l->body);
	return l->i;
}

static void
loop_end(E *e, Loop *l)
{
	LLVMValueRef next = LLVMBuildAdd(e->b, l->i, c64(e, 1), "");
	LLVMBasicBlockRef from = LLVMGetInsertBlock(e->b);

	LLVMAddIncoming(l->i, &next, &from, 1);
	LLVMBuildBr(e->b, l->head);
	LLVMPositionBuilderAtEnd(e->b, l->exit);
}

/* Element (row, col) of x as f32 (a scalar load; the column kernel's
 * lanes read consecutive columns, so a warp's loads are contiguous). */
static LLVMValueRef
load_elem(E *e, int v, LLVMValueRef idx)
{
	precc_format f = e->k->f->val[v].type.fmt;

	if (f == PRECC_FP32 || f == PRECC_TF32)
		return load_al(e, e->g->f32, gep(e, e->ptr[v], LLVMBuildMul(e->b, idx, c64(e, 4), "")), 4);
	LLVMValueRef u = load_al(e, e->g->i16, gep(e, e->ptr[v], LLVMBuildMul(e->b, idx, c64(e, 2), "")), 2);
	if (f == PRECC_BF16)
		return LLVMBuildBitCast(e->b, LLVMBuildShl(e->b, LLVMBuildZExt(e->b, u, e->g->i32, ""),
		                                           c32(e, 16), ""), e->g->f32, "");
	return LLVMBuildFPExt(e->b, LLVMBuildBitCast(e->b, u, e->g->f16, ""), e->g->f32, "");
}

/* quant_colblock: quantize transpose(x) in 1xB blocks without
 * materialising the transpose. Thread g owns column c = g % C of x and
 * rows rb*B .. rb*B+B-1 (rb = g / C): one pass for the block amax, a
 * second (from L1/L2) to quantize 16 rows at a time and store them as 16
 * contiguous bytes of row c of the transposed result. */
static int
emit_colblock(E *e)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	long B = k->bc;

	if (check_amax_ops(e, 1) || check_scalar_ops(e) || check_quantize(e, q))
		return -1;
	k->elems_per_cta = (long)k->threads * B;
	LLVMValueRef R = dimv(e, k->rows), C = dimv(e, k->cols);
	LLVMValueRef gid = gid64(e);
	LLVMValueRef c = LLVMBuildURem(b, gid, C, ""), rb = LLVMBuildUDiv(b, gid, C, "");
	LLVMValueRef nrb = LLVMBuildUDiv(b, R, c64(e, (uint64_t)B), "");
	LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntULT, rb, nrb, "");
	LLVMBasicBlockRef cont = begin_if(e, valid);
	LLVMValueRef r0 = LLVMBuildMul(b, rb, c64(e, (uint64_t)B), "");
	int has_amax = 0;
	for (int n = 0; n < k->f->nins; n++)
		has_amax |= kin(k, n) && k->f->ins[n].op == OP_amax;
	LLVMValueRef m = c32(e, 0);
	if (!has_amax)
		goto quant;
	/* pass 1: amax over B rows */
	Loop l;
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
	LLVMValueRef i = loop_begin(e, &l, c64(e, 0), c64(e, (uint64_t)B));
	LLVMPositionBuilderBefore(b, LLVMGetNextInstruction(l.i));
	LLVMValueRef zero = c32(e, 0);
	m = LLVMBuildPhi(b, e->g->i32, "m");
	LLVMAddIncoming(m, &zero, &pre, 1);
	LLVMPositionBuilderAtEnd(b, l.body);
	LLVMValueRef xv = load_elem(e, k->x, LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, r0, i, ""),
	                                                                  C, ""), c, ""));
	LLVMValueRef mx = umax(e, m, vec_amax_bits(e, &xv, 1));
	LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
	LLVMAddIncoming(m, &mx, &from, 1);
	loop_end(e, &l);
quant:;
	LLVMValueRef bidx = k->colwise ? c : LLVMBuildAdd(b, LLVMBuildMul(b, c, nrb, ""), rb, "");
	for (int n = 0; n < k->f->nins; n++)
		if (kin(k, n) && k->f->ins[n].op == OP_amax)
			e->sc[k->f->ins[n].res] = LLVMBuildBitCast(b, m, e->g->f32, "");
	LLVMValueRef mult = quant_multiplier(e, q, bidx);
	for (int n = 0; n < k->nout; n++)
		if (ir_def_ins(k->f, k->out[n])->op != OP_quantize)
			scalar(e, k->out[n], bidx);
	store_scalars(e, LLVMConstInt(e->g->i1, 1, 0), bidx, NULL);
	/* pass 2: 16 rows at a time */
	if (is_out(e, q->res)) {
		Loop l2;
		LLVMValueRef j = loop_begin(e, &l2, c64(e, 0), c64(e, (uint64_t)B / VEC));
		LLVMValueRef rj = LLVMBuildAdd(b, r0, LLVMBuildMul(b, j, c64(e, VEC), ""), "");
		LLVMValueRef x[VEC], code[VEC];
		for (int t = 0; t < VEC; t++)
			x[t] = load_elem(e, k->x, LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, rj, c64(e, t), ""),
			                                                       C, ""), c, ""));
		LLVMValueRef tidx = LLVMBuildAdd(b, LLVMBuildMul(b, c, R, ""), rj, "");
		quantize_vec(e, q, mult, x, tidx, code);
		store_codes(e, q->res, tidx, code);
		loop_end(e, &l2);
	}
	end_if(e, cont);
	return 0;
}

/* amax_cols: thread g takes column g % C, rows 128 (g / C) .. +128 (the
 * last chunk partial), and one atom.global.max.u32 into that column. */
static int
emit_amax_cols(E *e)
{
	Kern *k = e->k;
	LLVMBuilderRef b = e->b;
	LLVMValueRef R = dimv(e, k->rows), C = dimv(e, k->cols);
	LLVMValueRef gid = gid64(e);
	LLVMValueRef c = LLVMBuildURem(b, gid, C, ""), rb = LLVMBuildUDiv(b, gid, C, "");
	LLVMValueRef r0 = LLVMBuildMul(b, rb, c64(e, 128), "");
	LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntULT, r0, R, "");
	LLVMBasicBlockRef cont = begin_if(e, valid);
	LLVMValueRef r1 = LLVMBuildAdd(b, r0, c64(e, 128), "");
	r1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, r1, R, ""), r1, R, "");
	Loop l;
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
	LLVMValueRef i = loop_begin(e, &l, r0, r1);
	LLVMPositionBuilderBefore(b, LLVMGetNextInstruction(l.i));
	LLVMValueRef zero = c32(e, 0), m = LLVMBuildPhi(b, e->g->i32, "m");
	LLVMAddIncoming(m, &zero, &pre, 1);
	LLVMPositionBuilderAtEnd(b, l.body);
	LLVMValueRef xv = load_elem(e, k->x, LLVMBuildAdd(b, LLVMBuildMul(b, i, C, ""), c, ""));
	LLVMValueRef mx = umax(e, m, vec_amax_bits(e, &xv, 1));
	LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
	LLVMAddIncoming(m, &mx, &from, 1);
	loop_end(e, &l);
	for (int n = 0; n < k->nout; n++)
		LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpUMax,
		                   gep(e, e->ptr[k->out[n]], LLVMBuildMul(b, c, c64(e, 4), "")), m,
		                   LLVMAtomicOrderingMonotonic, 0);
	end_if(e, cont);
	return 0;
}

/* dequantize: codes (16 per thread, one 16-byte load) times scale_inv. */
static int
emit_dequant(E *e)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	const Func *f = k->f;
	precc_format qf = f->val[q->arg[0]].type.fmt, rf = q->type.fmt;
	const Type *st = &f->val[q->arg[1]].type;
	LLVMBuilderRef b = e->b;

	if (q->narg != 2)
		return kfail(k, "%%%s = dequantize: two-level scales are not generated yet",
		             f->val[q->res].name);
	if (qf != PRECC_E4M3 && qf != PRECC_E5M2)
		return kfail(k, "%%%s = dequantize: %s codes are not generated yet",
		             f->val[q->res].name, ir_fmt_name(qf));
	if (rf != PRECC_BF16 && rf != PRECC_FP16 && rf != PRECC_FP32)
		return kfail(k, "%%%s = dequantize: to %s", f->val[q->res].name, ir_fmt_name(rf));
	int tw = st->block[0] == 0 && st->block[1] == 0;
	if (!tw && !(st->block[0] == 1 && st->block[1] >= 16 && st->block[1] % 16 == 0))
		return kfail(k, "%%%s = dequantize: scale granularity %ldx%ld", f->val[q->res].name,
		             st->block[0], st->block[1]);
	if (!tw && k->cols >= 0 && k->cols % st->block[1])
		return kfail(k, "%%%s = dequantize: columns not a multiple of the block",
		             f->val[q->res].name);
	if (!tw && k->cols == DIM_M)
		k->m_multiple = st->block[1];
	k->elems_per_cta = (long)k->threads * VEC;
	LLVMValueRef total = LLVMBuildMul(b, dimv(e, k->rows), dimv(e, k->cols), "");
	LLVMValueRef e0 = LLVMBuildMul(b, gid64(e), c64(e, VEC), "");
	LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntULT, e0, total, "");
	LLVMBasicBlockRef cont = begin_if(e, valid);
	LLVMValueRef bidx = tw ? c64(e, 0) : LLVMBuildUDiv(b, e0, c64(e, (uint64_t)st->block[1]), "");
	LLVMValueRef si = scalar(e, q->arg[1], bidx);
	if (st->fmt != PRECC_FP32)
		si = decode8(e, st->fmt, si);
	LLVMValueRef w = load_al(e, LLVMVectorType(e->g->i32, 4), gep(e, e->ptr[q->arg[0]], e0), 16);
	LLVMValueRef y[VEC];
	for (int j = 0; j < 4; j++) {
		LLVMValueRef u = LLVMBuildExtractElement(b, w, c32(e, j), "");
		for (int h = 0; h < 2; h++) {
			LLVMValueRef pair = LLVMBuildTrunc(b, LLVMBuildLShr(b, u, c32(e, 16 * h), ""), e->g->i16, "");
			LLVMValueRef hh = asm_cvt_f16x2_from_f8x2(e->g, qf, pair);
			for (int i = 0; i < 2; i++) {
				LLVMValueRef half = LLVMBuildTrunc(b, LLVMBuildLShr(b, hh, c32(e, 16 * i), ""),
				                                   e->g->i16, "");
				LLVMValueRef d = LLVMBuildFPExt(b, LLVMBuildBitCast(b, half, e->g->f16, ""),
				                                e->g->f32, "");
				y[4 * j + 2 * h + i] = LLVMBuildFMul(b, d, si, "");
			}
		}
	}
	LLVMValueRef out = e->ptr[q->res];
	if (rf == PRECC_FP32) {
		for (int j = 0; j < 4; j++) {
			LLVMValueRef v = LLVMGetUndef(LLVMVectorType(e->g->f32, 4));
			for (int i = 0; i < 4; i++)
				v = LLVMBuildInsertElement(b, v, y[4 * j + i], c32(e, i), "");
			store_al(e, v, gep(e, out, LLVMBuildMul(b, LLVMBuildAdd(b, e0, c64(e, 4 * j), ""),
			                                        c64(e, 4), "")), 16);
		}
	} else {
		for (int j = 0; j < 2; j++) {
			LLVMValueRef v = LLVMGetUndef(LLVMVectorType(e->g->i32, 4));
			for (int i = 0; i < 4; i++)
				v = LLVMBuildInsertElement(b, v, asm_cvt_16x2(e->g, rf, y[8 * j + 2 * i],
				                           y[8 * j + 2 * i + 1]), c32(e, i), "");
			store_al(e, v, gep(e, out, LLVMBuildMul(b, LLVMBuildAdd(b, e0, c64(e, 8 * j), ""),
			                                        c64(e, 2), "")), 16);
		}
	}
	end_if(e, cont);
	return 0;
}

static LLVMValueRef
fptr(E *e, int v, LLVMValueRef i)
{
	return gep(e, e->ptr[v], LLVMBuildMul(e->b, i, c64(e, 4), ""));
}

/* delayed_update: one thread pushes the amax into the history, reduces
 * it and computes the next scale (and whatever else follows). */
static int
emit_delayed(E *e)
{
	Kern *k = e->k;
	const Func *f = k->f;
	LLVMBuilderRef b = e->b;

	if (check_scalar_ops(e))
		return -1;
	LLVMValueRef t0 = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "tid.x"), c32(e, 0), ""),
	                               LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "ctaid.x"), c32(e, 0), ""), "");
	LLVMBasicBlockRef cont = begin_if(e, t0);
	for (int n = 0; n < f->nins; n++) {
		const Ins *in = &f->ins[n];
		if (in->op == OP_history_push) {
			int h = in->arg[0], a = in->arg[1], r = in->res;
			long len = f->val[h].type.dim[0];
			if (f->val[h].type.rank != 1 || len <= 0)
				return kfail(k, "%%%s = history_push: f32[H] histories only", f->val[r].name);
			if (!e->ptr[r])
				return kfail(k, "%%%s = history_push: its result must be an output",
				             f->val[r].name);
			Loop l;
			LLVMValueRef i = loop_begin(e, &l, c64(e, 1), c64(e, (uint64_t)len));
			store_al(e, load_al(e, e->g->f32, fptr(e, h, LLVMBuildSub(b, i, c64(e, 1), "")), 4),
			         fptr(e, r, i), 4);
			loop_end(e, &l);
			store_al(e, scalar(e, a, NULL), fptr(e, r, c64(e, 0)), 4);
		} else if (in->op == OP_history_reduce) {
			int h = in->arg[0];
			long len = f->val[h].type.dim[0];
			if (!e->ptr[h])
				return kfail(k, "%%%s = history_reduce: of a buffer (param or output)",
				             f->val[in->res].name);
			LLVMValueRef m0 = load_al(e, e->g->f32, fptr(e, h, c64(e, 0)), 4);
			if (in->algo == HIST_MOST_RECENT || len <= 1) {
				e->sc[in->res] = m0;
				continue;
			}
			Loop l;
			LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
			LLVMValueRef i = loop_begin(e, &l, c64(e, 1), c64(e, (uint64_t)len));
			/* the running max lives in a phi next to i */
			LLVMPositionBuilderBefore(b, LLVMGetNextInstruction(l.i));
			LLVMValueRef m = LLVMBuildPhi(b, e->g->f32, "m");
			LLVMAddIncoming(m, &m0, &pre, 1);
			LLVMPositionBuilderAtEnd(b, l.body);
			LLVMValueRef v = load_al(e, e->g->f32, fptr(e, h, i), 4);
			LLVMValueRef nan = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""),
			                               LLVMBuildFCmp(b, LLVMRealUNO, m, m, ""), "");
			LLVMValueRef mx = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, v, m, ""), v, m, "");
			mx = LLVMBuildSelect(b, nan, cfbits(e, 0x7fc00000), mx, "");
			LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
			LLVMAddIncoming(m, &mx, &from, 1);
			loop_end(e, &l);
			e->sc[in->res] = m;
		}
	}
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(f, k->out[i]);
		if (d->op != OP_history_push)
			scalar(e, k->out[i], NULL);
	}
	/* scalar outputs, same thread */
	for (int i = 0; i < k->nout; i++) {
		int v = k->out[i];
		if (ir_def_ins(f, v)->op == OP_history_push)
			continue;
		if (f->val[v].type.fmt != PRECC_FP32)
			return kfail(k, "%%%s: f32 outputs only", f->val[v].name);
		store_al(e, e->sc[v], fptr(e, v, c64(e, 0)), 4);
	}
	end_if(e, cont);
	return 0;
}

static int
emit_shape(E *e)
{
	Kern *k = e->k;

	switch (k->shape) {
	case CG_AMAX_TENSOR:
	case CG_QUANT_ROWBLOCK:
		return emit_flat(e);
	case CG_QUANT_TENSOR:
		return k->tr >= 0 ? emit_transpose(e) : emit_flat(e);
	case CG_QUANT_TILE: return emit_tile(e);
	case CG_AMAX_COLS: return emit_amax_cols(e);
	case CG_QUANT_COLBLOCK: return emit_colblock(e);
	case CG_DEQUANT: return emit_dequant(e);
	case CG_DELAYED_UPDATE: return emit_delayed(e);
	default: return kfail(k, "shape %d", (int)k->shape);
	}
}

/* CTAs of phase k at run time, and its grid width (tiled). */
static LLVMValueRef
phase_ctas(E *e, const Kern *k, LLVMValueRef *gx)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef rows = dimv(e, k->rows), cols = dimv(e, k->cols);

	if (k->tiled) {
		*gx = LLVMBuildUDiv(b, LLVMBuildAdd(b, cols, c64(e, (uint64_t)k->tile_cols - 1), ""),
		                    c64(e, (uint64_t)k->tile_cols), "");
		LLVMValueRef gy = LLVMBuildUDiv(b, LLVMBuildAdd(b, rows, c64(e, (uint64_t)k->tile_rows - 1), ""),
		                                c64(e, (uint64_t)k->tile_rows), "");
		return LLVMBuildMul(b, *gx, gy, "");
	}
	*gx = NULL;
	LLVMValueRef n = LLVMBuildMul(b, rows, cols, "");
	return LLVMBuildUDiv(b, LLVMBuildAdd(b, n, c64(e, (uint64_t)k->elems_per_cta - 1), ""),
	                     c64(e, (uint64_t)k->elems_per_cta), "");
}

/* A fused kernel: CTA b runs the phase whose range holds b, with its own
 * CTA ids; each phase's body is CTA-uniform, so its barriers and
 * shuffles see every thread. */
static int
emit_phases(E *base)
{
	Kern *top = base->k;
	LLVMBuilderRef b = base->b;
	LLVMValueRef cta = LLVMBuildZExt(b, sreg(base, "ctaid.x"), base->g->i64, "");
	LLVMValueRef start = c64(base, 0);
	int rc = 0;

	for (int p = 0; p < top->nphase && rc == 0; p++) {
		E e = *base;
		Kern *k = &top->phase[p];
		LLVMValueRef gx, n = phase_ctas(&e, k, &gx);
		LLVMValueRef end = LLVMBuildAdd(b, start, n, "");
		LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntUGE, cta, start, ""),
		                               LLVMBuildICmp(b, LLVMIntULT, cta, end, ""), "");
		LLVMBasicBlockRef cont = begin_if(&e, in);
		LLVMValueRef local = LLVMBuildSub(b, cta, start, "");
		e.k = k;
		e.ncta = n;
		e.slot = p;
		e.sc = calloc((size_t)k->f->nval + 1, sizeof *e.sc);
		if (!e.sc)
			return kfail(top, "out of memory");
		e.vcx = LLVMBuildTrunc(b, gx ? LLVMBuildURem(b, local, gx, "") : local, e.g->i32, "");
		e.vcy = LLVMBuildTrunc(b, gx ? LLVMBuildUDiv(b, local, gx, "") : c64(&e, 0), e.g->i32, "");
		rc = emit_shape(&e);
		free(e.sc);
		if (rc == 0)
			end_if(&e, cont);
		start = end;
	}
	return rc;
}

int
kemit(Cg *g, Kern *k, char *err, size_t errsz)
{
	const Func *f = k->f;
	E e = {.g = g, .k = k, .b = g->b};
	LLVMTypeRef pt[KMAXP * 2 + 2];
	int np = 0, rc;

	(void)err;
	(void)errsz;
	for (int i = 0; i < k->nin; i++)
		pt[np++] = g->gptr;
	for (int i = 0; i < k->nout; i++)
		pt[np++] = g->gptr;
	if (k->has_sync)
		pt[np++] = g->gptr;
	if (k->has_m)
		pt[np++] = g->i64;
	if (k->has_seed)
		pt[np++] = g->i64;
	g->fn = LLVMAddFunction(g->mod, k->name, LLVMFunctionType(g->vd, pt, (unsigned)np, 0));
	if (!g->host) {
		/* ptxas 13 holds the 128x128 tiles (64 values live per thread) and
		 * the grid-barrier kernels at 80 registers and spills. Tiles get
		 * what two CTAs per SM leave; grid-barrier kernels what four leave,
		 * so that a cooperative grid of up to 4 x SMs CTAs of 256 threads
		 * stays resident. Others keep ptxas's choice. */
		int big = k->has_sync || (k->shape == CG_QUANT_TILE && k->br == 128);
		for (int p = 0; p < k->nphase; p++)
			big |= k->phase[p].shape == CG_QUANT_TILE && k->phase[p].br == 128;
		int r = 65536 / k->threads / (k->has_sync ? 4 : 2) / 8 * 8;
		LLVMSetFunctionCallConv(g->fn, LLVMPTXKernelCallConv);
		cg_annotate_threads(g, g->fn, k->threads, big ? (r > 255 ? 255 : r) : 0);
	}
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, g->fn, "entry"));
	e.ptr = calloc((size_t)f->nval + 1, sizeof *e.ptr);
	e.sc = calloc((size_t)f->nval + 1, sizeof *e.sc);
	if (!e.ptr || !e.sc) {
		free(e.ptr);
		free(e.sc);
		return kfail(k, "out of memory");
	}
	np = 0;
	for (int i = 0; i < k->nin; i++)
		e.ptr[k->in[i]] = LLVMGetParam(g->fn, (unsigned)np++);
	for (int i = 0; i < k->nout; i++)
		e.ptr[k->out[i]] = LLVMGetParam(g->fn, (unsigned)np++);
	if (k->has_sync)
		e.sync = LLVMGetParam(g->fn, (unsigned)np++);
	if (k->has_m)
		e.m = LLVMGetParam(g->fn, (unsigned)np++);
	if (k->has_seed)
		e.seed = LLVMGetParam(g->fn, (unsigned)np++);
	for (int i = 0; i < np; i++)
		if (LLVMGetTypeKind(LLVMTypeOf(LLVMGetParam(g->fn, (unsigned)i))) == LLVMPointerTypeKind)
			LLVMAddAttributeAtIndex(g->fn, (unsigned)i + 1,
			                        LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName("noalias", 7), 0));
	LLVMTypeRef rt = LLVMArrayType2(g->i32, 32);
	if (k->shape != CG_DELAYED_UPDATE && k->shape != CG_DEQUANT) {
		e.red = shared_array(&e, "red", 0, rt, 4);
	}
	if (k->nphase) {
		rc = emit_phases(&e);
	} else {
		LLVMValueRef gx;
		if (k->has_sync)
			e.ncta = phase_ctas(&e, k, &gx);
		rc = emit_shape(&e);
	}
	if (rc == 0)
		LLVMBuildRetVoid(g->b);
	free(e.ptr);
	free(e.sc);
	return rc;
}
