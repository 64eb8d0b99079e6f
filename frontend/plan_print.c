/*
 * plan_print.c — a resolved plan for people (an aligned table, identical
 * layers grouped across layer indices) and for programs (JSON, one object
 * per layer, every resolved field).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "recipe.h"

static const char *const round_names[PRECC_NROUND] = {"rne", "rz", "ru", "sr"};
static const char *const nonfinite_names[NNONFINITE] = {"keep_scale", "skip_step", "error"};
static const char *const fallback_names[NFALLBACK] = {"high", "pad", "error"};
static const char *const loss_names[NLOSS] = {"none", "static", "dynamic"};
static const char *const algo_names[] = {"max", "most_recent"};

static const char *
fmt_name(precc_format f)
{
	const precc_format_info *fi = precc_format_get(f);

	return fi ? fi->name : "?";
}

#define NAME(tab, i) ((unsigned)(i) < sizeof tab / sizeof tab[0] && tab[i] ? tab[i] : "?")

/* ---- equality, for grouping -------------------------------------------- */

static bool
cast_eq(const Cast *a, const Cast *b)
{
	return a->format == b->format && a->scaling == b->scaling &&
	       a->block[0] == b->block[0] && a->block[1] == b->block[1] &&
	       a->scale_format == b->scale_format && a->history == b->history &&
	       a->amax_algo == b->amax_algo && a->margin == b->margin &&
	       a->pow2_scale == b->pow2_scale && a->amax_eps == b->amax_eps &&
	       a->round == b->round && a->saturate == b->saturate &&
	       a->nonfinite == b->nonfinite;
}

static bool
gemm_eq(const GemmPolicy *a, const GemmPolicy *b)
{
	return cast_eq(&a->operand[0], &b->operand[0]) &&
	       cast_eq(&a->operand[1], &b->operand[1]) &&
	       a->role[0] == b->role[0] && a->role[1] == b->role[1] &&
	       a->accum == b->accum && a->promote_every == b->promote_every &&
	       a->accum_bits == b->accum_bits && a->out_format == b->out_format &&
	       a->bias == b->bias && a->out_amax == b->out_amax &&
	       a->out_accumulate == b->out_accumulate &&
	       a->out_amax_block[0] == b->out_amax_block[0] &&
	       a->out_amax_block[1] == b->out_amax_block[1];
}

static bool
str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool
layer_eq(const LayerPlan *a, const LayerPlan *b)
{
	const Linear *x = a->linear, *y = b->linear;

	if (x->in_features != y->in_features || x->out_features != y->out_features ||
	    x->tied != y->tied || x->bias != y->bias || !str_eq(a->rule, b->rule) ||
	    a->pad[0] != b->pad[0] || a->pad[1] != b->pad[1])
		return false;
	for (int g = 0; g < NGEMM; g++)
		if (!gemm_eq(&a->gemm[g], &b->gemm[g]) || !str_eq(a->reason[g], b->reason[g]))
			return false;
	return true;
}

/* ---- grouping: model.layers.[0-31].mlp.up_proj ------------------------- */

/* The first two dot-separated components that are all digits (a block
 * index, then an expert's): offsets, lengths, values; returns how many. */
static int
index_parts(const char *fqn, size_t at[2], size_t len[2], long val[2])
{
	int n = 0;

	for (const char *p = fqn; *p && n < 2;) {
		const char *e = strchr(p, '.');
		size_t k = e ? (size_t)(e - p) : strlen(p);
		if (k > 0 && k < 10 && strspn(p, "0123456789") == k) {
			at[n] = (size_t)(p - fqn);
			len[n] = k;
			val[n] = strtol(p, NULL, 10);
			n++;
		}
		if (!e)
			break;
		p = e + 1;
	}
	return n;
}

typedef struct Group {
	int first;               /* representative layer */
	int nparts;              /* index components in its name (0-2) */
	long (*idx)[2]; int nidx, cap; /* (block, expert) of each layer */
} Group;

/* The same name once the index components are taken out. */
static bool
same_key(const char *a, const char *b)
{
	size_t aa[2], al[2], ba[2], bl[2];
	long v[2];
	int n = index_parts(a, aa, al, v);

	if (!n || index_parts(b, ba, bl, v) != n || aa[0] != ba[0] || strncmp(a, b, aa[0]))
		return false;
	if (n == 2 && (aa[1] - aa[0] - al[0] != ba[1] - ba[0] - bl[0]
	               || strncmp(a + aa[0] + al[0], b + ba[0] + bl[0], aa[1] - aa[0] - al[0])))
		return false;
	return !strcmp(a + aa[n - 1] + al[n - 1], b + ba[n - 1] + bl[n - 1]);
}

static Group *
group_layers(const Plan *plan, bool group, int *ngroups)
{
	Group *gs = xcalloc(plan->nlayers, sizeof *gs);
	int n = 0;

	for (int i = 0; i < plan->nlayers; i++) {
		const LayerPlan *lp = &plan->layers[i];
		size_t at[2], len[2];
		long v[2] = {0, 0};
		int k = n, np = index_parts(lp->linear->fqn, at, len, v);
		if (group && np)
			for (k = n - 1; k >= 0; k--) {   /* recent groups first: MoE blocks */
				const LayerPlan *rep = &plan->layers[gs[k].first];
				if (gs[k].nparts == np && same_key(rep->linear->fqn, lp->linear->fqn) &&
				    layer_eq(rep, lp))
					break;
			}
		if (k < 0)
			k = n;
		if (k == n) {
			gs[n].first = i;
			gs[n].nparts = np;
			n++;
		}
		if (gs[k].nparts) {
			if (gs[k].nidx == gs[k].cap) {
				gs[k].cap = gs[k].cap ? 2 * gs[k].cap : 4;
				gs[k].idx = xrealloc(gs[k].idx, gs[k].cap * sizeof *gs[k].idx);
			}
			gs[k].idx[gs[k].nidx][0] = v[0];
			gs[k].idx[gs[k].nidx][1] = v[1];
			gs[k].nidx++;
		}
	}
	*ngroups = n;
	return gs;
}

static int
cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/* The distinct values of component c of g's indices, sorted, in *out. */
static int
distinct(const Group *g, int c, long *out)
{
	int n = 0;

	for (int i = 0; i < g->nidx; i++)
		out[n++] = g->idx[i][c];
	qsort(out, n, sizeof *out, cmp_long);
	int m = 0;
	for (int i = 0; i < n; i++)
		if (!m || out[m - 1] != out[i])
			out[m++] = out[i];
	return m;
}

static size_t
ranges(char *s, size_t cap, const long *v, int n)
{
	size_t k = (size_t)snprintf(s, cap, "[");

	for (int i = 0; i < n;) {
		int j = i;
		while (j + 1 < n && v[j + 1] == v[j] + 1)
			j++;
		k += snprintf(s + k, cap - k, i ? ",%ld" : "%ld", v[i]);
		if (j > i)
			k += snprintf(s + k, cap - k, "-%ld", v[j]);
		i = j + 1;
	}
	return k + (size_t)snprintf(s + k, cap - k, "]");
}

/* "model.layers.[0-3,5-31].mlp.up_proj", or for experts one entry for
 * blocks x experts, "model.layers.[1-26].mlp.experts.[0-63].up_proj"
 * (when the group's layers are exactly that product; else
 * "... (N of them)"), or the plain name for one layer. */
static char *
group_name(const Plan *plan, const Group *g)
{
	const char *fqn = plan->layers[g->first].linear->fqn;
	size_t at[2], len[2], cap, k;
	long v[2];
	int np;

	if (g->nidx <= 1)
		return xstrdup(fqn);
	np = index_parts(fqn, at, len, v);
	long *b = xmalloc(sizeof *b * (size_t)g->nidx), *e = xmalloc(sizeof *e * (size_t)g->nidx);
	int nb = distinct(g, 0, b), ne = np == 2 ? distinct(g, 1, e) : 1;
	cap = strlen(fqn) + 64 + (size_t)(nb + ne) * 24;
	char *s = xmalloc(cap);
	k = (size_t)snprintf(s, cap, "%.*s", (int)at[0], fqn);
	k += ranges(s + k, cap - k, b, nb);
	if (np == 2) {
		k += (size_t)snprintf(s + k, cap - k, "%.*s", (int)(at[1] - at[0] - len[0]),
		                      fqn + at[0] + len[0]);
		k += ranges(s + k, cap - k, e, ne);
	}
	k += (size_t)snprintf(s + k, cap - k, "%s", fqn + at[np - 1] + len[np - 1]);
	if ((long)nb * ne != g->nidx)
		snprintf(s + k, cap - k, " (%d of them)", g->nidx);
	free(b);
	free(e);
	return s;
}

/* ---- table -------------------------------------------------------------- */

static void
scaling_text(const Cast *c, char *buf, size_t n)
{
	size_t k;

	if (c->format == PRECC_FP32 || c->format == PRECC_TF32 ||
	    c->format == PRECC_FP16 || c->format == PRECC_BF16) {
		snprintf(buf, n, "-");
		return;
	}
	switch (c->scaling) {
	case SCALING_NONE: k = snprintf(buf, n, "unscaled"); break;
	case SCALING_CURRENT: k = snprintf(buf, n, "current"); break;
	case SCALING_DELAYED:
		k = snprintf(buf, n, "delayed/%d%s", c->history,
		             c->amax_algo == AMAX_MOST_RECENT ? "/recent" : "");
		break;
	case SCALING_ROWWISE: k = snprintf(buf, n, "rowwise"); break;
	case SCALING_BLOCK: k = snprintf(buf, n, "%dx%d", c->block[0], c->block[1]); break;
	case SCALING_MX:
		k = c->block[0] == 1 && c->block[1] == 32 ? snprintf(buf, n, "mx")
		    : snprintf(buf, n, "mx/%dx%d", c->block[0], c->block[1]);
		break;
	case SCALING_NVFP4:
		k = c->block[0] == 1 && c->block[1] == 16 ? snprintf(buf, n, "nvfp4")
		    : snprintf(buf, n, "nvfp4/%dx%d", c->block[0], c->block[1]);
		break;
	default: k = snprintf(buf, n, "?"); break;
	}
	if (c->pow2_scale && k < n)
		snprintf(buf + k, n - k, "/pow2");
}

enum { COL_LAYER, COL_SHAPE, COL_GEMM0, COL_RULE = COL_GEMM0 + 3 * NGEMM, COL_NOTE, NCOL };

typedef struct Row { char *cell[NCOL]; } Row;

static void
gemm_cells(const GemmPolicy *p, char *cell[3])
{
	char a[48], b[48], buf[160];

	snprintf(buf, sizeof buf, "%s·%s", fmt_name(p->operand[0].format),
	         fmt_name(p->operand[1].format));
	cell[0] = xstrdup(buf);
	scaling_text(&p->operand[0], a, sizeof a);
	scaling_text(&p->operand[1], b, sizeof b);
	if (!strcmp(a, b))
		snprintf(buf, sizeof buf, "%s", a);
	else
		snprintf(buf, sizeof buf, "%s·%s", a, b);
	cell[1] = xstrdup(buf);
	size_t k = 0;
	switch (p->accum) {
	case ACCUM_FAST: k = snprintf(buf, sizeof buf, "fast"); break;
	case ACCUM_PROMOTE: k = snprintf(buf, sizeof buf, "fp32/%d", p->promote_every); break;
	default: k = snprintf(buf, sizeof buf, "fp32"); break;
	}
	char blk[48] = "";
	if (p->out_amax && (p->out_amax_block[0] || p->out_amax_block[1]))
		snprintf(blk, sizeof blk, "%dx%d", p->out_amax_block[0], p->out_amax_block[1]);
	snprintf(buf + k, sizeof buf - k, "→%s%s%s%s%s", fmt_name(p->out_format),
	         p->bias ? "+bias" : "", p->out_amax ? "+amax" : "", blk,
	         p->out_accumulate ? "+main_grad" : "");
	cell[2] = xstrdup(buf);
}

static char *
note_text(const LayerPlan *lp)
{
	char buf[1400];
	size_t k = 0;
	bool same = true;

	buf[0] = 0;
	if (lp->linear->tied)
		k += snprintf(buf + k, sizeof buf - k, "tied");
	if (lp->linear->bias)
		k += snprintf(buf + k, sizeof buf - k, "%sbias", k ? ", " : "");
	for (int g = 1; g < NGEMM; g++)
		same &= str_eq(lp->reason[g], lp->reason[0]);
	for (int g = 0; g < NGEMM && k < sizeof buf; g++) {
		if (!lp->reason[g] || (same && g > 0))
			continue;
		k += snprintf(buf + k, sizeof buf - k, "%s%s%s", k ? "; " : "",
		              same && NGEMM > 1 ? "" : gemm_name(g), same ? "" : ": ");
		k += snprintf(buf + k, sizeof buf - k, "%s", lp->reason[g]);
	}
	return xstrdup(k ? buf : "");
}

/* Display width of UTF-8 text: code points, not bytes. */
static int
width(const char *s)
{
	int w = 0;

	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

static void
pad(FILE *f, const char *s, int w)
{
	fputs(s, f);
	for (int i = width(s); i < w; i++)
		fputc(' ', f);
}

static void
training_line(const TrainingPolicy *t, FILE *f)
{
	fprintf(f, "training: loss scaling %s", NAME(loss_names, t->loss_scale));
	if (t->loss_scale == LOSS_STATIC)
		fprintf(f, " (%g)", t->loss_scale_init);
	else if (t->loss_scale == LOSS_DYNAMIC)
		fprintf(f, " (init %g, x%g every %d steps, x%g on overflow)", t->loss_scale_init,
		        t->growth_factor, t->growth_interval, t->backoff_factor);
	fprintf(f, "; master weights %s, optimizer state %s%s\n",
	        fmt_name(t->master_weights), fmt_name(t->optimizer_state),
	        t->stochastic_round_updates ? "; stochastic rounding of updates" : "");
}

static void
print_table(const Plan *plan, bool group, FILE *f)
{
	int ng, nblocks = 0;
	Group *gs = group_layers(plan, group, &ng);
	Row *rows = xcalloc(ng + 1, sizeof *rows);
	int w[NCOL] = {0};
	static const char *const head[NCOL] = {
		"layer", "shape", "fprop", "", "", "dgrad", "", "", "wgrad", "", "", "rule", "",
	};
	long maxidx = -1;

	for (int i = 0; i < NCOL; i++)
		rows[0].cell[i] = xstrdup(i == COL_RULE && !plan->recipe->nrules ? "" : head[i]);
	for (int i = 0; i < ng; i++) {
		const LayerPlan *lp = &plan->layers[gs[i].first];
		Row *r = &rows[i + 1];
		char buf[64];
		r->cell[COL_LAYER] = group_name(plan, &gs[i]);
		snprintf(buf, sizeof buf, "%ld→%ld", lp->linear->in_features,
		         lp->linear->out_features);
		r->cell[COL_SHAPE] = xstrdup(buf);
		for (int g = 0; g < NGEMM; g++)
			gemm_cells(&lp->gemm[g], &r->cell[COL_GEMM0 + 3 * g]);
		r->cell[COL_RULE] = xstrdup(lp->rule ? lp->rule
		                            : plan->recipe->nrules ? "-" : "");
		r->cell[COL_NOTE] = note_text(lp);
		for (int j = 0; j < gs[i].nidx; j++)
			if (gs[i].idx[j][0] > maxidx)
				maxidx = gs[i].idx[j][0];
	}
	/* Distinct layer indices: "32 layers". */
	if (maxidx >= 0 && maxidx < (1 << 20)) {
		char *seen = xcalloc(maxidx + 1, 1);
		for (int i = 0; i < ng; i++)
			for (int j = 0; j < gs[i].nidx; j++)
				if (!seen[gs[i].idx[j][0]]) {   /* a flag: a count would wrap */
					seen[gs[i].idx[j][0]] = 1;
					nblocks++;
				}
		free(seen);
	}
	for (int i = 1; i <= ng; i++)
		for (int c = 0; c < NCOL; c++)
			if (width(rows[i].cell[c]) > w[c])
				w[c] = width(rows[i].cell[c]);
	w[COL_LAYER] = w[COL_LAYER] > 5 ? w[COL_LAYER] : 5;
	w[COL_SHAPE] = w[COL_SHAPE] > 5 ? w[COL_SHAPE] : 5;

	const Recipe *rc = plan->recipe;
	fprintf(f, "recipe %s", rc->name ? rc->name : "?");
	if (rc->path)
		fprintf(f, " (%s)", rc->path);
	fprintf(f, " × model %s: ", plan->model->name ? plan->model->name : "?");
	if (nblocks)
		fprintf(f, "%d layers, ", nblocks);
	fprintf(f, "%d linears\n", plan->model->nlinears);
	if (rc->description && *rc->description)
		fprintf(f, "  %s\n", rc->description);
	fputc('\n', f);
	for (int i = 0; i <= ng; i++) {
		Row *r = &rows[i];
		int last = NCOL - 1;
		while (last > 0 && (!*r->cell[last] || !w[last]))
			last--;
		for (int c = 0; c <= last; c++) {
			bool gemm = c >= COL_GEMM0 && c < COL_RULE;
			if (!w[c])
				continue;
			if (i == 0 && gemm) {
				/* One heading over each GEMM's three sub-columns. */
				if ((c - COL_GEMM0) % 3 == 0) {
					int span = w[c] + 1 + w[c + 1] + 1 + w[c + 2];
					if (c + 2 >= last) {
						fputs(r->cell[c], f);
						break;
					}
					pad(f, r->cell[c], span);
					fputs("  ", f);
				}
				continue;
			}
			if (c == last) {
				fputs(r->cell[c], f);
				break;
			}
			pad(f, r->cell[c], w[c]);
			fputs(gemm && (c - COL_GEMM0) % 3 != 2 ? " " : "  ", f);
		}
		fputc('\n', f);
	}
	fputc('\n', f);
	training_line(&rc->training, f);
	fputs("per GEMM: A·B formats (fprop input·weight, dgrad grad_output·weight, "
	      "wgrad grad_output·input), scaling, accumulation→output\n"
	      "scaling:  current = tensorwise just-in-time; delayed/N = tensorwise, N-step amax "
	      "history;\n"
	      "          rowwise = one scale per row; RxC = blockwise tiles; mx = 1x32 blocks, e8m0 "
	      "scales;\n"
	      "          nvfp4 = 1x16 blocks, e4m3 scales; /pow2 = power-of-two scales; "
	      "- = none (high precision)\n"
	      "accum:    fp32; fast = fp8 fast accumulation; fp32/N = promoted to fp32 every N "
	      "K-elements\n", f);

	for (int i = 0; i <= ng; i++)
		for (int c = 0; c < NCOL; c++)
			free(rows[i].cell[c]);
	free(rows);
	for (int i = 0; i < ng; i++)
		free(gs[i].idx);
	free(gs);
}

void
plan_print_table(const Plan *plan, FILE *f)
{
	print_table(plan, true, f);
}

void
plan_print_table_flat(const Plan *plan, FILE *f)
{
	print_table(plan, false, f);
}

/* ---- JSON --------------------------------------------------------------- */

static cJSON *
cast_json(const Cast *c, Role r, Gemm g)
{
	cJSON *o = cJSON_CreateObject(), *b = cJSON_CreateArray();

	cJSON_AddStringToObject(o, "role", role_name(r));
	cJSON_AddStringToObject(o, "format", fmt_name(c->format));
	cJSON_AddStringToObject(o, "scaling", scaling_name(c->scaling));
	cJSON_AddItemToArray(b, cJSON_CreateNumber(c->block[0]));
	cJSON_AddItemToArray(b, cJSON_CreateNumber(c->block[1]));
	cJSON_AddItemToObject(o, "block", b);
	cJSON_AddStringToObject(o, "scale_format", fmt_name(c->scale_format));
	cJSON_AddNumberToObject(o, "history", c->history);
	cJSON_AddStringToObject(o, "amax_algo", NAME(algo_names, c->amax_algo));
	cJSON_AddNumberToObject(o, "margin", c->margin);
	cJSON_AddBoolToObject(o, "pow2", c->pow2_scale);
	if (lower_cast_uses(c, g, LOWER_AMAX_EPS))   /* an inherited eps mx ignores: not shown */
		cJSON_AddNumberToObject(o, "amax_eps", c->amax_eps);
	cJSON_AddStringToObject(o, "round", NAME(round_names, c->round));
	cJSON_AddBoolToObject(o, "saturate", c->saturate);
	cJSON_AddStringToObject(o, "nonfinite", NAME(nonfinite_names, c->nonfinite));
	/* the reference knobs as resolved, those the operand's IR uses */
	for (int k = 0; k < NKNOB; k++)
		if (lower_cast_uses(c, g, k))
			cJSON_AddStringToObject(o, knob_keys[k], knob_value_name(k, c->knobs.v[k]));
	return o;
}

static cJSON *
gemm_json(const GemmPolicy *p, Gemm g, const char *reason)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddItemToObject(o, "a", cast_json(&p->operand[0], p->role[0], g));
	cJSON_AddItemToObject(o, "b", cast_json(&p->operand[1], p->role[1], g));
	cJSON_AddStringToObject(o, "accum", accum_name(p->accum));
	cJSON_AddNumberToObject(o, "promote_every", p->promote_every);
	cJSON_AddNumberToObject(o, "accum_bits", p->accum_bits);
	cJSON_AddStringToObject(o, "out", fmt_name(p->out_format));
	cJSON_AddBoolToObject(o, "bias", p->bias);
	cJSON_AddBoolToObject(o, "out_amax", p->out_amax);
	if (p->out_accumulate)
		cJSON_AddBoolToObject(o, "out_accumulate", true);
	if (p->out_amax && (p->out_amax_block[0] || p->out_amax_block[1])) {
		int blk[2] = {p->out_amax_block[0], p->out_amax_block[1]};
		cJSON_AddItemToObject(o, "out_amax_block", cJSON_CreateIntArray(blk, 2));
	}
	if (reason)
		cJSON_AddStringToObject(o, "fallback", reason);
	else
		cJSON_AddNullToObject(o, "fallback");
	return o;
}

static cJSON *
layer_json(const Plan *plan, const LayerPlan *lp)
{
	cJSON *o = cJSON_CreateObject();
	int root = model_input_root(plan->model, (int)(lp->linear - plan->model->linears));

	cJSON_AddStringToObject(o, "fqn", lp->linear->fqn);
	cJSON_AddNumberToObject(o, "in_features", lp->linear->in_features);
	cJSON_AddNumberToObject(o, "out_features", lp->linear->out_features);
	cJSON_AddBoolToObject(o, "tied", lp->linear->tied);
	cJSON_AddBoolToObject(o, "bias", lp->linear->bias);
	if (root >= 0)
		cJSON_AddStringToObject(o, "shares_input", plan->model->linears[root].fqn);
	else
		cJSON_AddNullToObject(o, "shares_input");
	if (lp->linear->group) {   /* an expert's slice of a fused 3-D parameter */
		const Linear *l = lp->linear;
		char key[256];
		model_fused_param(l, key, sizeof key);
		cJSON_AddStringToObject(o, "param", key);
		cJSON *sh = cJSON_AddArrayToObject(o, "param_shape");
		cJSON_AddItemToArray(sh, cJSON_CreateNumber(l->group));
		cJSON_AddItemToArray(sh, cJSON_CreateNumber(l->param_in_out ? l->in_features
		                                                            : l->out_features));
		cJSON_AddItemToArray(sh, cJSON_CreateNumber(l->param_in_out ? l->out_features
		                                                            : l->in_features));
	}
	if (lp->rule)
		cJSON_AddStringToObject(o, "rule", lp->rule);
	else
		cJSON_AddNullToObject(o, "rule");
	if (lp->pad[0] || lp->pad[1]) {
		cJSON *p = cJSON_CreateObject();
		cJSON_AddNumberToObject(p, "in_features", lp->pad[0] ? lp->pad[0]
		                                          : lp->linear->in_features);
		cJSON_AddNumberToObject(p, "out_features", lp->pad[1] ? lp->pad[1]
		                                           : lp->linear->out_features);
		cJSON_AddItemToObject(o, "pad", p);
	} else
		cJSON_AddNullToObject(o, "pad");
	for (int g = 0; g < NGEMM; g++)
		cJSON_AddItemToObject(o, gemm_name(g), gemm_json(&lp->gemm[g], g, lp->reason[g]));
	return o;
}

static void
emit(FILE *f, const char *key, cJSON *o, bool comma)
{
	char *s = cJSON_PrintUnformatted(o);

	fprintf(f, "\"%s\": %s%s\n", key, s, comma ? "," : "");
	free(s);
	cJSON_Delete(o);
}

static cJSON *
str_or_null(const char *s)
{
	return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

/* One top-level object; each layer on its own line, so tests can grep. */
void
plan_print_json(const Plan *plan, FILE *f)
{
	const Recipe *rc = plan->recipe;
	const TrainingPolicy *t = &rc->training;
	cJSON *o;

	fputs("{\n", f);
	o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "name", str_or_null(rc->name));
	char *path = text_lossy(rc->path);   /* a file name need not be UTF-8; JSON must */
	cJSON_AddItemToObject(o, "path", str_or_null(path));
	free(path);
	cJSON_AddItemToObject(o, "description", str_or_null(rc->description));
	cJSON_AddNumberToObject(o, "rules", rc->nrules);
	emit(f, "recipe", o, true);

	o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "name", str_or_null(plan->model->name));
	cJSON_AddNumberToObject(o, "linears", plan->model->nlinears);
	emit(f, "model", o, true);

	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "loss_scale", NAME(loss_names, t->loss_scale));
	cJSON_AddNumberToObject(o, "loss_scale_init", t->loss_scale_init);
	cJSON_AddNumberToObject(o, "growth_factor", t->growth_factor);
	cJSON_AddNumberToObject(o, "backoff_factor", t->backoff_factor);
	cJSON_AddNumberToObject(o, "growth_interval", t->growth_interval);
	cJSON_AddStringToObject(o, "master_weights", fmt_name(t->master_weights));
	cJSON_AddStringToObject(o, "optimizer_state", fmt_name(t->optimizer_state));
	cJSON_AddBoolToObject(o, "stochastic_round_updates", t->stochastic_round_updates);
	emit(f, "training", o, true);

	/* As written in the recipe: a format, "pad" or "error". */
	const Settings *s = &rc->base;
	fprintf(f, "\"fallback\": \"%s\",\n",
	        !s->has_fallback ? "bf16" : s->fallback == FALLBACK_HIGH
	        ? fmt_name(s->fallback_format) : NAME(fallback_names, s->fallback));

	fputs("\"layers\": [\n", f);
	for (int i = 0; i < plan->nlayers; i++) {
		cJSON *l = layer_json(plan, &plan->layers[i]);
		char *txt = cJSON_PrintUnformatted(l);
		fprintf(f, "%s%s\n", txt, i + 1 < plan->nlayers ? "," : "");
		free(txt);
		cJSON_Delete(l);
	}
	fputs("]\n}\n", f);
}
