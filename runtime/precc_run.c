/*
 * precc_run.c — precc-run: run an artifact directory's quantize plans on
 * seeded inputs, print a per-kernel summary, and with --check compare the
 * cuda and cpu backends: GEMM outputs within the bound of their kernel's
 * accumulation model (runtime/gemm_check.c, docs/numerics.md), every other
 * output bit for bit. Runtime-only: it links precc_rt and
 * builds with a C compiler and cuda.h alone (docs/runtime.md, "precc-run").
 *
 * Each layer runs three times: on "random" inputs (values over a wide
 * range of magnitudes), on "edge" inputs (the same plus ±0, the smallest
 * and largest subnormal and ±max of the buffer's format at spread
 * positions) and on "nonfinite" inputs (edge plus NaN, +inf and -inf). Exit status: 0 ok; 1 an
 * error or a mismatch; 2 usage; 77 the cuda backend is needed (--check or
 * --backend cuda) and unavailable (the reason is printed).
 */
#include <fnmatch.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precc/interp.h"
#include "precc/numerics.h"
#include "precc/precc_rt.h"
#include "rt.h"


#define EXIT_SKIP 77

/* Where the human-readable report goes: stdout, or stderr under --json
 * (stdout then carries one JSON object and nothing else). */
static FILE *hout;

static const char *usage =
	"usage: precc-run DIR [--backend cuda|cpu|auto] [--layer PATTERN] "
	"[--m M] [--seed S] [--check] [--mma-bits B] [--all] [--json]\n"
	"  DIR          an artifact directory written by `precc build`\n"
	"  --backend    which backend runs the plans (default auto)\n"
	"  --layer      only layers whose name matches PATTERN (a glob with * ? "
	"[..], else a substring)\n"
	"  --m M        the token count (default: 256 rounded up to each "
	"layer's M multiple)\n"
	"  --seed S     seed of the inputs and of stochastic rounding (default 1)\n"
	"  --check      run cuda and cpu; GEMM outputs must agree within their\n"
	"               accumulation model's bound (max abs, max rel and ulps per\n"
	"               GEMM are printed), every other output bit for bit\n"
	"  --mma-bits B the mantissa bits the GPU's mma keeps in its sum, for the\n"
	"               bound (default 23: fp32, truncating; 1..23)\n"
	"  --all        run every layer (default: a layer whose steps run the "
	"same kernels\n"
	"               as an earlier layer's is skipped)\n"
	"               (expert groups' steps run after the layers, on offsets\n"
	"               that split the rows about evenly, expert 1 empty)\n"
	"  --json       print one JSON object on stdout (the report goes to stderr;\n"
	"               docs/runtime.md, \"precc-run --json\")\n"
	"exit: 0 ok, 1 error or mismatch, 2 usage, 77 cuda needed but "
	"unavailable\n";

/* ---- the files the manifest names ---------------------------------------- */

typedef struct FileCheck { int named, hashed; } FileCheck;

/* Every PTX and cubin file manifest.json names (kernels[].files.<target>)
 * must exist and, where precc build recorded its size and FNV-1a 64, be
 * those bytes: the library's check (rt_kernel_file), which a cuda load
 * makes on the files it loads, here on every target's. Prints each
 * failure; 0 when all pass. */
static int
verify_files(const char *dir, FileCheck *fc)
{
	char path[4200], err[4600];
	char *text = NULL;
	json *root;
	const json *ks;
	size_t mlen;
	int bad = 0;

	snprintf(path, sizeof path, "%s/manifest.json", dir);
	/* as the loader reads it (no FIFO, no symlink, capped): the loader
	 * reports what is wrong with it */
	if (!(text = rt_read_file(path, RT_MAX_MANIFEST_BYTES, &mlen, err, sizeof err)))
		return 0;
	root = json_parse(text, mlen, path, err, sizeof err);
	free(text);
	if (!root)
		return 0;       /* likewise: the loader says what is wrong */
	ks = json_get(root, "kernels");
	for (size_t k = 0; ks && ks->kind == JSON_ARR && k < ks->n; k++) {
		const json *kn = json_get(ks->item[k], "name"), *fs = json_get(ks->item[k], "files");
		for (size_t t = 0; fs && fs->kind == JSON_OBJ && t < fs->n; t++)
			for (int w = 0; w < 2; w++) {
				const char *what = w ? "cubin" : "ptx";
				char *img;
				size_t len;
				int rc;
				if (!json_get(fs->item[t], what))
					continue;
				fc->named++;
				rc = rt_kernel_file(dir, fs->item[t], what, &img, &len, err, sizeof err);
				free(img);
				if (rc < 0) {
					fprintf(stderr, "precc-run: the %s of kernel %s for %s: %s\n", what,
					        kn && kn->kind == JSON_STR ? kn->str : "?", fs->key[t], err);
					bad++;
				} else
					fc->hashed += rc;
			}
	}
	json_free(root);
	return bad;
}

/* ---- inputs ------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	while (n--)
		h = (h ^ *c++) * 0x100000001b3ULL;
	return h;
}

/* FNV-1a 64 over the 8-byte little-endian words of p (the last n % 8
 * bytes one by one): the outputs' checksums. A byte at a time is a
 * multiply's latency per byte, 17% of a q_proj run's CPU time. */
static uint64_t fnv_words(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t w;

	for (; n >= 8; n -= 8, c += 8) {
		memcpy(&w, c, 8);
		h = (h ^ w) * 0x100000001b3ULL;
	}
	return fnv(h, c, n);
}

/* 2^e for |e| <= 126, from its bits: x * pow2(e) is ldexpf(x, e) where
 * the result is normal, as it is for every value fill draws. */
static float pow2(int e)
{
	uint32_t u = (uint32_t)(127 + e) << 23;
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

/* x[j] = the j-th value after seed of fill's non-state draw,
 * u * 2^((r >> 8) % 25 - 12) with u uniform in [-1, 1) from r's top 24
 * bits: splitmix's states are seed + (j+1)·γ, so the draws are
 * independent and the loop vectorizes (the 64-bit multiplies want
 * AVX-512DQ: a copy for it, chosen at run time). (r >> 8) % 25 from
 * 32-bit halves: 2^32 ≡ 21 (mod 25). */
#define DRAW_BODY \
	for (long j = 0; j < n; j++) { \
		uint64_t z = seed + (uint64_t)(j + 1) * 0x9e3779b97f4a7c15ULL; \
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL; \
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL; \
		z ^= z >> 31; \
		uint32_t hi = (uint32_t)(z >> 40), lo = (uint32_t)(z >> 8); \
		uint32_t e = ((hi % 25) * 21 + lo % 25) % 25; \
		uint32_t pb = (127 + e - 12) << 23; \
		float p, u = ((float)(int32_t)(z >> 40) / 16777216.0f) * 2.0f - 1.0f; \
		memcpy(&p, &pb, 4); \
		x[j] = u * p; \
	}

static void draw_base(uint64_t seed, float *restrict x, long n)
{
	DRAW_BODY
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* GCC's -O2 cost model ("very cheap") leaves this loop scalar */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("vect-cost-model=dynamic")))
#endif
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
static void draw_avx512(uint64_t seed, float *restrict x, long n)
{
	DRAW_BODY
}
#endif

static void draw(uint64_t seed, float *x, long n)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (precc_isa_level() >= 3 && __builtin_cpu_supports("avx512dq")) {
		draw_avx512(seed, x, n);
		return;
	}
#endif
	draw_base(seed, x, n);
}

/* Fills a buffer of format f: state buffers with positive values in
 * [0.25, 4) (amax histories and scales a previous step could have left),
 * everything else with values of magnitude 2^-12 .. 2^12 and, at spread
 * positions, the edge values. Values are drawn a block at a time and
 * encoded with precc_encode_rne_n where the format has it (the same codes
 * as precc_encode, element by element). */
static void fill(void *buf, precc_format f, size_t n, int state, int set,
                 uint64_t seed)
{
	enum { BLOCK = 4096 };      /* even: e2m1 blocks start on a byte */
	const precc_format_info *fi = precc_format_get(f);
	size_t eb = (size_t)precc_interp_elem_bytes(f);
	float edge[10], x[BLOCK];
	int nedge = 0;

	for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
		size_t nb = n - i0 < BLOCK ? n - i0 : BLOCK;
		if (!state && f != PRECC_E8M0) {
			draw(seed, x, (long)nb);
			seed += (uint64_t)nb * 0x9e3779b97f4a7c15ULL;
		} else
			for (size_t j = 0; j < nb; j++) {
				uint64_t r = splitmix(&seed);
				float v;
				if (state)
					v = 0.25f * ((1.0f + (float)(r >> 40) / 16777216.0f)
					             * pow2((int)(r & 3)));
				else
					v = pow2((int)((r >> 8) % 17) - 8);   /* e8m0 */
				x[j] = v;
			}
		if (f == PRECC_FP32) {
			memcpy((float *)buf + i0, x, nb * sizeof *x);
			continue;
		}
		if (precc_encode_rne_n(f, true, x, 1.0f, f == PRECC_E2M1
		                       ? (uint8_t *)buf + i0 / 2 : (uint8_t *)buf + i0 * eb,
		                       (long)nb))
			continue;
		for (size_t j = 0; j < nb; j++)
			precc_interp_set_code(buf, f, i0 + j, precc_encode(f, x[j], PRECC_RNE, true, 0));
	}
	if (state || set == 0)
		return;
	edge[nedge++] = 0.0f;
	edge[nedge++] = -0.0f;
	edge[nedge++] = fi->min_subnormal;
	edge[nedge++] = -(fi->min_normal - fi->min_subnormal);  /* largest subnormal */
	edge[nedge++] = fi->max;
	edge[nedge++] = -fi->max;
	if (set == 2) {
		edge[nedge++] = NAN;
		edge[nedge++] = INFINITY;
		edge[nedge++] = -INFINITY;
	}
	for (int j = 0; j < nedge && (size_t)j < n; j++) {
		size_t at = n / (size_t)nedge * (size_t)j + (size_t)j % (n / (size_t)nedge + 1);
		float v = edge[j];
		if (fi->min_subnormal == fi->min_normal && j == 3)
			v = -fi->min_normal;   /* no subnormals: the smallest normal */
		precc_interp_set_code(buf, f, at < n ? at : n - 1, precc_encode(f, v, PRECC_RNE, false, 0));
	}
}

/* ---- one backend --------------------------------------------------------- */

typedef struct Side {
	precc_rt *rt;
	const char *name;
	uint64_t *sum;            /* per kernel: checksum of its outputs */
} Side;

/* Host copies of a layer's buffers for one input set. */
typedef struct Bufs {
	int n;
	precc_buffer_info *info;
	void **host;
} Bufs;

static void bufs_free(Bufs *b)
{
	for (int i = 0; i < b->n; i++)
		free(b->host[i]);
	free(b->host);
	free(b->info);
	memset(b, 0, sizeof *b);
}

/* An expert group's offsets at M (precc_rt.h, "expert groups"): the rows
 * split about evenly, each expert starting on the group's token_align,
 * expert 1 without tokens, the last taking the rest. */
static void group_offsets(precc_rt *rt, int layer, long m, int32_t *offs)
{
	precc_group_info gi;
	int g = layer - precc_rt_layer_count(rt);

	if (precc_rt_group_info(rt, g, &gi))
		return;
	long al = gi.token_align > 0 ? gi.token_align : 1, units = m / al / gi.experts;
	long q = (units > 0 ? units : 1) * al;
	for (int e = 0; e < gi.experts; e++) {
		long end = e == 1 ? offs[0] : (e + 1) * q;
		offs[e] = (int32_t)(e == gi.experts - 1 || end > m ? m : end);
	}
}

static int bufs_make(precc_rt *rt, int layer, long m, int set,
                     uint64_t seed, Bufs *b)
{
	b->n = precc_rt_buffer_count(rt, layer);
	b->info = calloc((size_t)b->n + 1, sizeof *b->info);
	b->host = calloc((size_t)b->n + 1, sizeof *b->host);
	if (!b->info || !b->host)
		return -1;
	for (int i = 0; i < b->n; i++) {
		precc_buffer_info *bi = &b->info[i];
		/* aligned as precc_rt_malloc's cpu buffers: run_side may run
		 * the cpu backend on these very buffers */
		if (precc_rt_buffer_info(rt, layer, i, m, bi) ||
		    posix_memalign(&b->host[i], 64, bi->bytes ? bi->bytes : 1))
			return -1;
		if (!strcmp(bi->role, "offsets"))
			group_offsets(rt, layer, m, b->host[i]);
		else if (bi->written && strcmp(bi->role, "state") != 0)
			memset(b->host[i], 0xa5, bi->bytes);  /* a missed write shows */
		else
			fill(b->host[i], (precc_format)bi->format_id, (size_t)bi->rows * (size_t)bi->cols,
			     strcmp(bi->role, "state") == 0, set,
			     fnv(seed * 3 + (uint64_t)set, bi->name, strlen(bi->name)));
	}
	return 0;
}

/* Runs layer on side s with the host inputs of in; out receives every
 * buffer after the run. Returns 0, or -1 with the error printed
 * (*refused = 1 when the cpu backend refused nonfinite inputs because the
 * recipe says nonfinite=error). inplace (the cpu backend, when nothing
 * reads the inputs afterwards): the layer runs on in's buffers themselves,
 * which out[] then names, with no copy either way. */
static int run_side(Side *s, int layer, long m, uint64_t seed, const Bufs *in,
                    void **out, int *refused, int inplace)
{
	void **dev = calloc((size_t)in->n + 1, sizeof *dev);
	size_t *bytes = calloc((size_t)in->n + 1, sizeof *bytes);
	int rc = -1;

	*refused = 0;
	if (!dev || !bytes) {
		free(dev);
		free(bytes);
		return -1;
	}
	for (int i = 0; i < in->n; i++)
		bytes[i] = in->info[i].bytes;
	for (int i = 0; inplace && i < in->n; i++)
		dev[i] = out[i] = in->host[i];
	for (int i = 0; !inplace && i < in->n; i++)
		if (!(dev[i] = precc_rt_malloc(s->rt, in->info[i].bytes)) ||
		    precc_rt_upload(s->rt, dev[i], in->host[i], in->info[i].bytes))
			goto out;
	if (precc_rt_run_layer_sized(s->rt, layer, m, dev, bytes, seed, NULL) ||
	    precc_rt_sync(s->rt, NULL)) {
		*refused = strstr(precc_rt_last_error(), "(nonfinite=error)") != NULL;
		goto out;
	}
	for (int i = 0; !inplace && i < in->n; i++)
		if (precc_rt_download(s->rt, out[i], dev[i], in->info[i].bytes))
			goto out;
	rc = 0;
out:
	fflush(stdout);
	if (rc && !*refused)
		fprintf(stderr, "precc-run: %s: %s\n", s->name, precc_rt_last_error());
	for (int i = 0; !inplace && i < in->n; i++)
		precc_rt_free(s->rt, dev[i]);
	free(dev);
	free(bytes);
	return rc;
}


/* Per buffer: the tolerance of a GEMM kernel's output (NULL: bit for
 * bit), from the cpu side's buffers after the run (cpu). */
typedef struct Tols {
	float **tol;
	const char **kernel;
} Tols;

static void tols_free(Tols *t, int n)
{
	for (int i = 0; t->tol && i < n; i++)
		free(t->tol[i]);
	free(t->tol);
	free(t->kernel);
	memset(t, 0, sizeof *t);
}

static int tols_make(precc_rt *rt, int layer, long m, const Bufs *in, void **cpu,
                     int mma_bits, Tols *t)
{
	char err[1024];
	size_t *bytes = calloc((size_t)in->n + 1, sizeof *bytes);
	int *fmt = calloc((size_t)in->n + 1, sizeof *fmt), rc = -1;

	t->tol = calloc((size_t)in->n + 1, sizeof *t->tol);
	t->kernel = calloc((size_t)in->n + 1, sizeof *t->kernel);
	if (bytes && fmt && t->tol && t->kernel) {
		for (int i = 0; i < in->n; i++)
			bytes[i] = in->info[i].bytes, fmt[i] = in->info[i].format_id;
		rc = rt_layer_gemm_tols(rt, layer, m, in->n, bytes, fmt, cpu, mma_bits, t->tol,
		                        t->kernel, err, sizeof err);
		if (rc)
			fprintf(stderr, "precc-run: %s\n", err);
	}
	free(bytes);
	free(fmt);
	return rc;
}

/* A GEMM output: within its bound. Prints its figures when print. */
static int compare_gemm(const char *layer, const char *set, const precc_buffer_info *bi,
                        const char *kernel, const void *a, const void *b, const float *tol,
                        int print)
{
	precc_format f = (precc_format)bi->format_id;
	size_t es = precc_interp_elem_bytes(f);
	rt_gemm_diff d;

	rt_gemm_compare(f, a, b, tol, (long)(bi->bytes / es), &d);
	if (!print)
		return d.over > 0;
	fprintf(hout, "  gemm %s (%s inputs) '%s' %s (kernel %s): %ld of %ld elements differ; max abs "
	       "%.3g, max rel %.3g, max %.3g ulps; at most %.3g of the bound: %s", layer, set,
	       bi->name, bi->type, kernel, d.differ, d.n, d.max_abs, d.max_rel, d.max_ulps,
	       d.max_ratio, d.over ? "BEYOND THE BOUND" : "within");
	if (d.unbounded)
		fprintf(hout, " (%ld differ where finite products overflow fp32: no bound)",
		        d.unbounded);
	fputc('\n', hout);
	if (d.over) {
		uint32_t cx = 0, cy = 0;
		memcpy(&cx, (const char *)a + (size_t)d.first_over * es, es);
		memcpy(&cy, (const char *)b + (size_t)d.first_over * es, es);
		fprintf(hout, "  MISMATCH %s (%s inputs) buffer '%s': %ld elements beyond the bound; first "
		       "[%ld, %ld]: cuda %g, cpu %g, bound %g\n", layer, set, bi->name, d.over,
		       d.first_over / bi->cols, d.first_over % bi->cols, precc_decode(f, cx),
		       precc_decode(f, cy), (double)tol[d.first_over]);
	}
	return d.over > 0;
}

/* Compares the written buffers of a and b: GEMM outputs (tols) within
 * their bound, the rest bit for bit; prints the first difference of each
 * buffer, and every GEMM output's figures. Returns the number of buffers
 * that differ beyond what is allowed. */
static int compare(const char *layer, const char *set, const Bufs *in,
                   void **a, void **b, const Tols *tols, int print)
{
	int bad = 0;

	for (int i = 0; i < in->n; i++) {
		const precc_buffer_info *bi = &in->info[i];
		precc_format f = (precc_format)bi->format_id;
		/* element by element: e2m1 holds two a byte */
		size_t n = (size_t)bi->rows * (size_t)bi->cols, diff = 0, first = 0;
		if (!bi->written)
			continue;
		if (tols && tols->tol && tols->tol[i]) {
			bad += compare_gemm(layer, set, bi, tols->kernel[i], a[i], b[i], tols->tol[i],
			                    print);
			continue;
		}
		for (size_t e = 0; e < n; e++)
			if (precc_interp_code(a[i], f, e) != precc_interp_code(b[i], f, e)) {
				if (!diff++)
					first = e;
			}
		if (diff && !print)
			bad++;
		else if (diff) {
			uint32_t cx = precc_interp_code(a[i], f, first),
			         cy = precc_interp_code(b[i], f, first);
			int w = f == PRECC_E2M1 ? 1 : (int)precc_interp_elem_bytes(f) * 2;
			fprintf(hout, "  MISMATCH %s (%s inputs) buffer '%s' %s: %zu of %zu "
			       "elements differ; first [%ld, %ld] (element %zu): cuda "
			       "0x%0*x (%g), cpu 0x%0*x (%g)\n", layer, set, bi->name,
			       bi->type, diff, n, (long)(first / (size_t)bi->cols),
			       (long)(first % (size_t)bi->cols), first, w, cx,
			       (double)precc_decode(f, cx), w, cy, (double)precc_decode(f, cy));
			bad++;
		}
	}
	return bad;
}

/* Adds each step's outputs (after the layer ran) to its kernel's checksum,
 * in step order: to the kernel launched at m. */
static void checksum(Side *s, int layer, long m, const Bufs *in, void **out)
{
	int ns = precc_rt_step_count(s->rt, layer);

	for (int st = 0; st < ns; st++) {
		precc_step_info si;
		int k = precc_rt_step_kernel(s->rt, layer, st, m);   /* the one launched */
		if (precc_rt_step_info(s->rt, layer, st, &si) || k < 0)
			continue;
		for (int p = 0; p < si.nargs; p++)
			if (si.out_mask >> p & 1)
				s->sum[k] = fnv_words(s->sum[k], out[si.args[p]], in->info[si.args[p]].bytes);
	}
}

/* ---- --json ---------------------------------------------------------------- */

/* One line of the report per layer and input set, kept for --json. */
typedef struct Run {
	const char *layer, *inputs, *result;
	long m;
	int gemms, differ;        /* GEMM outputs compared within a bound; buffers beyond it */
} Run;
static Run *runs;
static int nruns;

static void run_record(const char *layer, long m, const char *inputs, const char *result,
                       int gemms, int differ)
{
	Run *r = realloc(runs, (size_t)(nruns + 1) * sizeof *runs);
	if (!r)
		return;       /* the report loses a line; the exit status does not */
	runs = r;
	runs[nruns++] = (Run){layer, inputs, result, m, gemms, differ};
}

/* s as a JSON string (RFC 8259: quote, backslash and control characters
 * escaped; names are UTF-8 already). */
static void jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void jkernels(FILE *f, const Side *s)
{
	int nk = precc_rt_kernel_count(s->rt), first = 1;

	fputc('[', f);
	for (int k = 0; k < nk; k++) {
		precc_kernel_info ki;
		if (precc_rt_kernel_info(s->rt, k, &ki) || !ki.launches)
			continue;
		fprintf(f, "%s{\"name\": ", first ? "" : ", ");
		jstr(f, ki.name);
		fprintf(f, ", \"shape\": ");
		jstr(f, ki.shape);
		fprintf(f, ", \"launches\": %ld, \"elements\": %.0f, \"time_ms\": %.6f, "
		        "\"checksum\": \"%016llx\", \"loaded\": ", ki.launches, ki.elements,
		        ki.seconds * 1e3, (unsigned long long)s->sum[k]);
		jstr(f, ki.loaded);
		if (ki.num_regs)
			fprintf(f, ", \"regs\": %d, \"spill_bytes\": %d", ki.num_regs, ki.spill_bytes);
		fputc('}', f);
		first = 0;
	}
	fputc(']', f);
}

/* The whole run as one JSON object on stdout (docs/runtime.md). result:
 * "ran" (outputs compared with nothing), "checked" (--check: cuda == cpu
 * within the bounds), "mismatch", "error" or "skipped" (exit 77, reason). */
static void json_report(const char *dir, const Side *side, int nside, int check,
                        const precc_artifact_info *ai, const FileCheck *files, int skipped,
                        int mismatches, int status, const char *reason)
{
	FILE *f = stdout;
	const char *result = status == EXIT_SKIP ? "skipped" : status && mismatches ? "mismatch"
	                     : status ? "error" : check ? "checked" : "ran";

	fprintf(f, "{\"dir\": ");
	jstr(f, dir);
	fprintf(f, ", \"check\": %s, \"result\": \"%s\", \"exit\": %d", check ? "true" : "false",
	        result, status);
	if (reason) {
		fprintf(f, ", \"reason\": ");
		jstr(f, reason);
	}
	if (ai) {
		fprintf(f, ",\n \"artifacts\": {\"recipe\": ");
		jstr(f, ai->recipe_name);
		fprintf(f, ", \"recipe_hash\": \"%016llx\", \"model\": ",
		        (unsigned long long)ai->recipe_hash);
		jstr(f, ai->model_name);
		fprintf(f, ", \"model_hash\": \"%016llx\", \"precc\": ", (unsigned long long)ai->model_hash);
		jstr(f, ai->precc_version);
		fprintf(f, ", \"llvm\": ");
		jstr(f, ai->llvm_version);
		fprintf(f, ", \"target\": ");
		jstr(f, ai->target);
		fprintf(f, ", \"kernels\": %d, \"layers\": %d}", ai->nkernels, ai->nlayers);
	}
	fprintf(f, ",\n \"files\": {\"named\": %d, \"hashed\": %d}", files->named, files->hashed);
	fprintf(f, ",\n \"runs\": [");
	for (int i = 0; i < nruns; i++) {
		fprintf(f, "%s\n  {\"layer\": ", i ? "," : "");
		jstr(f, runs[i].layer);
		fprintf(f, ", \"m\": %ld, \"inputs\": \"%s\", \"result\": \"%s\"", runs[i].m,
		        runs[i].inputs, runs[i].result);
		if (check)
			fprintf(f, ", \"gemm_outputs_within_bound\": %d, \"buffers_differ\": %d",
			        runs[i].gemms, runs[i].differ);
		fputc('}', f);
	}
	fprintf(f, "],\n \"skipped_layers\": %d,\n \"backends\": {", skipped);
	for (int s = 0, first = 1; s < nside; s++) {
		if (!side[s].rt || !side[s].sum)
			continue;
		fprintf(f, "%s\"%s\": {\"kernels\": ", first ? "" : ", ", side[s].name);
		jkernels(f, &side[s]);
		fputc('}', f);
		first = 0;
	}
	fprintf(f, "}}\n");
}

/* ---- main ---------------------------------------------------------------- */

static int matches(const char *pattern, const char *name)
{
	if (!pattern)
		return 1;
	if (strpbrk(pattern, "*?["))
		return fnmatch(pattern, name, 0) == 0;
	return strstr(name, pattern) != NULL;
}

/* Layers a and b run the same kernels in the same order. */
static int same_kernels(precc_rt *rt, int a, int b)
{
	int n = precc_rt_step_count(rt, a);

	if (n != precc_rt_step_count(rt, b))
		return 0;
	for (int s = 0; s < n; s++) {
		precc_step_info x, y;
		precc_rt_step_info(rt, a, s, &x);
		precc_rt_step_info(rt, b, s, &y);
		if (x.kernel != y.kernel)
			return 0;
	}
	return 1;
}

static void summary(Side *s)
{
	int nk = precc_rt_kernel_count(s->rt), any = 0;

	for (int k = 0; k < nk; k++) {
		precc_kernel_info ki;
		any |= precc_rt_kernel_info(s->rt, k, &ki) == 0 && ki.launches;
	}
	if (!any) {
		fprintf(hout, "  (no kernel ran)\n");
		return;
	}
	fprintf(hout, "%-20s %-16s %8s %12s %10s %-16s %s\n", "kernel", "shape",
	       "launches", "elements", "time_ms", "checksum", "loaded");
	for (int k = 0; k < nk; k++) {
		precc_kernel_info ki;
		if (precc_rt_kernel_info(s->rt, k, &ki) || !ki.launches)
			continue;
		fprintf(hout, "%-20s %-16s %8ld %12.0f %10.3f %016llx %s", ki.name, ki.shape,
		       ki.launches, ki.elements, ki.seconds * 1e3,
		       (unsigned long long)s->sum[k], ki.loaded);
		if (ki.num_regs)
			fprintf(hout, " (%d regs, %d spill bytes)", ki.num_regs, ki.spill_bytes);
		fprintf(hout, "\n");
	}
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *pattern = NULL;
	precc_backend kind = PRECC_BACKEND_AUTO;
	long m_arg = 0;
	int mma_bits = 23;
	uint64_t seed = 1;
	int check = 0, backend_given = 0, status = 0, ran = 0, mismatches = 0;
	int all = 0, skipped = 0, json = 0, have_ai = 0;
	const char *reason = NULL;
	FileCheck files = {0, 0};
	Side side[2] = {{0}};
	int nside;

#ifdef __GLIBC__
	/* Every input set allocates and frees the same large buffers (host
	 * copies, the cpu backend's, the interpreter's values): from the heap
	 * and kept, they fault their pages in once, not once a set (glibc
	 * maps each block over 32 MiB afresh otherwise, and unmaps it on
	 * free). */
	mallopt(M_MMAP_MAX, 0);
	mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
	char why[4096];
	precc_artifact_info ai;

	hout = stdout;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char *end;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage, stdout);
			return 0;
		} else if (strcmp(a, "--check") == 0)
			check = 1;
		else if (strcmp(a, "--all") == 0)
			all = 1;
		else if (strcmp(a, "--json") == 0) {
			json = 1;
			hout = stderr;
		}
		else if (i + 1 < argc && strcmp(a, "--backend") == 0) {
			if (precc_backend_parse(argv[++i], &kind)) {
				fprintf(stderr, "precc-run: %s\n", precc_rt_last_error());
				return 2;
			}
			backend_given = 1;
		} else if (i + 1 < argc && strcmp(a, "--layer") == 0)
			pattern = argv[++i];
		else if (i + 1 < argc && strcmp(a, "--m") == 0) {
			m_arg = strtol(argv[++i], &end, 10);
			if (*end || m_arg <= 0) {
				fprintf(stderr, "precc-run: --m '%s' is not a positive "
				        "integer\n", argv[i]);
				return 2;
			}
		} else if (i + 1 < argc && strcmp(a, "--mma-bits") == 0) {
			mma_bits = (int)strtol(argv[++i], &end, 10);
			if (*end || mma_bits < 1 || mma_bits > 23) {
				fprintf(stderr, "precc-run: --mma-bits '%s': 1 to 23\n", argv[i]);
				return 2;
			}
		} else if (i + 1 < argc && strcmp(a, "--seed") == 0) {
			seed = strtoull(argv[++i], &end, 0);
			if (*end) {
				fprintf(stderr, "precc-run: --seed '%s' is not an integer\n",
				        argv[i]);
				return 2;
			}
		} else if (a[0] != '-' && !dir)
			dir = a;
		else {
			fprintf(stderr, "precc-run: unknown or incomplete option '%s'\n%s",
			        a, usage);
			return 2;
		}
	}
	if (!dir) {
		fputs(usage, stderr);
		return 2;
	}
	if (check && backend_given) {
		fprintf(stderr, "precc-run: --check runs both backends; drop "
		        "--backend\n");
		return 2;
	}
	nside = check ? 2 : 1;
	if (verify_files(dir, &files)) {
		fprintf(stderr, "precc-run: %s: the artifact files are not those precc build "
		        "wrote; rebuild it\n", dir);
		return 1;
	}
	for (int s = 0; s < nside; s++) {
		precc_backend k = check ? (s == 0 ? PRECC_BACKEND_CUDA
		                                  : PRECC_BACKEND_CPU) : kind;
		side[s].rt = precc_rt_open_backend(k, why, sizeof why);
		if (!side[s].rt) {
			if (k == PRECC_BACKEND_CUDA) {
				fprintf(hout, "precc-run: SKIP: the cuda backend is unavailable%s: %s\n",
				       check ? ", so --check cannot compare" : "", why);
				status = EXIT_SKIP;
				reason = why;
			} else {
				fprintf(stderr, "precc-run: %s\n", why);
				status = 1;
			}
			goto done;
		}
		side[s].name = precc_backend_name(precc_rt_backend(side[s].rt));
		fprintf(hout, "backend %s\n", why);
		/* --check: the cpu side runs the plans of the target cuda picked */
		if (s == 1)
			precc_rt_artifact_info(side[0].rt, &ai);
		if (precc_rt_load_target(side[s].rt, dir, s == 1 ? ai.target : NULL)) {
			fprintf(stderr, "precc-run: %s\n", precc_rt_last_error());
			status = 1;
			goto done;
		}
		precc_rt_set_timing(side[s].rt, 1);
		side[s].sum = calloc((size_t)precc_rt_kernel_count(side[s].rt) + 1,
		                     sizeof *side[s].sum);
		for (int k2 = 0; k2 < precc_rt_kernel_count(side[s].rt); k2++)
			side[s].sum[k2] = 0xcbf29ce484222325ULL;
	}
	precc_rt_artifact_info(side[0].rt, &ai);
	have_ai = 1;
	fprintf(hout, "artifacts %s: recipe %s (%016llx), model %s (%016llx), precc %s, "
	       "LLVM %s, %d kernels, %d layers (of %s)\n", ai.dir, ai.recipe_name,
	       (unsigned long long)ai.recipe_hash, ai.model_name,
	       (unsigned long long)ai.model_hash, ai.precc_version,
	       ai.llvm_version, ai.nkernels, ai.nlayers, ai.target);

	/* the layers, then the expert groups' steps (precc_rt.h, "expert
	 * groups": layer nlayers + g), on offsets group_offsets makes */
	int ngroups = precc_rt_group_count(side[0].rt);
	for (int l = 0; l < ai.nlayers + ngroups && status != 1; l++) {
		const char *name = precc_rt_layer_name(side[0].rt, l);
		long mult = precc_rt_layer_m_multiple(side[0].rt, l), m;
		if (!matches(pattern, name))
			continue;
		m = m_arg ? m_arg : (256 + mult - 1) / mult * mult;
		if (m % mult) {
			fprintf(stderr, "precc-run: layer '%s' needs M to be a multiple "
			        "of %ld; --m %ld is not\n", name, mult, m);
			status = 1;
			break;
		}
		ran++;
		if (!all) {
			int same = -1;
			for (int e = 0; e < l && same < 0; e++)
				if (matches(pattern, precc_rt_layer_name(side[0].rt, e)) &&
				    same_kernels(side[0].rt, e, l))
					same = e;
			if (same >= 0) {
				skipped++;
				continue;
			}
		}
		if (precc_rt_step_count(side[0].rt, l) == 0) {
			fprintf(hout, "layer %s: no quantize steps (its GEMMs run in high "
			       "precision)\n", name);
			run_record(name, m, "none", "no_steps", 0, 0);
			continue;
		}
		/* one cpu side: it runs on the inputs' buffers (nothing compares
		 * with them afterwards) */
		int inplace = nside == 1
		              && precc_rt_backend(side[0].rt) == PRECC_BACKEND_CPU;
		for (int nf = 0; nf < 3 && status != 1; nf++) {
			const char *set = nf == 2 ? "nonfinite" : nf ? "edge" : "random";
			Bufs in = {0};
			void **out[2] = {NULL, NULL};
			int refused[2] = {0, 0}, failed = 0;
			if (bufs_make(side[0].rt, l, m, nf, seed, &in)) {
				fprintf(stderr, "precc-run: layer '%s': %s\n", name,
				        precc_rt_last_error());
				bufs_free(&in);
				status = 1;
				break;
			}
			for (int s = 0; s < nside; s++) {
				out[s] = calloc((size_t)in.n + 1, sizeof *out[s]);
				for (int i = 0; out[s] && !inplace && i < in.n; i++)
					out[s][i] = malloc(in.info[i].bytes);
				if (run_side(&side[s], l, m, seed, &in, out[s], &refused[s],
				             inplace))
					failed |= 1 << s;
				else
					checksum(&side[s], l, m, &in, out[s]);
			}
			fprintf(hout, "layer %s M=%ld %s inputs:", name, m, set);
			if (refused[nside - 1] && failed == (1 << (nside - 1))) {
				fprintf(hout, " refused by the cpu backend (nonfinite=error), as the "
				       "recipe says; not compared\n");
				run_record(name, m, set, "refused", 0, 0);
			} else if (failed) {
				fprintf(hout, " FAILED\n");
				run_record(name, m, set, "failed", 0, 0);
				status = 1;
			} else {
				Tols tols = {0};
				int tf = check && tols_make(side[1].rt, l, m, &in, out[1], mma_bits, &tols);
				int bad = check && !tf ? compare(name, set, &in, out[0], out[1], &tols, 0) : 0;
				int ngemm = 0;
				for (int i = 0; check && !tf && i < in.n; i++)
					ngemm += tols.tol[i] != NULL;
				mismatches += bad;
				run_record(name, m, set, tf ? "failed" : !check ? "ran" : bad ? "differ"
				           : ngemm ? "within_bound" : "bit_exact", ngemm, bad);
				if (tf) {
					fprintf(hout, " FAILED\n");
					status = 1;
				} else if (!check)
					fprintf(hout, " ran\n");
				else if (!bad && !ngemm)
					fprintf(hout, " cuda == cpu, bit for bit\n");
				else if (!bad)
					fprintf(hout, " cuda == cpu: %d GEMM output%s within the bound, the rest bit "
					       "for bit\n", ngemm, ngemm == 1 ? "" : "s");
				else
					fprintf(hout, " %d buffer%s differ\n", bad, bad == 1 ? "" : "s");
				if (check && !tf && (bad || ngemm))
					compare(name, set, &in, out[0], out[1], &tols, 1);
				tols_free(&tols, in.n);
			}
			for (int s = 0; s < nside; s++) {
				for (int i = 0; out[s] && !inplace && i < in.n; i++)
					free(out[s][i]);
				free(out[s]);
			}
			bufs_free(&in);
		}
	}
	if (skipped)
		fprintf(hout, "(%d layer%s skipped: the same kernels as an earlier layer; "
		       "--all runs them)\n", skipped, skipped == 1 ? "" : "s");
	if (status == 0 && ran == 0) {
		fprintf(stderr, "precc-run: no layer matches '%s'\n",
		        pattern ? pattern : "");
		status = 1;
	}
	for (int s = 0; s < nside && side[s].rt; s++) {
		fprintf(hout, "summary (%s backend):\n", side[s].name);
		summary(&side[s]);
	}
	if (status == 0) {
		fprintf(hout, "files: %d PTX/cubin file%s named in manifest.json, all present", files.named,
		       files.named == 1 ? "" : "s");
		if (files.hashed == files.named)
			fprintf(hout, "; each has the size and FNV-1a 64 precc build recorded\n");
		else
			fprintf(hout, "; %d of them checked against a recorded size and FNV-1a 64 (an older "
			       "manifest records none for the rest)\n", files.hashed);
	}
	if (!check && status == 0)
		fprintf(hout, "ran: every layer above ran on the %s backend to the end; outputs were not "
		       "compared with anything (--check compares cuda with cpu)\n",
		       side[0].name);
	if (check && status == 0) {
		fprintf(hout, "check: %s\n", mismatches ? "FAILED: outputs differ" :
		       "every GEMM output of every layer is within its accumulation model's bound "
		       "on cuda and cpu, every other output bit-identical");
		if (mismatches)
			status = 1;
	}
done:
	if (json)
		json_report(dir, side, nside, check, have_ai ? &ai : NULL, &files, skipped,
		            mismatches, status, reason);
	for (int s = 0; s < nside; s++) {
		free(side[s].sum);
		precc_rt_close(side[s].rt);
	}
	return status;
}
