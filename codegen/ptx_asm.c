/*
 * ptx_asm.c — every inline PTX string codegen emits, one place per
 * instruction family (LLVM 19 has no fp8 cvt intrinsics). asm_table lists
 * them with the first target that has them; docs/codegen.md prints it.
 * Formats without a cvt on our targets (e2m1/e3m2/e2m3 x2, ue8m0x2:
 * sm_100a and later) go through swcvt.c instead.
 *
 * PTX packing: "cvt.*x2.f32 d, a, b" puts a in the upper half and b in
 * the lower one, so the element at the lower address is the last operand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cg.h"

#define CVT_E4M3X2 "cvt.rn.satfinite.e4m3x2.f32 $0, $2, $1;"
#define CVT_E5M2X2 "cvt.rn.satfinite.e5m2x2.f32 $0, $2, $1;"
#define CVT_F16X2_E4M3X2 "cvt.rn.f16x2.e4m3x2 $0, $1;"
#define CVT_F16X2_E5M2X2 "cvt.rn.f16x2.e5m2x2 $0, $1;"
#define CVT_BF16X2_F32 "cvt.rn.bf16x2.f32 $0, $2, $1;"
#define CVT_F16X2_F32 "cvt.rn.f16x2.f32 $0, $2, $1;"
#define FENCE_GPU "fence.acq_rel.gpu;"
#define MOV_B64 "mov.b64 $0, $1;"
/* d = a.b + c for one warp (fragment layouts: codegen/mma_frag.h) */
#define MMA_OPS " {$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};"
#define MMA_K32(a, b) "mma.sync.aligned.m16n8k32.row.col.f32." a "." b ".f32" MMA_OPS
#define MMA_K16(t) "mma.sync.aligned.m16n8k16.row.col.f32." t "." t ".f32" MMA_OPS
#define MMA_CONS "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f"
/* global -> shared, 16 bytes, L2 only; bytes past src-size ($2) are zero
 * (PTX ISA, "Data Movement: cp.async"; CuTe's
 * SM80_CP_ASYNC_CACHEGLOBAL_ZFILL, NVIDIA/cutlass 7107b055
 * include/cute/arch/copy_sm80.hpp:147-152, less its L2::128B hint);
 * shared addresses are 32-bit */
#define CP_ASYNC "cp.async.cg.shared.global [$0], [$1], 16, $2;"
#define CP_COMMIT "cp.async.commit_group;"
#define CP_WAIT(n) "cp.async.wait_group " #n ";"
/* four 8x8 b16 matrices, row addresses from lanes 8i..8i+7 for matrix i */
#define LDSM_X4 "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0,$1,$2,$3}, [$4];"
#define LDSM_X4_T "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {$0,$1,$2,$3}, [$4];"

/* d = bytes of {b, a} picked by the nibbles of c (PTX ISA, "Data Movement
 * and Conversion Instructions: prmt", default mode) */
#define PRMT "prmt.b32 $0, $1, $2, $3;"

const AsmEntry asm_table[] = {
	{"fp8 encode", CVT_E4M3X2, "=h,f,f", "sm_89"},
	{"fp8 encode", CVT_E5M2X2, "=h,f,f", "sm_89"},
	{"fp8 decode", CVT_F16X2_E4M3X2, "=r,h", "sm_89"},
	{"fp8 decode", CVT_F16X2_E5M2X2, "=r,h", "sm_89"},
	{"16-bit encode", CVT_BF16X2_F32, "=r,f,f", "sm_80"},
	{"16-bit encode", CVT_F16X2_F32, "=r,f,f", "sm_80"},
	{"grid sync", FENCE_GPU, "~{memory}", "sm_70"},
	/* rows 7..12: asm_mma's; the host emulation knows them by row */
	{"fp8 mma", MMA_K32("e4m3", "e4m3"), MMA_CONS, "sm_89"},
	{"fp8 mma", MMA_K32("e4m3", "e5m2"), MMA_CONS, "sm_89"},
	{"fp8 mma", MMA_K32("e5m2", "e4m3"), MMA_CONS, "sm_89"},
	{"fp8 mma", MMA_K32("e5m2", "e5m2"), MMA_CONS, "sm_89"},
	{"16-bit mma", MMA_K16("bf16"), MMA_CONS, "sm_80"},
	{"16-bit mma", MMA_K16("f16"), MMA_CONS, "sm_80"},
	/* rows 13..19: the GEMM mainloop's copies (asm_cp_async*, asm_ldmatrix) */
	{"async copy", CP_ASYNC, "r,l,r,~{memory}", "sm_80"},
	{"async copy", CP_COMMIT, "~{memory}", "sm_80"},
	{"async copy", CP_WAIT(0), "~{memory}", "sm_80"},
	{"async copy", CP_WAIT(1), "~{memory}", "sm_80"},
	{"async copy", CP_WAIT(2), "~{memory}", "sm_80"},
	{"ldmatrix", LDSM_X4, "=r,=r,=r,=r,r,~{memory}", "sm_75"},
	{"ldmatrix", LDSM_X4_T, "=r,=r,=r,=r,r,~{memory}", "sm_75"},
	{"opaque pointer", MOV_B64, "=l,l", "sm_70"},       /* asm_opaque_ptr, asm_opaque_u64 */
	/* not emitted on sm_89/sm_90/sm_90a: software in swcvt.c */
	{"fp4 encode", "cvt.rn.satfinite.e2m1x2.f32 $0, $2, $1;", "=h,f,f", "sm_100a"},
	{"e8m0 encode", "cvt.rp.satfinite.ue8m0x2.f32 $0, $2, $1;", "=h,f,f", "sm_100a"},
	/* asm_prmt (the host builds it in IR) */
	{"byte permute", PRMT, "=r,r,r,r", "sm_70"},
};
const int asm_table_len = sizeof asm_table / sizeof asm_table[0];

/* Host emulation (tests): precc_emu_asm<nargs>_<result bits>(i32 row of
 * asm_table, args...). */
static LLVMValueRef
call_emu(Cg *g, LLVMTypeRef rt, const char *s, LLVMValueRef *args, int n)
{
	LLVMValueRef a[3];
	LLVMTypeRef at[3];
	char name[32];
	int row = 0;

	while (row < asm_table_len && strcmp(asm_table[row].ptx, s))
		row++;
	a[0] = LLVMConstInt(g->i32, (unsigned)row, 0);
	for (int i = 0; i < n; i++)
		a[i + 1] = args[i];
	for (int i = 0; i <= n; i++)
		at[i] = LLVMTypeOf(a[i]);
	snprintf(name, sizeof name, "precc_emu_asm%d_%u", n, LLVMGetIntTypeWidth(rt));
	LLVMTypeRef ft = LLVMFunctionType(rt, at, (unsigned)n + 1, 0);
	LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
	if (!fn)
		fn = LLVMAddFunction(g->mod, name, ft);
	return LLVMBuildCall2(g->b, ft, fn, a, (unsigned)n + 1, "");
}

static LLVMValueRef
call_asm(Cg *g, LLVMTypeRef rt, const char *s, const char *cons, LLVMValueRef *args, int n)
{
	LLVMTypeRef at[4];

	if (g->host)
		return call_emu(g, rt, s, args, n);

	for (int i = 0; i < n; i++)
		at[i] = LLVMTypeOf(args[i]);
	LLVMTypeRef ft = LLVMFunctionType(rt, at, (unsigned)n, 0);
	LLVMValueRef fn = LLVMGetInlineAsm(ft, s, strlen(s), cons, strlen(cons), 0, 0,
	                                   LLVMInlineAsmDialectATT, 0);
	return LLVMBuildCall2(g->b, ft, fn, args, (unsigned)n, "");
}

LLVMValueRef
asm_cvt_f8x2(Cg *g, precc_format f, LLVMValueRef lo, LLVMValueRef hi)
{
	LLVMValueRef a[2] = {lo, hi};

	return call_asm(g, g->i16, f == PRECC_E4M3 ? CVT_E4M3X2 : CVT_E5M2X2, "=h,f,f", a, 2);
}

LLVMValueRef
asm_cvt_f16x2_from_f8x2(Cg *g, precc_format f, LLVMValueRef codes)
{
	return call_asm(g, g->i32, f == PRECC_E4M3 ? CVT_F16X2_E4M3X2 : CVT_F16X2_E5M2X2, "=r,h",
	                &codes, 1);
}

LLVMValueRef
asm_cvt_16x2(Cg *g, precc_format f, LLVMValueRef lo, LLVMValueRef hi)
{
	LLVMValueRef a[2] = {lo, hi};

	return call_asm(g, g->i32, f == PRECC_BF16 ? CVT_BF16X2_F32 : CVT_F16X2_F32, "=r,f,f", a, 2);
}

/* fence.acq_rel.gpu around the grid-wide barrier (LLVM 19's NVPTX cannot
 * select an IR fence); on the host an IR fence does. */
void
asm_fence_gpu(Cg *g)
{
	if (g->host) {
		LLVMBuildFence(g->b, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
		return;
	}
	LLVMTypeRef ft = LLVMFunctionType(g->vd, NULL, 0, 0);
	LLVMValueRef fn = LLVMGetInlineAsm(ft, FENCE_GPU, strlen(FENCE_GPU), "~{memory}", 9, 1, 0,
	                                   LLVMInlineAsmDialectATT, 0);
	LLVMBuildCall2(g->b, ft, fn, NULL, 0, "");
}

/* p, hidden from LLVM's value analysis: loads through it are loads of
 * their own, so a second pass over memory already read is read again
 * instead of keeping the first pass's registers live (and spilled). The
 * host has no registers to save: p itself. */
LLVMValueRef
asm_opaque_ptr(Cg *g, LLVMValueRef p)
{
	if (g->host)
		return p;
	LLVMValueRef i = LLVMBuildPtrToInt(g->b, p, g->i64, "");
	return LLVMBuildIntToPtr(g->b, call_asm(g, g->i64, MOV_B64, "=l,l", &i, 1), LLVMTypeOf(p), "");
}

/* v (i64), hidden from LLVM the same way: what is computed from it inside
 * a loop stays there (LICM cannot hoist it and keep it live, and spilled,
 * across the loop). The host: v itself. */
LLVMValueRef
asm_opaque_u64(Cg *g, LLVMValueRef v)
{
	if (g->host)
		return v;
	return call_asm(g, g->i64, MOV_B64, "=l,l", &v, 1);
}

/* prmt.b32 d, a, b, c, default mode: byte i of d is byte c[4i+2:4i] of
 * the eight bytes b:a (a's the low four), or, where c[4i+3] is set, that
 * byte's bit 7 replicated (PTX ISA, "prmt"). A byte lookup in an 8-entry
 * table for one instruction (the e2m1 upcast of k_gemm_sm90.c). The host:
 * the same in IR. */
LLVMValueRef
asm_prmt(Cg *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMBuilderRef B = g->b;
	if (!g->host) {
		LLVMValueRef x[3] = {a, b, c};
		return call_asm(g, g->i32, PRMT, "=r,r,r,r", x, 3);
	}
	LLVMValueRef pool = LLVMBuildOr(B, LLVMBuildZExt(B, a, g->i64, ""),
	                                LLVMBuildShl(B, LLVMBuildZExt(B, b, g->i64, ""), LLVMConstInt(g->i64, 32, 0), ""), "");
	LLVMValueRef d = LLVMConstInt(g->i32, 0, 0);
	for (unsigned i = 0; i < 4; i++) {
		LLVMValueRef s = LLVMBuildAnd(B, LLVMBuildLShr(B, c, LLVMConstInt(g->i32, 4 * i, 0), ""),
		                              LLVMConstInt(g->i32, 15, 0), "");
		LLVMValueRef sh = LLVMBuildZExt(B, LLVMBuildShl(B, LLVMBuildAnd(B, s, LLVMConstInt(g->i32, 7, 0), ""),
		                                                 LLVMConstInt(g->i32, 3, 0), ""), g->i64, "");
		LLVMValueRef by = LLVMBuildTrunc(B, LLVMBuildAnd(B, LLVMBuildLShr(B, pool, sh, ""), LLVMConstInt(g->i64, 0xff, 0), ""),
		                                 g->i32, "");
		LLVMValueRef neg = LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, by, LLVMConstInt(g->i32, 0x80, 0), ""),
		                                 LLVMConstInt(g->i32, 0, 0), "");
		LLVMValueRef rep = LLVMBuildSelect(B, neg, LLVMConstInt(g->i32, 0xff, 0), LLVMConstInt(g->i32, 0, 0), "");
		LLVMValueRef sx = LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, s, LLVMConstInt(g->i32, 8, 0), ""),
		                                LLVMConstInt(g->i32, 0, 0), "");
		by = LLVMBuildSelect(B, sx, rep, by, "");
		d = LLVMBuildOr(B, d, LLVMBuildShl(B, by, LLVMConstInt(g->i32, 8 * i, 0), ""), "");
	}
	return d;
}

/* The asm_table row of the MMA for operand formats fa x fb, -1 if none:
 * e4m3/e5m2 in any mix (m16n8k32), bf16 x bf16 or f16 x f16 (m16n8k16). */
int
asm_mma_row(precc_format fa, precc_format fb)
{
	int f8a = fa == PRECC_E4M3 || fa == PRECC_E5M2, f8b = fb == PRECC_E4M3 || fb == PRECC_E5M2;

	if (f8a && f8b)
		return 7 + (fa == PRECC_E5M2) * 2 + (fb == PRECC_E5M2);
	if (fa == fb && fa == PRECC_BF16)
		return 11;
	if (fa == fb && fa == PRECC_FP16)
		return 12;
	return -1;
}

/* mma.sync of asm_table row `row`: d = a.b + c. On the host the fragments
 * go through memory to precc_emu_mma(row, i32[14]: a0..3 b0..1 c0..3 as
 * bits), which gathers the warp's and writes d over c. */
/* A stack slot in the function's entry block (so that it is one slot
 * however many times the code around it runs), for the host models that
 * hand registers back through memory. */
static LLVMValueRef
entry_alloca(Cg *g, LLVMTypeRef t, const char *name)
{
	LLVMBasicBlockRef cur = LLVMGetInsertBlock(g->b);
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(g->fn);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);

	if (first)
		LLVMPositionBuilderBefore(g->b, first);
	else
		LLVMPositionBuilderAtEnd(g->b, entry);
	LLVMValueRef buf = LLVMBuildAlloca(g->b, t, name);
	LLVMPositionBuilderAtEnd(g->b, cur);
	return buf;
}

void
asm_mma(Cg *g, int row, LLVMValueRef a[4], LLVMValueRef b[2], LLVMValueRef c[4], LLVMValueRef d[4])
{
	if (g->host) {
		LLVMTypeRef at = LLVMArrayType2(g->i32, 14);
		LLVMValueRef buf = entry_alloca(g, at, "mma");
		LLVMValueRef v[10];
		for (int i = 0; i < 4; i++)
			v[i] = a[i];
		v[4] = b[0], v[5] = b[1];
		for (int i = 0; i < 4; i++)
			v[6 + i] = LLVMBuildBitCast(g->b, c[i], g->i32, "");
		for (int i = 0; i < 10; i++) {
			LLVMValueRef ix[2] = {LLVMConstInt(g->i64, 0, 0), LLVMConstInt(g->i64, (unsigned)i, 0)};
			LLVMBuildStore(g->b, v[i], LLVMBuildGEP2(g->b, at, buf, ix, 2, ""));
		}
		LLVMTypeRef ft = LLVMFunctionType(g->vd, (LLVMTypeRef[]){g->i32, g->gptr}, 2, 0);
		LLVMValueRef fn = LLVMGetNamedFunction(g->mod, "precc_emu_mma");
		if (!fn)
			fn = LLVMAddFunction(g->mod, "precc_emu_mma", ft);
		LLVMBuildCall2(g->b, ft, fn, (LLVMValueRef[]){LLVMConstInt(g->i32, (unsigned)row, 0), buf},
		               2, "");
		for (int i = 0; i < 4; i++) {
			LLVMValueRef ix[2] = {LLVMConstInt(g->i64, 0, 0), LLVMConstInt(g->i64, (unsigned)(6 + i), 0)};
			d[i] = LLVMBuildLoad2(g->b, g->f32, LLVMBuildGEP2(g->b, at, buf, ix, 2, ""), "");
		}
		return;
	}
	LLVMTypeRef f4 = LLVMStructTypeInContext(g->ctx, (LLVMTypeRef[]){g->f32, g->f32, g->f32, g->f32},
	                                         4, 0);
	LLVMValueRef args[10];
	LLVMTypeRef at[10];
	for (int i = 0; i < 4; i++)
		args[i] = a[i];
	args[4] = b[0], args[5] = b[1];
	for (int i = 0; i < 4; i++)
		args[6 + i] = c[i];
	for (int i = 0; i < 10; i++)
		at[i] = LLVMTypeOf(args[i]);
	LLVMTypeRef ft = LLVMFunctionType(f4, at, 10, 0);
	const char *s = asm_table[row].ptx, *cons = asm_table[row].constraints;
	LLVMValueRef fn = LLVMGetInlineAsm(ft, s, strlen(s), cons, strlen(cons), 0, 0,
	                                   LLVMInlineAsmDialectATT, 0);
	LLVMValueRef r = LLVMBuildCall2(g->b, ft, fn, args, 10, "");
	for (int i = 0; i < 4; i++)
		d[i] = LLVMBuildExtractValue(g->b, r, (unsigned)i, "");
}

/* A side-effecting asm of row `row` (volatile, memory clobber: LLVM
 * neither drops nor moves it across other memory accesses). */
static LLVMValueRef
call_volatile(Cg *g, LLVMTypeRef rt, int row, LLVMValueRef *args, int n)
{
	LLVMTypeRef at[4];
	const char *s = asm_table[row].ptx, *cons = asm_table[row].constraints;

	for (int i = 0; i < n; i++)
		at[i] = LLVMTypeOf(args[i]);
	LLVMTypeRef ft = LLVMFunctionType(rt, at, (unsigned)n, 0);
	LLVMValueRef fn = LLVMGetInlineAsm(ft, s, strlen(s), cons, strlen(cons), 1, 0,
	                                   LLVMInlineAsmDialectATT, 0);
	return LLVMBuildCall2(g->b, ft, fn, args, (unsigned)n, "");
}

/* Host emulation: a call to precc_emu_NAME (emu.c; cg.h). */
LLVMValueRef
asm_host_call(Cg *g, const char *name, LLVMTypeRef rt, LLVMValueRef *args, int n)
{
	LLVMTypeRef at[8];

	if (n > 8)
		abort();

	for (int i = 0; i < n; i++)
		at[i] = LLVMTypeOf(args[i]);
	LLVMTypeRef ft = LLVMFunctionType(rt, at, (unsigned)n, 0);
	LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
	if (!fn)
		fn = LLVMAddFunction(g->mod, name, ft);
	return LLVMBuildCall2(g->b, ft, fn, args, (unsigned)n, "");
}

/* the 32-bit shared-window address of a shared pointer (CUTLASS's
 * cast_smem_ptr_to_uint) */
static LLVMValueRef
smem_u32(Cg *g, LLVMValueRef p)
{
	return LLVMBuildPtrToInt(g->b, p, g->i32, "");
}

enum { ROW_CP_ASYNC = 13, ROW_CP_COMMIT, ROW_CP_WAIT0, ROW_LDSM = 18, ROW_LDSM_T };

void
asm_cp_async(Cg *g, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef src_size)
{
	if (g->host) {
		LLVMValueRef a[3] = {dst, src, src_size};
		asm_host_call(g, "precc_emu_cp_async", g->vd, a, 3);
		return;
	}
	LLVMValueRef a[3] = {smem_u32(g, dst), src, src_size};
	call_volatile(g, g->vd, ROW_CP_ASYNC, a, 3);
}

void
asm_cp_async_commit(Cg *g)
{
	if (g->host) {
		asm_host_call(g, "precc_emu_cp_commit", g->vd, NULL, 0);
		return;
	}
	call_volatile(g, g->vd, ROW_CP_COMMIT, NULL, 0);
}

void
asm_cp_async_wait(Cg *g, int n)
{
	if (n < 0 || n > 2)
		abort();
	if (g->host) {
		LLVMValueRef a = LLVMConstInt(g->i32, (unsigned)n, 0);
		asm_host_call(g, "precc_emu_cp_wait", g->vd, &a, 1);
		return;
	}
	call_volatile(g, g->vd, ROW_CP_WAIT0 + n, NULL, 0);
}

void
asm_ldmatrix_x4(Cg *g, int trans, LLVMValueRef row, LLVMValueRef d[4])
{
	if (g->host) {
		/* the four registers come back through a stack buffer */
		LLVMTypeRef at = LLVMArrayType2(g->i32, 4);
		LLVMValueRef buf = entry_alloca(g, at, "ldsm");
		LLVMValueRef a[3] = {LLVMConstInt(g->i32, (unsigned)trans, 0), row, buf};
		asm_host_call(g, "precc_emu_ldmatrix", g->vd, a, 3);
		for (int i = 0; i < 4; i++) {
			LLVMValueRef ix[2] = {LLVMConstInt(g->i64, 0, 0), LLVMConstInt(g->i64, (unsigned)i, 0)};
			d[i] = LLVMBuildLoad2(g->b, g->i32, LLVMBuildGEP2(g->b, at, buf, ix, 2, ""), "");
		}
		return;
	}
	LLVMTypeRef i4 = LLVMStructTypeInContext(g->ctx, (LLVMTypeRef[]){g->i32, g->i32, g->i32, g->i32},
	                                         4, 0);
	LLVMValueRef a = smem_u32(g, row);
	LLVMValueRef r = call_volatile(g, i4, trans ? ROW_LDSM_T : ROW_LDSM, &a, 1);
	for (int i = 0; i < 4; i++)
		d[i] = LLVMBuildExtractValue(g->b, r, (unsigned)i, "");
}

int
asm_has_cvt(CodegenSm sm, precc_format f)
{
	(void)sm;
	switch (f) {
	case PRECC_E4M3: case PRECC_E5M2: case PRECC_BF16: case PRECC_FP16:
		return 1;
	default:
		return 0;     /* e2m1, e3m2, e2m3, e8m0: sm_100a+ only */
	}
}
