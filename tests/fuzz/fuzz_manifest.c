/* fuzz_manifest.c — the manifest reader (precc_rt_load): the input is
 * DIR/manifest.json beside the kernel files of the runtime tests' plan
 * (tests/runtime/Inputs/plan). Built twice: FUZZ_CUDA=0 loads on the cpu
 * backend (each kernel's IR parsed and checked), FUZZ_CUDA=1 on the fake
 * driver (PRECC_LIBCUDA, the kernel files read and "JIT"ed). A loaded
 * artifact also makes its scaling state. */
#include <dirent.h>
#include "fuzz.h"
#include "precc/precc_rt.h"

static precc_rt *rt;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char why[512], src[512], dst[512];
	DIR *d = opendir(PRECC_PLAN_DIR);
	struct dirent *e;

	(void)argc, (void)argv;
	if (!d)
		abort();
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 4 || strcmp(e->d_name + n - 4, ".ptx"))
			continue;
		snprintf(src, sizeof src, "%s/%s", PRECC_PLAN_DIR, e->d_name);
		snprintf(dst, sizeof dst, "%s/%s", fz_tmpdir(), e->d_name);
		FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
		int c;
		if (!in || !out)
			abort();
		while ((c = getc(in)) != EOF)
			putc(c, out);
		fclose(in);
		fclose(out);
	}
	closedir(d);
#if FUZZ_CUDA
	setenv("PRECC_LIBCUDA", PRECC_FAKE_CUDA, 1);
	rt = precc_rt_open_backend(PRECC_BACKEND_CUDA, why, sizeof why);
#else
	rt = precc_rt_open_backend(PRECC_BACKEND_CPU, why, sizeof why);
#endif
	if (!rt) {
		fprintf(stderr, "fuzz_manifest: no runtime: %s\n", why);
		abort();
	}
	precc_rt_close(rt);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[512];

	fz_write("manifest.json", data, size);
#if FUZZ_CUDA
	rt = precc_rt_open_backend(PRECC_BACKEND_CUDA, why, sizeof why);
#else
	rt = precc_rt_open_backend(PRECC_BACKEND_CPU, why, sizeof why);
#endif
	if (!rt)
		abort();
	if (precc_rt_load(rt, fz_tmpdir()) == 0) {
		precc_state *st = precc_rt_state_new(rt);
		precc_state_free(st);
	}
	precc_rt_close(rt);
	return 0;
}
