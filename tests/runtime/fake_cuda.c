/*
 * fake_cuda.c — a stand-in libcuda.so.1 for CPU-only tests of cuda.c:
 * loaded through PRECC_LIBCUDA, it exports the versioned driver symbols
 * (cuda.h's #defines rename these definitions) and behaves as $FAKE_CUDA
 * says: "init_fail" (cuInit → CUDA_ERROR_NO_DEVICE), "no_device" (0
 * devices), otherwise one device (sm_90). It computes nothing: a module
 * whose text contains "bad" fails to JIT with a log, any module has the
 * functions "k" and "precc_*", launches only record their geometry, and
 * the async memset/copy run at once. Built with -DFAKE_MISSING it lacks
 * cuPointerGetAttribute. With $FAKE_CUDA_ANY_POINTER set, every non-NULL
 * pointer is device memory (bench/bench_torch_host.py runs precc.torch's
 * CPU tensors through it; launch checks need FAKE_CUDA_MANIFEST unset).
 *
 * It enforces what the real driver does at launch, for a device of
 * $FAKE_CUDA_SMS SMs (default 132) running kernels of $FAKE_CUDA_REGS
 * registers (default 32) and $FAKE_CUDA_SMEM bytes of static shared memory
 * (default 0), with sm_90's per-SM resources (65536 registers allocated
 * per warp in units of 256, 2048 threads, 32 CTAs, 228 KiB of shared
 * memory, 1 KiB of it reserved per CTA): a block over 1024 threads or
 * without the registers of one SM, or over its dynamic shared memory
 * limit, is refused; a cooperative grid over the resident CTAs x SMs
 * gets CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE; occupancy is computed
 * from the same figures.
 *
 * It tracks the context stack per process (tests are single-threaded) so
 * tests can check that the runtime leaves no context current. Three
 * contexts: the primary and a user one on device 0, and one on a device 1
 * (fake_cuda_other_ctx): memory allocated while it is current is device
 * 1's (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL), a stream made for it
 * (fake_cuda_stream) is its (cuStreamGetCtx). Any other non-NULL stream
 * handle, the stand-in tests and benches pass, is the current context's.
 *
 * Every launch is recorded (fake_cuda_launches) and checked as a GPU would
 * punish it: each function has its own dynamic shared-memory limit, and
 * with $FAKE_CUDA_MANIFEST naming the artifact directory, the grid must
 * cover the kernel's data at the launch's M, and block, shared memory and
 * params must be the manifest's (fake_launch.c). A launch that fails a
 * check prints why on stderr, counts in fake_cuda_violations and returns
 * CUDA_ERROR_LAUNCH_FAILED, so no test can pass over it.
 *
 * Thread-block clusters (CUDA 12.0; built with -DFAKE_NO_CLUSTER it lacks
 * both entry points, as an older driver): cuLaunchKernelEx takes only the
 * CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION attribute and refuses, as sm_90
 * does, a grid that is not a multiple of the cluster in each dimension or
 * a cluster over 8 CTAs (16 once the function has
 * CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) with
 * CUDA_ERROR_INVALID_CLUSTER_SIZE; a manifest kernel with "cluster" must
 * come with exactly that cluster (a plain cuLaunchKernel of it is a
 * violation: on a GPU its CTAs would wait for peers that never come).
 * cuOccupancyMaxActiveClusters: the SMs split into $FAKE_CUDA_GPCS GPCs
 * (default 1) as evenly as possible, a cluster inside one GPC, so with
 * several GPCs it can be below SMs x CTAs per SM / cluster.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *mode(void)
{
	const char *m = getenv("FAKE_CUDA");
	return m ? m : "ok";
}

static struct CUctx_st { int id; } primary = {1}, user = {2}, other = {3};
static CUcontext stack[16];
static int depth, retained;
static unsigned launched[7], launched_cluster[3] = {1, 1, 1};

/* fake_launch.c */
struct fake_kern;
int fake_launch_match(const char *image, const struct fake_kern **out, int max)
	__attribute__((visibility("hidden")));
int fake_launch_check(const struct fake_kern *const *k, int n, const char *entry,
                      const unsigned g[3], const unsigned b[3], unsigned smem, int coop,
                      const unsigned cluster[3], void **params, long resident,
                      long clusters, char *why, size_t whysz)
	__attribute__((visibility("hidden")));

/* A module: the manifest kernels whose file it is (nk -1: no manifest). A
 * function: its module, entry and dynamic shared-memory limit. Both are
 * freed when the module is unloaded (the manifest fuzzer loads millions). */
#define FAKE_MOD_KERNELS 16
struct CUmod_st { const struct fake_kern *k[FAKE_MOD_KERNELS]; int nk; };
struct CUfunc_st { struct CUmod_st *mod; char name[128]; int max_dyn, nonportable; };
static struct CUmod_st **mods;
static struct CUfunc_st **fns;
static int nmod, nfn;

/* Every launch: its function and geometry (the last 4096). */
typedef struct FakeLaunch { const char *entry; unsigned g[3], b[3], smem; } FakeLaunch;
static FakeLaunch launch_log[4096];
static long nlaunch, nchecked, violations;
static char violation[1024];
long fake_cuda_launches(void) { return nlaunch; }
long fake_cuda_checked(void) { return nchecked; }   /* against a manifest's kernel */
const FakeLaunch *fake_cuda_launch_at(long i)
{
	return i >= 0 && i < nlaunch && nlaunch - i <= 4096 ? &launch_log[i % 4096] : NULL;
}
long fake_cuda_violations(void) { return violations; }
const char *fake_cuda_last_violation(void) { return violation; }

/* For the tests (found with dlsym): */
int fake_cuda_depth(void) { return depth; }
int fake_cuda_retained(void) { return retained; }
CUcontext fake_cuda_user_ctx(void) { return &user; }
CUcontext fake_cuda_other_ctx(void) { return &other; }   /* on device 1 */
static int ctx_device(CUcontext c) { return c == &other; }
const unsigned *fake_cuda_last_launch(void) { return launched; }
/* the cluster dimension of the last launch ({1, 1, 1}: none) */
const unsigned *fake_cuda_last_cluster(void) { return launched_cluster; }
/* The next launches copy their first n kernel params (8 bytes each: the
 * launcher's pointers and i64 m / seed) for fake_cuda_last_params. */
static int record_n, cooperative;
int fake_cuda_cooperative_launches(void) { return cooperative; }
static uint64_t recorded[32];
void fake_cuda_record_params(int n) { record_n = n < 32 ? n : 32; }
const uint64_t *fake_cuda_last_params(void) { return recorded; }

CUresult CUDAAPI cuInit(unsigned int flags)
{
	return strcmp(mode(), "init_fail") == 0 ? CUDA_ERROR_NO_DEVICE
	                                        : CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *v) { *v = CUDA_VERSION; return 0; }

CUresult CUDAAPI cuGetErrorName(CUresult r, const char **s)
{
	switch (r) {
	case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; return 0;
	case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
	case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
	case CUDA_ERROR_INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; return 0;
	case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
	case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: *s = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; return 0;
	case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: *s = "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"; return 0;
	case CUDA_ERROR_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; return 0;
	case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return 0;
	case CUDA_ERROR_INVALID_CLUSTER_SIZE: *s = "CUDA_ERROR_INVALID_CLUSTER_SIZE"; return 0;
	default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
	}
}

CUresult CUDAAPI cuGetErrorString(CUresult r, const char **s)
{
	switch (r) {
	case CUDA_SUCCESS: *s = "no error"; return 0;
	case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; return 0;
	case CUDA_ERROR_NO_DEVICE: *s = "no CUDA-capable device is detected"; return 0;
	case CUDA_ERROR_INVALID_PTX: *s = "a PTX JIT compilation failed"; return 0;
	case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found"; return 0;
	case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: *s = "too many resources requested for launch"; return 0;
	case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: *s = "too many blocks in cooperative launch"; return 0;
	case CUDA_ERROR_LAUNCH_FAILED: *s = "unspecified launch failure"; return 0;
	case CUDA_ERROR_INVALID_HANDLE: *s = "invalid resource handle"; return 0;
	case CUDA_ERROR_INVALID_CLUSTER_SIZE: *s = "invalid cluster size"; return 0;
	default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
	}
}

CUresult CUDAAPI cuDeviceGetCount(int *n)
{
	*n = strcmp(mode(), "no_device") == 0 ? 0 : 1;
	return 0;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *d, int i)
{
	if (i != 0)
		return CUDA_ERROR_INVALID_VALUE;
	*d = 0;
	return 0;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d)
{
	snprintf(name, (size_t)len, "precc fake device");
	return 0;
}

/* The device's sm: $FAKE_CUDA_SM (e.g. 89), default 90. */
static int sm(void)
{
	const char *s = getenv("FAKE_CUDA_SM");
	return s && *s ? atoi(s) : 90;
}

static int env_int(const char *name, int dflt)
{
	const char *s = getenv(name);
	return s && *s ? atoi(s) : dflt;
}
static int sms(void) { return env_int("FAKE_CUDA_SMS", 132); }
static int regs(void) { return env_int("FAKE_CUDA_REGS", 32); }
static int static_smem(void) { return env_int("FAKE_CUDA_SMEM", 0); }

enum { SM_REGS = 65536, SM_THREADS = 2048, SM_CTAS = 32, SM_SMEM = 233472,
       CTA_SMEM_RESERVED = 1024, CTA_SMEM_OPTIN = 232448 };

enum { DEFAULT_MAX_DYN = 49152 };   /* a function's dynamic smem limit until raised */

/* CTAs of `threads` with `dyn` dynamic shared bytes resident on one SM */
static int resident(int threads, size_t dyn)
{
	int warps = (threads + 31) / 32;
	int per_warp = (regs() * 32 + 255) / 256 * 256;
	int n = SM_THREADS / threads;
	if (SM_CTAS < n)
		n = SM_CTAS;
	if (per_warp * warps > 0 && SM_REGS / (per_warp * warps) < n)
		n = SM_REGS / (per_warp * warps);
	size_t sh = (size_t)static_smem() + dyn + CTA_SMEM_RESERVED;
	if ((int)(SM_SMEM / sh) < n)
		n = (int)(SM_SMEM / sh);
	return threads > 1024 ? 0 : n;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = sm() / 10; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = sm() % 10; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = sms(); break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return 0;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c)
{
	*c = depth ? stack[depth - 1] : NULL;
	return 0;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext c)
{
	if (depth == 0)
		stack[depth++] = c;
	else
		stack[depth - 1] = c;
	if (!c)
		depth--;
	return 0;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext c)
{
	if (depth == 16)
		return CUDA_ERROR_INVALID_VALUE;
	stack[depth++] = c;
	return 0;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *c)
{
	if (depth == 0)
		return CUDA_ERROR_INVALID_VALUE;
	*c = stack[--depth];
	return 0;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *d)
{
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	*d = ctx_device(stack[depth - 1]);
	return 0;
}

/* Streams of a context (fake_cuda_stream): cuStreamGetCtx answers theirs;
 * NULL and any other handle are the current context's. */
struct CUstream_st { CUcontext ctx; };
static struct CUstream_st streams[8];
static int nstream;
CUstream fake_cuda_stream(CUcontext c)
{
	if (nstream == 8)
		return NULL;
	streams[nstream].ctx = c;
	return &streams[nstream++];
}

CUresult CUDAAPI cuStreamGetCtx(CUstream s, CUcontext *c)
{
	for (int i = 0; i < nstream; i++)
		if (s == &streams[i]) {
			*c = streams[i].ctx;
			return 0;
		}
	if (!depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	*c = stack[depth - 1];
	return 0;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	retained++;
	*c = &primary;
	return 0;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d)
{
	retained--;
	return 0;
}

/* Every module call must run with a context current. */
#define NEED_CTX() do { if (!depth) return CUDA_ERROR_INVALID_CONTEXT; } while (0)

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *m, const void *image,
                                    unsigned int n, CUjit_option *opt,
                                    void **val)
{
	NEED_CTX();
	for (unsigned i = 0; i < n; i++) {
		if (opt[i] == CU_JIT_INFO_LOG_BUFFER)
			snprintf(val[i], (size_t)(uintptr_t)val[i + 1], "fake: info");
		if (opt[i] == CU_JIT_ERROR_LOG_BUFFER && strstr(image, "bad"))
			snprintf(val[i], (size_t)(uintptr_t)val[i + 1],
			         "ptxas application ptx input, line 3; error   : fake "
			         "syntax error");
	}
	if (strstr(image, "bad"))
		return CUDA_ERROR_INVALID_PTX;
	struct CUmod_st **grown = realloc(mods, (size_t)(nmod + 1) * sizeof *mods);
	if (!grown)
		return CUDA_ERROR_OUT_OF_MEMORY;
	mods = grown;
	if (!(*m = mods[nmod] = calloc(1, sizeof **m)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	nmod++;
	(*m)->nk = fake_launch_match(image, (*m)->k, FAKE_MOD_KERNELS);
	return 0;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	struct CUfunc_st **grown;
	NEED_CTX();
	if (strcmp(name, "k") != 0 && strncmp(name, "precc_", 6) != 0)
		return CUDA_ERROR_NOT_FOUND;
	for (int i = 0; i < nfn; i++)
		if (fns[i]->mod == m && !strcmp(fns[i]->name, name)) {
			*f = fns[i];
			return 0;
		}
	if (!(grown = realloc(fns, (size_t)(nfn + 1) * sizeof *fns)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	fns = grown;
	if (!(fns[nfn] = calloc(1, sizeof **fns)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	fns[nfn]->mod = m;
	fns[nfn]->max_dyn = DEFAULT_MAX_DYN;
	snprintf(fns[nfn]->name, sizeof fns[nfn]->name, "%s", name);
	*f = fns[nfn++];
	return 0;
}

CUresult CUDAAPI cuModuleUnload(CUmodule m)
{
	NEED_CTX();
	for (int i = 0; i < nfn; i++)
		if (fns[i]->mod == m) {
			free(fns[i]);
			fns[i--] = fns[--nfn];
		}
	for (int i = 0; i < nmod; i++)
		if (mods[i] == m) {
			free(m);
			mods[i] = mods[--nmod];
			return 0;
		}
	return CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f)
{
	NEED_CTX();
	switch (a) {
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = regs(); break;
	case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *v = 0; break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = f->max_dyn; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return 0;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v)
{
	NEED_CTX();
	if (v > CTA_SMEM_OPTIN - static_smem())
		return CUDA_ERROR_INVALID_VALUE;
	if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
		f->max_dyn = v;
	else if (a == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)
		f->nonportable = v != 0;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f,
                                                             int threads, size_t dyn)
{
	NEED_CTX();
	*n = resident(threads, dyn);
	return 0;
}

/* cuTensorMapEncodeTiled: the arguments as received, for
 * fake_cuda_last_tmap (u64 words: data type, rank, address, dims[2],
 * strides[1], box[2], element strides[2], interleave, swizzle, L2
 * promotion, OOB fill), and the 128 bytes of the map filled with 0x5a. */
static uint64_t tmap_args[15];
const uint64_t *fake_cuda_last_tmap(void) { return tmap_args; }
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType dt, cuuint32_t rank,
                                        void *addr, const cuuint64_t *dim,
                                        const cuuint64_t *stride, const cuuint32_t *box,
                                        const cuuint32_t *es, CUtensorMapInterleave il,
                                        CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                        CUtensorMapFloatOOBfill oob)
{
	uint64_t a[15] = {dt, rank, (uint64_t)(uintptr_t)addr, dim[0], dim[1], stride[0], box[0],
	                  box[1], es[0], es[1], il, sw, l2, oob, 0};
	memcpy(tmap_args, a, sizeof a);
	if (rank != 2 || (uintptr_t)addr % 16 || stride[0] % 16 || box[0] > 256 || box[1] > 256)
		return CUDA_ERROR_INVALID_VALUE;
	memset(m, 0x5a, sizeof *m);
	return CUDA_SUCCESS;
}

static int in_cooperative;   /* cuLaunchKernel called by the cooperative launch */
/* what a NULL function launches as (tests call the launches directly) */
static struct CUfunc_st no_function = {NULL, "(NULL)", DEFAULT_MAX_DYN, 0};

/* the clusters of c CTAs resident at once: per GPC of $FAKE_CUDA_GPCS,
 * its SMs x CTAs per SM / c, rounded down */
static long max_clusters(int threads, size_t smem, unsigned c)
{
	long n = 0;
	int gpcs = env_int("FAKE_CUDA_GPCS", 1);
	if (gpcs < 1)
		gpcs = 1;
	for (int i = 0; i < gpcs; i++) {
		long gsms = sms() / gpcs + (i < sms() % gpcs);
		n += gsms * resident(threads, smem) / (long)(c ? c : 1);
	}
	return n;
}

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned smem, const unsigned cl[3],
                       void **params)
{
	unsigned g[7] = {gx, gy, gz, bx, by, bz, smem};
	int coop = in_cooperative;
	in_cooperative = 0;
	if (!f)
		f = &no_function;
	if (!gx || !gy || !gz || gx > 0x7fffffffu || gy > 65535 || gz > 65535
	    || (int)smem > f->max_dyn || bx * by * bz > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (resident((int)(bx * by * bz), smem) < 1)
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	FakeLaunch *l = &launch_log[nlaunch++ % 4096];
	*l = (FakeLaunch){f->name, {gx, gy, gz}, {bx, by, bz}, smem};
	if (f->mod && f->mod->nk >= 0) {
		char why[900];
		long res = (long)resident((int)(bx * by * bz), smem) * sms();
		nchecked++;
		if (fake_launch_check(f->mod->k, f->mod->nk, f->name, l->g, l->b, smem, coop, cl,
		                      params, res, max_clusters((int)(bx * by * bz), smem, cl[0]),
		                      why, sizeof why)) {
			snprintf(violation, sizeof violation, "launch %ld: %s", nlaunch, why);
			fprintf(stderr, "fake_cuda: %s\n", violation);
			violations++;
			return CUDA_ERROR_LAUNCH_FAILED;
		}
	}
	memcpy(launched, g, sizeof g);
	memcpy(launched_cluster, cl, sizeof launched_cluster);
	for (int i = 0; i < record_n; i++)
		memcpy(&recorded[i], params[i], 8);
	return 0;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
                                unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned smem, CUstream s,
                                void **params, void **extra)
{
	static const unsigned none[3] = {1, 1, 1};
	NEED_CTX();
	return launch(f, gx, gy, gz, bx, by, bz, smem, none, params);
}

#ifndef FAKE_NO_CLUSTER
/* the cluster dimension of config's attributes ({1, 1, 1} without one);
 * -1 on an attribute the fake does not know */
static int config_cluster(const CUlaunchConfig *config, unsigned cl[3])
{
	cl[0] = cl[1] = cl[2] = 1;
	for (unsigned i = 0; i < config->numAttrs; i++) {
		const CUlaunchAttribute *a = &config->attrs[i];
		if (a->id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
			return -1;
		cl[0] = a->value.clusterDim.x;
		cl[1] = a->value.clusterDim.y;
		cl[2] = a->value.clusterDim.z;
	}
	return 0;
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                  void **extra)
{
	unsigned cl[3];
	NEED_CTX();
	if (!config || (config->numAttrs && !config->attrs) || config_cluster(config, cl))
		return CUDA_ERROR_INVALID_VALUE;
	in_cooperative = 0;
	/* sm_90: each grid dimension a multiple of the cluster's, at most 8
	 * CTAs a cluster, 16 with the non-portable opt-in */
	if (!cl[0] || !cl[1] || !cl[2] || config->gridDimX % cl[0] || config->gridDimY % cl[1]
	    || config->gridDimZ % cl[2] || cl[0] * cl[1] * cl[2] > ((f && f->nonportable) ? 16u : 8u))
		return CUDA_ERROR_INVALID_CLUSTER_SIZE;
	return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
	              config->blockDimY, config->blockDimZ, config->sharedMemBytes, cl, params);
}

CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *n, CUfunction f, const CUlaunchConfig *config)
{
	unsigned cl[3];
	NEED_CTX();
	if (!config || config_cluster(config, cl) || cl[1] != 1 || cl[2] != 1)
		return CUDA_ERROR_INVALID_VALUE;
	if (cl[0] > ((f && f->nonportable) ? 16u : 8u))
		return CUDA_ERROR_INVALID_CLUSTER_SIZE;
	*n = (int)max_clusters((int)(config->blockDimX * config->blockDimY * config->blockDimZ),
	                       config->sharedMemBytes, cl[0]);
	return 0;
}
#endif

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned gx,
                                           unsigned gy, unsigned gz,
                                           unsigned bx, unsigned by,
                                           unsigned bz, unsigned smem,
                                           CUstream s, void **params)
{
	NEED_CTX();
	if ((double)gx * gy * gz > (double)resident((int)(bx * by * bz), smem) * sms())
		return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
	cooperative++;
	in_cooperative = 1;
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, NULL);
}

/* "Device" memory is host memory the fake remembers handing out. */
static void *allocs[64];
static size_t alloc_bytes[64];
static int alloc_dev[64];   /* the device of the context current at cuMemAlloc */

/* The bytes from ptr to the end of the allocation it is in, else -1. */
__attribute__((visibility("hidden"))) long fake_alloc_room(uint64_t ptr)
{
	for (int i = 0; i < 64; i++)
		if (allocs[i] && ptr >= (uintptr_t)allocs[i] &&
		    ptr < (uintptr_t)allocs[i] + alloc_bytes[i] + (alloc_bytes[i] == 0))
			return (long)((uintptr_t)allocs[i] + alloc_bytes[i] - ptr);
	return -1;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t n)
{
	NEED_CTX();
	for (int i = 0; i < 64; i++)
		if (!allocs[i]) {
			if (!(allocs[i] = malloc(n ? n : 1)))
				return CUDA_ERROR_INVALID_VALUE;
			alloc_bytes[i] = n;
			alloc_dev[i] = ctx_device(stack[depth - 1]);
			*p = (CUdeviceptr)(uintptr_t)allocs[i];
			return 0;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr p)
{
	NEED_CTX();
	for (int i = 0; i < 64; i++)
		if (allocs[i] && (uintptr_t)allocs[i] == p) {
			free(allocs[i]);
			allocs[i] = NULL;
			return 0;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n)
{
	NEED_CTX();
	memcpy((void *)(uintptr_t)d, s, n);
	return 0;
}

CUresult CUDAAPI cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n)
{
	NEED_CTX();
	memcpy(d, (void *)(uintptr_t)s, n);
	return 0;
}

CUresult CUDAAPI cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n)
{
	NEED_CTX();
	memset((void *)(uintptr_t)d, v, n);
	return 0;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream s) { NEED_CTX(); return 0; }

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n,
                                 CUstream s)
{
	NEED_CTX();
	memset((void *)(uintptr_t)d, v, n);
	return 0;
}

CUresult CUDAAPI cuMemAllocHost(void **p, size_t n)
{
	NEED_CTX();
	return (*p = calloc(1, n ? n : 1)) ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
	NEED_CTX();
	free(p);
	return 0;
}

/* the fake runs everything at once: the copy is done when it returns */
CUresult CUDAAPI cuMemcpyDtoHAsync(void *d, CUdeviceptr s, size_t n, CUstream st)
{
	NEED_CTX();
	memcpy(d, (void *)(uintptr_t)s, n);
	return 0;
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n,
                                   CUstream st)
{
	NEED_CTX();
	memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
	return 0;
}

#ifndef FAKE_MISSING
CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute a,
                                       CUdeviceptr p)
{
	/* no NEED_CTX: with unified addressing the real one needs none */
	static int any = -1;   /* $FAKE_CUDA_ANY_POINTER, read once */
	if (any < 0)
		any = getenv("FAKE_CUDA_ANY_POINTER") != NULL;
	if (a != CU_POINTER_ATTRIBUTE_MEMORY_TYPE && a != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
		return CUDA_ERROR_INVALID_VALUE;
	if (any && p) {
		*(unsigned *)data = a == CU_POINTER_ATTRIBUTE_MEMORY_TYPE ? CU_MEMORYTYPE_DEVICE : 0;
		return 0;
	}
	for (int i = 0; i < 64; i++)
		if (allocs[i] && (uintptr_t)allocs[i] == p) {
			if (a == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
				*(unsigned *)data = CU_MEMORYTYPE_DEVICE;
			else
				*(int *)data = alloc_dev[i];
			return 0;
		}
	return CUDA_ERROR_INVALID_VALUE;
}
#endif

/* The memory type and device ordinal in one call (cuda.c's per-buffer
 * check); as the real one, memory it does not know is success with zeroed
 * values, not an error. */
CUresult CUDAAPI cuPointerGetAttributes(unsigned n, CUpointer_attribute *a, void **data,
                                        CUdeviceptr p)
{
	static int any = -1;   /* $FAKE_CUDA_ANY_POINTER, read once */
	int slot = -1;

	if (any < 0)
		any = getenv("FAKE_CUDA_ANY_POINTER") != NULL;
	for (int i = 0; p && !any && i < 64 && slot < 0; i++)
		if (allocs[i] && (uintptr_t)allocs[i] == p)
			slot = i;
	for (unsigned i = 0; i < n; i++) {
		int known = slot >= 0 || (any && p);
		if (a[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
			*(unsigned *)data[i] = known ? CU_MEMORYTYPE_DEVICE : 0;
		else if (a[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
			*(int *)data[i] = slot >= 0 ? alloc_dev[slot] : known ? 0 : -2;
		else if (a[i] == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
			/* the allocation; with FAKE_CUDA_ANY_POINTER the byte alone */
			*(CUdeviceptr *)data[i] = slot >= 0 ? (CUdeviceptr)(uintptr_t)allocs[slot]
			                                    : known ? p : 0;
		else if (a[i] == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
			*(size_t *)data[i] = slot >= 0 ? alloc_bytes[slot] + (alloc_bytes[slot] == 0)
			                               : known ? 1 : 0;
		else
			return CUDA_ERROR_INVALID_VALUE;
	}
	return 0;
}

/* Events for bench_quant_bw's smoke run: every interval is 1 ms. */
static int fake_event;
CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int flags)
{
	NEED_CTX();
	*e = (CUevent)(void *)&fake_event;
	return 0;
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) { NEED_CTX(); return 0; }
CUresult CUDAAPI cuEventSynchronize(CUevent e) { return 0; }
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	*ms = 1.0f;
	return 0;
}
CUresult CUDAAPI cuEventDestroy(CUevent e) { return 0; }
