/*
 * bench_quant_bw.c — quantize bandwidth on a GPU, side by side with a
 * device-to-device copy in the same run (DESIGN.md, "Measuring"):
 *
 *   copy        cuMemcpyDtoD of the bf16 input (bytes moved: read + write)
 *   tensorwise  bf16 -> e4m3 current tensorwise quantize with the fused
 *               transpose: the layer's steps on its input x (amax kernel +
 *               quantize/transpose kernel), recipe current_tensorwise
 *   blockwise   1x128 single pass: the steps on x of recipe deepseek_v3
 *
 * both on the 8192 x 8192 layer of tests/gpu/bw8192.lua at M = 8192, from
 * the artifacts tests/gpu/prepare.sh builds with `precc build`. Bytes moved
 * are counted from the steps' buffers: every input read once, every output
 * written once (2 B read + 2 x 1 B written per element for the fused
 * transpose, plus the amax pass's read when it is a separate kernel).
 * Each figure is the median of 20 timed repetitions (cuEvent), after 3
 * warm-ups. Targets: >= 85% (tensorwise) and >= 90% (blockwise) of copy.
 *
 *   bench_quant_bw [ARTIFACTS]   default tests/gpu/artifacts/bench
 *
 * Needs a GPU: without a driver or device it exits 77 saying why. Built
 * by tests/gpu/run.sh, and by CMake when cuda.h exists.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precc/interp.h"
#include "precc/numerics.h"
#include "precc/precc_rt.h"

#define M 8192
#define BENCH "bench_quant_bw"
#define REPS 20
#define WARMUP 3

#define FUNCS(X) X(cuInit) X(cuDeviceGet) X(cuDeviceGetName) \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) \
	X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) \
	X(cuEventElapsedTime) X(cuEventDestroy) X(cuMemcpyDtoDAsync) \
	X(cuGetErrorName)
#include "gpu.h"


typedef struct Copy { CUdeviceptr dst, src; size_t bytes; } Copy;

static void do_copy(void *arg)
{
	Copy *c = arg;
	CK(drv.cuMemcpyDtoDAsync(c->dst, c->src, c->bytes, NULL));
}

typedef struct Quant {
	precc_rt *rt;
	int layer, steps[8], nsteps;
	void **buf;
	int nbuf;
	double bytes;             /* moved per repetition */
	char kernels[256];
} Quant;

static void do_quant(void *arg)
{
	Quant *q = arg;
	for (int s = 0; s < q->nsteps; s++)
		if (precc_rt_run_step(q->rt, q->layer, q->steps[s], M, q->buf, 0, NULL)) {
			fprintf(stderr, "bench_quant_bw: %s\n", precc_rt_last_error());
			exit(1);
		}
}

/* Opens DIR and picks the steps of layer "bw" that read its input x. */
static int quant_open(const char *dir, Quant *q)
{
	char why[4096];
	int x = -1;

	memset(q, 0, sizeof *q);
	if (!(q->rt = precc_rt_open(dir, PRECC_BACKEND_CUDA, why, sizeof why))) {
		printf("  (cannot use %s: %s)\n", dir, why);
		return -1;
	}
	if ((q->layer = precc_rt_layer_find(q->rt, "bw")) < 0) {
		printf("  (%s has no layer 'bw': build it for tests/gpu/bw8192.lua)\n", dir);
		return -1;
	}
	q->nbuf = precc_rt_buffer_count(q->rt, q->layer);
	q->buf = calloc((size_t)q->nbuf, sizeof *q->buf);
	for (int i = 0; i < q->nbuf; i++) {
		precc_buffer_info bi;
		precc_rt_buffer_info(q->rt, q->layer, i, M, &bi);
		if (strcmp(bi.role, "input") == 0)
			x = i;
		if (!(q->buf[i] = precc_rt_malloc(q->rt, bi.bytes))) {
			fprintf(stderr, "bench_quant_bw: %s\n", precc_rt_last_error());
			exit(1);
		}
		if (!bi.written || strcmp(bi.role, "state") == 0) {
			/* inputs: seeded values of magnitudes 2^-8 .. 2^8; state: 1 */
			unsigned char *h = malloc(bi.bytes);
			uint64_t s = 0x9e3779b97f4a7c15ULL;
			/* element by element: e2m1 holds two codes a byte */
			for (size_t e = 0; e < (size_t)bi.rows * (size_t)bi.cols; e++) {
				s = s * 6364136223846793005ULL + 1442695040888963407ULL;
				float v = ((float)(s >> 40) / 16777216.0f - 0.5f) *
				          (float)(1 << ((s >> 20) % 17)) / 256.0f;
				uint32_t c = precc_encode(bi.format_id, strcmp(bi.role,
				             "state") ? v : 1.0f, PRECC_RNE, true, 0);
				precc_interp_set_code(h, bi.format_id, e, c);
			}
			precc_rt_upload(q->rt, q->buf[i], h, bi.bytes);
			free(h);
		}
	}
	for (int s = 0; s < precc_rt_step_count(q->rt, q->layer) && q->nsteps < 8; s++) {
		precc_step_info si;
		precc_kernel_info ki;
		int uses = 0;
		precc_rt_step_info(q->rt, q->layer, s, &si);
		for (int p = 0; p < si.nargs; p++)
			uses |= si.args[p] == x && !(si.out_mask >> p & 1);
		if (!uses)
			continue;
		q->steps[q->nsteps++] = s;
		for (int p = 0; p < si.nargs; p++) {
			precc_buffer_info bi;
			precc_rt_buffer_info(q->rt, q->layer, si.args[p], M, &bi);
			q->bytes += (double)bi.bytes;
		}
		precc_rt_kernel_info(q->rt, si.kernel, &ki);
		snprintf(q->kernels + strlen(q->kernels), sizeof q->kernels -
		         strlen(q->kernels), "%s%s", q->nsteps > 1 ? " + " : "", ki.shape);
	}
	if (!q->nsteps) {
		printf("  (%s: no step reads the layer's input)\n", dir);
		return -1;
	}
	return 0;
}

static void quant_close(Quant *q)
{
	for (int i = 0; q->buf && i < q->nbuf; i++)
		precc_rt_free(q->rt, q->buf[i]);
	free(q->buf);
	precc_rt_close(q->rt);
}

int main(int argc, char **argv)
{
	const char *root = argc > 1 ? argv[1] : "tests/gpu/artifacts/bench";
	static const struct { const char *recipe, *what; double target; } cfg[] = {
		{"current_tensorwise", "tensorwise current + transpose", 0.85},
		{"deepseek_v3", "blockwise 1x128, single pass", 0.90},
	};
	char name[256];
	Copy c;
	float copy_ms;
	int below = 0, measured = 0;
	CUdevice dev;
	int rc = gpu_open(&dev, name, sizeof name);
	if (rc)
		return rc;

	printf("bench_quant_bw: %s, bf16 x [%d, %d], median of %d, artifacts %s\n",
	       name, M, M, REPS, root);
	{
		precc_rt *rt = precc_rt_open_backend(PRECC_BACKEND_CUDA, NULL, 0);
		c.bytes = (size_t)M * M * 2;
		c.src = (CUdeviceptr)(uintptr_t)precc_rt_malloc(rt, c.bytes);
		c.dst = (CUdeviceptr)(uintptr_t)precc_rt_malloc(rt, c.bytes);
		if (!c.src || !c.dst) {
			fprintf(stderr, "bench_quant_bw: %s\n", precc_rt_last_error());
			return 1;
		}
		copy_ms = timed(do_copy, &c);
		printf("%-34s %8.3f ms %8.1f GB/s  (%.1f MiB read, %.1f MiB written)\n",
		       "copy (cuMemcpyDtoD)", copy_ms, 2.0 * (double)c.bytes / copy_ms / 1e6,
		       (double)c.bytes / 1048576.0, (double)c.bytes / 1048576.0);
		precc_rt_free(rt, (void *)(uintptr_t)c.src);
		precc_rt_free(rt, (void *)(uintptr_t)c.dst);
		precc_rt_close(rt);
	}
	for (unsigned i = 0; i < sizeof cfg / sizeof *cfg; i++) {
		char dir[4096];
		Quant q;
		float ms;
		double gbs, pct;
		snprintf(dir, sizeof dir, "%s/%s", root, cfg[i].recipe);
		if (quant_open(dir, &q)) {
			printf("%-34s SKIP (no usable artifacts; run tests/gpu/prepare.sh)\n",
			       cfg[i].what);
			quant_close(&q);
			continue;
		}
		ms = timed(do_quant, &q);
		gbs = q.bytes / ms / 1e6;
		pct = gbs / (2.0 * (double)c.bytes / copy_ms / 1e6);
		printf("%-34s %8.3f ms %8.1f GB/s  %5.1f%% of copy (target %.0f%%: %s)"
		       "  [%s; %.1f MiB moved]\n", cfg[i].what, ms, gbs, pct * 100,
		       cfg[i].target * 100, pct >= cfg[i].target ? "met" : "BELOW",
		       q.kernels, q.bytes / 1048576.0);
		below += pct < cfg[i].target;
		measured++;
		quant_close(&q);
	}
	for (int i = 0; i <= REPS; i++)
		drv.cuEventDestroy(ev[i]);
	drv.cuCtxSetCurrent(NULL);
	drv.cuDevicePrimaryCtxRelease(dev);
	if (!measured) {
		fprintf(stderr, "bench_quant_bw: nothing measured: no artifacts under %s\n", root);
		return 1;
	}
	printf("bench_quant_bw: %d of %d below target\n", below, measured);
	return 0;
}
