/*
 * emit.c — the builder toolkit every kernel family uses: constants, NVVM
 * intrinsics (routed to precc_emu_* in host mode), shared arrays, 16-byte
 * loads and stores, reductions (thread, lanes, CTA), if and counted loops.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <llvm-c/DebugInfo.h>
#include "precc/interp.h"
#include "emit.h"

LLVMValueRef
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

LLVMValueRef
intrin(E *e, const char *name, LLVMTypeRef *tys, int ntys, LLVMValueRef *args, int nargs)
{
	if (e->g->host && !strncmp(name, "llvm.nvvm.", 10)) {
		/* the emulator knows these; anything else becomes a call to an
		 * external "precc_emu_unknown:NAME" that the emulator refuses to
		 * run (a new intrinsic must get its host model first) */
		static const char *const sregs[] = {"tid.x", "ctaid.x", "ctaid.y", "nctaid.x"};
		if (!strncmp(name, "llvm.nvvm.read.ptx.sreg.", 24)) {
			for (unsigned k = 0; k < 4; k++)
				if (!strcmp(name + 24, sregs[k])) {
					LLVMValueRef which = LLVMConstInt(e->g->i32, k, 0);
					return emu_call(e->g, "precc_emu_sreg", e->g->i32, &which, 1);
				}
		} else if (!strcmp(name, "llvm.nvvm.shfl.sync.bfly.i32") && nargs == 4) {
			return emu_call(e->g, "precc_emu_shfl_bfly", e->g->i32, args, 4);
		} else if (!strcmp(name, "llvm.nvvm.barrier0")) {
			/* numbered by call site, so that threads waiting at two
			 * different barriers are seen as divergent */
			LLVMValueRef fn = LLVMGetNamedFunction(e->g->mod, "precc_emu_barrier");
			unsigned site = 1;
			for (LLVMUseRef u = fn ? LLVMGetFirstUse(fn) : NULL; u; u = LLVMGetNextUse(u))
				site++;
			LLVMValueRef a = LLVMConstInt(e->g->i32, site, 0);
			return emu_call(e->g, "precc_emu_barrier", e->g->vd, &a, 1);
		}
		char unk[128];
		snprintf(unk, sizeof unk, "precc_emu_unknown:%s", name);
		return emu_call(e->g, unk, e->g->i32, args, nargs);
	}
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->g->mod, id, tys, (size_t)ntys);
	LLVMTypeRef ft = LLVMIntrinsicGetType(e->g->ctx, id, tys, (size_t)ntys);

	return LLVMBuildCall2(e->b, ft, fn, args, (unsigned)nargs, "");
}

LLVMValueRef
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

void
barrier(E *e)
{
	intrin(e, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
}

LLVMValueRef
shfl_xor(E *e, LLVMValueRef v, int lanemask)
{
	LLVMValueRef a[4] = {c32(e, 0xffffffff), v, c32(e, (unsigned)lanemask), c32(e, 0x1f)};

	return intrin(e, "llvm.nvvm.shfl.sync.bfly.i32", NULL, 0, a, 4);
}

LLVMValueRef
umax(E *e, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntUGT, a, b, ""), a, b, "");
}

LLVMValueRef
gep(E *e, LLVMValueRef p, LLVMValueRef byteoff)
{
	return LLVMBuildGEP2(e->b, e->g->i8, p, &byteoff, 1, "");
}

/* Extent of dim d at run time (i64). */
LLVMValueRef
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
LLVMBasicBlockRef
begin_if(E *e, LLVMValueRef cond)
{
	LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "then");
	LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "cont");

	LLVMBuildCondBr(e->b, cond, then, cont);
	LLVMPositionBuilderAtEnd(e->b, then);
	return cont;
}

void
end_if(E *e, LLVMBasicBlockRef cont)
{
	LLVMBuildBr(e->b, cont);
	LLVMPositionBuilderAtEnd(e->b, cont);
}

/* A CTA's shared-memory array: a .shared global on the GPU; on the host
 * (emulation) precc_emu_shared(id, bytes) returns the running CTA's copy. */
LLVMValueRef
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

LLVMValueRef
load_al(E *e, LLVMTypeRef t, LLVMValueRef p, unsigned align)
{
	LLVMValueRef l = LLVMBuildLoad2(e->b, t, p, "");

	LLVMSetAlignment(l, align);
	return l;
}

void
store_al(E *e, LLVMValueRef v, LLVMValueRef p, unsigned align)
{
	LLVMSetAlignment(LLVMBuildStore(e->b, v, p), align);
}

/* VEC elements of high-precision data at element index idx -> floats. */
void
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
	LLVMValueRef w[VEC / 8];
	for (int j = 0; j < VEC / 8; j++) {
		LLVMValueRef off = LLVMBuildMul(e->b, LLVMBuildAdd(e->b, idx, c64(e, 8 * j), ""),
		                                c64(e, 2), "");
		w[j] = load_al(e, v4i, gep(e, base, off), 16);
	}
	unpack16(e, f, w, out);
}

/* VEC floats to high-precision value v at element index idx: 16-byte
 * stores of f32, or of bf16/f16 pairs rounded to nearest even (cvt.rn) */
void
store_vec(E *e, int v, LLVMValueRef idx, const LLVMValueRef x[VEC])
{
	precc_format f = e->k->f->val[v].type.fmt;
	LLVMBuilderRef b = e->b;
	LLVMValueRef out = e->ptr[v];
	int wide = f == PRECC_FP32 || f == PRECC_TF32, per = wide ? 4 : 8;

	for (int j = 0; j < VEC / per; j++) {
		LLVMValueRef w = LLVMGetUndef(LLVMVectorType(wide ? e->g->f32 : e->g->i32, 4));
		for (int i = 0; i < 4; i++)
			w = LLVMBuildInsertElement(b, w, wide ? x[per * j + i]
			                           : asm_cvt_16x2(e->g, f, x[per * j + 2 * i], x[per * j + 2 * i + 1]),
			                           c32(e, i), "");
		store_al(e, w, gep(e, out, LLVMBuildMul(b, LLVMBuildAdd(b, idx, c64(e, per * j), ""),
		                                        c64(e, wide ? 4 : 2), "")), 16);
	}
}

/* The VEC 16-bit elements (bf16 or f16) of two <4 x i32> -> floats, in
 * order (the low half of each word first). */
void
unpack16(E *e, precc_format f, LLVMValueRef w[VEC / 8], LLVMValueRef out[VEC])
{
	for (int j = 0; j < VEC / 8; j++)
		for (int i = 0; i < 4; i++) {
			LLVMValueRef u = LLVMBuildExtractElement(e->b, w[j], c32(e, i), "");
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

/* VEC 8-bit codes (i32 each) as the <4 x i32> of their 16 bytes, code 0
 * in the lowest byte. */
LLVMValueRef
pack_codes(E *e, LLVMValueRef code[VEC])
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
	return vec;
}

/* Store VEC codes (i32 each) at element index idx of value v: one
 * 16-byte store of 8-bit codes, or for e2m1 one 8-byte store of packed
 * ones (code 2i in the low nibble of byte i; idx is a multiple of VEC). */
void
store_codes(E *e, int v, LLVMValueRef idx, LLVMValueRef code[VEC])
{
	if (e->k->f->val[v].type.fmt == PRECC_E2M1) {
		LLVMValueRef v2 = LLVMGetUndef(LLVMVectorType(e->g->i32, 2));
		for (int w = 0; w < 2; w++) {
			LLVMValueRef word = c32(e, 0);
			for (int i = 0; i < 8; i++) {
				LLVMValueRef c = LLVMBuildAnd(e->b, code[8 * w + i], c32(e, 0xf), "");
				word = LLVMBuildOr(e->b, word, LLVMBuildShl(e->b, c, c32(e, 4 * i), ""), "");
			}
			v2 = LLVMBuildInsertElement(e->b, v2, word, c32(e, w), "");
		}
		store_al(e, v2, gep(e, e->ptr[v], LLVMBuildLShr(e->b, idx, c64(e, 1), "")), 8);
		return;
	}
	store_al(e, pack_codes(e, code), gep(e, e->ptr[v], idx), 16);
}

/* Element (row, col) of x as f32 (a scalar load; the column kernel's
 * lanes read consecutive columns, so a warp's loads are contiguous). */
LLVMValueRef
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

LLVMValueRef
fptr(E *e, int v, LLVMValueRef i)
{
	return gep(e, e->ptr[v], LLVMBuildMul(e->b, i, c64(e, 4), ""));
}

/* The amax ops of this kernel (or phase) ignore NaN (nan=ignore;
 * check_amax_ops makes sure they agree). */
static int
amax_nan_ignore(const E *e)
{
	const Func *f = e->k->f;

	for (int i = 0; i < f->nins; i++)
		if (f->ins[i].op == OP_amax && kin(e->k, i))
			return f->ins[i].nan_ignore;
	return 0;
}

/* |x| bits with NaN made 0x7fc00000 (or 0 under nan=ignore, as fmaxf
 * skips it), unsigned-max over the VEC values. */
LLVMValueRef
vec_amax_bits(E *e, LLVMValueRef *x, int n)
{
	LLVMValueRef m = c32(e, 0);
	uint32_t nan = amax_nan_ignore(e) ? 0 : 0x7fc00000;

	for (int i = 0; i < n; i++) {
		LLVMValueRef a = LLVMBuildAnd(e->b, LLVMBuildBitCast(e->b, x[i], e->g->i32, ""),
		                              c32(e, 0x7fffffff), "");
		a = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntUGT, a, c32(e, 0x7f800000), ""),
		                    c32(e, nan), a, "");
		m = umax(e, m, a);
	}
	return m;
}

LLVMValueRef
group_max(E *e, LLVMValueRef m, int lanes)
{
	for (int o = 1; o < lanes; o <<= 1)
		m = umax(e, m, shfl_xor(e, m, o));
	return m;
}

/* The max over the CTA: warps, then shared memory; every thread gets it. */
LLVMValueRef
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

LLVMValueRef
gid64(E *e)
{
	LLVMValueRef c = LLVMBuildZExt(e->b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef t = LLVMBuildZExt(e->b, sreg(e, "tid.x"), e->g->i64, "");

	return LLVMBuildAdd(e->b, LLVMBuildMul(e->b, c, c64(e, (uint64_t)e->k->threads), ""), t, "");
}

LLVMValueRef
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

void
loop_end(E *e, Loop *l)
{
	LLVMValueRef next = LLVMBuildAdd(e->b, l->i, c64(e, 1), "");
	LLVMBasicBlockRef from = LLVMGetInsertBlock(e->b);

	LLVMAddIncoming(l->i, &next, &from, 1);
	l->latch = LLVMBuildBr(e->b, l->head);
	LLVMPositionBuilderAtEnd(e->b, l->exit);
}

/* !llvm.loop !{self, !{"llvm.loop.unroll.disable"}} on the back edge:
 * LLVM keeps the loop rolled and NVPTX prints .pragma "nounroll", which
 * ptxas obeys (CUTLASS's CUTLASS_GEMM_LOOP, `#pragma unroll 1`, on its
 * mainloops). */
void
loop_nounroll(E *e, const Loop *l)
{
	LLVMContextRef c = e->g->ctx;
	LLVMMetadataRef dis = LLVMMDStringInContext2(c, "llvm.loop.unroll.disable", 24);
	LLVMMetadataRef opt = LLVMMDNodeInContext2(c, &dis, 1);
	LLVMMetadataRef tmp = LLVMTemporaryMDNode(c, NULL, 0);
	LLVMMetadataRef ops[2] = {tmp, opt};
	LLVMMetadataRef self = LLVMMDNodeInContext2(c, ops, 2);

	LLVMMetadataReplaceAllUsesWith(tmp, self);
	LLVMSetMetadata(l->latch, LLVMGetMDKindIDInContext(c, "llvm.loop", 9),
	                LLVMMetadataAsValue(c, self));
}

LLVMValueRef
fabs_(E *e, LLVMValueRef x)
{
	LLVMTypeRef t = e->g->f32;

	return intrin(e, "llvm.fabs", &t, 1, &x, 1);
}

LLVMValueRef
is_finite(E *e, LLVMValueRef x)
{
	return LLVMBuildFCmp(e->b, LLVMRealOLT, fabs_(e, x), cf(e, INFINITY), "");
}
