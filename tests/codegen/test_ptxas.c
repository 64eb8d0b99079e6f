/*
 * test_ptxas — generate every kernel of kernels/NAME.ir for sm_89, sm_90 and
 * sm_90a, run `ptxas -arch=SM -v` on each PTX and fail on any ptxas error
 * or any spill. Prints registers, spills and LLVM time per kernel, and the
 * markdown table of bench/RESULTS.md's "Kernel registers (ptxas)" section
 * (`test_ptxas DIR --markdown`). `--target SM` limits the targets (the
 * sm_90a kernels of kernels_sm90a/). ptxas's notes that it serialized or
 * fenced wgmma (C7508, C7510, C7514, C7515, C7517, C7519, or any other
 * "Potential Performance Loss: wgmma") fail like a spill; a
 * self-test injects an accumulator write into the first wgmma pipeline
 * and requires that failure. Exit 77 (skipped) without ptxas.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "codegen.h"
#include "recipe.h"

#define PTXAS "/usr/local/cuda/bin/ptxas"

/* the whole file, NUL-terminated (frontend/diag.c) */
static char *
slurp(const char *path)
{
	return read_file(path, 0, NULL, NULL);
}

static int
cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct Row {
	char file[64];
	char shape[32];
	int regs[NCGSM];
	int resident[NCGSM];      /* CTAs per SM */
	double ms[NCGSM];
} Row;

static const char *const wgmma_notes[] = {"(C7508)", "(C7510)", "(C7514)", "(C7515)", "(C7517)", "(C7519)",
                                          "Potential Performance Loss: wgmma"};

/* ptxas -v on ptx; *regs from "Used N registers", *smem from "N bytes
 * smem"; -1 on error or spill. */
static int
run_ptxas(const char *ptx, CodegenSm sm, int *regs, int *smem, char *log, size_t logsz)
{
	char tmpl[] = "/tmp/precc_cg_XXXXXX", cmd[512];
	int fd = mkstemp(tmpl), bad = 0;
	size_t len = strlen(ptx), used = 0;

	*regs = -1;
	*smem = 0;
	log[0] = 0;
	if (fd < 0 || write(fd, ptx, len) != (ssize_t)len) {
		snprintf(log, logsz, "cannot write %s", tmpl);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	snprintf(cmd, sizeof cmd, PTXAS " -arch=%s -v -o /dev/null %s 2>&1", codegen_sm_name(sm), tmpl);
	FILE *p = popen(cmd, "r");
	char line[1024];
	while (p && fgets(line, sizeof line, p)) {
		int st, ld, r;
		if (used + strlen(line) + 1 < logsz) {
			memcpy(log + used, line, strlen(line) + 1);
			used += strlen(line);
		}
		if (strstr(line, "error") || strstr(line, "fatal"))
			bad = 1;
		/* wgmma serialized or fenced by ptxas: as slow as a spill */
		for (int w = 0; w < (int)(sizeof wgmma_notes / sizeof *wgmma_notes); w++)
			if (strstr(line, wgmma_notes[w]))
				bad = 1;
		char *u = strstr(line, "Used ");
		if (u && sscanf(u, "Used %d registers", &r) == 1)
			*regs = r;
		char *sh = strstr(line, " bytes smem");
		if (sh) {
			while (sh > line && sh[-1] != ' ')
				sh--;
			*smem = atoi(sh);
		}
		char *s = strstr(line, "bytes spill stores");
		if (s) {
			while (s > line && s[-1] != ':' && s[-1] != ',')
				s--;
			if (sscanf(s, " %d bytes spill stores, %d bytes spill loads", &st, &ld) == 2 && (st || ld))
				bad = 1;
		}
	}
	int status = p ? pclose(p) : -1;
	unlink(tmpl);
	return bad || status != 0 || *regs < 0 ? -1 : 0;
}

/* What an SM of each target holds (CUDA C++ Programming Guide, "Technical
 * Specifications per Compute Capability": 8.9 and 9.0): registers
 * (allocated per warp in units of 256), threads, CTAs, shared memory (1 KiB
 * of it reserved per CTA), and the static shared memory a CTA may have. */
static const struct { int regs, threads, ctas, smem, smem_static; } sm_limits[NCGSM] = {
	[CG_SM89] = {65536, 1536, 24, 102400, 49152},
	[CG_SM90] = {65536, 2048, 32, 233472, 49152},
	[CG_SM90A] = {65536, 2048, 32, 233472, 49152},
};

/* CTAs of `threads` at `regs` registers and `smem` static bytes resident on
 * one SM of sm (0: the kernel cannot launch) */
static int
resident(CodegenSm sm, int threads, int regs, int smem, int dyn)
{
	int warps = (threads + 31) / 32, per_warp = (regs * 32 + 255) / 256 * 256;
	int n = sm_limits[sm].threads / threads;
	if (sm_limits[sm].ctas < n)
		n = sm_limits[sm].ctas;
	if (per_warp && sm_limits[sm].regs / (per_warp * warps) < n)
		n = sm_limits[sm].regs / (per_warp * warps);
	if (sm_limits[sm].smem / (smem + dyn + 1024) < n)
		n = sm_limits[sm].smem / (smem + dyn + 1024);
	return smem > sm_limits[sm].smem_static ? 0 : n;
}

/* The self-test of the wgmma check: ptx with `add.f32 %fN, %fN, 1` after
 * its first wgmma.mma_async (%fN its first accumulator) must fail:
 * ptxas fences the pipeline around it (C7517, C7519). */
static int
mutant_fails(const char *ptx, CodegenSm sm, char *log, size_t logsz)
{
	const char *w = strstr(ptx, "wgmma.mma_async"), *r = w ? strstr(w, "{%f") : NULL;
	const char *eol = r ? strchr(r, '\n') : NULL;
	int regs, smem, reg;

	if (!eol || sscanf(r, "{%%f%d", &reg) != 1)
		return 0;
	size_t at = (size_t)(eol - ptx) + 1, len = strlen(ptx);
	char ins[64];
	int il = snprintf(ins, sizeof ins, "\tadd.f32 %%f%d, %%f%d, 0f3F800000;\n", reg, reg);
	char *m = malloc(len + (size_t)il + 1);
	if (!m)
		return 0;
	memcpy(m, ptx, at);
	memcpy(m + at, ins, (size_t)il);
	memcpy(m + at + il, ptx + at, len - at + 1);
	int rc = run_ptxas(m, sm, &regs, &smem, log, logsz);
	free(m);
	return rc != 0;
}

/* the CTAs per SM that passes/fuse.c assumes of a cooperative kernel */
#define COOP_CTAS_PER_SM 4

int
main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "kernels";
	int markdown = 0, only = -1, selftest = 0;
	for (int a = 2; a < argc; a++)
		if (!strcmp(argv[a], "--markdown"))
			markdown = 1;
		else if (!strcmp(argv[a], "--target") && a + 1 < argc)
			only = codegen_sm_by_name(argv[++a]);
	char *names[256], err[1024], log[8192];
	int n = 0, fails = 0;
	Row rows[256];
	double total_ms = 0;
	int nk = 0;

	if (access(PTXAS, X_OK) != 0) {
		printf("skipped: %s not found (the CUDA toolkit's assembler checks registers and "
		       "spills)\n", PTXAS);
		return 77;
	}
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "test_ptxas: cannot open %s\n", dir);
		return 1;
	}
	for (struct dirent *de; (de = readdir(d)) && n < 256;) {
		size_t l = strlen(de->d_name);
		if (l > 3 && !strcmp(de->d_name + l - 3, ".ir"))
			names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof *names, cmp);
	for (int i = 0; i < n; i++) {
		char path[1024];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		char *text = slurp(path);
		Module *m = text ? ir_parse(text, names[i], err, sizeof err) : NULL;
		free(text);
		memset(&rows[i], 0, sizeof rows[i]);
		snprintf(rows[i].file, sizeof rows[i].file, "%.*s", (int)strlen(names[i]) - 3, names[i]);
		if (!m || m->nfn != 1 || ir_verify(m, err, sizeof err)) {
			fprintf(stderr, "FAIL %s: %s\n", names[i], m ? (m->nfn != 1 ? "one func per file" : err) : err);
			fails++;
			ir_module_free(m);
			continue;
		}
		for (int sm = 0; sm < NCGSM; sm++) {
			if (only >= 0 && sm != only)
				continue;
			CodegenTarget t = {(CodegenSm)sm, 0};
			CodegenKernel info;
			char *ptx = NULL;
			rows[i].regs[sm] = -1;
			if (codegen_kernel_ptx(m->fn[0], &t, &ptx, &info, err, sizeof err)) {
				fprintf(stderr, "FAIL %s %s: %s\n", names[i], codegen_sm_name(sm), err);
				fails++;
				continue;
			}
			snprintf(rows[i].shape, sizeof rows[i].shape, "%s",
			         info.nphases > 1 ? "fused" : codegen_shape_name(info.shape));
			rows[i].ms[sm] = info.llvm_ms;
			total_ms += info.llvm_ms;
			nk++;
			int smem = 0;
			if (run_ptxas(ptx, (CodegenSm)sm, &rows[i].regs[sm], &smem, log, sizeof log)) {
				fprintf(stderr, "FAIL %s %s: ptxas error or spill:\n%s", names[i],
				        codegen_sm_name(sm), log);
				fails++;
			} else {
				/* the launch limits the driver enforces: one CTA must fit
				 * (threads x registers, static shared memory); a cooperative
				 * kernel must fit the CTAs per SM its grid was sized for */
				int need = info.cooperative ? COOP_CTAS_PER_SM : 1;
				int r = resident((CodegenSm)sm, info.threads, rows[i].regs[sm], smem, info.smem);
				rows[i].resident[sm] = r;
				if (r < need) {
					fprintf(stderr, "FAIL %s %s: %d CTAs of %d threads at %d registers and %d "
					        "bytes of shared memory per SM, %s needs %d\n", names[i],
					        codegen_sm_name(sm), r, info.threads, rows[i].regs[sm], smem,
					        info.cooperative ? "a cooperative kernel" : "a launch", need);
					fails++;
				}
			}
			if (!selftest && strstr(ptx, "wgmma.mma_async")) {
				selftest = 1;
				printf("self-test: %s %s with an accumulator written inside its wgmma pipeline "
				       "must fail\n", names[i], codegen_sm_name(sm));
				if (!mutant_fails(ptx, (CodegenSm)sm, log, sizeof log)) {
					fprintf(stderr, "FAIL %s %s: self-test: an accumulator written inside the "
					        "wgmma pipeline passes the check\n", names[i], codegen_sm_name(sm));
					fails++;
				}
			}
			free(ptx);
		}
		ir_module_free(m);
	}
	if (markdown) {
		printf("| kernel | shape | sm_89 regs | sm_90 regs | sm_90a regs | LLVM ms (sm_90a) |\n");
		printf("| --- | --- | --- | --- | --- | --- |\n");
	}
	for (int i = 0; i < n; i++) {
		if (markdown)
			printf("| `%s` | %s | %d | %d | %d | %.1f |\n", rows[i].file, rows[i].shape,
			       rows[i].regs[CG_SM89], rows[i].regs[CG_SM90], rows[i].regs[CG_SM90A],
			       rows[i].ms[CG_SM90A]);
		else
			printf("%-18s %-16s regs sm_89 %3d  sm_90 %3d  sm_90a %3d   CTAs/SM %2d/%2d/%2d   "
			       "LLVM %.1f/%.1f/%.1f ms\n",
			       rows[i].file, rows[i].shape, rows[i].regs[CG_SM89], rows[i].regs[CG_SM90],
			       rows[i].regs[CG_SM90A], rows[i].resident[CG_SM89], rows[i].resident[CG_SM90],
			       rows[i].resident[CG_SM90A], rows[i].ms[CG_SM89], rows[i].ms[CG_SM90],
			       rows[i].ms[CG_SM90A]);
		free(names[i]);
	}
	printf("%d kernels x targets, %.1f ms in LLVM in all, %.1f ms per kernel; %d failures\n",
	       nk, total_ms, nk ? total_ms / nk : 0.0, fails);
	return fails ? 1 : 0;
}
