/*
 * test_gpu_layer.c — the layer API on a real GPU, captured in a CUDA
 * graph: forward + backward + commit of every layer of DIR (a
 * delayed-scaling recipe x tiny) run eagerly on a stream, then again from
 * a fresh state inside cuStreamBeginCapture/cuStreamEndCapture, the graph
 * launched once: the capture must succeed (nothing inside synchronizes or
 * allocates, which capture refuses) and y, dX, dW and the state must
 * equal the eager run's bit for bit.
 *
 *   test_gpu_layer DIR [N]   the first N layers (default all); SKIP (77)
 *                            without a driver or a device
 *
 * On tests/runtime/fake_count.c (which runs nothing and has 64 buffers)
 * the same code path runs for N = 5: runtime.layer.graph_fake.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <cuda.h>

#include "precc/precc_rt.h"
#include "precc/numerics.h"
#include "precc/interp.h"
#include "rtcheck.h"

#define STR(x) #x
#define XSTR(x) STR(x)
/* the driver entry points this test calls itself, by cuda.h's names */
#define SYMS(X) X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
	X(cuCtxSetCurrent) X(cuStreamCreate) X(cuStreamDestroy) \
	X(cuStreamSynchronize) X(cuStreamBeginCapture) X(cuStreamEndCapture) \
	X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy) \
	X(cuGraphDestroy)
#define DECL(f) static __typeof__(&f) p_##f;
SYMS(DECL)

static int load(char *why, size_t n)
{
	const char *path = getenv("PRECC_LIBCUDA");
	void *h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW);
	if (!h) {
		snprintf(why, n, "%s", dlerror());
		return -1;
	}
#define GET(f) if (!(p_##f = (__typeof__(&f))dlsym(h, XSTR(f)))) { \
		snprintf(why, n, "no %s", XSTR(f)); return -1; }
	SYMS(GET)
	return 0;
}

typedef struct Bufs { void *x, *w, *y, *dy, *dx, *dw, *saved, *state, *work; precc_layer_sizes sz; } Bufs;

static void *upload_random(precc_rt *rt, int fmt, long n, float amax, uint64_t seed)
{
	size_t es = precc_interp_elem_bytes(fmt);
	char *h = calloc((size_t)n, es);
	void *d = precc_rt_malloc(rt, (size_t)n * es);
	if (!d) {
		free(h);
		return NULL;
	}
	for (long i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		float v = ((float)((seed >> 33) % 20001) - 10000.0f) / 10000.0f * amax;
		uint32_t c = precc_encode(fmt, v, PRECC_RNE, true, 0);
		memcpy(h + (size_t)i * es, &c, es);
	}
	precc_rt_upload(rt, d, h, (size_t)n * es);
	free(h);
	return d;
}

static int step_all(precc_rt *rt, Bufs *b, int nl, long m, CUstream s)
{
	for (int l = 0; l < nl; l++)
		if (precc_rt_forward(rt, l, m, b[l].x, b[l].w, NULL, b[l].y, b[l].saved,
		                     b[l].state, b[l].work, 7, s))
			return -1;
	for (int l = nl - 1; l >= 0; l--)
		if (precc_rt_backward(rt, l, m, b[l].x, b[l].w, b[l].dy, b[l].dx, b[l].dw,
		                      NULL, b[l].saved, b[l].state, b[l].work, 7, s))
			return -1;
	for (int l = 0; l < nl; l++)
		if (precc_rt_commit(rt, l, m, b[l].saved, b[l].state, s) < 0)
			return -1;
	return 0;
}

/* the outputs and state of every layer, downloaded into one host block */
static char *snapshot(precc_rt *rt, Bufs *b, int nl, long m, size_t *len)
{
	size_t n = 0, at = 0;
	for (int l = 0; l < nl; l++) {
		precc_layer_sizes *z = &b[l].sz;
		n += (size_t)(m * z->n + m * z->k + z->n * z->k) * 4 + z->state_bytes;
	}
	char *h = calloc(1, n);
	for (int l = 0; l < nl; l++) {
		precc_layer_sizes *z = &b[l].sz;
		size_t ys = (size_t)(m * z->n) * precc_interp_elem_bytes(z->y_format);
		size_t xs = (size_t)(m * z->k) * precc_interp_elem_bytes(z->dx_format);
		size_t ws = (size_t)(z->n * z->k) * precc_interp_elem_bytes(z->dw_format);
		precc_rt_download(rt, h + at, b[l].y, ys); at += ys;
		precc_rt_download(rt, h + at, b[l].dx, xs); at += xs;
		precc_rt_download(rt, h + at, b[l].dw, ws); at += ws;
		precc_rt_download(rt, h + at, b[l].state, z->state_bytes); at += z->state_bytes;
	}
	*len = at;
	return h;
}

int main(int argc, char **argv)
{
	char why[512];
	CUdevice dev;
	CUcontext ctx;
	CUstream s;
	long m = 256;

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: test_gpu_layer DIR [NLAYERS]\n");
		return 2;
	}
	if (load(why, sizeof why) || p_cuInit(0) || p_cuDeviceGet(&dev, 0)) {
		printf("SKIP: no usable CUDA driver or device: %s\n", *why ? why : "cuInit/cuDeviceGet failed");
		return SKIP_CODE;
	}
	/* the primary context, current here: precc_rt uses it */
	CHECK(p_cuDevicePrimaryCtxRetain(&ctx, dev) == 0 && p_cuCtxSetCurrent(ctx) == 0);
	CHECK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == 0);
	precc_rt *rt = precc_rt_open(argv[1], PRECC_BACKEND_CUDA, why, sizeof why);
	if (!rt) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	int nl = precc_rt_layer_count(rt);
	if (argc == 3 && atoi(argv[2]) > 0 && atoi(argv[2]) < nl)
		nl = atoi(argv[2]);
	Bufs *b = calloc((size_t)nl, sizeof *b);
	for (int l = 0; l < nl; l++) {
		precc_layer_sizes *z = &b[l].sz;
		CHECK(precc_rt_layer_sizes(rt, l, m, z) == 0);
		b[l].x = upload_random(rt, z->x_format, m * z->k, 4.0f, 1 + (uint64_t)l);
		b[l].w = upload_random(rt, z->w_format, z->n * z->k, 0.1f, 100 + (uint64_t)l);
		b[l].dy = upload_random(rt, z->dy_format, m * z->n, 0.01f, 200 + (uint64_t)l);
		b[l].y = precc_rt_malloc(rt, (size_t)(m * z->n) * 4);
		b[l].dx = precc_rt_malloc(rt, (size_t)(m * z->k) * 4);
		b[l].dw = precc_rt_malloc(rt, (size_t)(z->n * z->k) * 4);
		b[l].saved = precc_rt_malloc(rt, z->saved_bytes);
		b[l].state = precc_rt_malloc(rt, z->state_bytes);
		b[l].work = precc_rt_malloc(rt, z->workspace_bytes);
		if (!b[l].x || !b[l].w || !b[l].dy || !b[l].y || !b[l].dx || !b[l].dw ||
		    !b[l].saved || !b[l].state || !b[l].work) {
			fprintf(stderr, "layer %d: %s\n", l, precc_rt_last_error());
			return 1;
		}
		CHECK(precc_rt_layer_state_init(rt, l, b[l].state) == 0);
	}
	/* eager */
	CHECK(step_all(rt, b, nl, m, s) == 0 && p_cuStreamSynchronize(s) == 0);
	size_t na, ng;
	char *eager = snapshot(rt, b, nl, m, &na);
	/* the same step from a fresh state, captured and replayed */
	for (int l = 0; l < nl; l++)
		CHECK(precc_rt_layer_state_init(rt, l, b[l].state) == 0);
	CUgraph g = NULL;
	CUgraphExec ge = NULL;
	CHECK(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == 0);
	int rc = step_all(rt, b, nl, m, s);
	if (rc)
		fprintf(stderr, "inside the capture: %s\n", precc_rt_last_error());
	CUresult ec = p_cuStreamEndCapture(s, &g);
	CHECK(rc == 0 && ec == 0 && g);
	CHECK(g && p_cuGraphInstantiateWithFlags(&ge, g, 0) == 0);
	CHECK(ge && p_cuGraphLaunch(ge, s) == 0 && p_cuStreamSynchronize(s) == 0);
	char *graph = snapshot(rt, b, nl, m, &ng);
	CHECK(na == ng && memcmp(eager, graph, na) == 0);
	printf("%d layers of %s: forward + backward + commit captured in one CUDA graph; "
	       "replayed, %zu bytes of y, dX, dW and state equal the eager run's\n", nl,
	       argv[1], na);
	if (ge)
		p_cuGraphExecDestroy(ge);
	if (g)
		p_cuGraphDestroy(g);
	free(eager);
	free(graph);
	for (int l = 0; l < nl; l++) {
		void *p[] = {b[l].x, b[l].w, b[l].y, b[l].dy, b[l].dx, b[l].dw, b[l].saved, b[l].state, b[l].work};
		for (int i = 0; i < 9; i++)
			precc_rt_free(rt, p[i]);
	}
	free(b);
	precc_rt_close(rt);
	p_cuStreamDestroy(s);
	return finish("runtime.gpu.layer");
}
