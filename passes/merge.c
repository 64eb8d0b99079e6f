/*
 * merge.c — the per-layer view fusion needs. Lowering gives each layer
 * three funcs, FQN.fprop, FQN.dgrad and FQN.wgrad, which cast the same
 * tensors: X for fprop and wgrad, W for fprop and dgrad, dY for dgrad and
 * wgrad. This pass merges them into one step func @FQN, so that a tensor
 * is read once and its copies (row-major and transposed) come out of one
 * kernel:
 *
 *  - params of the three are one set (same name, kind and type);
 *  - an instruction identical to one already in the step (op, attributes,
 *    type and operands after merging) is that instruction: cross-func CSE
 *    of the quantize chains (fprop's %x.q is wgrad's %x.q);
 *  - a different instruction whose name is taken is renamed with its GEMM
 *    after the tensor (%w.amax of dgrad → %w.dgrad.amax);
 *  - updates are kept (each state has one owner, lower.c), and ret lists
 *    fprop's results, then dgrad's, then wgrad's.
 *
 * The step func means what running the three did (state updates commit at
 * the end of the step, as before), so the interpreter can still run it.
 * Funcs not named FQN.fprop/.dgrad/.wgrad are left alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "passes.h"

static const char *const gemm_names[] = {"fprop", "dgrad", "wgrad"};

/* The GEMM (0..2) a func name ends with, -1 none; *n the prefix length. */
static int
gemm_of(const char *name, size_t *n)
{
	const char *dot = strrchr(name, '.');

	if (!dot || dot == name)
		return -1;
	for (int g = 0; g < 3; g++)
		if (!strcmp(dot + 1, gemm_names[g])) {
			*n = (size_t)(dot - name);
			return g;
		}
	return -1;
}

static bool
same_attrs(const Ins *a, const Ins *b)
{
	if (a->op != b->op || a->param != b->param || a->fmt != b->fmt
	    || a->has_blockfmt != b->has_blockfmt || a->blockfmt != b->blockfmt
	    || a->margin != b->margin || a->pow2 != b->pow2 || a->eps != b->eps
	    || a->nonfinite != b->nonfinite || a->algo != b->algo || a->round != b->round
	    || a->sat != b->sat || a->stream != b->stream || a->accum != b->accum
	    || a->accum_n != b->accum_n || a->mxmode != b->mxmode || a->nan_ignore != b->nan_ignore
	    || a->zero_keep != b->zero_keep || a->inv != b->inv || a->pow2_log2 != b->pow2_log2
	    || a->divide != b->divide || a->nvfp4 != b->nvfp4 || a->signs != b->signs
	    || !ir_type_eq(&a->type, &b->type)
	    || a->narg != b->narg || a->nmore || b->nmore)
		return false;
	for (int k = 0; k < NPASSATTR; k++)
		if ((a->pattr[k] == NULL) != (b->pattr[k] == NULL)
		    || (a->pattr[k] && strcmp(a->pattr[k], b->pattr[k])))
			return false;
	return true;
}

/* The instruction of step func s equal to src's i under map, or NULL. */
static const Ins *
find_same(const Func *s, const Func *src, const Ins *i, const int *map)
{
	for (int k = 0; k < s->nins; k++) {
		const Ins *j = &s->ins[k];
		bool eq = same_attrs(j, i);
		for (int a = 0; eq && a < i->narg; a++)
			eq = map[i->arg[a]] == j->arg[a];
		if (eq && i->op == OP_param)
			eq = !strcmp(s->val[j->res].name, src->val[i->res].name);
		if (eq)
			return j;
	}
	return NULL;
}

/* A name for src value v not yet defined in s: its own, or with the GEMM
 * after the tensor's name (w.amax → w.dgrad.amax). */
static int
fresh_value(Func *s, const Func *src, int v, int g)
{
	const char *n = src->val[v].name, *dot = strchr(n, '.');
	char buf[256];
	int k = ir_find_value(s, n);

	if (k < 0 || s->val[k].def < 0)
		return ir_value(s, n, src->val[v].type);
	for (int tries = 0;; tries++) {
		if (dot)
			snprintf(buf, sizeof buf, "%.*s.%s%.0d%s", (int)(dot - n), n, gemm_names[g], tries,
			         dot);
		else
			snprintf(buf, sizeof buf, "%s.%s%.0d", n, gemm_names[g], tries);
		k = ir_find_value(s, buf);
		if (k < 0 || s->val[k].def < 0)
			return ir_value(s, buf, src->val[v].type);
	}
}

static void
take(Func *s, const Func *src, int g, const Ins *i, int *map)
{
	const Ins *j = find_same(s, src, i, map);
	bool renamed = false;

	if (j) {
		map[i->res] = j->res;
		return;
	}
	/* a value of the same tensor derived from a renamed one is renamed
	 * too (%w.dgrad.q.t), so a chain reads as one */
	for (int a = 0; a < i->narg && i->res >= 0; a++) {
		const char *on = src->val[i->arg[a]].name, *rn = src->val[i->res].name;
		size_t t = strcspn(on, ".");
		renamed |= strcmp(s->val[map[i->arg[a]]].name, on) != 0 && !strncmp(on, rn, t)
		        && (rn[t] == '.' || rn[t] == 0);
	}
	if (i->res >= 0 && renamed) {
		int k = ir_find_value(s, src->val[i->res].name);
		map[i->res] = -1;
		if (k < 0 || s->val[k].def < 0) {
			/* force the GEMM into the name even though it is free */
			char buf[256];
			const char *n = src->val[i->res].name, *dot = strchr(n, '.');
			if (dot)
				snprintf(buf, sizeof buf, "%.*s.%s%s", (int)(dot - n), n, gemm_names[g], dot);
			else
				snprintf(buf, sizeof buf, "%s.%s", n, gemm_names[g]);
			if ((k = ir_find_value(s, buf)) < 0 || s->val[k].def < 0)
				map[i->res] = ir_value(s, buf, src->val[i->res].type);
		}
		if (map[i->res] < 0)
			map[i->res] = fresh_value(s, src, i->res, g);
		ir_copy_ins(s, src, i, map);
		return;
	}
	if (i->res >= 0)
		map[i->res] = fresh_value(s, src, i->res, g);
	ir_copy_ins(s, src, i, map);
}

/* Append text's lines to a comment slot; a "# legalize:" line already
 * there is not repeated. */
static void
append_lines(char **slot, const char *text)
{
	for (const char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l), a = *slot ? strlen(*slot) : 0;
		if (!strncmp(l, "# legalize:", 11) && *slot) {
			bool seen = false;
			for (const char *p = *slot; p && !seen; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
				seen = !strncmp(p, l, n) && (p[n] == '\n' || p[n] == 0);
			if (seen)
				continue;
		}
		*slot = realloc(*slot, a + n + 2);
		if (!*slot)
			abort();
		if (a)
			(*slot)[a++] = '\n';
		memcpy(*slot + a, l, n);
		(*slot)[a + n] = 0;
	}
}

static Func *
merge_layer(Module *m, Func *fn[3], const char *name)
{
	Func *s = ir_func_new(m, name);
	int *map[3] = {NULL}, rets[64], nret = 0;
	long malign = 0;

	for (int g = 0; g < 3; g++) {
		if (!fn[g])
			continue;
		map[g] = malloc(sizeof(int) * (size_t)(fn[g]->nval + 1));
		if (!map[g])
			abort();
		for (int v = 0; v < fn[g]->nval; v++)
			map[g][v] = -1;
		if (fn[g]->comment)
			append_lines(&s->comment, fn[g]->comment);
		for (int k = 0; k < NPASSATTR; k++)
			if (fn[g]->pattr[k] && !s->pattr[k])
				ir_set_attr(s->pattr, (PassAttr)k, "%s", fn[g]->pattr[k]);
		if (fn[g]->pattr[PA_MALIGN] && atol(fn[g]->pattr[PA_MALIGN]) > malign)
			malign = atol(fn[g]->pattr[PA_MALIGN]);
	}
	if (malign)
		ir_set_attr(s->pattr, PA_MALIGN, "%ld", malign);
	ir_comment(&s->comment, "merge: %s%s%s of %s in one step func; ret: their results in "
	           "that order", fn[0] ? "fprop " : "", fn[1] ? "dgrad " : "", fn[2] ? "wgrad" : "",
	           name);
	/* params first, then each GEMM's body, then updates and ret */
	for (int pass = 0; pass < 3; pass++)
		for (int g = 0; g < 3; g++)
			for (int k = 0; fn[g] && k < fn[g]->nins; k++) {
				const Ins *i = &fn[g]->ins[k];
				int want = i->op == OP_param ? 0 : i->op == OP_update || i->op == OP_ret ? 2 : 1;
				if (want != pass)
					continue;
				if (i->op == OP_ret) {
					for (int a = 0; a < i->narg && nret < 64; a++)
						rets[nret++] = map[g][i->arg[a]];
					continue;
				}
				if (i->op == OP_update) {
					bool dup = false;
					for (int j = 0; j < s->nins; j++)
						dup |= s->ins[j].op == OP_update
						    && s->ins[j].arg[0] == map[g][i->arg[0]]
						    && s->ins[j].arg[1] == map[g][i->arg[1]];
					if (!dup)
						ir_copy_ins(s, fn[g], i, map[g]);
					continue;
				}
				take(s, fn[g], g, i, map[g]);
			}
	ir_emit(s, OP_ret, -1, rets, nret);
	for (int g = 0; g < 3; g++)
		free(map[g]);
	return s;
}

void
merge(Module *m, const Target *t)
{
	int n0 = m->nfn, ng = 0, no = 0, nm = 0;
	Func **order = malloc(sizeof(Func *) * (size_t)(2 * n0 + 1));
	int *grp = malloc(sizeof(int) * (size_t)(n0 + 1));
	Func *(*fn)[3] = calloc((size_t)n0 + 1, sizeof *fn);
	char **name = calloc((size_t)n0 + 1, sizeof *name);
	NameTab byname;   /* layer name -> its group: linear in the layers */

	if (!order || !grp || !fn || !name)
		abort();
	ir_names_init(&byname, (size_t)n0);
	for (int k = 0; k < n0; k++) {
		size_t len;
		int g = gemm_of(m->fn[k]->name, &len), x;
		grp[k] = -1;
		if (g < 0 || len >= 512 || m->fn[k]->kernel)
			continue;
		name[ng] = strndup(m->fn[k]->name, len);
		if (!name[ng])
			abort();
		x = ir_names_get(&byname, name[ng]);
		if (x >= 0 && !fn[x][g]) {
			free(name[ng]);
			name[ng] = NULL;
		} else {
			/* a new layer, or a second FQN.fprop: a step func of its own */
			x = ng++;
			ir_names_set(&byname, name[x], x);
		}
		fn[x][g] = m->fn[k];
		grp[k] = x;
	}
	/* each step func where its first member was; the members after the
	 * n0 originals, to be freed */
	bool *done = calloc((size_t)ng + 1, 1);
	if (!done)
		abort();
	for (int k = 0; k < n0; k++) {
		int x = grp[k];
		if (x < 0)
			order[no++] = m->fn[k];
		else if (!done[x]) {
			done[x] = true;
			order[no++] = merge_layer(m, fn[x], name[x]);
		}
	}
	for (int k = 0; k < n0; k++)
		if (grp[k] >= 0)
			order[no + nm++] = m->fn[k];
	if (no + nm)    /* a module without funcs has no m->fn (memcpy's NULL is UB even for 0) */
		memcpy(m->fn, order, sizeof(Func *) * (size_t)(no + nm));
	for (int k = no + nm - 1; k >= no; k--)
		ir_func_remove(m, k);
	for (int x = 0; x < ng; x++)
		free(name[x]);
	ir_names_free(&byname);
	free(done);
	free(name);
	free(fn);
	free(grp);
	free(order);
	(void)t;
}
