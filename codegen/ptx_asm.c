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
#include <string.h>
#include "cg.h"

#define CVT_E4M3X2 "cvt.rn.satfinite.e4m3x2.f32 $0, $2, $1;"
#define CVT_E5M2X2 "cvt.rn.satfinite.e5m2x2.f32 $0, $2, $1;"
#define CVT_F16X2_E4M3X2 "cvt.rn.f16x2.e4m3x2 $0, $1;"
#define CVT_F16X2_E5M2X2 "cvt.rn.f16x2.e5m2x2 $0, $1;"
#define CVT_BF16X2_F32 "cvt.rn.bf16x2.f32 $0, $2, $1;"
#define CVT_F16X2_F32 "cvt.rn.f16x2.f32 $0, $2, $1;"
#define FENCE_GPU "fence.acq_rel.gpu;"

const AsmEntry asm_table[] = {
	{"fp8 encode", CVT_E4M3X2, "=h,f,f", "sm_89"},
	{"fp8 encode", CVT_E5M2X2, "=h,f,f", "sm_89"},
	{"fp8 decode", CVT_F16X2_E4M3X2, "=r,h", "sm_89"},
	{"fp8 decode", CVT_F16X2_E5M2X2, "=r,h", "sm_89"},
	{"16-bit encode", CVT_BF16X2_F32, "=r,f,f", "sm_80"},
	{"16-bit encode", CVT_F16X2_F32, "=r,f,f", "sm_80"},
	{"grid sync", FENCE_GPU, "~{memory}", "sm_70"},
	/* not emitted on sm_89/sm_90/sm_90a: software in swcvt.c */
	{"fp4 encode", "cvt.rn.satfinite.e2m1x2.f32 $0, $2, $1;", "=h,f,f", "sm_100a"},
	{"e8m0 encode", "cvt.rp.satfinite.ue8m0x2.f32 $0, $2, $1;", "=h,f,f", "sm_100a"},
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
