/*
 * codegen.h — the code generator's interface. Everything LLVM stays behind
 * it: nothing outside codegen/ includes llvm-c/. docs/codegen.md describes
 * the kernels, their parameters and what is verified where.
 *
 * A kernel is a Func whose ops are all non-GEMM IR ops over buffer params
 * (param, amax, scale, mx_scale, block_scale, recip, history_push,
 * history_reduce, quantize, dequantize, transpose, update, ret), or one
 * gemm with its prologue transposes and its epilogue bias and cast.
 * codegen recognises the kernel's shape (CgShape) and emits one LLVM module
 * with one ptx_kernel function, then PTX through LLVM's NVPTX backend.
 *
 * Kernel ABI (the launcher's contract), in this order:
 *   one global pointer per `param` op, in the order of the params;
 *   one global pointer per output: every operand of `ret`, then every
 *     `update` source not already returned, in order of appearance
 *     (an update is never written in place: the runtime swaps state);
 *   one global pointer to sync_words zeroed u32, when cooperative;
 *   i64 m, when any dim is M;
 *   i64 cols, when the kernel takes its data's column count at run time
 *     (has_cols: quant_rowcol), a multiple of cols_align;
 *   i64 seed, when a quantize uses round=sr.
 * Buffers are laid out as the interpreter's (include/precc/interp.h):
 * row-major, one byte per element for 8-bit and narrower formats.
 * Outputs that the code updates atomically (amax {*x*}, amax_cols' column
 * maxima, a GEMM's output amax) must be zeroed before launch: they are
 * CodegenKernel.atomic_params, read off the emitted LLVM function.
 */
#ifndef PRECC_CODEGEN_H
#define PRECC_CODEGEN_H

#include <stddef.h>
#include "ir.h"

/* version.c — the LLVM the compiler is linked against, "19.1.7". */
const char *codegen_llvm_version(void);

/* ---- targets (target.c) ---------------------------------------------- */
typedef enum CodegenSm { CG_SM89, CG_SM90, CG_SM90A, NCGSM } CodegenSm;

typedef struct CodegenTarget {
	CodegenSm sm;
	int threads;      /* threads per CTA; 0 = the shape's default (256) */
} CodegenTarget;

/* "sm_89", "sm_90", "sm_90a"; codegen_target_by_name returns -1 for any
 * other name. */
const char *codegen_sm_name(CodegenSm);
int codegen_sm_by_name(const char *name);

/* ---- kernels (kernel.c) ---------------------------------------------- */
typedef enum CgShape {
	CG_AMAX_TENSOR,     /* global amax: warp shuffles + smem + atom.max.u32 */
	CG_AMAX_COLS,       /* columnwise amax {*x1}: a thread per (column, 128
	                       rows), atom.max.u32 per column */
	CG_QUANT_TENSOR,    /* tensorwise quantize (scale from an amax param or
	                       a scale param), optional fused amax and transpose */
	CG_QUANT_ROWBLOCK,  /* 1xB blocks (1x128, MX 1x32, NVFP4 1x16): amax,
	                       scale and quantize in one pass */
	CG_QUANT_TILE,      /* BxB blocks (128x128, 16x16) */
	CG_QUANT_COLBLOCK,  /* 1xB blocks over transpose(x): B rows of one column
	                       of x per thread, written as rows of the transpose */
	CG_DELAYED_UPDATE,  /* history push/reduce and the next scale */
	CG_DEQUANT,         /* dequantize, tensorwise or 1xB scale_inv */
	CG_GEMM,            /* gemm with its prologue and epilogue: mma.sync,
	                       tiled over C (k_gemm.c) */
	CG_HADAMARD,        /* NVFP4's RHT of x or of transpose(x): a thread
	                       per 16-element block (k_hadamard.c) */
	CG_QUANT_ROWCOL,    /* 1xB blocks of x and 1xB' blocks of transpose(x)
	                       from one read: 128x128 tiles through shared
	                       memory (k_rowcol.c) */
	CG_AMAX_ROWCOL,     /* the rows' amax {1x*} and the columns' {*x1} of x
	                       from one read, 128x128 tiles, atomic max per
	                       tile (k_rowcol.c) */
	CG_CAST,            /* a high-precision format change (k_cast.c) */
	NCGSHAPE
} CgShape;

/* How to launch a kernel. One phase (nphases == 1): grid = (gx, gy, 1),
 *   flat:  gx = ceil(rows * cols / elems_per_cta), gy = 1;
 *   tiled: gx = ceil(cols / tile_cols), gy = ceil(rows / tile_rows);
 *   delayed_update: gx = gy = 1;
 * rows/cols are those of data value `data` at the run's M. Several phases
 * (one per quantize of a fused kernel, e.g. x and x.t from one launch):
 * grid = (sum over phases of gx_p * gy_p, 1, 1), each phase's gx_p, gy_p
 * by the rule above from phase[p]; the kernel deals its CTAs out to the
 * phases in order. */
enum { CG_MAXPHASE = 8 };
typedef struct CodegenPhase {
	CgShape shape;
	int data, tiled;
	long elems_per_cta, tile_rows, tile_cols;
} CodegenPhase;

/* A TMA tensor map the kernel takes (sm_90a GEMM): a grid-constant
 * 128-byte param, after the pointer params in the order of tmap[]. The
 * launcher encodes it over the buffer of pointer param `param`, viewed as
 * a row-major rows x cols matrix (cols innermost, packed rows), with
 * cuTensorMapEncodeTiled on a device and in the emulator's host format
 * on the CPU. Either extent may be the launch's M (a wgrad's K is M):
 * cols * elem_bytes must then stay a multiple of 16 (TMA's row stride),
 * which the kernel's m_multiple guarantees. */
typedef struct CodegenTmap {
	int param;            /* the pointer param whose buffer it maps */
	int elem_bytes;       /* 1 (e4m3/e5m2) or 2 (bf16/f16), 4 (f32) */
	long rows, cols;      /* the 2-D view; < 0: the launch's M */
	int box_rows, box_cols; /* the box one copy moves */
	int swizzle;          /* bytes: 0, 32, 64 or 128 */
	int mn_major;         /* the GEMM operand is the transpose of this
	                         matrix: its rows run along K and a box holds
	                         box_cols M (or N) elements of box_rows K rows
	                         (wgmma's MN-major 16-bit operand); 0: rows
	                         along M (or N), cols along K. Not in the
	                         manifest: a launch only needs the view */
} CodegenTmap;

enum { CG_MAXTMAP = 4 };

typedef struct CodegenKernel {
	CgShape shape;
	char name[64];        /* the PTX entry: "precc_quant_rowblock" ... */
	int threads;          /* per CTA */
	int data;             /* value whose extent sets the grid */
	int tiled;
	long elems_per_cta;   /* flat */
	long tile_rows, tile_cols;
	long m_multiple;      /* M must be a multiple of this (1 = any) */
	int nparams;          /* pointer params: inputs then outputs */
	int param_value[32];  /* the value each pointer param carries */
	int has_m, has_seed;
	int has_cols;         /* takes the data's columns as the i64 after m:
	                         the code reads no static column count, so
	                         kernels that differ only in it share one PTX
	                         (driver/build.c) */
	long cols_align;      /* has_cols: the columns must be a multiple of
	                         this (whole scale blocks, 16-byte vectors) */
	int cooperative;      /* amax_scheme=grid: a grid-wide barrier inside;
	                         launch with cuLaunchCooperativeKernel (every
	                         CTA resident) and pass the sync scratch */
	int persistent;       /* loops over its tiles on a 1-D grid of G CTAs
	                         (tile += nctaid.x), no grid-wide barrier:
	                         launch min(tiles, resident CTAs x SMs) of them
	                         (precc_grid_persistent) with cuLaunchKernel */
	int sync_words;       /* u32 words of the zeroed sync scratch, 0 none */
	unsigned atomic_params; /* bit i: pointer param i is the target of an
	                         atomic (read-modify-write) in the code, so
	                         the launcher must zero it (zero_outputs) */
	int nphases;          /* 1, or the phases of a fused kernel */
	CodegenPhase phase[CG_MAXPHASE];
	int ntmap;            /* tensor-map params (sm_90a GEMM), 0 none */
	CodegenTmap tmap[CG_MAXTMAP];
	int cluster;          /* CTAs per cluster (TMA multicast); 0 or 1: none */
	int smem;             /* dynamic shared bytes the launch passes (the
	                         sm_90a GEMM: its stage ring), 0 none */
	int bulk;             /* the module also holds CG_BULK_ENTRY (delayed
	                         updates): see below */
	double llvm_ms;       /* time in LLVM: build, verify, O3, emit */
} CodegenKernel;

/* A delayed-update module's second entry: void CG_BULK_ENTRY(const u64
 * *table, i64 rows) runs the update of `rows` layers, one table row each:
 * nparams pointers in the kernel's param order, then for each output the
 * state buffer the output is copied over once computed (0: none). Any
 * 1-D grid (CTA c takes rows c, c + nctaid.x, ...), `threads` per CTA. */
#define CG_BULK_ENTRY "precc_delayed_update_bulk"

const char *codegen_shape_name(CgShape);

/* Generate PTX for `kernel` (a Func as above) for target t. On success
 * returns 0, *ptx is a malloc'ed NUL-terminated PTX text and *info (may
 * be NULL) says how to launch it. On failure returns -1 and writes one
 * line "codegen: @func: message" into err: an unsupported kernel is always
 * an error, never approximate code. */
int codegen_kernel_ptx(const Func *kernel, const CodegenTarget *t, char **ptx,
                       CodegenKernel *info, char *err, size_t errsz);
/* Whether kernel f takes its data's column count at run time on t
 * (CodegenKernel.has_cols: quant_rowcol): 1 and the count its IR fixes in
 * *cols, else 0 (also for a kernel codegen rejects). No LLVM: precc
 * build asks it of every kernel to find those that share one PTX. */
int codegen_kernel_cols(const Func *kernel, const CodegenTarget *t, long *cols);
/* The same kernel as LLVM IR text after O3 (for --emit=llvm). */
int codegen_kernel_llvm(const Func *kernel, const CodegenTarget *t, char **ll,
                        CodegenKernel *info, char *err, size_t errsz);

/* k_gemm_sm90.c — whether the wgmma family (sm_90a) generates the GEMM
 * kernel f; 0 with the reason in why (passes/schedule.c then keeps
 * mma.sync). */
int codegen_gemm_wgmma_takes(const Func *kernel, char *why, size_t whysz);
/* The wgmma family's kernel f on a bm x bn tile of C (schedule's
 * tile=BMxBN): 1 and its shape, or 0 and why not (a tile the family does
 * not generate, accumulators over the register budget, too few stages in
 * shared memory). */
typedef struct CodegenGemmShape {
	int bm, bn;          /* the CTA's tile of C */
	int consumers;       /* consumer warpgroups (1 for 64 rows, else 2) */
	int stages;          /* the TMA ring: as many as 227 KiB holds, <= 16 */
	int threads;         /* 128 x (1 + consumers) */
	int smem;            /* dynamic shared memory, bytes */
	int acc_regs;        /* f32 accumulators a consumer thread keeps */
	int stage_bytes;     /* A's and B's tiles of one stage */
} CodegenGemmShape;
int codegen_gemm_wgmma_shape(const Func *kernel, int bm, int bn, CodegenGemmShape *s, char *why,
                             size_t whysz);
/* Whether the wgmma family runs f's bm x bn tile in clusters of cm CTAs
 * along M (tile=BMxBN:2x1, B's tile multicast): 1, or 0 and why not (bf16
 * and tensorwise fp8 only, the dense scheduler, an MN-major B in two
 * halves of whole boxes). */
int codegen_gemm_wgmma_cluster(const Func *kernel, int bm, int bn, int cm, char *why, size_t whysz);
/* k_gemm_grouped_sm90.c — the same for a gemm_grouped kernel (the wgmma
 * grouped family): 1 and its shape on a bm x bn tile, or 0 and why not
 * (then k_gemm_grouped.c, mma.sync, generates it). */
int codegen_gemm_grouped_wgmma_shape(const Func *kernel, int bm, int bn, CodegenGemmShape *s, char *why,
                                     size_t whysz);
/* Whether the mma.sync family takes the kernel with a 128 x 128 tile
 * (k_gemm.c; schedule.c gives it to large GEMMs); else why says why. */
int codegen_gemm_large_takes(const Func *kernel, char *why, size_t whysz);

#endif
