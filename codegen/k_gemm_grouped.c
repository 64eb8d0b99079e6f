/*
 * k_gemm_grouped.c — the grouped GEMM family (sm_89 mma.sync; sm_90 and
 * sm_90a too until a wgmma one exists): gemm_grouped group=m, the experts
 * of one MoE block as one kernel (docs/ir.md). A's rows are the tokens
 * sorted by expert, %offs[g] the end of expert g's rows; B is the experts'
 * weights stacked [G*N, K]; C[r, :] = A[r, :] · B[g*N .. g*N+N, :]ᵀ for
 * the expert g whose rows hold r, and rows past offs[G-1] are zero (what
 * ir/interp/grouped.c computes). A grouped dgrad's B stacks them along K,
 * B[N, G*K] (the stacked weights transposed, as a param or read
 * transposed): expert g's B is its columns g*K .. g*K+K (GPos.bkbase), its
 * scales those columns' too.
 *
 * The mainloop and epilogue are k_gemm.c's (gemm_tile, one CTA tile of
 * 64 x 64); this file is the tile scheduler around them. The kernel is
 * persistent: a 1-D grid of at most the resident CTAs (precc/grid.h's
 * loop grid over M x N's tiles), each CTA walking tile ids ctaid.x,
 * ctaid.x + nctaid.x, ... below the total. The offsets are read from
 * device memory, never from the host: every CTA first counts the tiles
 * (per expert ceil(rows / 64) x ceil(N / 64), then the rows of no expert),
 * then maps each of its tile ids to (expert, row tile, column tile) with a
 * cursor that only moves forward (its ids grow), as DeepGEMM's grouped
 * scheduler does (deep_gemm/include/deep_gemm/scheduler.cuh). So a tile
 * never straddles two experts, an expert without tokens has no tile, and
 * the rows past an expert's end are predicated off in the copies and the
 * stores (no padding copies). Offsets are clamped into [previous, M]:
 * offsets the interpreter refuses (negative, not monotone, past M) give
 * wrong rows, never an access out of bounds.
 */
#include "gemm.h"

/* the offsets' i32 at expert gi (i64), clamped to [lo, M]: offsets the
 * interpreter refuses give wrong rows, never an access out of bounds (both
 * grouped families read them so) */
LLVMValueRef
gemm_offs_at(E *e, const G *g, LLVMValueRef gi, LLVMValueRef lo, LLVMValueRef M)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef v = LLVMBuildSExt(b, load_al(e, e->g->i32, gep(e, e->ptr[g->offs], mul64(e, gi, 4)), 4),
	                               e->g->i64, "");
	v = sel(e, LLVMBuildICmp(b, LLVMIntSLT, v, lo, ""), lo, v);
	return sel(e, LLVMBuildICmp(b, LLVMIntSGT, v, M, ""), M, v);
}

/* the tiles of rows [start, end): ceil((end - start) / bm) x ntn */
static LLVMValueRef
tiles_of(E *e, const G *g, LLVMValueRef start, LLVMValueRef end, long ntn)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef rows = LLVMBuildSub(b, end, start, "");
	return mul64(e, LLVMBuildUDiv(b, add64(e, rows, c64(e, (uint64_t)g->t.bm - 1)),
	                              c64(e, (uint64_t)g->t.bm), ""), (uint64_t)ntn);
}

static LLVMValueRef
load64(E *e, LLVMValueRef p)
{
	return LLVMBuildLoad2(e->b, e->g->i64, p, "");
}

static void
store64(E *e, LLVMValueRef v, LLVMValueRef p)
{
	LLVMBuildStore(e->b, v, p);
}

/* group=k: expert g's dW_g = A[:, tokens of g] · B[:, tokens of g]ᵀ into
 * C's rows g·N..; every expert has the same ceil(N / bm) x ceil(N' / bn)
 * tiles, tile id t is expert t / (those), and an expert without tokens
 * stores its zeros without a K loop. */
static int
emit_group_k(E *e, G *g, LLVMValueRef inner, LLVMValueRef outer)
{
	Kern *k = e->k;
	LLVMBuilderRef b = e->b;
	long ng = k->f->val[g->offs].type.dim[0], N = g->op[0].rows;
	if (N < 0)
		return kfail(k, "gemm_grouped group=k: the rows of A (N) must be static");
	long mtn = (N + g->t.bm - 1) / g->t.bm, ntn = (g->n + g->t.bn - 1) / g->t.bn;
	LLVMValueRef T = dimv(e, g->K);     /* the tokens */
	LLVMValueRef ntiles = c64(e, (uint64_t)(ng * mtn * ntn));

	LLVMValueRef cta = LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef ncta = LLVMBuildZExt(b, sreg(e, "nctaid.x"), e->g->i64, "");
	LLVMValueRef mine = LLVMBuildUDiv(b, LLVMBuildSub(b, add64(e, ntiles, LLVMBuildSub(b, ncta, c64(e, 1), "")),
	                                                  cta, ""), ncta, "");
	mine = sel(e, ult(e, cta, ntiles), mine, c64(e, 0));
	Loop tl;
	LLVMValueRef ti = loop_begin(e, &tl, c64(e, 0), mine);
	LLVMValueRef tile = add64(e, cta, LLVMBuildMul(b, ti, ncta, ""));
	LLVMValueRef ge = LLVMBuildUDiv(b, tile, c64(e, (uint64_t)(mtn * ntn)), "");
	LLVMValueRef local = LLVMBuildURem(b, tile, c64(e, (uint64_t)(mtn * ntn)), "");
	LLVMValueRef first = LLVMBuildICmp(b, LLVMIntEQ, ge, c64(e, 0), "");
	LLVMValueRef kbase = sel(e, first, c64(e, 0),
	                         gemm_offs_at(e, g, sel(e, first, c64(e, 0), LLVMBuildSub(b, ge, c64(e, 1), "")),
	                                 c64(e, 0), T));
	LLVMValueRef kend = gemm_offs_at(e, g, ge, kbase, T);
	e->grp = ge;     /* {*xg} scales: the expert's (scale_at) */
	LLVMValueRef klen = LLVMBuildSub(b, kend, kbase, "");
	GPos p = {
		.row0 = mul64(e, LLVMBuildUDiv(b, local, c64(e, (uint64_t)ntn), ""), (uint64_t)g->t.bm),
		.col0 = mul64(e, LLVMBuildURem(b, local, c64(e, (uint64_t)ntn), ""), (uint64_t)g->t.bn),
		.mend = c64(e, (uint64_t)N),
		.brow0 = c64(e, 0),
		.bend = dimv(e, g->op[1].rows),
		.zero = LLVMBuildICmp(b, LLVMIntEQ, klen, c64(e, 0), ""),
		.kbase = kbase, .klen = klen,
		.crow0 = mul64(e, ge, (uint64_t)N),
	};
	if (gemm_tile(e, g, &p, inner, outer))
		return -1;
	barrier(e);
	loop_end(e, &tl);
	loop_nounroll(e, &tl);
	return 0;
}

int
emit_gemm_grouped(E *e)
{
	Kern *k = e->k;
	LLVMBuilderRef b = e->b;
	LLVMValueRef inner, outer;
	G g;

	if (gemm_plan(k, &g))
		return -1;
	if (!g.grouped || g.n < 0)
		return kfail(k, "k_gemm_grouped: a gemm_grouped with a static N");
	if (g.bkstack && g.K < 0)
		return kfail(k, "gemm_grouped group=m with B[N,G*K]: K must be static");
	if (g.group_k) {
		gemm_accumulators(e, &g, &inner, &outer);
		return emit_group_k(e, &g, inner, outer);
	}
	long ng = k->f->val[g.offs].type.dim[0];
	long ntn = (g.n + g.t.bn - 1) / g.t.bn;
	gemm_accumulators(e, &g, &inner, &outer);
	/* the cursor: expert cg (G: the rows of no expert), its first tile id
	 * and first row */
	LLVMValueRef cgp = LLVMBuildAlloca(b, e->g->i64, "cur_g");
	LLVMValueRef cbase = LLVMBuildAlloca(b, e->g->i64, "cur_base");
	LLVMValueRef cstart = LLVMBuildAlloca(b, e->g->i64, "cur_start");
	LLVMValueRef M = dimv(e, g.op[0].rows), G = c64(e, (uint64_t)ng);

	/* the tiles: every expert's, then those of the rows past the last */
	Loop cl;
	LLVMValueRef tot = LLVMBuildAlloca(b, e->g->i64, "tiles");
	store64(e, c64(e, 0), tot);
	store64(e, c64(e, 0), cstart);
	LLVMValueRef gi = loop_begin(e, &cl, c64(e, 0), G);
	LLVMValueRef st = load64(e, cstart), en = gemm_offs_at(e, &g, gi, st, M);
	store64(e, add64(e, load64(e, tot), tiles_of(e, &g, st, en, ntn)), tot);
	store64(e, en, cstart);
	loop_end(e, &cl);
	loop_nounroll(e, &cl);
	LLVMValueRef ntiles = add64(e, load64(e, tot), tiles_of(e, &g, load64(e, cstart), M, ntn));

	store64(e, c64(e, 0), cgp);
	store64(e, c64(e, 0), cbase);
	store64(e, c64(e, 0), cstart);
	/* for (tile = ctaid.x; tile < ntiles; tile += nctaid.x) */
	LLVMValueRef cta = LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef ncta = LLVMBuildZExt(b, sreg(e, "nctaid.x"), e->g->i64, "");
	LLVMValueRef mine = LLVMBuildUDiv(b, LLVMBuildSub(b, add64(e, ntiles, LLVMBuildSub(b, ncta, c64(e, 1), "")),
	                                                  cta, ""), ncta, "");
	mine = sel(e, ult(e, cta, ntiles), mine, c64(e, 0));
	Loop tl;
	LLVMValueRef ti = loop_begin(e, &tl, c64(e, 0), mine);
	LLVMValueRef tile = add64(e, cta, LLVMBuildMul(b, ti, ncta, ""));

	/* advance the cursor while the tile is past its expert's tiles */
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "sched");
	LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "sched_next");
	LLVMBasicBlockRef found = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "sched_found");
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, head);
	LLVMValueRef cur = load64(e, cgp), base = load64(e, cbase), start = load64(e, cstart);
	LLVMValueRef tail = LLVMBuildICmp(b, LLVMIntUGE, cur, G, "");
	LLVMValueRef end = sel(e, tail, M, gemm_offs_at(e, &g, sel(e, tail, c64(e, 0), cur), start, M));
	LLVMValueRef nt = tiles_of(e, &g, start, end, ntn);
	LLVMValueRef past = LLVMBuildAnd(b, LLVMBuildNot(b, tail, ""),
	                                 LLVMBuildICmp(b, LLVMIntUGE, tile, add64(e, base, nt), ""), "");
	LLVMBuildCondBr(b, past, next, found);
	LLVMPositionBuilderAtEnd(b, next);
	store64(e, add64(e, cur, c64(e, 1)), cgp);
	store64(e, add64(e, base, nt), cbase);
	store64(e, end, cstart);
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, found);

	/* the tile: row tile and column tile within the expert */
	LLVMValueRef local = LLVMBuildSub(b, tile, base, "");
	LLVMValueRef mt = LLVMBuildUDiv(b, local, c64(e, (uint64_t)ntn), "");
	LLVMValueRef nti = LLVMBuildURem(b, local, c64(e, (uint64_t)ntn), "");
	LLVMValueRef ge = sel(e, tail, c64(e, 0), cur);
	e->grp = ge;     /* a {gx*} A scale: the expert's (scale_at) */
	GPos p = {
		.row0 = add64(e, start, mul64(e, mt, (uint64_t)g.t.bm)),
		.col0 = mul64(e, nti, (uint64_t)g.t.bn),
		.mend = end,
		.brow0 = mul64(e, ge, (uint64_t)g.n),
		.bend = mul64(e, add64(e, ge, c64(e, 1)), (uint64_t)g.n),
		.zero = tail,
	};
	if (g.bkstack) {   /* B[N, G*K] (dgrad): the expert's K columns g·K .. */
		p.brow0 = c64(e, 0);
		p.bend = c64(e, (uint64_t)g.n);
		p.bkbase = mul64(e, ge, (uint64_t)g.K);
	}
	if (gemm_tile(e, &g, &p, inner, outer))
		return -1;
	/* every warp is done with the stages before the next tile's copies */
	barrier(e);
	loop_end(e, &tl);
	loop_nounroll(e, &tl);
	return 0;
}

/* A kernel holding a gemm_grouped: the GEMM's ABI and plan (gemm_classify),
 * persistent over C's M x N tiles */
int
gemm_grouped_classify(Kern *k)
{
	if (gemm_classify(k))
		return -1;
	const Ins *gm = &k->f->ins[k->gm];
	k->grouped = 1;
	k->persistent = 1;
	k->cols = k->f->val[gm->res].type.dim[1];
	if (k->cols < 0)
		return kfail(k, "gemm_grouped: N must be static");
	return 0;
}
