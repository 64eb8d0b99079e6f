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
 *	m_variant=N:@K    a GEMM kernel: at M >= N the runtime launches kernel
 *	                  @K instead (the same GEMM on a larger tile)
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
 * GEMM kernels (codegen/k_gemm.c, mma.sync) have two tiles. 64x64: 128
 * threads (2 x 2 warps), elems = 32 accumulators per thread, smem = the
 * three stages of A and B (3 x 2 x 4 KiB) and, with an output amax, the
 * warp partials. 128x128: 256 threads (2 x 4 warps of 64 x 32), elems 64,
 * smem 48 KiB (the partials reuse a stage). The larger tile reads half
 * the global bytes per MMA and a quarter fewer shared bytes per MMA, but
 * makes a quarter of the CTAs: a GEMM gets it where codegen takes it
 * (no in-loop promotion: registers), K is at least LARGE_K_BYTES (else
 * the pipeline's prologue is most of the loop), N (and static rows) at
 * least 128 (else the tile computes zeros), and its 128x128 tiles
 * alone fill every SM of the target once. With M in the rows that is a
 * range of M: the kernel keeps 64x64, and a copy on 128x128 is scheduled
 * right after it (@NAME.128x128), for M >= 128 ceil(SMs / ceil(N/128));
 * the kernel's m_variant says so, and the runtime picks by the run's M.
 * With static rows (wgrad: K = M) the kernel itself takes the tile.
 *
 * GEMMs that legalize put on wgmma (sm_90a): when codegen's wgmma family
 * takes the kernel (codegen_gemm_wgmma_takes: params, or 16-bit
 * transposes of params with static rows a multiple of 8 (read MN-major),
 * K static or M, K-major rows of 16 bytes, wgmma formats, promotion a
 * multiple of 128 bytes of K, no per-block output amax), the tile of
 * C (BM 64/128/256 x BN 64..256 in steps of 16) that a cost model of
 * waves and L2 bytes (wgmma_tile, below; docs/passes.md) picks among those
 * codegen_gemm_wgmma_shape takes, with its threads (a TMA producer and one
 * or two wgmma consumer warpgroups), elems (accumulators per consumer
 * thread) and smem (the most stages 227 KiB holds, and their mbarriers);
 * the reason in the kernel's comment. With M the run's, the tile loses
 * least over M = 512..16384, or two tiles (an m_variant copy for large M)
 * where one loses more than SPLIT. Otherwise the gemm goes back to
 * mma=mma_sync, and the kernel's comment says why.
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

enum { GEMM_THREADS = 128, GEMM_TILE = 64, GEMM_SMEM = 3 * 2 * 64 * 64 };
enum { LARGE_THREADS = 256, LARGE_TILE = 128, LARGE_SMEM = 3 * 2 * 128 * 64, LARGE_K_BYTES = 256 };
/* The wgmma family's cost model (sm_90a; the rule in docs/passes.md).
 * Per SM, a tile of bm x bn takes, per K tile of 128 bytes,
 * max(tensor, l2) clocks: tensor = bm·bn/32 (a 128x128 K tile is 512
 * tensor-clocks at the dense fp8 and bf16 rates, ../shared/GEMM-SPEED.md)
 * over MAIN_EFF, the mainloop's fitted share of the tensor rate (0.72,
 * the H200 fprop table's fit, the same file), 1/ONE_CONSUMER more with one
 * consumer warpgroup (its waits and barriers hidden by none: an estimate);
 * l2 = the stage's (bm + bn)·128 bytes at L2_BYTES_PER_CLK a SM
 * (DeepGEMM's l2_bandwidth_per_cycle: 8e6 / 1.3e3 B/clk over 132 SMs,
 * deepseek-ai/DeepGEMM 10747d47 csrc/jit_kernels/heuristics/sm90.hpp,
 * get_layout_info). Then the epilogue: EPI_CLK per 64 values a consumer
 * thread holds (10,500 clocks for 128x128, the same fit). A wave is one
 * tile a SM; waves = ceil(tiles / SMs), the last one as long as the
 * others (DeepGEMM's wave_efficiency). */
enum { WG_THREADS = 128, SMEM_STATIC_MAX = 1024 };
#define MAIN_EFF 0.72
#define ONE_CONSUMER 0.85
#define L2_BYTES_PER_CLK (8e6 / 1.3e3 / 132)
#define EPI_CLK 10500.0
/* estimates within TIE of the least are a tie (the model's rms error is
 * 4-5 %): the tile with the fewest L2 bytes per FLOP takes it (the L2 ->
 * SM traffic a 128x128 tile needs is about what L2 gives: the same file's
 * first structural limit) */
#define TIE 0.01
/* a GEMM of the run's M whose one tile is this far over each M's best on
 * average gets a second kernel for large M (m_variant) */
#define SPLIT 0.15
/* M of a GEMM whose M (or K = M) is the launch's: the tile is the one
 * whose estimate is the least above each M's best over these */
static const long m_sample[] = {512, 1024, 2048, 4096, 8192, 16384};
enum { NM_SAMPLE = sizeof m_sample / sizeof m_sample[0] };

static void
mma_sync_tile(Func *k, long m, long n, int namax, int large)
{
	int tile = large ? LARGE_TILE : GEMM_TILE, threads = large ? LARGE_THREADS : GEMM_THREADS;
	char a[32], b[32];

	ir_set_attr(k->pattr, PA_THREADS, "%d", threads);
	ir_set_attr(k->pattr, PA_TILE, "%dx%d", tile, tile);
	ir_set_attr(k->pattr, PA_ELEMS, "%d", tile * tile / threads);
	dim_str(a, sizeof a, m, tile);
	dim_str(b, sizeof b, n, tile);
	ir_set_attr(k->pattr, PA_GRID, "%sx%s", a, b);
	ir_set_attr(k->pattr, PA_SMEM, "%d", large ? LARGE_SMEM : GEMM_SMEM + (namax ? 128 : 0));
}

/* A copy of kernel f named name, in m right after f (at index at + 1). */
static Func *
copy_kernel(Module *m, int at, const char *name)
{
	const Func *f = m->fn[at];
	Func *c = ir_func_new(m, name);
	int *map = malloc(sizeof(int) * ((size_t)f->nval + 1));

	if (!map)
		abort();
	for (int v = 0; v < f->nval; v++)
		map[v] = -1;
	c->kernel = true;
	c->line = f->line, c->col = f->col;
	for (int k = 0; k < NPASSATTR; k++)
		if (f->pattr[k])
			ir_set_attr(c->pattr, (PassAttr)k, "%s", f->pattr[k]);
	for (int k = 0; k < f->nins; k++)
		ir_copy_ins(c, f, &f->ins[k], map);
	free(map);
	ir_set_attr(c->pattr, PA_CALLS, "0");   /* launched instead of f, called by none */
	memmove(&m->fn[at + 2], &m->fn[at + 1], sizeof *m->fn * (size_t)(m->nfn - at - 2));
	m->fn[at + 1] = c;
	return c;
}

/* The 128x128 tile where it pays (the comment at the top); returns 1 when
 * a copy of the kernel was added after it (m->fn[at + 1]). */
static int
large_tile(long m, long n, const Ins *g, Module *mod, int at, const Target *t)
{
	Func *k = mod->fn[at];
	const Ins *in = ir_def_ins(k, g->arg[0]);
	long K = k->val[g->arg[0]].type.dim[1];
	precc_format fa = k->val[in && in->op == OP_transpose ? in->arg[0] : g->arg[0]].type.fmt;
	char why[200];
	int namax = 0;

	for (int j = 0; j < k->nins; j++)
		namax += k->ins[j].op == OP_amax;
	/* a tile wider than the result computes zeros */
	if (n < LARGE_TILE || (m >= 0 && m < LARGE_TILE) || (K >= 0 && K * ebytes(fa) < LARGE_K_BYTES)
	    || t->sms < 1)
		return 0;
	if (!codegen_gemm_large_takes(k, why, sizeof why)) {
		ir_comment(&k->comment, "schedule: 64x64 tiles only: %s", why);
		return 0;
	}
	long ntile_n = (n + LARGE_TILE - 1) / LARGE_TILE;
	if (m >= 0) {
		if (((m + LARGE_TILE - 1) / LARGE_TILE) * ntile_n < t->sms)
			return 0;
		mma_sync_tile(k, m, n, namax, 1);
		ir_comment(&k->comment, "schedule: 128x128 tiles (%ld of them fill the %d SMs)",
		           ((m + LARGE_TILE - 1) / LARGE_TILE) * ntile_n, t->sms);
		return 0;
	}
	long m_min = LARGE_TILE * ((t->sms + ntile_n - 1) / ntile_n);
	char name[512];
	snprintf(name, sizeof name, "%s.%dx%d", k->name, LARGE_TILE, LARGE_TILE);
	Func *c = copy_kernel(mod, at, name);
	k = mod->fn[at];
	mma_sync_tile(c, m, n, namax, 1);
	ir_set_attr(k->pattr, PA_M_VARIANT, "%ld:@%s", m_min, name);
	ir_comment(&c->comment, "schedule: @%s on 128x128 tiles, for M >= %ld (%ld column tile%s: "
	           "%ld rows of tiles fill the %d SMs)", k->name, m_min, ntile_n,
	           ntile_n == 1 ? "" : "s", m_min / LARGE_TILE, t->sms);
	return 1;
}

typedef struct Cand {
	CodegenGemmShape s;
	double score;         /* sum over the Ms of cycles / the M's best */
	double cyc[NM_SAMPLE];
} Cand;

/* the estimated clocks of the GEMM on shape s at M, N, K (elements) */
static double
gemm_clocks(const CodegenGemmShape *s, long M, long N, long K, int eb, int sms)
{
	long tiles = ((M + s->bm - 1) / s->bm) * ((N + s->bn - 1) / s->bn);
	long waves = (tiles + sms - 1) / sms;
	long kt = (K * eb + 127) / 128;
	double tensor = (double)s->bm * s->bn / 32 / MAIN_EFF / (s->consumers == 1 ? ONE_CONSUMER : 1);
	double l2 = (double)(s->bm + s->bn) * 128 / L2_BYTES_PER_CLK;
	double epi = EPI_CLK * ((double)s->bm * s->bn / s->consumers / WG_THREADS) / 64;
	return (double)waves * ((double)kt * (tensor > l2 ? tensor : l2) + epi);
}

/* The wgmma kernel's tile (the rule at the top of the file); 0, or -1
 * when the family takes no tile of it (why says). A GEMM whose M is the
 * run's and whose one tile is more than SPLIT over each M's best on
 * average gets two: *best below M = *m_min, *big from there (*m_min 0:
 * one tile), if that halves the loss. */
static int
wgmma_tile(Func *k, long m, long n, long K, int eb, const Target *t, CodegenGemmShape *best, char *why,
           size_t nwhy, CodegenGemmShape *big, long *m_min, char *whybig, size_t nwhybig)
{
	static const int bms[] = {64, 128, 256};
	Cand c[3 * 13];
	int nc = 0;
	char no[200] = "";
	long ms[NM_SAMPLE];
	int nms = m >= 0 && K >= 0 ? 1 : NM_SAMPLE;

	for (int i = 0; i < nms; i++)
		ms[i] = m >= 0 ? m : m_sample[i];
	for (int i = 0; i < 3; i++)
		for (int bn = 64; bn <= 256; bn += 16)
			if (codegen_gemm_wgmma_shape(k, bms[i], bn, &c[nc].s, no, sizeof no)
			    && c[nc].s.smem + SMEM_STATIC_MAX <= t->smem_cta)
				nc++;
	if (!nc) {
		snprintf(why, nwhy, "no tile fits: %s", no);
		return -1;
	}
	double bestc[NM_SAMPLE];
	for (int j = 0; j < nms; j++) {
		bestc[j] = -1;
		for (int i = 0; i < nc; i++) {
			long mm = m >= 0 ? m : ms[j], kk = K >= 0 ? K : ms[j];
			c[i].cyc[j] = gemm_clocks(&c[i].s, mm, n, kk, eb, t->sms);
			if (bestc[j] < 0 || c[i].cyc[j] < bestc[j])
				bestc[j] = c[i].cyc[j];
		}
	}
	int b = 0, lo = 0;
	for (int i = 0; i < nc; i++) {
		c[i].score = 0;
		for (int j = 0; j < nms; j++)
			c[i].score += c[i].cyc[j] / bestc[j];
		if (c[i].score < c[lo].score)
			lo = i;
	}
	/* within TIE of the least, the fewest L2 bytes per FLOP, (bm + bn) /
	 * (bm · bn), then the least estimate */
	b = lo;
	for (int i = 0; i < nc; i++) {
		double bi = (double)(c[i].s.bm + c[i].s.bn) / c[i].s.bm / c[i].s.bn;
		double bb = (double)(c[b].s.bm + c[b].s.bn) / c[b].s.bm / c[b].s.bn;
		if (c[i].score <= c[lo].score * (1 + TIE) && (bi < bb || (bi == bb && c[i].score < c[b].score)))
			b = i;
	}
	*best = c[b].s;
	*m_min = 0;
	/* two tiles, small M and large M: the split point and the pair with
	 * the least summed slowdown */
	double one = c[b].score / nms - 1;
	int sj = 0, sa = 0, sb = 0;
	double two = one;
	for (int j0 = 1; m < 0 && one > SPLIT && j0 < nms; j0++) {
		int xa = 0, xb = 0;
		double fa = 1e300, fb = 1e300;
		for (int i = 0; i < nc; i++) {
			double lo = 0, hi = 0;
			for (int j = 0; j < nms; j++)
				*(j < j0 ? &lo : &hi) += c[i].cyc[j] / bestc[j];
			if (lo < fa)
				fa = lo, xa = i;
			if (hi < fb)
				fb = hi, xb = i;
		}
		if ((fa + fb) / nms - 1 < two)
			two = (fa + fb) / nms - 1, sj = j0, sa = xa, sb = xb;
	}
	if (sj && sa != sb && two < one / 2) {
		/* the variant from the first M (a multiple of 128 between the two
		 * samples) where the large-M tile is no slower */
		long mm0 = m_sample[sj - 1], mm1 = m_sample[sj], x = mm1;
		for (long mm = mm0 + 128; mm < mm1; mm += 128)
			if (gemm_clocks(&c[sb].s, mm, n, K >= 0 ? K : mm, eb, t->sms)
			    <= gemm_clocks(&c[sa].s, mm, n, K >= 0 ? K : mm, eb, t->sms)) {
				x = mm;
				break;
			}
		*best = c[sa].s, *big = c[sb].s, *m_min = x;
		snprintf(whybig, nwhybig, "%dx%d tile, %d stages (%d bytes), cluster 1x1, %d consumer%s: for M >= %ld "
		         "(one tile for all M: %.1f%% over each M's best on average, two: %.1f%%); at M=16384 %ld tiles",
		         big->bm, big->bn, big->stages, big->smem, big->consumers, big->consumers == 1 ? "" : "s", x,
		         100 * one, 100 * two, ((16384 + big->bm - 1) / big->bm) * ((n + big->bn - 1) / big->bn));
		snprintf(why, nwhy, "%dx%d tile, %d stages (%d bytes), cluster 1x1, %d consumer%s: for M < %ld, "
		         "the m_variant's %dx%d from there; at M=%ld %ld tiles", best->bm, best->bn, best->stages, best->smem,
		         best->consumers, best->consumers == 1 ? "" : "s", x, big->bm, big->bn, mm0,
		         ((mm0 + best->bm - 1) / best->bm) * ((n + best->bn - 1) / best->bn));
		return 0;
	}
	/* the reason: waves at the run's M (or the samples'), the runner-up */
	long mm = m >= 0 ? m : 4096, kk = K >= 0 ? K : 4096;
	long tiles = ((mm + best->bm - 1) / best->bm) * ((n + best->bn - 1) / best->bn);
	long waves = (tiles + t->sms - 1) / t->sms;
	int r = b ? 0 : nc > 1 ? 1 : 0;
	for (int i = 0; i < nc; i++)
		if (i != b && c[i].score < c[r].score)
			r = i;
	int o = snprintf(why, nwhy, "%dx%d tile, %d stages (%d bytes), cluster 1x1, %d consumer%s: ",
	                 best->bm, best->bn, best->stages, best->smem, best->consumers,
	                 best->consumers == 1 ? "" : "s");
	if (nms > 1)
		o += snprintf(why + o, nwhy - (size_t)o, "%.1f%% over the best tile on average at M = 512..16384; ",
		              100.0 * (c[b].score / nms - 1));
	o += snprintf(why + o, nwhy - (size_t)o, "at M=4096%s %ld tiles in %ld wave%s (last %ld%%), est. %.0f clocks",
	              K < 0 ? " (K)" : "", tiles, waves, waves == 1 ? "" : "s",
	              (tiles - (waves - 1) * t->sms) * 100 / t->sms,
	              gemm_clocks(best, mm, n, kk, eb, t->sms));
	if (r != b)
		snprintf(why + o, nwhy - (size_t)o, "; next %dx%d at %+.1f%%", c[r].s.bm, c[r].s.bn,
		         100.0 * (c[r].score / c[b].score - 1));
	return 0;
}

/* The wgmma GEMM's cluster (precc build --cluster; the rule in
 * docs/passes.md): 1 or 2 CTAs along M sharing B's tile by TMA multicast.
 * 1x1 unless asked. 2x1 where the kernel family takes it
 * (codegen_gemm_wgmma_cluster) and the SMs are a multiple of 2; auto
 * adds DeepGEMM's rule, at M = mref (the GEMM's M, else the reason line's
 * 4096): no multicast for one wave of tiles (deepseek-ai/DeepGEMM 54e2261
 * csrc/jit_kernels/heuristics/sm90.hpp:233-235), none below M = 512 and,
 * M known, none for an odd count of M blocks (02edd319
 * csrc/jit_kernels/heuristics/common.hpp:227 `m >= 512`, :77-81
 * is_multicast_legal's divisibility; our kernel runs an odd count, one
 * CTA idle on the last row of clusters, but DeepGEMM's rule is kept);
 * clusters of at most 2 and the SMs divisible, sm90.hpp:74-79. Returns
 * 1 or 2, and the reason in why (empty at the default). */
static int
gemm_cluster(const Func *k, const CodegenGemmShape *s, long m, long mref, long n, const Target *t,
             char *why, size_t nwhy)
{
	char no[200] = "";
	*why = 0;
	if (t->cluster == GEMM_CLUSTER_1X1)
		return 1;
	const char *ask = t->cluster == GEMM_CLUSTER_AUTO ? "auto" : "2x1 asked";
	if (!codegen_gemm_wgmma_cluster(k, s->bm, s->bn, 2, no, sizeof no)) {
		snprintf(why, nwhy, "1x1 (%s; the kernel takes no cluster: %s)", ask, no);
		return 1;
	}
	if (t->sms % 2) {
		snprintf(why, nwhy, "1x1 (%s; %d SMs, not a multiple of 2)", ask, t->sms);
		return 1;
	}
	if (t->cluster == GEMM_CLUSTER_2X1) {
		snprintf(why, nwhy, "2x1 (asked: B's tile multicast to 2 CTAs along M)");
		return 2;
	}
	long mb = (mref + s->bm - 1) / s->bm, tiles = mb * ((n + s->bn - 1) / s->bn);
	const char *at = m >= 0 ? "" : " (M the run's)";
	if (mref < 512)
		snprintf(why, nwhy, "1x1 (auto: M=%ld%s below 512, DeepGEMM's least M for multicast)", mref, at);
	else if (tiles <= t->sms)
		snprintf(why, nwhy, "1x1 (auto: %ld tiles at M=%ld%s are one wave on %d SMs: DeepGEMM "
		         "multicasts from two waves)", tiles, mref, at, t->sms);
	else if (m >= 0 && mb % 2)
		snprintf(why, nwhy, "1x1 (auto: %ld M blocks, an odd count: DeepGEMM multicasts on an "
		         "even one)", mb);
	else {
		snprintf(why, nwhy, "2x1 (auto: %ld tiles at M=%ld%s in %ld waves on %d SMs, %ld M blocks: "
		         "B's tile multicast to 2 CTAs along M, DeepGEMM's rule)", tiles, mref, at,
		         (tiles + t->sms - 1) / t->sms, t->sms, mb);
		return 2;
	}
	return 1;
}

/* why's "cluster 1x1" made the chosen cm's, and the cluster's reason
 * appended (none at the default) */
static void
cluster_why(char *why, size_t nwhy, int cm, const char *cwhy)
{
	char *c = strstr(why, "cluster 1x1");
	if (c && cm > 1)
		c[8] = (char)('0' + cm);
	if (*cwhy)
		snprintf(why + strlen(why), nwhy - strlen(why), "; cluster %s", cwhy);
}

/* a wgmma kernel's header attributes for shape s, in clusters of cm */
static void
wgmma_attrs(Func *k, const CodegenGemmShape *s, long m, long n, int namax, int cm)
{
	char a[32], b[32];
	ir_set_attr(k->pattr, PA_THREADS, "%d", s->threads);
	if (cm > 1)
		ir_set_attr(k->pattr, PA_TILE, "%dx%d:%dx1", s->bm, s->bn, cm);
	else
		ir_set_attr(k->pattr, PA_TILE, "%dx%d", s->bm, s->bn);
	ir_set_attr(k->pattr, PA_ELEMS, "%d", s->bm * s->bn / (s->threads - WG_THREADS));
	dim_str(a, sizeof a, m, s->bm);
	dim_str(b, sizeof b, n, s->bn);
	ir_set_attr(k->pattr, PA_GRID, "%sx%s", a, b);
	ir_set_attr(k->pattr, PA_SMEM, "%d", s->smem + (namax ? 128 : 0));
}

static int
schedule_gemm(Module *mod, int at, Ins *g, const Target *t)
{
	Func *k = mod->fn[at];
	long m = k->val[g->res].type.dim[0], n = k->val[g->res].type.dim[1];
	int namax = 0;
	char why[800];

	for (int j = 0; j < k->nins; j++)
		namax += k->ins[j].op == OP_amax;
	if (g->op == OP_gemm_grouped && g->pattr[PA_MMA] && !strcmp(g->pattr[PA_MMA], "wgmma")) {
		/* k_gemm_grouped_sm90.c: the wgmma family's kernel over the
		 * grouped scheduler, on 128 x 128 tiles (64 x 128 where those do
		 * not fit); else k_gemm_grouped.c, below, with the reason */
		CodegenGemmShape s;
		if (codegen_gemm_grouped_wgmma_shape(k, 128, 128, &s, why, sizeof why)
		    || codegen_gemm_grouped_wgmma_shape(k, 64, 128, &s, why, sizeof why)) {
			wgmma_attrs(k, &s, m, n, namax, 1);
			if (!g->group_k) {
				/* the launch's CTAs bound by M's 16-row tiles (each
				 * expert may add a partial row tile:
				 * gemm_grouped_sm90_classify) */
				char a[32], b[32];
				dim_str(a, sizeof a, m, 16);
				dim_str(b, sizeof b, n, s.bn);
				ir_set_attr(k->pattr, PA_GRID, "%sx%s", a, b);
			}
			ir_comment(&k->comment, "schedule: grouped GEMM on wgmma, %dx%d tiles, %d stages, "
			           "persistent: a CTA maps tile ids to (expert, row tile, column tile); no tile "
			           "straddles two experts", s.bm, s.bn, s.stages);
			return 0;
		}
		ir_set_attr(g->pattr, PA_MMA, "mma_sync");
		ir_comment(&k->comment, "schedule: grouped GEMM on mma.sync, not wgmma: %s", why);
	}
	if (g->op == OP_gemm_grouped) {
		/* k_gemm_grouped.c: persistent 64 x 64 tiles over (expert, row
		 * tile, column tile); grid= is the launch's upper bound of CTAs
		 * (precc/grid.h's loop grid), each loops over the tiles */
		mma_sync_tile(k, m, n, namax, 0);
		ir_comment(&k->comment, "schedule: grouped GEMM on 64x64 tiles, persistent: a CTA "
		           "maps tile ids to (expert, row tile, column tile); no tile straddles two "
		           "experts");
		return 0;
	}
	if (g->pattr[PA_MMA] && !strcmp(g->pattr[PA_MMA], "wgmma")) {
		CodegenGemmShape s, sbig;
		long m_min = 0;
		char whys[800], whyb[800];
		const Ins *in = ir_def_ins(k, g->arg[0]);
		long K = k->val[g->arg[0]].type.dim[1];
		precc_format fa = k->val[in && in->op == OP_transpose ? in->arg[0] : g->arg[0]].type.fmt;
		int takes = codegen_gemm_wgmma_takes(k, why, sizeof why);
		/* e2m1 codes are upcast into bf16 stages (k_gemm_sm90.c) */
		if (takes && !wgmma_tile(k, m, n, K, fa == PRECC_E2M1 ? 2 : ebytes(fa), t, &s, whys, sizeof whys, &sbig, &m_min, whyb,
		                         sizeof whyb)) {
			char cwhy[300];
			/* the cluster at M, else at 4096 (the small-M kernel of two:
			 * below m_min) */
			long mref = m >= 0 ? m : m_min && m_min < 4096 ? m_min : 4096;
			int cm = gemm_cluster(k, &s, m, mref, n, t, cwhy, sizeof cwhy);
			cluster_why(whys, sizeof whys, cm, cwhy);
			wgmma_attrs(k, &s, m, n, namax, cm);
			if (!m_min) {
				ir_comment(&k->comment, "schedule: %s", whys);
				return 0;
			}
			/* the same GEMM on the large-M tile, launched from m_min */
			char name[512];
			snprintf(name, sizeof name, "%s.%dx%d", k->name, sbig.bm, sbig.bn);
			Func *c = copy_kernel(mod, at, name);
			k = mod->fn[at];
			cm = gemm_cluster(c, &sbig, m, m_min > 4096 ? m_min : 4096, n, t, cwhy, sizeof cwhy);
			cluster_why(whyb, sizeof whyb, cm, cwhy);
			wgmma_attrs(c, &sbig, m, n, namax, cm);
			ir_set_attr(k->pattr, PA_M_VARIANT, "%ld:@%s", m_min, name);
			ir_comment(&k->comment, "schedule: %s", whys);
			ir_comment(&c->comment, "schedule: %s", whyb);
			return 1;
		}
		if (takes)
			snprintf(why, sizeof why, "%s", whys);
		ir_set_attr(g->pattr, PA_MMA, "mma_sync");
		ir_comment(&k->comment, "schedule: gemm on mma.sync, not wgmma: %s", why);
	}
	mma_sync_tile(k, m, n, namax, 0);
	return large_tile(m, n, g, mod, at, t);
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

/* Passes that run again on scheduled IR (precc ir FILE.ir) schedule it
 * afresh: the 128x128 copies of the last run go, and so do the m_variant
 * attributes naming them (dedupe drops them first, so that a copy does
 * not rename the kernel it copies; schedule again, for IR that starts
 * there). */
void
drop_variants(Module *m)
{
	for (int k = 0; k < m->nfn; k++) {
		Func *f = m->fn[k];
		const char *a = f->kernel ? f->pattr[PA_M_VARIANT] : NULL;
		const char *at = a ? strstr(a, ":@") : NULL;
		for (int j = 0; at && j < m->nfn; j++)
			if (j != k && !strcmp(m->fn[j]->name, at + 2)) {
				ir_func_remove(m, j);
				if (j < k)
					k--;
				break;
			}
		if (a) {
			free(m->fn[k]->pattr[PA_M_VARIANT]);
			m->fn[k]->pattr[PA_M_VARIANT] = NULL;
		}
	}
}

void
schedule(Module *m, const Target *t)
{
	drop_variants(m);
	for (int k = 0; k < m->nfn; k++) {
		Func *f = m->fn[k];
		Ins *g = NULL;
		for (int j = 0; f->kernel && j < f->nins && !g; j++)
			if (ir_op_gemm(f->ins[j].op))
				g = &f->ins[j];
		if (g)
			k += schedule_gemm(m, k, g, t);   /* skips a 128x128 copy */
		else if (f->kernel)
			schedule_kernel(f, t);
	}
}
