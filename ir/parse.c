/*
 * parse.c — the IR's text form back into a Module (grammar in docs/ir.md).
 * Line oriented: one instruction per line, '#' lines are kept as comments
 * of what follows them so that print(parse(t)) == t. Structure and syntax
 * are checked here; meaning (arity, types, order of definitions) is
 * verify.c's job, so that a parsed text can show every verifier error.
 */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"

/* What the text may say, in one place (docs/ir.md, "Limits"): longer
 * names or more operands are a parse error at their position. */
enum {
	IRP_NAME = 127,        /* characters of a value name */
	IRP_FUNC_NAME = 255,   /* of a func or kernel name */
	IRP_ATTR = 127,        /* of one attribute value */
	IRP_ARGS = 64,         /* operands of one instruction */
	IRP_RESULTS = 16,      /* results of one call */
};                         /* ranks: MAXRANK (ir.h); ints: long, checked */

/* name -> index, first definition wins (as ir_find_value): open
 * addressing on FNV-1a, at most half full. A linear lookup per operand made
 * a 2.3 MB .ir take 20 s. The names are the IR's own (stable) strings. */
typedef struct Names { const char **name; int *idx; size_t cap, n; } Names;

static size_t
name_hash(const char *s)
{
	return (size_t)ir_hash_bytes(IR_HASH_INIT, s, strlen(s));
}

static int
names_find(const Names *t, const char *s)
{
	if (!t->cap)
		return -1;
	for (size_t h = name_hash(s) & (t->cap - 1); t->name[h]; h = (h + 1) & (t->cap - 1))
		if (!strcmp(t->name[h], s))
			return t->idx[h];
	return -1;
}

static void
names_put(Names *t, const char *s, int idx)
{
	if (names_find(t, s) >= 0)
		return;
	if (2 * (t->n + 1) > t->cap) {
		Names u = {NULL, NULL, t->cap ? t->cap * 2 : 64, 0};
		if (!(u.name = calloc(u.cap, sizeof *u.name)) || !(u.idx = malloc(u.cap * sizeof *u.idx)))
			abort();
		for (size_t i = 0; i < t->cap; i++)
			if (t->name[i]) {
				size_t h = name_hash(t->name[i]) & (u.cap - 1);
				while (u.name[h])
					h = (h + 1) & (u.cap - 1);
				u.name[h] = t->name[i], u.idx[h] = t->idx[i], u.n++;
			}
		free(t->name);
		free(t->idx);
		*t = u;
	}
	size_t h = name_hash(s) & (t->cap - 1);
	while (t->name[h])
		h = (h + 1) & (t->cap - 1);
	t->name[h] = s, t->idx[h] = idx, t->n++;
}

static void
names_free(Names *t)
{
	free(t->name);
	free(t->idx);
	*t = (Names){0};
}

typedef struct Parser {
	const char *src, *p, *bol;   /* text, cursor, beginning of line */
	const char *name;
	int line;
	char *err; size_t errsz;
	jmp_buf fail;
	Module *m;
	char *pending;               /* comment lines not yet attached */
	Names vals, fns;             /* this func's values, the module's funcs */
} Parser;

static int
col(const Parser *ps, const char *at)
{
	return (int)(at - ps->bol) + 1;
}

static _Noreturn void
errat(Parser *ps, const char *at, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(ps->err, ps->errsz, "%s:%d:%d: error: ", ps->name, ps->line, col(ps, at));
	if (n < 0)
		n = 0;
	va_start(ap, fmt);
	if ((size_t)n < ps->errsz)
		vsnprintf(ps->err + n, ps->errsz - (size_t)n, fmt, ap);
	va_end(ap);
	longjmp(ps->fail, 1);
}

static void
skipws(Parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r')
		ps->p++;
}

static bool
eol(Parser *ps)
{
	skipws(ps);
	return *ps->p == '\n' || *ps->p == '\0';
}

static void
nextline(Parser *ps)
{
	while (*ps->p && *ps->p != '\n')
		ps->p++;
	if (*ps->p == '\n') {
		ps->p++;
		ps->line++;
	}
	ps->bol = ps->p;
}

/* What is at the cursor, for messages: the next word or a character. */
static const char *
what(Parser *ps, char *buf, size_t n)
{
	const char *s = ps->p;
	size_t k = 0;

	if (*s == '\n' || *s == '\0')
		return "end of line";
	while (s[k] && !isspace((unsigned char)s[k]) && s[k] != ',' && k + 1 < n)
		k++;
	if (k == 0)
		k = 1;
	snprintf(buf, n, "'%.*s'", (int)k, s);
	return buf;
}

static void
expect_eol(Parser *ps)
{
	char b[64];

	if (!eol(ps))
		errat(ps, ps->p, "expected end of line, got %s", what(ps, b, sizeof b));
}

static bool
namechar(int c)
{
	return isalnum(c) || c == '_' || c == '.' || c == '-';
}

/* Copy a name at the cursor into buf; returns its length (0: none). */
static size_t
name(Parser *ps, char *buf, size_t n)
{
	size_t k = 0;

	while (namechar((unsigned char)ps->p[k]))
		k++;
	if (k >= n)
		errat(ps, ps->p, "name too long (%zu characters, at most %zu)", k, n - 1);
	memcpy(buf, ps->p, k);
	buf[k] = 0;
	ps->p += k;
	return k;
}

/* Attach the pending comment lines, less trailing blank lines. */
static void
take_comment(Parser *ps, char **slot)
{
	char *c = ps->pending;
	size_t n = c ? strlen(c) : 0;

	while (n > 0 && c[n - 1] == '\n')
		c[--n] = 0;
	*slot = c;
	ps->pending = NULL;
}

/* The cursor is at '#' (or at the end of a blank line between comments at
 * module level): add the line to the pending comment. */
static void
add_comment(Parser *ps)
{
	const char *s = ps->p, *e = s;
	size_t old, n;

	while (*e && *e != '\n')
		e++;
	n = (size_t)(e - s);
	old = ps->pending ? strlen(ps->pending) : 0;
	ps->pending = realloc(ps->pending, old + n + 2);
	if (!ps->pending)
		abort();
	if (old)
		ps->pending[old++] = '\n';
	memcpy(ps->pending + old, s, n);
	ps->pending[old + n] = 0;
}

static long
number(Parser *ps, const char *what_)
{
	const char *s = ps->p;
	long v = 0;

	if (!isdigit((unsigned char)*s))
		errat(ps, s, "expected %s", what_);
	while (isdigit((unsigned char)*ps->p)) {
		if (v > 100000000000L)
			errat(ps, s, "%s is too large", what_);
		v = v * 10 + (*ps->p++ - '0');
	}
	return v;
}

static long
dim(Parser *ps)
{
	const char *s = ps->p;
	long b;

	if (*ps->p == 'M') {
		ps->p++;
		if (*ps->p != '/')
			return DIM_M;
		ps->p++;
		b = number(ps, "a block size after 'M/'");
		if (b < 1)
			errat(ps, s, "M/0 is not a dim");
		return -b;
	}
	return number(ps, "a dim (a number, M or M/B)");
}

static long
blockdim(Parser *ps)
{
	long b;

	if (*ps->p == '*') {
		ps->p++;
		return 0;
	}
	if (*ps->p == 'g') {    /* a group's rows of %offs */
		ps->p++;
		return BLOCK_GROUP;
	}
	b = number(ps, "a block size (a number, * or g)");
	if (b == 0)
		errat(ps, ps->p - 1, "block size 0 (write * for the whole extent)");
	return b;
}

static precc_format
format(Parser *ps)
{
	const char *s = ps->p;
	char buf[32];
	int f;
	size_t k = 0;

	while (isalnum((unsigned char)s[k]) && k + 1 < sizeof buf)
		k++;
	memcpy(buf, s, k);
	buf[k] = 0;
	if (!k)
		errat(ps, s, "expected a format");
	if ((f = ir_fmt_by_name(buf)) < 0)
		errat(ps, s, "unknown format '%s'", buf);
	ps->p += k;
	return (precc_format)f;
}

static Type
type(Parser *ps)
{
	Type t = {0};
	const char *s;

	if (!strncmp(ps->p, "i32[", 4)) {   /* gemm_grouped's offsets */
		t.index = true, t.fmt = PRECC_FP32;
		ps->p += 3;
	} else
		t.fmt = format(ps);
	if (*ps->p != '[')
		errat(ps, ps->p, "expected '[' after the format");
	ps->p++;
	for (;;) {
		s = ps->p;
		if (t.rank == MAXRANK)
			errat(ps, s, "at most %d dims", MAXRANK);
		t.dim[t.rank++] = dim(ps);
		if (*ps->p == ']')
			break;
		if (*ps->p != ',')
			errat(ps, ps->p, "expected ',' or ']' in the shape");
		ps->p++;
	}
	ps->p++;
	if (*ps->p != '{')
		return t;
	ps->p++;
	t.is_scale = true;
	for (int i = 0; i < t.rank; i++) {
		if (i) {
			if (*ps->p != 'x')
				errat(ps, ps->p, "expected 'x' between block sizes");
			ps->p++;
		}
		t.block[i] = blockdim(ps);
	}
	if (*ps->p != '}')
		errat(ps, ps->p, "expected '}' after %d block sizes", t.rank);
	ps->p++;
	return t;
}

static int
lookup_name(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], s))
			return i;
	return -1;
}

static int
enumval(Parser *ps, const char *at, const char *attr, const char *v,
        const char *const *names, int n)
{
	char list[128] = "";
	int k = lookup_name(names, n, v);

	if (k >= 0)
		return k;
	for (int i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
		         i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
	errat(ps, at, "bad %s '%s' (expected %s)", attr, v, list);
}

static long
intval(Parser *ps, const char *at, const char *attr, const char *v, long lo, long hi)
{
	char *end;
	long x;

	errno = 0;
	x = strtol(v, &end, 10);
	if (!*v || *end || errno || x < lo || x > hi)
		errat(ps, at, "bad %s '%s' (expected an integer in %ld..%ld)", attr, v, lo, hi);
	return x;
}

static const char *const round_names[] = {"rne", "rz", "sr"};
static const precc_round round_vals[] = {PRECC_RNE, PRECC_RZ, PRECC_SR};

static void
set_pass_attr(Parser *ps, char **pattr, PassAttr a, const char *at, const char *val,
              const char *vat)
{
	if (!val[0])
		errat(ps, vat, "'%s' needs a value: %s=...", pass_attr_name(a), pass_attr_name(a));
	if (pattr[a])
		errat(ps, at, "attribute '%s' given twice", pass_attr_name(a));
	pattr[a] = strdup(val);
	if (!pattr[a])
		abort();
}

/* A function header's key=value (pass attributes only). */
static void
header_attr(Parser *ps, Func *f)
{
	const char *at = ps->p, *vat;
	char key[32], val[IRP_ATTR + 1];
	size_t k = 0;
	int a;

	while ((isalnum((unsigned char)ps->p[k]) || ps->p[k] == '_') && k + 1 < sizeof key)
		k++;
	memcpy(key, ps->p, k);
	key[k] = 0;
	ps->p += k;
	if (!k || *ps->p != '=') {
		char b[64];
		ps->p = at;
		errat(ps, at, "expected '{' or key=value after @%s, got %s", f->name,
		      what(ps, b, sizeof b));
	}
	if ((a = pass_attr_by_name(key)) < 0)
		errat(ps, at, "unknown attribute '%s'", key);
	vat = ++ps->p;
	k = 0;
	while (ps->p[k] && !isspace((unsigned char)ps->p[k]) && k + 1 < sizeof val)
		k++;
	memcpy(val, ps->p, k);
	val[k] = 0;
	ps->p += k;
	set_pass_attr(ps, f->pattr, (PassAttr)a, at, val, vat);
}

static void
attribute(Parser *ps, Ins *i, unsigned *seen)
{
	static const char *const nf[] = {"keep", "skip", "error", "one", "ieee"};
	static const char *const algo[] = {"max", "most_recent"};
	static const char *const acc[] = {"fp32", "promote", "fast"};
	const char *at = ps->p, *vat;
	char key[32], val[IRP_ATTR + 1], *colon;
	unsigned a = opinfo[i->op].attrs, bit;
	size_t k = 0;
	int f;

	while ((isalnum((unsigned char)ps->p[k]) || ps->p[k] == '_') && k + 1 < sizeof key)
		k++;
	if (!k) {
		char b[64];
		if (*at == '#')
			errat(ps, at, "a comment must be on a line of its own");
		errat(ps, at, "expected an attribute or ':', got %s", what(ps, b, sizeof b));
	}
	memcpy(key, ps->p, k);
	key[k] = 0;
	ps->p += k;
	val[0] = 0;
	vat = ps->p;
	if (*ps->p == '=') {
		vat = ++ps->p;
		k = 0;
		while (ps->p[k] && !isspace((unsigned char)ps->p[k]) && k + 1 < sizeof val)
			k++;
		memcpy(val, ps->p, k);
		val[k] = 0;
		ps->p += k;
		if (!k)
			errat(ps, vat, "expected a value after '%s='", key);
	}
	if ((f = pass_attr_by_name(key)) >= 0) {
		set_pass_attr(ps, i->pattr, (PassAttr)f, at, val, vat);
		return;
	}
#define IS(s, b) (!strcmp(key, s) && (bit = b))
	if (IS("fmt", A_FMT) || IS("block_fmt", A_BLOCKFMT) || IS("margin", A_MARGIN)
	    || IS("pow2", A_POW2) || IS("eps", A_EPS) || IS("nonfinite", A_NONFINITE)
	    || IS("algo", A_ALGO) || IS("round", A_ROUND) || IS("sat", A_SAT)
	    || IS("stream", A_STREAM) || IS("accum", A_ACCUM) || IS("mode", A_MXMODE)
	    || IS("nan", A_NAN) || IS("zero", A_ZERO) || IS("form", A_FORM) || IS("div", A_DIV)
	    || IS("nvfp4", A_NVFP4) || IS("signs", A_SIGNS) || IS("group", A_GROUP)) {
		if (!(a & bit))
			errat(ps, at, "%s takes no attribute '%s'", opinfo[i->op].name, key);
	} else
		errat(ps, at, "unknown attribute '%s'", key);
#undef IS
	if (*seen & bit)
		errat(ps, at, "attribute '%s' given twice", key);
	*seen |= bit;
	/* flags; pow2 also takes =mask (the flag) or =log2 */
	if ((bit == A_SAT || bit == A_DIV) && val[0])
		errat(ps, vat, "'%s' is a flag and takes no value", key);
	if (bit != A_POW2 && bit != A_SAT && bit != A_DIV && !val[0])
		errat(ps, vat, "'%s' needs a value: %s=...", key, key);
	switch (bit) {
	case A_FMT:
	case A_BLOCKFMT:
		if ((f = ir_fmt_by_name(val)) < 0)
			errat(ps, vat, "unknown format '%s'", val);
		if (bit == A_FMT)
			i->fmt = (precc_format)f;
		else {
			i->blockfmt = (precc_format)f;
			i->has_blockfmt = true;
		}
		break;
	case A_MARGIN: i->margin = (int)intval(ps, vat, key, val, -127, 127); break;
	case A_POW2: {
		static const char *const pr[] = {"mask", "log2"};
		i->pow2 = true;
		i->pow2_log2 = val[0] && enumval(ps, vat, key, val, pr, 2) == 1;
		break;
	}
	case A_SAT: i->sat = true; break;
	case A_DIV: i->divide = true; break;
	case A_NAN: {
		static const char *const nv[] = {"propagate", "ignore"};
		i->nan_ignore = enumval(ps, vat, key, val, nv, 2) == 1;
		break;
	}
	case A_ZERO: {
		static const char *const zv[] = {"one", "keep"};
		i->zero_keep = enumval(ps, vat, key, val, zv, 2) == 1;
		break;
	}
	case A_FORM: {
		static const char *const fv[] = {"fmax_over_amax", "amax_over_fmax"};
		i->inv = enumval(ps, vat, key, val, fv, 2) == 1;
		break;
	}
	case A_SIGNS: {
		char *end;
		unsigned long m = strtoul(val, &end, 0);
		if (*end || m > 0xffff || val[0] == '-')
			errat(ps, vat, "bad signs '%s' (expected a 16-bit mask, 0 to 0xffff)", val);
		i->signs = (unsigned)m;
		break;
	}
	case A_GROUP: {
		static const char *const gv[] = {"m", "k"};
		i->group_k = enumval(ps, vat, key, val, gv, 2) == 1;
		break;
	}
	case A_NVFP4: {
		static const char *const rv[] = {"precc", "te2.14+", "te2.8-2.13", "torchao"};
		i->nvfp4 = enumval(ps, vat, key, val, rv, 4);
		break;
	}
	case A_EPS: {
		char *end;
		i->eps = strtof(val, &end);
		if (*end || !(i->eps >= 0) || i->eps > 3.4e38f)
			errat(ps, vat, "bad eps '%s' (expected a finite number >= 0)", val);
		break;
	}
	case A_NONFINITE: i->nonfinite = enumval(ps, vat, key, val, nf, 5); break;
	case A_ALGO: i->algo = enumval(ps, vat, key, val, algo, 2); break;
	case A_ROUND: i->round = round_vals[enumval(ps, vat, key, val, round_names, 3)]; break;
	case A_MXMODE: {
		static const char *const mm[] = {"rceil", "floor", "rceil_te"};
		i->mxmode = enumval(ps, vat, key, val, mm, 3);
		break;
	}
	case A_STREAM: i->stream = (int)intval(ps, vat, key, val, 0, 1 << 30); break;
	case A_ACCUM:
		if ((colon = strchr(val, ':')))
			*colon = 0;
		i->accum = enumval(ps, vat, key, val, acc, 3);
		if ((i->accum == ACC_FP32) != !colon)
			errat(ps, vat, i->accum == ACC_FP32 ? "accum=fp32 takes no ':N'"
			               : "accum=%s needs a count: accum=%s:N", val, val);
		if (colon)
			i->accum_n = (int)intval(ps, vat + (colon - val) + 1, "accum count",
			                         colon + 1, 1, 1 << 20);
		break;
	}
}

static int
new_value(Parser *ps, Func *f, const char *name, Type t)
{
	int v = ir_value(f, name, t);

	names_put(&ps->vals, f->val[v].name, v);
	return v;
}

static int
operand(Parser *ps, Func *f)
{
	char buf[IRP_NAME + 1];
	int v;

	ps->p++;    /* '%' */
	if (!name(ps, buf, sizeof buf))
		errat(ps, ps->p, "expected a value name after '%%'");
	if ((v = names_find(&ps->vals, buf)) < 0)
		v = new_value(ps, f, buf, (Type){0});
	return v;
}

static void
instruction(Parser *ps, Func *f)
{
	char res[IRP_NAME + 1] = "", opname[32], b[64], more[IRP_RESULTS][IRP_NAME + 1];
	const char *start = ps->p, *resat = NULL, *opat, *moreat[IRP_RESULTS];
	int args[IRP_ARGS], nargs = 0, op = -1, v, k, nmore = 0;
	Type mt[IRP_RESULTS];
	unsigned seen = 0;
	Type t = {0};
	Ins *i;

	if (*ps->p == '%') {
		resat = ps->p++;
		if (!name(ps, res, sizeof res))
			errat(ps, ps->p, "expected a value name after '%%'");
		skipws(ps);
		while (*ps->p == ',') {       /* a call's further results */
			ps->p++;
			skipws(ps);
			if (*ps->p != '%')
				errat(ps, ps->p, "expected a result after ','");
			if (nmore == (int)(sizeof more / sizeof more[0]))
				errat(ps, ps->p, "too many results");
			moreat[nmore] = ps->p++;
			if (!name(ps, more[nmore], sizeof more[0]))
				errat(ps, ps->p, "expected a value name after '%%'");
			nmore++;
			skipws(ps);
		}
		if (*ps->p != '=')
			errat(ps, ps->p, "expected '=' after %%%s", nmore ? more[nmore - 1] : res);
		ps->p++;
		skipws(ps);
	}
	opat = ps->p;
	for (k = 0; (isalnum((unsigned char)ps->p[k]) || ps->p[k] == '_') && k + 1 < (int)sizeof opname; k++)
		opname[k] = ps->p[k];
	opname[k] = 0;
	if (!k)
		errat(ps, opat, "expected an instruction, got %s", what(ps, b, sizeof b));
	for (int o = 0; o < NOP; o++)
		if (!strcmp(opinfo[o].name, opname))
			op = o;
	if (op < 0)
		errat(ps, opat, "unknown op '%s'", opname);
	ps->p += k;
	if (opinfo[op].result && !resat)
		errat(ps, start, "%s defines a value: write %%name = %s ...", opname, opname);
	if (!opinfo[op].result && resat)
		errat(ps, resat, "%s defines no value", opname);
	if (nmore && op != OP_call)
		errat(ps, moreat[0], "only call defines more than one value");

	/* Emit now (with no operands) so attributes land in place. */
	i = ir_emit(f, (Op)op, -1, NULL, 0);
	i->line = ps->line;
	i->col = col(ps, start);
	take_comment(ps, &i->comment);
	if (opinfo[op].attrs & A_PARAM) {
		static const char *const kinds[] = {"in", "weight", "grad", "state", "bias", "buf",
		                                     "main_grad"};
		char kind[32];
		const char *kat;
		skipws(ps);
		kat = ps->p;
		for (k = 0; (isalpha((unsigned char)ps->p[k]) || ps->p[k] == '_') && k + 1 < (int)sizeof kind; k++)
			kind[k] = ps->p[k];
		kind[k] = 0;
		if (!k)
			errat(ps, kat, "expected a param kind (in, weight, grad, state, bias, buf or main_grad)");
		ps->p += k;
		i->param = enumval(ps, kat, "param kind", kind, kinds, NPARAMKIND);
	}
	skipws(ps);
	if (op == OP_call) {
		char callee[IRP_FUNC_NAME + 1];
		if (*ps->p != '@')
			errat(ps, ps->p, "expected '@' and the kernel's name after call");
		ps->p++;
		if (!name(ps, callee, sizeof callee))
			errat(ps, ps->p, "expected a kernel name after '@'");
		if (*ps->p != '(')
			errat(ps, ps->p, "expected '(' after @%s", callee);
		ps->p++;
		skipws(ps);
		i = &f->ins[f->nins - 1];
		i->callee = strdup(callee);
		if (!i->callee)
			abort();
	}
	while (*ps->p == '%') {
		if (nargs == (int)(sizeof args / sizeof args[0]))
			errat(ps, ps->p, "too many operands");
		v = operand(ps, f);
		i = &f->ins[f->nins - 1];    /* ir_value does not move ins, but be safe */
		args[nargs++] = v;
		skipws(ps);
		if (*ps->p != ',')
			break;
		ps->p++;
		skipws(ps);
		if (*ps->p != '%')
			errat(ps, ps->p, "expected an operand after ','");
	}
	if (op == OP_call) {
		if (*ps->p != ')')
			errat(ps, ps->p, "expected ',' or ')' in the call's operands");
		ps->p++;
	}
	i = &f->ins[f->nins - 1];
	free(i->arg);
	i->arg = malloc(sizeof(int) * (size_t)(nargs ? nargs : 1));
	if (!i->arg)
		abort();
	memcpy(i->arg, args, sizeof(int) * (size_t)nargs);
	i->narg = nargs;
	while (!eol(ps) && *ps->p != ':')
		attribute(ps, i, &seen);
	if (*ps->p == ':') {
		if (!opinfo[op].result)
			errat(ps, ps->p, "%s has no result type", opname);
		ps->p++;
		skipws(ps);
		t = type(ps);
		for (k = 0; k < nmore; k++) {
			skipws(ps);
			if (*ps->p != ',')
				errat(ps, ps->p, "expected ',' and the type of %%%s", more[k]);
			ps->p++;
			skipws(ps);
			mt[k] = type(ps);
		}
	} else if (opinfo[op].result)
		errat(ps, ps->p, "expected ':' and the result type of %s", opname);
	expect_eol(ps);
	if ((opinfo[op].attrs & A_STREAM) && (seen & A_STREAM) && i->round != PRECC_SR)
		errat(ps, opat, "stream= is only for round=sr");
	if ((opinfo[op].attrs & A_STREAM) && !(seen & A_STREAM) && i->round == PRECC_SR)
		errat(ps, opat, "round=sr needs a random stream: stream=N");
	if ((opinfo[op].attrs & A_FMT) && !(seen & A_FMT))
		errat(ps, opat, "%s needs fmt=FORMAT", opname);
	if ((opinfo[op].attrs & A_ALGO) && !(seen & A_ALGO))
		errat(ps, opat, "%s needs algo=max or algo=most_recent", opname);
	if ((opinfo[op].attrs & A_MXMODE) && !(seen & A_MXMODE))
		errat(ps, opat, "%s needs mode=rceil or mode=floor", opname);
	if ((opinfo[op].attrs & A_ACCUM) && !(seen & A_ACCUM))
		errat(ps, opat, "%s needs accum=fp32, accum=promote:N or accum=fast:B", opname);
	if ((opinfo[op].attrs & A_GROUP) && !(seen & A_GROUP))
		errat(ps, opat, "%s needs group=m or group=k", opname);
	i->type = t;
	if (resat) {
		v = names_find(&ps->vals, res);
		if (v < 0 || f->val[v].def >= 0)    /* new, or a redefinition */
			v = new_value(ps, f, res, t);
		i = &f->ins[f->nins - 1];
		i->res = v;
		f->val[v].type = t;
		f->val[v].def = f->nins - 1;
	}
	if (nmore) {
		int *mv = malloc(sizeof(int) * (size_t)nmore);
		if (!mv)
			abort();
		for (k = 0; k < nmore; k++) {
			v = names_find(&ps->vals, more[k]);
			if (v < 0 || f->val[v].def >= 0)
				v = new_value(ps, f, more[k], mt[k]);
			f->val[v].type = mt[k];
			f->val[v].def = f->nins - 1;
			mv[k] = v;
		}
		i = &f->ins[f->nins - 1];
		i->more = mv, i->nmore = nmore;
	}
}

static void
function(Parser *ps, bool kernel)
{
	char fname[IRP_FUNC_NAME + 1];
	const char *at = ps->p;
	Func *f;

	ps->p += kernel ? 6 : 4;
	skipws(ps);
	if (*ps->p != '@')
		errat(ps, ps->p, "expected '@' and a function name");
	ps->p++;
	if (!name(ps, fname, sizeof fname))
		errat(ps, ps->p, "expected a function name after '@'");
	int k = names_find(&ps->fns, fname);
	if (k >= 0)
		errat(ps, at, "function @%s is defined twice (first at line %d)",
		      fname, ps->m->fn[k]->line);
	f = ir_func_new(ps->m, fname);
	names_put(&ps->fns, f->name, ps->m->nfn - 1);
	names_free(&ps->vals);
	f->kernel = kernel;
	f->line = ps->line;
	f->col = col(ps, at);
	skipws(ps);
	while (*ps->p != '{' && !eol(ps)) {
		header_attr(ps, f);
		skipws(ps);
	}
	if (*ps->p != '{')
		errat(ps, ps->p, "expected '{' after @%s", fname);
	ps->p++;
	expect_eol(ps);
	take_comment(ps, &f->comment);
	for (;;) {
		nextline(ps);
		skipws(ps);
		if (*ps->p == '\0') {
			ps->line = f->line;
			ps->bol = at - (f->col - 1);
			errat(ps, at, "@%s is not closed: missing '}'", fname);
		}
		if (*ps->p == '\n')
			continue;
		if (*ps->p == '#') {
			add_comment(ps);
			continue;
		}
		if (*ps->p == '}') {
			ps->p++;
			expect_eol(ps);
			take_comment(ps, &f->endcomment);
			return;
		}
		instruction(ps, f);
	}
}

Module *
ir_parse(const char *text, const char *name_, char *err, size_t errsz)
{
	Parser *ps = calloc(1, sizeof *ps);   /* not a local: survives longjmp */
	Module *m;
	char b[64];

	if (!ps)
		abort();
	*ps = (Parser){.src = text, .p = text, .bol = text, .name = name_ ? name_ : "<input>",
	               .line = 1, .err = err, .errsz = errsz};
	ps->m = ir_module_new();
	if (setjmp(ps->fail)) {
		ir_module_free(ps->m);
		names_free(&ps->vals);
		names_free(&ps->fns);
		free(ps->pending);
		free(ps);
		return NULL;
	}
	if (name_) {
		ps->m->name = strdup(name_);
		if (!ps->m->name)
			abort();
	}
	for (;;) {
		skipws(ps);
		if (*ps->p == '\0')
			break;
		if (*ps->p == '#' || (*ps->p == '\n' && ps->pending))
			add_comment(ps);
		else if (!strncmp(ps->p, "func", 4) && !namechar((unsigned char)ps->p[4]))
			function(ps, false);
		else if (!strncmp(ps->p, "kernel", 6) && !namechar((unsigned char)ps->p[6]))
			function(ps, true);
		else if (*ps->p != '\n')
			errat(ps, ps->p, "expected 'func', 'kernel' or a '#' comment, got %s",
			      what(ps, b, sizeof b));
		nextline(ps);
	}
	take_comment(ps, &ps->m->endcomment);
	m = ps->m;
	names_free(&ps->vals);
	names_free(&ps->fns);
	free(ps);
	return m;
}
