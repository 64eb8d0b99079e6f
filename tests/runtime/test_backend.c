/*
 * test_backend.c — opening backends without a GPU, one scenario per run
 * (the driver is resolved once per process): test_backend MODE [LIB].
 *
 *   here       auto on this machine (no libcuda.so.1) picks cpu and says
 *              why; cuda explicitly requested fails with the exact error
 *   nolib      PRECC_LIBCUDA names a missing file
 *   notalib    PRECC_LIBCUDA names a file that is not a library
 *   init_fail  the fake driver's cuInit fails   (FAKE_CUDA=init_fail)
 *   no_device  the fake driver has no device    (FAKE_CUDA=no_device)
 *   missing    the fake driver lacks an entry point
 *   fake       the fake driver has a device: the whole cuda.c path
 *   current    the caller's context is current: reused, not retained
 *
 * LIB is the fake driver's path; the modes set PRECC_LIBCUDA themselves.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "precc/precc_rt.h"
#include "rt.h"
#include "rtcheck.h"

static char why[RT_ERR_MAX];

static void parse_names(void)
{
	precc_backend k;
	CHECK(precc_backend_parse("cpu", &k) == 0 && k == PRECC_BACKEND_CPU);
	CHECK(precc_backend_parse("auto", &k) == 0 && k == PRECC_BACKEND_AUTO);
	CHECK(precc_backend_parse("cuda", &k) == 0 && k == PRECC_BACKEND_CUDA);
	CHECK(precc_backend_parse("gpu", &k) == -1);
	CHECK_STR(precc_rt_last_error(),
	          "unknown backend 'gpu' (choose auto, cuda or cpu)");
	CHECK_STR(precc_backend_name(PRECC_BACKEND_CUDA), "cuda");
	CHECK_STR(precc_backend_name((precc_backend)9), "?");
	CHECK(!precc_rt_open_backend((precc_backend)9, why, sizeof why));
	CHECK_STR(why, "unknown backend 9 (choose auto, cuda or cpu)");
}

/* cuda must fail with want; auto must fall back to cpu saying so. */
static void expect_unavailable(const char *want)
{
	char fallback[RT_ERR_MAX + 64];
	precc_rt *rt;

	rt = precc_rt_open_backend(PRECC_BACKEND_CUDA, why, sizeof why);
	CHECK(rt == NULL);
	CHECK_STR(why, want);
	CHECK_STR(precc_rt_last_error(), want);
	precc_rt_close(rt);

	rt = precc_rt_open_backend(PRECC_BACKEND_AUTO, why, sizeof why);
	CHECK(rt && precc_rt_backend(rt) == PRECC_BACKEND_CPU);
	snprintf(fallback, sizeof fallback, "cpu (cuda unavailable: %s)",
	         want + strlen("cuda: "));
	CHECK_STR(why, fallback);
	precc_rt_close(rt);

	/* a NULL reason buffer is allowed */
	rt = precc_rt_open_backend(PRECC_BACKEND_AUTO, NULL, 0);
	CHECK(rt && precc_rt_backend(rt) == PRECC_BACKEND_CPU);
	precc_rt_close(rt);
}

static void *fake;   /* the fake driver, for its introspection hooks */

static int fake_int(const char *fn)
{
	int (*f)(void);
	void *s = dlsym(fake, fn);
	memcpy(&f, &s, sizeof s);
	return f();
}

static void fake_path(precc_rt *rt)
{
	rt_kernel k;
	CUmodule mod;
	CUdeviceptr d;
	unsigned grid[3] = {4, 2, 1}, block[3] = {128, 1, 1};
	float host[4] = {1, 2, 3, 4}, back[4] = {0};
	void *params[1] = {&d};

	CHECK(fake_int("fake_cuda_depth") == 0);
	CHECK(rt_cuda_module_load(rt, ".version 8.0\n.target sm_90\nbad", "kernel 'k'",
	                          &mod) == -1);
	CHECK_STR(precc_rt_last_error(),
	          "cuda: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (a PTX JIT "
	          "compilation failed) while loading kernel 'k'\n"
	          "ptxas application ptx input, line 3; error   : fake syntax error");
	CHECK(rt_cuda_module_load(rt, ".version 8.0\n.target sm_90\n", "kernel 'k'",
	                          &mod) == 0);
	CHECK_STR(rt->jit_info, "fake: info");
	CHECK(rt_cuda_kernel(rt, mod, "nope", &k) == -1);
	CHECK_STR(precc_rt_last_error(), "cuda: cuModuleGetFunction: "
	          "CUDA_ERROR_NOT_FOUND (named symbol not found) looking up kernel "
	          "'nope'");
	CHECK(rt_cuda_kernel(rt, mod, "k", &k) == 0);
	CHECK(k.num_regs == 32 && k.local_bytes == 0 && k.max_dyn_smem == 49152);
	CHECK(rt_cuda_kernel_reserve_smem(rt, &k, 1000) == 0);
	CHECK(k.max_dyn_smem == 49152);
	CHECK(rt_cuda_kernel_reserve_smem(rt, &k, 200000) == 0);
	CHECK(k.max_dyn_smem == 200000);
	CHECK(rt_cuda_kernel_reserve_smem(rt, &k, 300000) == -1);
	CHECK_STR(precc_rt_last_error(), "cuda: cuFuncSetAttribute: "
	          "CUDA_ERROR_INVALID_VALUE (invalid argument) raising kernel 'k' "
	          "dynamic shared memory to 300000 bytes (the device allows blocks "
	          "up to 232448)");

	CHECK(rt_cuda_alloc(rt, sizeof host, &d) == 0);
	CHECK(rt_cuda_check_device_ptr(rt, (void *)(uintptr_t)d, "x") == 0);
	CHECK(rt_cuda_check_device_ptr(rt, host, "input x") == -1);
	{
		char want[256];
		snprintf(want, sizeof want, "cuda: input x is a host pointer (%p); "
		         "the cuda backend needs device memory", (void *)host);
		CHECK_STR(precc_rt_last_error(), want);
	}
	CHECK(rt_cuda_check_device_ptr(rt, NULL, "bias") == -1);
	CHECK_STR(precc_rt_last_error(), "cuda: bias is NULL");
	CHECK(rt_cuda_htod(rt, d, host, sizeof host) == 0);
	CHECK(rt_cuda_launch(rt, &k, grid, block, 4096, NULL, params) == 0);
	{
		const unsigned *(*last)(void);
		void *s = dlsym(fake, "fake_cuda_last_launch");
		memcpy(&last, &s, sizeof s);
		const unsigned *g = last();
		CHECK(g[0] == 4 && g[1] == 2 && g[2] == 1 && g[3] == 128 &&
		      g[6] == 4096);
	}
	{
		/* a tensor map of the sm_90a GEMM: e4m3 A[M, 256], 128x128 boxes,
		 * 128B swizzle, at M = 512; the enums' values are cuda.h's */
		rt_tmap t = {0, 1, -1, 256, 128, 128, 128};
		CUtensorMap map;
		const uint64_t *(*last)(void);
		void *s = dlsym(fake, "fake_cuda_last_tmap");
		memcpy(&last, &s, sizeof s);
		CHECK(rt_cuda_tmap_encode(rt, &t, d, 512, &map) == 0);
		const uint64_t *a = last();
		CHECK(a[0] == CU_TENSOR_MAP_DATA_TYPE_UINT8 && a[1] == 2 && a[2] == d);
		CHECK(a[3] == 256 && a[4] == 512 && a[5] == 256);     /* dims inner first, stride bytes */
		CHECK(a[6] == 128 && a[7] == 128 && a[8] == 1 && a[9] == 1);
		CHECK(a[10] == CU_TENSOR_MAP_INTERLEAVE_NONE && a[11] == CU_TENSOR_MAP_SWIZZLE_128B &&
		      a[12] == CU_TENSOR_MAP_L2_PROMOTION_L2_256B && a[13] == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
		CHECK(((unsigned char *)&map)[127] == 0x5a);
		rt_tmap w = {0, 2, 64, 64, 64, 32, 64};   /* bf16[64, 64], 64x32 boxes, 64B */
		CHECK(rt_cuda_tmap_encode(rt, &w, d, 512, &map) == 0);
		a = last();
		CHECK(a[0] == CU_TENSOR_MAP_DATA_TYPE_UINT16 && a[3] == 64 && a[4] == 64 && a[5] == 128 &&
		      a[6] == 32 && a[7] == 64 && a[11] == CU_TENSOR_MAP_SWIZZLE_64B);
		CHECK(rt_cuda_tmap_encode(rt, &t, d, 0, &map) == -1);
		CHECK_STR(precc_rt_last_error(), "cuda: a tensor map of 0 rows and 256 columns (M = 0)");
		/* a wgrad's K-major operand: e5m2 dYᵀ[136, M], M columns (K = M)
		 * at M = 464: dims {464, 136}, row stride 464 bytes */
		rt_tmap wg = {0, 1, 136, -1, 128, 128, 128};
		CHECK(rt_cuda_tmap_encode(rt, &wg, d, 464, &map) == 0);
		a = last();
		CHECK(a[3] == 464 && a[4] == 136 && a[5] == 464 && a[6] == 128 && a[7] == 128);
		/* a bf16 wgrad's MN-major operand: dY[M, 136] itself, 64 K rows
		 * of 64 elements per box: dims {136, 200}, stride 272 bytes */
		rt_tmap mn = {0, 2, -1, 136, 64, 64, 128};
		CHECK(rt_cuda_tmap_encode(rt, &mn, d, 200, &map) == 0);
		a = last();
		CHECK(a[0] == CU_TENSOR_MAP_DATA_TYPE_UINT16 && a[3] == 136 && a[4] == 200 && a[5] == 272 &&
		      a[6] == 64 && a[7] == 64);
		/* M columns that break TMA's 16-byte rows never reach the driver */
		a = last();
		uint64_t before = a[3];
		CHECK(rt_cuda_tmap_encode(rt, &wg, d, 100, &map) == -1);
		CHECK_STR(precc_rt_last_error(), "cuda: a tensor map of 100 columns of 1 bytes (M = 100): "
		          "TMA needs 16-byte rows");
		CHECK(last()[3] == before);
	}
	CHECK(rt_cuda_sync(rt, NULL) == 0);
	CHECK(rt_cuda_dtoh(rt, back, d, sizeof back) == 0);
	CHECK(memcmp(host, back, sizeof back) == 0);
	CHECK(rt_cuda_memset8(rt, d, 0, sizeof host) == 0);
	CHECK(rt_cuda_dtoh(rt, back, d, sizeof back) == 0 && back[3] == 0.0f);
	CHECK(rt_cuda_free(rt, d) == 0);
	CHECK(rt_cuda_free(rt, d) == -1);
	CHECK_STR(precc_rt_last_error(), "cuda: cuMemFree: "
	          "CUDA_ERROR_INVALID_VALUE (invalid argument)");
	rt_cuda_module_unload(rt, mod);
	/* every call restored the caller's (empty) context stack */
	CHECK(fake_int("fake_cuda_depth") == 0);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "here";
	const char *lib = argc > 2 ? argv[2] : NULL;
	char want[RT_ERR_MAX];
	precc_rt *rt;

	parse_names();

	rt = precc_rt_open_backend(PRECC_BACKEND_CPU, why, sizeof why);
	CHECK(rt && precc_rt_backend(rt) == PRECC_BACKEND_CPU);
	CHECK_STR(why, "cpu: requested");
	precc_rt_close(rt);

	if (strcmp(mode, "here") == 0) {
		void *h;
		unsetenv("PRECC_LIBCUDA");
		h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		if (h) {
			printf("SKIP: libcuda.so.1 loads on this machine; the no-driver "
			       "fallback is covered by the nolib and fake modes\n");
			return SKIP_CODE;
		}
		snprintf(want, sizeof want, "cuda: cannot load libcuda.so.1: %s",
		         dlerror());
		CHECK(strstr(want, "libcuda.so.1: cannot open shared object file"));
		expect_unavailable(want);
	} else if (strcmp(mode, "nolib") == 0) {
		setenv("PRECC_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
		expect_unavailable("cuda: cannot load '/nonexistent/libcuda.so.1' "
		                   "(from PRECC_LIBCUDA): /nonexistent/libcuda.so.1: "
		                   "cannot open shared object file: No such file or "
		                   "directory");
	} else if (strcmp(mode, "notalib") == 0) {
		char path[] = "/tmp/precc_notalib_XXXXXX";
		int fd = mkstemp(path);
		static const char text[] = "this is a text file, not a shared library, "
		                           "padded so that the ELF header check fails "
		                           "rather than a short read.................\n";
		CHECK(fd >= 0 && write(fd, text, sizeof text - 1) > 0);
		close(fd);
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		CHECK(h == NULL);
		snprintf(want, sizeof want, "cuda: cannot load '%s' (from "
		         "PRECC_LIBCUDA): %s", path, dlerror());
		CHECK(strstr(want, "invalid ELF header"));
		setenv("PRECC_LIBCUDA", path, 1);
		expect_unavailable(want);
		unlink(path);
	} else if (strcmp(mode, "init_fail") == 0) {
		setenv("PRECC_LIBCUDA", lib, 1);
		setenv("FAKE_CUDA", "init_fail", 1);
		expect_unavailable("cuda: cuInit: CUDA_ERROR_NO_DEVICE (no "
		                   "CUDA-capable device is detected)");
	} else if (strcmp(mode, "no_device") == 0) {
		setenv("PRECC_LIBCUDA", lib, 1);
		setenv("FAKE_CUDA", "no_device", 1);
		expect_unavailable("cuda: no CUDA device (the driver loaded, "
		                   "cuDeviceGetCount found 0)");
	} else if (strcmp(mode, "missing") == 0) {
		setenv("PRECC_LIBCUDA", lib, 1);
		snprintf(want, sizeof want, "cuda: %s has no cuPointerGetAttribute (a "
		         "driver older than this precc's cuda.h, %d.%d?)", lib,
		         CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
		expect_unavailable(want);
	} else if (strcmp(mode, "fake") == 0 || strcmp(mode, "current") == 0) {
		int current = strcmp(mode, "current") == 0;
		setenv("PRECC_LIBCUDA", lib, 1);
		setenv("FAKE_CUDA", "ok", 1);
		fake = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
		CHECK(fake != NULL);
		if (!fake)
			return finish("test_backend");
		if (!current) {
			setenv("PRECC_DEVICE", "3", 1);
			rt = precc_rt_open_backend(PRECC_BACKEND_CUDA, why, sizeof why);
			CHECK(rt == NULL);
			CHECK_STR(why, "cuda: PRECC_DEVICE='3' is not a device index "
			          "(this machine has 1 device: 0..0)");
			setenv("PRECC_DEVICE", "0", 1);
		} else {
			CUcontext (*user)(void);
			CUresult (*push)(CUcontext);
			void *s = dlsym(fake, "fake_cuda_user_ctx");
			memcpy(&user, &s, sizeof s);
			s = dlsym(fake, "cuCtxPushCurrent_v2");
			memcpy(&push, &s, sizeof s);
			push(user());
		}
		rt = precc_rt_open_backend(PRECC_BACKEND_AUTO, why, sizeof why);
		CHECK(rt && precc_rt_backend(rt) == PRECC_BACKEND_CUDA);
		CHECK_STR(why, current
		          ? "cuda: device 0 'precc fake device' (sm_90, 132 SMs), the "
		            "caller's current context"
		          : "cuda: device 0 'precc fake device' (sm_90, 132 SMs), "
		            "primary context retained");
		CHECK(fake_int("fake_cuda_retained") == (current ? 0 : 1));
		if (rt && precc_rt_backend(rt) == PRECC_BACKEND_CPU) {
			rt_kernel k;
			CHECK(rt_cuda_kernel(rt, NULL, "k", &k) == -1);
			CHECK_STR(precc_rt_last_error(), "cuda: this runtime is not on "
			          "the cuda backend (it is cpu)");
		} else if (rt && !current)
			fake_path(rt);
		if (rt && current)
			CHECK(fake_int("fake_cuda_depth") == 1);
		precc_rt_close(rt);
		CHECK(fake_int("fake_cuda_retained") == 0);
	} else {
		fprintf(stderr, "test_backend: unknown mode '%s'\n", mode);
		return 2;
	}
	return finish("test_backend");
}
