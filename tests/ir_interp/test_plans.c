/*
 * test_plans.c — every shipped recipe's full layer plan (each recipes/NAME.lua
 * x recipes/models/tiny.lua: every layer, fprop, dgrad and wgrad, as
 * frontend/lower.c lowers it) runs through the interpreter and lands within
 * a bound derived from the formats of a float64 GEMM of the same bf16
 * inputs; results do not depend on the thread count; NaN/inf inputs follow
 * the recipe's nonfinite policy (pinned below).
 *
 * Bound on the relative Frobenius error of each output:
 *   u(A) + u(B) + u(acc) + u(out),  u(f) = 2^-(mbits+1) (0 for an operand
 *   left in its bf16 source format), u(acc) = K·2^-24 for fp32, K·2^-B for
 *   fast:B, N·2^-14 + K·2^-24 for promote:N (14-bit chunks).
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe.h"
#include "ir.h"
#include "precc/interp.h"

static int failures;

#define CHECK(c) do { \
	if (!(c)) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
		failures++; \
	} \
} while (0)

enum { M = 128 };

typedef struct Layer {
	long in, out;
	uint16_t *x, *w, *dy;     /* bf16 X[M,in], W[out,in], dY[M,out] */
	double *ref[NGEMM];
} Layer;

static Layer layers[16];
static int nlayers;

static uint16_t
bf16(double v)
{
	return (uint16_t)precc_encode(PRECC_BF16, (float)v, PRECC_RNE, false, 0);
}

static double
dec(uint16_t c)
{
	return precc_decode(PRECC_BF16, c);
}

static void
fill(uint16_t *p, long n, double gain, uint64_t seed)
{
	for (long i = 0; i < n; i++) {
		uint32_t r[4], ctr[4] = {(uint32_t)i, 0, (uint32_t)seed, 0}, key[2] = {7, 9};
		precc_philox4x32_10(ctr, key, r);
		double u1 = (r[0] + 1.0) / 4294967296.0, u2 = r[1] / 4294967296.0;
		p[i] = bf16(gain * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
	}
}

/* The data and float64 reference of a layer shape (shared by equal shapes). */
static Layer *
layer(long in, long out)
{
	for (int i = 0; i < nlayers; i++)
		if (layers[i].in == in && layers[i].out == out)
			return &layers[i];
	Layer *l = &layers[nlayers++];
	l->in = in, l->out = out;
	l->x = malloc(M * in * 2), l->w = malloc(out * in * 2), l->dy = malloc(M * out * 2);
	fill(l->x, M * in, 1, 1 + in);
	fill(l->w, out * in, 1 / sqrt((double)in), 2 + out);
	fill(l->dy, M * out, 1, 3);
	l->ref[GEMM_FPROP] = calloc(M * out, sizeof(double));
	l->ref[GEMM_DGRAD] = calloc(M * in, sizeof(double));
	l->ref[GEMM_WGRAD] = calloc(out * in, sizeof(double));
	double *x = malloc(M * in * sizeof *x), *w = malloc(out * in * sizeof *w);
	for (long i = 0; i < M * in; i++)
		x[i] = dec(l->x[i]);
	for (long i = 0; i < out * in; i++)
		w[i] = dec(l->w[i]);
	for (long i = 0; i < M; i++)
		for (long j = 0; j < out; j++) {
			double dy = dec(l->dy[i * out + j]), y = 0;
			const double *xr = x + i * in, *wr = w + j * in;
			double *dx = l->ref[GEMM_DGRAD] + i * in, *dw = l->ref[GEMM_WGRAD] + j * in;
			for (long k = 0; k < in; k++) {
				y += xr[k] * wr[k];
				dx[k] += dy * wr[k];
				dw[k] += dy * xr[k];
			}
			l->ref[GEMM_FPROP][i * out + j] = y;
		}
	free(x);
	free(w);
	return l;
}

static double
unit(precc_format f)
{
	return f == PRECC_FP32 ? ldexp(1, -24) : ldexp(1, -(precc_format_get(f)->mbits + 1));
}

static const Ins *
find_gemm(const Func *f)
{
	for (int k = 0; k < f->nins; k++)
		if (f->ins[k].op == OP_gemm)
			return &f->ins[k];
	return NULL;
}

static double
bound(const Func *f, long K)
{
	const Ins *g = find_gemm(f);
	double b = 0;

	for (int k = 0; k < 2; k++) {
		precc_format fm = f->val[g->arg[k]].type.fmt;
		b += fm == PRECC_BF16 ? 0 : unit(fm);
	}
	b += g->accum == ACC_FAST ? K * ldexp(1, -g->accum_n)
	   : g->accum == ACC_PROMOTE ? g->accum_n * ldexp(1, -14) + K * ldexp(1, -24)
	   : K * ldexp(1, -24);
	return b + unit(f->val[f->ins[f->nins - 1].arg[0]].type.fmt);
}

typedef struct State { char name[128]; float *buf; size_t bytes; } State;
static State states[64];
static int nstates;

static float *
state(const char *name, size_t bytes)
{
	for (int i = 0; i < nstates; i++)
		if (!strcmp(states[i].name, name) && states[i].bytes == bytes)
			return states[i].buf;
	State *s = &states[nstates++];
	snprintf(s->name, sizeof s->name, "%s", name);
	s->bytes = bytes;
	s->buf = calloc(1, bytes);
	if (!strstr(name, "history"))
		for (size_t i = 0; i < bytes / 4; i++)
			s->buf[i] = 1;
	return s->buf;
}

static void
states_reset(void)
{
	for (int i = 0; i < nstates; i++)
		free(states[i].buf);
	nstates = 0;
}

/* Source data in a param's format (the layer's compute dtype): the bf16
 * data itself, or a converted copy, kept until the end. */
typedef struct Conv { const uint16_t *src; precc_format f; void *buf; } Conv;
static Conv convs[64];
static int nconvs;

static void *
in_format(const uint16_t *src, long n, precc_format f, bool cache)
{
	if (f == PRECC_BF16)
		return (void *)src;
	for (int i = 0; cache && i < nconvs; i++)
		if (convs[i].src == src && convs[i].f == f)
			return convs[i].buf;
	if (!cache || nconvs == 64) {
		fprintf(stderr, "in_format: unexpected conversion to %s\n", precc_format_get(f)->name);
		exit(1);
	}
	float *v = malloc((size_t)n * sizeof *v);
	void *buf = malloc((size_t)n * precc_interp_elem_bytes(f));
	precc_quant_opts o = {.qf = f, .round = PRECC_RNE};
	for (long i = 0; i < n; i++)
		v[i] = (float)dec(src[i]);
	if (precc_quantize(v, PRECC_FP32, 1, n, &o, buf))
		abort();
	free(v);
	convs[nconvs++] = (Conv){src, f, buf};
	return buf;
}

static IrInterp *
prepare(const Func *f, Layer *l, int threads, uint16_t *x)
{
	IrInterpOpts o;
	char err[1024];
	IrInterp *ip;

	ir_interp_opts_init(&o);
	o.m = M, o.threads = threads, o.seed = 5;
	if (!(ip = ir_interp_new(f, &o, err, sizeof err))) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	for (int k = 0; k < f->nins; k++) {
		const Ins *i = &f->ins[k];
		if (i->op != OP_param)
			continue;
		const char *name = f->val[i->res].name;
		long rows, cols;
		size_t n = ir_interp_value_bytes(ip, i->res, &rows, &cols);
		precc_format pf = f->val[i->res].type.fmt;
		const uint16_t *src = i->param == PARAM_IN ? (x ? x : l->x)
		                    : i->param == PARAM_WEIGHT ? l->w : l->dy;
		void *p = i->param == PARAM_STATE ? (void *)state(name, n)
		        : in_format(src, rows * cols, pf, src != x);
		if (i->param == PARAM_BIAS) {
			fprintf(stderr, "%s: no bias data in this test\n", f->name);
			exit(1);
		}
		if (ir_interp_bind(ip, name, p, n)) {
			fprintf(stderr, "%s\n", ir_interp_error(ip));
			exit(1);
		}
	}
	return ip;
}

/* The output of a run, decoded to float (n elements). */
static float *
output(const Func *f, IrInterp *ip, long *n)
{
	int v = ir_interp_result(ip, 0);
	long r, c;
	precc_format fm = f->val[v].type.fmt;
	const float *sinv = NULL;
	float *y;

	ir_interp_value_bytes(ip, v, &r, &c);
	if (ir_fmt_quantized(fm))
		sinv = ir_interp_value(ip, ir_interp_result(ip, 1));
	y = malloc((size_t)(r * c) * sizeof *y);
	if (precc_dequantize(ir_interp_value(ip, v), fm, r, c, (precc_block){0, 0}, sinv, y))
		abort();
	*n = r * c;
	return y;
}

/* Run the three GEMMs of layer li (funcs f[0..2]); on step 1 commit. */
static void
run_layer(const char *recipe, Func **f, Layer *l, bool check)
{
	bool delayed = false;

	states_reset();
	for (int g = 0; g < NGEMM; g++)
		for (int k = 0; k < f[g]->nins; k++)
			delayed |= f[g]->ins[k].op == OP_update;
	for (int step = delayed ? 0 : 1; step < 2; step++) {
		IrInterp *ip[NGEMM];
		for (int g = 0; g < NGEMM; g++) {
			ip[g] = prepare(f[g], l, 0, NULL);
			if (ir_interp_run(ip[g])) {
				fprintf(stderr, "%s: %s\n", recipe, ir_interp_error(ip[g]));
				failures++;
				ir_interp_free(ip[g]);
				ip[g] = NULL;
			}
		}
		for (int g = 0; g < NGEMM && step == 1 && check; g++) {
			long n, worst = 0, K = g == GEMM_FPROP ? l->in : g == GEMM_DGRAD ? l->out : M;
			if (!ip[g])
				continue;
			float *y = output(f[g], ip[g], &n);
			const double *ref = l->ref[g];
			double se = 0, sr = 0, we = -1, b = bound(f[g], K);
			bool finite = true;
			for (long i = 0; i < n; i++) {
				double e = fabs(y[i] - ref[i]);
				finite &= isfinite(y[i]);
				se += e * e, sr += ref[i] * ref[i];
				if (e > we)
					we = e, worst = i;
			}
			double rel = sqrt(se / sr);
			if (!finite || !(rel <= b)) {
				fprintf(stderr, "%s: %s: rel_fro %.4g > bound %.4g (or not finite); worst "
				        "element %ld: %.9g vs float64 %.9g\n", recipe, f[g]->name, rel, b,
				        worst, y[worst], ref[worst]);
				failures++;
			}
			free(y);
		}
		for (int g = 0; g < NGEMM; g++)
			if (ip[g]) {
				if (step == 0)
					ir_interp_commit(ip[g]);
				ir_interp_free(ip[g]);
			}
	}
}

static Module *
lower(const char *path, const Model *md, Recipe **rc, Plan **plan)
{
	char err[4096];
	Module *m;

	*rc = recipe_load(path);
	*plan = plan_resolve(*rc, md);
	m = lower_plan(*plan, NULL);
	if (ir_verify(m, err, sizeof err)) {
		fprintf(stderr, "%s: %s\n", path, err);
		exit(1);
	}
	return m;
}

/* The text of a layer's three funcs without names and comments: layers
 * with equal text compute the same thing (layers 0 and 1 of tiny), so one
 * run stands for all of them. */
static char *
body(Func **f)
{
	char *buf = NULL, *out, *o;
	size_t n = 0;
	FILE *s = open_memstream(&buf, &n);

	for (int g = 0; g < NGEMM; g++)
		ir_print_func(s, f[g]);
	fclose(s);
	out = o = malloc(n + 1);
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line + 1) : strlen(line);
		if (line[0] != '#' && strncmp(line, "func @", 6))
			memcpy(o, line, len), o += len;
		line += len;
	}
	*o = 0;
	free(buf);
	return out;
}

static int
cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every recipe, every layer, every GEMM; thread-count independence. */
static void
test_all(const Model *md)
{
	DIR *d = opendir(PRECC_RECIPES);
	struct dirent *e;
	char *names[64];
	int n = 0, nfn = 0, nrun = 0;

	CHECK(d != NULL);
	while (d && (e = readdir(d)))
		if (strlen(e->d_name) > 4 && !strcmp(e->d_name + strlen(e->d_name) - 4, ".lua")
		    && n < 64)
			names[n++] = strdup(e->d_name);
	if (d)
		closedir(d);
	qsort(names, (size_t)n, sizeof *names, cmp);
	CHECK(n >= 9);
	for (int r = 0; r < n; r++) {
		char path[512];
		Recipe *rc;
		Plan *plan;
		snprintf(path, sizeof path, "%s/%s", PRECC_RECIPES, names[r]);
		Module *m = lower(path, md, &rc, &plan);
		CHECK(m->nfn == NGEMM * md->nlinears);
		char *seen[64];
		int nseen = 0;
		for (int li = 0; li < plan->nlayers; li++) {
			const Linear *lin = plan->layers[li].linear;
			char *k = body(&m->fn[li * NGEMM]);
			bool dup = false;
			for (int j = 0; j < nseen && !dup; j++)
				dup = !strcmp(seen[j], k);
			nfn += NGEMM;
			if (dup || nseen == 64) {
				free(k);
				continue;
			}
			seen[nseen++] = k;
			run_layer(names[r], &m->fn[li * NGEMM], layer(lin->in_features, lin->out_features),
			          true);
			nrun += NGEMM;
		}
		for (int j = 0; j < nseen; j++)
			free(seen[j]);
		/* same bits on 1 and 3 threads (the first layer's fprop) */
		Layer *l = layer(md->linears[0].in_features, md->linears[0].out_features);
		IrInterp *a = prepare(m->fn[0], l, 1, NULL), *b = prepare(m->fn[0], l, 3, NULL);
		long na, nb;
		CHECK(ir_interp_run(a) == 0 && ir_interp_run(b) == 0);
		float *ya = output(m->fn[0], a, &na), *yb = output(m->fn[0], b, &nb);
		CHECK(na == nb && memcmp(ya, yb, (size_t)na * sizeof *ya) == 0);
		free(ya), free(yb);
		ir_interp_free(a), ir_interp_free(b);
		states_reset();
		ir_module_free(m);
		plan_free(plan);
		recipe_free(rc);
		free(names[r]);
	}
	printf("ir_interp plans: %d recipes, %d funcs (%d distinct) within their bounds\n", n, nfn,
	       nrun);
}

/* What a run with a poisoned input did. */
typedef struct Poisoned {
	float *y; long n;         /* the output (NULL when the run failed) */
	long nonfinite;           /* inf/NaN amax values */
	bool skipped;
	char err[512];
	float scale_before, scale_after, hist0, hist1; /* x's delayed state */
} Poisoned;

/* The fprop of recipe `path` (a shipped recipe's name, or a path), layer
 * 0, with X[0,0] = v, after one clean step, then committed. */
static Poisoned
poisoned_fprop(const Model *md, const char *name, float v)
{
	char path[512];
	Recipe *rc;
	Plan *plan;
	Layer *l = layer(md->linears[0].in_features, md->linears[0].out_features);
	uint16_t *x = malloc(M * l->in * 2);
	Poisoned p = {0};

	if (strchr(name, '/'))
		snprintf(path, sizeof path, "%s", name);
	else
		snprintf(path, sizeof path, "%s/%s.lua", PRECC_RECIPES, name);
	Module *m = lower(path, md, &rc, &plan);
	/* one clean step first, so delayed scaling has a real scale */
	run_layer(name, m->fn, l, false);
	memcpy(x, l->x, M * l->in * 2);
	x[0] = bf16(v);
	IrInterp *ip = prepare(m->fn[0], l, 0, x);
	int xs = ir_find_value(m->fn[0], "x.scale"), xh = ir_find_value(m->fn[0], "x.amax_history");
	size_t hb = xh >= 0 ? ir_interp_value_bytes(ip, xh, NULL, NULL) : 0;
	p.scale_before = xs >= 0 ? state("x.scale", 4)[0] : NAN;
	p.hist1 = xh >= 0 ? state("x.amax_history", hb)[0] : NAN;
	if (ir_interp_run(ip) == 0) {
		p.y = output(m->fn[0], ip, &p.n);
		CHECK(ir_interp_commit(ip) == 0);
	} else
		snprintf(p.err, sizeof p.err, "%s", ir_interp_error(ip));
	p.nonfinite = ir_interp_nonfinite(ip);
	p.skipped = ir_interp_skipped(ip);
	p.scale_after = xs >= 0 ? state("x.scale", 4)[0] : NAN;
	p.hist0 = xh >= 0 ? state("x.amax_history", hb)[0] : NAN;
	ir_interp_free(ip);
	states_reset();
	ir_module_free(m);
	plan_free(plan);
	recipe_free(rc);
	free(x);
	return p;
}

/* inf/NaN inputs, pinned (each shipped recipe as its reference does it,
 * docs/recipes.md "Reference knobs"):
 *  - current tensorwise (torchao: amax_nan propagate, nonfinite_scale
 *    ieee): a NaN makes the amax and the scale NaN: every row of Y is NaN;
 *  - blockwise 1x128 (deepseek_v3, DeepGEMM's sf = inf/448): an inf makes
 *    its block's multiplier 1/inf = 0, inf * 0 is NaN: row 0 of Y is NaN,
 *    the others finite;
 *  - delayed (te_delayed_hybrid, TE's fmaxf amax): the step quantizes with
 *    the old scale (NaN row NaN), the history records the amax of the
 *    other values, not NaN, and the next scale is the previous one;
 *  - nonfinite = "error" stops the run; "skip_step" runs it, marks it
 *    skipped, and drops its state updates. */
static bool
rows_ok(const Poisoned *p, long N, bool row0_nan)
{
	bool ok = p->y != NULL;

	for (long i = 0; ok && i < p->n; i++)
		ok = i < N && row0_nan ? isnan(p->y[i]) : isfinite(p->y[i]) != 0;
	return ok;
}

static void
test_nonfinite(const Model *md)
{
	long N = md->linears[0].out_features;
	Poisoned p = poisoned_fprop(md, "current_tensorwise", NAN);
	bool all_nan = p.y != NULL;

	for (long i = 0; all_nan && i < p.n; i++)
		all_nan = isnan(p.y[i]);
	CHECK(all_nan && p.nonfinite == 1 && !p.skipped);
	free(p.y);

	p = poisoned_fprop(md, "deepseek_v3", INFINITY);
	CHECK(rows_ok(&p, N, true) && p.nonfinite == 1);
	free(p.y);

	p = poisoned_fprop(md, "te_delayed_hybrid", NAN);
	CHECK(rows_ok(&p, N, true));
	CHECK(p.scale_before != 1.0f && p.scale_after == p.scale_before);  /* kept */
	CHECK(isfinite(p.hist0) && p.hist0 > 0);                          /* NaN skipped */
	free(p.y);

	/* nonfinite = "error": the run stops at the scale */
	p = poisoned_fprop(md, PRECC_TEST_INPUTS "/nonfinite_error.lua", NAN);
	CHECK(!p.y && strstr(p.err, "@model.layers.0.self_attn.q_proj.fprop: %x.scale = scale: ")
	      && strstr(p.err, "inf or NaN (nonfinite=error)"));
	free(p.y);

	/* nonfinite = "skip_step": the output is computed (NaN row), the step
	 * is marked skipped, and commit leaves scale and history untouched */
	p = poisoned_fprop(md, PRECC_TEST_INPUTS "/nonfinite_skip.lua", NAN);
	CHECK(rows_ok(&p, N, true) && p.skipped);
	CHECK(p.scale_before != 1.0f && p.scale_after == p.scale_before);
	CHECK(p.hist0 == p.hist1 && !isnan(p.hist0));
	free(p.y);
}

int
main(void)
{
	Model *md = model_load(PRECC_RECIPES "/models/tiny.lua");

	test_all(md);
	test_nonfinite(md);
	for (int i = 0; i < nlayers; i++) {
		free(layers[i].x), free(layers[i].w), free(layers[i].dy);
		for (int g = 0; g < NGEMM; g++)
			free(layers[i].ref[g]);
	}
	for (int i = 0; i < nconvs; i++)
		free(convs[i].buf);
	states_reset();
	model_free(md);
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures != 0;
}
