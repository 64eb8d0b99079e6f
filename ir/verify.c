/*
 * verify.c — the IR verifier. Every rule is in docs/ir.md ("Verifier");
 * each message names the function, the instruction and the value:
 *   file.ir:7:3: error: @f: %x.q = quantize: result must be a quantized ...
 * One error per instruction (the first rule it breaks); all instructions
 * and functions are checked.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"

typedef struct Ctx {
	const Module *m;
	const Func *f;
	const Ins *i;
	int line, col;
	char *err; size_t sz, len;
	int n;
	NameTab fns;              /* func name -> first index in m->fn */
	NameTab vals;             /* value name -> value defined so far (this func) */
} Ctx;

static bool
bad(Ctx *c, const char *fmt, ...)
{
	char msg[1024], pre[1024] = "";
	size_t k = 0;
	va_list ap;
	int w;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* k is clamped after each piece: snprintf returns the length it wanted, and a
	 * long module name (a manifest's kernel name, a file path) must not push the
	 * next write past pre. */
	if (c->line > 0)
		k += snprintf(pre, sizeof pre, "%.512s:%d:%d: ", c->m->name ? c->m->name : "<input>",
		              c->line, c->col);
	k = k < sizeof pre ? k : sizeof pre - 1;
	k += snprintf(pre + k, sizeof pre - k, "error: @%.256s: ", c->f->name);
	k = k < sizeof pre ? k : sizeof pre - 1;
	if (c->i && c->i->res >= 0)
		k += snprintf(pre + k, sizeof pre - k, "%%%.128s = ", c->f->val[c->i->res].name);
	k = k < sizeof pre ? k : sizeof pre - 1;
	if (c->i)
		snprintf(pre + k, sizeof pre - k, "%s: ", opinfo[c->i->op].name);
	c->n++;
	if (c->err && c->len < c->sz) {
		w = snprintf(c->err + c->len, c->sz - c->len, "%s%s%s", c->len ? "\n" : "", pre, msg);
		if (w > 0)
			c->len += (size_t)w;
		if (c->len >= c->sz)
			c->len = c->sz;
	}
	return false;
}

/* Rotating buffers so a message can show several types. */
static const char *
tstr(const Type *t)
{
	static char buf[4][96];
	static int k;
	char *s = buf[k++ & 3];
	FILE *f = fmemopen(s, sizeof buf[0], "w");

	if (!f)
		return "?";
	ir_print_type(f, t);
	fclose(f);
	return s;
}

static const char *
shape(const Type *t)
{
	static char buf[4][64];
	static int k;
	char *s = buf[k++ & 3];
	FILE *f = fmemopen(s, sizeof buf[0], "w");

	if (!f)
		return "?";
	fputc('[', f);
	for (int i = 0; i < t->rank; i++) {
		if (i)
			fputc(',', f);
		ir_print_dim(f, t->dim[i]);
	}
	fputc(']', f);
	fclose(f);
	return s;
}

static const char *
blockstr(const Type *t)
{
	static char buf[2][48];
	static int k;
	char *s = buf[k++ & 1];
	size_t n = 0;

	s[n++] = '{';
	for (int i = 0; i < t->rank; i++) {
		if (i)
			s[n++] = 'x';
		if (t->block[i] == BLOCK_GROUP)
			s[n++] = 'g';
		else if (t->block[i])
			n += (size_t)snprintf(s + n, 20, "%ld", t->block[i]);
		else
			s[n++] = '*';
	}
	s[n++] = '}';
	s[n] = 0;
	return s;
}

static const char *
vn(Ctx *c, int k)
{
	return c->f->val[c->i->arg[k]].name;
}

static const Type *
at(Ctx *c, int k)
{
	return &c->f->val[c->i->arg[k]].type;
}

static bool
same_shape(const Type *a, const Type *b)
{
	if (a->rank != b->rank)
		return false;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != b->dim[i])
			return false;
	return true;
}

static bool
is_tensorwise(const Type *t)
{
	return t->is_scale && t->rank == 2 && t->dim[0] == 1 && t->dim[1] == 1
	    && t->block[0] == 0 && t->block[1] == 0;
}

static bool
data(Ctx *c, int k, const char *role)
{
	if (at(c, k)->is_scale)
		return bad(c, "%s %%%s is a scale tensor %s, expected data", role, vn(c, k),
		           tstr(at(c, k)));
	return true;
}

static bool
high(Ctx *c, int k, const char *role)
{
	if (!data(c, k, role))
		return false;
	if (!ir_fmt_high(at(c, k)->fmt))
		return bad(c, "%s %%%s must be high precision (f32, tf32, f16 or bf16), got %s",
		           role, vn(c, k), ir_fmt_name(at(c, k)->fmt));
	return true;
}

static bool
f32_scale(Ctx *c, int k, const char *role)
{
	const Type *t = at(c, k);

	if (!t->is_scale)
		return bad(c, "%s %%%s must be a scale tensor (a type with a {granularity}), got %s",
		           role, vn(c, k), tstr(t));
	if (t->fmt != PRECC_FP32)
		return bad(c, "%s %%%s must be f32, got %s", role, vn(c, k), tstr(t));
	return true;
}

static bool
tensorwise(Ctx *c, int k, const char *role)
{
	if (!is_tensorwise(at(c, k)))
		return bad(c, "%s %%%s must be a tensorwise scale f32[1,1]{*x*}, got %s", role,
		           vn(c, k), tstr(at(c, k)));
	if (at(c, k)->fmt != PRECC_FP32)
		return bad(c, "%s %%%s must be f32, got %s", role, vn(c, k), tstr(at(c, k)));
	return true;
}

/* Does scale type s have the granularity it claims over data type d?
 * Edge blocks may be partial: the scale shape is ceil(dims / block). */
static bool
covers(Ctx *c, const Type *d, const char *dname, const Type *s, const char *sname)
{
	Type want;

	if (!s->is_scale)
		return bad(c, "%%%s must be a scale tensor (a type with a {granularity}), got %s",
		           sname, tstr(s));
	if (d->rank != 2 || s->rank != 2)
		return bad(c, "%%%s %s and its scale %%%s %s must both be rank 2", dname, tstr(d),
		           sname, tstr(s));
	if (s->block[0] == BLOCK_GROUP || s->block[1] == BLOCK_GROUP)
		return bad(c, "%%%s %s: a scale per group of rows ({gx*}) goes with the %%offs of "
		           "amax %%x, %%offs and quantize %%x, %%s, %%offs", sname, tstr(s));
	want = ir_scale_of(s->fmt, d, s->block[0], s->block[1]);
	if (!same_shape(&want, s))
		return bad(c, "%%%s has shape %s, but granularity %s over %%%s %s needs %s", sname,
		           shape(s), blockstr(s), dname, shape(d), shape(&want));
	return true;
}

/* The scale s of one slot per group of %offs (operand k) over the rows
 * of data d: f32[G,1]{gx*}, d rank 2. */
static bool
group_covers(Ctx *c, const Type *d, const char *dname, const Type *s, const char *sname, int k)
{
	const Type *o = at(c, k);

	if (!o->index || o->rank != 1 || o->dim[0] < 1)
		return bad(c, "offsets %%%s must be i32[G], the groups' end offsets, got %s",
		           vn(c, k), tstr(o));
	if (d->rank != 2)
		return bad(c, "%%%s %s: a scale per group of rows is of rank-2 data", dname, tstr(d));
	if (!s->is_scale || s->rank != 2 || s->block[0] != BLOCK_GROUP || s->block[1] != 0
	    || s->dim[0] != o->dim[0] || s->dim[1] != 1)
		return bad(c, "%%%s must be f32[%ld,1]{gx*}, one scale per group of %%%s's rows, got "
		           "%s", sname, o->dim[0], dname, tstr(s));
	return true;
}

static bool
result_is(Ctx *c, const Type *want)
{
	if (!ir_type_eq(&c->i->type, want))
		return bad(c, "result must be %s, got %s", tstr(want), tstr(&c->i->type));
	return true;
}

static bool
check_quant_scales(Ctx *c, int dk, int first)
{
	const Type *d = at(c, dk);

	if (c->i->narg - first == 2) {
		if (at(c, dk)->fmt != PRECC_E2M1 && c->i->op == OP_gemm)
			return bad(c, "two-level scales (block and global) are for e2m1 operands, "
			              "%%%s is %s", vn(c, dk), ir_fmt_name(d->fmt));
		return covers(c, d, vn(c, dk), at(c, first), vn(c, first))
		    && tensorwise(c, first + 1, "global scale");
	}
	return covers(c, d, vn(c, dk), at(c, first), vn(c, first));
}

/* accum=promote:N applies the scales at each promotion: the K blocks of
 * the two scale operands at args s and s + 1 are multiples of N */
static bool
promote_blocks(Ctx *c, int s)
{
	const Ins *i = c->i;
	if (i->accum != ACC_PROMOTE)
		return true;
	for (int k = s; k <= s + 1; k++) {
		long kb = at(c, k)->block[1];
		if (kb > 0 && kb % i->accum_n)    /* (a group's {*xg}: its tokens) */
			return bad(c, "accum=promote:%d applies scales at each promotion, so "
			              "K blocks must be multiples of %d; %%%s has %s",
			           i->accum_n, i->accum_n, vn(c, k), blockstr(at(c, k)));
	}
	return true;
}

/* the accumulation model's parameter in range (gemm, gemm_grouped) */
static bool
accum_range(Ctx *c)
{
	const Ins *i = c->i;
	if (i->accum == ACC_FAST && (i->accum_n < 1 || i->accum_n > 23))
		return bad(c, "accum=fast:%d: the accumulator keeps 1 to 23 mantissa bits", i->accum_n);
	if (i->accum == ACC_PROMOTE && i->accum_n < 1)
		return bad(c, "accum=promote:%d: the interval must be positive", i->accum_n);
	return true;
}

static bool
check_op(Ctx *c)
{
	const Ins *i = c->i;
	const Type *rt = &i->type, *a;
	Type want;

	switch (i->op) {
	case OP_param:
		if (i->param == PARAM_BIAS && (rt->rank != 1 || rt->is_scale))
			return bad(c, "a bias param must be a vector like bf16[N], got %s", tstr(rt));
		if (i->param == PARAM_STATE && rt->fmt != PRECC_FP32)
			return bad(c, "a state param must be f32, got %s", tstr(rt));
		if (i->param != PARAM_STATE && i->param != PARAM_BUF && rt->is_scale)
			return bad(c, "only a state or buf param may be a scale tensor, got %s", tstr(rt));
		if (i->param == PARAM_MAIN_GRAD && (rt->rank != 2 || rt->is_scale || rt->fmt != PRECC_FP32))
			return bad(c, "a main_grad param must be f32[N,K], got %s", tstr(rt));
		if (i->param == PARAM_BUF && !c->f->kernel)
			return bad(c, "buf params are for kernels (a func's inputs are in, weight, "
			              "grad, state or bias)");
		return true;
	case OP_amax:
		if (!data(c, 0, "operand"))
			return false;
		if (i->narg == 2) {    /* one per group of rows of %offs */
			if (rt->fmt != PRECC_FP32)
				return bad(c, "result must be f32, got %s", tstr(rt));
			return group_covers(c, at(c, 0), vn(c, 0), rt, c->f->val[i->res].name, 1);
		}
		if (!rt->is_scale)
			return bad(c, "result must be a scale tensor whose {granularity} says what "
			              "amax reduces over, e.g. f32[1,1]{*x*}; got %s", tstr(rt));
		if (rt->fmt != PRECC_FP32)
			return bad(c, "result must be f32, got %s", tstr(rt));
		return covers(c, at(c, 0), vn(c, 0), rt, c->f->val[i->res].name);
	case OP_scale:
		if (!f32_scale(c, 0, "amax"))
			return false;
		if (!ir_fmt_quantized(i->fmt))
			return bad(c, "fmt=%s is not a quantized format", ir_fmt_name(i->fmt));
		if (i->has_blockfmt && !ir_fmt_quantized(i->blockfmt))
			return bad(c, "block_fmt=%s is not a quantized format", ir_fmt_name(i->blockfmt));
		/* with block_fmt: NVFP4's decode scale amax / 2688 (torchao's) */
		if (i->inv && (i->narg == 2 || i->margin || i->pow2))
			return bad(c, "form=amax_over_fmax takes no previous scale, margin or pow2");
		if (!result_is(c, at(c, 0)))
			return false;
		if (i->narg == 2 && !ir_type_eq(at(c, 1), rt))
			return bad(c, "previous scale %%%s must have the result's type %s, got %s",
			           vn(c, 1), tstr(rt), tstr(at(c, 1)));
		return true;
	case OP_mx_scale:
		if (!f32_scale(c, 0, "amax"))
			return false;
		if (!ir_fmt_quantized(i->fmt))
			return bad(c, "fmt=%s is not a quantized format", ir_fmt_name(i->fmt));
		want = *at(c, 0);
		want.fmt = PRECC_E8M0;
		return result_is(c, &want);
	case OP_block_scale:
		if (!f32_scale(c, 0, "block amax") || !tensorwise(c, 1, "global scale"))
			return false;
		if (!ir_fmt_quantized(i->fmt))
			return bad(c, "fmt=%s is not a quantized format", ir_fmt_name(i->fmt));
		want = *at(c, 0);
		want.fmt = rt->fmt;
		return result_is(c, &want);
	case OP_recip:
		a = at(c, 0);
		if (!a->is_scale)
			return bad(c, "operand %%%s must be a scale tensor, got %s", vn(c, 0), tstr(a));
		want = *a;
		want.fmt = rt->fmt;
		return result_is(c, &want);
	case OP_history_push:
	case OP_history_reduce:
		a = at(c, 0);
		if (a->rank != 1 || a->is_scale || a->fmt != PRECC_FP32)
			return bad(c, "history %%%s must be an f32 vector like f32[1024], got %s",
			           vn(c, 0), tstr(a));
		if (i->op == OP_history_push)
			return tensorwise(c, 1, "amax") && result_is(c, a);
		want = ir_scale_type(PRECC_FP32, 1, 1, 0, 0);
		return result_is(c, &want);
	case OP_quantize:
		if (!high(c, 0, "operand"))
			return false;
		if (!ir_fmt_quantized(rt->fmt))
			return bad(c, "result must be a quantized format (e4m3, e5m2, e2m1, e3m2 or "
			              "e2m3), got %s", ir_fmt_name(rt->fmt));
		want = *at(c, 0);
		want.fmt = rt->fmt;
		if (!result_is(c, &want))
			return false;
		if (i->narg == 3 && at(c, 2)->index) {
			/* a scale per group of rows of %offs; rows past the last
			 * offset quantize to 0 */
			if (rt->fmt != PRECC_E4M3 && rt->fmt != PRECC_E5M2)
				return bad(c, "a scale per group of rows is for e4m3 and e5m2 results, "
				           "got %s", ir_fmt_name(rt->fmt));
			if (i->round == PRECC_SR)
				return bad(c, "a scale per group of rows is for round=rne and rz");
			return f32_scale(c, 1, "scale")
			    && group_covers(c, at(c, 0), vn(c, 0), at(c, 1), vn(c, 1), 2);
		}
		if (i->narg == 3 && rt->fmt != PRECC_E2M1)
			return bad(c, "two-level scales (block and global) are for e2m1 results, got %s",
			           ir_fmt_name(rt->fmt));
		if (i->narg == 3 && i->divide)
			return bad(c, "div is for one scale operand, not two-level scales");
		if (i->narg != 3 && i->nvfp4 != NV_PRECC)
			return bad(c, "nvfp4=%s is for two-level (block and global) scales",
			           nvfp4_rule_name(i->nvfp4));
		return check_quant_scales(c, 0, 1);
	case OP_dequantize:
		if (!data(c, 0, "operand"))
			return false;
		if (!ir_fmt_quantized(at(c, 0)->fmt))
			return bad(c, "operand %%%s must be quantized, got %s", vn(c, 0),
			           ir_fmt_name(at(c, 0)->fmt));
		if (!ir_fmt_high(rt->fmt))
			return bad(c, "result must be high precision (f32, tf32, f16 or bf16), got %s",
			           ir_fmt_name(rt->fmt));
		want = *at(c, 0);
		want.fmt = rt->fmt;
		return result_is(c, &want) && check_quant_scales(c, 0, 1);
	case OP_cast:
		if (!high(c, 0, "operand"))
			return false;
		if (!ir_fmt_high(rt->fmt))
			return bad(c, "result must be high precision (f32, tf32, f16 or bf16), got %s; "
			              "quantized formats need quantize and a scale", ir_fmt_name(rt->fmt));
		want = *at(c, 0);
		want.fmt = rt->fmt;
		return result_is(c, &want);
	case OP_hadamard:
		if (!high(c, 0, "operand"))
			return false;
		a = at(c, 0);
		if (a->rank != 2 || a->fmt == PRECC_TF32)
			return bad(c, "operand %%%s must be f32, f16 or bf16 of rank 2, got %s", vn(c, 0),
			           tstr(a));
		if (a->dim[1] >= 0 && a->dim[1] % 16)
			return bad(c, "%%%s has %ld columns: the transform takes blocks of 16", vn(c, 0),
			           a->dim[1]);
		return result_is(c, a);
	case OP_transpose:
		a = at(c, 0);
		if (a->rank != 2)
			return bad(c, "operand %%%s must be rank 2, got %s", vn(c, 0), tstr(a));
		want = *a;
		want.dim[0] = a->dim[1], want.dim[1] = a->dim[0];
		want.block[0] = a->block[1], want.block[1] = a->block[0];
		return result_is(c, &want);
	case OP_pad:
	case OP_slice:
		if (!data(c, 0, "operand"))
			return false;
		a = at(c, 0);
		if (rt->rank != a->rank || rt->fmt != a->fmt || rt->is_scale)
			return bad(c, "result %s must have the rank and format of %%%s %s", tstr(rt),
			           vn(c, 0), tstr(a));
		for (int k = 0; k < a->rank; k++) {
			bool ok = a->dim[k] < 0 ? rt->dim[k] == a->dim[k]
			        : rt->dim[k] >= 0 && (i->op == OP_pad ? rt->dim[k] >= a->dim[k]
			                                               : rt->dim[k] <= a->dim[k]);
			if (!ok)
				return bad(c, "%s %%%s %s to %s: %s only %s static dims", opinfo[i->op].name,
				           vn(c, 0), shape(a), shape(rt), opinfo[i->op].name,
				           i->op == OP_pad ? "grows" : "shrinks");
		}
		return true;
	case OP_gemm: {
		const Type *A = at(c, 0), *B = at(c, 1);
		bool qa, qb;

		if (!data(c, 0, "A") || !data(c, 1, "B"))
			return false;
		if (A->rank != 2 || B->rank != 2)
			return bad(c, "A %%%s and B %%%s must be rank 2, got %s and %s", vn(c, 0),
			           vn(c, 1), tstr(A), tstr(B));
		if (A->dim[1] != B->dim[1])
			return bad(c, "K mismatch: A %%%s is %s and B %%%s is %s (gemm is A[M,K]·B[N,K]ᵀ)",
			           vn(c, 0), shape(A), vn(c, 1), shape(B));
		want = ir_tensor(PRECC_FP32, A->dim[0], B->dim[0]);
		if (!result_is(c, &want))
			return false;
		qa = ir_fmt_quantized(A->fmt), qb = ir_fmt_quantized(B->fmt);
		if (qa != qb)
			return bad(c, "A %%%s is %s but B %%%s is %s: quantize both or neither", vn(c, 0),
			           ir_fmt_name(A->fmt), vn(c, 1), ir_fmt_name(B->fmt));
		if (!qa && i->narg != 2)
			return bad(c, "high-precision operands take no scales, got %d operands", i->narg);
		if (!qa && (!ir_fmt_high(A->fmt) || !ir_fmt_high(B->fmt)))
			return bad(c, "A and B must be high precision or quantized, got %s and %s",
			           ir_fmt_name(A->fmt), ir_fmt_name(B->fmt));
		if (qa) {
			int two = A->fmt == PRECC_E2M1 || B->fmt == PRECC_E2M1;
			if (two && i->narg != 6)
				return bad(c, "e2m1 operands need block and global scale_inv each: "
				              "gemm %%a, %%b, %%sa, %%sb, %%ga, %%gb (got %d operands)", i->narg);
			if (!two && i->narg != 4)
				return bad(c, "%s operands need one scale_inv each: gemm %%a, %%b, %%sa, %%sb "
				              "(got %d operands)", ir_fmt_name(A->fmt), i->narg);
			if (!covers(c, A, vn(c, 0), at(c, 2), vn(c, 2))
			    || !covers(c, B, vn(c, 1), at(c, 3), vn(c, 3)))
				return false;
			for (int k = 2; k <= 3; k++) {
				long kb = at(c, k)->block[1];
				if (kb > 0 && A->dim[1] >= 0 && A->dim[1] % kb)
					return bad(c, "K=%ld is not a multiple of the K block of %%%s %s: "
					              "blocks along K may not be partial", A->dim[1], vn(c, k),
					           blockstr(at(c, k)));
			}
			if (two && (!tensorwise(c, 4, "global scale_inv")
			            || !tensorwise(c, 5, "global scale_inv")))
				return false;
			if (!promote_blocks(c, 2))
				return false;
		}
		return accum_range(c);
	}
	case OP_gemm_grouped: {
		const Type *A = at(c, 0), *B = at(c, 1), *O = at(c, 2);
		bool qa, qb;
		long G;

		if (!data(c, 0, "A") || !data(c, 1, "B"))
			return false;
		if (!O->index || O->rank != 1 || O->dim[0] < 1)
			return bad(c, "offsets %%%s must be i32[G], the groups' end offsets, got %s",
			           vn(c, 2), tstr(O));
		G = O->dim[0];
		if (A->rank != 2 || B->rank != 2)
			return bad(c, "A %%%s and B %%%s must be rank 2, got %s and %s", vn(c, 0),
			           vn(c, 1), tstr(A), tstr(B));
		/* group=m with B[N,G*K]: the groups' weights stacked along K
		 * (dgrad's B, the stacked weights transposed) */
		bool kstack = !i->group_k && G > 1 && A->dim[1] > 0 && B->dim[1] == G * A->dim[1];
		if (A->dim[1] != B->dim[1] && !kstack)
			return bad(c, "%s mismatch: A %%%s is %s and B %%%s is %s", i->group_k
			           ? "token" : "K", vn(c, 0), shape(A), vn(c, 1), shape(B));
		if (kstack)          /* A[M,K] rows by group, B[N,G*K] */
			want = ir_tensor(PRECC_FP32, A->dim[0], B->dim[0]);
		else if (!i->group_k) {   /* A[M,K] rows by group, B[G*N,K] the groups' weights */
			if (B->dim[0] < 0 || B->dim[0] % G)
				return bad(c, "group=m: B %%%s %s must stack the %ld groups' [N,K] "
				           "weights: [%ld*N,K]", vn(c, 1), shape(B), G, G);
			want = ir_tensor(PRECC_FP32, A->dim[0], B->dim[0] / G);
		} else {             /* A[N,M], B[K,M]: each group reduces its tokens */
			if (A->dim[0] < 0 || B->dim[0] < 0)
				return bad(c, "group=k: A %%%s and B %%%s reduce over their columns; their "
				           "rows are static", vn(c, 0), vn(c, 1));
			want = ir_tensor(PRECC_FP32, G * A->dim[0], B->dim[0]);
		}
		if (!result_is(c, &want))
			return false;
		qa = ir_fmt_quantized(A->fmt), qb = ir_fmt_quantized(B->fmt);
		if (qa != qb)
			return bad(c, "A %%%s is %s but B %%%s is %s: quantize both or neither", vn(c, 0),
			           ir_fmt_name(A->fmt), vn(c, 1), ir_fmt_name(B->fmt));
		if (!qa && (i->narg != 3 || !ir_fmt_high(A->fmt) || !ir_fmt_high(B->fmt)))
			return bad(c, "high-precision operands take no scales: gemm_grouped %%a, %%b, "
			           "%%offs (got %d operands, %s and %s)", i->narg, ir_fmt_name(A->fmt),
			           ir_fmt_name(B->fmt));
		if (qa) {
			if (A->fmt == PRECC_E2M1 || B->fmt == PRECC_E2M1)
				return bad(c, "gemm_grouped takes no two-level (e2m1) scales");
			if (i->narg != 5)
				return bad(c, "%s operands need one scale_inv each: gemm_grouped %%a, %%b, "
				           "%%offs, %%sa, %%sb (got %d operands)", ir_fmt_name(A->fmt),
				           i->narg);
			for (int k = 3; k <= 4; k++) {
				const Type *s = at(c, k);
				bool gs = s->block[0] == BLOCK_GROUP || s->block[1] == BLOCK_GROUP;
				/* one scale per group: of A's rows (group=m, {gx*}: an
				 * expert's activation scale) or of the token columns
				 * (group=k, {*xg}: the transpose of the {gx*} scale) */
				Type w = i->group_k ? ir_scale_type(PRECC_FP32, 1, G, 0, BLOCK_GROUP)
				                    : ir_scale_type(PRECC_FP32, G, 1, BLOCK_GROUP, 0);
				if (gs && ((!i->group_k && k == 4) || !ir_type_eq(s, &w)))
					return bad(c, "%%%s %s: a scale per group is A's f32[%ld,1]{gx*} "
					           "(group=m) or A's or B's f32[1,%ld]{*xg} (group=k)", vn(c, k),
					           tstr(s), G, G);
				if (!gs && !covers(c, k == 3 ? A : B, vn(c, k - 3), s, vn(c, k)))
					return false;
			}
			long N = B->dim[0] / G, b0 = at(c, 4)->block[0], b1 = at(c, 4)->block[1];
			if (!i->group_k && !kstack && b0 && b0 != B->dim[0] && N % b0)
				return bad(c, "group=m: the row block %ld of %%%s straddles two groups' "
				           "weights (N=%ld)", b0, vn(c, 4), N);
			if (kstack && b1 && b1 != B->dim[1] && A->dim[1] % b1)
				return bad(c, "group=m: the K block %ld of %%%s straddles two groups' "
				           "weights (K=%ld)", b1, vn(c, 4), A->dim[1]);
			for (int k = 3; k <= 4 && !i->group_k; k++) {
				long kb = at(c, k)->block[1];
				if (kb > 0 && A->dim[1] % kb)
					return bad(c, "K=%ld is not a multiple of the K block of %%%s %s: "
					              "blocks along K may not be partial", A->dim[1], vn(c, k),
					           blockstr(at(c, k)));
			}
			if (!promote_blocks(c, 3))
				return false;
		}
		return accum_range(c);
	}
	case OP_bias:
		a = at(c, 0);
		if (a->rank != 2 || a->is_scale || a->fmt != PRECC_FP32)
			return bad(c, "accumulator %%%s must be f32[M,N], got %s", vn(c, 0), tstr(a));
		if (at(c, 1)->rank != 1 || at(c, 1)->is_scale)
			return bad(c, "bias %%%s must be a vector like bf16[N], got %s", vn(c, 1),
			           tstr(at(c, 1)));
		if (at(c, 1)->dim[0] != a->dim[1])
			return bad(c, "bias %%%s has %s elements but %%%s has %s columns", vn(c, 1),
			           shape(at(c, 1)), vn(c, 0), shape(a));
		return result_is(c, a);
	case OP_accumulate:
		a = at(c, 0);
		if (a->rank != 2 || a->is_scale || a->fmt != PRECC_FP32)
			return bad(c, "accumulate: %%%s must be f32[R,C], got %s", vn(c, 0), tstr(a));
		if (!ir_type_eq(a, at(c, 1)))
			return bad(c, "accumulate: %%%s is %s but %%%s is %s", vn(c, 1), tstr(at(c, 1)),
			           vn(c, 0), tstr(a));
		return result_is(c, a);
	case OP_update: {
		const Ins *d = ir_def_ins(c->f, i->arg[0]);
		if (c->f->kernel)
			return bad(c, "a kernel returns what it writes; update is for funcs");
		if (!d || d->op != OP_param || d->param != PARAM_STATE)
			return bad(c, "%%%s is not a state param", vn(c, 0));
		if (!ir_type_eq(at(c, 0), at(c, 1)))
			return bad(c, "new value %%%s is %s but state %%%s is %s", vn(c, 1),
			           tstr(at(c, 1)), vn(c, 0), tstr(at(c, 0)));
		for (const Ins *j = c->f->ins; j < i; j++)
			if (j->op == OP_update && j->narg >= 1 && j->arg[0] == i->arg[0])
				return bad(c, "state %%%s is updated twice", vn(c, 0));
		return true;
	}
	case OP_call: {
		int kx = ir_names_get(&c->fns, i->callee ? i->callee : "");
		const Func *k = kx >= 0 ? c->m->fn[kx] : NULL;
		const Ins *r = NULL;
		int np = 0;

		if (c->f->kernel)
			return bad(c, "a kernel calls no kernel");
		if (!k)
			return bad(c, "no kernel @%s", i->callee ? i->callee : "?");
		if (!k->kernel)
			return bad(c, "@%s is a func, not a kernel", k->name);
		for (int j = 0; j < k->nins; j++) {
			const Ins *p = &k->ins[j];
			if (p->op == OP_ret)
				r = p;
			if (p->op != OP_param || p->res < 0)
				continue;
			if (np < i->narg && !ir_type_eq(at(c, np), &p->type))
				return bad(c, "operand %d %%%s is %s but @%s's param %%%s is %s", np + 1,
				           vn(c, np), tstr(at(c, np)), k->name, k->val[p->res].name,
				           tstr(&p->type));
			np++;
		}
		if (np != i->narg)
			return bad(c, "@%s takes %d operand%s, got %d", k->name, np, np == 1 ? "" : "s",
			           i->narg);
		if (!r)
			return true;      /* the kernel's own error */
		if (r->narg != ir_nres(i))
			return bad(c, "@%s returns %d value%s, the call defines %d", k->name, r->narg,
			           r->narg == 1 ? "" : "s", ir_nres(i));
		for (int j = 0; j < r->narg; j++) {
			const Type *want = &k->val[r->arg[j]].type;
			const Value *v = &c->f->val[ir_res(i, j)];
			if (!ir_type_eq(&v->type, want))
				return bad(c, "result %%%s is %s but @%s returns %s", v->name, tstr(&v->type),
				           k->name, tstr(want));
		}
		return true;
	}
	case OP_ret:
	case NOP:
		return true;
	}
	return true;
}

/* Well-formed types: rank 1 or 2, positive static dims, M/B and blocks
 * only on scale tensors, which are rank 2; e2m1's last dim even. */
static bool
type_ok(Ctx *c, const Type *t)
{
	if (t->rank < 1 || t->rank > MAXRANK)
		return bad(c, "result type has rank %d (1 or 2)", t->rank);
	if ((unsigned)t->fmt >= PRECC_NFORMAT)
		return bad(c, "result type has no valid format");
	for (int k = 0; k < t->rank; k++) {
		if (t->dim[k] == 0)
			return bad(c, "result type %s has a zero dim", tstr(t));
		if (t->dim[k] < DIM_M && !t->is_scale)
			return bad(c, "result type %s: M/B dims are for scale tensors", tstr(t));
		if (t->is_scale && t->block[k] < 0 && t->block[k] != BLOCK_GROUP)
			return bad(c, "result type %s has a negative block", tstr(t));
	}
	if (t->is_scale && t->rank != 2)
		return bad(c, "result type %s: scale tensors are rank 2", tstr(t));
	if (t->index && (t->rank != 1 || t->is_scale || t->dim[0] < 1))
		return bad(c, "result type %s: i32 is a static vector (offsets)", tstr(t));
	if (t->index && c->i->op != OP_param && c->i->op != OP_call)
		return bad(c, "only a param (or a call) defines an i32 value, not %s",
		           opinfo[c->i->op].name);
	/* two codes a byte, row by row (an M last dim is checked at run time) */
	if (t->fmt == PRECC_E2M1 && t->dim[t->rank - 1] > 0 && t->dim[t->rank - 1] % 2)
		return bad(c, "result type %s: e2m1 is stored two codes per byte along the last "
		           "dim, which must be even", tstr(t));
	return true;
}

static bool
check_arity(Ctx *c)
{
	const OpInfo *o = &opinfo[c->i->op];
	int n = c->i->narg;

	if (n >= o->minargs && (o->maxargs < 0 || n <= o->maxargs))
		return true;
	if (o->maxargs < 0)
		return bad(c, "takes at least %d operand%s, got %d", o->minargs,
		           o->minargs == 1 ? "" : "s", n);
	if (o->minargs == o->maxargs)
		return bad(c, "takes %d operand%s, got %d", o->minargs, o->minargs == 1 ? "" : "s", n);
	if (c->i->op == OP_gemm)
		return bad(c, "takes 2, 4 or 6 operands, got %d", n);
	if (c->i->op == OP_gemm_grouped)
		return bad(c, "takes 3 or 5 operands (%%a, %%b, %%offs [, %%sa, %%sb]), got %d", n);
	return bad(c, "takes %d to %d operands, got %d", o->minargs, o->maxargs, n);
}

/* Record value v as defined; false when another value of its name was
 * defined before (by an earlier instruction or an earlier result of this
 * call). One table per func: linear, not a scan per value. */
static bool
defined_once(Ctx *c, int v)
{
	int w = ir_names_put(&c->vals, c->f->val[v].name, v);

	return w < 0 || w == v;
}

static void
verify_func(Ctx *c)
{
	const Func *f = c->f;
	int k;

	ir_names_free(&c->vals);
	ir_names_init(&c->vals, (size_t)f->nval);

	for (k = 0; k < f->nins; k++) {
		const Ins *i = &f->ins[k];
		bool ok = true;

		c->i = i;
		c->line = i->line, c->col = i->col;
		if (k > 0 && f->ins[k - 1].op == OP_ret) {
			bad(c, "instruction after ret");
			continue;
		}
		if ((i->res >= 0) != opinfo[i->op].result) {
			bad(c, i->res >= 0 ? "defines no value" : "must define a value");
			continue;
		}
		if (i->res >= f->nval) {
			bad(c, "result is not a value");
			continue;
		}
		if (i->res >= 0 && f->val[i->res].def != k) {
			bad(c, "redefinition of %%%s", f->val[i->res].name);
			continue;
		}
		for (int r = 0; r < i->nmore && ok; r++) {
			int v = i->more[r];
			if (v < 0 || v >= f->nval)
				ok = bad(c, "result is not a value");
			else if (f->val[v].def != k)
				ok = bad(c, "redefinition of %%%s", f->val[v].name);
			else if (!defined_once(c, v))
				ok = bad(c, "redefinition of %%%s", f->val[v].name);
		}
		if (!ok)
			continue;
		if (i->res >= 0 && !type_ok(c, &i->type))
			continue;
		if (i->res >= 0 && !defined_once(c, i->res)) {
			bad(c, "redefinition of %%%s", f->val[i->res].name);
			continue;
		}
		if (!check_arity(c))
			continue;
		for (int a = 0; a < i->narg && ok; a++) {
			const Value *v;
			if (i->arg[a] < 0 || i->arg[a] >= f->nval) {
				ok = bad(c, "operand %d is not a value", a + 1);
				break;
			}
			v = &f->val[i->arg[a]];
			if (v->def < 0)
				ok = bad(c, "%%%s is never defined", v->name);
			else if (v->def >= k)
				ok = bad(c, "%%%s is used before its definition", v->name);
			else if (v->type.index && !(i->op == OP_gemm_grouped && a == 2)
			         && !(i->op == OP_amax && a == 1) && !(i->op == OP_quantize && a == 2)
			         && i->op != OP_call)
				ok = bad(c, "%%%s is i32 (offsets): only gemm_grouped's third operand, "
				         "amax's second and quantize's third read it", v->name);
		}
		if (ok)
			check_op(c);
	}
	c->i = NULL;
	for (k = 0; k < f->nins && f->ins[k].op != OP_ret; k++)
		;
	if (k == f->nins) {
		c->line = f->line, c->col = f->col;
		bad(c, "missing ret at the end of the function");
	}
}

int
ir_verify(const Module *m, char *err, size_t errsz)
{
	Ctx c = {.m = m, .err = err, .sz = errsz};

	if (err && errsz)
		err[0] = 0;
	ir_names_init(&c.fns, (size_t)m->nfn);
	for (int k = 0; k < m->nfn; k++)
		ir_names_put(&c.fns, m->fn[k]->name, k);
	for (int k = 0; k < m->nfn; k++) {
		c.f = m->fn[k];
		c.i = NULL;
		if (ir_names_get(&c.fns, c.f->name) != k) {
			c.line = c.f->line, c.col = c.f->col;
			bad(&c, "function defined twice");
		}
		verify_func(&c);
	}
	ir_names_free(&c.fns);
	ir_names_free(&c.vals);
	return c.n;
}
