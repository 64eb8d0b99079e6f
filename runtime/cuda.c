/*
 * cuda.c — the CUDA driver layer: dlopen libcuda.so.1 (or $PRECC_LIBCUDA),
 * resolve every entry point once, choose a context, load modules with the
 * JIT logs, launch, move memory, and report every driver error by name.
 *
 * Symbols are resolved under the versioned names cuda.h maps the API to
 * (cuMemAlloc → cuMemAlloc_v2, ...): DRIVER_FUNCS lists the API names and
 * SYM() stringifies them after cuda.h's #defines have expanded them, so
 * the table follows the header we compile against. Each pointer has the
 * exact type cuda.h declares (__typeof__, GCC and Clang).
 *
 * Context policy: reuse the context current on the opening thread, else
 * retain the primary context of $PRECC_DEVICE (default 0). Every call
 * makes that context current only for its duration (push/pop, skipped
 * when it is current already), so the caller's thread state is untouched.
 *
 * Floor 3 (backend.h) of the runtime; base.h lists the floors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"

#ifndef PRECC_HAVE_CUDA_H

int rt_cuda_open(precc_rt *rt)
{
	rt_error("cuda: this precc_rt was built without cuda.h, so it has the "
	         "cpu backend only");
	return -1;
}

void rt_cuda_close(precc_rt *rt) {}

int rt_cuda_is_device_ptr(const void *p) { return 0; }

#else

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#define DRIVER_FUNCS(X) \
	X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) \
	X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) \
	X(cuDeviceGetAttribute) \
	X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxPushCurrent) \
	X(cuCtxPopCurrent) X(cuCtxGetDevice) \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) \
	X(cuModuleLoadDataEx) X(cuModuleGetFunction) X(cuModuleUnload) \
	X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel) \
	X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) \
	X(cuMemsetD8) X(cuStreamSynchronize) X(cuPointerGetAttribute) \
	X(cuMemsetD8Async) X(cuMemcpyDtoDAsync) X(cuLaunchCooperativeKernel) \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuTensorMapEncodeTiled) \
	X(cuStreamGetCtx) X(cuPointerGetAttributes) \
	X(cuMemAllocHost) X(cuMemFreeHost) X(cuMemcpyDtoHAsync)

/* Entry points a driver may lack (CUDA 12.0's thread-block clusters): a
 * missing one is NULL, and only a kernel that needs it is refused, at load
 * (rt_cuda_kernel_cluster) */
#define DRIVER_FUNCS_OPTIONAL(X) \
	X(cuLaunchKernelEx) X(cuOccupancyMaxActiveClusters)

#define SYM_(f) #f
#define SYM(f) SYM_(f)

static struct driver {
	void *lib;
#define FIELD(f) __typeof__(&f) f;
	DRIVER_FUNCS(FIELD)
	DRIVER_FUNCS_OPTIONAL(FIELD)
#undef FIELD
} drv;

static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;

/* Loads and resolves the driver once per process; a failure is not
 * remembered, so a later open tries again. */
static int driver_load(void)
{
	const char *path = getenv("PRECC_LIBCUDA");
	int from_env = path && *path;
	struct driver d = {0};
	void *sym;

	pthread_mutex_lock(&drv_lock);
	if (drv.lib) {
		pthread_mutex_unlock(&drv_lock);
		return 0;
	}
	if (!from_env)
		path = "libcuda.so.1";
	dlerror();
	d.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!d.lib) {
		const char *e = dlerror();
		if (from_env)
			rt_error("cuda: cannot load '%s' (from PRECC_LIBCUDA): %s", path,
			         e ? e : "unknown dlopen error");
		else
			rt_error("cuda: cannot load %s: %s", path,
			         e ? e : "unknown dlopen error");
		pthread_mutex_unlock(&drv_lock);
		return -1;
	}
#define RESOLVE(f) \
	sym = dlsym(d.lib, SYM(f)); \
	if (!sym) { \
		rt_error("cuda: %s has no %s (a driver older than this precc's " \
		         "cuda.h, %d.%d?)", path, SYM(f), CUDA_VERSION / 1000, \
		         CUDA_VERSION % 1000 / 10); \
		dlclose(d.lib); \
		pthread_mutex_unlock(&drv_lock); \
		return -1; \
	} \
	memcpy(&d.f, &sym, sizeof sym);
	DRIVER_FUNCS(RESOLVE)
#undef RESOLVE
#define RESOLVE_OPTIONAL(f) \
	sym = dlsym(d.lib, SYM(f)); \
	memcpy(&d.f, &sym, sizeof sym);
	DRIVER_FUNCS_OPTIONAL(RESOLVE_OPTIONAL)
#undef RESOLVE_OPTIONAL
	drv = d;
	pthread_mutex_unlock(&drv_lock);
	return 0;
}

/* Sets "cuda: fn: NAME (description) context" and returns -1. */
static int fail(CUresult r, const char *fn, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(CUresult r, const char *fn, const char *fmt, ...)
{
	const char *name = NULL, *desc = NULL;
	char ctx[RT_ERR_MAX], code[32];
	va_list ap;

	if (drv.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) {
		snprintf(code, sizeof code, "CUresult %d", (int)r);
		name = code;
	}
	if (drv.cuGetErrorString(r, &desc) != CUDA_SUCCESS || !desc)
		desc = "no description";
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof ctx, fmt, ap);
	va_end(ap);
	rt_error("cuda: %s: %s (%s)%s", fn, name, desc, ctx);
	return -1;
}

/* CALL(f, (args), "context fmt", ...): 0, or -1 with the error set. */
#define CALL(f, args, ...) \
	((r = drv.f args) == CUDA_SUCCESS ? 0 : fail(r, #f, __VA_ARGS__))

static int enter(precc_rt *rt, int *pushed)
{
	CUcontext cur = NULL;
	CUresult r;

	*pushed = 0;
	if (!drv.lib || !rt->ctx) {
		rt_error("cuda: this runtime is not on the cuda backend (it is %s)",
		         precc_backend_name(rt->backend));
		return -1;
	}
	if (CALL(cuCtxGetCurrent, (&cur), "%s", ""))
		return -1;
	if (cur == rt->ctx)
		return 0;
	if (CALL(cuCtxPushCurrent, (rt->ctx), "%s", ""))
		return -1;
	*pushed = 1;
	return 0;
}

static void leave(precc_rt *rt, int pushed)
{
	CUcontext popped;

	if (pushed)
		drv.cuCtxPopCurrent(&popped);
}

static int device_index(int count, int *index)
{
	const char *s = getenv("PRECC_DEVICE");
	char *end;
	long d;

	*index = 0;
	if (!s || !*s)
		return 0;
	d = strtol(s, &end, 10);
	if (*end || d < 0 || d >= count) {
		rt_error("cuda: PRECC_DEVICE='%s' is not a device index (this "
		         "machine has %d device%s: 0..%d)", s, count,
		         count == 1 ? "" : "s", count - 1);
		return -1;
	}
	*index = (int)d;
	return 0;
}

int rt_cuda_open(precc_rt *rt)
{
	CUcontext cur = NULL;
	CUresult r;
	int count = 0, index;

	if (driver_load())
		return -1;
	if (CALL(cuInit, (0), "%s", ""))
		return -1;
	if (CALL(cuDeviceGetCount, (&count), "%s", ""))
		return -1;
	if (count == 0) {
		rt_error("cuda: no CUDA device (the driver loaded, "
		         "cuDeviceGetCount found 0)");
		return -1;
	}
	if (CALL(cuCtxGetCurrent, (&cur), "%s", ""))
		return -1;
	if (cur) {
		rt->ctx = cur;
		if (CALL(cuCtxGetDevice, (&rt->dev), " of the current context"))
			return -1;
	} else {
		if (device_index(count, &index))
			return -1;
		if (CALL(cuDeviceGet, (&rt->dev, index), " for device %d", index))
			return -1;
		if (CALL(cuDevicePrimaryCtxRetain, (&rt->ctx, rt->dev),
		         " for device %d", index))
			return -1;
		rt->primary = 1;
	}
	if (CALL(cuDeviceGetName, (rt->dev_name, sizeof rt->dev_name, rt->dev),
	         "%s", "") ||
	    CALL(cuDeviceGetAttribute, (&rt->sm_major,
	         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, rt->dev), "%s", "") ||
	    CALL(cuDeviceGetAttribute, (&rt->sm_minor,
	         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, rt->dev), "%s", "") ||
	    CALL(cuDeviceGetAttribute, (&rt->sm_count,
	         CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, rt->dev), "%s", "") ||
	    CALL(cuDeviceGetAttribute, (&rt->smem_optin,
	         CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, rt->dev),
	         "%s", "")) {
		rt_cuda_close(rt);
		return -1;
	}
	rt->dev_name[sizeof rt->dev_name - 1] = 0;
	return 0;
}

void rt_cuda_close(precc_rt *rt)
{
	if (rt->primary)
		drv.cuDevicePrimaryCtxRelease(rt->dev);
	rt->primary = 0;
	rt->ctx = NULL;
}

int rt_cuda_module_load(precc_rt *rt, const void *image, const char *what,
                        CUmodule *mod)
{
	char *err;   /* the JIT error log, heap: RT_JIT_LOG bytes */
	CUjit_option opt[] = {
		CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
		CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
		CU_JIT_LOG_VERBOSE,
	};
	void *val[5];
	CUresult r;
	int pushed, rc;

	err = calloc(1, RT_JIT_LOG);
	if (!err) {
		rt_error("cuda: out of memory loading %s", what);
		return -1;
	}
	rt->jit_info[0] = 0;
	val[0] = err;
	val[1] = (void *)(uintptr_t)RT_JIT_LOG;
	val[2] = rt->jit_info;
	val[3] = (void *)(uintptr_t)sizeof rt->jit_info;
	val[4] = (void *)(uintptr_t)1;
	if (enter(rt, &pushed)) {
		free(err);
		return -1;
	}
	r = drv.cuModuleLoadDataEx(mod, image, 5, opt, val);
	leave(rt, pushed);
	err[RT_JIT_LOG - 1] = 0;
	rt->jit_info[sizeof rt->jit_info - 1] = 0;
	rc = r == CUDA_SUCCESS ? 0
	     : fail(r, "cuModuleLoadDataEx", " while loading %s%s%s", what,
	            *err ? "\n" : "", err);
	free(err);
	return rc;
}

void rt_cuda_module_unload(precc_rt *rt, CUmodule mod)
{
	int pushed;

	if (mod && enter(rt, &pushed) == 0) {
		drv.cuModuleUnload(mod);
		leave(rt, pushed);
	}
}

int rt_cuda_kernel(precc_rt *rt, CUmodule mod, const char *name, rt_kernel *k)
{
	CUresult r;
	int pushed, rc;

	memset(k, 0, sizeof *k);
	snprintf(k->name, sizeof k->name, "%s", name);
	if (enter(rt, &pushed))
		return -1;
	rc = CALL(cuModuleGetFunction, (&k->fn, mod, name),
	          " looking up kernel '%s'", name) ||
	     CALL(cuFuncGetAttribute, (&k->num_regs, CU_FUNC_ATTRIBUTE_NUM_REGS,
	          k->fn), " (NUM_REGS) of kernel '%s'", name) ||
	     CALL(cuFuncGetAttribute, (&k->local_bytes,
	          CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k->fn),
	          " (LOCAL_SIZE_BYTES) of kernel '%s'", name) ||
	     CALL(cuFuncGetAttribute, (&k->max_dyn_smem,
	          CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->fn),
	          " (MAX_DYNAMIC_SHARED_SIZE_BYTES) of kernel '%s'", name) ? -1 : 0;
	leave(rt, pushed);
	return rc;
}

int rt_cuda_kernel_resident(precc_rt *rt, rt_kernel *k, int threads,
                            unsigned smem)
{
	CUresult r;
	int pushed, rc;

	if (enter(rt, &pushed))
		return -1;
	rc = CALL(cuOccupancyMaxActiveBlocksPerMultiprocessor, (&k->resident,
	          k->fn, threads, smem), " of kernel '%s' (%d threads, %u bytes of "
	          "dynamic shared memory)", k->name, threads, smem);
	leave(rt, pushed);
	return rc;
}

int rt_cuda_kernel_reserve_smem(precc_rt *rt, rt_kernel *k, unsigned bytes)
{
	CUresult r;
	int pushed, rc;

	if ((long)bytes <= k->max_dyn_smem)
		return 0;
	if (enter(rt, &pushed))
		return -1;
	rc = CALL(cuFuncSetAttribute, (k->fn,
	          CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes),
	          " raising kernel '%s' dynamic shared memory to %u bytes (the "
	          "device allows blocks up to %d)", k->name, bytes, rt->smem_optin);
	leave(rt, pushed);
	if (rc == 0)
		k->max_dyn_smem = (int)bytes;
	return rc;
}

/* CUDA Driver API, cuTensorMapEncodeTiled: rank 2, dims and boxes inner
 * first, the row stride in bytes (rank - 1 of them), element strides 1,
 * no interleave, L2 promotion of 256 B, out-of-bounds elements zero
 * (FLOAT_OOB_FILL_NONE). The data type only sizes the elements here. */
int rt_cuda_tmap_encode(precc_rt *rt, const rt_tmap *t, CUdeviceptr base, long m, void *out)
{
	CUresult r;
	long rows = t->rows < 0 ? m : t->rows, cols = t->cols < 0 ? m : t->cols;
	cuuint64_t dim[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
	cuuint64_t stride[1] = {(cuuint64_t)(cols * t->elem_bytes)};
	cuuint32_t box[2] = {(cuuint32_t)t->box_cols, (cuuint32_t)t->box_rows}, es[2] = {1, 1};
	CUtensorMapDataType dt = t->elem_bytes == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
	                       : t->elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
	                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
	CUtensorMapSwizzle sw = t->swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
	                      : t->swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
	                      : t->swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_NONE;
	int pushed, rc;

	if (rows <= 0 || cols <= 0) {
		rt_error("cuda: a tensor map of %ld rows and %ld columns (M = %ld)", rows, cols, m);
		return -1;
	}
	if (cols * t->elem_bytes % 16) {
		rt_error("cuda: a tensor map of %ld columns of %d bytes (M = %ld): TMA needs 16-byte rows",
		         cols, t->elem_bytes, m);
		return -1;
	}
	if (enter(rt, &pushed))
		return -1;
	rc = CALL(cuTensorMapEncodeTiled, ((CUtensorMap *)out, dt, 2, (void *)(uintptr_t)base, dim,
	          stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
	          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
	          " encoding a %ldx%ld tensor map of %d-byte elements (box %dx%d, swizzle %d)",
	          rows, cols, t->elem_bytes, t->box_rows, t->box_cols, t->swizzle);
	leave(rt, pushed);
	return rc;
}

/* The launch attribute CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = {cluster,
 * 1, 1}, for cuLaunchKernelEx and cuOccupancyMaxActiveClusters alike */
static void cluster_attr(CUlaunchAttribute *at, int cluster)
{
	memset(at, 0, sizeof *at);
	at->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	at->value.clusterDim.x = (unsigned)cluster;
	at->value.clusterDim.y = at->value.clusterDim.z = 1;
}

/* -1 and the error for a kernel in clusters on a driver without
 * cuLaunchKernelEx */
static int no_launch_ex(const char *name, int cluster)
{
	rt_error("cuda: kernel '%s' runs in clusters of %d CTAs, which needs cuLaunchKernelEx "
	         "(CUDA 12.0); this driver has none", name, cluster);
	return -1;
}

/* CUDA Driver API cuLaunchKernelEx with one attribute,
 * CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = {cluster, 1, 1} (cuda.h 13.0:
 * CUlaunchConfig at line 2349, CUlaunchAttribute at 2340, the value's
 * clusterDim {x, y, z} at 2266; grid x must be a multiple of x). */
static int launch_cluster(precc_rt *rt, const rt_kernel *k, const unsigned grid[3],
                          const unsigned block[3], unsigned smem, CUstream stream,
                          void **params)
{
	CUlaunchAttribute at;
	CUlaunchConfig cfg;
	CUresult r;
	int pushed, rc;

	if (!drv.cuLaunchKernelEx)
		return no_launch_ex(k->name, k->cluster);
	cluster_attr(&at, k->cluster);
	cfg = (CUlaunchConfig){grid[0], grid[1], grid[2], block[0], block[1], block[2], smem,
	                       stream, &at, 1};
	if (enter(rt, &pushed))
		return -1;
	rc = CALL(cuLaunchKernelEx, (&cfg, k->fn, params, NULL),
	          " launching kernel '%s' in clusters of %dx1x1 (grid %ux%ux%u, block %ux%ux%u, "
	          "%u bytes of dynamic shared memory)", k->name, k->cluster, grid[0], grid[1],
	          grid[2], block[0], block[1], block[2], smem);
	leave(rt, pushed);
	return rc;
}

int rt_cuda_kernel_cluster(precc_rt *rt, rt_kernel *k, const char *name, int cluster,
                           int threads, unsigned smem)
{
	CUlaunchAttribute at;
	CUlaunchConfig cfg;
	CUresult r;
	int pushed, rc = 0;

	k->cluster = cluster;
	k->clusters = 0;
	if (cluster <= 1)
		return 0;
	if (!drv.cuLaunchKernelEx)
		return no_launch_ex(name, cluster);
	if (enter(rt, &pushed))
		return -1;
	/* more than 8 CTAs a cluster is non-portable: an opt-in per function */
	if (cluster > 8)
		rc = CALL(cuFuncSetAttribute, (k->fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
		          " allowing kernel '%s' clusters of %d CTAs (non-portable)", k->name, cluster);
	/* the clusters the device holds at once: clusters live in one GPC,
	 * so SMs x CTAs per SM / cluster may overcount (H100's GPCs are not
	 * all even); without the query, that overcount, which costs a short
	 * second wave of clusters, never a hang (the kernel loops) */
	if (!rc && drv.cuOccupancyMaxActiveClusters) {
		cluster_attr(&at, cluster);
		cfg = (CUlaunchConfig){(unsigned)cluster, 1, 1, (unsigned)threads, 1, 1, smem, NULL, &at, 1};
		rc = CALL(cuOccupancyMaxActiveClusters, (&k->clusters, k->fn, &cfg),
		          " of kernel '%s' (clusters of %d CTAs of %d threads, %u bytes of dynamic shared "
		          "memory)", k->name, cluster, threads, smem);
		if (!rc && k->clusters < 1) {
			rt_error("cuda: kernel '%s' cannot run on %s: not one cluster of %d CTAs of %d "
			         "threads and %u bytes of shared memory fits (cuOccupancyMaxActiveClusters "
			         "is 0)", name, rt->dev_name, cluster, threads, smem);
			rc = -1;
		}
	}
	leave(rt, pushed);
	return rc;
}

int rt_cuda_launch(precc_rt *rt, const rt_kernel *k, const unsigned grid[3],
                   const unsigned block[3], unsigned smem, CUstream stream,
                   void **params)
{
	CUresult r;
	int pushed, rc;

	if (k->cluster > 1)
		return launch_cluster(rt, k, grid, block, smem, stream, params);
	if (enter(rt, &pushed))
		return -1;
	rc = CALL(cuLaunchKernel, (k->fn, grid[0], grid[1], grid[2], block[0],
	          block[1], block[2], smem, stream, params, NULL),
	          " launching kernel '%s' (grid %ux%ux%u, block %ux%ux%u, %u bytes "
	          "of dynamic shared memory)", k->name, grid[0], grid[1], grid[2],
	          block[0], block[1], block[2], smem);
	leave(rt, pushed);
	return rc;
}

int rt_cuda_launch_cooperative(precc_rt *rt, const rt_kernel *k,
                               const unsigned grid[3], const unsigned block[3],
                               unsigned smem, CUstream stream, void **params)
{
	CUresult r;
	int pushed, rc;

	if (enter(rt, &pushed))
		return -1;
	rc = CALL(cuLaunchCooperativeKernel, (k->fn, grid[0], grid[1], grid[2],
	          block[0], block[1], block[2], smem, stream, params),
	          " launching kernel '%s' cooperatively (grid %ux%ux%u, block "
	          "%ux%ux%u: every CTA must be resident at once)", k->name,
	          grid[0], grid[1], grid[2], block[0], block[1], block[2]);
	leave(rt, pushed);
	return rc;
}

/* The memory wrappers share one shape: enter, one call, leave. */
#define WRAP(call) \
	CUresult r; \
	int pushed, rc; \
	if (enter(rt, &pushed)) \
		return -1; \
	rc = call; \
	leave(rt, pushed); \
	return rc;

int rt_cuda_alloc(precc_rt *rt, size_t bytes, CUdeviceptr *p)
{
	WRAP(CALL(cuMemAlloc, (p, bytes), " of %zu bytes", bytes))
}

int rt_cuda_free(precc_rt *rt, CUdeviceptr p)
{
	WRAP(CALL(cuMemFree, (p), "%s", ""))
}

int rt_cuda_htod(precc_rt *rt, CUdeviceptr dst, const void *src, size_t bytes)
{
	WRAP(CALL(cuMemcpyHtoD, (dst, src, bytes), " of %zu bytes", bytes))
}

int rt_cuda_dtoh(precc_rt *rt, void *dst, CUdeviceptr src, size_t bytes)
{
	WRAP(CALL(cuMemcpyDtoH, (dst, src, bytes), " of %zu bytes", bytes))
}

int rt_cuda_memset8(precc_rt *rt, CUdeviceptr dst, unsigned char v, size_t n)
{
	WRAP(CALL(cuMemsetD8, (dst, v, n), " of %zu bytes", n))
}

int rt_cuda_sync(precc_rt *rt, CUstream stream)
{
	WRAP(CALL(cuStreamSynchronize, (stream), " (errors of earlier "
	          "asynchronous launches surface here)"))
}

int rt_cuda_memset8_async(precc_rt *rt, CUdeviceptr dst, unsigned char v,
                          size_t n, CUstream stream)
{
	WRAP(CALL(cuMemsetD8Async, (dst, v, n, stream), " of %zu bytes", n))
}

int rt_cuda_dtod_async(precc_rt *rt, CUdeviceptr dst, CUdeviceptr src,
                       size_t bytes, CUstream stream)
{
	WRAP(CALL(cuMemcpyDtoDAsync, (dst, src, bytes, stream), " of %zu bytes",
	          bytes))
}

int rt_cuda_host_alloc(precc_rt *rt, size_t bytes, void **p)
{
	WRAP(CALL(cuMemAllocHost, (p, bytes), " of %zu bytes (pinned host memory)", bytes))
}

int rt_cuda_host_free(precc_rt *rt, void *p)
{
	WRAP(CALL(cuMemFreeHost, (p), "%s", ""))
}

int rt_cuda_dtoh_async(precc_rt *rt, void *dst, CUdeviceptr src, size_t bytes,
                       CUstream stream)
{
	WRAP(CALL(cuMemcpyDtoHAsync, (dst, src, bytes, stream), " of %zu bytes", bytes))
}

int rt_cuda_is_device_ptr(const void *p)
{
	unsigned int type = 0;

	if (!drv.lib || !p)
		return 0;
	/* with unified addressing the query needs no current context */
	return drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
	                                 (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS
	       && type == CU_MEMORYTYPE_DEVICE;
}

int rt_cuda_device_ptr_ok(precc_rt *rt, const void *p, uintptr_t range[2])
{
	unsigned int type = 0;
	int ord = -1;
	CUdeviceptr lo = 0;
	size_t size = 0;
	CUpointer_attribute attr[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
	                               CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
	                               CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
	                               CU_POINTER_ATTRIBUTE_RANGE_SIZE};
	void *data[4] = {&type, &ord, &lo, &size};
	CUresult r;
	int pushed;

	range[0] = (uintptr_t)p;
	range[1] = (uintptr_t)p + 1;
	if (!p || !drv.lib || !rt->ctx || enter(rt, &pushed))
		return 0;
	/* all in one driver call; memory the driver does not know reads as
	 * type 0 (rt_cuda_check_device_ptr then names the problem). The
	 * allocation's range lets the call's other buffers in it go without
	 * a query; a driver that gives none (an error on its attributes) is
	 * asked for the first two alone */
	r = drv.cuPointerGetAttributes(4, attr, data, (CUdeviceptr)(uintptr_t)p);
	if (r != CUDA_SUCCESS)
		r = drv.cuPointerGetAttributes(2, attr, data, (CUdeviceptr)(uintptr_t)p);
	leave(rt, pushed);
	if (r != CUDA_SUCCESS || type == 0 || type == CU_MEMORYTYPE_HOST || ord != (int)rt->dev)
		return 0;
	if (size && (uintptr_t)p >= (uintptr_t)lo && (uintptr_t)p < (uintptr_t)lo + size) {
		range[0] = (uintptr_t)lo;
		range[1] = (uintptr_t)lo + size;
	}
	return 1;
}

int rt_cuda_check_device_ptr(precc_rt *rt, const void *p, const char *what)
{
	unsigned int type = 0;
	int ord = -1;
	CUresult r;
	int pushed;

	if (!p) {
		rt_error("cuda: %s is NULL", what);
		return -1;
	}
	if (enter(rt, &pushed))
		return -1;
	r = drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
	                              (CUdeviceptr)(uintptr_t)p);
	leave(rt, pushed);
	if (r == CUDA_ERROR_INVALID_VALUE ||
	    (r == CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST)) {
		rt_error("cuda: %s is a host pointer (%p); the cuda backend needs "
		         "device memory", what, p);
		return -1;
	}
	if (r != CUDA_SUCCESS)
		return fail(r, "cuPointerGetAttribute", " of %s (%p)", what, p);
	if (enter(rt, &pushed))
		return -1;
	r = drv.cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
	                              (CUdeviceptr)(uintptr_t)p);
	leave(rt, pushed);
	if (r != CUDA_SUCCESS)
		return fail(r, "cuPointerGetAttribute", " (device ordinal) of %s (%p)", what, p);
	if (ord != (int)rt->dev) {
		rt_error("cuda: %s (%p) is memory of device %d; this runtime's "
		         "context is on device %d (its layers' state and buffers "
		         "live there)", what, p, ord, (int)rt->dev);
		return -1;
	}
	return 0;
}

int rt_cuda_check_stream(precc_rt *rt, CUstream stream)
{
	CUcontext c = NULL;
	CUresult r;
	int pushed;

	/* the legacy default stream is the current context's, which each
	 * call makes ours; a stream that passed once is not asked again */
	if (!stream || (rt->stream_ok_set && stream == rt->stream_ok))
		return 0;
	if (enter(rt, &pushed))
		return -1;
	r = drv.cuStreamGetCtx(stream, &c);
	leave(rt, pushed);
	if (r != CUDA_SUCCESS)
		return fail(r, "cuStreamGetCtx", " of stream %p (not a stream of this "
		            "process's driver?)", (void *)stream);
	if (c != rt->ctx) {
		rt_error("cuda: stream %p belongs to another context (%p) than this "
		         "runtime's (%p, device %d): launch on a stream created in "
		         "the runtime's context, or open a runtime in that context",
		         (void *)stream, (void *)c, (void *)rt->ctx, (int)rt->dev);
		return -1;
	}
	rt->stream_ok = stream;
	rt->stream_ok_set = true;
	return 0;
}

#endif
