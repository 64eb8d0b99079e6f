/*
 * plan.c — resolve a recipe x a model into one policy per GEMM per layer.
 *
 * Layering, lowest to highest, for each operand of each GEMM:
 *	built-in defaults < recipe top level < role < gemm < gemm.role,
 * then the first matching rule's settings on top, in the same order. Only
 * fields a level wrote (its `set` bits) override. `format = "hybrid"` at a
 * level's top means e4m3 for input and weight, e5m2 for grad_output, just
 * as if written there, so role and gemm levels still override it.
 *
 * Derived defaults after layering: saturate = true for fp8/fp6/fp4;
 * MX blocks 1x32 with e8m0 scales, NVFP4 1x16 with e4m3 scales, rowwise
 * 1x(whole K), blockwise 128x128 for weights and 1x128 otherwise; promote
 * every 128 K-elements; fast accumulation keeps 14 mantissa bits.
 * A high-precision operand (fp32/tf32/fp16/bf16) carries no scale.
 *
 * Cast.block is read per GEMM as {along the operand's other dimension,
 * along the GEMM's reduction dimension}: MX/NVFP4 1x32/1x16 blocks always
 * run along K, so a weight's 1x32 blocks lie along in_features in fprop
 * and along out_features in dgrad (a re-quantized copy).
 *
 * Alignment (fp8/fp6/fp4 GEMMs): every static GEMM dimension (in and
 * out features; M is dynamic and checked at run time) is a multiple of 16.
 * Blocked scalings (MX, NVFP4, blockwise) need the reduction dimension a
 * multiple of the block; along the other dimension a partial last tile is
 * allowed (the scale tensor is ceil-divided). A GEMM that cannot take its
 * formats falls back as the recipe says, with the reason recorded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipe.h"

static bool
lowp(precc_format f)
{
	return f == PRECC_E4M3 || f == PRECC_E5M2 || f == PRECC_E2M1 ||
	       f == PRECC_E3M2 || f == PRECC_E2M3;
}

static const Cast default_cast = {
	.format = PRECC_BF16, .scaling = SCALING_NONE, .scale_format = PRECC_FP32,
	.history = 1, .amax_algo = AMAX_MAX, .round = PRECC_RNE,
	.nonfinite = NONFINITE_KEEP_SCALE,
};

/* Which role is operand A / B of each GEMM. */
static const Role gemm_roles[NGEMM][2] = {
	[GEMM_FPROP] = {ROLE_INPUT, ROLE_WEIGHT},
	[GEMM_DGRAD] = {ROLE_GRAD_OUTPUT, ROLE_WEIGHT},
	[GEMM_WGRAD] = {ROLE_GRAD_OUTPUT, ROLE_INPUT},
};

/* Static extents of each operand: [gemm][operand] = {other dim, reduction
 * dim}, as 'i' (in_features), 'o' (out_features) or 0 (M: dynamic). */
static const char extents[NGEMM][2][2] = {
	[GEMM_FPROP] = {{0, 'i'}, {'o', 'i'}},   /* X[M,K]·W[N,K]ᵀ   */
	[GEMM_DGRAD] = {{0, 'o'}, {'i', 'o'}},   /* dY[M,N]·W[N,K]   */
	[GEMM_WGRAD] = {{'o', 0}, {'i', 0}},     /* dYᵀ[N,M]·X[M,K]  */
};

static void
apply_cast(Cast *c, unsigned *set, const CastSpec *s)
{
	unsigned b = s->set;

	if (b & SET_FORMAT) c->format = s->v.format;
	if (b & SET_SCALING) c->scaling = s->v.scaling;
	if (b & SET_BLOCK) memcpy(c->block, s->v.block, sizeof c->block);
	if (b & SET_SCALE_FORMAT) c->scale_format = s->v.scale_format;
	if (b & SET_HISTORY) c->history = s->v.history;
	if (b & SET_AMAX_ALGO) c->amax_algo = s->v.amax_algo;
	if (b & SET_MARGIN) c->margin = s->v.margin;
	if (b & SET_POW2) c->pow2_scale = s->v.pow2_scale;
	if (b & SET_EPS) c->amax_eps = s->v.amax_eps;
	if (b & SET_ROUND) c->round = s->v.round;
	if (b & SET_SATURATE) c->saturate = s->v.saturate;
	if (b & SET_NONFINITE) c->nonfinite = s->v.nonfinite;
	knobs_layer(&c->knobs, &s->v.knobs);
	*set |= b;
}

static void
apply_gemm(GemmPolicy *p, unsigned *set, unsigned b, const GemmPolicy *v)
{
	if (b & SET_ACCUM) p->accum = v->accum;
	if (b & SET_PROMOTE) p->promote_every = v->promote_every;
	if (b & SET_ACCUM_BITS) p->accum_bits = v->accum_bits;
	if (b & SET_OUT_FORMAT) p->out_format = v->out_format;
	if (b & SET_BIAS) p->bias = v->bias;
	if (b & SET_OUT_AMAX) {
		p->out_amax = v->out_amax;
		p->out_amax_block[0] = v->out_amax_block[0];
		p->out_amax_block[1] = v->out_amax_block[1];
	}
	if (b & SET_OUT_ACCUMULATE) p->out_accumulate = v->out_accumulate;
	*set |= b;
}

/* One settings level on top of GEMM g's policy. */
static void
apply_settings(GemmPolicy *p, unsigned set[3], Gemm g, const Settings *s)
{
	for (int i = 0; i < 2; i++) {
		Role r = gemm_roles[g][i];
		Cast *c = &p->operand[i];
		apply_cast(c, &set[i], &s->all);
		if (s->hybrid) {
			c->format = r == ROLE_GRAD_OUTPUT ? PRECC_E5M2 : PRECC_E4M3;
			set[i] |= SET_FORMAT;
		}
		apply_cast(c, &set[i], &s->role[r]);
		apply_cast(c, &set[i], &s->gemm[g].all);
		apply_cast(c, &set[i], &s->gemm[g].role[r]);
	}
	apply_gemm(p, &set[2], s->gemm_set, &s->gemm_all);
	apply_gemm(p, &set[2], s->gemm[g].set, &s->gemm[g].v);
}

static void
derive_cast(Cast *c, unsigned set, Role r)
{
	if (!lowp(c->format)) {
		/* High precision: no scale, whatever the levels above said. */
		Cast hp = default_cast;
		hp.format = c->format;
		hp.round = c->round;
		hp.saturate = (set & SET_SATURATE) ? c->saturate : false;
		*c = hp;
		return;
	}
	if (!(set & SET_SATURATE))
		c->saturate = true;
	if (!(set & SET_BLOCK)) {
		static const int none[2] = {0, 0};
		const int *b = none;
		static const int mx[2] = {1, 32}, nv[2] = {1, 16}, row[2] = {1, 0};
		static const int act[2] = {1, 128}, wt[2] = {128, 128};
		switch (c->scaling) {
		case SCALING_MX: b = mx; break;
		case SCALING_NVFP4: b = nv; break;
		case SCALING_ROWWISE: b = row; break;
		case SCALING_BLOCK: b = r == ROLE_WEIGHT ? wt : act; break;
		default: break;
		}
		memcpy(c->block, b, sizeof c->block);
	}
	if (!(set & SET_SCALE_FORMAT))
		c->scale_format = c->scaling == SCALING_MX ? PRECC_E8M0
		                : c->scaling == SCALING_NVFP4 ? PRECC_E4M3 : PRECC_FP32;
}

static void
derive_gemm(GemmPolicy *p, unsigned set)
{
	if (p->accum == ACCUM_PROMOTE && !(set & SET_PROMOTE))
		p->promote_every = 128;
	if (p->accum == ACCUM_FAST && !(set & SET_ACCUM_BITS))
		p->accum_bits = 14;
	if (p->accum != ACCUM_PROMOTE && !(set & SET_PROMOTE))
		p->promote_every = 0;
	if (p->accum != ACCUM_FAST && !(set & SET_ACCUM_BITS))
		p->accum_bits = 0;
}

static GemmPolicy
resolve_gemm(const Recipe *rc, const Rule *rule, Gemm g)
{
	GemmPolicy p = {.accum = ACCUM_FP32, .out_format = PRECC_BF16};
	unsigned set[3] = {0, 0, 0};

	for (int i = 0; i < 2; i++) {
		p.operand[i] = default_cast;
		p.role[i] = gemm_roles[g][i];
	}
	apply_settings(&p, set, g, &rc->base);
	if (rule)
		apply_settings(&p, set, g, &rule->settings);
	for (int i = 0; i < 2; i++)
		derive_cast(&p.operand[i], set[i], p.role[i]);
	derive_gemm(&p, set[2]);
	/* accumulate into main_grad: wgrad's, in fp32 (main_grad is f32) */
	if (g != GEMM_WGRAD)
		p.out_accumulate = false;
	if (p.out_accumulate)
		p.out_format = PRECC_FP32;
	if (!lowp(p.operand[0].format) && !lowp(p.operand[1].format)) {
		/* promote/fast are modes of fp8 tensor-core GEMMs only */
		p.accum = ACCUM_FP32;
		p.promote_every = p.accum_bits = 0;
	}
	return p;
}

static long
gcd(long a, long b)
{
	while (b) {
		long t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static long
lcm(long a, long b)
{
	return a / gcd(a, b) * b;
}

static const char *
fmt_name(precc_format f)
{
	const precc_format_info *fi = precc_format_get(f);

	return fi ? fi->name : "?";
}

typedef struct Need {
	long mult[2];            /* required multiple of in (0) and out (1) */
	bool block[2];           /* ... because of a block scaling */
} Need;

/* What GEMM g under p needs of the layer's in/out features. */
static Need
needs(const GemmPolicy *p, Gemm g)
{
	Need n = {{1, 1}, {false, false}};

	if (!lowp(p->operand[0].format) && !lowp(p->operand[1].format))
		return n;
	n.mult[0] = n.mult[1] = 16;
	for (int i = 0; i < 2; i++) {
		const Cast *c = &p->operand[i];
		char red = extents[g][i][1];
		if (!lowp(c->format) || c->block[1] <= 0 || !red)
			continue;
		int d = red == 'o';
		long m = lcm(n.mult[d], c->block[1]);
		if (m != n.mult[d])
			n.block[d] = true;
		n.mult[d] = m;
	}
	return n;
}

static const char *
block_label(const GemmPolicy *p, Gemm g, int d, char *buf, size_t n)
{
	for (int i = 0; i < 2; i++) {
		const Cast *c = &p->operand[i];
		char red = extents[g][i][1];
		if (red && (red == 'o') == d && lowp(c->format) && c->block[1] > 16) {
			snprintf(buf, n, " (%dx%d blocks)", c->block[0], c->block[1]);
			return buf;
		}
	}
	return "";
}

typedef struct Fail {
	Fallback how;
	precc_format to;
	SrcLoc loc;
	const char *rule;        /* label of the rule that set it, or NULL */
} Fail;

/* Check GEMM g of layer lp; on misalignment apply the fallback. Returns
 * false (with the message in err) for FALLBACK_ERROR. */
static bool
legalize(LayerPlan *lp, Gemm g, const Fail *fb, char *err, size_t errn)
{
	GemmPolicy *p = &lp->gemm[g];
	const Linear *l = lp->linear;
	long dim[2] = {l->in_features, l->out_features};
	static const char *const dname[2] = {"in_features", "out_features"};
	Need n = needs(p, g);
	char why[256] = "", lab[32];
	size_t k = 0;

	for (int d = 0; d < 2; d++)
		if (dim[d] % n.mult[d])
			k += snprintf(why + k, sizeof why - k, "%s%s %ld %% %ld != 0%s",
			              k ? ", " : "", dname[d], dim[d], n.mult[d],
			              n.block[d] ? block_label(p, g, d, lab, sizeof lab) : "");
	if (!k)
		return true;
	char reason[400];
	switch (fb->how) {
	case FALLBACK_ERROR:
		snprintf(err, errn, "%s: %s cannot run in %s·%s: %s, and fallback = \"error\"%s%s%s",
		         l->fqn, gemm_name(g), fmt_name(p->operand[0].format),
		         fmt_name(p->operand[1].format), why, fb->rule ? " (rule '" : "",
		         fb->rule ? fb->rule : "", fb->rule ? "')" : "");
		return false;
	case FALLBACK_PAD: {
		long to[2];
		size_t r = snprintf(reason, sizeof reason, "%s → pad", why);
		for (int d = 0; d < 2; d++) {
			to[d] = (dim[d] + n.mult[d] - 1) / n.mult[d] * n.mult[d];
			if (to[d] != dim[d])
				r += snprintf(reason + r, sizeof reason - r, " %s to %ld",
				              dname[d], to[d]);
			if (to[d] != dim[d] && to[d] > lp->pad[d])
				lp->pad[d] = to[d];
		}
		break;
	}
	default:
		for (int i = 0; i < 2; i++) {
			p->operand[i] = default_cast;
			p->operand[i].format = fb->to;
		}
		if (p->accum != ACCUM_FP32) {
			p->accum = ACCUM_FP32;
			p->promote_every = p->accum_bits = 0;
		}
		snprintf(reason, sizeof reason, "%s → %s", why, fmt_name(fb->to));
		break;
	}
	lp->reason[g] = xstrdup(reason);
	return true;
}

/* A MoE router (kind router) that no rule names keeps its low-precision
 * operands in bf16, unscaled, as DeepSeek-V3 (§3.3.1), Megatron and TE's
 * GroupedLinear users do: top-k routing flips on small logit errors. A
 * rule that matches it (`l.kind == "router"`) decides instead. */
static void
keep_router(LayerPlan *lp, Gemm g)
{
	GemmPolicy *p = &lp->gemm[g];

	if (!lowp(p->operand[0].format) && !lowp(p->operand[1].format))
		return;
	for (int i = 0; i < 2; i++)
		if (lowp(p->operand[i].format))
			p->operand[i] = default_cast;
	p->accum = ACCUM_FP32;
	p->promote_every = p->accum_bits = 0;
	lp->reason[g] = xstrdup("router → bf16 (no rule names it)");
}

static const char *
rule_label(const Rule *r)
{
	return r->label ? r->label : r->pattern ? r->pattern : "(predicate)";
}

Plan *
plan_resolve(const Recipe *rc, const Model *m)
{
	Plan *plan = xcalloc(1, sizeof *plan);

	plan->recipe = rc;
	plan->model = m;
	plan->nlayers = m->nlinears;
	plan->layers = xcalloc(m->nlinears, sizeof *plan->layers);
	for (int li = 0; li < m->nlinears; li++) {
		LayerPlan *lp = &plan->layers[li];
		const Rule *rule = NULL;
		Fail fb = {FALLBACK_HIGH, PRECC_BF16, rc->loc, NULL};

		lp->linear = &m->linears[li];
		for (int r = 0; r < rc->nrules && !rule; r++)
			if (recipe_rule_matches(rc, &rc->rules[r], lp->linear))
				rule = &rc->rules[r];
		if (rule)
			lp->rule = rule_label(rule);
		for (int lvl = 0; lvl < 2; lvl++) {
			const Settings *s = lvl ? (rule ? &rule->settings : NULL) : &rc->base;
			if (!s || !s->has_fallback)
				continue;
			fb.how = s->fallback;
			fb.to = s->fallback_format;
			fb.loc = s->fallback_loc.line > 0 ? s->fallback_loc
			       : lvl ? rule->loc : rc->loc;
			fb.rule = lvl ? lp->rule : NULL;
		}
		for (int g = 0; g < NGEMM; g++) {
			char err[600];
			lp->gemm[g] = resolve_gemm(rc, rule, g);
			if (!rule && lp->linear->kind && !strcmp(lp->linear->kind, "router"))
				keep_router(lp, g);
			if (!legalize(lp, g, &fb, err, sizeof err)) {
				char file[512];
				snprintf(file, sizeof file, "%s",
				         fb.loc.file ? fb.loc.file : rc->path ? rc->path : "recipe");
				plan_free(plan);
				errorf(file, fb.loc.line, "%s", err);
			}
		}
	}
	if (!m->synthetic)
		recipe_check_rules(rc, m);
	return plan;
}

void
plan_free(Plan *plan)
{
	if (!plan)
		return;
	for (int i = 0; i < plan->nlayers; i++)
		for (int g = 0; g < NGEMM; g++)
			free(plan->layers[i].reason[g]);
	free(plan->layers);
	free(plan);
}
