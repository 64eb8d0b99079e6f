/*
 * recipe_check.c — combinations. Layer the levels of a recipe (and each
 * rule on top of it) exactly as plan.c does, and reject what no kernel can
 * do; a contradiction is reported at the more specific of its settings.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>
#include "recipe.h"
#include "sandbox.h"
#include "recipe_lua.h"
#include "ir.h"

/* ---- combinations ------------------------------------------------------------
 * Layer the levels as plan.c does and check what they add up to; a
 * contradiction is reported at the more specific of the two settings. */

typedef struct Eff {
	Cast v;
	int rank[NSET_CAST], line[NSET_CAST];
	int krank[NKNOB];         /* the level each knob was written at, or -1 */
} Eff;

static void
copy_field(Cast *d, const Cast *s, unsigned b)
{
	switch (b) {
	case SET_FORMAT: d->format = s->format; break;
	case SET_SCALING: d->scaling = s->scaling; break;
	case SET_BLOCK: memcpy(d->block, s->block, sizeof d->block); break;
	case SET_SCALE_FORMAT: d->scale_format = s->scale_format; break;
	case SET_HISTORY: d->history = s->history; break;
	case SET_AMAX_ALGO: d->amax_algo = s->amax_algo; break;
	case SET_MARGIN: d->margin = s->margin; break;
	case SET_POW2: d->pow2_scale = s->pow2_scale; break;
	case SET_EPS: d->amax_eps = s->amax_eps; break;
	case SET_ROUND: d->round = s->round; break;
	case SET_SATURATE: d->saturate = s->saturate; break;
	case SET_NONFINITE: d->nonfinite = s->nonfinite; break;
	}
}

static void
layer(Eff *e, const CastSpec *cs, int rank)
{
	knobs_layer(&e->v.knobs, &cs->v.knobs);
	for (int k = 0; k < NKNOB; k++)
		if (cs->v.knobs.set & (1u << k))
			e->krank[k] = rank;
	for (int i = 0; i < NSET_CAST; i++)
		if (cs->set & (1u << i)) {
			copy_field(&e->v, &cs->v, 1u << i);
			e->rank[i] = rank;
			e->line[i] = cs->line[i];
		}
}

static void
layer_settings(Eff *e, const Settings *s, Gemm g, Role r, int base)
{
	layer(e, &s->all, base);
	if (s->hybrid) {
		e->v.format = r == ROLE_GRAD_OUTPUT ? PRECC_E5M2 : PRECC_E4M3;
		e->rank[rc_bit(SET_FORMAT)] = base;
		e->line[rc_bit(SET_FORMAT)] = s->all.line[rc_bit(SET_FORMAT)];
	}
	layer(e, &s->role[r], base + 1);
	layer(e, &s->gemm[g].all, base + 2);
	layer(e, &s->gemm[g].role[r], base + 3);
}

static int
later(const Eff *e, unsigned a, unsigned b, int dflt)
{
	int i = rc_bit(a), j = rc_bit(b);
	int l = e->rank[i] >= e->rank[j] ? e->line[i] : e->line[j];
	return l ? l : dflt;
}

static void
check_cast(Loader *ld, const Eff *e, Gemm g, Role r, int dflt)
{
	const Cast *c = &e->v;
	char where[64];
	snprintf(where, sizeof where, "%s in %s", rc_role_names[r], rc_gemm_names[g]);
	int F = rc_bit(SET_FORMAT), S = rc_bit(SET_SCALING), H = rc_bit(SET_HISTORY), A = rc_bit(SET_AMAX_ALGO);

	if (c->scaling == SCALING_NONE)
		return;
	if (!rc_lowp(c->format)) {
		if (e->rank[S] >= e->rank[F])
			fail(ld, e->line[S] ? e->line[S] : dflt, "%s scaling needs an fp8, fp6 or fp4 format, "
			     "but %s is %s%s", rc_scaling_names[c->scaling], where, rc_fmtname(c->format),
			     e->rank[F] < 0 ? " (the default)" : "");
		return;
	}
	int sfl = later(e, SET_SCALE_FORMAT, SET_SCALING, dflt);
	switch (c->scaling) {
	case SCALING_MX:
		if (c->scale_format != PRECC_E8M0)
			fail(ld, sfl, "mx scaling uses e8m0 scales (OCP MX), not %s", rc_fmtname(c->scale_format));
		break;
	case SCALING_NVFP4:
		if (c->format != PRECC_E2M1)
			fail(ld, later(e, SET_FORMAT, SET_SCALING, dflt), "nvfp4 scaling needs format e2m1, "
			     "but %s is %s", where, rc_fmtname(c->format));
		if (c->scale_format != PRECC_E4M3)
			fail(ld, sfl, "nvfp4 scaling uses e4m3 block scales, not %s", rc_fmtname(c->scale_format));
		break;
	default:
		if (c->scale_format == PRECC_E4M3)
			fail(ld, sfl, "e4m3 scales are for nvfp4 scaling; %s scaling takes fp32 or e8m0 scales",
			     rc_scaling_names[c->scaling]);
		break;
	}
	for (int k = H; k <= A; k++)
		if (e->rank[k] >= 0 && c->scaling != SCALING_DELAYED && e->rank[k] >= e->rank[S])
			fail(ld, e->line[k] ? e->line[k] : dflt, "'%s' applies only to delayed scaling, "
			     "but %s uses %s scaling", k == H ? "history" : "algo", where,
			     rc_scaling_names[c->scaling]);
	/* A knob's diagnostic goes to the more specific of the knob and what it
	 * contradicts (the scaling; scale_form's pow2 or margin): a rule that
	 * inherits a knob and changes the scaling is reported in the rule. */
	Cast at = *c;
	int P = rc_bit(SET_POW2), M = rc_bit(SET_MARGIN);
	for (int k = 0; k < NKNOB; k++) {
		int by = S;
		if (k == KNOB_SCALE_FORM && c->scaling != SCALING_DELAYED && c->scaling != SCALING_MX
		    && c->scaling != SCALING_NVFP4)
			by = c->pow2_scale && (!c->margin || e->rank[P] >= e->rank[M]) ? P : M;
		if ((c->knobs.set & (1u << k)) && e->rank[by] > e->krank[k])
			at.knobs.line[k] = e->line[by] ? e->line[by] : dflt;
	}
	rc_check_reference(ld, &at, where, dflt);
}

void
rc_check_level(Loader *ld, const Settings *base, const Settings *rule)
{
	int dflt = rule ? rule->line : base->line;

	for (int g = 0; g < NGEMM; g++) {
		Eff e[2];
		for (int i = 0; i < 2; i++) {
			Role r = rc_gemm_roles[g][i];
			memset(&e[i], 0, sizeof e[i]);
			for (int k = 0; k < NSET_CAST; k++)
				e[i].rank[k] = -1;
			for (int k = 0; k < NKNOB; k++)
				e[i].krank[k] = -1;
			e[i].v.format = PRECC_BF16;
			e[i].v.scale_format = PRECC_FP32;
			layer_settings(&e[i], base, g, r, 0);
			if (rule)
				layer_settings(&e[i], rule, g, r, 4);
			check_cast(ld, &e[i], g, r, dflt);
		}
		int F = rc_bit(SET_FORMAT);
		if (rc_lowp(e[0].v.format) != rc_lowp(e[1].v.format)) {
			int i = e[0].rank[F] >= e[1].rank[F] ? 0 : 1;
			fail(ld, e[i].line[F] ? e[i].line[F] : dflt, "%s mixes %s %s with %s %s: both operands "
			     "of a GEMM are fp8/fp6/fp4 or neither", rc_gemm_names[g],
			     rc_role_names[rc_gemm_roles[g][0]], rc_fmtname(e[0].v.format),
			     rc_role_names[rc_gemm_roles[g][1]], rc_fmtname(e[1].v.format));
		}
		/* accumulation */
		const Settings *lv[4] = {base, base, rule, rule};
		Accum acc = ACCUM_FP32;
		int every = 128;          /* plan.c's default for promote */
		int rank[NSET_GEMM], line[NSET_GEMM];
		for (int k = 0; k < NSET_GEMM; k++)
			rank[k] = -1, line[k] = 0;
		for (int l = 0; l < 4; l++) {
			if (!lv[l])
				continue;
			unsigned set = l % 2 ? lv[l]->gemm[g].set : lv[l]->gemm_set;
			const GemmPolicy *p = l % 2 ? &lv[l]->gemm[g].v : &lv[l]->gemm_all;
			const int *ln = l % 2 ? lv[l]->gemm[g].line : lv[l]->gemm_line;
			for (int k = 0; k < NSET_GEMM; k++)
				if (set & (1u << k)) {
					rank[k] = l;
					line[k] = ln[k];
					if (k == rc_bit(SET_ACCUM))
						acc = p->accum;
					if (k == rc_bit(SET_PROMOTE))
						every = p->promote_every;
				}
		}
		int A = rc_bit(SET_ACCUM), P = rc_bit(SET_PROMOTE), B = rc_bit(SET_ACCUM_BITS);
		if (rank[P] >= 0 && acc != ACCUM_PROMOTE && rank[P] >= rank[A])
			fail(ld, line[P] ? line[P] : dflt, "'promote_every' applies to accumulate = promote, "
			     "but %s accumulates %s", rc_gemm_names[g], acc == ACCUM_FAST ? "fast" : "in fp32");
		/* Promotion applies the scales once per chunk, so each chunk must
		 * lie inside one scale block along K (DeepGEMM: 128 in 1x128). */
		for (int i = 0; acc == ACCUM_PROMOTE && i < 2; i++) {
			const Cast *c = &e[i].v;
			long kb = c->scaling == SCALING_BLOCK && c->block[1] <= 0 ? 128 : c->block[1];
			bool blocked = c->scaling == SCALING_BLOCK || c->scaling == SCALING_MX
			            || c->scaling == SCALING_NVFP4;
			if (!blocked || !rc_lowp(c->format) || kb <= 0 || kb % every == 0)
				continue;
			int ln = rank[P] >= 0 ? line[P] : line[A];
			fail(ld, ln ? ln : dflt, "promote every %d applies the scales at each promotion, so "
			     "K blocks must be multiples of %d, but %s in %s uses %s scaling with %dx%d blocks",
			     every, every, rc_role_names[rc_gemm_roles[g][i]], rc_gemm_names[g],
			     rc_scaling_names[c->scaling], c->block[0] > 0 ? c->block[0] : 1, (int)kb);
		}
		if (rank[B] >= 0 && acc != ACCUM_FAST && rank[B] >= rank[A])
			fail(ld, line[B] ? line[B] : dflt, "'accum_bits' applies to accumulate = \"fast\", "
			     "but %s accumulates %s", rc_gemm_names[g], acc == ACCUM_PROMOTE ? "with promotion" : "in fp32");
	}
}

/* ---- rules that match nothing ------------------------------------------ */

/* A pattern's literal text, for a near-miss name: "^lm_haed$" -> "lm_haed",
 * "%.q_proj$" -> ".q_proj". */
static void
pattern_word(const char *pat, char *out, size_t n)
{
	size_t k = 0;

	for (const char *p = pat; *p && k + 1 < n; p++) {
		if ((*p == '^' && p == pat) || (*p == '$' && !p[1]))
			continue;
		if (*p == '%' && p[1])
			p++;
		out[k++] = *p;
	}
	out[k] = 0;
}

/* The closest module name to a pattern that matches nothing: the whole
 * FQNs and their last one or two components. */
static const char *
near_name(const Model *m, const char *pat)
{
	char word[256];
	const char *best = NULL;
	NameTab seen = {0};

	if (!pat)
		return NULL;
	pattern_word(pat, word, sizeof word);
	int cap = 3 * m->nlinears + 1, n = 0;
	const char **cand = xmalloc(sizeof *cand * (size_t)cap);
	for (int i = 0; i < m->nlinears; i++) {
		const char *f = m->linears[i].fqn, *d1 = strrchr(f, '.'), *d2 = NULL;
		if (d1)
			for (d2 = d1 - 1; d2 > f && *d2 != '.'; d2--)
				;
		const char *c[3] = {f, d1 ? d1 + 1 : NULL, d2 && *d2 == '.' ? d2 + 1 : NULL};
		for (int k = 0; k < 3; k++)
			if (c[k] && ir_names_put(&seen, c[k], 0) < 0)
				cand[n++] = c[k];
	}
	best = suggest(word, cand, n);
	free(cand);
	ir_names_free(&seen);
	return best;
}

void
recipe_check_rules(const Recipe *rc, const Model *m)
{
	int nr = rc->nrules;
	int *any = xcalloc((size_t)nr + 1, sizeof *any);   /* layers it matches */
	int *won = xcalloc((size_t)nr + 1, sizeof *won);   /* of those, first match */
	int *by = xcalloc((size_t)nr + 1, sizeof *by);     /* a rule that took one */

	for (int i = 0; i < nr; i++)
		by[i] = -1;
	for (int li = 0; li < m->nlinears; li++) {
		int first = -1;
		for (int r = 0; r < nr; r++) {
			if (!recipe_rule_matches(rc, &rc->rules[r], &m->linears[li]))
				continue;
			any[r]++;
			if (first < 0) {
				first = r;
				won[r]++;
			} else if (by[r] < 0)
				by[r] = first;
		}
	}
	for (int r = 0; r < nr; r++) {
		const Rule *u = &rc->rules[r];
		const char *what = u->pattern ? u->pattern : u->label ? u->label : "(predicate)";
		if (!any[r]) {
			const char *sg = near_name(m, u->pattern);
			warnf(u->loc.file, u->loc.line, "rule '%s' matches no layer of %s%s%s%s", what,
			      m->name ? m->name : "the model", sg ? " (did you mean '" : "", sg ? sg : "",
			      sg ? "'?)" : "");
		} else if (!won[r])
			warnf(u->loc.file, u->loc.line, "rule '%s' matches %d layer%s, all taken by "
			      "earlier rules (first: the rule at line %d), so it never applies", what,
			      any[r], any[r] == 1 ? "" : "s", rc->rules[by[r]].loc.line);
	}
	free(any);
	free(won);
	free(by);
	diag_werror_exit();
}
