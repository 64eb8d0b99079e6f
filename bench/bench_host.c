/*
 * bench_host.c — the host time precc_rt spends per layer of a training
 * step (issue 31, "Host overhead"): precc_rt_forward of every layer, then
 * precc_rt_backward in reverse order, then precc_rt_commit of each (and,
 * apart, precc_rt_bulk_commit_run), on the cuda backend, over STEPS steps:
 *
 *   bench_host DIR [M] [STEPS]     (default M 1024, 30 steps after 3 warm-ups)
 *
 * With PRECC_LIBCUDA naming tests/runtime's fake driver (libprecc_fake_cuda
 * _count.so, which knows pointers inside an allocation) it runs on any
 * machine: the fake computes nothing, so what is timed is precc_rt's own
 * work (argument checks, params, grids) plus the fake's. The fake's share
 * is shown two ways: the same steps on a second runtime whose modules the
 * fake does not match to FAKE_CUDA_MANIFEST (no launch checks), and the
 * fake's floor per driver call (cuLaunchKernel of no function, which it
 * only records, and cuPointerGetAttribute), timed alone.
 *
 * Each phase is timed in thread CPU time (CLOCK_THREAD_CPUTIME_ID, what
 * other processes on a shared machine do not inflate) and wall time;
 * per layer = phase time / layers; median and min over the steps. One
 * workspace serves every call; x, w, y, dy, dx, dw are one buffer each,
 * sized for the largest layer, and one saved region serves all layers
 * (nothing is computed, so sharing it changes no host work); the state is
 * the model's one buffer (precc_rt_model_state_bytes).
 *
 * On a real driver the same program times the same calls (kernels run;
 * CPU time stays the host's share). Built by CMake when cuda.h exists.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "precc/interp.h"
#include "precc/precc_rt.h"

#define BENCH "bench_host"
#define REPS 1
#define WARMUP 0
#define MAXSTEPS 1000
#define FLOOR_CALLS 200000

#define FUNCS(X) X(cuInit) X(cuDeviceGet) X(cuDeviceGetName) \
	X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuEventCreate) \
	X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuGetErrorName) \
	X(cuLaunchKernel) X(cuPointerGetAttribute) X(cuStreamSynchronize) X(cuMemcpyDtoDAsync)
#include "gpu.h"

#define RT(call) do { if ((call) < 0) { fprintf(stderr, BENCH ": %s: %s\n", #call, \
	precc_rt_last_error()); exit(1); } } while (0)

enum { FWD, BWD, COMMIT, BULK, NPHASE };
static const char *phase_name[NPHASE] = {"forward", "backward", "commit", "bulk commit"};

typedef struct Model {
	precc_rt *rt;
	int nl;
	long m;
	void *x, *w, *y, *dy, *dx, *dw, *saved, *work, *state, *table;
	void **saved_of, **state_of, **state_at;
	int *layers;
	precc_rt_bulk_commit *bulk;
} Model;

typedef struct Clock { struct timespec cpu, wall; } Clock;

static Clock now(void)
{
	Clock c;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c.cpu);
	clock_gettime(CLOCK_MONOTONIC, &c.wall);
	return c;
}

static double us(struct timespec a, struct timespec b)
{
	return (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static long launches(precc_rt *rt)
{
	precc_kernel_info ki;
	long n = 0;
	for (int k = 0; k < precc_rt_kernel_count(rt); k++)
		if (precc_rt_kernel_info(rt, k, &ki) == 0)
			n += ki.launches;
	return n;
}

static void *dev_alloc(precc_rt *rt, size_t bytes)
{
	void *p = precc_rt_malloc(rt, bytes ? bytes : 16);
	if (!p) {
		fprintf(stderr, BENCH ": cannot allocate %zu bytes: %s\n", bytes,
		        precc_rt_last_error());
		exit(1);
	}
	return p;
}

static size_t max_z(size_t a, size_t b) { return a > b ? a : b; }

/* Buffers for every layer of rt at m, allocated once. */
static void model_setup(Model *md, precc_rt *rt, long m)
{
	size_t x = 0, w = 0, y = 0, saved = 0, work = 0;
	md->rt = rt;
	md->m = m;
	md->nl = precc_rt_layer_count(rt);
	for (int l = 0; l < md->nl; l++) {
		precc_layer_sizes z;
		RT(precc_rt_layer_sizes(rt, l, m, &z));
		size_t xb = max_z(precc_interp_elem_bytes(z.x_format), precc_interp_elem_bytes(z.dx_format));
		size_t wb = max_z(precc_interp_elem_bytes(z.w_format), precc_interp_elem_bytes(z.dw_format));
		size_t yb = max_z(precc_interp_elem_bytes(z.y_format), precc_interp_elem_bytes(z.dy_format));
		x = max_z(x, (size_t)(m * z.k) * xb);
		w = max_z(w, (size_t)(z.n * z.k) * wb);
		y = max_z(y, (size_t)(m * z.n) * yb);
		saved = max_z(saved, z.saved_bytes);
		work = max_z(work, z.workspace_bytes);
	}
	md->x = dev_alloc(rt, x);
	md->dx = dev_alloc(rt, x);
	md->w = dev_alloc(rt, w);
	md->dw = dev_alloc(rt, w);
	md->y = dev_alloc(rt, y);
	md->dy = dev_alloc(rt, y);
	md->saved = dev_alloc(rt, saved);
	md->work = dev_alloc(rt, work);
	md->state = dev_alloc(rt, precc_rt_model_state_bytes(rt));
	RT(precc_rt_model_state_init(rt, md->state));
	md->saved_of = calloc((size_t)md->nl, sizeof *md->saved_of);
	md->state_of = calloc((size_t)md->nl, sizeof *md->state_of);
	md->layers = calloc((size_t)md->nl, sizeof *md->layers);
	md->state_at = calloc((size_t)md->nl, sizeof *md->state_at);
	for (int l = 0; l < md->nl; l++)
		md->state_at[l] = (char *)md->state + precc_rt_model_state_offset(rt, l);
	int n = 0;
	for (int l = 0; l < md->nl; l++) {
		precc_layer_sizes z;
		RT(precc_rt_layer_sizes(rt, l, m, &z));
		if (!z.has_state)
			continue;
		md->layers[n] = l;
		md->saved_of[n] = md->saved;
		md->state_of[n++] = (char *)md->state + precc_rt_model_state_offset(rt, l);
	}
	size_t tb = n ? precc_rt_bulk_commit_table_bytes(rt, n, md->layers) : 0;
	if (tb) {
		md->table = dev_alloc(rt, tb);
		md->bulk = precc_rt_bulk_commit_new(rt, n, md->layers, m, md->saved_of, md->state_of,
		                                    md->table, tb);
		if (!md->bulk) {
			fprintf(stderr, BENCH ": precc_rt_bulk_commit_new: %s\n", precc_rt_last_error());
			exit(1);
		}
	}
}

/* layer l's state in the model's buffer (offsets looked up once, as a
 * trainer would) */
static void *state_of(Model *md, int l) { return md->state_at[l]; }

/* One training step's phases; cpu[p], wall[p] in µs. */
static void step(Model *md, double cpu[NPHASE], double wall[NPHASE])
{
	precc_rt *rt = md->rt;
	long m = md->m;
	Clock t0 = now();
	for (int l = 0; l < md->nl; l++)
		RT(precc_rt_forward(rt, l, m, md->x, md->w, NULL, md->y, md->saved, state_of(md, l),
		                    md->work, 7, NULL));
	Clock t1 = now();
	for (int l = md->nl - 1; l >= 0; l--)
		RT(precc_rt_backward(rt, l, m, md->x, md->w, md->dy, md->dx, md->dw, NULL, md->saved,
		                     state_of(md, l), md->work, 7, NULL));
	Clock t2 = now();
	for (int l = 0; l < md->nl; l++)
		RT(precc_rt_commit(rt, l, m, md->saved, state_of(md, l), NULL));
	Clock t3 = now();
	if (md->bulk)
		RT(precc_rt_bulk_commit_run(rt, md->bulk, NULL));
	Clock t4 = now();
	Clock c[] = {t0, t1, t2, t3, t4};
	for (int p = 0; p < NPHASE; p++) {
		cpu[p] = us(c[p].cpu, c[p + 1].cpu);
		wall[p] = us(c[p].wall, c[p + 1].wall);
	}
}

typedef struct Result { double cpu_med[NPHASE], cpu_min[NPHASE], wall_med[NPHASE],
	wall_min[NPHASE], step_med, step_min, step_wall_med; long launch[NPHASE]; } Result;

static void run(Model *md, int steps, Result *r)
{
	static double cpu[MAXSTEPS][NPHASE], wall[MAXSTEPS][NPHASE];
	double v[MAXSTEPS], s[MAXSTEPS], sw[MAXSTEPS];
	for (int i = 0; i < 3; i++)
		step(md, cpu[0], wall[0]);
	RT(precc_rt_sync(md->rt, NULL));
	for (int i = 0; i < steps; i++)
		step(md, cpu[i], wall[i]);
	RT(precc_rt_sync(md->rt, NULL));
	for (int p = 0; p < NPHASE; p++) {
		for (int i = 0; i < steps; i++)
			v[i] = cpu[i][p] / md->nl;
		r->cpu_med[p] = median(v, steps);
		r->cpu_min[p] = v[0];
		for (int i = 0; i < steps; i++)
			v[i] = wall[i][p] / md->nl;
		r->wall_med[p] = median(v, steps);
		r->wall_min[p] = v[0];
	}
	for (int i = 0; i < steps; i++) {
		s[i] = (cpu[i][FWD] + cpu[i][BWD] + cpu[i][COMMIT]) / md->nl;
		sw[i] = (wall[i][FWD] + wall[i][BWD] + wall[i][COMMIT]) / md->nl;
	}
	r->step_med = median(s, steps);
	r->step_min = s[0];
	r->step_wall_med = median(sw, steps);
	/* launches of one step, phase by phase */
	long l0 = launches(md->rt);
	for (int l = 0; l < md->nl; l++)
		RT(precc_rt_forward(md->rt, l, md->m, md->x, md->w, NULL, md->y, md->saved,
		                    state_of(md, l), md->work, 7, NULL));
	long l1 = launches(md->rt);
	for (int l = md->nl - 1; l >= 0; l--)
		RT(precc_rt_backward(md->rt, l, md->m, md->x, md->w, md->dy, md->dx, md->dw, NULL,
		                     md->saved, state_of(md, l), md->work, 7, NULL));
	long l2 = launches(md->rt);
	for (int l = 0; l < md->nl; l++)
		RT(precc_rt_commit(md->rt, l, md->m, md->saved, state_of(md, l), NULL));
	long l3 = launches(md->rt);
	r->launch[FWD] = l1 - l0;
	r->launch[BWD] = l2 - l1;
	r->launch[COMMIT] = l3 - l2;
	r->launch[BULK] = md->bulk ? precc_rt_bulk_commit_launches(md->bulk) : 0;
	RT(precc_rt_sync(md->rt, NULL));
}

static void report(const char *what, const Model *md, const Result *r)
{
	printf("%s: %d layers, M=%ld\n", what, md->nl, md->m);
	printf("  %-12s %10s %10s %10s %10s %9s\n", "phase", "cpu med", "cpu min", "wall med",
	       "wall min", "launches");
	for (int p = 0; p < NPHASE; p++) {
		if (p == BULK && !md->bulk)
			continue;
		printf("  %-12s %7.2f us %7.2f us %7.2f us %7.2f us %9.2f%s\n", phase_name[p],
		       r->cpu_med[p], r->cpu_min[p], r->wall_med[p], r->wall_min[p],
		       p == BULK ? (double)r->launch[p] : (double)r->launch[p] / md->nl,
		       p == BULK ? " in all" : "");
	}
	printf("  %-12s %7.2f us %7.2f us %7.2f us %10s %9.2f   <- per layer, target 5 us\n",
	       "fwd+bwd+com", r->step_med, r->step_min, r->step_wall_med, "",
	       (double)(r->launch[FWD] + r->launch[BWD] + r->launch[COMMIT]) / md->nl);
	if (md->bulk)
		printf("  %-12s %7.2f us (forward + backward + bulk commit)\n", "fwd+bwd+bulk",
		       r->cpu_med[FWD] + r->cpu_med[BWD] + r->cpu_med[BULK]);
}

/* ns of CPU per call of the driver's cuLaunchKernel of no function (the
 * fake records it, checks nothing) and cuPointerGetAttribute of p. */
static void driver_floor(void *p, double *launch_ns, double *ptr_ns)
{
	double v[7];
	void *params[1] = {NULL};
	for (int rep = 0; rep < 7; rep++) {
		Clock a = now();
		for (int i = 0; i < FLOOR_CALLS; i++)
			drv.cuLaunchKernel(NULL, 1, 1, 1, 128, 1, 1, 0, NULL, params, NULL);
		Clock b = now();
		v[rep] = us(a.cpu, b.cpu) * 1e3 / FLOOR_CALLS;
	}
	*launch_ns = median(v, 7);
	for (int rep = 0; rep < 7; rep++) {
		unsigned type;
		Clock a = now();
		for (int i = 0; i < FLOOR_CALLS; i++)
			drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
			                          (CUdeviceptr)(uintptr_t)p);
		Clock b = now();
		v[rep] = us(a.cpu, b.cpu) * 1e3 / FLOOR_CALLS;
	}
	*ptr_ns = median(v, 7);
}

/* µs of CPU per layer for the driver's cuMemcpyDtoDAsync of each state
 * buffer (what precc_rt_commit copies, next over state): the fake's
 * memmove, a real driver's enqueue. The sizes are looked up first. */
static double copy_floor(Model *md)
{
	double v[7];
	size_t n = 0, *bytes = NULL;
	for (int l = 0; l < md->nl; l++)
		for (int i = 0; i < precc_rt_buffer_count(md->rt, l); i++) {
			precc_buffer_info bi;
			if (precc_rt_buffer_info(md->rt, l, i, md->m, &bi) == 0 &&
			    !strcmp(bi.role, "state")) {
				bytes = realloc(bytes, (n + 1) * sizeof *bytes);
				bytes[n++] = bi.bytes;
			}
		}
	for (int rep = 0; rep < 7; rep++) {
		Clock a = now();
		for (size_t c = 0; c < n; c++)
			drv.cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)md->work,
			                      (CUdeviceptr)(uintptr_t)md->dw, bytes[c], NULL);
		Clock b = now();
		v[rep] = us(a.cpu, b.cpu) / md->nl;
	}
	free(bytes);
	return median(v, 7);
}

int main(int argc, char **argv)
{
	char name[256], why[4096];
	CUdevice dev;
	const char *dir = argc > 1 ? argv[1] : NULL;
	long m = argc > 2 ? atol(argv[2]) : 1024;
	int steps = argc > 3 ? atoi(argv[3]) : 30;
	const char *lib = getenv("PRECC_LIBCUDA");
	int fake = lib && strstr(lib, "fake");

	if (!dir || m < 1 || steps < 1 || steps > MAXSTEPS) {
		fprintf(stderr, "usage: bench_host DIR [M] [STEPS]  (PRECC_LIBCUDA=fake driver)\n");
		return 2;
	}
	int rc = gpu_open(&dev, name, sizeof name);
	if (rc)
		return rc;
	/* the fake checks the launches of modules it can match to the manifest */
	if (fake)
		setenv("FAKE_CUDA_MANIFEST", dir, 1);
	precc_rt *rt = precc_rt_open(dir, PRECC_BACKEND_CUDA, why, sizeof why);
	if (!rt) {
		fprintf(stderr, BENCH ": %s\n", why);
		return 1;
	}
	precc_artifact_info ai;
	precc_rt_artifact_info(rt, &ai);
	printf("bench_host: %s x %s (%s), %s on %s%s; %d steps after 3 warm-ups\n",
	       ai.recipe_name, ai.model_name, ai.target, dir, name,
	       fake ? " (the fake driver)" : "", steps);
	Model md = {0};
	Result r;
	model_setup(&md, rt, m);
	run(&md, steps, &r);
	report(fake ? "fake driver, launches checked against the manifest" : "driver", &md, &r);
	if (fake) {
		/* a second runtime whose modules the fake does not check */
		unsetenv("FAKE_CUDA_MANIFEST");
		precc_rt *rt2 = precc_rt_open(dir, PRECC_BACKEND_CUDA, why, sizeof why);
		if (!rt2) {
			fprintf(stderr, BENCH ": %s\n", why);
			return 1;
		}
		Model m2 = md;
		Result r2;
		m2.rt = rt2;
		m2.bulk = NULL;
		run(&m2, steps, &r2);
		report("fake driver, launches not checked", &m2, &r2);
		double lns, pns;
		driver_floor(md.x, &lns, &pns);
		double nlaunch = (double)(r2.launch[FWD] + r2.launch[BWD] + r2.launch[COMMIT]) / md.nl;
		double cp = copy_floor(&m2);
		printf("fake driver floor: cuLaunchKernel %.0f ns, cuPointerGetAttribute %.0f ns "
		       "per call; the commit's state copies %.2f us per layer;\n  unchecked fwd+bwd+commit less %.2f launches x floor "
		       "and the copies: %.2f us per layer\n", lns, pns, cp, nlaunch,
		       r2.step_med - nlaunch * lns / 1e3 - cp);
		precc_rt_close(rt2);
	}
	if (md.bulk)
		precc_rt_bulk_commit_free(md.bulk);
	precc_rt_close(rt);
	return 0;
}
