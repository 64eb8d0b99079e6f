/*
 * k_gemm_grouped_sm90.c — the grouped GEMM on wgmma (sm_90a): gemm_grouped
 * (docs/ir.md; the experts of one MoE block as one op) on the wgmma
 * family's warp-specialized kernel (k_gemm_sm90.c through gemm90.h: the
 * TMA ring, the producer's and the consumers' tile bodies, the epilogue),
 * with the group-aware tile scheduler of this file, as DeepGEMM's
 * m_grouped_fp8_gemm_nt_contiguous and k_grouped_fp8_gemm_tn_contiguous
 * run on its grouped scheduler (deepseek-ai/DeepGEMM deep_gemm/include/
 * deep_gemm/scheduler.cuh: get_next_block over the groups' blocks). The
 * offsets are read on the device only, clamped into [previous, M] as
 * k_gemm_grouped.c does: offsets the interpreter refuses give wrong rows,
 * never an access out of bounds.
 *
 * group=m (fprop; the grouped dgrad with B stacked along K): per expert
 * ceil(rows / bm) x ceil(N / bn) tiles, then those of the rows of no
 * expert (zeros, no K loop); a tile id maps to (expert, row tile, column
 * tile) through a cursor that only moves forward, so a tile never
 * straddles two experts and an expert without tokens has no tile. A's
 * rows past the expert's end are loaded (TMA reads the next expert's
 * rows: A's rows are independent) and never stored: the epilogue stores
 * from registers, predicated at the expert's end (a TMA store would
 * write the next expert's rows). B's tile is the expert's slice: its rows
 * g·N + col0 (B[G·N, K]), or all of N at K columns g·K (B[N, G·K]: the
 * stacked weights transposed; taken only where K is a multiple of the
 * stage's K, else the last stage would read the next expert's columns).
 *
 * group=k (wgrad): every expert ceil(N / bm) x ceil(N' / bn) tiles of its
 * rows g·N.. of C; tile id t is expert t / (those). The K loop runs over
 * the expert's tokens [offs[g-1], offs[g]): TMA loads at the token, and a
 * last stage that the expert ends inside is zeroed past its end by the
 * producer after the loads land (producer_tile's tail barrier and
 * zero_tail, fenced for the async proxy before the full barrier's
 * arrival): TMA cannot stop at an arbitrary token, and the tokens after
 * an expert's are the next expert's (bf16: any count; fp8: the last
 * expert's, whose end need not be a 128-token block). Masking in the
 * consumers instead would need a second zero source for wgmma's shared
 * operands; an alignment contract would leave bf16's counts out. An
 * expert without tokens stores zeros.
 */
#include <stdio.h>
#include <string.h>
#include "gemm90.h"

static long
experts(E *e, const G *g)
{
	return e->k->f->val[g->offs].type.dim[0];
}

static LLVMValueRef
ceil_div(E *e, LLVMValueRef a, long d)
{
	return LLVMBuildUDiv(e->b, add64(e, a, c64(e, (uint64_t)d - 1)), c64(e, (uint64_t)d), "");
}

/* ---- group=m: the cursor ---------------------------------------------- */

/* v[0..2]: the cursor's allocas (expert, its first tile id, its first
 * row); v[3]: the column tiles */
static LLVMValueRef
m_ntiles(E *e, Sched90 *s)
{
	LLVMBuilderRef b = e->b;
	const G *g = s->g;
	LLVMValueRef M = dimv(e, g->op[0].rows);
	s->v[0] = LLVMBuildAlloca(b, e->g->i64, "cur_g");
	s->v[1] = LLVMBuildAlloca(b, e->g->i64, "cur_base");
	s->v[2] = LLVMBuildAlloca(b, e->g->i64, "cur_start");
	s->v[3] = c64(e, (uint64_t)((s->g->n + s->bn - 1) / s->bn));
	/* every expert's tiles, then those of the rows past the last */
	LLVMValueRef tot = LLVMBuildAlloca(b, e->g->i64, "tiles");
	LLVMBuildStore(b, c64(e, 0), tot);
	LLVMBuildStore(b, c64(e, 0), s->v[2]);
	Loop l;
	LLVMValueRef gi = loop_begin(e, &l, c64(e, 0), c64(e, (uint64_t)experts(e, g)));
	LLVMValueRef st = LLVMBuildLoad2(b, e->g->i64, s->v[2], ""), en = gemm_offs_at(e, g, gi, st, M);
	LLVMValueRef nt = LLVMBuildMul(b, ceil_div(e, LLVMBuildSub(b, en, st, ""), s->bm), s->v[3], "");
	LLVMBuildStore(b, add64(e, LLVMBuildLoad2(b, e->g->i64, tot, ""), nt), tot);
	LLVMBuildStore(b, en, s->v[2]);
	loop_end(e, &l);
	loop_nounroll(e, &l);
	LLVMValueRef rest = ceil_div(e, LLVMBuildSub(b, M, LLVMBuildLoad2(b, e->g->i64, s->v[2], ""), ""), s->bm);
	return add64(e, LLVMBuildLoad2(b, e->g->i64, tot, ""), LLVMBuildMul(b, rest, s->v[3], ""));
}

static void
m_start(E *e, Sched90 *s)
{
	for (int i = 0; i < 3; i++)
		LLVMBuildStore(e->b, c64(e, 0), s->v[i]);
}

/* tile id -> (expert, row tile, column tile): the cursor moves on while
 * the tile is past its expert's tiles (the role's ids only grow) */
static void
m_at(E *e, Sched90 *s, LLVMValueRef tile, Tile90 *p)
{
	LLVMBuilderRef b = e->b;
	Cg *cg = e->g;
	const G *g = s->g;
	LLVMValueRef M = dimv(e, g->op[0].rows), G = c64(e, (uint64_t)experts(e, g));
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "sched");
	LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "sched_next");
	LLVMBasicBlockRef found = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "sched_found");
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, head);
	LLVMValueRef cur = LLVMBuildLoad2(b, cg->i64, s->v[0], ""), base = LLVMBuildLoad2(b, cg->i64, s->v[1], "");
	LLVMValueRef start = LLVMBuildLoad2(b, cg->i64, s->v[2], "");
	LLVMValueRef tail = LLVMBuildICmp(b, LLVMIntUGE, cur, G, "");
	LLVMValueRef end = sel(e, tail, M, gemm_offs_at(e, g, sel(e, tail, c64(e, 0), cur), start, M));
	LLVMValueRef nt = LLVMBuildMul(b, ceil_div(e, LLVMBuildSub(b, end, start, ""), s->bm), s->v[3], "");
	LLVMValueRef past = LLVMBuildAnd(b, LLVMBuildNot(b, tail, ""),
	                                 LLVMBuildICmp(b, LLVMIntUGE, tile, add64(e, base, nt), ""), "");
	LLVMBuildCondBr(b, past, next, found);
	LLVMPositionBuilderAtEnd(b, next);
	LLVMBuildStore(b, add64(e, cur, c64(e, 1)), s->v[0]);
	LLVMBuildStore(b, add64(e, base, nt), s->v[1]);
	LLVMBuildStore(b, end, s->v[2]);
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, found);

	LLVMValueRef local = LLVMBuildSub(b, tile, base, "");
	LLVMValueRef ge = sel(e, tail, c64(e, 0), cur);
	e->grp = ge;     /* a {gx*} A scale: the expert's (k_gemm.c's scale_at) */
	p->row0 = add64(e, start, mul64(e, LLVMBuildUDiv(b, local, s->v[3], ""), (uint64_t)s->bm));
	p->col0 = mul64(e, LLVMBuildURem(b, local, s->v[3], ""), (uint64_t)s->bn);
	p->mend = end;
	p->nend = c64(e, (uint64_t)g->n);
	p->bbase = g->bkstack ? c64(e, 0) : mul64(e, ge, (uint64_t)g->n);
	p->ka = c64(e, 0);
	p->kb = g->bkstack ? mul64(e, ge, (uint64_t)g->K) : c64(e, 0);
	p->klen = dimv(e, g->K);
	p->nkt = sel(e, tail, c64(e, 0), ceil_div(e, p->klen, s->bke));
	p->ktail = NULL;
	p->crow0 = c64(e, 0);
	p->zero = tail;
}

/* ---- group=k: one expert's [N, N'] per tile id range ------------------- */

/* v[0]: the tiles of one expert */
static LLVMValueRef
k_ntiles(E *e, Sched90 *s)
{
	const G *g = s->g;
	long N = g->op[0].rows;
	long per = (N + s->bm - 1) / s->bm * ((g->n + s->bn - 1) / s->bn);
	s->v[0] = c64(e, (uint64_t)per);
	return c64(e, (uint64_t)(experts(e, g) * per));
}

static void
k_start(E *e, Sched90 *s)
{
	(void)e, (void)s;
}

static void
k_at(E *e, Sched90 *s, LLVMValueRef tile, Tile90 *p)
{
	LLVMBuilderRef b = e->b;
	const G *g = s->g;
	long N = g->op[0].rows, ntn = (g->n + s->bn - 1) / s->bn;
	LLVMValueRef T = dimv(e, g->K);     /* the tokens */
	/* tile ids, experts and tiles within one in 32 bits (the tile count
	 * is G x static extents): 64-bit divisions by the constants cost the
	 * producer's 40 registers a spill at Mixtral's shapes */
	LLVMValueRef t32 = LLVMBuildTrunc(b, tile, e->g->i32, "");
	LLVMValueRef per = LLVMBuildTrunc(b, s->v[0], e->g->i32, "");
	LLVMValueRef ge = LLVMBuildZExt(b, LLVMBuildUDiv(b, t32, per, ""), e->g->i64, "");
	e->grp = ge;     /* {*xg} scales: the expert's (scale_at) */
	LLVMValueRef l32 = LLVMBuildURem(b, t32, per, "");
	LLVMValueRef first = LLVMBuildICmp(b, LLVMIntEQ, ge, c64(e, 0), "");
	LLVMValueRef kbase = sel(e, first, c64(e, 0),
	                         gemm_offs_at(e, g, sel(e, first, c64(e, 0), LLVMBuildSub(b, ge, c64(e, 1), "")),
	                                 c64(e, 0), T));
	LLVMValueRef klen = LLVMBuildSub(b, gemm_offs_at(e, g, ge, kbase, T), kbase, "");
	/* the window in 32 bits (offsets are i32, clamped to [0, T]): the
	 * producer holds it in 40 registers beside the tile loop's */
	kbase = LLVMBuildZExt(b, LLVMBuildTrunc(b, kbase, e->g->i32, ""), e->g->i64, "");
	klen = LLVMBuildZExt(b, LLVMBuildTrunc(b, klen, e->g->i32, ""), e->g->i64, "");
	p->row0 = mul64(e, LLVMBuildZExt(b, LLVMBuildUDiv(b, l32, c32(e, (unsigned)ntn), ""), e->g->i64, ""),
	                (uint64_t)s->bm);
	p->col0 = mul64(e, LLVMBuildZExt(b, LLVMBuildURem(b, l32, c32(e, (unsigned)ntn), ""), e->g->i64, ""),
	                (uint64_t)s->bn);
	p->mend = c64(e, (uint64_t)N);
	p->nend = c64(e, (uint64_t)g->n);
	p->bbase = c64(e, 0);
	p->ka = p->kb = kbase;
	p->klen = klen;
	p->nkt = ceil_div(e, klen, s->bke);
	p->ktail = LLVMBuildURem(b, klen, c64(e, (uint64_t)s->bke), "");
	p->crow0 = mul64(e, ge, (uint64_t)N);
	p->zero = LLVMBuildICmp(b, LLVMIntEQ, klen, c64(e, 0), "");
}

/* ---- what the family takes -------------------------------------------- */

/* 1: the wgmma family takes the grouped GEMM; 0: not (why); -1: the plan
 * fails (its error in k) */
static int
grouped_takes(Kern *k, G *g, char *why, size_t n)
{
	int r = gemm_sm90_takes(k, g, why, n);
	if (r <= 0)
		return r;
	if (!g->grouped || g->n < 0) {
		snprintf(why, n, "a gemm_grouped with a static N");
		return 0;
	}
	if (g->group_k && g->op[0].rows < 0) {
		snprintf(why, n, "group=k with dynamic rows of A (N)");
		return 0;
	}
	if (g->op[0].up || g->op[1].up) {
		/* the e2m1 producer (upcast_operand) bounds rows and K by the
		 * dense GEMM's M, N and K, not by an expert's window */
		snprintf(why, n, "e2m1 operands (upcast by the producer, without an expert's window)");
		return 0;
	}
	long bke = 128 / gemm_ebytes(g->op[0].fmt);
	if (g->bkstack && (g->K < 0 || g->K % bke)) {
		snprintf(why, n, "B stacked along K with K = %ld, not a multiple of the stage's %ld "
		         "(the last stage would read the next expert's columns)", g->K, bke);
		return 0;
	}
	return 1;
}

int
codegen_gemm_grouped_wgmma_shape(const Func *f, int bm, int bn, CodegenGemmShape *s, char *why, size_t n)
{
	G g;
	memset(s, 0, sizeof *s);
	return gemm_sm90_probe(f, grouped_takes, &g, why, n) && gemm_sm90_shape(f, &g, bm, bn, s, why, n);
}

/* the wgmma family's classification (ABI, tensor maps), then the grouped
 * GEMM's: B's map of a grouped dgrad is the stacked G·K wide, the
 * launch's rows those of C */
int
gemm_grouped_sm90_classify(Kern *k)
{
	char why[256];
	G g;

	if (gemm_sm90_classify(k))
		return -1;
	int r = grouped_takes(k, &g, why, sizeof why);
	if (r < 0)
		return -1;
	if (r == 0)
		return kfail(k, "mma=wgmma: the wgmma family does not take this grouped GEMM: %s", why);
	const Func *f = k->f;
	if (g.bkstack) {
		CodegenTmap *t = &k->tmap[1];
		long gk = f->val[g.op[1].v].type.dim[g.op[1].tr ? 0 : 1];
		if (g.op[1].tr)
			t->rows = gk;
		else
			t->cols = gk;
	}
	k->grouped = 1;
	if (g.group_k)
		k->rows = f->val[k->f->ins[k->gm].res].type.dim[0];
	else
		/* the launch's tiles (precc/grid.h) bound the CTAs: group=m has
		 * up to ceil(M / bm) + G row tiles (each expert's last one
		 * partial), which the device alone knows: count M in 16 rows
		 * (ceil(M / 16) >= ceil(M / 128) + G from M = 18 G; a CTA
		 * without a tile leaves at once, and the resident CTAs cap it) */
		k->tile_rows = 16;
	k->cols = g.n;
	return 0;
}

int
emit_gemm_grouped_sm90(E *e)
{
	G g;
	char why[256];
	if (grouped_takes(e->k, &g, why, sizeof why) <= 0)
		return kfail(e->k, "gemm_grouped on wgmma: %s", why);
	Sched90 s = g.group_k ? (Sched90){.ntiles = k_ntiles, .start = k_start, .at = k_at}
	                      : (Sched90){.ntiles = m_ntiles, .start = m_start, .at = m_at};
	return gemm_sm90_emit(e, &s);
}
