/*
 * target.c — the NVPTX side of LLVM: target initialisation, one target
 * machine per module (nvptx64-nvidia-cuda, sm_89 / sm_90 / sm_90a,
 * +ptx84: mma.sync with e4m3/e5m2 needs PTX 8.4), the verifier, the default<O3> pipeline and PTX emission to a
 * memory buffer. Every LLVM object made here is disposed here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include "cg.h"

static const char *const sm_names[NCGSM] = {
	[CG_SM89] = "sm_89", [CG_SM90] = "sm_90", [CG_SM90A] = "sm_90a",
};

const char *
codegen_sm_name(CodegenSm sm)
{
	return (unsigned)sm < NCGSM ? sm_names[sm] : "?";
}

int
codegen_sm_by_name(const char *name)
{
	for (int i = 0; name && i < NCGSM; i++)
		if (!strcmp(name, sm_names[i]))
			return i;
	return -1;
}

static once_flag init_once = ONCE_FLAG_INIT;

static void
init_nvptx(void)
{
	LLVMInitializeNVPTXTargetInfo();
	LLVMInitializeNVPTXTarget();
	LLVMInitializeNVPTXTargetMC();
	LLVMInitializeNVPTXAsmPrinter();
}

void
cg_init(Cg *g, CodegenSm sm, const char *modname)
{
	memset(g, 0, sizeof *g);
	g->sm = sm;
	g->ctx = LLVMContextCreate();
	g->mod = LLVMModuleCreateWithNameInContext(modname, g->ctx);
	LLVMSetTarget(g->mod, "nvptx64-nvidia-cuda");
	LLVMSetDataLayout(g->mod, "e-i64:64-i128:128-v16:16-v32:32-n16:32:64");
	g->b = LLVMCreateBuilderInContext(g->ctx);
	g->i1 = LLVMInt1TypeInContext(g->ctx);
	g->i8 = LLVMInt8TypeInContext(g->ctx);
	g->i16 = LLVMInt16TypeInContext(g->ctx);
	g->i32 = LLVMInt32TypeInContext(g->ctx);
	g->i64 = LLVMInt64TypeInContext(g->ctx);
	g->f16 = LLVMHalfTypeInContext(g->ctx);
	g->f32 = LLVMFloatTypeInContext(g->ctx);
	g->f64 = LLVMDoubleTypeInContext(g->ctx);
	g->vd = LLVMVoidTypeInContext(g->ctx);
	g->gptr = LLVMPointerTypeInContext(g->ctx, 1);
	g->sptr = LLVMPointerTypeInContext(g->ctx, 3);
}

void
cg_set_host(Cg *g)
{
	g->host = 1;
	g->gptr = g->sptr = LLVMPointerTypeInContext(g->ctx, 0);
}

void
cg_dispose(Cg *g)
{
	if (g->b)
		LLVMDisposeBuilder(g->b);
	if (g->mod)
		LLVMDisposeModule(g->mod);
	if (g->ctx)
		LLVMContextDispose(g->ctx);
	memset(g, 0, sizeof *g);
}

void
cg_annotate_threads(Cg *g, LLVMValueRef fn, int threads, int maxnreg)
{
	LLVMMetadataRef md[3] = {
		LLVMValueAsMetadata(fn),
		LLVMMDStringInContext2(g->ctx, "maxntidx", 8),
		LLVMValueAsMetadata(LLVMConstInt(g->i32, (unsigned)threads, 0)),
	};
	LLVMValueRef node = LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, md, 3));

	LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations", node);
	if (!maxnreg)
		return;
	int r = maxnreg > 255 ? 255 : maxnreg;
	md[1] = LLVMMDStringInContext2(g->ctx, "maxnreg", 7);
	md[2] = LLVMValueAsMetadata(LLVMConstInt(g->i32, (unsigned)r, 0));
	node = LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, md, 3));
	LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations", node);
}

void
cg_annotate_minctas(Cg *g, LLVMValueRef fn, int ctas)
{
	LLVMMetadataRef md[3] = {
		LLVMValueAsMetadata(fn),
		LLVMMDStringInContext2(g->ctx, "minctasm", 8),
		LLVMValueAsMetadata(LLVMConstInt(g->i32, (unsigned)ctas, 0)),
	};
	LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations",
	                            LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, md, 3)));
}

void
cg_byval_grid_constant(Cg *g, LLVMValueRef fn, int first, int n, int bytes, int align)
{
	LLVMTypeRef t = LLVMArrayType2(g->i8, (unsigned)bytes);
	unsigned kb = LLVMGetEnumAttributeKindForName("byval", 5);
	unsigned ka = LLVMGetEnumAttributeKindForName("align", 5);
	LLVMMetadataRef ix[8];

	if (n < 1 || n > 8)
		abort();
	for (int i = 0; i < n; i++) {
		unsigned a = (unsigned)(first + i) + 1;
		LLVMAddAttributeAtIndex(fn, a, LLVMCreateTypeAttribute(g->ctx, kb, t));
		LLVMAddAttributeAtIndex(fn, a, LLVMCreateEnumAttribute(g->ctx, ka, (uint64_t)align));
		ix[i] = LLVMValueAsMetadata(LLVMConstInt(g->i32, a, 0));
	}
	/* one node for all of them: LLVM 19 keeps the first grid_constant
	 * node of a function only */
	LLVMMetadataRef md[3] = {
		LLVMValueAsMetadata(fn),
		LLVMMDStringInContext2(g->ctx, "grid_constant", 13),
		LLVMMDNodeInContext2(g->ctx, ix, (size_t)n),
	};
	LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations",
	                            LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, md, 3)));
}

static char *
dup_range(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

int
cg_finish(Cg *g, int ptx, char **out, char *err, size_t errsz)
{
	char *msg = NULL, *triple_err = NULL;
	LLVMTargetRef tgt;
	LLVMTargetMachineRef tm;
	LLVMMemoryBufferRef mb = NULL;
	LLVMPassBuilderOptionsRef po;
	LLVMErrorRef e;
	int rc = -1;

	*out = NULL;
	if (LLVMVerifyModule(g->mod, LLVMReturnStatusAction, &msg)) {
		snprintf(err, errsz, "LLVM verifier: %s", msg ? msg : "?");
		LLVMDisposeMessage(msg);
		return -1;
	}
	LLVMDisposeMessage(msg);
	call_once(&init_once, init_nvptx);
	if (LLVMGetTargetFromTriple("nvptx64-nvidia-cuda", &tgt, &triple_err)) {
		snprintf(err, errsz, "no NVPTX target in this LLVM: %s", triple_err);
		LLVMDisposeMessage(triple_err);
		return -1;
	}
	tm = LLVMCreateTargetMachine(tgt, "nvptx64-nvidia-cuda", codegen_sm_name(g->sm), "+ptx84",
	                             LLVMCodeGenLevelAggressive, LLVMRelocDefault,
	                             LLVMCodeModelDefault);
	po = LLVMCreatePassBuilderOptions();
	e = getenv("PRECC_CG_O0") ? NULL : LLVMRunPasses(g->mod, "default<O3>", tm, po);
	LLVMDisposePassBuilderOptions(po);
	if (e) {
		msg = LLVMGetErrorMessage(e);
		snprintf(err, errsz, "LLVM O3: %s", msg);
		LLVMDisposeErrorMessage(msg);
		goto done;
	}
	if (!ptx) {
		msg = LLVMPrintModuleToString(g->mod);
		*out = msg ? dup_range(msg, strlen(msg)) : NULL;
		LLVMDisposeMessage(msg);
		rc = *out ? 0 : -1;
		goto done;
	}
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, g->mod, LLVMAssemblyFile, &msg, &mb)) {
		snprintf(err, errsz, "LLVM NVPTX: %s", msg ? msg : "?");
		LLVMDisposeMessage(msg);
		goto done;
	}
	*out = dup_range(LLVMGetBufferStart(mb), LLVMGetBufferSize(mb));
	LLVMDisposeMemoryBuffer(mb);
	rc = *out ? 0 : -1;
	if (rc)
		snprintf(err, errsz, "out of memory");
done:
	LLVMDisposeTargetMachine(tm);
	return rc;
}
