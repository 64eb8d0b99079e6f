/*
 * ptx_sm90.c — every sm_90a instruction codegen emits: mbarrier, the
 * async-proxy fences, TMA (cp.async.bulk.tensor), wgmma and setmaxnreg,
 * each as its inline PTX on the device and, in host mode (g->host), as a
 * call to the emulator's model of it (the host ABI of docs/codegen.md,
 * "The sm_90a host ABI"). asm90_table lists the strings with their
 * constraints; docs/codegen.md prints it. Side-effecting asm is volatile
 * with a memory clobber, so LLVM neither drops nor moves it across other
 * memory accesses.
 *
 * Sources (PTX ISA 8.4, "Parallel Synchronization and Communication
 * Instructions: mbarrier", "Data Movement: cp.async.bulk.tensor",
 * "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"), and the
 * same strings in NVIDIA/cutlass 19e8990d include/cute/arch/copy_sm90_tma.hpp
 * (SM90_TMA_LOAD_2D, SM90_TMA_STORE_2D, tma_store_arrive/wait),
 * include/cutlass/arch/barrier.h (ClusterBarrier: init, arrive,
 * arrive_and_expect_tx, try_wait parity), include/cute/arch/mma_sm90_gmma.hpp
 * (warpgroup_fence_operand/arrive/commit_batch/wait, the m64nNk32 e4m3 and
 * m64nNk16 bf16 atoms with scale-d as a predicate set from a register) and
 * include/cute/arch/mma_sm90_desc.hpp (GmmaDescriptor's bit fields). The
 * transpose immediates: NVIDIA/cutlass 7107b055
 * include/cute/arch/mma_sm90_gmma.hpp:107-110 (GMMA::Major K = 0, MN = 1)
 * and 2808-2872 (MMA_64x128x16_F32BF16BF16_SS passes tnspA, tnspB after
 * the scales); its fp8 atoms are _SS_TN only (14095: both K-major), as
 * the PTX ISA allows the transpose for .f16/.bf16 alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cg.h"
#include "gemm.h"     /* asm90_bar_named */

#define MBAR_INIT "mbarrier.init.shared::cta.b64 [$0], $1;"
#define MBAR_ARRIVE "{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [$0]; }"
#define MBAR_ARRIVE_TX "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
/* one probe; the wait loop is IR around it (asm90_mbar_wait) */
#define MBAR_TRY_WAIT "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; " \
                      "selp.u32 $0, 1, 0, p; }"
#define FENCE_MBAR_INIT "fence.mbarrier_init.release.cluster;"
#define FENCE_PROXY_ASYNC "fence.proxy.async.shared::cta;"
#define TMA_LOAD_2D "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes " \
                    "[$0], [$1, {$2, $3}], [$4];"
#define TMA_STORE_2D "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];"
#define BULK_COMMIT "cp.async.bulk.commit_group;"
#define BULK_WAIT_READ0 "cp.async.bulk.wait_group.read 0;"
#define WGMMA_FENCE "wgmma.fence.sync.aligned;"
#define WGMMA_COMMIT "wgmma.commit_group.sync.aligned;"
#define WGMMA_WAIT0 "wgmma.wait_group.sync.aligned 0;"
#define WGMMA_WAIT1 "wgmma.wait_group.sync.aligned 1;"
/* PTX ISA 8.x, "Warp-level matrix store instruction: stmatrix" (sm_90);
 * CuTe's SM90_U32x4_STSM_N / SM90_U16x8_STSM_T (NVIDIA/cutlass
 * include/cute/arch/copy_sm90.hpp) carry the same strings */
#define STSM_X4 "stmatrix.sync.aligned.x4.m8n8.shared.b16 [$0], {$1, $2, $3, $4};"
#define STSM_X4_TRANS "stmatrix.sync.aligned.x4.trans.m8n8.shared.b16 [$0], {$1, $2, $3, $4};"
/* a named barrier of count threads (PTX ISA, "bar.sync"; CUTLASS's
 * NamedBarrier::sync, include/cutlass/arch/barrier.h, the same string) */
#define BAR_NAMED "bar.sync $0, $1;"
#define SETMAXNREG_INC "setmaxnreg.inc.sync.aligned.u32 232;"
#define SETMAXNREG_DEC "setmaxnreg.dec.sync.aligned.u32 40;"
/* the grouped wgrad's split (k_gemm_sm90.c: a producer with a K window):
 * 128 x 56 + 256 x 224 = 384 x 168 */
#define SETMAXNREG_INC224 "setmaxnreg.inc.sync.aligned.u32 224;"
#define SETMAXNREG_DEC56 "setmaxnreg.dec.sync.aligned.u32 56;"
/* thread-block clusters (PTX ISA 8.4, "barrier.cluster", "mapa",
 * "mbarrier.arrive" with .shared::cluster, "cp.async.bulk.tensor" with
 * .multicast::cluster; CUTLASS's cute::cluster_arrive / cluster_wait
 * (include/cute/arch/cluster_sm90.hpp), ClusterBarrier::arrive(cta_id,
 * pred) (include/cutlass/arch/barrier.h: mapa, then the remote arrive)
 * and SM90_TMA_LOAD_MULTICAST_2D (copy_sm90_tma.hpp: the 16-bit ctaMask
 * as an "h" operand)) */
#define CLUSTER_ARRIVE "barrier.cluster.arrive.release.aligned;"
#define CLUSTER_WAIT "barrier.cluster.wait.acquire.aligned;"
#define MBAR_ARRIVE_CLUSTER "{ .reg .b32 ra; mapa.shared::cluster.u32 ra, $0, $1; " \
                            "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra]; }"
#define TMA_LOAD_2D_MC "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" \
                       ".multicast::cluster [$0], [$1, {$2, $3}], [$4], $5;"

const AsmEntry asm90_table[] = {
	{"mbarrier", MBAR_INIT, "r,r,~{memory}", "sm_90"},
	{"mbarrier", MBAR_ARRIVE, "r,~{memory}", "sm_90"},
	{"mbarrier", MBAR_ARRIVE_TX, "r,r,~{memory}", "sm_90"},
	{"mbarrier", MBAR_TRY_WAIT, "=r,r,r,~{memory}", "sm_90"},
	{"fence", FENCE_MBAR_INIT, "~{memory}", "sm_90"},
	{"fence", FENCE_PROXY_ASYNC, "~{memory}", "sm_90"},
	{"tma", TMA_LOAD_2D, "r,l,r,r,r,~{memory}", "sm_90"},
	{"tma", TMA_STORE_2D, "l,r,r,r,~{memory}", "sm_90"},
	{"tma", BULK_COMMIT, "~{memory}", "sm_90"},
	{"tma", BULK_WAIT_READ0, "~{memory}", "sm_90"},
	{"stmatrix", STSM_X4, "r,r,r,r,r,~{memory}", "sm_90"},
	{"stmatrix", STSM_X4_TRANS, "r,r,r,r,r,~{memory}", "sm_90"},
	{"barrier", BAR_NAMED, "r,r,~{memory}", "sm_90"},
	{"wgmma", WGMMA_FENCE, "~{memory}", "sm_90a"},
	{"wgmma", WGMMA_COMMIT, "~{memory}", "sm_90a"},
	{"wgmma", WGMMA_WAIT0, "~{memory}", "sm_90a"},
	{"wgmma", WGMMA_WAIT1, "~{memory}", "sm_90a"},
	/* asm90_wgmma builds the string for its n; these are the n = 128 rows */
	{"wgmma", "{ .reg .pred p; setp.ne.b32 p, $66, 0; wgmma.mma_async.sync.aligned.m64n128k32"
	          ".f32.e4m3.e4m3 {$0, .., $63}, $64, $65, p, 1, 1; }",
	 "=f x64,l,l,r,0..63 (tied)", "sm_90a"},
	{"wgmma", "{ .reg .pred p; setp.ne.b32 p, $66, 0; wgmma.mma_async.sync.aligned.m64n128k16"
	          ".f32.bf16.bf16 {$0, .., $63}, $64, $65, p, 1, 1, tA, tB; }",
	 "=f x64,l,l,r,0..63 (tied); tA, tB: 0 K-major, 1 MN-major", "sm_90a"},
	{"setmaxnreg", SETMAXNREG_INC, "~{memory}", "sm_90a"},
	{"setmaxnreg", SETMAXNREG_DEC, "~{memory}", "sm_90a"},
	{"setmaxnreg", SETMAXNREG_INC224, "~{memory}", "sm_90a"},
	{"setmaxnreg", SETMAXNREG_DEC56, "~{memory}", "sm_90a"},
	{"cluster", CLUSTER_ARRIVE, "~{memory}", "sm_90"},
	{"cluster", CLUSTER_WAIT, "~{memory}", "sm_90"},
	{"cluster", MBAR_ARRIVE_CLUSTER, "r,r,~{memory}", "sm_90"},
	{"cluster", TMA_LOAD_2D_MC, "r,l,r,r,r,h,~{memory}", "sm_90"},
};
const int asm90_table_len = sizeof asm90_table / sizeof asm90_table[0];

/* a volatile asm with a memory clobber */
static LLVMValueRef
asm_volatile(Cg *g, LLVMTypeRef rt, const char *s, const char *cons, LLVMValueRef *args, int n)
{
	LLVMTypeRef at[8];

	for (int i = 0; i < n; i++)
		at[i] = LLVMTypeOf(args[i]);
	LLVMTypeRef ft = LLVMFunctionType(rt, at, (unsigned)n, 0);
	LLVMValueRef fn = LLVMGetInlineAsm(ft, s, strlen(s), cons, strlen(cons), 1, 0,
	                                   LLVMInlineAsmDialectATT, 0);
	return LLVMBuildCall2(g->b, ft, fn, args, (unsigned)n, "");
}

/* the 32-bit shared-window address of a shared pointer */
static LLVMValueRef
saddr(Cg *g, LLVMValueRef p)
{
	return LLVMBuildPtrToInt(g->b, p, g->i32, "");
}

static LLVMValueRef
u32(Cg *g, unsigned v)
{
	return LLVMConstInt(g->i32, v, 0);
}

void
asm90_mbar_init(Cg *g, LLVMValueRef bar, unsigned count)
{
	if (g->host) {
		asm_host_call(g, "precc_emu_mbar_init", g->vd, (LLVMValueRef[]){bar, u32(g, count)}, 2);
		return;
	}
	asm_volatile(g, g->vd, MBAR_INIT, "r,r,~{memory}", (LLVMValueRef[]){saddr(g, bar), u32(g, count)}, 2);
}

void
asm90_fence_mbar_init(Cg *g)
{
	if (g->host)
		asm_host_call(g, "precc_emu_fence_mbar_init", g->vd, NULL, 0);
	else
		asm_volatile(g, g->vd, FENCE_MBAR_INIT, "~{memory}", NULL, 0);
}

void
asm90_fence_proxy_async(Cg *g)
{
	if (g->host)
		asm_host_call(g, "precc_emu_fence_proxy_async", g->vd, NULL, 0);
	else
		asm_volatile(g, g->vd, FENCE_PROXY_ASYNC, "~{memory}", NULL, 0);
}

void
asm90_mbar_arrive(Cg *g, LLVMValueRef bar)
{
	if (g->host)
		asm_host_call(g, "precc_emu_mbar_arrive", g->vd, &bar, 1);
	else {
		LLVMValueRef a = saddr(g, bar);
		asm_volatile(g, g->vd, MBAR_ARRIVE, "r,~{memory}", &a, 1);
	}
}

/* bar.warp.sync -1: the warp's lanes meet, and each one's memory
 * accesses before it are ordered before every lane's after it (PTX ISA,
 * "bar.warp.sync": "guarantees memory ordering among threads
 * participating in barrier"; CUDA's __syncwarp). A stage read by every
 * lane and freed by lane 0's arrival needs it between. */
void
asm90_warp_sync(Cg *g)
{
	if (g->host)
		asm_host_call(g, "precc_emu_warp_sync", g->vd, NULL, 0);
	else
		asm_volatile(g, g->vd, "bar.warp.sync -1;", "~{memory}", NULL, 0);
}

void
asm90_mbar_arrive_expect_tx(Cg *g, LLVMValueRef bar, unsigned bytes)
{
	if (g->host) {
		asm_host_call(g, "precc_emu_mbar_arrive_expect_tx", g->vd, (LLVMValueRef[]){bar, u32(g, bytes)}, 2);
		return;
	}
	asm_volatile(g, g->vd, MBAR_ARRIVE_TX, "r,r,~{memory}",
	             (LLVMValueRef[]){saddr(g, bar), u32(g, bytes)}, 2);
}

/* Wait until the phase of bar with parity `parity` (i32, 0 or 1) has
 * completed: a loop around one try_wait (which itself suspends for a
 * while on the device). */
void
asm90_mbar_wait(Cg *g, LLVMValueRef bar, LLVMValueRef parity)
{
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mbar.wait");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "mbar.done");
	LLVMValueRef ok;

	LLVMBuildBr(g->b, head);
	LLVMPositionBuilderAtEnd(g->b, head);
	if (g->host)
		ok = asm_host_call(g, "precc_emu_mbar_try_wait", g->i32, (LLVMValueRef[]){bar, parity}, 2);
	else
		ok = asm_volatile(g, g->i32, MBAR_TRY_WAIT, "=r,r,r,~{memory}",
		                  (LLVMValueRef[]){saddr(g, bar), parity}, 2);
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, ok, u32(g, 0), ""), done, head);
	LLVMPositionBuilderAtEnd(g->b, done);
}

/* the generic address of the tensor-map param (cvta.param of a
 * grid_constant byval param) */
static LLVMValueRef
tmap_addr(Cg *g, LLVMValueRef tmap)
{
	return LLVMBuildPtrToInt(g->b, tmap, g->i64, "");
}

void
asm90_tma_load_2d(Cg *g, LLVMValueRef dst, LLVMValueRef tmap, LLVMValueRef c0, LLVMValueRef c1,
                  LLVMValueRef bar)
{
	if (g->host) {
		asm_host_call(g, "precc_emu_tma_load_2d", g->vd, (LLVMValueRef[]){dst, tmap, c0, c1, bar}, 5);
		return;
	}
	asm_volatile(g, g->vd, TMA_LOAD_2D, "r,l,r,r,r,~{memory}",
	             (LLVMValueRef[]){saddr(g, dst), tmap_addr(g, tmap), c0, c1, saddr(g, bar)}, 5);
}

/* the same box into the shared memory of each CTA of the cluster whose
 * rank is set in mask (i16), each completing on its barrier at bar's
 * offset */
void
asm90_tma_load_2d_mc(Cg *g, LLVMValueRef dst, LLVMValueRef tmap, LLVMValueRef c0, LLVMValueRef c1,
                     LLVMValueRef bar, unsigned mask)
{
	if (g->host) {
		asm_host_call(g, "precc_emu_tma_load_2d_mc", g->vd,
		              (LLVMValueRef[]){dst, tmap, c0, c1, bar, u32(g, mask)}, 6);
		return;
	}
	asm_volatile(g, g->vd, TMA_LOAD_2D_MC, "r,l,r,r,r,h,~{memory}",
	             (LLVMValueRef[]){saddr(g, dst), tmap_addr(g, tmap), c0, c1, saddr(g, bar),
	                              LLVMConstInt(LLVMInt16TypeInContext(g->ctx), mask, 0)}, 6);
}

/* barrier.cluster.arrive.release + wait.acquire: every thread of the
 * cluster; site numbers the call in host mode (synccheck) */
void
asm90_cluster_sync(Cg *g)
{
	if (g->host) {
		LLVMValueRef fn = LLVMGetNamedFunction(g->mod, "precc_emu_cluster_arrive");
		unsigned site = 1;
		for (LLVMUseRef u = fn ? LLVMGetFirstUse(fn) : NULL; u; u = LLVMGetNextUse(u))
			site++;
		asm_host_call(g, "precc_emu_cluster_arrive", g->vd, (LLVMValueRef[]){u32(g, site)}, 1);
		asm_host_call(g, "precc_emu_cluster_wait", g->vd, NULL, 0);
		return;
	}
	asm_volatile(g, g->vd, CLUSTER_ARRIVE, "~{memory}", NULL, 0);
	asm_volatile(g, g->vd, CLUSTER_WAIT, "~{memory}", NULL, 0);
}

/* mbarrier.arrive.release.cluster on the barrier at bar's offset in the
 * CTA of rank `rank` (i32) of the cluster (this one's included) */
void
asm90_mbar_arrive_cluster(Cg *g, LLVMValueRef bar, LLVMValueRef rank)
{
	if (g->host) {
		LLVMValueRef peer = asm_host_call(g, "precc_emu_mapa", LLVMTypeOf(bar),
		                                  (LLVMValueRef[]){bar, rank}, 2);
		asm_host_call(g, "precc_emu_mbar_arrive_cluster", g->vd, &peer, 1);
		return;
	}
	asm_volatile(g, g->vd, MBAR_ARRIVE_CLUSTER, "r,r,~{memory}", (LLVMValueRef[]){saddr(g, bar), rank}, 2);
}

void
asm90_tma_store_2d(Cg *g, LLVMValueRef tmap, LLVMValueRef c0, LLVMValueRef c1, LLVMValueRef src)
{
	if (g->host) {
		asm_host_call(g, "precc_emu_tma_store_2d", g->vd, (LLVMValueRef[]){tmap, c0, c1, src}, 4);
		return;
	}
	asm_volatile(g, g->vd, TMA_STORE_2D, "l,r,r,r,~{memory}",
	             (LLVMValueRef[]){tmap_addr(g, tmap), c0, c1, saddr(g, src)}, 4);
}

void
asm90_bulk_commit(Cg *g)
{
	if (g->host)
		asm_host_call(g, "precc_emu_bulk_commit", g->vd, NULL, 0);
	else
		asm_volatile(g, g->vd, BULK_COMMIT, "~{memory}", NULL, 0);
}

void
asm90_bulk_wait_read0(Cg *g)
{
	if (g->host)
		asm_host_call(g, "precc_emu_bulk_wait_read", g->vd, (LLVMValueRef[]){u32(g, 0)}, 1);
	else
		asm_volatile(g, g->vd, BULK_WAIT_READ0, "~{memory}", NULL, 0);
}

/* stmatrix x4 (.trans): the warp's four 8 x 8 b16 matrices, register i
 * of each lane matrix i's fragment, to the rows whose addresses lanes
 * 8i..8i+7 give in row (a shared pointer) */
void
asm90_stmatrix_x4(Cg *g, int trans, LLVMValueRef row, LLVMValueRef r[4])
{
	if (g->host) {
		LLVMValueRef a[6] = {u32(g, (unsigned)(trans != 0)), row, r[0], r[1], r[2], r[3]};
		asm_host_call(g, "precc_emu_stmatrix", g->vd, a, 6);
		return;
	}
	asm_volatile(g, g->vd, trans ? STSM_X4_TRANS : STSM_X4, "r,r,r,r,r,~{memory}",
	             (LLVMValueRef[]){saddr(g, row), r[0], r[1], r[2], r[3]}, 5);
}

/* bar.sync id, count: the count threads (whole warps) that name barrier
 * id (an i32, 1..15; 0 is __syncthreads') meet there; the emulator
 * models count 128, one warpgroup */
void
asm90_bar_named(Cg *g, LLVMValueRef id, unsigned count)
{
	if (count == 0 || count % 32)
		abort();
	if (g->host) {
		asm_host_call(g, "precc_emu_bar_named", g->vd, (LLVMValueRef[]){id, u32(g, count)}, 2);
		return;
	}
	asm_volatile(g, g->vd, BAR_NAMED, "r,r,~{memory}", (LLVMValueRef[]){id, u32(g, count)}, 2);
}

void
asm90_wgmma_fence(Cg *g)
{
	if (g->host)
		asm_host_call(g, "precc_emu_wgmma_fence", g->vd, NULL, 0);
	else
		asm_volatile(g, g->vd, WGMMA_FENCE, "~{memory}", NULL, 0);
}

void
asm90_wgmma_commit(Cg *g)
{
	if (g->host)
		asm_host_call(g, "precc_emu_wgmma_commit", g->vd, NULL, 0);
	else
		asm_volatile(g, g->vd, WGMMA_COMMIT, "~{memory}", NULL, 0);
}

void
asm90_wgmma_wait(Cg *g, int n)
{
	if (n < 0 || n > 1)
		abort();
	if (g->host)
		asm_host_call(g, "precc_emu_wgmma_wait", g->vd, (LLVMValueRef[]){u32(g, (unsigned)n)}, 1);
	else
		asm_volatile(g, g->vd, n ? WGMMA_WAIT1 : WGMMA_WAIT0, "~{memory}", NULL, 0);
}

void
asm90_setmaxnreg(Cg *g, int inc, int regs)
{
	if (regs % 8 || regs < 24 || regs > 256 || (inc ? regs != 232 && regs != 224 : regs != 40 && regs != 56))
		abort();     /* the table's rows */
	if (g->host) {
		asm_host_call(g, "precc_emu_setmaxnreg", g->vd,
		          (LLVMValueRef[]){u32(g, (unsigned)inc), u32(g, (unsigned)regs)}, 2);
		return;
	}
	asm_volatile(g, g->vd, inc ? (regs == 232 ? SETMAXNREG_INC : SETMAXNREG_INC224)
	                               : (regs == 40 ? SETMAXNREG_DEC : SETMAXNREG_DEC56), "~{memory}", NULL, 0);
}

/* The wgmma operand formats: "e4m3"/"e5m2" (k32), "bf16"/"f16" (k16),
 * NULL for none. */
static const char *
wgmma_type(precc_format f)
{
	switch (f) {
	case PRECC_E4M3: return "e4m3";
	case PRECC_E5M2: return "e5m2";
	case PRECC_BF16: return "bf16";
	case PRECC_FP16: return "f16";
	default: return NULL;
	}
}

int
asm90_wgmma_ok(precc_format fa, precc_format fb)
{
	const char *a = wgmma_type(fa), *b = wgmma_type(fb);
	if (!a || !b)
		return 0;
	int f8a = a[0] == 'e', f8b = b[0] == 'e';
	return f8a && f8b ? 1 : !f8a && !f8b && fa == fb;
}

/* d (n/2 f32) = A . B + (scale_d != 0 ? d : 0), A and B from the shared
 * memory descriptors desc_a, desc_b (i64); scale_d an i32. m64nNk32 for
 * e4m3/e5m2 in any mix (K-major both), m64nNk16 for bf16 x bf16 and f16 x
 * f16, each operand K-major or MN-major by its bit of trans (the
 * instruction's imm-trans-a, imm-trans-b); n a multiple of 8 up to 256. */
void
asm90_wgmma(Cg *g, precc_format fa, precc_format fb, int n, LLVMValueRef desc_a,
            LLVMValueRef desc_b, LLVMValueRef *d, LLVMValueRef scale_d, int trans)
{
	int nr = n / 2, f8 = fa == PRECC_E4M3 || fa == PRECC_E5M2;

	if (!asm90_wgmma_ok(fa, fb) || n % 8 || n < 8 || n > 256 || trans < 0 || trans > 3 || (f8 && trans))
		abort();
	if (g->host) {
		/* the accumulators go through an entry-block buffer */
		LLVMTypeRef at = LLVMArrayType2(g->f32, (unsigned)nr);
		LLVMBasicBlockRef cur = LLVMGetInsertBlock(g->b);
		LLVMValueRef first = LLVMGetFirstInstruction(LLVMGetEntryBasicBlock(g->fn));
		if (first)
			LLVMPositionBuilderBefore(g->b, first);
		else
			LLVMPositionBuilderAtEnd(g->b, LLVMGetEntryBasicBlock(g->fn));
		LLVMValueRef buf = LLVMBuildAlloca(g->b, at, "wgmma");
		LLVMPositionBuilderAtEnd(g->b, cur);
		for (int i = 0; i < nr; i++) {
			LLVMValueRef ix[2] = {LLVMConstInt(g->i64, 0, 0), LLVMConstInt(g->i64, (unsigned)i, 0)};
			LLVMBuildStore(g->b, d[i], LLVMBuildGEP2(g->b, at, buf, ix, 2, ""));
		}
		LLVMValueRef a[8] = {u32(g, (unsigned)n), u32(g, (unsigned)fa), u32(g, (unsigned)fb), u32(g, (unsigned)trans),
		                     desc_a, desc_b, buf, scale_d};
		asm_host_call(g, "precc_emu_wgmma", g->vd, a, 8);
		for (int i = 0; i < nr; i++) {
			LLVMValueRef ix[2] = {LLVMConstInt(g->i64, 0, 0), LLVMConstInt(g->i64, (unsigned)i, 0)};
			d[i] = LLVMBuildLoad2(g->b, g->f32, LLVMBuildGEP2(g->b, at, buf, ix, 2, ""), "");
		}
		return;
	}
	char s[2048], cons[1024];
	int o = snprintf(s, sizeof s, "{ .reg .pred p; setp.ne.b32 p, $%d, 0; "
	                 "wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s {", nr + 2, n, f8 ? 32 : 16,
	                 wgmma_type(fa), wgmma_type(fb));
	for (int i = 0; i < nr; i++)
		o += snprintf(s + o, sizeof s - (size_t)o, "%s$%d", i ? ", " : "", i);
	if (f8)
		snprintf(s + o, sizeof s - (size_t)o, "}, $%d, $%d, p, 1, 1; }", nr, nr + 1);
	else
		snprintf(s + o, sizeof s - (size_t)o, "}, $%d, $%d, p, 1, 1, %d, %d; }", nr, nr + 1, trans & 1,
		         trans >> 1 & 1);
	o = 0;
	for (int i = 0; i < nr; i++)
		o += snprintf(cons + o, sizeof cons - (size_t)o, "=f,");
	o += snprintf(cons + o, sizeof cons - (size_t)o, "l,l,r");
	for (int i = 0; i < nr; i++)
		o += snprintf(cons + o, sizeof cons - (size_t)o, ",%d", i);
	LLVMTypeRef ft[128], at[3 + 128];
	LLVMValueRef args[3 + 128];
	for (int i = 0; i < nr; i++)
		ft[i] = g->f32;
	LLVMTypeRef st = LLVMStructTypeInContext(g->ctx, ft, (unsigned)nr, 0);
	args[0] = desc_a, args[1] = desc_b, args[2] = scale_d;
	for (int i = 0; i < nr; i++)
		args[3 + i] = d[i];
	for (int i = 0; i < 3 + nr; i++)
		at[i] = LLVMTypeOf(args[i]);
	LLVMTypeRef fty = LLVMFunctionType(st, at, (unsigned)(3 + nr), 0);
	/* volatile: it reads shared memory the asm does not name */
	LLVMValueRef fn = LLVMGetInlineAsm(fty, s, strlen(s), cons, strlen(cons), 1, 0,
	                                   LLVMInlineAsmDialectATT, 0);
	LLVMValueRef r = LLVMBuildCall2(g->b, fty, fn, args, (unsigned)(3 + nr), "");
	for (int i = 0; i < nr; i++)
		d[i] = LLVMBuildExtractValue(g->b, r, (unsigned)i, "");
}

/* The 64-bit shared memory matrix descriptor of a K-major operand tile at
 * shared pointer p (PTX ISA 8.4, "Matrix Descriptor Format"; CuTe's
 * GmmaDescriptor, NVIDIA/cutlass 19e8990d
 * include/cute/arch/mma_sm90_desc.hpp:104-130): bits 0-13 start address
 * >> 4, 16-29 leading-dimension byte offset >> 4 (unused by the swizzled
 * K-major layouts; 1 as CuTe sets it), 32-45 stride byte offset >> 4 (8
 * rows of 128 bytes: 1024), 49-51 base offset (0: tiles are 1024-byte
 * aligned), 62-63 the layout (1: 128-byte swizzle). The start address is
 * the low 18 bits of the shared address: on the host, of the emulator's
 * pointer, which must keep each CTA's shared memory 256 KiB aligned. */
LLVMValueRef
asm90_desc_k128(Cg *g, LLVMValueRef p)
{
	LLVMValueRef a = LLVMBuildPtrToInt(g->b, p, g->i64, "");
	LLVMValueRef start = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, a, LLVMConstInt(g->i64, 4, 0), ""),
	                                  LLVMConstInt(g->i64, 0x3fff, 0), "");
	uint64_t hi = (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
	return LLVMBuildOr(g->b, start, LLVMConstInt(g->i64, hi, 0), "");
}

/* The descriptor of an MN-major 16-bit tile with the 128-byte swizzle at
 * p: CuTe's canonical ((8,n),(8,k)):((1,LBO),(8,SBO)) in 16-byte units
 * under Swizzle<3,4,3> (NVIDIA/cutlass 7107b055
 * include/cute/atom/mma_traits_sm90_gmma.hpp:160-167, and make_gmma_desc
 * at 227-259: for B128, LBO = the stride of the n mode, the next 64 MN
 * elements; SBO = the stride of the k mode, the next 8 K rows). A K row
 * is 128 bytes of 64 MN elements (Layout_MN_SW128_Atom, line 78), so SBO
 * is 8 x 128 = 1024; lbo is where the tile puts its next 64 MN elements.
 * Start address, base offset and layout bits as asm90_desc_k128. */
LLVMValueRef
asm90_desc_mn128(Cg *g, LLVMValueRef p, unsigned lbo)
{
	LLVMValueRef a = LLVMBuildPtrToInt(g->b, p, g->i64, "");
	LLVMValueRef start = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, a, LLVMConstInt(g->i64, 4, 0), ""),
	                                  LLVMConstInt(g->i64, 0x3fff, 0), "");
	if (lbo % 16 || lbo >> 4 > 0x3fff)
		abort();
	uint64_t hi = ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
	return LLVMBuildOr(g->b, start, LLVMConstInt(g->i64, hi, 0), "");
}
