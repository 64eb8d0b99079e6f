/*
 * bench_gemm_gpu.c — precc's generated GEMMs on a GPU: every GEMM step
 * (fprop y, dgrad dx, wgrad dw) of each linear of bench/gemm/shapes.lua,
 * alone, and the fused fprop chain (the steps that quantize x and w, then
 * the GEMM with its de-scale epilogue), for each recipe built into
 * ARTIFACTS/<recipe> by tests/gpu/prepare.sh. A linear named
 * m<M>_n<N>_k<K> runs at M tokens; a GEMM does 2 M N K flops.
 *
 * Before timing, the whole layer runs once on inputs drawn at random (not
 * zeros: METHOD.md) with its outputs poisoned (0xff bytes: NaN in bf16 and
 * f32); every output element must then be finite, and 48 sampled elements
 * of each GEMM output are compared with a float64 dot product of the bf16
 * inputs: ||out - ref|| / ||ref|| within the recipe's bound (the inputs'
 * quantization, not the accumulation, dominates it), else the line says
 * BAD and the exit status is 1. The inputs repeat a block of P = 2^20 - 3
 * values (a prime, so rows and tiles do not line up with it), written
 * once and copied across each buffer on the device.
 *
 * Each time is the median of REPS events-timed repetitions after WARMUP
 * (bench/gpu.h). One line per (recipe, linear, what) goes to stdout, and
 * the same as a JSON object per line to JSONL (bench/gemm/torch_ref.py
 * reads it and prints the side-by-side ratios against cuBLASLt).
 *
 *   bench_gemm_gpu ARTIFACTS JSONL RECIPE[:TOL]...
 *   PRECC_BENCH_MAX_MNK=1e12 bench_gemm_gpu ...   skips shapes with M N K over it
 *   PRECC_BENCH_NO_CHECK=1 bench_gemm_gpu ...      values not checked (the fake
 *       driver's dry run, which computes nothing: bench/gemm/lease_gemm.sh
 *       cluster-fake)
 *
 * Needs a GPU: without a driver or device it exits 77 saying why.
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precc/interp.h"
#include "precc/numerics.h"
#include "precc/precc_rt.h"

#define BENCH "bench_gemm_gpu"
#define REPS 20
#define WARMUP 3
#define P 1048573L                /* 2^20 - 3, prime */
#define SAMPLES 48

static double max_mnk;            /* $PRECC_BENCH_MAX_MNK: larger shapes skipped */
static int no_check;              /* $PRECC_BENCH_NO_CHECK: values not checked */

#define FUNCS(X) X(cuInit) X(cuDeviceGet) X(cuDeviceGetName) \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) \
	X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) \
	X(cuEventElapsedTime) X(cuEventDestroy) X(cuMemcpyDtoDAsync) \
	X(cuMemsetD8Async) X(cuStreamSynchronize) X(cuGetErrorName)
#include "gpu.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static double urand(void)   /* [0, 1) */
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(rng >> 11) * 0x1p-53;
}

/* A buffer the bench fills: P bf16 values, host copies as floats. */
typedef struct Fill { int buf; float *v; } Fill;

static void fill(precc_rt *rt, void *dst, size_t bytes, Fill *f)
{
	uint16_t *h = malloc(P * 2);
	f->v = malloc(P * sizeof *f->v);
	for (long i = 0; i < P; i++) {
		/* uniform in [-1, 1) times 2^e, e in -2..2 */
		float x = (float)((2 * urand() - 1) * ldexp(1, (int)(urand() * 5) - 2));
		h[i] = (uint16_t)precc_encode(PRECC_BF16, x, PRECC_RNE, true, 0);
		f->v[i] = precc_decode(PRECC_BF16, h[i]);
	}
	size_t blk = (size_t)P * 2, done = bytes < blk ? bytes : blk;
	precc_rt_upload(rt, dst, h, done);
	free(h);
	/* doubling copies: [0, done) -> [done, 2 done) */
	while (done < bytes) {
		size_t n = bytes - done < done ? bytes - done : done;
		n -= n % 2;
		CK(drv.cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst + done,
		                         (CUdeviceptr)(uintptr_t)dst, n, NULL));
		done += n;
	}
	CK(drv.cuStreamSynchronize(NULL));
}

typedef struct Layer {
	precc_rt *rt;
	int layer, nbuf;
	long m, n, k;
	void **buf;
	precc_buffer_info *bi;
	int steps[16], nsteps;   /* what a repetition runs */
} Layer;

static void do_steps(void *arg)
{
	Layer *l = arg;
	for (int s = 0; s < l->nsteps; s++)
		if (precc_rt_run_step(l->rt, l->layer, l->steps[s], l->m, l->buf, 7, NULL)) {
			fprintf(stderr, BENCH ": %s\n", precc_rt_last_error());
			exit(1);
		}
}

static int find_buf(const Layer *l, const char *name)
{
	for (int i = 0; i < l->nbuf; i++)
		if (strcmp(l->bi[i].name, name) == 0)
			return i;
	return -1;
}

static float at(const Fill *f, long i) { return f->v[i % P]; }

/* ||out - ref|| / ||ref|| over SAMPLES elements of GEMM output `out`
 * (y, dx or dw), ref from the bf16 inputs in float64; NAN when an output
 * element is not finite, -1 when the output is not one the bench knows. */
static double gemm_error(Layer *l, int out, const Fill *x, const Fill *w, const Fill *dy)
{
	const precc_buffer_info *b = &l->bi[out];
	size_t es = precc_interp_elem_bytes(b->format_id), ne = es ? b->bytes / es : 0;
	unsigned char *h = malloc(b->bytes);
	double num = 0, den = 0;
	long m = l->m, n = l->n, k = l->k;

	precc_rt_download(l->rt, h, l->buf[out], b->bytes);
	/* all-ones exponent: bf16 0x7f80, f32 0x7f800000 (the poison is 0xff..) */
	uint32_t expo = es == 2 ? 0x7f80u : 0x7f800000u;
	for (size_t e = 0; e < ne && (es == 2 || es == 4); e++) {
		uint32_t c = 0;
		memcpy(&c, h + e * es, es);
		if ((c & expo) == expo) {
			printf("    %s[%zu] = 0x%x is not finite\n", b->name, e, c);
			free(h);
			return NAN;
		}
	}
	for (int s = 0; s < SAMPLES; s++) {
		double ref = 0;
		long r, c, idx;
		uint32_t code = 0;
		if (!strcmp(b->name, "y")) {          /* y[r,c] = sum_k x[r,k] w[c,k] */
			r = (long)(urand() * m), c = (long)(urand() * n), idx = r * n + c;
			for (long i = 0; i < k; i++)
				ref += (double)at(x, r * k + i) * at(w, c * k + i);
		} else if (!strcmp(b->name, "dx")) {  /* dx[r,c] = sum_n dy[r,n] w[n,c] */
			r = (long)(urand() * m), c = (long)(urand() * k), idx = r * k + c;
			for (long i = 0; i < n; i++)
				ref += (double)at(dy, r * n + i) * at(w, i * k + c);
		} else if (!strcmp(b->name, "dw")) {  /* dw[r,c] = sum_m dy[m,r] x[m,c] */
			r = (long)(urand() * n), c = (long)(urand() * k), idx = r * k + c;
			for (long i = 0; i < m; i++)
				ref += (double)at(dy, i * n + r) * at(x, i * k + c);
		} else {
			free(h);
			return -1;
		}
		memcpy(&code, h + (size_t)idx * es, es);
		double got = precc_decode(b->format_id, code);
		num += (got - ref) * (got - ref);
		den += ref * ref;
	}
	free(h);
	return sqrt(num / den);
}

static void emit(FILE *js, const char *recipe, const Layer *l, const char *what,
                 const char *kernel, float ms, double err, int ok)
{
	double tf = 2.0 * l->m * l->n * l->k / (ms * 1e-3) / 1e12;
	printf("%-20s m%-6ld n%-6ld k%-6ld %-6s %-38s %9.3f ms %7.1f TFLOP/s",
	       recipe, l->m, l->n, l->k, what, kernel, ms, tf);
	if (!(err < 0))   /* -1: not checked; NaN: not finite */
		printf("  err %.3g%s", err, ok ? "" : "  BAD");
	putchar('\n');
	if (js)
		fprintf(js, "{\"recipe\": \"%s\", \"m\": %ld, \"n\": %ld, \"k\": %ld, "
		        "\"what\": \"%s\", \"kernel\": \"%s\", \"ms\": %.6f, \"tflops\": %.2f, "
		        "\"err\": %.6g, \"ok\": %s}\n", recipe, l->m, l->n, l->k, what,
		        kernel, ms, tf, isnan(err) ? 1e300 : err, ok ? "true" : "false");
	fflush(stdout);
}

/* Runs one linear of recipe's artifacts; the number of BAD results. */
static int bench_layer(FILE *js, const char *recipe, double tol, precc_rt *rt, int layer)
{
	Layer l = {.rt = rt, .layer = layer};
	Fill f[3] = {{-1, NULL}, {-1, NULL}, {-1, NULL}};   /* x, w, dy */
	const char *fill_names[3] = {"x", "w", "dy"};
	int bad = 0, nsteps = precc_rt_step_count(rt, layer);

	if (sscanf(precc_rt_layer_name(rt, layer), "m%ld_n%ld_k%ld", &l.m, &l.n, &l.k) != 3)
		return 0;
	if (max_mnk > 0 && (double)l.m * l.n * l.k > max_mnk)
		return 0;
	l.nbuf = precc_rt_buffer_count(rt, layer);
	l.buf = calloc((size_t)l.nbuf, sizeof *l.buf);
	l.bi = calloc((size_t)l.nbuf, sizeof *l.bi);
	for (int i = 0; i < l.nbuf; i++) {
		precc_rt_buffer_info(rt, layer, i, l.m, &l.bi[i]);
		if (!(l.buf[i] = precc_rt_malloc(rt, l.bi[i].bytes))) {
			fprintf(stderr, BENCH ": %s\n", precc_rt_last_error());
			exit(1);
		}
		CK(drv.cuMemsetD8Async((CUdeviceptr)(uintptr_t)l.buf[i],
		                       strcmp(l.bi[i].role, "state") ? 0xff : 0, l.bi[i].bytes, NULL));
	}
	for (int j = 0; j < 3; j++)
		if ((f[j].buf = find_buf(&l, fill_names[j])) >= 0)
			fill(rt, l.buf[f[j].buf], l.bi[f[j].buf].bytes, &f[j]);
	if (f[0].buf < 0 || f[1].buf < 0 || f[2].buf < 0) {
		printf("%s %s: no x, w or dy buffer: skipped\n", recipe, precc_rt_layer_name(rt, layer));
		goto out;
	}
	/* main_grad (an fp32 dw accumulated across micro-batches) starts at 0 */
	for (int i = 0; i < l.nbuf; i++)
		if (!strcmp(l.bi[i].role, "main_grad"))
			CK(drv.cuMemsetD8Async((CUdeviceptr)(uintptr_t)l.buf[i], 0, l.bi[i].bytes, NULL));
	if (precc_rt_run_layer(rt, layer, l.m, l.buf, 7, NULL) || precc_rt_sync(rt, NULL)) {
		printf("%s %s: run failed: %s\n", recipe, precc_rt_layer_name(rt, layer),
		       precc_rt_last_error());
		bad++;
		goto out;
	}
	/* each GEMM step: check its output, then time it alone */
	l.nsteps = 0;
	for (int s = 0; s < nsteps; s++) {
		precc_step_info si;
		precc_kernel_info ki;
		precc_rt_step_info(rt, layer, s, &si);
		/* the kernel launched at this M (a GEMM's m_variant) */
		precc_rt_kernel_info(rt, precc_rt_step_kernel(rt, layer, s, l.m), &ki);
		if (strcmp(ki.shape, "gemm") != 0)
			continue;
		int out = -1;
		for (int p = 0; p < si.nargs; p++)
			if (si.out_mask >> p & 1)
				out = si.args[p];
		double err = out >= 0 && !no_check ? gemm_error(&l, out, &f[0], &f[1], &f[2]) : -1;
		int ok = !isnan(err) && err <= tol;
		bad += !ok;
		l.steps[0] = s, l.nsteps = 1;
		float ms = timed(do_steps, &l);
		char kern[96];
		snprintf(kern, sizeof kern, "%s/%d/%d", ki.loaded ? ki.loaded : "?",
		         ki.num_regs, ki.spill_bytes);
		emit(js, recipe, &l, si.gemm ? si.gemm : "?", kern, ms, err, ok);
	}
	/* the fused fprop chain: every fprop step, in order */
	l.nsteps = 0;
	for (int s = 0; s < nsteps && l.nsteps < 16; s++) {
		precc_step_info si;
		precc_rt_step_info(rt, layer, s, &si);
		if (si.gemm && !strcmp(si.gemm, "fprop"))
			l.steps[l.nsteps++] = s;
	}
	if (l.nsteps) {
		char what[32];
		snprintf(what, sizeof what, "%d steps", l.nsteps);
		emit(js, recipe, &l, "chain", what, timed(do_steps, &l), -1, 1);
	}
out:
	for (int j = 0; j < 3; j++)
		free(f[j].v);
	for (int i = 0; i < l.nbuf; i++)
		precc_rt_free(rt, l.buf[i]);
	free(l.buf);
	free(l.bi);
	return bad;
}

int main(int argc, char **argv)
{
	char name[256];
	CUdevice dev;
	int bad = 0, rc;
	FILE *js;

	if (argc < 4) {
		fprintf(stderr, "usage: " BENCH " ARTIFACTS JSONL RECIPE[:TOL]...\n");
		return 2;
	}
	if (getenv("PRECC_BENCH_MAX_MNK"))
		max_mnk = atof(getenv("PRECC_BENCH_MAX_MNK"));
	no_check = getenv("PRECC_BENCH_NO_CHECK") && atoi(getenv("PRECC_BENCH_NO_CHECK"));
	if ((rc = gpu_open(&dev, name, sizeof name)))
		return rc;
	if (!(js = fopen(argv[2], "w"))) {
		perror(argv[2]);
		return 1;
	}
	printf(BENCH ": %s, median of %d after %d warm-ups, artifacts %s\n", name, REPS,
	       WARMUP, argv[1]);
	printf("%-20s %-7s %-7s %-7s %-6s %-38s %12s %15s\n", "recipe", "M", "N", "K",
	       "gemm", "loaded/regs/spill", "time", "rate");
	for (int a = 3; a < argc; a++) {
		char recipe[128], dir[4096], why[4096];
		double tol = 0.2;
		char *colon;
		precc_rt *rt;
		snprintf(recipe, sizeof recipe, "%s", argv[a]);
		if ((colon = strchr(recipe, ':')))
			*colon = 0, tol = atof(colon + 1);
		snprintf(dir, sizeof dir, "%s/%s", argv[1], recipe);
		if (!(rt = precc_rt_open(dir, PRECC_BACKEND_CUDA, why, sizeof why))) {
			printf("%s: cannot open %s: %s\n", recipe, dir, why);
			bad++;
			continue;
		}
		for (int l = 0; l < precc_rt_layer_count(rt); l++)
			bad += bench_layer(js, recipe, tol, rt, l);
		precc_rt_close(rt);
	}
	fclose(js);
	printf(BENCH ": %s\n", bad ? "some results BAD (see above)"
	       : no_check ? "done (values not checked)" : "every output checked");
	return bad ? 1 : 0;
}
