/*
 * schedule.c — how each kernel is launched, as header attributes:
 *
 *	threads=256       threads per CTA
 *	vec=16            bytes per global load/store (legalize.c's vec, if
 *	                  narrower)
 *	tile=RxC          the CTA's tile of the kernel's source, stored layout
 *	elems=N           source elements per thread (tile / threads)
 *	grid=AxB          CTAs: ceil(rows/R) x ceil(cols/C) (M/R when the rows
 *	                  are M), or a count for persistent kernels
 *	smem=B            shared memory bytes per CTA
 *	launch=cooperative  grid-wide barrier kernels (amax_scheme=grid)
 *
 * The tile is the smallest that holds every block a local amax reduces
 * over, in the stored layout (1x128 → 1 row x 128 columns, 128x128, the
 * transposed copy's 1x128 → 128 rows x 1 column, rowwise → a whole row);
 * a kernel that writes a transposed copy stages tiles of at least 64x64
 * through shared memory (so both copies are written with 16-byte
 * vectors); tiles grow (columns first, up to 128 or the row) until each
 * thread has one 16-byte vector of input. Shared memory: the transposed
 * staging tile of each transposed output (+16 bytes a row against bank
 * conflicts), a warp-partial per block amax, and for the grid scheme the
 * source tile itself, kept across the barrier. Amax-only kernels are
 * persistent (4 CTAs per SM, grid-stride, one atomic max per CTA); the
 * state update runs one CTA per history.
 *
 * GEMM kernels (codegen/k_gemm.c, mma.sync): 128 threads (2 x 2 warps),
 * a 64x64 tile of C, elems = its 32 accumulators per thread, grid over C,
 * smem = the A and B K-tiles (64 rows x 80 bytes each) and, with an
 * output amax, the warp partials. codegen refuses any other tile.
 *
 * GEMMs that legalize put on wgmma (sm_90a): when codegen's wgmma family
 * takes the kernel (codegen_gemm_wgmma_takes: params, or 16-bit
 * transposes of params with static rows a multiple of 8 (read MN-major),
 * K static or M, K-major rows of 16 bytes, wgmma formats, promotion a
 * multiple of 128 bytes of K, no per-block output amax), 384 threads (a TMA producer and two
 * wgmma consumer warpgroups), a 128x128 tile of C, elems = 64
 * accumulators per consumer thread, smem = the 4-stage ring (4 x 32 KiB)
 * and its 8 mbarriers (dynamic shared memory); otherwise the gemm goes
 * back to mma=mma_sync, and the kernel's comment says why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "passes.h"
#include "codegen.h"

#define THREADS 256

static int
ebytes(precc_format f)
{
	return f == PRECC_FP32 || f == PRECC_TF32 ? 4 : f == PRECC_FP16 || f == PRECC_BF16 ? 2 : 1;
}

static void
dim_str(char *buf, size_t n, long d, long per)
{
	if (d >= 0)
		snprintf(buf, n, "%ld", (d + per - 1) / per);
	else if (per == 1 && d == DIM_M)
		snprintf(buf, n, "M");
	else
		snprintf(buf, n, "M/%ld", -d * per);
}

enum { GEMM_THREADS = 128, GEMM_TILE = 64, GEMM_SMEM = 2 * 64 * 80 };
enum { WGMMA_THREADS = 384, WGMMA_TILE = 128, WGMMA_SMEM = 4 * 2 * 128 * 128 + 8 * 8 };

static void
schedule_gemm(Func *k, Ins *g, const Target *t)
{
	long m = k->val[g->res].type.dim[0], n = k->val[g->res].type.dim[1];
	int namax = 0;
	char a[32], b[32], why[200];

	for (int j = 0; j < k->nins; j++)
		namax += k->ins[j].op == OP_amax;
	if (g->pattr[PA_MMA] && !strcmp(g->pattr[PA_MMA], "wgmma")) {
		if (codegen_gemm_wgmma_takes(k, why, sizeof why)) {
			ir_set_attr(k->pattr, PA_THREADS, "%d", WGMMA_THREADS);
			ir_set_attr(k->pattr, PA_TILE, "%dx%d", WGMMA_TILE, WGMMA_TILE);
			ir_set_attr(k->pattr, PA_ELEMS, "%d", WGMMA_TILE * WGMMA_TILE / (WGMMA_THREADS - 128));
			dim_str(a, sizeof a, m, WGMMA_TILE);
			dim_str(b, sizeof b, n, WGMMA_TILE);
			ir_set_attr(k->pattr, PA_GRID, "%sx%s", a, b);
			ir_set_attr(k->pattr, PA_SMEM, "%d", WGMMA_SMEM + (namax ? 128 : 0));
			return;
		}
		ir_set_attr(g->pattr, PA_MMA, "mma_sync");
		ir_comment(&k->comment, "schedule: gemm on mma.sync, not wgmma: %s", why);
	}
	ir_set_attr(k->pattr, PA_THREADS, "%d", GEMM_THREADS);
	ir_set_attr(k->pattr, PA_TILE, "%dx%d", GEMM_TILE, GEMM_TILE);
	ir_set_attr(k->pattr, PA_ELEMS, "%d", GEMM_TILE * GEMM_TILE / GEMM_THREADS);
	dim_str(a, sizeof a, m, GEMM_TILE);
	dim_str(b, sizeof b, n, GEMM_TILE);
	ir_set_attr(k->pattr, PA_GRID, "%sx%s", a, b);
	ir_set_attr(k->pattr, PA_SMEM, "%d", GEMM_SMEM + (namax ? 128 : 0));
	(void)t;
}

static void
schedule_kernel(Func *k, const Target *t)
{
	int src = -1, nhist = 0, namax = 0, nother = 0, ntr = 0, vec = 16;
	long tr_rows = 1, tr_cols = 1, smem = 0;
	bool grid = k->pattr[PA_AMAX_SCHEME] && !strcmp(k->pattr[PA_AMAX_SCHEME], "grid");
	char a[32], b[32];

	/* the source: the largest data param */
	for (int j = 0; j < k->nins; j++) {
		const Ins *i = &k->ins[j];
		if (i->pattr[PA_VEC] && atoi(i->pattr[PA_VEC]) < vec)
			vec = atoi(i->pattr[PA_VEC]);
		if (i->op == OP_param && !i->type.is_scale && i->type.rank == 2) {
			if (src < 0 || (i->type.dim[0] < 0 && k->val[src].type.dim[0] >= 0))
				src = i->res;
		} else if (i->op == OP_history_push)
			nhist++;
		else if (i->op == OP_amax)
			namax++;
		else if (i->op != OP_param && i->op != OP_ret)
			nother++;
	}
	ir_set_attr(k->pattr, PA_THREADS, "%d", THREADS);
	ir_set_attr(k->pattr, PA_VEC, "%d", vec);
	if (nhist || src < 0) {         /* the delayed-scaling update */
		ir_set_attr(k->pattr, PA_GRID, "%d", nhist ? nhist : 1);
		ir_set_attr(k->pattr, PA_SMEM, "%d", THREADS / 32 * 4);
		return;
	}
	const Type *st = &k->val[src].type;
	int eb = ebytes(st->fmt);
	long R = st->dim[0], C = st->dim[1];
	if (!nother && namax) {         /* amax only: persistent, grid-stride */
		ir_set_attr(k->pattr, PA_ELEMS, "%d", 2 * vec / eb);
		ir_set_attr(k->pattr, PA_GRID, "%d", 4 * t->sms);
		ir_set_attr(k->pattr, PA_SMEM, "%d", namax * THREADS / 32 * 4);
		return;
	}
	/* the tile: every local block amax's block in the stored layout */
	for (int j = 0; j < k->nins; j++) {
		const Ins *i = &k->ins[j];
		if (i->op == OP_transpose && !i->type.is_scale) {
			ntr++;
			continue;
		}
		if (i->op != OP_amax || i->pattr[PA_AMAX_SCHEME])
			continue;
		const Ins *d = ir_def_ins(k, i->arg[0]);
		const Type *ot = &k->val[i->arg[0]].type;
		bool tr = d && d->op == OP_transpose;
		long r = tr ? i->type.block[1] : i->type.block[0];
		long c = tr ? i->type.block[0] : i->type.block[1];
		if (!r)
			r = tr ? ot->dim[1] : ot->dim[0];
		if (!c)
			c = tr ? ot->dim[0] : ot->dim[1];
		if (r > tr_rows)
			tr_rows = r;
		if (c > tr_cols)
			tr_cols = c;
		smem += THREADS / 32 * 4;
	}
	if (ntr) {
		if (tr_rows < 64)
			tr_rows = 64;
		if (tr_cols < 64)
			tr_cols = 64;
	}
	while (tr_rows * tr_cols < (long)THREADS * vec / eb) {
		if (tr_cols < 128 && (C < 0 || tr_cols < C))
			tr_cols *= 2;
		else
			tr_rows *= 2;
	}
	for (int j = 0; j < k->nins; j++) {
		const Ins *i = &k->ins[j];
		if (i->op == OP_transpose && !i->type.is_scale)
			smem += tr_rows * (tr_cols * ebytes(i->type.fmt) + 16);
	}
	if (grid) {
		smem += tr_rows * tr_cols * eb;
		ir_set_attr(k->pattr, PA_LAUNCH, "cooperative");
	}
	ir_set_attr(k->pattr, PA_TILE, "%ldx%ld", tr_rows, tr_cols);
	ir_set_attr(k->pattr, PA_ELEMS, "%ld", tr_rows * tr_cols / THREADS);
	dim_str(a, sizeof a, R, tr_rows);
	dim_str(b, sizeof b, C, tr_cols);
	ir_set_attr(k->pattr, PA_GRID, "%sx%s", a, b);
	ir_set_attr(k->pattr, PA_SMEM, "%ld", smem);
	if (smem > t->smem_cta)
		ir_comment(&k->comment, "schedule: %ld bytes of shared memory exceed %ld on %s", smem,
		           t->smem_cta, t->name);
}

void
schedule(Module *m, const Target *t)
{
	for (int k = 0; k < m->nfn; k++) {
		Func *f = m->fn[k];
		Ins *g = NULL;
		for (int j = 0; f->kernel && j < f->nins && !g; j++)
			if (f->ins[j].op == OP_gemm)
				g = &f->ins[j];
		if (g)
			schedule_gemm(f, g, t);
		else if (f->kernel)
			schedule_kernel(f, t);
	}
}
