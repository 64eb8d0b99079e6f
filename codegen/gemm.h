/*
 * gemm.h — what the two GEMM families share (codegen/ only): the plan of
 * a GEMM kernel (gemm_plan, k_gemm.c: its operands, scales, promotion
 * interval and epilogue) and the epilogue's pieces, so that the mma.sync
 * family (k_gemm.c) and the wgmma family (k_gemm_sm90.c) read a kernel
 * and round its epilogue the same way.
 */
#ifndef PRECC_GEMM_H
#define PRECC_GEMM_H

#include "emit.h"

typedef struct GOp {
	int v;                /* the param holding the operand */
	int tr;               /* the operand is transpose(v): v is [K, rows] */
	precc_format fmt;     /* v's storage format */
	int up;               /* e2m1 codes widened to bf16 on the way to smem */
	int mnmaj;            /* a 16-bit transpose whose R is static and a multiple of
	                         8: the tile stays MN-major in shared memory (16-byte
	                         cp.async along R) and ldmatrix.trans transposes */
	int narrow;           /* rows not 16-byte aligned (K * bytes % 16): element
	                         loads, each predicated on k < K (a router's K = 60) */
	int kwin;             /* group=k, K-major with a scale per expert ({*xg}): an expert's
	                         tokens start and end anywhere (k_gemm.c's load_tile:
	                         cp.async of the window's bytes where its start is
	                         16-byte aligned, else element loads) */
	int s, g;             /* block scale_inv, global scale_inv values, -1 */
	long rows;            /* M or N */
} GOp;

/* The CTA's tile of C and how its warps split it (k_gemm.c): schedule's
 * tile= picks one. Each warp computes mi x ni mma tiles of 16 x 8. */
typedef struct GTile {
	int bm, bn;           /* the CTA's tile of C (bm == bn: one stage size) */
	int wn;               /* warps along N (threads / 32 / wn along M) */
	int mi, ni;           /* mma tiles per warp along M, N */
	int threads;
	int red_in_stage;     /* the epilogue's amax partials reuse stage memory
	                         (the stages fill 48 KiB, all static shared) */
} GTile;

enum { GEMM_MI_MAX = 4, GEMM_NI_MAX = 4 };

/* the mma.sync family's tiles: 64 x 64 (2 x 2 warps of 32 x 32) and
 * 128 x 128 (2 x 4 warps of 64 x 32) */
extern const GTile gemm_tile_small, gemm_tile_large;

typedef struct G {
	GTile t;              /* the CTA tile, from the kernel's tile= */
	GOp op[2];
	long K;
	int e;                /* elements per 32-bit fragment register: 4, 2 */
	int row;              /* asm_table row of the mma */
	long bke;             /* K elements per tile */
	long P;               /* promotion interval; 0: once, after all of K */
	int bias, cast;       /* Ins indices, -1 */
	int bias_src;         /* the bias param (under its pad, if any) */
	int amax, amax_arg;   /* output amax Ins and the value it reads, -1 */
	int amax_block;       /* that amax is per block ({1xB}, {BxB}), not tensorwise */
	long slice;           /* columns kept by a slice of the result, 0 */
	int acc_old;          /* accumulate: the f32 param added in (main_grad), -1 */
	int out;              /* the result value */
	int grouped;          /* gemm_grouped (k_gemm_grouped.c) */
	int group_k;          /* its group=k (else group=m) */
	int offs;             /* its %offs param (i32[G]), -1 */
	int bkstack;          /* group=m with B[N, G*K]: the experts stacked along K (dgrad) */
	long n;               /* columns of the result: N */
} G;

/* Where one CTA tile lies (i64 values): the tile of C from row row0 and
 * column col0; A's rows and C's rows at or past mend are predicated off
 * (M, or the expert's end); B's rows for C's columns 0.. start at brow0
 * (0, or the expert's g·N) and end at bend. zero (i1, or NULL): the tile
 * is rows of no expert, stored as zeros, no K loop. kbase, klen (or
 * NULL: 0 and K): the K elements summed, an expert's tokens (group=k);
 * crow0 (or NULL: 0): C's row of A's row 0 (group=k: the expert's g·N).
 * bkbase (or NULL: kbase): B's K element of A's kbase, its data and
 * scales (group=m with B[N, G*K]: the expert's g·K). */
typedef struct GPos {
	LLVMValueRef row0, col0, mend, brow0, bend, zero;
	LLVMValueRef kbase, klen, crow0, bkbase;
} GPos;

/* k_gemm.c */
int gemm_ebytes(precc_format f);
/* the accumulator arrays (allocas of the entry block): inner, and outer
 * where the GEMM promotes inside its K loop (else NULL) */
void gemm_accumulators(E *e, const G *g, LLVMValueRef *inner, LLVMValueRef *outer);
/* one CTA tile at p: the K loop (the cp.async pipeline, ldmatrix, mma.sync,
 * promotions) and the epilogue; the mma.sync family's mainloop, for
 * emit_gemm's one tile per CTA and k_gemm_grouped.c's tile loop */
int gemm_tile(E *e, const G *g, const GPos *p, LLVMValueRef inner, LLVMValueRef outer);
/* Recognise the GEMM kernel and fill g; an error names what does not fit. */
int gemm_plan(Kern *k, G *g);
/* a * b, a + b rounded on their own (mul.rn / add.rn: never an FMA) */
LLVMValueRef fmul_rn(E *e, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef fadd_rn(E *e, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ffma_rn(E *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);   /* a · b + c, one rounding */
/* the decoded scale_inv of operand op at row i (in range) and K chunk kstart */
LLVMValueRef scale_at(E *e, const GOp *op, LLVMValueRef i, LLVMValueRef kstart);
/* each operand has one scale_inv over the tile or none: {*x*}, a group's
 * ({gx*}, {*xg}), or in a grouped GEMM the expert's weight scale ({N x *},
 * {* x K} over B[N, G*K]) */
int gemm_tensorwise(const E *e, const G *g);
/* a tensorwise GEMM's sa · sb as s · p · p (p = 1, or 2^±64 where
 * fl(sa · sb) overflows or is subnormal): fl(fl(fl(inner · s) · p) · p) */
void tensor_scale(E *e, LLVMValueRef sa, LLVMValueRef sb, LLVMValueRef *s, LLVMValueRef *p);
/* gemm_grouped's offsets at expert gi (i64), clamped to [lo, M]
 * (k_gemm_grouped.c; the wgmma grouped family reads them the same way) */
LLVMValueRef gemm_offs_at(E *e, const G *g, LLVMValueRef gi, LLVMValueRef lo, LLVMValueRef M);
/* the bias at result column col (i64, any: +0 past the bias), NULL on error */
LLVMValueRef epi_bias(E *e, const G *g, LLVMValueRef col);
/* y, or fl(main_grad[off] + y) when the GEMM accumulates */
LLVMValueRef epi_accumulate(E *e, const G *g, LLVMValueRef off, LLVMValueRef y);

/* ptx_sm90.c: bar.sync id, count (id an i32 value, 1..15; count threads,
 * whole warps), for the wgmma family's per-warpgroup epilogue */
void asm90_bar_named(Cg *g, LLVMValueRef id, unsigned count);

#endif
