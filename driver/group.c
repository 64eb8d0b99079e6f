/*
 * group.c — layers that lower to the same IR are lowered, passed and
 * scheduled once, then copied. DeepSeek-V3 has 45,091 linears but 11
 * distinct layers under deepseek_v3.lua (256 routed experts per block
 * share a shape and a policy); running the passes on every one made a
 * build take over half a minute and 3.5 GB, where the passes' output is
 * the same funcs under other names.
 *
 * Two layers are alike when their lowered funcs print the same text once
 * each layer's FQN is taken out (names, comments, attributes, param kinds
 * all count), or, without lowering, when what lowering reads of them is
 * the same bytes (plan_key). precc build lowers the representative of
 * each class (its first layer in model order), runs the passes, then
 * group_expand puts a copy of the representative's step func, renamed,
 * where each other layer of the class stands, and recounts the calls
 * dedupe counted. The module is then what lowering every layer would
 * have made: tests/lit/build/group.test builds models both ways
 * (PRECC_NO_GROUP=1 turns this off) and compares every file byte for
 * byte. A pass that looks across layers (none does yet, beyond dedupe)
 * would have to run after group_expand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group.h"

/* FQNs shorter than this could occur in the IR as something else (a
 * layer called "x" and the value %x): such layers stay their own class. */
enum { MINFQN = 4 };

/* s with every occurrence of from replaced by to (malloc'ed). */
static char *
replace(const char *s, const char *from, const char *to)
{
	size_t lf = strlen(from), lt = strlen(to), n = 0;
	const char *p;

	for (p = s; (p = strstr(p, from)); p += lf)
		n++;
	char *out = xmalloc(strlen(s) + n * (lt > lf ? lt - lf : 0) + 1), *o = out;
	for (p = s;;) {
		const char *q = strstr(p, from);
		if (!q) {
			strcpy(o, p);
			break;
		}
		memcpy(o, p, (size_t)(q - p));
		o += q - p;
		memcpy(o, to, lt);
		o += lt;
		p = q + lf;
	}
	return out;
}

/* The funcs of one layer, as lower_plan makes them. */
static Module *
lower_one(const Plan *plan, int i)
{
	Plan one = *plan;

	one.layers = &plan->layers[i];
	one.nlayers = 1;
	return lower_plan(&one, NULL);
}

/* The layer's lowered text with its FQN taken out. */
static char *
layer_key(const Module *m, const char *fqn)
{
	char *s = NULL, *k;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);

	if (!f)
		die("out of memory");
	ir_print_module(f, m);
	fclose(f);
	k = replace(s, fqn, "\x01");
	free(s);
	return k;
}

/* What lower_gemm reads of a layer besides its FQN, as hex text: the
 * GEMM policies byte for byte, features, bias, padding, rule and
 * fallback reasons. Equal bytes lower alike, whatever lowering does with
 * them (keep this in step with frontend/lower.c's lower_gemm); unequal
 * bytes (struct padding, say) only cost a lowering to compare the text. */
static char *
plan_key(const LayerPlan *lp)
{
	static const char hex[] = "0123456789abcdef";
	const Linear *li = lp->linear;
	long num[5] = {li->in_features, li->out_features, li->bias, lp->pad[0], lp->pad[1]};
	size_t nb = sizeof num + sizeof lp->gemm, ns = 0;
	const char *str[1 + NGEMM] = {lp->rule};

	for (int g = 0; g < NGEMM; g++)
		str[1 + g] = lp->reason[g];
	for (int k = 0; k <= NGEMM; k++)
		ns += (str[k] ? strlen(str[k]) : 0) + 2;
	char *key = xmalloc(2 * nb + ns + 1), *o = key;
	const unsigned char *parts[2] = {(const void *)num, (const void *)lp->gemm};
	size_t sizes[2] = {sizeof num, sizeof lp->gemm};
	for (int p = 0; p < 2; p++)
		for (size_t i = 0; i < sizes[p]; i++) {
			*o++ = hex[parts[p][i] >> 4];
			*o++ = hex[parts[p][i] & 15];
		}
	for (int k = 0; k <= NGEMM; k++) {
		*o++ = str[k] ? '|' : '-';      /* NULL and "" differ */
		if (str[k]) {
			strcpy(o, str[k]);
			o += strlen(str[k]);
		}
		*o++ = '\n';
	}
	*o = 0;
	return key;
}

int
group_layers(const Plan *plan, const char *pattern, LayerGroups *g)
{
	const char *off = getenv("PRECC_NO_GROUP");
	NameTab seen;
	char **keys = xcalloc((size_t)plan->nlayers + 1, sizeof *keys);
	int nclass = 0;

	g->rep = xcalloc((size_t)plan->nlayers + 1, sizeof *g->rep);
	g->n = plan->nlayers;
	g->on = !(off && *off && strcmp(off, "0")) && !pattern;
	NameTab byplan;
	char **pkeys = xcalloc((size_t)plan->nlayers + 1, sizeof *pkeys);
	ir_names_init(&seen, (size_t)plan->nlayers);
	ir_names_init(&byplan, (size_t)plan->nlayers);
	for (int i = 0; i < plan->nlayers; i++) {
		const char *fqn = plan->layers[i].linear->fqn;
		g->rep[i] = i;
		if (!g->on || strlen(fqn) < MINFQN)
			continue;
		/* the same plan bytes: the same class, without lowering */
		pkeys[i] = plan_key(&plan->layers[i]);
		int same = ir_names_put(&byplan, pkeys[i], i);
		if (same >= 0) {
			g->rep[i] = g->rep[same];
			free(pkeys[i]);
			pkeys[i] = NULL;
			continue;
		}
		Module *m = lower_one(plan, i);
		keys[i] = layer_key(m, fqn);
		ir_module_free(m);
		int r = ir_names_put(&seen, keys[i], i);
		if (r >= 0) {
			g->rep[i] = r;
			free(keys[i]);
			keys[i] = NULL;
		} else
			nclass++;
	}
	ir_names_free(&seen);
	ir_names_free(&byplan);
	for (int i = 0; i < plan->nlayers; i++) {
		free(keys[i]);
		free(pkeys[i]);
	}
	free(keys);
	free(pkeys);
	return nclass;
}

Module *
group_lower(const Plan *plan, const char *pattern, const LayerGroups *g)
{
	if (!g->on)
		return lower_plan(plan, pattern);
	Module *m = ir_module_new();
	for (int i = 0; i < plan->nlayers; i++) {
		if (g->rep[i] != i)
			continue;
		Module *one = lower_one(plan, i);
		for (int k = 0; k < one->nfn; k++) {
			Func *f = ir_func_new(m, "");
			free(f->name);
			*f = *one->fn[k];
			free(one->fn[k]);
		}
		one->nfn = 0;
		ir_module_free(one);
	}
	return m;
}

/* A copy of step func f named fqn, its FQN rewritten in every comment. */
static Func *
copy_step(Module *dst, const Func *f, const char *from, const char *fqn)
{
	Func *c = ir_func_new(dst, fqn);
	int *map = xmalloc(sizeof(int) * ((size_t)f->nval + 1));

	for (int v = 0; v < f->nval; v++)
		map[v] = -1;
	c->kernel = false;
	c->line = f->line, c->col = f->col;
	for (int k = 0; k < NPASSATTR; k++)
		c->pattr[k] = f->pattr[k] ? xstrdup(f->pattr[k]) : NULL;
	c->comment = f->comment ? replace(f->comment, from, fqn) : NULL;
	c->endcomment = f->endcomment ? replace(f->endcomment, from, fqn) : NULL;
	for (int k = 0; k < f->nins; k++) {
		Ins *i = ir_copy_ins(c, f, &f->ins[k], map);
		if (i->comment) {
			char *s = replace(i->comment, from, fqn);
			free(i->comment);
			i->comment = s;
		}
	}
	free(map);
	return c;
}

/* origin[k] = k for every func of m (nothing was copied) */
static void
origin_self(const Module *m, int **origin)
{
	if (!origin)
		return;
	*origin = xcalloc((size_t)m->nfn + 1, sizeof **origin);
	for (int k = 0; k < m->nfn; k++)
		(*origin)[k] = k;
}

void
group_expand(Module *m, const Plan *plan, const LayerGroups *g, int **origin)
{
	if (!g->on) {
		origin_self(m, origin);
		return;
	}
	NameTab step;
	Module *out = ir_module_new();
	int cur = 0;

	ir_names_init(&step, (size_t)m->nfn);
	for (int k = 0; k < m->nfn; k++)
		if (!m->fn[k]->kernel)
			ir_names_put(&step, m->fn[k]->name, k);
	/* the order lowering every layer gives: each layer's first-used
	 * kernels, then its step func, in model order */
	Func **order = xcalloc((size_t)m->nfn + (size_t)plan->nlayers + 1, sizeof *order);
	bool *moved = xcalloc((size_t)m->nfn + 1, 1);
	/* per func of m: where it lands in order; per slot of order: its origin */
	int *at = xcalloc((size_t)m->nfn + 1, sizeof *at);
	int *orig = xcalloc((size_t)m->nfn + (size_t)plan->nlayers + 1, sizeof *orig);
	int n = 0;
	for (int i = 0; i < plan->nlayers; i++) {
		const char *fqn = plan->layers[i].linear->fqn;
		if (g->rep[i] == i) {
			int s = ir_names_get(&step, fqn);
			if (s < 0)
				continue;       /* not matched by --layer */
			for (; cur < s; cur++)
				if (!moved[cur]) {
					at[cur] = orig[n] = n;
					order[n++] = m->fn[cur];
					moved[cur] = true;
				}
			at[s] = orig[n] = n;
			order[n++] = m->fn[s];
			moved[s] = true;
			cur = s + 1;
		} else {
			const char *rfqn = plan->layers[g->rep[i]].linear->fqn;
			int s = ir_names_get(&step, rfqn);
			if (s < 0)
				die("group: no step func @%s for layer %s", rfqn, fqn);
			orig[n] = at[s];   /* the representative comes first in model order */
			order[n++] = copy_step(out, m->fn[s], rfqn, fqn);
		}
	}
	for (int k = 0; k < m->nfn; k++)
		if (!moved[k]) {
			orig[n] = n;
			order[n++] = m->fn[k];
		}
	free(at);
	if (origin)
		*origin = orig;
	else
		free(orig);
	/* out only allocated the copies; m takes every func, in order */
	free(out->fn);
	out->fn = NULL, out->nfn = out->cfn = 0;
	ir_module_free(out);
	free(m->fn);
	m->fn = order, m->nfn = m->cfn = n;
	free(moved);
	ir_names_free(&step);

	/* dedupe's counts, over every layer now */
	NameTab kern;
	int *calls = xcalloc((size_t)m->nfn + 1, sizeof *calls), ncall = 0;
	ir_names_init(&kern, (size_t)m->nfn);
	for (int k = 0; k < m->nfn; k++)
		if (m->fn[k]->kernel)
			ir_names_put(&kern, m->fn[k]->name, k);
	for (int k = 0; k < m->nfn; k++)
		for (int j = 0; j < m->fn[k]->nins; j++) {
			const Ins *i = &m->fn[k]->ins[j];
			int c;
			if (i->op == OP_call && (c = ir_names_get(&kern, i->callee)) >= 0) {
				calls[c]++;
				ncall++;
			}
		}
	for (int k = 0; k < m->nfn; k++)
		if (m->fn[k]->kernel && m->fn[k]->pattr[PA_CALLS])
			ir_set_attr(m->fn[k]->pattr, PA_CALLS, "%d", calls[k]);
	ir_names_free(&kern);
	free(calls);
	/* "# dedupe: N kernel calls, D distinct ..." at the module's end:
	 * the same line, with the count over every layer */
	char *e = m->endcomment ? strstr(m->endcomment, "dedupe: ") : NULL;
	char *tail = e ? strchr(e, ',') : NULL;
	if (tail) {
		size_t head = (size_t)(e - m->endcomment) + strlen("dedupe: ");
		char *s = xmalloc(head + 40 + strlen(tail));
		memcpy(s, m->endcomment, head);
		sprintf(s + head, "%d kernel call%s%s", ncall, ncall == 1 ? "" : "s", tail);
		free(m->endcomment);
		m->endcomment = s;
	}
}

void
group_free(LayerGroups *g)
{
	free(g->rep);
	g->rep = NULL;
}
