/*
 * kern.h — a kernel being generated: the Func, its shape, its parameter
 * ABI and geometry (kernel.c fills it; kemit.c and the emitter files of
 * emit.h emit it).
 */
#ifndef PRECC_KERN_H
#define PRECC_KERN_H

#include "cg.h"

enum { KMAXP = 16, VEC = 16 };   /* elements per thread: 16-byte fp8 stores */

struct Kern {
	const Func *f;
	char *err; size_t errsz;
	CgShape shape;
	char name[64];
	int in[KMAXP], nin;       /* param values, in order */
	int out[KMAXP], nout;     /* output values, in order */
	int x;                    /* the data value (quantize/amax operand) */
	int q;                    /* index of the quantize/dequantize Ins, -1 */
	int tr;                   /* index of the fused transpose Ins, -1 */
	int nscale_tr;            /* transposes of per-block scales (tiles) */
	int qsrc;                 /* the value quantized and amax'ed: x, or
	                             transpose(x) for quant_colblock, or
	                             hadamard(transpose(x)) (k->had) */
	int had;                  /* index of the hadamard Ins, -1 */
	long br, bc;              /* scale granularity of the quantize */
	long seg;                 /* amax_tensor, quant_tensor: rows per scale of
	                             a {N x *} granularity (a tensorwise scale
	                             per expert of stacked weights), 0 none */
	int goffs;                /* amax_tensor, quant_tensor: the %offs of a
	                             scale per group of rows ({gx*}: an expert's
	                             tensorwise scale of its routed rows), -1 */
	int rowcta;               /* quant_rowblock: one row per CTA */
	int nchunk;               /* rowcta: 16-element vectors per thread (> 1:
	                             rows wider than 16384, read twice) */
	int colwise;              /* quant_colblock: one scale per column of x */
	long blen;                /* quant_rowblock: elements per block (bc, or
	                             the columns for rowwise {1x*}) */
	long rows, cols;          /* static dims of x (DIM_M for M) */
	int threads, tiled;
	long elems_per_cta, tile_rows, tile_cols, m_multiple;
	int has_m, has_seed;
	int has_cols;             /* quant_rowcol: the columns are the i64
	                             param after m (e->cols), not k->cols */
	long cols_align;          /* has_cols: what the columns must divide by */
	int gridamax;             /* value of an amax_scheme=grid amax, -1 */
	int has_sync;             /* a grid-sync scratch param (cooperative) */
	int persistent;           /* loops over its tiles (the sm_90a GEMM) */
	int cluster;              /* CTAs per cluster along x (TMA multicast), 0/1 none */
	int gm;                   /* CG_GEMM: index of the gemm Ins */
	CodegenSm sm;             /* the target */
	int wgmma;                /* CG_GEMM of the wgmma family (k_gemm_sm90.c) */
	int grouped;              /* CG_GEMM of a gemm_grouped (k_gemm_grouped.c) */
	int smem;                 /* dynamic shared bytes (wgmma family), 0 none */
	int ntmap;                /* tensor-map params, after the scalar ones */
	CodegenTmap tmap[CG_MAXTMAP];
	/* a kernel of several quantize chains (x and x.t from one launch):
	 * phase[p] is a Kern of its own whose mask marks its instructions;
	 * the CTAs of the launch are dealt out to the phases in order */
	const unsigned char *mask;     /* NULL: every instruction */
	Kern *phase; int nphase;
};

static inline int
kin(const Kern *k, int i)
{
	return !k->mask || k->mask[i];
}

int kfail(Kern *, const char *fmt, ...);
/* k_rowcol.c: whether quant_rowcol takes the row phase and the column
 * phase of a fused kernel */
int rowcol_takes(const Kern *rowk, const Kern *colk);
/* k_gemm.c: a kernel holding a gemm (called by classify) */
int gemm_classify(Kern *);
/* k_gemm_sm90.c: the same for a gemm with mma=wgmma on sm_90a */
int gemm_sm90_classify(Kern *);
/* k_gemm_grouped.c: the same for a gemm_grouped */
int gemm_grouped_classify(Kern *);
/* k_gemm_grouped_sm90.c: a gemm_grouped with mma=wgmma on sm_90a */
int gemm_grouped_sm90_classify(Kern *);

#endif
