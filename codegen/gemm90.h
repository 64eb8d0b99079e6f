/*
 * gemm90.h — the wgmma family's kernel body over a tile scheduler
 * (codegen/ only): k_gemm_sm90.c emits the warp-specialized kernel (the
 * barriers, the producer's and the consumers' loops over their tiles,
 * producer_tile / consumer_tile / epilogue_tile at each), and asks a
 * scheduler how many tiles there are and where each lies. k_gemm_sm90.c's
 * own is the dense one (DeepGEMM's swizzled order over M x N);
 * k_gemm_grouped_sm90.c's the grouped one (gemm_grouped: a tile never
 * straddles two experts).
 */
#ifndef PRECC_GEMM90_H
#define PRECC_GEMM90_H

#include "gemm.h"

/* Where one CTA tile lies (i64 values; the K window as gemm.h's GPos) */
typedef struct Tile90 {
	LLVMValueRef row0, col0;  /* C's tile from row row0, column col0 (of A's rows) */
	LLVMValueRef mend, nend;  /* A's rows and C's stop at mend (M, or the
	                             expert's end), C's columns at nend (N) */
	LLVMValueRef bbase;       /* B's row of C's column 0: 0, or the expert's g·N */
	LLVMValueRef ka, kb;      /* A's and B's K element of the window's first:
	                             0, the expert's first token (group=k), B's g·K
	                             (a grouped dgrad's experts stacked along K) */
	LLVMValueRef klen;        /* the window's K elements: K, or the expert's tokens */
	LLVMValueRef nkt;         /* its stages: ceil(klen / the stage's K) */
	LLVMValueRef ktail;       /* K elements of the last stage inside the window
	                             (klen % the stage's K, 0: a whole stage), whose
	                             others the producer zeroes in shared memory;
	                             NULL: TMA's zeros past K are the window's end */
	LLVMValueRef crow0;       /* C's row of the tile's row 0: 0, or the expert's g·N */
	LLVMValueRef zero;        /* i1: rows of no expert or an expert without
	                             tokens, stored as zeros, no K loop; or NULL */
} Tile90;

/* A tile scheduler: the family sets g, bm, bn, bke, then calls ntiles once
 * at the kernel's entry (every thread), start in each role before its tile
 * loop, and at for each tile id the role walks (ctaid.x, + nctaid.x, ..):
 * the producer and the consumers see the same tiles in the same order. */
typedef struct Sched90 Sched90;
struct Sched90 {
	const G *g;
	int bm, bn;               /* the CTA's tile of C */
	long bke;                 /* K elements per stage */
	int cm;                   /* CTAs of a cluster along M (the dense scheduler's
	                             tiles are then the cluster's: cm m-blocks) */
	LLVMValueRef (*ntiles)(E *, Sched90 *);
	void (*start)(E *, Sched90 *);
	void (*at)(E *, Sched90 *, LLVMValueRef tile, Tile90 *);
	LLVMValueRef v[8];        /* the scheduler's own values (allocas, counts) */
};

/* k_gemm_sm90.c */
/* the family's plan of the kernel: 1 taken, 0 not (why says), -1 the plan
 * fails (its error in k) */
int gemm_sm90_takes(Kern *k, G *g, char *why, size_t n);
/* takes (gemm_sm90_takes or the grouped family's) asked of kernel f from
 * outside codegen (schedule): 1 and g filled, or 0 and why says why not
 * (or the plan's error) */
int gemm_sm90_probe(const Func *f, int (*takes)(Kern *, G *, char *, size_t), G *g, char *why,
                    size_t n);
/* the kernel's shape at a bm x bn tile (codegen_gemm_wgmma_shape's): 1,
 * or 0 and why */
int gemm_sm90_shape(const Func *f, const G *g, int bm, int bn, CodegenGemmShape *s, char *why, size_t n);
/* the kernel over s's tiles */
int gemm_sm90_emit(E *e, Sched90 *s);

#endif
