/*
 * cg_ptx — print the PTX (or LLVM IR) of every function of an IR file as
 * a kernel, for the FileCheck tests:  cg_ptx [--target sm_90a] [--llvm]
 * [--threads N] FILE.ir. Errors go to stderr, exit 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "codegen.h"
#include "recipe.h"

/* the whole file, NUL-terminated (frontend/diag.c) */
static char *
slurp(const char *path)
{
	return read_file(path, 0, NULL, NULL);
}

int
main(int argc, char **argv)
{
	CodegenTarget t = {CG_SM90A, 0};
	const char *path = NULL;
	int llvm = 0, rc = 0;
	char err[1024];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--target") && i + 1 < argc) {
			int sm = codegen_sm_by_name(argv[++i]);
			if (sm < 0) {
				fprintf(stderr, "cg_ptx: unknown target '%s' (sm_89, sm_90, sm_90a)\n", argv[i]);
				return 2;
			}
			t.sm = (CodegenSm)sm;
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			t.threads = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--llvm")) {
			llvm = 1;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		fprintf(stderr, "usage: cg_ptx [--target SM] [--llvm] [--threads N] FILE.ir\n");
		return 2;
	}
	char *text = slurp(path);
	if (!text) {
		fprintf(stderr, "cg_ptx: cannot read %s\n", path);
		return 1;
	}
	Module *m = ir_parse(text, path, err, sizeof err);
	free(text);
	if (!m || ir_verify(m, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		ir_module_free(m);
		return 1;
	}
	for (int i = 0; i < m->nfn; i++) {
		char *out = NULL;
		CodegenKernel info;
		int r = llvm ? codegen_kernel_llvm(m->fn[i], &t, &out, &info, err, sizeof err)
		             : codegen_kernel_ptx(m->fn[i], &t, &out, &info, err, sizeof err);
		if (r) {
			fprintf(stderr, "%s\n", err);
			rc = 1;
			continue;
		}
		printf("// @%s: %s, %d threads, %s grid, %.1f ms in LLVM\n%s", m->fn[i]->name,
		       info.nphases > 1 ? "fused" : codegen_shape_name(info.shape), info.threads,
		       info.nphases > 1 ? "phased" : info.tiled ? "tiled" : "flat",
		       info.llvm_ms, out);
		free(out);
	}
	ir_module_free(m);
	return rc;
}
