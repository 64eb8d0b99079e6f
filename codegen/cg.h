/*
 * cg.h — codegen's internal map: the builder state every codegen file
 * shares, then the functions each file exports (codegen/ only; the public
 * interface is codegen.h).
 */
#ifndef PRECC_CG_H
#define PRECC_CG_H

#include <stdint.h>
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include "codegen.h"

typedef struct Cg {
	LLVMContextRef ctx;
	LLVMModuleRef mod;
	LLVMBuilderRef b;
	LLVMValueRef fn;
	CodegenSm sm;
	int host;     /* emulation on the host CPU (tests): NVVM intrinsics and
	                 inline PTX become calls to precc_emu_* functions */
	LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, vd, gptr, sptr;
} Cg;

/* ---- target.c: NVPTX target machine, O3, verify, emit ------------------ */
void cg_init(Cg *, CodegenSm, const char *modname);
void cg_dispose(Cg *);
/* Switch g to host emulation: address space 0 everywhere, C calling
 * convention; call right after cg_init. */
void cg_set_host(Cg *);
/* Verify, run default<O3>, emit PTX (ptx=1) or LLVM IR text (ptx=0) into a
 * malloc'ed string. -1 with err on failure. */
int cg_finish(Cg *, int ptx, char **out, char *err, size_t errsz);
/* !nvvm.annotations: maxntidx, and maxnreg unless 0 (launch bounds for
 * ptxas). */
void cg_annotate_threads(Cg *, LLVMValueRef fn, int threads, int maxnreg);
/* !nvvm.annotations minctasm (.minnctapersm) */
void cg_annotate_minctas(Cg *, LLVMValueRef fn, int ctas);
/* params first..first+n-1 (0-based) of fn: byval([bytes x i8]) align
 * `align`, and one grid_constant annotation listing them (1-based, as
 * LLVM 19's NVPTXUtilities isParamGridConstant reads them): PTX
 * `.param .align 64 .b8 NAME[128]`, its address taken with cvta.param
 * instead of a local copy */
void cg_byval_grid_constant(Cg *, LLVMValueRef fn, int first, int n, int bytes, int align);

/* ---- ptx_asm.c: every inline PTX string, one place per family ---------- */
/* cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32: two floats -> i16, lo in the low
 * byte. */
LLVMValueRef asm_cvt_f8x2(Cg *, precc_format, LLVMValueRef lo, LLVMValueRef hi);
/* cvt.rn.f16x2.{e4m3x2,e5m2x2}: i16 of two codes -> i32 of two f16. */
LLVMValueRef asm_cvt_f16x2_from_f8x2(Cg *, precc_format, LLVMValueRef codes);
/* cvt.rn.{bf16x2,f16x2}.f32: two floats -> i32, lo in the low half. */
LLVMValueRef asm_cvt_16x2(Cg *, precc_format, LLVMValueRef lo, LLVMValueRef hi);
/* Whether target sm has a hardware cvt for fmt (e2m1x2, ue8m0x2: sm_100a
 * and later; never one of ours, so those go through swcvt.c). */
int asm_has_cvt(CodegenSm, precc_format);
/* fence.acq_rel.gpu (a memory clobber), for the grid-wide barrier. */
void asm_fence_gpu(Cg *);
LLVMValueRef asm_opaque_ptr(Cg *, LLVMValueRef p);
LLVMValueRef asm_opaque_u64(Cg *, LLVMValueRef v);
LLVMValueRef asm_prmt(Cg *, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);   /* prmt.b32, default mode */
/* mma.sync.aligned m16n8k32 (e4m3/e5m2 mixes) or m16n8k16 (bf16, f16),
 * f32 accumulate: asm_mma_row picks the asm_table row (-1: no such MMA),
 * asm_mma emits it: a 4 x i32, b 2 x i32, c and d 4 x f32 per lane. */
int asm_mma_row(precc_format fa, precc_format fb);
void asm_mma(Cg *, int row, LLVMValueRef a[4], LLVMValueRef b[2], LLVMValueRef c[4],
             LLVMValueRef d[4]);
/* cp.async.cg.shared.global 16 bytes from src (global) to dst (shared,
 * 16-byte aligned), the bytes past src_size (i32, 0..16) zero; commit_group;
 * wait_group n (n = 0..2): all but the n most recent groups complete. */
/* host mode: a call of the emulator's precc_emu_NAME(args), at most 8 */
LLVMValueRef asm_host_call(Cg *, const char *name, LLVMTypeRef rt, LLVMValueRef *args, int n);
void asm_cp_async(Cg *, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef src_size);
void asm_cp_async_commit(Cg *);
void asm_cp_async_wait(Cg *, int n);
/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: this lane's row
 * address (shared, 16-byte aligned; lanes 8i..8i+7 give matrix i's 8
 * rows) -> d[i], matrix i's fragment: row lane/4, bytes 4(lane%4)..+3
 * (.trans: b16 column lane/4 of rows 2(lane%4), +1). */
void asm_ldmatrix_x4(Cg *, int trans, LLVMValueRef row, LLVMValueRef d[4]);
typedef struct AsmEntry {
	const char *family, *ptx, *constraints, *min_target;
} AsmEntry;
extern const AsmEntry asm_table[];
extern const int asm_table_len;

/* ---- ptx_sm90.c: the sm_90a instructions (asm90_table) -----------------
 * Shared pointers are addrspace(3) on the device (32-bit shared addresses
 * in the asm), host pointers in host mode, where each is a call of the
 * host ABI (docs/codegen.md). */
void asm90_mbar_init(Cg *, LLVMValueRef bar, unsigned count);
void asm90_fence_mbar_init(Cg *);
void asm90_fence_proxy_async(Cg *);
void asm90_mbar_arrive(Cg *, LLVMValueRef bar);
void asm90_warp_sync(Cg *);
void asm90_mbar_arrive_expect_tx(Cg *, LLVMValueRef bar, unsigned bytes);
/* loops until the phase of parity `parity` (i32) of bar has completed */
void asm90_mbar_wait(Cg *, LLVMValueRef bar, LLVMValueRef parity);
/* TMA: box at (c0 column, c1 row) elements of tensor map tmap (the byval
 * param) into shared dst, completing its bytes on bar; store from src */
void asm90_tma_load_2d(Cg *, LLVMValueRef dst, LLVMValueRef tmap, LLVMValueRef c0, LLVMValueRef c1,
                       LLVMValueRef bar);
void asm90_tma_store_2d(Cg *, LLVMValueRef tmap, LLVMValueRef c0, LLVMValueRef c1, LLVMValueRef src);
/* clusters: TMA multicast to the CTAs of mask, barrier.cluster arrive +
 * wait, a remote arrival on the barrier at bar's offset in CTA rank */
void asm90_tma_load_2d_mc(Cg *, LLVMValueRef dst, LLVMValueRef tmap, LLVMValueRef c0,
                          LLVMValueRef c1, LLVMValueRef bar, unsigned mask);
void asm90_cluster_sync(Cg *);
void asm90_mbar_arrive_cluster(Cg *, LLVMValueRef bar, LLVMValueRef rank);
void asm90_bulk_commit(Cg *);
void asm90_bulk_wait_read0(Cg *);
void asm90_stmatrix_x4(Cg *, int trans, LLVMValueRef row, LLVMValueRef r[4]);
void asm90_wgmma_fence(Cg *);
void asm90_wgmma_commit(Cg *);
void asm90_wgmma_wait(Cg *, int n);                  /* n = 0, 1 */
void asm90_setmaxnreg(Cg *, int inc, int regs);      /* inc 232, dec 40 */
/* whether wgmma takes fa x fb: e4m3/e5m2 in any mix, bf16 x bf16, f16 x f16 */
int asm90_wgmma_ok(precc_format fa, precc_format fb);
/* d[0..n/2) = A . B + (scale_d ? d : 0) for one warpgroup, m64nNk32 (fp8)
 * or m64nNk16 (16-bit), f32 accumulate; trans bit 0: A is MN-major, bit
 * 1: B is (16-bit only: fp8 wgmma is K-major), else K-major */
void asm90_wgmma(Cg *, precc_format fa, precc_format fb, int n, LLVMValueRef desc_a,
                 LLVMValueRef desc_b, LLVMValueRef *d, LLVMValueRef scale_d, int trans);
/* the matrix descriptor (i64) of a K-major, 128-byte-swizzled tile at p */
LLVMValueRef asm90_desc_k128(Cg *, LLVMValueRef p);
/* of an MN-major one: 128-byte rows of 64 16-bit MN elements, one per K,
 * 8 K rows per 1024-byte swizzle atom, the next 64 MN lbo bytes on */
LLVMValueRef asm90_desc_mn128(Cg *, LLVMValueRef p, unsigned lbo);
extern const AsmEntry asm90_table[];
extern const int asm90_table_len;

/* ---- swcvt.c: software conversions as straight-line programs ------------
 * A program is a list of 64-bit integer operations; the same list is
 * evaluated on the host (tests compare it with precc_encode and
 * precc_mx_scales) and emitted as LLVM IR, so what runs on the GPU is the
 * algorithm the host checked. */
typedef enum SwOp {
	SW_ARG, SW_CONST, SW_ADD, SW_SUB, SW_AND, SW_OR, SW_SHL, SW_LSHR,
	SW_ULT, SW_UGT, SW_EQ, SW_UMIN, SW_UMAX, SW_SELECT, NSWOP
} SwOp;
typedef struct SwIns {
	uint8_t op, a, b, c;      /* operands: earlier instruction indices */
	uint64_t k;               /* SW_CONST value; SW_ARG index */
} SwIns;
enum { SW_MAXINS = 128 };
typedef struct SwProg {
	SwIns ins[SW_MAXINS];
	int n;
	int result;
} SwProg;
/* fp32 bits (arg 0) and SR bits (arg 1) -> code, as precc_encode(f, x,
 * round, sat, rbits) for f in e4m3 e5m2 e2m1 e3m2 e2m3 and round rne, rz
 * or sr. -1 if unsupported. */
int sw_encode(SwProg *, precc_format f, precc_round round, int sat);
/* MX scale code from |amax| bits (arg 0) and, for rceil, the bits of
 * fl(|amax| / max(elem)) (arg 1), as precc_mx_scales. */
int sw_mx_e8m0(SwProg *, precc_format elem, int mode);   /* an MxMode */
uint64_t sw_eval(const SwProg *, const uint64_t *args);
/* Emit the program on i32 args; returns the i32 result. */
LLVMValueRef sw_emit(Cg *, const SwProg *, LLVMValueRef arg0, LLVMValueRef arg1);

/* ---- emit_quant.c: Philox (the rest of the emitter is private: emit.h) -- */
/* Philox-4x32-10 rounds on i32 values, in place (tests JIT it on the host
 * against ir/interp/philox.c). */
void cg_philox(Cg *, LLVMValueRef c[4], LLVMValueRef k0, LLVMValueRef k1);
/* precc_encode_sr(e2m1, x, true, r, 16): fp32 bits x and 16 random bits r
 * (i32 each) -> the 4-bit code (tests JIT it against numerics.c). */
LLVMValueRef cg_e2m1_sr(Cg *, LLVMValueRef x, LLVMValueRef r);
/* precc_encode(e2m1, x, RNE, true, 0) from the fp32 bits x (i32). */
LLVMValueRef cg_e2m1_rne(Cg *, LLVMValueRef x);

/* ---- kernel.c / kemit.c: recognising and emitting kernels ------------- */
typedef struct Kern Kern;
int kemit(Cg *, Kern *, char *err, size_t errsz);
/* Recognise f and emit its kernel into g (no verify/O3/emission):
 * codegen_kernel_ptx's first half, used by the host emulation test. */
int cg_kernel_module(Cg *, const Func *f, const CodegenTarget *, CodegenKernel *info,
                     char *err, size_t errsz);

#endif
