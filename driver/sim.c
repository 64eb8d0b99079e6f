/*
 * sim.c — precc sim: what a recipe costs in accuracy, measured.
 *
 * One linear layer (in = K, out = N) is planned under each recipe, lowered
 * to IR and run through the interpreter (ir/interp/interp.c) on seeded synthetic
 * data: fprop Y = X·Wᵀ, dgrad dX = dY·W, wgrad dW = dYᵀ·X with X[M,K],
 * W[N,K], dY[M,N] in bf16. Each output is compared with a float64 GEMM of
 * the same bf16 inputs. docs/sim.md defines every number printed.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "cli.h"
#include "recipe.h"
#include "ir.h"
#include "precc/interp.h"

typedef enum Dist { DIST_NORMAL, DIST_OUTLIERS, DIST_LOGNORMAL, NDIST } Dist;
static const char *const dist_names[NDIST] = {"normal", "outliers", "lognormal"};
static const char *const gnames[NGEMM] = {"fprop", "dgrad", "wgrad"};

enum { MAX_RECIPES = 16, OUTLIER_GAIN = 100, LOGNORMAL_SIGMA = 2 };

typedef struct Opts {
	const char *recipe[MAX_RECIPES]; int nrecipe;
	long m, n, k;
	bool accum_set; AccumKind accum; int accum_n;
	int accum_bits;           /* --accum-bits, 0 = not given */
	Dist dist;
	uint64_t seed;
	int threads;
	bool json;
	const char *layer;
} Opts;

/* The synthetic layer: bf16 codes (what the IR's params take) and their
 * exact values as float for the float64 reference. */
typedef struct Data {
	long m, n, k;
	uint16_t *x, *w, *dy, *bias;
	float *xf, *wf, *dyf, *biasf;
	double *ref[NGEMM];       /* Y[M,N], dX[M,K], dW[N,K]; fprop without bias */
	long outliers;            /* channels of X planted (--dist outliers) */
} Data;

typedef struct Operand {
	Role role;
	char desc[64];            /* "e4m3 blockwise 1x128" */
	bool cast;                /* a quantize/cast feeds the GEMM */
	IrQuantStats st;
} Operand;

typedef struct GemmResult {
	char accum[32], out[16];
	Operand op[2];
	long nonfinite;           /* inf/NaN outputs */
	double rel_fro, max_rel, snr_db;
	bool acc_measured;        /* accumulation not exact fp32: */
	double acc_rel_fro, acc_max_rel; /* accumulator vs exact fp32 accumulation */
} GemmResult;

typedef struct Result {
	const char *name, *path;
	GemmResult g[NGEMM];
	bool warmup;              /* delayed scaling: one step ran first */
	char pad[256];            /* fallback = "pad": the plan's reason */
} Result;

static void
help(FILE *f)
{
	fputs("usage: precc sim --recipe R [--recipe R2 ...] --m M --n N --k K [options]\n\n"
	      "Run one linear layer's fprop, dgrad and wgrad under each recipe through the\n"
	      "IR interpreter on seeded synthetic data and compare every output with a\n"
	      "float64 GEMM of the same (bf16) inputs. Shapes: X[M,K], W[N,K], dY[M,N].\n\n"
	      "  --recipe R          a recipe file (.lua); repeat to compare side by side\n"
	      "  --m M --n N --k K   tokens, out_features, in_features (positive)\n"
	      "  --accum A           run all three GEMMs with A instead of the recipe's:\n"
	      "                      fast (the reduced-precision accumulator; --accum-bits,\n"
	      "                      default 14), split or fp32 (exact fp32), promote:N\n"
	      "                      (fp32 every N K-elements; plain promote is 128)\n"
	      "  --accum-bits B      mantissa bits the fast accumulator keeps, 1..23; also\n"
	      "                      the bits inside each promote chunk (default 14)\n"
	      "  --dist D            normal (default), outliers (X gets a few channels 100x\n"
	      "                      larger, like transformer activations), lognormal\n"
	      "                      (magnitudes e^N(0,4), random signs)\n"
	      "  --seed S            data and stochastic-rounding seed (default 0)\n"
	      "  --threads T         interpreter threads (0 = all cores); the output does not\n"
	      "                      depend on T\n"
	      "  --layer-name FQN    the layer's name, for recipe rules (default sim.linear)\n"
	      "  --json              the same numbers as JSON\n"
	      "  --help              this text\n\n"
	      "Per operand: the share of values saturated (|x*scale| beyond fmax by more than\n"
	      "rounding, before the cast) and flushed to zero (nonzero, cast to 0). Per\n"
	      "output: relative Frobenius error |y-ref|_F / |ref|_F, max relative error\n"
	      "max|y-ref| / max|ref|, and SNR in dB. docs/sim.md has the details.\n\n"
	      "exit status: 0 success, 1 user error (bad recipe, a shape the recipe cannot\n"
	      "take, sizes beyond memory), 2 bad usage\n", f);
}

static int
parse_long(const char *opt, const char *s, long *out)
{
	char *end;

	errno = 0;
	long v = strtol(s, &end, 10);
	if (!*s || *end || errno)
		return usage_error("sim", "%s: '%s' is not an integer", opt, s);
	*out = v;
	return 0;
}

static int
parse_accum(const char *s, Opts *o)
{
	long n;
	char *end;

	o->accum_set = true;
	if (!strcmp(s, "split") || !strcmp(s, "fp32")) {
		o->accum = ACC_FP32, o->accum_n = 0;
		return 0;
	}
	if (!strcmp(s, "fast")) {
		o->accum = ACC_FAST, o->accum_n = 0;
		return 0;
	}
	if (!strcmp(s, "promote")) {
		o->accum = ACC_PROMOTE, o->accum_n = 128;
		return 0;
	}
	if (!strncmp(s, "promote:", 8) || !strncmp(s, "fast:", 5)) {
		const char *v = strchr(s, ':') + 1;
		errno = 0;
		n = strtol(v, &end, 10);
		if (*v && !*end && !errno && n > 0 && n <= (s[0] == 'f' ? 23 : 1 << 20)) {
			o->accum = s[0] == 'f' ? ACC_FAST : ACC_PROMOTE;
			o->accum_n = (int)n;
			return 0;
		}
		return usage_error("sim", "--accum %s: %s", s, s[0] == 'f'
		                   ? "fast:B keeps 1 to 23 mantissa bits"
		                   : "promote:N needs a positive interval N");
	}
	return usage_error("sim", "unknown accumulation '%s' (fast, split, fp32, promote:N)", s);
}

static int
parse_args(int argc, char **argv, Opts *o)
{
	static const char *const opts[] = {
		"--recipe", "--m", "--n", "--k", "--accum", "--accum-bits", "--dist",
		"--seed", "--threads", "--json", "--layer-name", "--help"};
	bool have[3] = {false, false, false};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL, *eq = strchr(a, '=');
		char name[32];
		long x;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			help(stdout);
			return -1;
		}
		if (!strcmp(a, "--json")) {
			o->json = true;
			continue;
		}
		if (a[0] != '-' || !a[1])
			return usage_error("sim", "unexpected argument '%s' (recipes go after --recipe)",
			                   a);
		snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
		int known = -1;
		for (int k = 0; k < (int)(sizeof opts / sizeof opts[0]); k++)
			if (!strcmp(name, opts[k]))
				known = k;
		if (known < 0 || !strcmp(name, "--json") || !strcmp(name, "--help")) {
			const char *s = suggest(name, opts, sizeof opts / sizeof opts[0]);
			if (s)
				return usage_error("sim", "unknown option '%s' (did you mean '%s'?)", a, s);
			return usage_error("sim", "unknown option '%s'", a);
		}
		if (eq)
			v = eq + 1;
		else if (++i == argc)
			return usage_error("sim", "%s needs a value", a);
		else
			v = argv[i];
		if (!strcmp(name, "--recipe")) {
			if (o->nrecipe == MAX_RECIPES)
				return usage_error("sim", "at most %d recipes", MAX_RECIPES);
			if (!*v)
				return usage_error("sim", "--recipe needs a recipe file");
			o->recipe[o->nrecipe++] = v;
		} else if (!strcmp(name, "--m") || !strcmp(name, "--n") || !strcmp(name, "--k")) {
			int d = name[2] == 'm' ? 0 : name[2] == 'n' ? 1 : 2;
			if (parse_long(name, v, &x))
				return 2;
			*(d == 0 ? &o->m : d == 1 ? &o->n : &o->k) = x;
			have[d] = true;
		} else if (!strcmp(name, "--accum")) {
			if (parse_accum(v, o))
				return 2;
		} else if (!strcmp(name, "--accum-bits")) {
			if (parse_long(name, v, &x))
				return 2;
			if (x < 1 || x > 23)
				return usage_error("sim", "--accum-bits %ld: the accumulator keeps 1 to 23 "
				                   "mantissa bits", x);
			o->accum_bits = (int)x;
		} else if (!strcmp(name, "--dist")) {
			int d = -1;
			for (int k = 0; k < NDIST; k++)
				if (!strcmp(v, dist_names[k]))
					d = k;
			if (d < 0) {
				const char *s = suggest(v, dist_names, NDIST);
				return usage_error("sim", "unknown distribution '%s'%s%s%s (normal, outliers, "
				                   "lognormal)", v, s ? " (did you mean '" : "", s ? s : "",
				                   s ? "'?)" : "");
			}
			o->dist = (Dist)d;
		} else if (!strcmp(name, "--seed")) {
			char *end;
			errno = 0;
			unsigned long long s = strtoull(v, &end, 0);
			if (!*v || *end || errno || v[0] == '-')
				return usage_error("sim", "--seed: '%s' is not a non-negative integer", v);
			o->seed = s;
		} else if (!strcmp(name, "--threads")) {
			if (parse_long(name, v, &x))
				return 2;
			if (x < 0 || x > 1024)
				return usage_error("sim", "--threads %ld: 0 (all cores) to 1024", x);
			o->threads = (int)x;
		} else if (!strcmp(name, "--layer-name")) {
			if (!*v)
				return usage_error("sim", "--layer-name needs a name");
			o->layer = v;
		}
	}
	if (!o->nrecipe)
		return usage_error("sim", "missing --recipe R");
	for (int d = 0; d < 3; d++)
		if (!have[d])
			return usage_error("sim", "missing --%c (the shape is X[M,K], W[N,K], dY[M,N])",
			                   "mnk"[d]);
	return 0;
}

/* ---- synthetic data ---------------------------------------------------- */

/* Uniform (0, 1] and [0, 1) from two Philox words of element i of tensor t. */
static void
draws(uint64_t seed, uint32_t t, uint64_t i, uint32_t out[4])
{
	uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), t, 0x5113u};
	uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};

	precc_philox4x32_10(ctr, key, out);
}

static double
gauss(const uint32_t r[4])
{
	double u1 = ((double)r[0] + 1.0) / 4294967296.0, u2 = (double)r[1] / 4294967296.0;

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static double
sample(Dist d, uint64_t seed, uint32_t t, uint64_t i)
{
	uint32_t r[4];
	double z;

	draws(seed, t, i, r);
	z = gauss(r);
	if (d == DIST_LOGNORMAL)
		return (r[2] & 1 ? -1.0 : 1.0) * exp(LOGNORMAL_SIGMA * z);
	return z;
}

static void
fill(uint16_t *code, float *val, long n, double gain, Dist d, uint64_t seed, uint32_t t)
{
	for (long i = 0; i < n; i++) {
		code[i] = (uint16_t)precc_encode(PRECC_BF16, (float)(gain * sample(d, seed, t, (uint64_t)i)),
		                                 PRECC_RNE, false, 0);
		val[i] = precc_decode(PRECC_BF16, code[i]);
	}
}

/* ref[r, c] = sum_j a[r, j] * b[c, j] in float64 (both K-contiguous). */
static void
ref_gemm(const float *a, const float *b, long rows, long cols, long k, double *ref)
{
	for (long r = 0; r < rows; r++)
		for (long c = 0; c < cols; c++) {
			const float *ar = a + r * k, *bc = b + c * k;
			double s = 0;
			for (long j = 0; j < k; j++)
				s += (double)ar[j] * (double)bc[j];
			ref[r * cols + c] = s;
		}
}

static float *
transposed(const float *x, long rows, long cols)
{
	float *t = xmalloc((size_t)rows * (size_t)cols * sizeof *t);

	for (long r = 0; r < rows; r++)
		for (long c = 0; c < cols; c++)
			t[c * rows + r] = x[r * cols + c];
	return t;
}

/* Bytes the data and reference need; 0 on overflow. */
static size_t
data_bytes(long m, long n, long k)
{
	size_t mk, nk, mn, sum, b;

	if (__builtin_mul_overflow((size_t)m, (size_t)k, &mk)
	    || __builtin_mul_overflow((size_t)n, (size_t)k, &nk)
	    || __builtin_mul_overflow((size_t)m, (size_t)n, &mn)
	    || __builtin_add_overflow(mk, nk, &sum) || __builtin_add_overflow(sum, mn, &sum)
	    || __builtin_mul_overflow(sum, (size_t)(2 + 4 + 8 + 8), &b))
		return 0;
	return b;
}

static void
data_make(Data *d, const Opts *o)
{
	long m = o->m, n = o->n, k = o->k;
	size_t mk = (size_t)m * (size_t)k, nk = (size_t)n * (size_t)k, mn = (size_t)m * (size_t)n;
	float *t0, *t1;

	memset(d, 0, sizeof *d);
	d->m = m, d->n = n, d->k = k;
	d->x = xmalloc(mk * 2), d->xf = xmalloc(mk * 4);
	d->w = xmalloc(nk * 2), d->wf = xmalloc(nk * 4);
	d->dy = xmalloc(mn * 2), d->dyf = xmalloc(mn * 4);
	d->bias = xmalloc((size_t)n * 2), d->biasf = xmalloc((size_t)n * 4);
	fill(d->x, d->xf, (long)mk, 1.0, o->dist, o->seed, 1);
	fill(d->w, d->wf, (long)nk, 1.0 / sqrt((double)k), o->dist, o->seed, 2);
	fill(d->dy, d->dyf, (long)mn, 1.0, o->dist, o->seed, 3);
	fill(d->bias, d->biasf, n, 0.1, DIST_NORMAL, o->seed, 4);
	if (o->dist == DIST_OUTLIERS) {
		/* outlier channels: one per 128 input channels (at least one),
		 * evenly spread from a seeded offset, 100x the rest */
		uint32_t r[4];
		long cnt = k / 128 > 0 ? k / 128 : 1, off;
		draws(o->seed, 5, 0, r);
		off = (long)(r[0] % (uint32_t)(k / cnt));
		d->outliers = cnt;
		for (long j = 0; j < cnt; j++) {
			long c = off + j * (k / cnt);
			for (long i = 0; i < m; i++) {
				size_t e = (size_t)i * (size_t)k + (size_t)c;
				d->x[e] = (uint16_t)precc_encode(PRECC_BF16, d->xf[e] * OUTLIER_GAIN,
				                                 PRECC_RNE, false, 0);
				d->xf[e] = precc_decode(PRECC_BF16, d->x[e]);
			}
		}
	}
	for (int g = 0; g < NGEMM; g++)
		d->ref[g] = xmalloc((g == GEMM_FPROP ? mn : g == GEMM_DGRAD ? mk : nk) * sizeof(double));
	ref_gemm(d->xf, d->wf, m, n, k, d->ref[GEMM_FPROP]);
	t0 = transposed(d->wf, n, k);           /* Wᵀ [K,N] */
	ref_gemm(d->dyf, t0, m, k, n, d->ref[GEMM_DGRAD]);
	free(t0);
	t0 = transposed(d->dyf, m, n);          /* dYᵀ [N,M] */
	t1 = transposed(d->xf, m, k);           /* Xᵀ [K,M] */
	ref_gemm(t0, t1, n, k, m, d->ref[GEMM_WGRAD]);
	free(t0);
	free(t1);
}

static void
data_free(Data *d)
{
	free(d->x), free(d->xf), free(d->w), free(d->wf), free(d->dy), free(d->dyf);
	free(d->bias), free(d->biasf);
	for (int g = 0; g < NGEMM; g++)
		free(d->ref[g]);
}

/* ---- one recipe --------------------------------------------------------- */

static void
describe(char *buf, size_t n, const Cast *c)
{
	int k = snprintf(buf, n, "%s", precc_format_get(c->format)->name);

	if (!ir_fmt_quantized(c->format) || k < 0 || (size_t)k >= n)
		return;
	k += snprintf(buf + k, n - (size_t)k, " %s", scaling_name(c->scaling));
	if ((size_t)k < n && (c->scaling == SCALING_BLOCK || c->scaling == SCALING_MX
	                      || c->scaling == SCALING_NVFP4)) {
		char a[16] = "*", b[16] = "*";
		if (c->block[0])
			snprintf(a, sizeof a, "%d", c->block[0]);
		if (c->block[1])
			snprintf(b, sizeof b, "%d", c->block[1]);
		snprintf(buf + k, n - (size_t)k, " %sx%s", a, b);
	}
}

static void
accum_str(char *buf, size_t n, const Ins *g)
{
	if (g->accum == ACC_FP32)
		snprintf(buf, n, "fp32");
	else
		snprintf(buf, n, "%s:%d", accum_kind_name(g->accum), g->accum_n);
}

static const Ins *
find_gemm(const Func *f)
{
	for (int k = 0; k < f->nins; k++)
		if (f->ins[k].op == OP_gemm)
			return &f->ins[k];
	return NULL;
}

/* The quantize, cast or param that produced GEMM operand v (through
 * transposes). */
static int
cast_of(const Func *f, int v)
{
	for (;;) {
		const Ins *d = ir_def_ins(f, v);
		if (!d)
			return -1;
		if (d->op == OP_transpose) {
			v = d->arg[0];
			continue;
		}
		return d->op == OP_quantize || d->op == OP_cast || d->op == OP_param
		       ? (int)(d - f->ins) : -1;
	}
}

/* A param's data in its format (the layer's compute dtype: bf16, or f16,
 * f32): the bf16 data as is, or converted (RNE) into conv, counting values
 * that overflow or flush to zero in *st. */
static void *
as_format(const uint16_t *code, const float *val, long n, precc_format f, void **conv,
          IrQuantStats *st)
{
	size_t es = precc_interp_elem_bytes(f);
	precc_quant_opts o = {.qf = f, .round = PRECC_RNE};

	memset(st, 0, sizeof *st);
	if (f == PRECC_BF16)
		return (void *)code;
	if (!es || precc_quantize(val, PRECC_FP32, 1, n, &o, *conv = xmalloc((size_t)n * es)))
		die("sim: converting data to %s: %s", precc_format_get(f)->name, precc_interp_error());
	st->n = n;
	for (long i = 0; i < n; i++) {
		uint32_t c = es == 2 ? ((uint16_t *)*conv)[i] : ((uint32_t *)*conv)[i];
		float d;
		if (es == 4)
			memcpy(&d, &c, 4);
		else
			d = precc_decode(f, c);
		st->saturated += isfinite(val[i]) && !isfinite(d);
		st->flushed += val[i] != 0 && d == 0;
	}
	return *conv;
}

typedef struct State { char *name; float *buf; size_t bytes; } State;

static float *
state_buf(State **st, int *nst, const char *name, size_t bytes)
{
	for (int i = 0; i < *nst; i++)
		if (!strcmp((*st)[i].name, name))
			return (*st)[i].bytes == bytes ? (*st)[i].buf : NULL;
	*st = xrealloc(*st, (size_t)(*nst + 1) * sizeof **st);
	State *s = &(*st)[(*nst)++];
	s->name = xstrdup(name);
	s->bytes = bytes;
	s->buf = xcalloc(1, bytes);
	/* a new scale starts at 1 (Transformer Engine's), a history at zeros */
	if (!strstr(name, "history"))
		for (size_t i = 0; i < bytes / sizeof(float); i++)
			s->buf[i] = 1.0f;
	return s->buf;
}

/* Errors of y against ref (n elements): relative Frobenius, max relative
 * (max|y-ref| / max|ref|), SNR; *nonfinite counts inf/NaN in y. */
static void
errors(const float *y, const double *refd, const float *reff, long n, double *rel_fro,
       double *max_rel, double *snr_db, long *nonfinite)
{
	double se = 0, sr = 0, maxref = 0, maxerr = 0;

	*nonfinite = 0;
	for (long i = 0; i < n; i++) {
		double ref = refd ? refd[i] : (double)reff[i], e = (double)y[i] - ref;
		if (!isfinite(y[i]))
			++*nonfinite;
		se += e * e;
		sr += ref * ref;
		if (fabs(ref) > maxref)
			maxref = fabs(ref);
		if (isnan(e) || fabs(e) > maxerr)
			maxerr = isnan(e) || isnan(maxerr) ? NAN : fabs(e);
	}
	*rel_fro = sr > 0 ? sqrt(se / sr) : se > 0 ? INFINITY : 0;
	*max_rel = maxref > 0 ? maxerr / maxref : maxerr > 0 ? INFINITY : 0;
	if (snr_db)
		*snr_db = se > 0 ? 10.0 * log10(sr / se) : INFINITY;
}

static void
measure(GemmResult *r, const float *y, const double *ref, long n)
{
	errors(y, ref, NULL, n, &r->rel_fro, &r->max_rel, &r->snr_db, &r->nonfinite);
}

/* The accumulation's own error: the GEMM's fp32 result against the same
 * GEMM of the same quantized operands with exact fp32 accumulation (the
 * Func runs again with accum=fp32; state is not committed). */
static int
accum_error(IrInterp *ip, Ins *gi, GemmResult *r)
{
	long rows, cols, nf;
	size_t bytes = ir_interp_value_bytes(ip, gi->res, &rows, &cols);
	float *acc = xmalloc(bytes);
	AccumKind k = gi->accum;
	int n = gi->accum_n, e;

	memcpy(acc, ir_interp_value(ip, gi->res), bytes);
	gi->accum = ACC_FP32, gi->accum_n = 0;
	e = ir_interp_run(ip);
	gi->accum = k, gi->accum_n = n;
	if (!e) {
		errors(acc, NULL, ir_interp_value(ip, gi->res), rows * cols, &r->acc_rel_fro,
		       &r->acc_max_rel, NULL, &nf);
		r->acc_measured = true;
	}
	free(acc);
	return e;
}

/* "precc sim: error: NAME: msg", exit status 1 */
static int
sim_error(const char *name, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "precc sim: error: %s: ", name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static int
run_recipe(const Opts *o, const Data *d, Recipe *rc, Result *res)
{
	Model md = {.name = "sim", .path = "sim"};
	Linear li = {.fqn = (char *)(o->layer ? o->layer : "sim.linear"), .in_features = o->k,
	             .out_features = o->n};
	Plan *plan;
	Module *mod;
	IrInterp *ip[NGEMM] = {NULL};
	State *st = NULL;
	int nst = 0, rv = 1, nconv = 0;
	void **conv = NULL;
	IrQuantStats (*pst)[64] = NULL;   /* param conversions */
	bool updates = false;
	char err[1024];
	float *y = NULL;

	md.linears = &li, md.nlinears = 1, md.synthetic = true;
	model_classify(&md);
	res->name = rc->name;
	plan = plan_resolve(rc, &md);
	/* a rule-based recipe measured on a layer none of its rules takes
	 * measures only its base settings: say so, and which layer */
	if (rc->nrules && !plan->layers[0].rule) {
		const Rule *u = &rc->rules[0];
		warnf(u->loc.file, u->loc.line, "precc sim measures the layer '%s', which none of "
		      "%s's %d rule%s matches (the first: '%s'): the numbers are its base settings; "
		      "--layer-name FQN measures a layer a rule takes", li.fqn, rc->name, rc->nrules,
		      rc->nrules == 1 ? "" : "s", u->pattern ? u->pattern : u->label ? u->label
		      : "(predicate)");
	} else if (plan->layers[0].rule && !o->json)
		fprintf(stderr, "precc sim: %s: layer '%s' takes the rule '%s'\n", rc->name, li.fqn,
		        plan->layers[0].rule);
	/* a fallback to another format would measure a different recipe;
	 * padding (fallback = "pad") is the recipe taking the shape */
	for (int g = 0; g < NGEMM; g++)
		if (plan->layers[0].reason[g] && !strstr(plan->layers[0].reason[g], "→ pad")) {
			sim_error(rc->name, "%s cannot run as written at N=%ld K=%ld: %s; precc sim "
			          "measures the recipe itself, so choose sizes it takes", gnames[g], o->n,
			          o->k, plan->layers[0].reason[g]);
			plan_free(plan);
			return 1;
		}
	for (int g = 0; g < NGEMM && !res->pad[0]; g++)
		if (plan->layers[0].reason[g])
			snprintf(res->pad, sizeof res->pad, "%s", plan->layers[0].reason[g]);
	mod = lower_plan(plan, NULL);
	if (mod->nfn != NGEMM || ir_verify(mod, err, sizeof err))
		die("sim: lowered IR does not verify: %s", err);
	/* wgrad reduces over M: scale blocks along it must divide M */
	for (int g = 0; g < NGEMM; g++) {
		const Func *f = mod->fn[g];
		const Ins *gi = find_gemm(f);
		for (int k = 2; gi && k < 4 && k < gi->narg; k++) {
			const Type *t = &f->val[gi->arg[k]].type;
			if (f->val[gi->arg[0]].type.dim[1] < 0 && t->block[1] > 0 && o->m % t->block[1]) {
				sim_error(rc->name, "%s reduces over M, and its %ldx%ld scale blocks along M "
				          "need M a multiple of %ld (M=%ld)", gnames[g], t->block[0],
				          t->block[1], t->block[1], o->m);
				ir_module_free(mod);
				plan_free(plan);
				return 1;
			}
		}
	}
	pst = xcalloc(NGEMM, sizeof *pst);
	IrInterpOpts io;
	ir_interp_opts_init(&io);
	io.m = o->m, io.threads = o->threads, io.seed = o->seed, io.stats = true;
	if (o->accum_bits)
		io.promote_bits = o->accum_bits;
	for (int g = 0; g < NGEMM; g++) {
		Func *f = mod->fn[g];
		for (int k = 0; k < f->nins; k++) {
			Ins *i = &f->ins[k];
			if (i->op == OP_update)
				updates = true;
			if (i->op != OP_gemm)
				continue;
			if (o->accum_set) {
				i->accum = o->accum;
				i->accum_n = o->accum == ACC_FAST ? (o->accum_bits ? o->accum_bits : 14)
				           : o->accum_n;
			} else if (i->accum == ACC_FAST && o->accum_bits)
				i->accum_n = o->accum_bits;
		}
		if (!(ip[g] = ir_interp_new(f, &io, err, sizeof err))) {
			sim_error(rc->name, "M=%ld N=%ld K=%ld: %s", o->m, o->n, o->k, err);
			goto out;
		}
		for (int k = 0; k < f->nins && k < 64; k++) {
			const Ins *i = &f->ins[k];
			if (i->op != OP_param)
				continue;
			const char *name = f->val[i->res].name;
			long rows, cols;
			size_t bytes = ir_interp_value_bytes(ip[g], i->res, &rows, &cols);
			precc_format pf = f->val[i->res].type.fmt;
			void *buf;
			if (i->param == PARAM_STATE)
				buf = state_buf(&st, &nst, name, bytes);
			else {
				const uint16_t *c = i->param == PARAM_IN ? d->x : i->param == PARAM_WEIGHT
				                  ? d->w : i->param == PARAM_GRAD ? d->dy : d->bias;
				const float *v = i->param == PARAM_IN ? d->xf : i->param == PARAM_WEIGHT
				               ? d->wf : i->param == PARAM_GRAD ? d->dyf : d->biasf;
				conv = xrealloc(conv, (size_t)(nconv + 1) * sizeof *conv);
				conv[nconv] = NULL;
				buf = as_format(c, v, rows * cols, pf, &conv[nconv], &pst[g][k]);
				nconv++;
			}
			if (!buf || ir_interp_bind(ip[g], name, buf, bytes)) {
				sim_error(rc->name, "%s", buf ? ir_interp_error(ip[g])
				                              : "state params disagree in size");
				goto out;
			}
		}
	}
	/* delayed scaling: a warm-up step on the same data fills the amax
	 * history; the measured step then uses the scales it left */
	res->warmup = updates;
	for (int step = updates ? 0 : 1; step < 2; step++) {
		for (int g = 0; g < NGEMM; g++)
			if (ir_interp_run(ip[g])) {
				sim_error(rc->name, "M=%ld N=%ld K=%ld: %s", o->m, o->n, o->k,
				          ir_interp_error(ip[g]));
				goto out;
			}
		if (step == 0)
			for (int g = 0; g < NGEMM; g++)
				ir_interp_commit(ip[g]);
	}
	for (int g = 0; g < NGEMM; g++) {
		const Func *f = mod->fn[g];
		const Ins *gi = find_gemm(f);
		const GemmPolicy *p = &plan->layers[0].gemm[g];
		GemmResult *r = &res->g[g];
		int yv = ir_interp_result(ip[g], 0);
		long rows, cols;
		precc_format yf = f->val[yv].type.fmt;
		const float *sinv = NULL;
		precc_block whole = {0, 0};

		accum_str(r->accum, sizeof r->accum, gi);
		snprintf(r->out, sizeof r->out, "%s", precc_format_get(yf)->name);
		for (int k = 0; k < 2; k++) {
			int c = cast_of(f, gi->arg[k]);
			const IrQuantStats *qs = c < 0 ? NULL : f->ins[c].op != OP_param
			                       ? ir_interp_quant_stats(ip[g], c)
			                       : c < 64 && pst[g][c].n ? &pst[g][c] : NULL;
			r->op[k].role = p->role[k];
			describe(r->op[k].desc, sizeof r->op[k].desc, &p->operand[k]);
			r->op[k].cast = qs != NULL;
			if (qs)
				r->op[k].st = *qs;
		}
		ir_interp_value_bytes(ip[g], yv, &rows, &cols);
		if (ir_fmt_quantized(yf) && ir_interp_nresults(ip[g]) > 1)
			sinv = ir_interp_value(ip[g], ir_interp_result(ip[g], 1));
		y = xrealloc(y, (size_t)rows * (size_t)cols * sizeof *y);
		if (precc_dequantize(ir_interp_value(ip[g], yv), yf, rows, cols, whole, sinv, y))
			die("sim: decoding %s output: %s", gnames[g], precc_interp_error());
		if (g == GEMM_FPROP && ir_find_value(f, "bias") >= 0) {
			/* the recipe adds a bias: so does the reference */
			double *ref = xmalloc((size_t)rows * (size_t)cols * sizeof *ref);
			for (long i = 0; i < rows * cols; i++)
				ref[i] = d->ref[g][i] + d->biasf[i % cols];
			measure(r, y, ref, rows * cols);
			free(ref);
		} else
			measure(r, y, d->ref[g], rows * cols);
		if (gi->accum != ACC_FP32 && accum_error(ip[g], (Ins *)gi, r)) {
			sim_error(rc->name, "%s", ir_interp_error(ip[g]));
			goto out;
		}
	}
	rv = 0;
out:
	free(y);
	for (int i = 0; i < nconv; i++)
		free(conv[i]);
	free(conv);
	free(pst);
	for (int g = 0; g < NGEMM; g++)
		ir_interp_free(ip[g]);
	for (int i = 0; i < nst; i++)
		free(st[i].name), free(st[i].buf);
	free(st);
	ir_module_free(mod);
	plan_free(plan);
	return rv;
}

/* ---- output ------------------------------------------------------------- */

static void
pct(char *buf, size_t n, long num, long den)
{
	if (!num)
		snprintf(buf, n, "0");
	else
		snprintf(buf, n, "%.3g%%", 100.0 * (double)num / (double)den);
}

static void
ratio(char *buf, size_t n, double v)
{
	if (isnan(v) || isinf(v))
		snprintf(buf, n, "%s", isnan(v) ? "nan" : "inf");
	else if (v == 0)
		snprintf(buf, n, "0");
	else
		snprintf(buf, n, "%.3g%%", 100.0 * v);
}

enum { NROW_GEMM = 13, CELL = 72 };

static void
print_table(const Opts *o, const Data *d, const Result *res, int nres)
{
	static const char *const label[NROW_GEMM] = {
		"A", "B", "accum", "out", "A saturated", "A flushed", "B saturated", "B flushed",
		"rel_fro", "max_rel", "SNR dB", "acc rel_fro", "acc max_rel"};
	char (*cell)[CELL] = xcalloc((size_t)nres * NGEMM * NROW_GEMM, CELL);
	int w0 = 22, w[MAX_RECIPES];

	for (int r = 0; r < nres; r++) {
		w[r] = (int)strlen(res[r].name);
		for (int g = 0; g < NGEMM; g++) {
			const GemmResult *x = &res[r].g[g];
			char (*c)[CELL] = cell + ((size_t)r * NGEMM + g) * NROW_GEMM;
			for (int k = 0; k < 2; k++) {
				snprintf(c[k], CELL, "%s", x->op[k].desc);
				if (x->op[k].cast) {
					pct(c[4 + 2 * k], CELL, x->op[k].st.saturated, x->op[k].st.n);
					pct(c[5 + 2 * k], CELL, x->op[k].st.flushed, x->op[k].st.n);
				} else
					snprintf(c[4 + 2 * k], CELL, "-"), snprintf(c[5 + 2 * k], CELL, "-");
			}
			snprintf(c[2], CELL, "%s", x->accum);
			if (x->nonfinite)
				snprintf(c[3], CELL, "%s (%ld inf/nan)", x->out, x->nonfinite);
			else
				snprintf(c[3], CELL, "%s", x->out);
			ratio(c[8], CELL, x->rel_fro);
			ratio(c[9], CELL, x->max_rel);
			if (isnan(x->snr_db) || isinf(x->snr_db))
				snprintf(c[10], CELL, "%s", isnan(x->snr_db) ? "nan" : x->snr_db > 0 ? "inf"
				                                                                    : "-inf");
			else
				snprintf(c[10], CELL, "%.1f", x->snr_db);
			if (x->acc_measured) {
				ratio(c[11], CELL, x->acc_rel_fro);
				ratio(c[12], CELL, x->acc_max_rel);
			} else
				snprintf(c[11], CELL, "-"), snprintf(c[12], CELL, "-");
			for (int k = 0; k < NROW_GEMM; k++)
				if ((int)strlen(c[k]) > w[r])
					w[r] = (int)strlen(c[k]);
		}
	}
	printf("precc sim: %s, M=%ld N=%ld K=%ld, dist %s", o->layer ? o->layer : "sim.linear",
	       o->m, o->n, o->k, dist_names[o->dist]);
	if (d->outliers)
		printf(" (%ld outlier channel%s x%d)", d->outliers, d->outliers == 1 ? "" : "s",
		       OUTLIER_GAIN);
	printf(", seed %llu\n", (unsigned long long)o->seed);
	printf("%-*s", w0, "");
	for (int r = 0; r < nres; r++)
		printf("  %-*s", r == nres - 1 ? 0 : w[r], res[r].name);
	putchar('\n');
	for (int g = 0; g < NGEMM; g++)
		for (int k = 0; k < NROW_GEMM; k++) {
			char lab[64];
			if (k < 2)
				snprintf(lab, sizeof lab, "%-6s %s (%s)", k == 0 ? gnames[g] : "", label[k],
				         role_name(res[0].g[g].op[k].role));
			else
				snprintf(lab, sizeof lab, "%-6s %s", "", label[k]);
			printf("%-*s", w0, lab);
			for (int r = 0; r < nres; r++) {
				const char *c = cell[((size_t)r * NGEMM + g) * NROW_GEMM + k];
				if (r == nres - 1)
					printf("  %s", c);
				else
					printf("  %-*s", w[r], c);
			}
			putchar('\n');
		}
	for (int r = 0; r < nres; r++)
		if (res[r].pad[0])
			printf("(%s: %s; the padding zeros count in the operands' shares)\n", res[r].name,
			       res[r].pad);
	for (int r = 0; r < nres; r++)
		if (res[r].warmup)
			printf("(%s: delayed scaling, measured on the second step after one warm-up "
			       "step)\n", res[r].name);
	free(cell);
}

static cJSON *
num(double v)
{
	return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateString(isnan(v) ? "nan"
	                                                                : v > 0 ? "inf" : "-inf");
}

static void
print_json(const Opts *o, const Data *d, const Result *res, int nres)
{
	cJSON *root = cJSON_CreateObject(), *rs = cJSON_CreateArray();

	cJSON_AddStringToObject(root, "layer", o->layer ? o->layer : "sim.linear");
	cJSON_AddNumberToObject(root, "m", (double)o->m);
	cJSON_AddNumberToObject(root, "n", (double)o->n);
	cJSON_AddNumberToObject(root, "k", (double)o->k);
	cJSON_AddStringToObject(root, "dist", dist_names[o->dist]);
	cJSON_AddNumberToObject(root, "outlier_channels", (double)d->outliers);
	cJSON_AddNumberToObject(root, "seed", (double)o->seed);
	cJSON_AddItemToObject(root, "recipes", rs);
	for (int r = 0; r < nres; r++) {
		cJSON *jr = cJSON_CreateObject(), *gs = cJSON_CreateArray();
		cJSON_AddStringToObject(jr, "name", res[r].name);
		char *path = text_lossy(res[r].path);   /* a file name need not be UTF-8; JSON must */
		cJSON_AddStringToObject(jr, "path", path);
		free(path);
		cJSON_AddBoolToObject(jr, "warmup_step", res[r].warmup);
		if (res[r].pad[0])
			cJSON_AddStringToObject(jr, "padded", res[r].pad);
		cJSON_AddItemToObject(jr, "gemms", gs);
		for (int g = 0; g < NGEMM; g++) {
			const GemmResult *x = &res[r].g[g];
			cJSON *jg = cJSON_CreateObject(), *ops = cJSON_CreateArray();
			cJSON_AddStringToObject(jg, "gemm", gnames[g]);
			cJSON_AddStringToObject(jg, "accum", x->accum);
			cJSON_AddItemToObject(jg, "operands", ops);
			for (int k = 0; k < 2; k++) {
				cJSON *jo = cJSON_CreateObject();
				cJSON_AddStringToObject(jo, "role", role_name(x->op[k].role));
				cJSON_AddStringToObject(jo, "cast", x->op[k].desc);
				if (x->op[k].cast) {
					cJSON_AddNumberToObject(jo, "n", (double)x->op[k].st.n);
					cJSON_AddNumberToObject(jo, "saturated", (double)x->op[k].st.saturated);
					cJSON_AddNumberToObject(jo, "flushed", (double)x->op[k].st.flushed);
					cJSON_AddNumberToObject(jo, "nonfinite", (double)x->op[k].st.nonfinite);
					cJSON_AddItemToObject(jo, "saturated_frac",
					                      num((double)x->op[k].st.saturated / (double)x->op[k].st.n));
					cJSON_AddItemToObject(jo, "flushed_frac",
					                      num((double)x->op[k].st.flushed / (double)x->op[k].st.n));
				}
				cJSON_AddItemToArray(ops, jo);
			}
			cJSON_AddStringToObject(jg, "out", x->out);
			cJSON_AddNumberToObject(jg, "out_nonfinite", (double)x->nonfinite);
			cJSON_AddItemToObject(jg, "rel_fro", num(x->rel_fro));
			cJSON_AddItemToObject(jg, "max_rel", num(x->max_rel));
			cJSON_AddItemToObject(jg, "snr_db", num(x->snr_db));
			if (x->acc_measured) {
				cJSON_AddItemToObject(jg, "accum_rel_fro", num(x->acc_rel_fro));
				cJSON_AddItemToObject(jg, "accum_max_rel", num(x->acc_max_rel));
			}
			cJSON_AddItemToArray(gs, jg);
		}
		cJSON_AddItemToArray(rs, jr);
	}
	char *s = cJSON_Print(root);
	puts(s);
	free(s);
	cJSON_Delete(root);
}

int
cmd_sim(int argc, char **argv)
{
	Opts o = {.dist = DIST_NORMAL};
	Recipe *rc[MAX_RECIPES] = {NULL};
	Result res[MAX_RECIPES];
	Data d;
	int e = parse_args(argc, argv, &o), rv = 0;
	size_t need, avail = ir_interp_mem_available();

	if (e)
		return e < 0 ? 0 : e;
	if (o.m <= 0 || o.n <= 0 || o.k <= 0) {
		fprintf(stderr, "precc sim: error: sizes must be positive: M=%ld N=%ld K=%ld\n", o.m,
		        o.n, o.k);
		return 1;
	}
	need = data_bytes(o.m, o.n, o.k);
	if (!need || need > avail) {
		if (need)
			fprintf(stderr, "precc sim: error: M=%ld N=%ld K=%ld needs %zu bytes for the data "
			        "and its float64 reference, more than the %zu bytes available\n", o.m, o.n,
			        o.k, need, avail);
		else
			fprintf(stderr, "precc sim: error: M=%ld N=%ld K=%ld: the tensors' sizes overflow "
			        "the address space\n", o.m, o.n, o.k);
		return 1;
	}
	/* load every recipe first: a bad one fails before any work */
	for (int r = 0; r < o.nrecipe; r++)
		rc[r] = recipe_load(o.recipe[r]);
	memset(res, 0, sizeof res);
	data_make(&d, &o);
	for (int r = 0; r < o.nrecipe && !rv; r++) {
		res[r].path = o.recipe[r];
		rv = run_recipe(&o, &d, rc[r], &res[r]);
	}
	if (!rv) {
		if (o.json)
			print_json(&o, &d, res, o.nrecipe);
		else
			print_table(&o, &d, res, o.nrecipe);
	}
	data_free(&d);
	for (int r = 0; r < o.nrecipe; r++)
		recipe_free(rc[r]);
	return rv;
}
