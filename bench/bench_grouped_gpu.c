/*
 * bench_grouped_gpu.c — precc's grouped GEMMs on a GPU (issue 29): for
 * every expert group of each artifact directory (one per distinct
 * expert shape: gate and up share theirs), at each token count T
 * (PRECC_GROUPED_TOKENS, default "4096 16384") and routing
 * (PRECC_GROUPED_ROUTING, default "balanced skewed"), the group's
 * training step through the runtime's grouped API
 * (precc_rt_forward_grouped / backward_grouped, runtime/grouped.c), then
 * each grouped GEMM step alone (fprop, dgrad, wgrad: precc_rt_run_step on
 * the group's layer) and the two calls whole ("forward": the quantizes
 * and the fprop; "backward").
 *
 * The rows are what precc.torch.GroupedExperts passes
 * (python/precc/torch/_experts.py, _grouped_path): M = T x top-k routed
 * rows (top-k from the group's name, "..._top8.experts...", else
 * PRECC_GROUPED_TOPK, else 2; "_t32768" in the name fixes T, balanced:
 * bench/gemm/moe_shapes.lua), each expert's rows padded to the group's
 * token_align with zero rows, m_total = M + experts x (token_align - 1)
 * up to the plan's m_multiple (the static bound; rows past the last
 * expert's end are zeros). balanced: M / experts each; skewed: the first
 * eighth of the experts (at least one) take 4 times the others' share.
 * A GEMM does 2 M N K useful flops (the routed rows, not the padding):
 * the TFLOP/s column counts those.
 *
 * Before timing, the step's outputs are checked: SAMPLES elements each of
 * y, dX and dW against a float64 dot product over the expert's own rows
 * of the bf16 inputs (||out - ref|| / ||ref|| within the tolerance, else
 * BAD and exit 1), y zero past the last expert, and
 * precc_rt_grouped_check. PRECC_BENCH_NO_CHECK=1 skips the values (the
 * fake driver's dry run, which computes nothing).
 *
 *   bench_grouped_gpu JSONL DIR[:TOL]...     (DIR: a precc build with groups;
 *                                             its basename names the recipe)
 *   PRECC_BENCH_MAX_MNK=1e15 ...             skips configurations whose
 *                                             M N K is over it
 *
 * One line per (recipe, group, T, routing, what) on stdout, the same as a
 * JSON object per line into JSONL (bench/gemm/grouped_ref.py reads it
 * beside torch._grouped_mm, the dense GEMMs of bench_gemm_gpu and
 * DeepGEMM's published figures). Needs a GPU: without one it exits 77.
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

#define BENCH "bench_grouped_gpu"
#define REPS 20
#define WARMUP 3
#define P 1048573L                /* 2^20 - 3, prime: rows do not line up */
#define SAMPLES 48
#define MAXCFG 16

#define FUNCS(X) X(cuInit) X(cuDeviceGet) X(cuDeviceGetName) \
	X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) \
	X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) \
	X(cuEventElapsedTime) X(cuMemcpyDtoDAsync) \
	X(cuMemsetD8Async) X(cuStreamSynchronize) X(cuGetErrorName)
#include "gpu.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static int no_check;

static double urand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(rng >> 11) * 0x1p-53;
}

static void rt_die(const char *what)
{
	fprintf(stderr, BENCH ": %s: %s\n", what, precc_rt_last_error());
	exit(1);
}

/* P bf16 values, uniform in [-1, 1) times 2^e, e in -2..2 (as
 * bench_gemm_gpu draws), their decoded values in v */
static uint16_t *draw(float *v)
{
	uint16_t *h = malloc(P * 2);
	for (long i = 0; i < P; i++) {
		float x = (float)((2 * urand() - 1) * ldexp(1, (int)(urand() * 5) - 2));
		h[i] = (uint16_t)precc_encode(PRECC_BF16, x, PRECC_RNE, true, 0);
		v[i] = precc_decode(PRECC_BF16, h[i]);
	}
	return h;
}

/* dst[0 .. bytes) = the pattern h repeated: one upload, doubling copies */
static void fill(precc_rt *rt, void *dst, size_t bytes, const uint16_t *h)
{
	size_t blk = (size_t)P * 2, done = bytes < blk ? bytes : blk;
	if (precc_rt_upload(rt, dst, h, done))
		rt_die("upload");
	while (done < bytes) {
		size_t n = bytes - done < done ? bytes - done : done;
		n -= n % 2;
		CK(drv.cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst + done,
		                         (CUdeviceptr)(uintptr_t)dst, n, NULL));
		done += n;
	}
	CK(drv.cuStreamSynchronize(NULL));
}

static long round_up(long v, long u) { return (v + u - 1) / u * u; }

/* The routed rows of each expert: balanced, or skewed (the first eighth,
 * at least one, with 4 times the others' weight); the remainder of the
 * division to the first experts. */
static void route(long m, int ne, int skewed, long *cnt)
{
	int hot = ne / 8 > 0 ? ne / 8 : 1;
	long wsum = skewed ? 4L * hot + (ne - hot) : ne, given = 0;
	for (int e = 0; e < ne; e++) {
		long w = skewed && e < hot ? 4 : 1;
		cnt[e] = m * w / wsum;
		given += cnt[e];
	}
	for (int e = 0; given < m; e = (e + 1) % ne, given++)
		cnt[e]++;
}

typedef struct Cfg { long tokens; int skewed; } Cfg;

typedef struct Group {
	precc_rt *rt;
	precc_group_info gi;
	int gidx, topk, nbuf, nsteps, steps[8];
	long m, m_total, *cnt, *start;    /* routed rows; each expert's first row */
	int32_t *ends;
	void *x, *w, *y, *dy, *dx, *dw, *offs, *saved, *state, *work;
	void **buf;
	precc_layer_sizes sz;
} Group;

static void do_steps(void *arg)
{
	Group *g = arg;
	for (int s = 0; s < g->nsteps; s++)
		if (precc_rt_run_step(g->rt, g->gi.layer, g->steps[s], g->m_total, g->buf, 7, NULL))
			rt_die("run_step");
}

static void do_forward(void *arg)
{
	Group *g = arg;
	if (precc_rt_forward_grouped(g->rt, g->gidx, g->m_total,
	                             g->offs, g->gi.experts, g->x, g->w, g->y, g->saved, g->state,
	                             g->work, 7, NULL))
		rt_die("forward_grouped");
}

static void do_backward(void *arg)
{
	Group *g = arg;
	if (precc_rt_backward_grouped(g->rt, g->gidx, g->m_total,
	                              g->offs, g->gi.experts, g->x, g->w, g->dy, g->dx, g->dw, NULL,
	                              g->saved, g->state, g->work, 7, NULL))
		rt_die("backward_grouped");
}

/* The buffers array of the group's layer at m_total: each buffer where the
 * grouped calls place it (precc_rt_buffer_place). */
static void place_buffers(Group *g)
{
	for (int i = 0; i < g->nbuf; i++) {
		precc_place pl;
		size_t off = 0;
		if (precc_rt_buffer_place(g->rt, g->gi.layer, i, g->m_total, &pl, &off))
			rt_die("buffer_place");
		char *base = pl == PRECC_PLACE_X ? g->x : pl == PRECC_PLACE_W ? g->w
		           : pl == PRECC_PLACE_Y ? g->y : pl == PRECC_PLACE_DY ? g->dy
		           : pl == PRECC_PLACE_DX ? g->dx : pl == PRECC_PLACE_DW ? g->dw
		           : pl == PRECC_PLACE_OFFSETS ? g->offs : pl == PRECC_PLACE_STATE ? g->state
		           : pl == PRECC_PLACE_SAVED ? g->saved : pl == PRECC_PLACE_WORKSPACE ? g->work
		           : NULL;
		g->buf[i] = base ? base + off : NULL;
	}
}

/* One element of a device tensor of format fmt, decoded */
static double elem(precc_rt *rt, const void *t, long idx, int fmt)
{
	size_t es = precc_interp_elem_bytes(fmt);
	uint32_t code = 0;
	if (precc_rt_download(rt, &code, (const char *)t + (size_t)idx * es, es))
		rt_die("download");
	return precc_decode(fmt, code);
}

/* ||out - ref|| / ||ref|| over SAMPLES elements of y, dX or dW (which 0,
 * 1, 2), from the host copies of the patterns; NAN when one is not
 * finite. */
static double check(Group *g, int which, const float *vx, const float *vw, const float *vdy)
{
	long n = g->gi.n, k = g->gi.k;
	double num = 0, den = 0;
	int fmt = which == 0 ? g->sz.y_format : which == 1 ? g->sz.dx_format : g->sz.dw_format;
	const void *t = which == 0 ? g->y : which == 1 ? g->dx : g->dw;

	for (int s = 0; s < SAMPLES; s++) {
		double ref = 0, got;
		if (which < 2) {          /* a row of some expert with rows */
			int e;
			do
				e = (int)(urand() * g->gi.experts);
			while (!g->cnt[e]);
			long r = g->start[e] + (long)(urand() * g->cnt[e]);
			long c = (long)(urand() * (which ? k : n));
			if (which == 0)   /* y[r,c] = sum_i x[r,i] W_e[c,i] */
				for (long i = 0; i < k; i++)
					ref += (double)vx[(r * k + i) % P] * vw[((e * n + c) * k + i) % P];
			else              /* dx[r,c] = sum_j dy[r,j] W_e[j,c] */
				for (long j = 0; j < n; j++)
					ref += (double)vdy[(r * n + j) % P] * vw[((e * n + j) * k + c) % P];
			got = elem(g->rt, t, r * (which ? k : n) + c, fmt);
		} else {                  /* dW_e[i,c] = sum over e's rows dy[r,i] x[r,c] */
			int e = (int)(urand() * g->gi.experts);
			long i = (long)(urand() * n), c = (long)(urand() * k);
			for (long r = g->start[e]; r < g->start[e] + g->cnt[e]; r++)
				ref += (double)vdy[(r * n + i) % P] * vx[(r * k + c) % P];
			got = elem(g->rt, t, (e * n + i) * k + c, fmt);
		}
		if (!isfinite(got))
			return NAN;
		num += (got - ref) * (got - ref);
		den += ref * ref;
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void emit(FILE *js, const char *recipe, const Group *g, const Cfg *c, const char *what,
                 const char *kernel, float ms, double err, int ok)
{
	double tf = 2.0 * g->m * g->gi.n * g->gi.k / (ms * 1e-3) / 1e12;
	const char *rout = c->skewed ? "skewed" : "balanced";
	printf("%-14s %-44s T%-6ld %-8s m%-7ld %5ldx%-5ld %-8s %-24s %9.3f ms %7.1f TFLOP/s",
	       recipe, g->gi.name, c->tokens, rout, g->m, g->gi.n, g->gi.k, what, kernel, ms, tf);
	if (!(err < 0))
		printf("  err %.3g%s", err, ok ? "" : "  BAD");
	putchar('\n');
	fprintf(js, "{\"recipe\": \"%s\", \"group\": \"%s\", \"experts\": %d, \"topk\": %d, "
	        "\"tokens\": %ld, \"routing\": \"%s\", \"m\": %ld, \"m_total\": %ld, "
	        "\"token_align\": %ld, \"n\": %ld, \"k\": %ld, \"what\": \"%s\", \"kernel\": \"%s\", "
	        "\"ms\": %.6f, \"tflops\": %.2f, \"err\": %.6g, \"ok\": %s}\n", recipe, g->gi.name,
	        g->gi.experts, g->topk, c->tokens, rout, g->m, g->m_total, g->gi.token_align,
	        g->gi.n, g->gi.k, what, kernel, ms, tf, isnan(err) ? 1e300 : err,
	        ok ? "true" : "false");
	fflush(stdout);
	fflush(js);
}

static void *dmalloc(precc_rt *rt, size_t n)
{
	void *p = precc_rt_malloc(rt, n ? n : 16);
	if (!p)
		rt_die("malloc");
	return p;
}

static double max_mnk;

/* One group of recipe's artifacts at every configuration; the number of
 * BAD results. */
static int bench_group(FILE *js, const char *recipe, double tol, precc_rt *rt, int gidx,
                       const Cfg *cfg, int ncfg, uint16_t *const hp[3], float *const vp[3])
{
	Group g = {.rt = rt, .gidx = gidx};
	int bad = 0;
	const char *tk;

	if (precc_rt_group_info(rt, gidx, &g.gi))
		rt_die("group_info");
	tk = strstr(g.gi.name, "_top");
	g.topk = tk ? atoi(tk + 4) : getenv("PRECC_GROUPED_TOPK") ? atoi(getenv("PRECC_GROUPED_TOPK")) : 2;
	if (g.topk < 1)
		g.topk = 1;
	/* "_t32768" in the name: that T alone, balanced (DeepGEMM's rows) */
	Cfg fixed;
	for (const char *p = strstr(g.gi.name, "_t"); p; p = strstr(p + 2, "_t"))
		if (p[2] >= '0' && p[2] <= '9') {
			fixed = (Cfg){atol(p + 2), 0};
			cfg = &fixed, ncfg = 1;
			break;
		}
	long mm = precc_rt_layer_m_multiple(rt, g.gi.layer), al = g.gi.token_align, ne = g.gi.experts;
	long mmax = 0;
	for (int c = 0; c < ncfg; c++) {
		long m = cfg[c].tokens * g.topk;
		long mt = round_up(m + ne * (al - 1), mm);
		mmax = mt > mmax ? mt : mmax;
	}
	/* the regions and tensors at the largest m_total serve every smaller one */
	if (precc_rt_group_sizes(rt, gidx, mmax, &g.sz))
		rt_die("group_sizes");
	/* the caller's tensors in the plan's formats (DeepSeek-V3 at T = 16384:
	 * W and dW are 7.5 GB each in bf16) */
	size_t ey = precc_interp_elem_bytes(g.sz.y_format), edx = precc_interp_elem_bytes(g.sz.dx_format);
	size_t edw = precc_interp_elem_bytes(g.sz.dw_format);
	size_t xb = (size_t)mmax * g.gi.k * 2, yb = (size_t)mmax * g.gi.n * ey;
	size_t wb = (size_t)ne * g.gi.n * g.gi.k * 2, dxb = (size_t)mmax * g.gi.k * edx;
	size_t dwb = (size_t)ne * g.gi.n * g.gi.k * edw;
	g.x = dmalloc(rt, xb), g.dy = dmalloc(rt, (size_t)mmax * g.gi.n * 2);
	g.w = dmalloc(rt, wb);
	g.y = dmalloc(rt, yb);
	g.dx = g.gi.grouped[1] ? dmalloc(rt, dxb) : NULL;
	g.dw = g.gi.grouped[2] ? dmalloc(rt, dwb) : NULL;
	g.offs = dmalloc(rt, (size_t)ne * 4);
	g.saved = dmalloc(rt, g.sz.saved_bytes);
	g.state = dmalloc(rt, g.sz.state_bytes);
	g.work = dmalloc(rt, g.sz.workspace_bytes);
	if (g.sz.state_bytes && precc_rt_layer_state_init(rt, g.gi.layer, g.state))
		rt_die("state_init");
	g.nbuf = precc_rt_buffer_count(rt, g.gi.layer);
	g.buf = calloc((size_t)g.nbuf, sizeof *g.buf);
	g.cnt = calloc((size_t)ne, sizeof *g.cnt);
	g.start = calloc((size_t)ne, sizeof *g.start);
	g.ends = calloc((size_t)ne, sizeof *g.ends);
	fill(rt, g.w, wb, hp[1]);

	for (int c = 0; c < ncfg; c++) {
		g.m = cfg[c].tokens * g.topk;
		g.m_total = round_up(g.m + ne * (al - 1), mm);
		if (max_mnk > 0 && (double)g.m * g.gi.n * g.gi.k > max_mnk)
			continue;
		route(g.m, (int)ne, cfg[c].skewed, g.cnt);
		long end = 0;
		for (int e = 0; e < ne; e++) {
			g.start[e] = end;
			end += round_up(g.cnt[e], al);
			g.ends[e] = (int32_t)end;
		}
		if (precc_rt_upload(rt, g.offs, g.ends, (size_t)ne * 4))
			rt_die("upload offsets");
		/* x and dY: the pattern, zero on the padding rows (as
		 * GroupedExperts pads); y, dX, dW poisoned (0xff: NaN) */
		fill(rt, g.x, (size_t)g.m_total * g.gi.k * 2, hp[0]);
		fill(rt, g.dy, (size_t)g.m_total * g.gi.n * 2, hp[2]);
		for (int e = 0; e <= ne; e++) {
			long from = e < ne ? g.start[e] + g.cnt[e] : end;
			long to = e < ne ? g.ends[e] : g.m_total;
			if (to <= from)
				continue;
			CK(drv.cuMemsetD8Async((CUdeviceptr)(uintptr_t)g.x + (size_t)from * g.gi.k * 2, 0,
			                       (size_t)(to - from) * g.gi.k * 2, NULL));
			CK(drv.cuMemsetD8Async((CUdeviceptr)(uintptr_t)g.dy + (size_t)from * g.gi.n * 2, 0,
			                       (size_t)(to - from) * g.gi.n * 2, NULL));
		}
		CK(drv.cuMemsetD8Async((CUdeviceptr)(uintptr_t)g.y, 0xff, yb, NULL));
		if (g.dx)
			CK(drv.cuMemsetD8Async((CUdeviceptr)(uintptr_t)g.dx, 0xff, dxb, NULL));
		if (g.dw)
			CK(drv.cuMemsetD8Async((CUdeviceptr)(uintptr_t)g.dw, 0xff, dwb, NULL));
		place_buffers(&g);
		do_forward(&g);
		do_backward(&g);
		if (precc_rt_sync(rt, NULL))
			rt_die("sync");
		if (precc_rt_grouped_check(rt))
			rt_die("grouped_check");
		double err[3] = {-1, -1, -1};
		int ok[3] = {1, 1, 1};
		if (!no_check) {
			for (int w = 0; w < 3; w++) {
				if ((w == 1 && !g.dx) || (w == 2 && !g.dw))
					continue;
				err[w] = check(&g, w, vp[0], vp[1], vp[2]);
				ok[w] = !isnan(err[w]) && err[w] <= tol;
			}
			/* rows past the last expert: y is 0 there */
			if (end < g.m_total && elem(rt, g.y, end * g.gi.n, g.sz.y_format) != 0) {
				printf("%s %s: y[%ld, 0] past the last expert is not 0\n", recipe, g.gi.name, end);
				ok[0] = 0;
			}
		}
		/* each grouped GEMM alone, then the two calls whole */
		int nst = precc_rt_step_count(rt, g.gi.layer);
		for (int s = 0; s < nst; s++) {
			precc_step_info si;
			precc_kernel_info ki;
			precc_rt_step_info(rt, g.gi.layer, s, &si);
			precc_rt_kernel_info(rt, precc_rt_step_kernel(rt, g.gi.layer, s, g.m_total), &ki);
			if (strcmp(ki.shape, "gemm") || !si.gemm)
				continue;
			int w = !strcmp(si.gemm, "fprop") ? 0 : !strcmp(si.gemm, "dgrad") ? 1 : 2;
			g.steps[0] = s, g.nsteps = 1;
			char kern[64];
			snprintf(kern, sizeof kern, "%s/%d", ki.loaded ? ki.loaded : "?", ki.num_regs);
			emit(js, recipe, &g, &cfg[c], si.gemm, kern, timed(do_steps, &g), err[w], ok[w]);
			bad += !ok[w];
		}
		emit(js, recipe, &g, &cfg[c], "forward", "precc_rt_forward_grouped",
		     timed(do_forward, &g), -1, 1);
		emit(js, recipe, &g, &cfg[c], "backward", "precc_rt_backward_grouped",
		     timed(do_backward, &g), -1, 1);
	}
	void *ps[] = {g.x, g.w, g.y, g.dy, g.dx, g.dw, g.offs, g.saved, g.state, g.work};
	for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
		precc_rt_free(rt, ps[i]);
	free(g.buf), free(g.cnt), free(g.start), free(g.ends);
	return bad;
}

int main(int argc, char **argv)
{
	char name[256];
	CUdevice dev;
	Cfg cfg[MAXCFG];
	int ncfg = 0, bad = 0, rc;
	FILE *js;

	if (argc < 3) {
		fprintf(stderr, "usage: " BENCH " JSONL DIR[:TOL]...\n");
		return 2;
	}
	no_check = getenv("PRECC_BENCH_NO_CHECK") && atoi(getenv("PRECC_BENCH_NO_CHECK"));
	if (getenv("PRECC_BENCH_MAX_MNK"))
		max_mnk = atof(getenv("PRECC_BENCH_MAX_MNK"));
	const char *tok = getenv("PRECC_GROUPED_TOKENS"), *rout = getenv("PRECC_GROUPED_ROUTING");
	char tbuf[256], rbuf[64];
	snprintf(tbuf, sizeof tbuf, "%s", tok && *tok ? tok : "4096 16384");
	snprintf(rbuf, sizeof rbuf, "%s", rout && *rout ? rout : "balanced skewed");
	for (char *t = strtok(tbuf, " ,"); t && ncfg < MAXCFG; t = strtok(NULL, " ,")) {
		long v = atol(t);
		if (v < 1) {
			fprintf(stderr, BENCH ": PRECC_GROUPED_TOKENS: '%s' is not a token count\n", t);
			return 2;
		}
		if (strstr(rbuf, "balanced") && ncfg < MAXCFG)
			cfg[ncfg++] = (Cfg){v, 0};
		if (strstr(rbuf, "skewed") && ncfg < MAXCFG)
			cfg[ncfg++] = (Cfg){v, 1};
	}
	if (!ncfg) {
		fprintf(stderr, BENCH ": no configuration (PRECC_GROUPED_TOKENS, PRECC_GROUPED_ROUTING)\n");
		return 2;
	}
	if ((rc = gpu_open(&dev, name, sizeof name)))
		return rc;
	if (!(js = fopen(argv[1], "w"))) {
		perror(argv[1]);
		return 1;
	}
	printf(BENCH ": %s, median of %d after %d warm-ups%s\n", name, REPS, WARMUP,
	       no_check ? ", values not checked (PRECC_BENCH_NO_CHECK)" : "");
	float *vp[3];            /* x, w, dY: three patterns */
	uint16_t *hp[3];
	for (int i = 0; i < 3; i++)
		hp[i] = draw(vp[i] = malloc(P * sizeof *vp[i]));
	for (int a = 2; a < argc; a++) {
		char dir[4096], why[4096];
		double tol = 0.2;
		snprintf(dir, sizeof dir, "%s", argv[a]);
		char *colon = strrchr(dir, ':');
		if (colon && !strchr(colon, '/'))
			*colon = 0, tol = atof(colon + 1);
		const char *slash = strrchr(dir, '/'), *recipe = slash ? slash + 1 : dir;
		precc_rt *rt = precc_rt_open(dir, PRECC_BACKEND_CUDA, why, sizeof why);
		if (!rt) {
			printf("%s: cannot open %s: %s\n", recipe, dir, why);
			bad++;
			continue;
		}
		int ng = precc_rt_group_count(rt);
		if (!ng) {
			printf("%s: %s has no expert groups\n", recipe, dir);
			bad++;
		}
		/* one group per distinct (experts, n, k): gate and up are alike */
		for (int i = 0; i < ng; i++) {
			precc_group_info gi, gj;
			int seen = 0;
			precc_rt_group_info(rt, i, &gi);
			for (int j = 0; j < i && !seen; j++) {
				precc_rt_group_info(rt, j, &gj);
				seen = gj.experts == gi.experts && gj.n == gi.n && gj.k == gi.k;
			}
			if (!seen)
				bad += bench_group(js, recipe, tol, rt, i, cfg, ncfg, hp, vp);
		}
		precc_rt_close(rt);
	}
	fclose(js);
	for (int i = 0; i < 3; i++)
		free(hp[i]), free(vp[i]);
	printf(BENCH ": %s\n", bad ? "some results BAD (see above)" :
	       no_check ? "done (values not checked)" : "every output checked");
	return bad ? 1 : 0;
}
