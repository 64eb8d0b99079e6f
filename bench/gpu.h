/*
 * gpu.h — what the GPU benches share: the driver, dlopen'ed and resolved
 * (gpu_open), and how work is timed (DESIGN.md, "Measuring"): WARMUP runs,
 * then REPS runs each between two events on the default stream, and the
 * median (timed). The includer defines BENCH (its name, for messages),
 * REPS, WARMUP and FUNCS(X), the driver calls it uses: at least cuInit,
 * cuDeviceGet, cuDeviceGetName, cuDevicePrimaryCtxRetain, cuCtxSetCurrent,
 * cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime and
 * cuGetErrorName. Here: their table drv, the events ev[REPS + 1], and
 * CK(call), which reports a failed call and exits.
 */
#ifndef PRECC_BENCH_GPU_H
#define PRECC_BENCH_GPU_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define SYM_(f) #f
#define SYM(f) SYM_(f)
static struct {
#define FIELD(f) __typeof__(&f) f;
	FUNCS(FIELD)
#undef FIELD
} drv;

static CUevent ev[REPS + 1];

static const char *ename(CUresult r)
{
	const char *s = NULL;
	drv.cuGetErrorName(r, &s);
	return s ? s : "?";
}

#define CK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
	fprintf(stderr, BENCH ": %s: %s\n", #call, ename(r_)); exit(1); } } while (0)

/* The driver ($PRECC_LIBCUDA or libcuda.so.1), device 0's primary context
 * made current (precc_rt reuses it), the events made; the device and its
 * name in *dev and name. 0, or 77 with a SKIP line when there is no usable
 * GPU. */
static int gpu_open(CUdevice *dev, char *name, int n)
{
	const char *lib = getenv("PRECC_LIBCUDA");
	void *h = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CUcontext ctx;

	if (!h) {
		printf(BENCH ": SKIP: no CUDA driver (%s)\n", dlerror());
		return 77;
	}
#define RESOLVE(f) if (!(*(void **)&drv.f = dlsym(h, SYM(f)))) { \
	printf(BENCH ": SKIP: the driver has no %s\n", SYM(f)); return 77; }
	FUNCS(RESOLVE)
#undef RESOLVE
	if (drv.cuInit(0) != CUDA_SUCCESS || drv.cuDeviceGet(dev, 0) != CUDA_SUCCESS) {
		printf(BENCH ": SKIP: cuInit or cuDeviceGet failed: no usable GPU\n");
		return 77;
	}
	CK(drv.cuDeviceGetName(name, n, *dev));
	CK(drv.cuDevicePrimaryCtxRetain(&ctx, *dev));
	CK(drv.cuCtxSetCurrent(ctx));
	for (int i = 0; i <= REPS; i++)
		CK(drv.cuEventCreate(&ev[i], CU_EVENT_DEFAULT));
	return 0;
}

static int cmp_ms(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* Median milliseconds of one repetition of what(arg). */
static __attribute__((unused)) float timed(void (*what)(void *), void *arg)
{
	float ms[REPS];

	for (int i = 0; i < WARMUP; i++)
		what(arg);
	CK(drv.cuEventRecord(ev[0], NULL));
	for (int i = 0; i < REPS; i++) {
		what(arg);
		CK(drv.cuEventRecord(ev[i + 1], NULL));
	}
	CK(drv.cuEventSynchronize(ev[REPS]));
	for (int i = 0; i < REPS; i++)
		CK(drv.cuEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
	qsort(ms, REPS, sizeof *ms, cmp_ms);
	return (ms[REPS / 2 - 1] + ms[REPS / 2]) / 2;
}

#endif
