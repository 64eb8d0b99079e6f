/*
 * test_swcvt — the software conversions codegen emits (codegen/swcvt.c)
 * evaluated on the host with sw_eval, against ir/numerics.c: every
 * encode program (e4m3 e5m2 e2m1 e3m2 e2m3 x rne/rz/sr x sat/not) on all
 * 2^16 top halves of fp32 times a set of low halves around every rounding
 * boundary, plus a strided sweep; SR with edge and pseudo-random bits;
 * the MX e8m0 programs against precc_mx_scales. The LLVM side emits the
 * same instruction list one op per op (sw_emit); the second half JITs
 * what sw_emit and cg_philox build (LLVM IR for the host, through MCJIT)
 * and checks it against precc_encode / precc_mx_scales / ir/interp/philox.c on
 * the same inputs, so the LLVM side of the GPU path is checked too, up to
 * the NVPTX instruction selection that ptxas sees.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Target.h>
#include "cg.h"
#include "precc/interp.h"

static uint32_t
f2u(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return u;
}

static float
u2f(uint32_t u)
{
	float x;
	memcpy(&x, &u, 4);
	return x;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint32_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* every top half, or every 7th under ASan (10x slower) */
#if defined(__SANITIZE_ADDRESS__)
enum { HI_STEP = 7 };
#else
enum { HI_STEP = 1 };
#endif

static const uint16_t lows[] = {0, 1, 2, 0x7fff, 0x8000, 0x8001, 0xffff, 0xfffe, 0x4000,
                                0xc000, 0x1000, 0x0fff};

typedef uint32_t (*EncFn)(uint32_t, uint32_t);
typedef void (*PhiloxFn)(const uint32_t *, const uint32_t *, uint32_t *);

enum { NPROG = 64 };
static SwProg progs[NPROG];
static int nprog;
static EncFn jit[NPROG];

static LLVMExecutionEngineRef ee;
static Cg g;
static PhiloxFn jit_philox;
static EncFn jit_e2m1_sr, jit_e2m1_rne;

/* One host function per program, plus Philox; MCJIT owns the module. */
static int
jit_build(void)
{
	char *err = NULL, name[32];
	LLVMTypeRef at[2];

	cg_init(&g, CG_SM90, "swcvt_jit");
	char *triple = LLVMGetDefaultTargetTriple();
	LLVMSetTarget(g.mod, triple);
	LLVMDisposeMessage(triple);
	LLVMSetDataLayout(g.mod, "");
	at[0] = at[1] = g.i32;
	for (int i = 0; i < nprog; i++) {
		snprintf(name, sizeof name, "enc%d", i);
		LLVMValueRef fn = LLVMAddFunction(g.mod, name, LLVMFunctionType(g.i32, at, 2, 0));
		LLVMPositionBuilderAtEnd(g.b, LLVMAppendBasicBlockInContext(g.ctx, fn, "entry"));
		LLVMBuildRet(g.b, sw_emit(&g, &progs[i], LLVMGetParam(fn, 0), LLVMGetParam(fn, 1)));
	}
	LLVMValueRef sr = LLVMAddFunction(g.mod, "e2m1_sr", LLVMFunctionType(g.i32, at, 2, 0));
	LLVMPositionBuilderAtEnd(g.b, LLVMAppendBasicBlockInContext(g.ctx, sr, "entry"));
	LLVMBuildRet(g.b, cg_e2m1_sr(&g, LLVMGetParam(sr, 0), LLVMGetParam(sr, 1)));
	LLVMValueRef rn = LLVMAddFunction(g.mod, "e2m1_rne", LLVMFunctionType(g.i32, at, 2, 0));
	LLVMPositionBuilderAtEnd(g.b, LLVMAppendBasicBlockInContext(g.ctx, rn, "entry"));
	LLVMBuildRet(g.b, cg_e2m1_rne(&g, LLVMGetParam(rn, 0)));
	LLVMTypeRef pt[3] = {LLVMPointerTypeInContext(g.ctx, 0), LLVMPointerTypeInContext(g.ctx, 0),
	                     LLVMPointerTypeInContext(g.ctx, 0)};
	LLVMValueRef fn = LLVMAddFunction(g.mod, "philox", LLVMFunctionType(g.vd, pt, 3, 0));
	LLVMPositionBuilderAtEnd(g.b, LLVMAppendBasicBlockInContext(g.ctx, fn, "entry"));
	LLVMValueRef c[4], k[2];
	for (int i = 0; i < 4; i++) {
		LLVMValueRef ix = LLVMConstInt(g.i64, (unsigned)i, 0);
		c[i] = LLVMBuildLoad2(g.b, g.i32, LLVMBuildGEP2(g.b, g.i32, LLVMGetParam(fn, 0), &ix, 1, ""), "");
		if (i < 2)
			k[i] = LLVMBuildLoad2(g.b, g.i32, LLVMBuildGEP2(g.b, g.i32, LLVMGetParam(fn, 1), &ix, 1, ""), "");
	}
	cg_philox(&g, c, k[0], k[1]);
	for (int i = 0; i < 4; i++) {
		LLVMValueRef ix = LLVMConstInt(g.i64, (unsigned)i, 0);
		LLVMBuildStore(g.b, c[i], LLVMBuildGEP2(g.b, g.i32, LLVMGetParam(fn, 2), &ix, 1, ""));
	}
	LLVMBuildRetVoid(g.b);
	LLVMLinkInMCJIT();
	if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
		printf("no native target in this LLVM: JIT checks skipped\n");
		return 1;
	}
	if (LLVMCreateExecutionEngineForModule(&ee, g.mod, &err)) {
		printf("FAIL: MCJIT: %s\n", err);
		LLVMDisposeMessage(err);
		return -1;
	}
	g.mod = NULL;         /* owned by the engine now */
	for (int i = 0; i < nprog; i++) {
		snprintf(name, sizeof name, "enc%d", i);
		jit[i] = (EncFn)(uintptr_t)LLVMGetFunctionAddress(ee, name);
	}
	jit_philox = (PhiloxFn)(uintptr_t)LLVMGetFunctionAddress(ee, "philox");
	jit_e2m1_sr = (EncFn)(uintptr_t)LLVMGetFunctionAddress(ee, "e2m1_sr");
	jit_e2m1_rne = (EncFn)(uintptr_t)LLVMGetFunctionAddress(ee, "e2m1_rne");
	return 0;
}

static void
jit_free(void)
{
	if (ee)
		LLVMDisposeExecutionEngine(ee);
	cg_dispose(&g);
}

int
main(void)
{
	static const precc_format fmts[] = {PRECC_E4M3, PRECC_E5M2, PRECC_E2M1, PRECC_E3M2, PRECC_E2M3};
	static const precc_round rounds[] = {PRECC_RNE, PRECC_RZ, PRECC_SR};
	long checks = 0, fails = 0;

	for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++)
		for (size_t ri = 0; ri < 3; ri++)
			for (int sat = 0; sat < 2; sat++) {
				SwProg p;
				precc_format f = fmts[fi];
				precc_round r = rounds[ri];
				long bad = 0;
				if (sw_encode(&p, f, r, sat) == 0 && nprog < NPROG)
					progs[nprog++] = p;
				if (sw_encode(&p, f, r, sat)) {
					printf("FAIL: no program for %s %s sat=%d\n",
					       precc_format_get(f)->name, precc_round_name(r), sat);
					fails++;
					continue;
				}
				for (uint32_t hi = 0; hi < 0x10000; hi += HI_STEP) {
					int nl = r == PRECC_SR ? 4 : (int)(sizeof lows / sizeof *lows);
					for (int li = 0; li < nl + 2; li++) {
						uint32_t u = hi << 16 | (li < nl ? lows[li] : next() & 0xffff);
						uint32_t rb = r == PRECC_SR ? (li & 1 ? next() : (li & 2 ? 0xffffffffu : 0))
						                            : 0;
						uint64_t args[2] = {u, rb};
						uint32_t want = precc_encode(f, u2f(u), r, sat, rb);
						uint32_t got = (uint32_t)sw_eval(&p, args);
						checks++;
						if (got != want && bad++ < 5)
							printf("FAIL %s %s sat=%d x=0x%08x rbits=0x%08x: sw 0x%x, "
							       "precc_encode 0x%x\n", precc_format_get(f)->name,
							       precc_round_name(r), sat, u, rb, got, want);
					}
				}
				fails += bad;
			}
	/* MX scales: rceil, floor and TE's rceil for every element format */
	for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++)
		for (int rc = 0; rc < NMXMODE; rc++) {
			SwProg p;
			precc_format f = fmts[fi];
			float fmax = precc_format_get(f)->max;
			long bad = 0;
			sw_mx_e8m0(&p, f, rc);
			if (nprog < NPROG)
				progs[nprog++] = p;
			for (uint32_t hi = 0; hi < 0x10000; hi += HI_STEP)
				for (int li = 0; li < 6; li++) {
					uint32_t u = hi << 16 | (li < 4 ? lows[li] : next() & 0xffff);
					float a = fabsf(u2f(u));
					float r = rc == MX_RCEIL_TE ? a * (float)(1.0 / fmax) : a / fmax;
					uint8_t want;
					precc_mx_scales(&a, 1, f, rc == MX_FLOOR ? PRECC_MX_FLOOR
					                : rc == MX_RCEIL_TE ? PRECC_MX_RCEIL_TE : PRECC_MX_RCEIL, &want,
					                NULL, NULL, NULL);
					uint64_t args[2] = {f2u(a), f2u(r)};
					uint32_t got = (uint32_t)sw_eval(&p, args);
					checks++;
					if (got != want && bad++ < 5)
						printf("FAIL mx %s %s amax=0x%08x: sw 0x%x, precc_mx_scales 0x%x\n",
						       precc_format_get(f)->name, mx_mode_name(rc), u, got, want);
				}
			fails += bad;
		}
	printf("host evaluation: %ld checks, %ld failures\n", checks, fails);

	/* the same programs through LLVM IR, JIT-compiled for this CPU */
	int j = jit_build();
	if (j < 0)
		fails++;
	long jchecks = 0, jfails = 0;
	for (int i = 0; j == 0 && i < nprog; i++) {
		long bad = 0;
		for (uint32_t hi = 0; hi < 0x10000; hi += HI_STEP)
			for (int li = 0; li < 6; li++) {
				uint32_t u = hi << 16 | (li < 4 ? lows[li] : next() & 0xffff);
				uint32_t rb = li & 1 ? next() : 0xffffffffu * (uint32_t)(li >> 1 & 1);
				uint64_t args[2] = {u, rb};
				/* mx programs take |amax| and fl(|amax| / 6): any pair
				 * exercises the same instruction list */
				uint32_t want = (uint32_t)sw_eval(&progs[i], args);
				uint32_t got = jit[i](u, rb);
				jchecks++;
				if (got != want && bad++ < 5)
					printf("FAIL jit program %d x=0x%08x rbits=0x%08x: jit 0x%x, sw_eval 0x%x\n",
					       i, u, rb, got, want);
			}
		jfails += bad;
	}
	for (int i = 0; j == 0 && i < 100000; i++) {
		uint32_t ctr[4] = {next(), i & 1 ? next() : 0, (uint32_t)(i % 3), i & 2 ? next() : 0};
		uint32_t key[2] = {next(), next()}, want[4], got[4];
		precc_philox4x32_10(ctr, key, want);
		jit_philox(ctr, key, got);
		jchecks++;
		if (memcmp(want, got, sizeof want) && jfails++ < 5)
			printf("FAIL jit philox ctr %08x %08x %08x %08x\n", ctr[0], ctr[1], ctr[2], ctr[3]);
	}
	/* e2m1 SR with 16 random bits (cg_e2m1_sr, what the kernels emit):
	 * every fp32 top half with the low halves around the rounding
	 * boundaries and random ones, r at 0, 0xffff and random */
	for (uint32_t hi = 0; j == 0 && hi < 0x10000; hi++)
		for (int li = 0; li < 9; li++) {
			uint32_t u = hi << 16 | (li < 4 ? lows[li] : next() & 0xffff);
			uint32_t r = li % 3 == 0 ? 0 : li % 3 == 1 ? 0xffff : next() & 0xffff;
			float x;
			memcpy(&x, &u, 4);
			uint32_t want = precc_encode_sr(PRECC_E2M1, x, true, r, 16);
			uint32_t got = jit_e2m1_sr(u, r);
			jchecks++;
			if (got != want && jfails++ < 5)
				printf("FAIL jit e2m1 sr x=0x%08x r=0x%04x: jit 0x%x, precc_encode_sr 0x%x\n",
				       u, r, got, want);
			/* and RNE (cg_e2m1_rne) */
			want = precc_encode(PRECC_E2M1, x, PRECC_RNE, true, 0);
			got = jit_e2m1_rne(u, 0);
			jchecks++;
			if (got != want && jfails++ < 5)
				printf("FAIL jit e2m1 rne x=0x%08x: jit 0x%x, precc_encode 0x%x\n", u, got, want);
		}
	if (j == 0)
		printf("LLVM IR (JIT): %d programs + Philox + e2m1 SR and RNE, %ld checks, %ld failures\n", nprog,
		       jchecks, jfails);
	jit_free();
	fails += jfails;
	return fails ? 1 : 0;
}
