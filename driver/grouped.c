/*
 * grouped.c — the expert groups of a build (issue 29): lower_grouped's
 * funcs (frontend/lower.c: one gemm_grouped func per grouped GEMM of an
 * MoE block's experts) moved into the build's module, so the passes and
 * codegen make their kernels beside the per-layer ones, and what the
 * manifest says of each group (artifacts.c, "groups"): its name (the
 * fused parameter's key, which is the group's step func after merge), its
 * experts, which GEMMs are grouped, each expert's W [n, k] and the
 * experts' own layers (which still run what is not grouped: dgrad).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "recipe.h"

static const char *const gemm_suffix[3] = {".fprop", ".dgrad", ".wgrad"};

/* The group of func name in b->groups (its name, without the suffix),
 * added when new; -1 when the name has no GEMM suffix. */
static BuildGroup *
group_of(Build *b, const char *fname, int *g)
{
	size_t n = strlen(fname);

	for (*g = 0; *g < 3; (*g)++) {
		size_t s = strlen(gemm_suffix[*g]);
		if (n > s && !strcmp(fname + n - s, gemm_suffix[*g])) {
			n -= s;
			break;
		}
	}
	if (*g == 3)
		return NULL;
	for (int i = 0; i < b->ngroups; i++)
		if (strlen(b->groups[i].name) == n && !strncmp(b->groups[i].name, fname, n))
			return &b->groups[i];
	b->groups = xrealloc(b->groups, (size_t)(b->ngroups + 1) * sizeof *b->groups);
	BuildGroup *bg = &b->groups[b->ngroups++];
	memset(bg, 0, sizeof *bg);
	bg->name = xmalloc(n + 1);
	memcpy(bg->name, fname, n);
	bg->name[n] = 0;
	return bg;
}

/* The experts' own layers of group bg, from the plan: the linears whose
 * fused parameter key is the group's name (their expert index orders
 * them). */
static void
group_experts(BuildGroup *bg, const Plan *plan)
{
	bg->expert = xcalloc((size_t)bg->experts + 1, sizeof *bg->expert);
	for (int i = 0; i < plan->nlayers; i++) {
		const Linear *li = plan->layers[i].linear;
		char key[256];
		if (li->expert < 0 || li->expert >= bg->experts || bg->expert[li->expert])
			continue;
		model_fused_param(li, key, sizeof key);
		if (!strcmp(key, bg->name))
			bg->expert[li->expert] = li->fqn;
	}
	for (int e = 0; e < bg->experts; e++)
		if (!bg->expert[e])
			die("grouped: group %s has no layer for expert %d", bg->name, e);
}

int
grouped_lower(Build *b, const Plan *plan, Module *m, int record)
{
	Module *gm = lower_grouped(plan, b->layer);
	int nf = gm->nfn;

	for (int k = 0; k < gm->nfn; k++) {
		const Func *f = gm->fn[k];
		int g;
		BuildGroup *bg = record ? group_of(b, f->name, &g) : NULL;
		for (int i = 0; bg && i < f->nins; i++) {
			const Ins *in = &f->ins[i];
			if (in->op != OP_param)
				continue;
			const Type *t = &f->val[in->res].type;
			if (t->index)
				bg->experts = (int)t->dim[0];
			else if (in->param == PARAM_WEIGHT)
				bg->wrows = t->dim[0], bg->k = t->dim[1];
		}
		if (bg)
			bg->gemm[g] = 1;
		Func *c = ir_func_new(m, "");
		free(c->name);
		*c = *gm->fn[k];
		free(gm->fn[k]);
	}
	gm->nfn = 0;
	ir_module_free(gm);
	if (record) {
		ir_names_init(&b->group_names, (size_t)b->ngroups + 1);
		b->group_names_on = 1;
	}
	for (int i = 0; record && i < b->ngroups; i++) {
		BuildGroup *bg = &b->groups[i];
		ir_names_put(&b->group_names, bg->name, i);
		if (bg->experts < 1 || bg->wrows % bg->experts)
			die("grouped: group %s: %d experts of a [%ld, %ld] weight", bg->name,
			    bg->experts, bg->wrows, bg->k);
		bg->n = bg->wrows / bg->experts;
		group_experts(bg, plan);
	}
	return nf;
}

int
grouped_find(const Build *b, const char *name)
{
	return b->ngroups ? ir_names_get(&b->group_names, name) : -1;
}

void
grouped_free(Build *b)
{
	for (int i = 0; i < b->ngroups; i++) {
		free(b->groups[i].name);
		free(b->groups[i].expert);
	}
	free(b->groups);
	if (b->group_names_on)
		ir_names_free(&b->group_names);
	b->group_names_on = 0;
	b->groups = NULL;
	b->ngroups = 0;
}
