/*
 * print.c — the IR's text form (grammar in docs/ir.md). The printer is
 * canonical: parse.c accepts what it prints, and print(parse(t)) == t for
 * every printed t. Attributes at their defaults are left out.
 */
#include <stdlib.h>
#include <string.h>
#include "ir.h"

void
ir_print_dim(FILE *f, long d)
{
	if (d >= 0)
		fprintf(f, "%ld", d);
	else if (d == DIM_M)
		fputc('M', f);
	else
		fprintf(f, "M/%ld", -d);
}

static void
print_block(FILE *f, long b)
{
	if (b == 0)
		fputc('*', f);
	else if (b == BLOCK_GROUP)
		fputc('g', f);
	else
		fprintf(f, "%ld", b);
}

void
ir_print_type(FILE *f, const Type *t)
{
	fprintf(f, "%s[", t->index ? "i32" : ir_fmt_name(t->fmt));
	for (int i = 0; i < t->rank; i++) {
		if (i)
			fputc(',', f);
		ir_print_dim(f, t->dim[i]);
	}
	fputc(']', f);
	if (t->is_scale) {
		fputc('{', f);
		for (int i = 0; i < t->rank; i++) {
			if (i)
				fputc('x', f);
			print_block(f, t->block[i]);
		}
		fputc('}', f);
	}
}

/* Shortest %g form that reads back as the same float. */
static void
print_float(FILE *f, float x)
{
	char buf[32];

	for (int p = 1; p <= 9; p++) {
		snprintf(buf, sizeof buf, "%.*g", p, (double)x);
		if (strtof(buf, NULL) == x)
			break;
	}
	fputs(buf, f);
}

static void
print_comment(FILE *f, const char *indent, const char *c)
{
	const char *nl;

	while (c) {
		nl = strchr(c, '\n');
		int n = nl ? (int)(nl - c) : (int)strlen(c);
		fprintf(f, "%s%.*s\n", n ? indent : "", n, c);
		c = nl ? nl + 1 : NULL;
	}
}

/* Value names as printed: the value's own, or %N under a canonical
 * numbering (canon[v], for content hashes). */
static void
vname(FILE *f, const Func *fn, const int *canon, int v)
{
	if (v < 0 || v >= fn->nval)
		fputs("%?", f);
	else if (canon)
		fprintf(f, "%%%d", canon[v]);
	else
		fprintf(f, "%%%s", fn->val[v].name);
}

/* canon: 1 for an instruction (all but fuse), 2 for a header (the amax
 * scheme and the tile, which schedule chooses among several for a GEMM:
 * the rest is the target, the hash itself or derived from the body and
 * the tile by legalize and schedule). */
static void
print_pattrs(FILE *f, char *const *pattr, int canon)
{
	for (int k = 0; k < NPASSATTR; k++)
		if (pattr[k] && !(canon == 1 && k == PA_FUSE)
		    && !(canon == 2 && k != PA_AMAX_SCHEME && k != PA_TILE))
			fprintf(f, " %s=%s", pass_attr_name((PassAttr)k), pattr[k]);
}

static void
print_ins(FILE *f, const Func *fn, const Ins *i, const int *canon)
{
	unsigned a = opinfo[i->op].attrs;

	for (int k = 0; k < ir_nres(i); k++) {
		vname(f, fn, canon, ir_res(i, k));
		fputs(k + 1 < ir_nres(i) ? ", " : " = ", f);
	}
	fputs(opinfo[i->op].name, f);
	if ((a & A_PARAM) && !canon)     /* the code is the same whoever's buffer */
		fprintf(f, " %s", param_kind_name(i->param));
	if (i->op == OP_call)
		fprintf(f, " @%s(", i->callee ? i->callee : "?");
	for (int k = 0; k < i->narg; k++) {
		fputs(k ? ", " : i->op == OP_call ? "" : " ", f);
		vname(f, fn, canon, i->arg[k]);
	}
	if (i->op == OP_call)
		fputc(')', f);
	if (a & A_FMT)
		fprintf(f, " fmt=%s", ir_fmt_name(i->fmt));
	if ((a & A_BLOCKFMT) && i->has_blockfmt)
		fprintf(f, " block_fmt=%s", ir_fmt_name(i->blockfmt));
	if ((a & A_MARGIN) && i->margin)
		fprintf(f, " margin=%d", i->margin);
	if ((a & A_POW2) && i->pow2)
		fputs(i->pow2_log2 ? " pow2=log2" : " pow2", f);
	if ((a & A_EPS) && i->eps != 0) {
		fputs(" eps=", f);
		print_float(f, i->eps);
	}
	if ((a & A_NONFINITE) && i->nonfinite != NF_KEEP)
		fprintf(f, " nonfinite=%s", nonfinite_name(i->nonfinite));
	if (a & A_ALGO)
		fprintf(f, " algo=%s", hist_algo_name(i->algo));
	if ((a & A_ROUND) && i->round != PRECC_RNE)
		fprintf(f, " round=%s", precc_round_name(i->round));
	if ((a & A_SAT) && i->sat)
		fputs(" sat", f);
	if ((a & A_STREAM) && i->round == PRECC_SR)
		fprintf(f, " stream=%d", i->stream);
	if (a & A_ACCUM) {
		fprintf(f, " accum=%s", accum_kind_name(i->accum));
		if (i->accum != ACC_FP32)
			fprintf(f, ":%d", i->accum_n);
	}
	if (a & A_MXMODE)
		fprintf(f, " mode=%s", mx_mode_name(i->mxmode));
	if ((a & A_NAN) && i->nan_ignore)
		fputs(" nan=ignore", f);
	if ((a & A_ZERO) && i->zero_keep)
		fputs(" zero=keep", f);
	if ((a & A_FORM) && i->inv)
		fputs(" form=amax_over_fmax", f);
	if ((a & A_DIV) && i->divide)
		fputs(" div", f);
	if (a & A_GROUP)
		fputs(i->group_k ? " group=k" : " group=m", f);
	if ((a & A_NVFP4) && i->nvfp4 != NV_PRECC)
		fprintf(f, " nvfp4=%s", nvfp4_rule_name(i->nvfp4));
	if ((a & A_SIGNS) && i->signs)
		fprintf(f, " signs=0x%04x", i->signs);
	print_pattrs(f, i->pattr, canon != NULL);
	if (opinfo[i->op].result)
		for (int k = 0; k < ir_nres(i); k++) {
			int v = ir_res(i, k);
			fputs(k ? ", " : " : ", f);
			if (k == 0)
				ir_print_type(f, &i->type);
			else if (v >= 0 && v < fn->nval)
				ir_print_type(f, &fn->val[v].type);
		}
}

void
ir_print_ins(FILE *f, const Func *fn, const Ins *i)
{
	print_ins(f, fn, i, NULL);
}

void
ir_print_func(FILE *f, const Func *fn)
{
	print_comment(f, "", fn->comment);
	fprintf(f, "%s @%s", fn->kernel ? "kernel" : "func", fn->name);
	print_pattrs(f, fn->pattr, 0);
	fputs(" {\n", f);
	for (int k = 0; k < fn->nins; k++) {
		print_comment(f, "  ", fn->ins[k].comment);
		fputs("  ", f);
		print_ins(f, fn, &fn->ins[k], NULL);
		fputc('\n', f);
	}
	print_comment(f, "  ", fn->endcomment);
	fputs("}\n", f);
}

void
ir_print_func_canon(FILE *f, const Func *fn)
{
	int *canon = malloc(sizeof(int) * (size_t)(fn->nval + 1)), n = 0;

	if (!canon)
		abort();
	for (int v = 0; v < fn->nval; v++)
		canon[v] = -1;
	for (int k = 0; k < fn->nins; k++) {
		const Ins *i = &fn->ins[k];
		for (int a = 0; a < i->narg; a++)
			if (i->arg[a] >= 0 && i->arg[a] < fn->nval && canon[i->arg[a]] < 0)
				canon[i->arg[a]] = n++;
		for (int r = 0; r < ir_nres(i); r++) {
			int v = ir_res(i, r);
			if (v >= 0 && v < fn->nval && canon[v] < 0)
				canon[v] = n++;
		}
	}
	fprintf(f, "%s", fn->kernel ? "kernel" : "func");
	print_pattrs(f, fn->pattr, 2);
	fputs(" {\n", f);
	for (int k = 0; k < fn->nins; k++) {
		fputs("  ", f);
		print_ins(f, fn, &fn->ins[k], canon);
		fputc('\n', f);
	}
	fputs("}\n", f);
	free(canon);
}

void
ir_print_module(FILE *f, const Module *m)
{
	for (int k = 0; k < m->nfn; k++) {
		if (k)
			fputc('\n', f);
		ir_print_func(f, m->fn[k]);
	}
	if (m->endcomment) {
		if (m->nfn)
			fputc('\n', f);
		print_comment(f, "", m->endcomment);
	}
}

char *
ir_module_to_string(const Module *m)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);

	if (!f)
		abort();
	ir_print_module(f, m);
	fclose(f);
	return s;
}
