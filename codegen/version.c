/*
 * version.c — which LLVM precc runs on (reported by --version and, later,
 * recorded in artifact manifests and cache keys).
 */
#include <stdio.h>
#include <llvm-c/Core.h>
#include "codegen.h"

const char *
codegen_llvm_version(void)
{
	static char buf[32];
	unsigned maj, min, pat;

	LLVMGetVersion(&maj, &min, &pat);
	snprintf(buf, sizeof buf, "%u.%u.%u", maj, min, pat);
	return buf;
}
