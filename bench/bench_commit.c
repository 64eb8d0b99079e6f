/*
 * bench_commit.c — delayed scaling's commit for a whole model on a GPU,
 * side by side in one run (DESIGN.md, "Measuring"):
 *
 *   per layer   precc_rt_commit for every layer: a launch of the update
 *               kernel and a device copy per state buffer, per layer
 *   bulk        precc_rt_bulk_commit_run: one launch per distinct update
 *               kernel (runtime/commit_bulk.c, codegen/k_delayed.c)
 *
 * on every layer of ARTIFACTS (default: tests/gpu/artifacts/llama-3-8b/
 * te_delayed_hybrid, 225 layers), each with its own state and saved
 * regions (saved filled with amaxes of 0.25 .. 64). Each figure is the
 * median of 20 timed repetitions (cuEvent) after 3 warm-ups; then, from
 * one copy of the same state, one per-layer commit and one bulk commit
 * must leave the model's state equal byte for byte.
 *
 *   bench_commit [ARTIFACTS]
 *
 * Needs a GPU: without a driver or device it exits 77 saying why. Built
 * by tests/gpu/run.sh, and by CMake when cuda.h exists.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precc/precc_rt.h"

#define M 128
#define BENCH "bench_commit"
#define REPS 20
#define WARMUP 3

#define FUNCS(X) X(cuInit) X(cuDeviceGet) X(cuDeviceGetName) \
	X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuEventCreate) \
	X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuGetErrorName)
#include "gpu.h"

#define RT(call) do { if ((call) < 0) { fprintf(stderr, "bench_commit: %s: %s\n", #call, \
	precc_rt_last_error()); exit(1); } } while (0)

typedef struct Model {
	precc_rt *rt;
	int n, *layer;
	void **saved, **state;
	void *all;                /* the model's state, one buffer */
	size_t all_bytes;
	precc_rt_bulk_commit *bulk;
} Model;

static void per_layer(void *arg)
{
	Model *md = arg;
	for (int i = 0; i < md->n; i++)
		RT(precc_rt_commit(md->rt, md->layer[i], M, md->saved[i], md->state[i], NULL));
}

static void bulk(void *arg)
{
	Model *md = arg;
	RT(precc_rt_bulk_commit_run(md->rt, md->bulk, NULL));
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "tests/gpu/artifacts/llama-3-8b/te_delayed_hybrid";
	char name[256], why[4096];
	Model md = {0};
	CUdevice dev;
	int rc = gpu_open(&dev, name, sizeof name);
	if (rc)
		return rc;
	if (!(md.rt = precc_rt_open(dir, PRECC_BACKEND_CUDA, why, sizeof why))) {
		fprintf(stderr, "bench_commit: %s (run tests/gpu/prepare.sh)\n", why);
		return 1;
	}
	int nl = precc_rt_layer_count(md.rt);
	md.layer = calloc((size_t)nl, sizeof *md.layer);
	md.saved = calloc((size_t)nl, sizeof *md.saved);
	md.state = calloc((size_t)nl, sizeof *md.state);
	md.all_bytes = precc_rt_model_state_bytes(md.rt);
	md.all = precc_rt_malloc(md.rt, md.all_bytes);
	RT(precc_rt_model_state_init(md.rt, md.all));
	for (int l = 0; l < nl; l++) {
		precc_layer_sizes sz;
		RT(precc_rt_layer_sizes(md.rt, l, M, &sz));
		if (!sz.has_state)
			continue;
		/* saved: f32 amaxes 0.25 .. 64 wherever the commit reads one */
		float *hs = malloc(sz.saved_bytes);
		for (size_t e = 0; e < sz.saved_bytes / 4; e++)
			hs[e] = (float)(1u << ((unsigned)(e + (size_t)l) % 9)) / 4.0f;
		md.layer[md.n] = l;
		md.saved[md.n] = precc_rt_malloc(md.rt, sz.saved_bytes);
		RT(precc_rt_upload(md.rt, md.saved[md.n], hs, sz.saved_bytes));
		memset(hs, 0, 4);
		RT(precc_rt_upload(md.rt, md.saved[md.n], hs, 4));   /* no skip flag */
		md.state[md.n++] = (char *)md.all + precc_rt_model_state_offset(md.rt, l);
		free(hs);
	}
	size_t tb = precc_rt_bulk_commit_table_bytes(md.rt, md.n, md.layer);
	void *table = precc_rt_malloc(md.rt, tb ? tb : 1);
	if (!(md.bulk = precc_rt_bulk_commit_new(md.rt, md.n, md.layer, M, md.saved, md.state,
	                                         table, tb))) {
		fprintf(stderr, "bench_commit: %s\n", precc_rt_last_error());
		return 1;
	}
	printf("bench_commit: %s, %s: %d layers with state, median of %d\n", name, dir, md.n, REPS);
	float ms_layer = timed(per_layer, &md), ms_bulk = timed(bulk, &md);
	printf("%-34s %9.3f ms  (%d update launches + their state copies)\n",
	       "per layer (precc_rt_commit)", ms_layer, md.n);
	printf("%-34s %9.3f ms  (%d launch%s)  %.1fx\n", "bulk (precc_rt_bulk_commit_run)",
	       ms_bulk, precc_rt_bulk_commit_launches(md.bulk),
	       precc_rt_bulk_commit_launches(md.bulk) == 1 ? "" : "es", ms_layer / ms_bulk);
	/* the same state, committed once each way */
	unsigned char *s0 = malloc(md.all_bytes), *s1 = malloc(md.all_bytes),
	              *s2 = malloc(md.all_bytes);
	RT(precc_rt_download(md.rt, s0, md.all, md.all_bytes));
	per_layer(&md);
	RT(precc_rt_download(md.rt, s1, md.all, md.all_bytes));
	RT(precc_rt_upload(md.rt, md.all, s0, md.all_bytes));
	bulk(&md);
	RT(precc_rt_download(md.rt, s2, md.all, md.all_bytes));
	int same = memcmp(s1, s2, md.all_bytes) == 0, moved = memcmp(s0, s1, md.all_bytes) != 0;
	printf("state after one commit: per layer %s bulk (%zu bytes; %s)\n", same ? "==" : "!=",
	       md.all_bytes, moved ? "the commit changed it" : "UNCHANGED: proves nothing");
	precc_rt_bulk_commit_free(md.bulk);
	precc_rt_close(md.rt);
	return same && moved ? 0 : 1;
}
