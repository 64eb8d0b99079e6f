/*
 * ir.c — the op table, construction of modules/funcs/values/instructions,
 * and the small vocabulary of types and names the printer, parser and
 * verifier share.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"

const OpInfo opinfo[NOP] = {
#define OP(n, min, max, res, attrs) [OP_##n] = {#n, min, max, res, attrs},
#include "ops.def"
#undef OP
};

static void *
alloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	if (!p) {
		fprintf(stderr, "precc: out of memory\n");
		abort();
	}
	return p;
}

static void *
grow(void *p, int *cap, int need, size_t sz)
{
	if (need <= *cap)
		return p;
	*cap = *cap ? *cap * 2 : 16;
	if (*cap < need)
		*cap = need;
	p = realloc(p, (size_t)*cap * sz);
	if (!p) {
		fprintf(stderr, "precc: out of memory\n");
		abort();
	}
	return p;
}

static char *
dupstr(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(alloc(n), s, n);
}

Module *
ir_module_new(void)
{
	return alloc(sizeof(Module));
}

static void
ins_free(Ins *i)
{
	free(i->arg);
	free(i->comment);
	free(i->more);
	free(i->callee);
	for (int k = 0; k < NPASSATTR; k++)
		free(i->pattr[k]);
}

static void
func_free(Func *f)
{
	for (int i = 0; i < f->nins; i++)
		ins_free(&f->ins[i]);
	for (int k = 0; k < NPASSATTR; k++)
		free(f->pattr[k]);
	for (int i = 0; i < f->nval; i++)
		free(f->val[i].name);
	free(f->ins);
	free(f->val);
	free(f->name);
	free(f->comment);
	free(f->endcomment);
	free(f);
}

void
ir_module_free(Module *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->nfn; i++)
		func_free(m->fn[i]);
	free(m->fn);
	free(m->name);
	free(m->endcomment);
	free(m);
}

Func *
ir_func_new(Module *m, const char *name)
{
	Func *f = alloc(sizeof(Func));

	f->name = dupstr(name);
	m->fn = grow(m->fn, &m->cfn, m->nfn + 1, sizeof *m->fn);
	m->fn[m->nfn++] = f;
	return f;
}

int
ir_value(Func *f, const char *name, Type t)
{
	Value *v;

	f->val = grow(f->val, &f->cval, f->nval + 1, sizeof *f->val);
	v = &f->val[f->nval];
	v->name = dupstr(name);
	v->type = t;
	v->def = -1;
	return f->nval++;
}

int
ir_find_value(const Func *f, const char *name)
{
	for (int i = 0; i < f->nval; i++)
		if (!strcmp(f->val[i].name, name))
			return i;
	return -1;
}

Ins *
ir_emit(Func *f, Op op, int res, const int *args, int nargs)
{
	Ins *i;

	f->ins = grow(f->ins, &f->cins, f->nins + 1, sizeof *f->ins);
	i = &f->ins[f->nins];
	memset(i, 0, sizeof *i);
	i->op = op;
	i->res = res;
	i->narg = nargs;
	i->arg = alloc(sizeof(int) * (size_t)(nargs ? nargs : 1));
	if (nargs)
		memcpy(i->arg, args, sizeof(int) * (size_t)nargs);
	if (res >= 0) {
		i->type = f->val[res].type;
		if (f->val[res].def < 0)
			f->val[res].def = f->nins;
	}
	f->nins++;
	return i;
}

int
ir_def(Func *f, const char *name, Type t, Op op, const int *args, int nargs)
{
	int v = ir_value(f, name, t);

	ir_emit(f, op, v, args, nargs);
	return v;
}

Ins *
ir_insert(Func *f, int pos, Op op, int res, const int *args, int nargs)
{
	Ins tmp;

	if (pos < 0 || pos > f->nins)
		pos = f->nins;
	ir_emit(f, op, -1, args, nargs);
	tmp = f->ins[f->nins - 1];
	memmove(&f->ins[pos + 1], &f->ins[pos], sizeof *f->ins * (size_t)(f->nins - 1 - pos));
	tmp.res = res;
	if (res >= 0)
		tmp.type = f->val[res].type;
	f->ins[pos] = tmp;
	ir_recompute_defs(f);
	return &f->ins[pos];
}

void
ir_delete(Func *f, int pos)
{
	if (pos < 0 || pos >= f->nins)
		return;
	ins_free(&f->ins[pos]);
	memmove(&f->ins[pos], &f->ins[pos + 1], sizeof *f->ins * (size_t)(f->nins - pos - 1));
	f->nins--;
	ir_recompute_defs(f);
}

static void
recols_type(Type *t, long from, long to)
{
	for (int d = 0; d < t->rank; d++) {
		long b = t->is_scale ? t->block[d] : 1;
		if (t->dim[d] == from)
			t->dim[d] = to;
		else if (t->dim[d] > 0 && b > 0 && t->dim[d] * b == from)
			t->dim[d] = to / b;
	}
}

Func *
ir_func_recols(const Func *f, long from, long to)
{
	Func *c = alloc(sizeof *c);
	*c = *f;
	c->val = alloc(sizeof *c->val * (size_t)(f->nval ? f->nval : 1));
	c->ins = alloc(sizeof *c->ins * (size_t)(f->nins ? f->nins : 1));
	memcpy(c->val, f->val, sizeof *c->val * (size_t)f->nval);
	memcpy(c->ins, f->ins, sizeof *c->ins * (size_t)f->nins);
	c->cval = f->nval;
	c->cins = f->nins;
	for (int v = 0; v < c->nval; v++)
		recols_type(&c->val[v].type, from, to);
	for (int i = 0; i < c->nins; i++)
		recols_type(&c->ins[i].type, from, to);
	return c;
}

void
ir_func_recols_free(Func *c)
{
	if (c) {
		free(c->val);
		free(c->ins);
		free(c);
	}
}

void
ir_replace_uses(Func *f, int from, int to)
{
	for (int i = 0; i < f->nins; i++)
		for (int k = 0; k < f->ins[i].narg; k++)
			if (f->ins[i].arg[k] == from)
				f->ins[i].arg[k] = to;
}

int
ir_use_count(const Func *f, int v)
{
	int n = 0;

	for (int i = 0; i < f->nins; i++)
		for (int k = 0; k < f->ins[i].narg; k++)
			n += f->ins[i].arg[k] == v;
	return n;
}

void
ir_recompute_defs(Func *f)
{
	for (int v = 0; v < f->nval; v++)
		f->val[v].def = -1;
	for (int i = 0; i < f->nins; i++) {
		int r = f->ins[i].res;
		if (r >= 0 && r < f->nval && f->val[r].def < 0) {
			f->val[r].def = i;
			f->val[r].type = f->ins[i].type;
		}
		for (int k = 0; k < f->ins[i].nmore; k++) {
			r = f->ins[i].more[k];    /* a call's other results keep their type */
			if (r >= 0 && r < f->nval && f->val[r].def < 0)
				f->val[r].def = i;
		}
	}
}

int
ir_nres(const Ins *i)
{
	return (i->res >= 0) + i->nmore;
}

int
ir_res(const Ins *i, int k)
{
	return k == 0 ? i->res : i->more[k - 1];
}

static int
map_value(Func *dst, const Func *src, int v, int *map)
{
	if (map[v] < 0)
		map[v] = ir_value(dst, src->val[v].name, src->val[v].type);
	return map[v];
}

Ins *
ir_copy_ins(Func *dst, const Func *src, const Ins *i, int *map)
{
	int *args = alloc(sizeof(int) * (size_t)(i->narg + 1)), res = -1;
	Ins *n;

	for (int k = 0; k < i->narg; k++)
		args[k] = map_value(dst, src, i->arg[k], map);
	if (i->res >= 0)
		res = map_value(dst, src, i->res, map);
	n = ir_emit(dst, i->op, res, args, i->narg);
	free(args);
	n->type = i->type;
	if (res >= 0)
		dst->val[res].type = i->type;
	n->param = i->param, n->fmt = i->fmt;
	n->has_blockfmt = i->has_blockfmt, n->blockfmt = i->blockfmt;
	n->margin = i->margin, n->pow2 = i->pow2, n->eps = i->eps;
	n->nonfinite = i->nonfinite, n->algo = i->algo, n->round = i->round;
	n->sat = i->sat, n->stream = i->stream, n->accum = i->accum;
	n->accum_n = i->accum_n, n->mxmode = i->mxmode;
	n->nan_ignore = i->nan_ignore, n->zero_keep = i->zero_keep, n->inv = i->inv;
	n->pow2_log2 = i->pow2_log2, n->divide = i->divide, n->nvfp4 = i->nvfp4;
	n->signs = i->signs, n->group_k = i->group_k;
	n->comment = i->comment ? dupstr(i->comment) : NULL;
	n->callee = i->callee ? dupstr(i->callee) : NULL;
	for (int k = 0; k < NPASSATTR; k++)
		n->pattr[k] = i->pattr[k] ? dupstr(i->pattr[k]) : NULL;
	if (i->nmore) {
		int *more = alloc(sizeof(int) * (size_t)i->nmore);
		for (int k = 0; k < i->nmore; k++)
			more[k] = map_value(dst, src, i->more[k], map);
		n = &dst->ins[dst->nins - 1];
		n->more = more, n->nmore = i->nmore;
		for (int k = 0; k < i->nmore; k++)
			if (dst->val[more[k]].def < 0)
				dst->val[more[k]].def = dst->nins - 1;
	}
	return &dst->ins[dst->nins - 1];
}

static uint64_t
name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

void
ir_names_init(NameTab *t, size_t hint)
{
	size_t cap = 16;

	while (cap < 2 * hint + 2)
		cap *= 2;
	t->key = alloc(cap * sizeof *t->key);
	t->idx = alloc(cap * sizeof *t->idx);
	t->cap = cap, t->n = 0;
}

static size_t
names_slot(const NameTab *t, const char *s)
{
	size_t k = (size_t)name_hash(s) & (t->cap - 1);

	while (t->key[k] && strcmp(t->key[k], s))
		k = (k + 1) & (t->cap - 1);
	return k;
}

int
ir_names_get(const NameTab *t, const char *s)
{
	size_t k;

	if (!t->cap)
		return -1;
	k = names_slot(t, s);
	return t->key[k] ? t->idx[k] : -1;
}

static void
names_grow(NameTab *t)
{
	NameTab n;

	if (2 * (t->n + 1) <= t->cap)
		return;
	ir_names_init(&n, t->cap);
	for (size_t k = 0; k < t->cap; k++)
		if (t->key[k]) {
			size_t j = names_slot(&n, t->key[k]);
			n.key[j] = t->key[k], n.idx[j] = t->idx[k];
			n.n++;
		}
	ir_names_free(t);
	*t = n;
}

int
ir_names_put(NameTab *t, const char *s, int idx)
{
	size_t k;

	if (!t->cap)
		ir_names_init(t, 8);
	names_grow(t);
	k = names_slot(t, s);
	if (t->key[k])
		return t->idx[k];
	t->key[k] = s, t->idx[k] = idx;
	t->n++;
	return -1;
}

void
ir_names_set(NameTab *t, const char *s, int idx)
{
	size_t k;

	if (ir_names_put(t, s, idx) < 0)
		return;
	k = names_slot(t, s);
	t->key[k] = s, t->idx[k] = idx;
}

void
ir_names_free(NameTab *t)
{
	free(t->key);
	free(t->idx);
	*t = (NameTab){0};
}

void
ir_func_compact(Module *m, const bool *drop)
{
	int n = 0;

	for (int k = 0; k < m->nfn; k++)
		if (drop[k])
			func_free(m->fn[k]);
		else
			m->fn[n++] = m->fn[k];
	m->nfn = n;
}

Func *
ir_find_func(const Module *m, const char *name)
{
	for (int k = 0; k < m->nfn; k++)
		if (!strcmp(m->fn[k]->name, name))
			return m->fn[k];
	return NULL;
}

void
ir_func_remove(Module *m, int k)
{
	if (k < 0 || k >= m->nfn)
		return;
	func_free(m->fn[k]);
	memmove(&m->fn[k], &m->fn[k + 1], sizeof *m->fn * (size_t)(m->nfn - k - 1));
	m->nfn--;
}

static const char *const pattr_names[NPASSATTR] = {
	[PA_TARGET] = "target", [PA_CVT] = "cvt", [PA_MMA] = "mma", [PA_UPCAST] = "upcast",
	[PA_VEC] = "vec", [PA_MALIGN] = "m_align", [PA_FUSE] = "fuse",
	[PA_AMAX_SCHEME] = "amax_scheme", [PA_PROLOGUE] = "prologue",
	[PA_EPILOGUE] = "epilogue", [PA_HASH] = "hash", [PA_CALLS] = "calls",
	[PA_THREADS] = "threads", [PA_ELEMS] = "elems", [PA_TILE] = "tile", [PA_GRID] = "grid",
	[PA_SMEM] = "smem", [PA_LAUNCH] = "launch", [PA_M_VARIANT] = "m_variant",
};

const char *
pass_attr_name(PassAttr a)
{
	return (unsigned)a < NPASSATTR ? pattr_names[a] : "?";
}

int
pass_attr_by_name(const char *s)
{
	for (int k = 0; k < NPASSATTR; k++)
		if (!strcmp(pattr_names[k], s))
			return k;
	return -1;
}

void
ir_set_attr(char **pattr, PassAttr a, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	free(pattr[a]);
	pattr[a] = NULL;
	if (!fmt)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	pattr[a] = dupstr(buf);
}

Ins *
ir_def_ins(const Func *f, int v)
{
	if (v < 0 || v >= f->nval || f->val[v].def < 0)
		return NULL;
	return &f->ins[f->val[v].def];
}

void
ir_comment(char **slot, const char *fmt, ...)
{
	char line[512];
	size_t old, n;
	va_list ap;

	line[0] = '#', line[1] = ' ';
	va_start(ap, fmt);
	vsnprintf(line + 2, sizeof line - 2, fmt, ap);
	va_end(ap);
	old = *slot ? strlen(*slot) : 0;
	n = strlen(line);
	*slot = realloc(*slot, old + n + 2);
	if (!*slot)
		abort();
	if (old)
		(*slot)[old++] = '\n';
	memcpy(*slot + old, line, n + 1);
}

Type
ir_tensor(precc_format fmt, long d0, long d1)
{
	Type t = {.fmt = fmt, .rank = 2, .dim = {d0, d1}};

	return t;
}

Type
ir_vector(precc_format fmt, long d0)
{
	Type t = {.fmt = fmt, .rank = 1, .dim = {d0, 0}};

	return t;
}

Type
ir_index_vector(long d0)
{
	Type t = {.fmt = PRECC_FP32, .rank = 1, .dim = {d0, 0}, .index = true};

	return t;
}

Type
ir_scale_type(precc_format fmt, long d0, long d1, long b0, long b1)
{
	Type t = {.fmt = fmt, .rank = 2, .dim = {d0, d1}, .is_scale = true,
	          .block = {b0, b1}};

	return t;
}

long
ir_scaled_dim(long d, long b)
{
	if (b == 0)
		return 1;
	if (d >= 0)
		return (d + b - 1) / b;
	return d * b;       /* M/c blocked by b is M/(c*b) */
}

Type
ir_scale_of(precc_format fmt, const Type *d, long b0, long b1)
{
	return ir_scale_type(fmt, ir_scaled_dim(d->dim[0], b0),
	                     ir_scaled_dim(d->dim[1], b1), b0, b1);
}

bool
ir_type_eq(const Type *a, const Type *b)
{
	if (a->fmt != b->fmt || a->rank != b->rank || a->is_scale != b->is_scale
	    || a->index != b->index)
		return false;
	for (int i = 0; i < a->rank; i++) {
		if (a->dim[i] != b->dim[i])
			return false;
		if (a->is_scale && a->block[i] != b->block[i])
			return false;
	}
	return true;
}

static const struct { const char *name; float max; } fmts[PRECC_NFORMAT] = {
	[PRECC_FP32] = {"f32", 3.40282347e38f},
	[PRECC_TF32] = {"tf32", 3.40282347e38f},
	[PRECC_FP16] = {"f16", 65504.0f},
	[PRECC_BF16] = {"bf16", 3.38953139e38f},
	[PRECC_E4M3] = {"e4m3", 448.0f},
	[PRECC_E5M2] = {"e5m2", 57344.0f},
	[PRECC_E8M0] = {"e8m0", 1.70141183e38f},
	[PRECC_E2M1] = {"e2m1", 6.0f},
	[PRECC_E3M2] = {"e3m2", 28.0f},
	[PRECC_E2M3] = {"e2m3", 7.5f},
};

bool
ir_fmt_quantized(precc_format f)
{
	return f == PRECC_E4M3 || f == PRECC_E5M2 || f == PRECC_E2M1
	    || f == PRECC_E3M2 || f == PRECC_E2M3;
}

bool
ir_fmt_high(precc_format f)
{
	return f == PRECC_FP32 || f == PRECC_TF32 || f == PRECC_FP16 || f == PRECC_BF16;
}

const char *
ir_fmt_name(precc_format f)
{
	return (unsigned)f < PRECC_NFORMAT ? fmts[f].name : "?";
}

int
ir_fmt_by_name(const char *s)
{
	for (int i = 0; i < PRECC_NFORMAT; i++)
		if (!strcmp(fmts[i].name, s))
			return i;
	return -1;
}

float
ir_fmt_max(precc_format f)
{
	return (unsigned)f < PRECC_NFORMAT ? fmts[f].max : 0;
}

const char *
param_kind_name(ParamKind k)
{
	static const char *n[NPARAMKIND] = {"in", "weight", "grad", "state", "bias", "buf",
	                                    "main_grad"};

	return (unsigned)k < NPARAMKIND ? n[k] : "?";
}

const char *
accum_kind_name(AccumKind k)
{
	static const char *n[NACCKIND] = {"fp32", "promote", "fast"};

	return (unsigned)k < NACCKIND ? n[k] : "?";
}

const char *
hist_algo_name(HistAlgo a)
{
	static const char *n[NHISTALGO] = {"max", "most_recent"};

	return (unsigned)a < NHISTALGO ? n[a] : "?";
}

const char *
nonfinite_name(Nonfinite k)
{
	static const char *n[NNONFINITE_IR] = {"keep", "skip", "error", "one", "ieee"};

	return (unsigned)k < NNONFINITE_IR ? n[k] : "?";
}

const char *
nvfp4_rule_name(Nvfp4Rule k)
{
	static const char *n[NNVFP4RULE] = {"precc", "te2.14+", "te2.8-2.13", "torchao"};

	return (unsigned)k < NNVFP4RULE ? n[k] : "?";
}

const char *
mx_mode_name(MxMode k)
{
	static const char *n[NMXMODE] = {"rceil", "floor", "rceil_te"};

	return (unsigned)k < NMXMODE ? n[k] : "?";
}
