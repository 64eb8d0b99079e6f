/*
 * partition.c — the groups fuse.c chose become kernels. Every op with
 * fuse=G moves into the kernel func @FUNC.G (text form `kernel @name`):
 * its params are the buffers the group reads (a layer param keeps its
 * kind, anything computed elsewhere is `param buf`), its ret the buffers
 * it writes that anything outside the group reads. The step func calls
 * it,
 *
 *	%x.q, %x.q.t, %x.scale_inv = call @FQN.x.quantize(%x, %x.amax) : ...
 *
 * and keeps params, calls, updates and ret. Every gemm, with the ops
 * fuse.c folded into its prologue and epilogue, becomes a kernel of its
 * own, @FUNC.y.gemm for %y.acc (codegen's GEMM family). Kernels are placed in dependency order (a group's kernel after the
 * kernels and GEMMs it reads from; ties in the order of the ops), each
 * kernel func right before the step func that calls it. A cycle between
 * groups would be a fusion bug: abort.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "passes.h"

typedef struct Unit {
	int first;              /* smallest instruction index */
	int group;              /* >= 0: a kernel (index into names) */
	int ndep, *dep;         /* units it reads from */
	bool done;
} Unit;

static void *
xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);

	if (!p)
		abort();
	return p;
}

static int
gemm_unit_of(const Func *f, const char *name, const int *unit)
{
	for (int k = 0; k < f->nins; k++)
		if (ir_op_gemm(f->ins[k].op) && f->ins[k].res >= 0
		    && !strcmp(f->val[f->ins[k].res].name, name))
			return unit[k];
	return -1;
}

static Func *
make_kernel(Module *m, Func *f, const Func *step, const char *group, int u, const int *ins_unit,
            int *inputs, int *nin, int *outputs, int *nout)
{
	char name[512];
	Func *k;
	int *map = xcalloc((size_t)f->nval + 1, sizeof(int));
	const char *scheme = NULL;

	snprintf(name, sizeof name, "%s.%s", step->name, group);
	k = ir_func_new(m, name);
	k->kernel = true;
	if (step->pattr[PA_TARGET])
		ir_set_attr(k->pattr, PA_TARGET, "%s", step->pattr[PA_TARGET]);
	for (int v = 0; v < f->nval; v++)
		map[v] = -1;
	*nin = *nout = 0;
	/* inputs: read by the group, defined outside it */
	for (int j = 0; j < f->nins; j++) {
		const Ins *i = &f->ins[j];
		if (ins_unit[j] != u)
			continue;
		for (int a = 0; a < i->narg; a++) {
			int v = i->arg[a], d = f->val[v].def;
			if (d >= 0 && ins_unit[d] == u)
				continue;
			if (map[v] >= 0)
				continue;
			const Ins *di = d >= 0 ? &f->ins[d] : NULL;
			map[v] = ir_value(k, f->val[v].name, f->val[v].type);
			Ins *p = ir_emit(k, OP_param, map[v], NULL, 0);
			p->param = di && di->op == OP_param ? di->param : PARAM_BUF;
			inputs[(*nin)++] = v;
		}
	}
	for (int j = 0; j < f->nins; j++) {
		const Ins *i = &f->ins[j];
		if (ins_unit[j] != u)
			continue;
		Ins *n = ir_copy_ins(k, f, i, map);
		ir_set_attr(n->pattr, PA_FUSE, NULL);
		if (n->pattr[PA_AMAX_SCHEME]) {
			const char *s = n->pattr[PA_AMAX_SCHEME];
			if (!scheme || !strcmp(s, "grid") || (!strcmp(s, "two_kernel") && strcmp(scheme, "grid")))
				scheme = s;
		}
		/* outputs: defined here, read outside */
		for (int r = 0; r < ir_nres(i); r++) {
			int v = ir_res(i, r);
			bool out = false;
			for (int x = 0; x < f->nins && !out; x++)
				if (ins_unit[x] != u)
					for (int a = 0; a < f->ins[x].narg; a++)
						out |= f->ins[x].arg[a] == v;
			if (out)
				outputs[(*nout)++] = v;
		}
	}
	if (*nout == 0)                 /* nothing reads it: keep its last value */
		for (int j = f->nins - 1; j >= 0 && !*nout; j--)
			if (ins_unit[j] == u && f->ins[j].res >= 0)
				outputs[(*nout)++] = f->ins[j].res;
	if (scheme)
		ir_set_attr(k->pattr, PA_AMAX_SCHEME, "%s", scheme);
	/* legalize's m_align, for this kernel's own M-contiguous copies */
	long malign = 1;
	for (int j = 0; j < k->nins; j++) {
		const Type *t = &k->ins[j].type;
		int eb = t->fmt == PRECC_FP32 || t->fmt == PRECC_TF32 ? 4
		       : t->fmt == PRECC_BF16 || t->fmt == PRECC_FP16 ? 2 : 1;
		if (opinfo[k->ins[j].op].result && !t->is_scale && t->rank == 2 && t->dim[1] < 0
		    && 16 / eb > malign)
			malign = 16 / eb;
	}
	if (malign > 1)
		ir_set_attr(k->pattr, PA_MALIGN, "%ld", malign);
	int *rets = xcalloc((size_t)*nout, sizeof(int));
	for (int r = 0; r < *nout; r++)
		rets[r] = map[outputs[r]];
	ir_emit(k, OP_ret, -1, rets, *nout);
	free(rets);
	free(map);
	return k;
}

static void
partition_func(Module *m, int fi, Func ***order, int *norder)
{
	Func *f = m->fn[fi];
	int n = f->nins, nu = 0;
	int *ins_unit = xcalloc((size_t)n, sizeof(int));
	Unit *u = xcalloc((size_t)n, sizeof(Unit));
	char (*names)[64] = xcalloc((size_t)n, sizeof *names);
	int ngroup = 0;

	/* units: one per kernel group, per GEMM (with its prologue and
	 * epilogue), per other instruction */
	for (int k = 0; k < n; k++) {
		const Ins *i = &f->ins[k];
		const char *g = i->pattr[PA_FUSE];
		ins_unit[k] = -1;
		if (g) {
			for (int x = 0; x < nu; x++)
				if (u[x].group >= 0 && !strcmp(names[u[x].group], g))
					ins_unit[k] = x;
			if (ins_unit[k] < 0) {
				snprintf(names[ngroup], sizeof names[0], "%s", g);
				u[nu] = (Unit){.first = k, .group = ngroup++};
				ins_unit[k] = nu++;
			}
		} else if (ir_op_gemm(i->op)) {
			/* a GEMM kernel: %y.acc's prologue, gemm and epilogue (a
			 * grouped one: every expert's, one kernel) */
			const char *r = f->val[i->res].name;
			size_t l = strlen(r);
			if (l > 4 && !strcmp(r + l - 4, ".acc"))
				l -= 4;
			snprintf(names[ngroup], sizeof names[0], "%.*s.%s", (int)(l < 50 ? l : 50), r,
			         opinfo[i->op].name);
			u[nu] = (Unit){.first = k, .group = ngroup++};
			ins_unit[k] = nu++;
		} else if ((i->op != OP_update && i->op != OP_ret
		           && !i->pattr[PA_PROLOGUE] && !i->pattr[PA_EPILOGUE])) {
			u[nu] = (Unit){.first = k, .group = -1};
			ins_unit[k] = nu++;
		}
	}
	for (int k = 0; k < n; k++) {
		const Ins *i = &f->ins[k];
		const char *g = ir_op_gemm(i->op) ? NULL
		              : i->pattr[PA_PROLOGUE] ? i->pattr[PA_PROLOGUE] : i->pattr[PA_EPILOGUE];
		if (ins_unit[k] < 0 && g && i->op != OP_update && i->op != OP_ret) {
			ins_unit[k] = gemm_unit_of(f, g, ins_unit);
			if (ins_unit[k] < 0) {
				fprintf(stderr, "precc: internal error: @%s: no gemm %%%s for %s\n", f->name,
				        g, opinfo[i->op].name);
				abort();
			}
			if (k < u[ins_unit[k]].first)
				u[ins_unit[k]].first = k;
		}
	}
	/* dependencies */
	for (int k = 0; k < n; k++) {
		const Ins *i = &f->ins[k];
		int x = ins_unit[k];
		if (x < 0)
			continue;
		for (int a = 0; a < i->narg; a++) {
			int d = f->val[i->arg[a]].def, y = d >= 0 ? ins_unit[d] : -1;
			bool have = y < 0 || y == x;
			for (int e = 0; e < u[x].ndep && !have; e++)
				have = u[x].dep[e] == y;
			if (!have) {
				u[x].dep = realloc(u[x].dep, sizeof(int) * (size_t)(u[x].ndep + 1));
				if (!u[x].dep)
					abort();
				u[x].dep[u[x].ndep++] = y;
			}
		}
	}
	/* the step func, rebuilt in dependency order */
	Func *nf = xcalloc(1, sizeof(Func));
	int *map = xcalloc((size_t)f->nval + 1, sizeof(int));
	int *in = xcalloc((size_t)f->nval + 1, sizeof(int)), *out = xcalloc((size_t)f->nval + 1, sizeof(int));
	for (int v = 0; v < f->nval; v++)
		map[v] = -1;
	nf->name = f->name, f->name = NULL;
	nf->comment = f->comment, f->comment = NULL;
	nf->endcomment = f->endcomment, f->endcomment = NULL;
	nf->line = f->line, nf->col = f->col;
	for (int a = 0; a < NPASSATTR; a++)
		nf->pattr[a] = f->pattr[a], f->pattr[a] = NULL;
	for (int done = 0; done < nu; done++) {
		int best = -1;
		for (int x = 0; x < nu; x++) {
			bool ready = !u[x].done;
			for (int e = 0; e < u[x].ndep && ready; e++)
				ready = u[u[x].dep[e]].done;
			if (ready && (best < 0 || u[x].first < u[best].first))
				best = x;
		}
		if (best < 0) {
			fprintf(stderr, "precc: internal error: @%s: the kernels depend on each other "
			        "in a cycle\n", nf->name);
			abort();
		}
		u[best].done = true;
		if (u[best].group < 0) {
			for (int k = 0; k < n; k++)
				if (ins_unit[k] == best)
					ir_copy_ins(nf, f, &f->ins[k], map);
			continue;
		}
		int nin, nout;
		Func *kf = make_kernel(m, f, nf, names[u[best].group], best, ins_unit, in, &nin,
		                       out, &nout);
		(*order)[(*norder)++] = kf;
		int *args = xcalloc((size_t)nin + 1, sizeof(int));
		for (int a = 0; a < nin; a++)
			args[a] = map[in[a]];
		for (int r = 0; r < nout; r++)
			map[out[r]] = ir_value(nf, f->val[out[r]].name, f->val[out[r]].type);
		Ins *c = ir_emit(nf, OP_call, map[out[0]], args, nin);
		free(args);
		c->callee = strdup(kf->name);
		if (!c->callee)
			abort();
		if (nout > 1) {
			c->more = xcalloc((size_t)nout - 1, sizeof(int));
			c->nmore = nout - 1;
			for (int r = 1; r < nout; r++) {
				c->more[r - 1] = map[out[r]];
				nf->val[map[out[r]]].def = nf->nins - 1;
			}
		}
	}
	for (int k = 0; k < n; k++)
		if (f->ins[k].op == OP_update)
			ir_copy_ins(nf, f, &f->ins[k], map);
	for (int k = 0; k < n; k++)
		if (f->ins[k].op == OP_ret)
			ir_copy_ins(nf, f, &f->ins[k], map);
	(*order)[(*norder)++] = nf;
	m->fn[fi] = nf;
	/* f is now an empty shell: free it through the module */
	f->name = strdup("");
	(*order)[(*norder)++] = f;
	for (int x = 0; x < nu; x++)
		free(u[x].dep);
	free(u), free(ins_unit), free(names), free(map), free(in), free(out);
}

void
partition(Module *m, const Target *t)
{
	int n0 = m->nfn, no = 0;
	Func **order = xcalloc((size_t)(n0 * 64 + 1), sizeof(Func *));
	Func **old = xcalloc((size_t)n0 + 1, sizeof(Func *));

	(void)t;
	if (n0)    /* a module without funcs has no m->fn */
		memcpy(old, m->fn, sizeof(Func *) * (size_t)n0);
	for (int k = 0; k < n0; k++) {
		/* partition_func replaces its func in place and appends the
		 * kernels, so old[k] is still m->fn[k] (a search here made the
		 * pass quadratic: 15% of a DeepSeek-V3 build) */
		int fi = k;
		assert(m->fn[k] == old[k]);
		if (old[k]->kernel) {
			order[no++] = old[k];
			continue;
		}
		partition_func(m, fi, &order, &no);
	}
	/* order holds kernels and step funcs in print order, with the emptied
	 * originals marked by an empty name: keep the first, free the rest */
	int keep = 0, nshell = 0;
	Func **shell = xcalloc((size_t)no + 1, sizeof(Func *));
	for (int k = 0; k < no; k++) {
		if (order[k]->name && !order[k]->name[0])
			shell[nshell++] = order[k];
		else
			order[keep++] = order[k];
	}
	if (m->cfn < keep + nshell) {
		m->fn = realloc(m->fn, sizeof(Func *) * (size_t)(keep + nshell));
		if (!m->fn)
			abort();
		m->cfn = keep + nshell;
	}
	if (keep)
		memcpy(m->fn, order, sizeof(Func *) * (size_t)keep);
	if (nshell)
		memcpy(m->fn + keep, shell, sizeof(Func *) * (size_t)nshell);
	m->nfn = keep + nshell;
	while (m->nfn > keep)
		ir_func_remove(m, m->nfn - 1);
	free(order), free(old), free(shell);
}
