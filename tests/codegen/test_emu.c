/*
 * test_emu — every kernel of kernels/NAME.ir run on the host CPU and
 * compared bit for bit with the IR interpreter. The kernel is the LLVM
 * function codegen builds for the GPU, with the NVVM intrinsics (thread
 * and block ids, shfl.sync.bfly, bar.sync) and the inline PTX turned into
 * calls to the precc_emu_* functions of emu.c (codegen's host mode),
 * every load, store and atomic instrumented (emu_instrument), JIT-compiled
 * with MCJIT and run as one pthread per GPU thread on emu.c's GPU, which
 * also checks what compute-sanitizer's memcheck, racecheck and synccheck
 * do on a GPU. The launch follows the runtime's contract: the grid from
 * precc/grid.h, buffers exactly as large and as aligned as the runtime
 * requires, outputs poisoned except the atomically updated ones (the
 * manifest's zero_outputs). What it cannot check is the hardware itself
 * (the cvt forms are emulated with precc_encode, which numerics.cuda_ref
 * checks against CUDA's own code) and NVPTX/ptxas code generation.
 *
 * A gemm_grouped's %offs is data the run chooses (fill_offsets): experts
 * without tokens, one with a single token, unaligned counts, rows of no
 * expert; "# emu: offs_align=N" deals whole N-token units (a grouped
 * wgrad's 128-token blocks).
 *
 * Weights are shrunk from 4096x4096 to 512x512 so that the run stays
 * short; M = 128 unless the file says otherwise, and again 16, 80 or 144.
 * GEMM kernels run their mma.sync through precc_emu_mma (the warp's
 * fragments gathered with codegen/mma_frag.h's maps,
 * tests/codegen/test_mma_frag.c checks those against CuTe's) and compare
 * bit for bit with the interpreter's fp32_accum (accum=fp32, and promote:N
 * and fast:B summed in fp32): the emulated tensor core sums exactly in
 * fp32; their cp.async and ldmatrix run on emu.c's models, and a GEMM run
 * with any bank-conflicted ldmatrix phase fails. Self-tests at the end: a corrupted cvt, a lost mma product, a
 * GEMM without its cp.async.wait_groups, a GEMM with a misaligned
 * ldmatrix row, and one small broken kernel per sanitizer check (cp.async
 * read in flight, ldmatrix misaligned, ldmatrix rows that conflict) must
 * each be reported; ldmatrix x4 and x4.trans must put every bit where
 * CuTe's LDSM copy traits do.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Target.h>
#include "cg.h"
#include "emu.h"
#include "passes.h"
#include "precc/grid.h"
#include "precc/interp.h"
#include "recipe.h"

/* M of the run: 128, or what a file's "# emu: m=N" line says (a GEMM's
 * partial tiles along M) */
static long M = 128;
/* buffers are exactly as aligned as the runtime requires */
#define BUF_ALIGN PRECC_BUFFER_ALIGN
/* "# emu: finite": no NaN or inf inputs at all (an amax output would
 * otherwise be NaN and prove nothing) */
static int finite_only;
/* "# emu: moderate": finite, moderate magnitudes only (2^-8 .. 2^4, and
 * zeros): a GEMM of a build (emu_build.sh) whose K or f16 output would
 * otherwise make most results inf or NaN, which prove little */
static int moderate;
/* "# emu: scale_inv=X": every tensorwise f32 scale_inv is X (a GEMM whose
 * fl(sa * sb) overflows, 0 = drawn as usual); "# emu: max=V": 8-bit data
 * codes of magnitude <= V only (with such scales, finite results) */
static float scale_inv_all, code_max;
/* Ms that divide no tile and no 1x128 block: each kernel with a dim M also
 * runs at one of these that is a multiple of its m_multiple */
static const long extra_m[3] = {16, 80, 144};
static int extra_run;
/* cooperative kernels run again on 3 CTAs, each looping over its tiles */
static int coop_small;
/* the kernel as passes/schedule.c schedules it now (a second parse of the
 * file): its tile and grid figures, compared with codegen's */
static const Func *sched_fn;
static int sched_checked;

/* One term of a schedule grid= figure at M: "11", "M", "M/64" (ceil). */
static long
grid_term(const char *s, const char **end)
{
	long v;
	if (*s == 'M') {
		s++;
		v = M;
		if (*s == '/') {
			long d = strtol(s + 1, (char **)&s, 10);
			v = d > 0 ? (M + d - 1) / d : -1;
		}
	} else
		v = strtol(s, (char **)&s, 10);
	*end = s;
	return v;
}

/* schedule's grid= must be codegen's where both tile the data alike
 * (tile= equal to codegen's tile): 0, or -1 with a FAIL line. */
static int
check_schedule(const CodegenKernel *info, unsigned gx, unsigned gy, const char *file)
{
	const char *tile = sched_fn ? sched_fn->pattr[PA_TILE] : NULL;
	const char *grid = sched_fn ? sched_fn->pattr[PA_GRID] : NULL;
	long tr, tc;
	if (!tile || !grid || !info->tiled || info->nphases > 1
	    || sscanf(tile, "%ldx%ld", &tr, &tc) != 2 || tr != info->tile_rows || tc != info->tile_cols)
		return 0;
	const char *p;
	long a = grid_term(grid, &p), b = *p == 'x' ? grid_term(p + 1, &p) : 1;
	sched_checked++;
	if (a == (long)gy && b == (long)gx)
		return 0;
	printf("FAIL %s: schedule says tile=%s grid=%s (%ldx%ld at M=%ld), codegen launches %ux%u "
	       "tiles of %ldx%ld\n", file, tile, grid, a, b, M, gy, gx, tr, tc);
	return -1;
}

/* ---- inputs --------------------------------------------------------- */
static uint64_t rng = 0x2545f4914f6cdd1dULL;

static uint32_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* The blocks of a param that an in-kernel amax reduces (1xB, BxB,
 * rowwise, columnwise, over x or over transpose(x)), in x's coordinates:
 * every 16 blocks, blocks 1..4 are all zero, all below eps, all NaN and
 * all at the format's max, so that the scale of each kind of block is
 * checked (eps clamp, amax 0, NaN, fmax / amax at the top of the range).
 * Tensorwise amaxes and params no amax reads get none. */
typedef struct Blocks { long br, bc, cols; } Blocks;

static Blocks
blocks_of(const Func *f, int v, long rows, long cols)
{
	Blocks b = {0, 0, cols};
	for (int i = 0; i < f->nins && !b.br; i++) {
		const Ins *in = &f->ins[i];
		if (in->op != OP_amax || in->narg < 1)
			continue;
		const Ins *src = ir_def_ins(f, in->arg[0]);
		int t = src && src->op == OP_transpose && src->arg[0] == v;
		if (in->arg[0] != v && !t)
			continue;
		long b0 = in->type.block[0], b1 = in->type.rank > 1 ? in->type.block[1] : 0;
		if (b0 == BLOCK_GROUP)   /* {gx*}: rows of zeros, tiny, NaN or max in any expert */
			b0 = 1;
		b.br = t ? (b1 ? b1 : rows) : (b0 ? b0 : rows);
		b.bc = t ? (b0 ? b0 : cols) : (b1 ? b1 : cols);
		if (b.br >= rows && b.bc >= cols)
			b.br = b.bc = 0;    /* one block: tensorwise */
	}
	return b;
}

enum { K_NONE, K_ZERO, K_TINY, K_NAN, K_MAX };

static int
block_kind(const Blocks *b, long r, long c)
{
	if (!b || !b->br || finite_only)
		return K_NONE;
	long nbc = (b->cols + b->bc - 1) / b->bc, k = ((r / b->br) * nbc + c / b->bc) % 16;
	return k >= 1 && k <= 4 ? (int)k : K_NONE;
}

/* A value of every kind: mostly moderate magnitudes, a few rows with
 * specials (NaN and inf only in rows 5 and 9: one block each), and the
 * special blocks above (below eps: |x| < 2^-40 < 1e-12). */
static float
sample(long r, long i, int kind, float fmax)
{
	uint32_t k = next() % 64;
	switch (kind) {
	case K_ZERO: return k & 1 ? -0.0f : 0.0f;
	case K_TINY: return (k & 1 ? -1 : 1) * ldexpf(1.0f + (float)(next() % 1024) / 1024.0f, -50 + (int)(k % 8));
	case K_NAN: return NAN;
	case K_MAX: return k & 1 ? -fmax : fmax;
	}
	if (moderate) {
		if (k == 0)
			return 0.0f;
		float mag = ldexpf(1.0f + (float)(next() % 1024) / 1024.0f, (int)(next() % 12) - 8);
		return next() & 1 ? -mag : mag;
	}
	if (finite_only)
		r = 0;
	if (r == 5 && i % 97 == 3)
		return NAN;
	if (r == 9 && i % 89 == 1)
		return (i & 1) ? INFINITY : -INFINITY;
	if (k == 0)
		return 0.0f;
	if (k == 1)
		return -0.0f;
	if (k == 2)
		return ldexpf(1.0f, -130) * (float)(next() % 7);   /* subnormal */
	if (k == 3)
		return (next() & 1 ? 1 : -1) * 1e30f;
	float mag = ldexpf(1.0f + (float)(next() % 1024) / 1024.0f, (int)(next() % 24) - 12);
	return next() & 1 ? -mag : mag;
}

static void
fill(void *buf, precc_format f, long rows, long cols, int is_state, const Blocks *bl)
{
	long n = rows * cols;
	/* the format's largest finite value (bf16 0x7f7f, fp16 65504, FLT_MAX) */
	float fmax = f == PRECC_BF16 ? precc_decode(f, 0x7f7f) : f == PRECC_FP16 ? 65504.0f : FLT_MAX;
	for (long i = 0; i < n; i++) {
		float v;
		if (is_state)
			v = ldexpf(1.0f + (float)(next() % 256) / 256.0f, (int)(next() % 16) - 8);
		else
			v = sample(i / cols, i, block_kind(bl, i / cols, i % cols), fmax);
		switch (f == PRECC_E2M1 ? 1 : precc_interp_elem_bytes(f)) {
		case 4: ((float *)buf)[i] = v; break;
		case 2: {
			uint32_t c = precc_encode(f, v, PRECC_RNE, false, 0);
			/* fp16 overflows where bf16 does not: inf only in rows 5, 9 */
			if (isfinite(v) && !isfinite(precc_decode(f, c)))
				c = precc_encode(f, ldexpf(v, -100), PRECC_RNE, false, 0);
			((uint16_t *)buf)[i] = (uint16_t)c;
			break;
		}
		default: {
			/* codes; e2m1 two 4-bit codes a byte, low nibble first. NaN
			 * and inf codes only in rows 5 and 9, as sample() does: a
			 * GEMM's dot products then mostly hold none */
			uint32_t c = next() & (f == PRECC_E2M1 ? 0x0f : 0xff);
			long r = finite_only ? 0 : i / cols;
			if (is_state)   /* 8-bit scales: moderate values */
				c = precc_encode(f, v, PRECC_RNE, true, 0);
			while (r != 5 && r != 9 && !is_state && !isfinite(precc_decode(f, c)))
				c = next() & 0xff;
			while (code_max > 0 && !is_state && !(fabsf(precc_decode(f, c)) <= code_max))
				c = next() & (f == PRECC_E2M1 ? 0x0f : 0xff);
			precc_interp_set_code(buf, f, (size_t)i, c);
			break;
		}
		}
	}
}


/* "# emu: offs_align=N": a grouped GEMM's offsets are multiples of N
 * (a group=k's 1x128 token blocks, which the interpreter requires) */
static long offs_align = 1;
/* "# emu: offs_short=N": the last expert ends N tokens before M (with
 * offs_align: its last block partial, the tokens after it no expert's) */
static long offs_short;

/* A gemm_grouped's %offs (i32[ng], the end of each expert's rows or
 * tokens) at m: experts 0, 8, 16, .. without tokens, expert 1 with one,
 * half the others in expert 2 (several row tiles, the last partial), the
 * rest spread at random (unaligned counts, most of them 0 or 1 with 256
 * experts), and m / 16 rows of no expert at the end (zero in the result);
 * with offs_align, units of offs_align tokens: expert 0 none, expert 1
 * one, the others dealt round-robin from expert 2. */
static void
fill_offsets(int32_t *o, long ng, long m)
{
	long cnt[1024] = {0}, rows = m / offs_align, at = 0;
	if (ng > 1024)
		abort();
	rows -= offs_align == 1 ? m / 16 : 0;
	if (ng > 1 && rows > 0)
		cnt[1] = 1, rows--;
	for (long g = 2; offs_align > 1 && rows > 0 && ng > 2; g = g + 1 < ng ? g + 1 : 2)
		cnt[g]++, rows--;   /* whole blocks: round-robin, expert 0 empty */
	for (; rows > 0; rows--) {
		long g = next() % 2 && ng > 2 ? 2 : (long)(next() % (uint32_t)ng);
		if (g % 8 == 0 || g == 1)
			g = ng > 2 ? 2 : 0;
		cnt[g]++;
	}
	for (long g = 0; g < ng; g++)
		o[g] = (int32_t)(at += cnt[g] * offs_align);
	if (offs_short && ng > 1 && o[ng - 1] - offs_short >= o[ng - 2])
		o[ng - 1] -= (int32_t)offs_short;
}

/* How many of a GEMM result's n elements must be live (finite, nonzero):
 * all, but a grouped GEMM's padding rows past offs[G-1] (group=m) and the
 * [N, K] of an expert without tokens (group=k) are zero by definition
 * (docs/ir.md, gemm_grouped), and small M leaves many experts empty.
 * gg: the kernel's gemm_grouped (or NULL), o: its offsets as filled. */
static size_t
grouped_live(const Func *f, const Ins *gg, const int32_t *o, long r, long c, size_t n)
{
	if (!gg || !o)
		return n;
	long ng = f->val[gg->arg[2]].type.dim[0], live = 0;
	if (!gg->group_k)
		return (size_t)(o[ng - 1] < r ? o[ng - 1] : r) * (size_t)c;
	for (long g = 0; g < ng; g++)
		live += o[g] > (g ? o[g - 1] : 0);
	return r % ng ? n : (size_t)(live * (r / ng) * c);
}

/* the whole file, NUL-terminated (frontend/diag.c) */
static char *
slurp(const char *path)
{
	return read_file(path, 0, NULL, NULL);
}

/* in-place textual substitution (same or shorter replacement) */
static void
subst(char *s, const char *from, const char *to)
{
	size_t lf = strlen(from), lt = strlen(to);
	char *p;

	while ((p = strstr(s, from))) {
		memmove(p + lt, p + lf, strlen(p + lf) + 1);
		memcpy(p, to, lt);
	}
}

static long
extent(long d)
{
	return d >= 0 ? d : (M + (-d) - 1) / (-d);
}

/* JIT kfn of mod (which it takes) behind void precc_emu_entry(ptr args),
 * args[i] the address of parameter i's value: the externals must all be
 * emulated ones, the kernel's accesses are instrumented (memcheck,
 * racecheck). NULL, with a FAIL line, on failure. */
/* The constant globals of the last JIT-compiled module. */
typedef struct ConstGlob { const void *p; size_t bytes; const char *name; } ConstGlob;
static ConstGlob const_glob[16];
static int nconst_glob;

/* wrap: void NAME(ptr args) calling kfn with args[i] (see jit) */
static void
wrap_entry(LLVMModuleRef mod, LLVMBuilderRef b, LLVMValueRef kfn, const char *name)
{
	LLVMContextRef cx = LLVMGetModuleContext(mod);
	LLVMTypeRef pt = LLVMPointerTypeInContext(cx, 0), i64 = LLVMInt64TypeInContext(cx);
	LLVMTypeRef kty = LLVMGlobalGetValueType(kfn);
	LLVMValueRef wrap = LLVMAddFunction(mod, name,
	                                    LLVMFunctionType(LLVMVoidTypeInContext(cx), &pt, 1, 0));
	LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(cx, wrap, "entry"));
	unsigned np = LLVMCountParams(kfn);
	LLVMValueRef kargs[64];
	for (unsigned i = 0; i < np && i < 64; i++) {
		LLVMValueRef ix = LLVMConstInt(i64, i, 0);
		LLVMValueRef slotp = LLVMBuildGEP2(b, pt, LLVMGetParam(wrap, 0), &ix, 1, "");
		LLVMTypeRef ty = LLVMTypeOf(LLVMGetParam(kfn, i));
		LLVMValueRef v = LLVMBuildLoad2(b, pt, slotp, "");
		kargs[i] = ty == pt ? v : LLVMBuildLoad2(b, ty, v, "");
	}
	LLVMBuildCall2(b, kty, kfn, kargs, np, "");
	LLVMBuildRetVoid(b);
}

/* The bulk entry of the last module jit compiled (CG_BULK_ENTRY), or NULL. */
static void (*jit_bulk)(void **);

static void (*jit(LLVMModuleRef mod, LLVMValueRef kfn, LLVMExecutionEngineRef *ee,
                  const char *file))(void **)
{
	LLVMContextRef cx = LLVMGetModuleContext(mod);
	LLVMBuilderRef b = LLVMCreateBuilderInContext(cx);
	char *msg = NULL;

	*ee = NULL;
	/* every external the kernel calls must be an emulated one: an
	 * intrinsic or special register without a host model stops here */
	for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) {
		size_t nl;
		const char *nm = LLVMGetValueName2(fn, &nl);
		int known = !LLVMIsDeclaration(fn) || (!strncmp(nm, "llvm.", 5) && strncmp(nm, "llvm.nvvm.", 10));
		for (int i = 0; !known && i < emu_nfns; i++)
			known = !strcmp(nm, emu_fns[i]);
		if (!known) {
			printf("FAIL %s: the emulator has no model of %s\n", file,
			       strncmp(nm, "precc_emu_unknown:", 18) ? nm : nm + 18);
			goto fail;
		}
	}
	for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn))
		if (!LLVMIsDeclaration(fn))
			emu_gpu_nan(mod, fn);
	emu_instrument(mod, kfn);
	wrap_entry(mod, b, kfn, "precc_emu_entry");
	LLVMValueRef bulk = LLVMGetNamedFunction(mod, CG_BULK_ENTRY);
	if (bulk) {
		emu_instrument(mod, bulk);
		wrap_entry(mod, b, bulk, "precc_emu_entry_bulk");
	}
	char *triple = LLVMGetDefaultTargetTriple();
	LLVMSetTarget(mod, triple);
	LLVMDisposeMessage(triple);
	LLVMSetDataLayout(mod, "");
	if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
		printf("FAIL %s: verifier: %s\n", file, msg);
		LLVMDisposeMessage(msg);
		goto fail;
	}
	LLVMDisposeMessage(msg);
	/* internal globals have no address MCJIT will tell: make them
	 * external so memcheck can register them below */
	for (LLVMValueRef gv = LLVMGetFirstGlobal(mod); gv; gv = LLVMGetNextGlobal(gv))
		if (LLVMGetInitializer(gv) && LLVMGetLinkage(gv) == LLVMInternalLinkage)
			LLVMSetLinkage(gv, LLVMExternalLinkage);
	struct LLVMMCJITCompilerOptions o;
	LLVMInitializeMCJITCompilerOptions(&o, sizeof o);
	o.OptLevel = 2;
	if (LLVMCreateMCJITCompilerForModule(ee, mod, &o, sizeof o, &msg)) {
		printf("FAIL %s: MCJIT: %s\n", file, msg);
		LLVMDisposeMessage(msg);
		*ee = NULL;
		goto fail;
	}
	for (int i = 0; i < emu_nfns; i++) {
		LLVMValueRef fn = LLVMGetNamedFunction(mod, emu_fns[i]);
		if (fn)
			LLVMAddGlobalMapping(*ee, fn, emu_addr[i]);
	}
	LLVMDisposeBuilder(b);
	/* the module's own constant tables (pow2=log2's precc_log2_up): read
	 * only regions for memcheck, as the GPU's constant globals */
	nconst_glob = 0;
	LLVMTargetDataRef td = LLVMGetExecutionEngineTargetData(*ee);
	for (LLVMValueRef gv = LLVMGetFirstGlobal(mod); gv && nconst_glob < 16;
	     gv = LLVMGetNextGlobal(gv)) {
		if (!LLVMGetInitializer(gv))
			continue;
		const char *name = LLVMGetValueName(gv);
		uint64_t a = LLVMGetGlobalValueAddress(*ee, name);
		if (a)
			const_glob[nconst_glob++] = (ConstGlob){(const void *)(uintptr_t)a,
				(size_t)LLVMABISizeOfType(td, LLVMGlobalGetValueType(gv)), name};
	}
	jit_bulk = bulk ? (void (*)(void **))(uintptr_t)LLVMGetFunctionAddress(*ee,
	                                                 "precc_emu_entry_bulk") : NULL;
	return (void (*)(void **))(uintptr_t)LLVMGetFunctionAddress(*ee, "precc_emu_entry");
fail:
	LLVMDisposeBuilder(b);
	LLVMDisposeModule(mod);
	return NULL;
}

static int check_bulk(const Func *f, const CodegenKernel *info, const char *file);

/* A persistent GEMM's tile order: CTA cta of ncta walks tiles t = cta,
 * cta + ncta, ... < nm x nn, each at (m-block, n-block) by DeepGEMM's
 * get_swizzled_block_idx with 8 n-blocks per group (deepseek-ai/DeepGEMM
 * deep_gemm/include/deep_gemm/scheduler.cuh; as carried in
 * microsoft/onnxruntime 043246f6 onnxruntime/contrib_ops/cuda/llm/
 * deep_gemm/scheduler.cuh:49-62, NormalScheduler::get_next_block). Its TMA
 * loads of K 0 (the first stage of each tile) must name A's rows BM m
 * and B's rows BN n (the kernel's tile) in that order, tile after tile:
 * one box at (0, row) of a K-major operand's map, one at (row + 64j, 0)
 * for each 64 rows of an MN-major one's (the map of its transpose: K down
 * the rows). */
static int
check_tile_order(const CodegenKernel *info, const void *tma, const void *tmb, long M, unsigned ncta,
                 const char *file)
{
	enum { GROUP_N = 8 };
	long rows[2];
	const CodegenTmap *tm = info->tmap;
	for (int o = 0; o < 2; o++) {
		long r = tm[o].mn_major ? tm[o].cols : tm[o].rows;
		rows[o] = r < 0 ? M : r;
	}
	long bm = info->tile_rows, bn = info->tile_cols;
	long nm = (rows[0] + bm - 1) / bm, nn = (rows[1] + bn - 1) / bn, ntiles = nm * nn;
	const EmuTmaLoad *ld;
	int nld = emu_tma_loads(&ld);
#define OPND(l) ((l).tmap == tmb)
#define KOF(l) (tm[OPND(l)].mn_major ? (l).c1 : (l).c0)
#define ROWOF(l) (tm[OPND(l)].mn_major ? (l).c0 : (l).c1)
	for (unsigned cta = 0; cta < ncta; cta++) {
		int i = 0;
		for (long t = cta; t < ntiles; t += ncta) {
			long per_group = nm * GROUP_N, first_n = t / per_group * GROUP_N;
			long nin = nn - first_n < GROUP_N ? nn - first_n : GROUP_N;
			long mb = t % per_group / nin, nb = first_n + t % per_group % nin;
			long want[2] = {bm * mb, bn * nb};
			for (int o = 0; o < 2; o++)
				for (int j = 0; j < (tm[o].mn_major ? (o ? bn : bm) / 64 : 1); j++) {
					while (i < nld && (ld[i].cta != cta || KOF(ld[i]) != 0))
						i++;
					if (i == nld || OPND(ld[i]) != o || ROWOF(ld[i]) != want[o] + 64 * j) {
						printf("FAIL %s: CTA %u of %u, tile %ld: want its %s load at row %ld, got %s %ld\n",
						       file, cta, ncta, t, o ? "B" : "A", want[o] + 64 * j,
						       i == nld ? "none" : OPND(ld[i]) ? "B" : "A", i == nld ? -1L : (long)ROWOF(ld[i]));
						return -1;
					}
					i++;
				}
		}
		for (; i < nld; i++)
			if (ld[i].cta == cta && KOF(ld[i]) == 0) {
				printf("FAIL %s: CTA %u of %u loads a tile past its last\n", file, cta, ncta);
				return -1;
			}
	}
#undef OPND
#undef KOF
#undef ROWOF
	return 0;
}

/* A grouped GEMM's tile order on wgmma (k_gemm_grouped_sm90.c), group=m:
 * DeepGEMM's grouped scheduler (deep_gemm/include/deep_gemm/scheduler.cuh,
 * get_next_block over the groups' blocks), recomputed from the offsets:
 * every expert with rows its ceil(rows / BM) x ceil(N / BN) tiles, row
 * tile by row tile, then the rows of no expert (no loads). CTA cta of ncta
 * walks t = cta, cta + ncta, ..; its loads of A at K 0 must name the rows
 * of its tiles in order, each tile's first row the expert's first plus a
 * whole number of BM: a tile that straddled two experts would start
 * elsewhere. (A K-major A: one box at (0, row).) */
static int
check_grouped_order(const CodegenKernel *info, long bm, const void *tma, const int32_t *offs, long ng, long N,
                    unsigned ncta, const char *file)
{
	long bn = info->tile_cols, nn = (N + bn - 1) / bn;
	const EmuTmaLoad *ld;
	int nld = emu_tma_loads(&ld);
	long nt = 0, cap = 0, *row = NULL;
	for (long g = 0, st = 0; g < ng; st = offs[g], g++)
		for (long r = st; r < offs[g]; r += bm)
			for (long j = 0; j < nn; j++) {
				if (nt == cap && !(row = realloc(row, sizeof *row * (size_t)(cap = cap ? 2 * cap : 64))))
					abort();
				row[nt++] = r;
			}
	int rc = 0;
	for (unsigned cta = 0; cta < ncta && !rc; cta++) {
		int i = 0;
		for (long t = cta; t < nt && !rc; t += ncta) {
			while (i < nld && (ld[i].cta != cta || ld[i].tmap != tma || ld[i].c0 != 0))
				i++;
			if (i == nld || ld[i].c1 != row[t]) {
				printf("FAIL %s: CTA %u of %u, grouped tile %ld: want its A load at row %ld, got %ld\n", file,
				       cta, ncta, t, row[t], i == nld ? -1L : (long)ld[i].c1);
				rc = -1;
			}
			i++;
		}
		for (; i < nld && !rc; i++)
			if (ld[i].cta == cta && ld[i].tmap == tma && ld[i].c0 == 0) {
				printf("FAIL %s: CTA %u of %u loads A past its last grouped tile\n", file, cta, ncta);
				rc = -1;
			}
	}
	free(row);
	return rc;
}

static int check_kernel(const Func *f, const char *file);

/* PRECC_EMU_ONCE=1 (the sanitized build's ctest: its checks are of the
 * emulator's and codegen's own C, which one run a kernel covers): each
 * kernel at its first M only, and every third tile of --tiles. The
 * unsanitized suite runs them all. */
static int emu_once;

/* --tiles: the wgmma GEMM f at every tile its family generates
 * (codegen_gemm_wgmma_shape: 64, 128, 256 rows by 16..256 columns in
 * steps of 16, those that fit registers and shared memory), each on 2
 * CTAs against the interpreter; the failures. */
static int
check_tiles(Func *f, const char *file)
{
	char why[256], tile[32];
	int fails = 0, runs = 0;
	static const int bms[] = {64, 128, 256};

	if (!f->kernel)
		return 0;
	for (int i = 0; i < 3; i++)
		for (int bn = 16; bn <= 256; bn += 16) {
			CodegenGemmShape s;
			if (!codegen_gemm_wgmma_shape(f, bms[i], bn, &s, why, sizeof why))
				continue;
			if (emu_once && runs++ % 3)
				continue;
			snprintf(tile, sizeof tile, "%dx%d", bms[i], bn);
			ir_set_attr(f->pattr, PA_TILE, "%s", tile);
			printf("tile %-8s %d stages, %d bytes of shared memory, %d accumulators a thread: ", tile,
			       s.stages, s.smem, s.acc_regs);
			fails += check_kernel(f, file) < 0;
			runs += !emu_once;
		}
	if (!runs) {
		printf("FAIL %s: no tile the wgmma family generates (%s)\n", file, why);
		fails++;
	}
	return fails;
}

/* Run one kernel on the host and against the interpreter; 0 if equal. */
/* the target the kernels are generated for: sm_90, or --target sm_90a
 * (tests/codegen/kernels_sm90a: the wgmma family) */
static CodegenSm emu_sm = CG_SM90;

/* The code generated for kernel `code`, run on the buffers, grid and
 * column count of f (code itself, or code at another column count:
 * ir_func_recols), against the interpreter running f; *out: the launch
 * info. */
static int
check_kernel_as(const Func *code, const Func *f, const char *file, CodegenKernel *out)
{
	Cg g;
	CodegenTarget t = {emu_sm, 0};
	CodegenKernel info;
	char err[1024];
	int rc = -1;
	LLVMExecutionEngineRef ee = NULL;
	void (*entry)(void **);
	void *buf[64] = {0}, *raw[64] = {0};
	void *args[64];
	IrInterp *ip = NULL;

	cg_init(&g, emu_sm, code->name);
	cg_set_host(&g);
	if (cg_kernel_module(&g, code, &t, &info, err, sizeof err)) {
		printf("FAIL %s: %s\n", file, err);
		cg_dispose(&g);
		return -1;
	}
	*out = info;
	if ((extra_run && !info.has_m) || (info.has_m && M % info.m_multiple)
	    || (coop_small && !info.cooperative && !info.persistent)) {
		cg_dispose(&g);
		return 1;     /* this M is not one the kernel takes */
	}
	LLVMModuleRef mod = g.mod;
	g.mod = NULL;     /* jit owns it now */
	entry = jit(mod, g.fn, &ee, file);
	if (!entry) {
		cg_dispose(&g);
		return -1;
	}

	/* buffers: params filled, outputs poisoned; the interpreter gets the params */
	IrInterpOpts io;
	ir_interp_opts_init(&io);
	io.m = M;
	io.fp32_accum = true;  /* promote:N and fast:B in fp32, as precc_emu_mma sums */
	io.threads = 2;
	io.seed = 0x0123456789abcdefULL;
	ip = ir_interp_new(f, &io, err, sizeof err);
	if (!ip) {
		printf("FAIL %s: interpreter: %s\n", file, err);
		goto done;
	}
	for (int i = 0; i < info.nparams; i++) {
		int v = info.param_value[i];
		const Type *ty = &f->val[v].type;
		long rows = ty->rank == 2 ? extent(ty->dim[0]) : 1, cols = extent(ty->dim[ty->rank - 1]);
		size_t bytes = precc_interp_tensor_bytes(ty->fmt, rows, cols);
		/* exactly as aligned as the runtime requires (BUF_ALIGN), not more,
		 * and exactly as large as the type says: memcheck sees the rest */
		if (posix_memalign(&raw[i], 64, bytes + 64))
			abort();
		buf[i] = (uint8_t *)raw[i] + BUF_ALIGN;
		args[i] = buf[i];
		/* the runtime's contract: outputs start poisoned (precc-run's
		 * 0xa5), only those the code updates atomically (the manifest's
		 * zero_outputs) are zeroed */
		memset(buf[i], info.atomic_params >> i & 1 ? 0 : 0xa5, bytes);
		const Ins *d = ir_def_ins(f, v);
		if (d && d->op == OP_param) {
			Blocks bl = blocks_of(f, v, rows, cols);
			if (ty->index)
				fill_offsets(buf[i], cols, M);
			else
				fill(buf[i], ty->fmt, rows, cols, d->param == PARAM_STATE || ty->is_scale, &bl);
			if (scale_inv_all != 0 && ty->is_scale && ty->fmt == PRECC_FP32 && !ty->block[0]
			    && !ty->block[1])
				*(float *)buf[i] = scale_inv_all;
			if (ir_interp_bind(ip, f->val[v].name, buf[i], bytes)) {
				printf("FAIL %s: bind %s: %s\n", file, f->val[v].name, ir_interp_error(ip));
				goto done;
			}
		}
	}
	int64_t m = M, seed = (int64_t)io.seed;
	/* has_cols: the columns of f's data, which code's were not (the
	 * second run of check_kernel) */
	int64_t ncols = info.has_cols ? f->val[info.data].type.dim[1] : 0;
	int na = info.nparams;
	uint32_t *sync = NULL;
	if (info.cooperative) {
		sync = calloc((size_t)info.sync_words, 4);
		args[na++] = sync;
	}
	if (info.has_m)
		args[na++] = &m;
	if (info.has_cols)
		args[na++] = &ncols;
	if (info.has_seed)
		args[na++] = &seed;
	/* the tensor maps, last, in tmap[] order, in the emulator's format */
	static _Alignas(64) uint8_t tmaps[CG_MAXTMAP][128];
	for (int i = 0; i < info.ntmap; i++) {
		if (emu_tmap_encode(tmaps[i], &info.tmap[i], buf[info.tmap[i].param], M, err, sizeof err)) {
			printf("FAIL %s: tensor map %d: %s\n", file, i, err);
			goto done;
		}
		args[na++] = tmaps[i];
	}
	/* the grid by precc/grid.h's precc_grid, as the runtime and the
	 * generated launchers compute it from the manifest */
	precc_grid_phase ph[CG_MAXPHASE];
	int nph = info.nphases > 1 ? info.nphases : 1;
	for (int p = 0; p < nph; p++) {
		const CodegenPhase *cp = &info.phase[p];
		int data = info.nphases > 1 ? cp->data : info.data;
		if (data < 0) {
			/* no data param (the delayed update): one CTA */
			ph[p] = (precc_grid_phase){0, 1, 1, 1, 0, 0};
			continue;
		}
		const Type *dt = &f->val[data].type;
		ph[p] = (precc_grid_phase){info.nphases > 1 ? cp->tiled : info.tiled,
		        extent(dt->dim[0]), dt->rank > 1 ? extent(dt->dim[1]) : 1,
		        info.nphases > 1 ? cp->elems_per_cta : info.elems_per_cta,
		        info.nphases > 1 ? cp->tile_rows : info.tile_rows,
		        info.nphases > 1 ? cp->tile_cols : info.tile_cols};
		if (info.nphases <= 1 && info.shape == CG_DELAYED_UPDATE)
			ph[p] = (precc_grid_phase){0, 1, 1, 1, 0, 0};   /* one CTA */
	}
	unsigned grid[3];
	if (precc_grid(ph, nph, grid)) {
		printf("FAIL %s: no grid at M=%ld\n", file, M);
		free(sync);
		goto done;
	}
	unsigned gx = grid[0], gy = grid[1];
	/* the schedule's grid= is the one of code's columns */
	if (code == f && check_schedule(&info, gx, gy, file)) {
		free(sync);
		goto done;
	}
	/* the buffers the kernel may touch, for memcheck */
	emu_reset();
	emu_set_dynamic_smem((uint64_t)info.smem);
	/* a kernel in clusters (the sm_90a GEMM's tile=BMxBN:2x1) launches as
	 * cuLaunchKernelEx's cluster dimension would */
	if (info.cluster > 1 || (info.persistent && info.ntmap >= 2))
		emu_set_cluster(info.cluster > 1 ? (unsigned)info.cluster : 1, 1, 0);
	for (int i = 0; i < info.nparams; i++) {
		int v = info.param_value[i];
		emu_region(buf[i], precc_interp_tensor_bytes(f->val[v].type.fmt,
		                                             f->val[v].type.rank == 2 ? extent(f->val[v].type.dim[0]) : 1,
		                                             extent(f->val[v].type.dim[f->val[v].type.rank - 1])),
		           ir_def_ins(f, v)->op != OP_param, f->val[v].name);
	}
	if (sync)
		emu_region(sync, (size_t)info.sync_words * 4, 1, "sync");
	for (int i = 0; i < nconst_glob; i++)
		emu_region(const_glob[i].p, const_glob[i].bytes, 0, const_glob[i].name);
	if (info.cooperative || info.persistent) {
		/* as the runtime launches it (precc/grid.h): a 1-D grid of at most
		 * the CTAs that are resident at once, here the emulator's 64, or 3
		 * (coop_small) so that each CTA loops over several tiles; a
		 * persistent kernel (one CTA at a time here) 2 or 3 CTAs */
		unsigned g3[3] = {gx, gy, 1};
		/* in clusters: the runtime's grid (precc_grid_cluster) on two
		 * resident clusters, and one (coop_small), so a multiple of the
		 * cluster (its last CTAs may have no tile) */
		unsigned cl = info.cluster > 1 ? (unsigned)info.cluster : 1;
		if (cl > 1)
			precc_grid_cluster(g3, coop_small ? 1 : 2, cl);
		else
			precc_grid_loop(g3, coop_small ? 3 : info.persistent ? 2 : 64);
		gx = g3[0];
		gy = 1;
	}
	emu_tma_log_reset();
	if (emu_launch(entry, args, info.threads, gx, gy, info.cooperative)) {
		printf("FAIL %s: a %s grid of %ux%u CTAs of %d threads is more than the emulator holds\n",
		       file, info.cooperative ? "cooperative" : "", gx, gy, info.threads);
		free(sync);
		goto done;
	}
	char why[512];
	int nbad = emu_errors(why, sizeof why);
	if (nbad) {
		printf("FAIL %s: %d failed checks; the first: %s\n", file, nbad, why);
		free(sync);
		goto done;
	}
	free(sync);
	/* a gemm_grouped's offsets, as the run filled them */
	const Ins *gg = NULL;
	const int32_t *offs = NULL;
	for (int j = 0; j < f->nins; j++)
		if (f->ins[j].op == OP_gemm_grouped)
			gg = &f->ins[j];
	for (int p = 0; gg && p < info.nparams; p++)
		if (info.param_value[p] == gg->arg[2])
			offs = buf[p];
	if (gg && offs && info.ntmap >= 2 && !gg->group_k && !info.tmap[0].mn_major) {
		long bm = 128;
		if (f->pattr[PA_TILE])
			bm = atol(f->pattr[PA_TILE]);
		if (check_grouped_order(&info, bm, tmaps[0], offs, f->val[gg->arg[2]].type.dim[0],
		                        f->val[gg->res].type.dim[1], gx, file))
			goto done;
	} else if (!gg && info.persistent && info.ntmap >= 2 && info.cluster <= 1
	           && check_tile_order(&info, tmaps[0], tmaps[1], M, gx, file))
		goto done;
	if (info.shape == CG_GEMM && emu_ldsm_conflicts()) {
		printf("FAIL %s: %ld ldmatrix phases with shared-memory bank conflicts\n", file,
		       emu_ldsm_conflicts());
		goto done;
	}
	if (ir_interp_run(ip)) {
		printf("FAIL %s: interpreter: %s\n", file, ir_interp_error(ip));
		goto done;
	}
	rc = 0;
	int nout = 0;
	for (int i = 0; i < info.nparams; i++)
		nout += ir_def_ins(f, info.param_value[i])->op != OP_param;
	if (nout == 0) {
		printf("FAIL %s: the kernel has no outputs to compare\n", file);
		rc = -1;
	}
	for (int i = 0; i < info.nparams; i++) {
		int v = info.param_value[i];
		if (ir_def_ins(f, v)->op == OP_param)
			continue;
		long r, c;
		size_t bytes = ir_interp_value_bytes(ip, v, &r, &c);
		const uint8_t *want = ir_interp_value(ip, v), *got = buf[i];
		if (info.shape == CG_GEMM && !f->val[v].type.is_scale) {
			/* equal NaNs or zeros prove little: most results must be
			 * finite and nonzero (of what a grouped GEMM defines:
			 * grouped_live) */
			size_t es = precc_interp_elem_bytes(f->val[v].type.fmt), live = 0;
			for (size_t k = 0; k < bytes; k += es) {
				uint32_t bits = 0;
				memcpy(&bits, want + k, es);
				float x = precc_decode(f->val[v].type.fmt, bits);
				live += isfinite(x) && x != 0;
			}
			size_t want_live = grouped_live(f, gg, offs, r, c, bytes / es);
			if (live * 10 < want_live * 8) {
				printf("FAIL %s: %%%s: only %zu of %zu results finite and nonzero\n", file,
				       f->val[v].name, live, want_live);
				rc = -1;
			}
		}
		if (!memcmp(want, got, bytes))
			continue;
		/* element by element (e2m1: two a byte) */
		precc_format vf = f->val[v].type.fmt;
		size_t n = (size_t)r * (size_t)c, k = 0, bad = 0, first = n;
		for (k = 0; k < n; k++)
			if (precc_interp_code(want, vf, k) != precc_interp_code(got, vf, k) && !bad++)
				first = k;
		if (!bad)   /* the same codes, other bytes: e2m1 only has 4-bit codes */
			first = 0;
		printf("FAIL %s: %%%s: %zu of %zu elements differ%s; first at %zu: kernel 0x%x, "
		       "interpreter 0x%x\n", file, f->val[v].name, bad, n,
		       bad ? "" : " (bytes differ)", first, precc_interp_code(got, vf, first),
		       precc_interp_code(want, vf, first));
		rc = -1;
	}
	if (emu_break)
		goto done;
	if (rc == 0 && info.bulk && (!jit_bulk || check_bulk(f, &info, file))) {
		if (!jit_bulk)
			printf("FAIL %s: the kernel says it has %s, the module does not\n", file,
			       CG_BULK_ENTRY);
		rc = -1;
	}
	/* shared memory: the wavefronts over one a phase (bank conflicts):
	 * every kernel's shared loads and stores must have none */
	long si, sw, sx, sc;
	char smem[96] = "";
	emu_smem_stats(&si, &sw, &sx, &sc);
	if (si)
		snprintf(smem, sizeof smem, "; smem %ld accesses, %ld extra wavefronts", si, sx);
	if (sx) {
		printf("FAIL %s: %ld of %ld shared accesses bank-conflicted (%ld extra wavefronts)\n",
		       file, sc, si, sx);
		rc = -1;
	}
	char colsat[48] = "";
	if (info.has_cols)
		snprintf(colsat, sizeof colsat, ", cols=%lld (of %ld)", (long long)ncols,
		         code->val[info.data].type.dim[1]);
	printf("%s %-18s %-16s M=%-4ld %d threads, grid %ux%u%s, %d outputs equal%s%s\n",
	       rc ? "FAIL" : "ok  ", file, info.nphases > 1 ? "fused" : codegen_shape_name(info.shape),
	       info.has_m ? M : 0, info.threads, gx, gy, info.cooperative ? " cooperative" : "", nout,
	       smem, colsat);
done:
	for (int i = 0; i < 64; i++)
		free(raw[i]);
	ir_interp_free(ip);
	if (ee)
		LLVMDisposeExecutionEngine(ee);
	cg_dispose(&g);
	return rc;
}

/* Kernel f on the host against the interpreter; a kernel that takes its
 * columns at run time (has_cols) also at a second column count, the
 * next aligned one past f's that leaves a partial 128-column tile, with
 * the code generated for f's: one PTX serves both. */
static int
check_kernel(const Func *f, const char *file)
{
	CodegenKernel info;
	int rc = check_kernel_as(f, f, file, &info);

	if (rc == 0 && info.has_cols) {
		long k = f->val[info.data].type.dim[1], a = info.cols_align, k2 = k + a;
		if (k2 % 128 == 0)
			k2 += a;
		Func *f2 = ir_func_recols(f, k, k2);
		rc = check_kernel_as(f, f2, file, &info);
		ir_func_recols_free(f2);
	}
	return rc;
}

/* The bulk entry of a delayed update (codegen/k_delayed.c) on BULK_ROWS
 * layers with data of their own, two CTAs looping over them, against the
 * interpreter run and committed (ir_interp_commit) per layer: every
 * output, and every state buffer its update copies over. Row 1 commits
 * nothing (its destinations are 0): its state must stay as it was. Rows 1
 * and 2 hold the histories the warp's reduction could get wrong: signed
 * zeros only, and NaNs. */
enum { BULK_ROWS = 3 };

static int
check_bulk(const Func *f, const CodegenKernel *info, const char *file)
{
	int np = info->nparams, nout = 0, rc = -1, w;
	void *raw[BULK_ROWS][32] = {{0}}, *orig[BULK_ROWS][32] = {{0}}, *pre[BULK_ROWS][32] = {{0}};
	size_t bytes[32];
	IrInterp *ip[BULK_ROWS] = {0};
	uint64_t *table = NULL;
	char err[512];

	for (int i = 0; i < np; i++)
		nout += ir_def_ins(f, info->param_value[i])->op != OP_param;
	w = np + nout;
	table = calloc((size_t)BULK_ROWS * (size_t)w, 8);
	emu_reset();
	for (int r = 0; r < BULK_ROWS; r++) {
		IrInterpOpts io;
		ir_interp_opts_init(&io);
		io.m = M;
		if (!(ip[r] = ir_interp_new(f, &io, err, sizeof err))) {
			printf("FAIL %s: bulk: interpreter: %s\n", file, err);
			goto done;
		}
		for (int i = 0; i < np; i++) {
			int v = info->param_value[i];
			const Type *ty = &f->val[v].type;
			long rows = ty->rank == 2 ? extent(ty->dim[0]) : 1, cols = extent(ty->dim[ty->rank - 1]);
			bytes[i] = precc_interp_tensor_bytes(ty->fmt, rows, cols);
			const Ins *d = ir_def_ins(f, v);
			if (posix_memalign(&raw[r][i], 64, bytes[i]) || posix_memalign(&orig[r][i], 64, bytes[i])
			    || posix_memalign(&pre[r][i], 64, bytes[i]))
				abort();
			memset(raw[r][i], 0xa5, bytes[i]);
			if (d->op == OP_param) {
				Blocks bl = blocks_of(f, v, rows, cols);
				fill(raw[r][i], ty->fmt, rows, cols, d->param == PARAM_STATE || ty->is_scale, &bl);
				/* edge histories: row 1 zeros, -0 first and +0 after it,
				 * with an amax of -0 (a zero max has the first zero's
				 * sign: -0, where a plain max says +0); row 2 two NaNs,
				 * one in lane 5's 17th entry */
				float *hv = raw[r][i];
				if (ty->fmt == PRECC_FP32 && ty->rank == 1 && cols >= 2 && r == 1)
					for (long q = 0; q < cols; q++)
						hv[q] = q == 0 ? -0.0f : 0.0f;
				if (ty->fmt == PRECC_FP32 && ty->rank == 1 && cols >= 2 && r == 2) {
					hv[3] = NAN;
					hv[(16 * 32 + 5) % cols] = NAN;
				}
				if (r == 1 && strstr(f->val[v].name, "amax") && bytes[i] == 4)
					hv[0] = -0.0f;
				memcpy(orig[r][i], raw[r][i], bytes[i]);
				memcpy(pre[r][i], raw[r][i], bytes[i]);
				if (ir_interp_bind(ip[r], f->val[v].name, orig[r][i], bytes[i])) {
					printf("FAIL %s: bulk: bind: %s\n", file, ir_interp_error(ip[r]));
					goto done;
				}
			}
			table[(size_t)r * (size_t)w + (size_t)i] = (uint64_t)(uintptr_t)raw[r][i];
		}
		/* each output's destination: the state param an update pairs it
		 * with (written in place, as the runtime's commit does) */
		for (int i = 0, o = np; i < np; i++) {
			int v = info->param_value[i];
			if (ir_def_ins(f, v)->op == OP_param)
				continue;
			for (int n = 0; n < f->nins; n++)
				if (f->ins[n].op == OP_update && f->ins[n].arg[1] == v && r != 1)
					for (int q = 0; q < np; q++)
						if (info->param_value[q] == f->ins[n].arg[0])
							table[(size_t)r * (size_t)w + (size_t)o] =
								(uint64_t)(uintptr_t)raw[r][q];
			o++;
		}
		for (int i = 0; i < np; i++)
			emu_region(raw[r][i], bytes[i], 1, f->val[info->param_value[i]].name);
		if (ir_interp_run(ip[r]) || (r != 1 && ir_interp_commit(ip[r]))) {
			printf("FAIL %s: bulk: interpreter: %s\n", file, ir_interp_error(ip[r]));
			goto done;
		}
	}
	emu_region(table, (size_t)BULK_ROWS * (size_t)w * 8, 0, "table");
	int64_t rows = BULK_ROWS;
	void *args[2] = {table, &rows};
	if (emu_launch(jit_bulk, args, info->threads, 2, 1, 0)) {
		printf("FAIL %s: bulk: the emulator cannot hold 2 CTAs\n", file);
		goto done;
	}
	int nbad = emu_errors(err, sizeof err);
	if (nbad) {
		printf("FAIL %s: bulk: %d failed checks; the first: %s\n", file, nbad, err);
		goto done;
	}
	rc = 0;
	int changed = 0;
	for (int r = 0; r < BULK_ROWS; r++)
		for (int i = 0; i < np; i++) {
			int v = info->param_value[i];
			int is_out = ir_def_ins(f, v)->op != OP_param;
			/* outputs: the interpreter's values; params: as committed
			 * (row 1: untouched, as its destinations are 0) */
			const void *want = is_out ? ir_interp_value(ip[r], v) : orig[r][i];
			if (!is_out && r != 1)
				changed += memcmp(pre[r][i], orig[r][i], bytes[i]) != 0;
			if (memcmp(want, raw[r][i], bytes[i])) {
				printf("FAIL %s: bulk: row %d: %%%s differs from the interpreter's%s\n", file,
				       r, f->val[v].name, is_out ? "" : " committed state");
				rc = -1;
			}
		}
	/* a kernel with updates must commit something; one of a build (its
	 * new values returned, the runtime commits: emu_build.sh) has none */
	int nupdate = 0;
	for (int n = 0; n < f->nins; n++)
		nupdate += f->ins[n].op == OP_update;
	if (rc == 0 && nupdate && !changed) {
		printf("FAIL %s: bulk: no commit changed any state: the check proves nothing\n", file);
		rc = -1;
	}
	if (rc == 0)
		printf("ok   %s bulk: %d layers on 2 CTAs, outputs and committed state (%d "
		       "buffers changed) equal\n", file, BULK_ROWS, changed);
done:
	for (int r = 0; r < BULK_ROWS; r++) {
		for (int i = 0; i < 32; i++) {
			free(raw[r][i]);
			free(orig[r][i]);
			free(pre[r][i]);
		}
		ir_interp_free(ip[r]);
	}
	free(table);
	return rc;
}

static int
cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run file's first kernel with emu_break = brk at M = m: 1 (a failure) if
 * the comparison does not notice, or (expect) the checker's first report
 * does not say expect. */
static int
self_test_says(const char *dir, const char *file, int brk, long m, const char *what,
               const char *expect)
{
	char path[1024], err[1024];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	char *text = slurp(path);
	Module *mod = text ? ir_parse(text, file, err, sizeof err) : NULL;
	int missed;

	free(text);
	emu_break = brk;
	M = m;
	printf("self-test, %s:\n", what);
	missed = !mod || check_kernel(mod->fn[0], file) == 0;
	if (!missed && expect) {
		char msg[512];
		missed = !emu_errors(msg, sizeof msg) || !strstr(msg, expect);
	}
	emu_break = 0;
	if (missed)
		printf("FAIL: %s went unnoticed%s%s\n", what, expect ? " by " : "", expect ? expect : "");
	ir_module_free(mod);
	return missed;
}

static int
self_test(const char *dir, const char *file, int brk, long m, const char *what)
{
	return self_test_says(dir, file, brk, m, what, NULL);
}

/* ---- the sanitizer's self-tests: small broken kernels it must catch ---- */
enum { ST_OOB, ST_MISALIGNED, ST_INPUT_STORE, ST_RACE, ST_NO_RACE, ST_PARTIAL_BARRIER,
       ST_TWO_BARRIERS, ST_SMEM, ST_UNKNOWN, ST_CP_NO_WAIT, ST_CP_WAIT, ST_CP_WAIT_WEAK, ST_CP_WAIT_OFF1,
       ST_LDSM_MISALIGNED, ST_LDSM, ST_LDSM_CONFLICT, ST_BANKS };
enum { ST_THREADS = 64 };

static LLVMValueRef
st_call(LLVMModuleRef mod, LLVMBuilderRef b, const char *name, LLVMTypeRef rt, LLVMValueRef *a,
        int n)
{
	LLVMTypeRef at[4];
	for (int i = 0; i < n; i++)
		at[i] = LLVMTypeOf(a[i]);
	LLVMTypeRef ft = LLVMFunctionType(rt, at, (unsigned)n, 0);
	LLVMValueRef fn = LLVMGetNamedFunction(mod, name);
	if (!fn)
		fn = LLVMAddFunction(mod, name, ft);
	return LLVMBuildCall2(b, ft, fn, a, (unsigned)n, "");
}

/* ldmatrix's fragments against CuTe's, which NVIDIA wrote independently
 * of emu.c: NVIDIA/cutlass commit 7107b055,
 * include/cute/atom/copy_traits_sm75.hpp:76-89 (SM75_U32x4_LDSM_N) and
 * 127-140 (SM75_U16x8_LDSM_T). CuTe's copy traits map (thread, value bit)
 * to a bit of the source; SrcLayout (32,128):(128,1) says lane t's row
 * address supplies source bits 128t..128t+127. DstLayout (thread, value):
 *   U32x4_LDSM_N: (32,(32,4)):(32,(1,1024))
 *   U16x8_LDSM_T: ((4,8),(16,2,4)):((256,16),(1,128,1024))
 * and value v of a lane is bit v % 32 of its register v / 32 (the
 * registers' order in the copy atom). Coordinates unfold
 * colexicographically, as in test_mma_frag.c. out: per thread 4 registers
 * of x4, then 4 of x4.trans, of rows filled with b16 element e = e. */
static int
ldsm_vs_cute(const uint8_t *out)
{
	static const struct { const char *name; int nt, ts[2], tst[2], nv, vs[3], vst[3]; } l[2] = {
		{"SM75_U32x4_LDSM_N", 1, {32, 1}, {32, 0}, 2, {32, 4, 1}, {1, 1024, 0}},
		{"SM75_U16x8_LDSM_T", 2, {4, 8}, {256, 16}, 3, {16, 2, 4}, {1, 128, 1024}},
	};
	int bad = 0;
	for (int tr = 0; tr < 2; tr++)
		for (int t = 0; t < ST_THREADS; t++) {
			int lane = t % 32, warp = t / 32;
			for (int v = 0; v < 128; v++) {
				int d = 0, x = lane, y = v;
				for (int i = 0; i < l[tr].nt; i++)
					d += (x % l[tr].ts[i]) * l[tr].tst[i], x /= l[tr].ts[i];
				for (int i = 0; i < l[tr].nv; i++)
					d += (y % l[tr].vs[i]) * l[tr].vst[i], y /= l[tr].vs[i];
				/* source: bit d % 128 of the row lane d / 128 of this warp addresses */
				int byte = 512 * warp + 16 * (d / 128) + (d % 128) / 8;
				int want = ((byte / 2) >> (8 * (byte % 2)) >> ((d % 128) % 8)) & 1;
				uint32_t reg;
				memcpy(&reg, out + 32 * t + 16 * tr + 4 * (v / 32), 4);
				int got = (int)(reg >> (v % 32)) & 1;
				if (got != want && bad++ < 4)
					printf("FAIL: %s: thread %d value %d: bit %d, CuTe says %d\n", l[tr].name, t, v,
					       got, want);
			}
		}
	if (!bad)
		printf("self-test, ldmatrix x4 and x4.trans: every bit where CuTe's copy traits put it\n");
	return bad != 0;
}

/* void k(ptr out, ptr in) in codegen's host-mode form, broken as `kind`
 * says; run as one CTA of 64 threads. Returns 1 (a failure of the
 * checker) when the expected report is missing, or, for ST_NO_RACE (the
 * same exchange with a barrier), when anything is reported. */
static int
sanitizer_self_test(int kind, const char *what, const char *expect)
{
	LLVMContextRef cx = LLVMContextCreate();
	LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("selftest", cx);
	LLVMBuilderRef b = LLVMCreateBuilderInContext(cx);
	LLVMTypeRef pt = LLVMPointerTypeInContext(cx, 0), i32 = LLVMInt32TypeInContext(cx);
	LLVMTypeRef i64 = LLVMInt64TypeInContext(cx), vd = LLVMVoidTypeInContext(cx);
	LLVMValueRef fn = LLVMAddFunction(mod, "k", LLVMFunctionType(vd, (LLVMTypeRef[]){pt, pt}, 2, 0));
	LLVMValueRef out = LLVMGetParam(fn, 0), in = LLVMGetParam(fn, 1);
	LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(cx, fn, "entry"));
	LLVMValueRef zero = LLVMConstInt(i32, 0, 0);
	LLVMValueRef tid = st_call(mod, b, "precc_emu_sreg", i32, &zero, 1);
	LLVMValueRef t64 = LLVMBuildZExt(b, tid, i64, "");
	LLVMValueRef off4 = LLVMBuildMul(b, t64, LLVMConstInt(i64, 4, 0), "");
	LLVMTypeRef i8 = LLVMInt8TypeInContext(cx);
	LLVMValueRef outp = LLVMBuildGEP2(b, i8, out, &off4, 1, "");
	size_t out_bytes = 4 * ST_THREADS;

	switch (kind) {
	case ST_OOB:            /* the last thread stores past the buffer */
		out_bytes -= 4;
		LLVMSetAlignment(LLVMBuildStore(b, tid, outp), 4);
		break;
	case ST_MISALIGNED: {   /* a 16-byte vector at 4 bytes past 16-byte alignment */
		LLVMValueRef o = LLVMBuildAdd(b, LLVMBuildMul(b, t64, LLVMConstInt(i64, 16, 0), ""),
		                              LLVMConstInt(i64, 4, 0), "");
		out_bytes = 16 * ST_THREADS + 16;
		LLVMValueRef v = LLVMConstVector((LLVMValueRef[]){zero, zero, zero, zero}, 4);
		LLVMSetAlignment(LLVMBuildStore(b, v, LLVMBuildGEP2(b, i8, out, &o, 1, "")), 16);
		break;
	}
	case ST_INPUT_STORE:
		LLVMSetAlignment(LLVMBuildStore(b, tid, LLVMBuildGEP2(b, i8, in, &off4, 1, "")), 4);
		break;
	case ST_RACE: case ST_NO_RACE: {   /* s[t] = t; out[t] = s[t ^ 1] */
		LLVMValueRef a[2] = {zero, LLVMConstInt(i64, 4 * ST_THREADS, 0)};
		LLVMValueRef sm = st_call(mod, b, "precc_emu_shared", pt, a, 2);
		LLVMSetAlignment(LLVMBuildStore(b, tid, LLVMBuildGEP2(b, i8, sm, &off4, 1, "")), 4);
		if (kind == ST_NO_RACE) {
			LLVMValueRef site = LLVMConstInt(i32, 1, 0);
			st_call(mod, b, "precc_emu_barrier", vd, &site, 1);
		}
		LLVMValueRef o = LLVMBuildMul(b, LLVMBuildXor(b, t64, LLVMConstInt(i64, 1, 0), ""),
		                              LLVMConstInt(i64, 4, 0), "");
		LLVMValueRef v = LLVMBuildLoad2(b, i32, LLVMBuildGEP2(b, i8, sm, &o, 1, ""), "");
		LLVMSetAlignment(v, 4);
		LLVMSetAlignment(LLVMBuildStore(b, v, outp), 4);
		break;
	}
	case ST_PARTIAL_BARRIER: case ST_TWO_BARRIERS: {   /* warp 0 waits, warp 1 leaves or waits elsewhere */
		LLVMValueRef w0 = LLVMBuildICmp(b, LLVMIntULT, tid, LLVMConstInt(i32, 32, 0), "");
		LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(cx, fn, "warp0");
		LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(cx, fn, "other");
		LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cx, fn, "done");
		LLVMBuildCondBr(b, w0, yes, no);
		LLVMPositionBuilderAtEnd(b, yes);
		LLVMValueRef site = LLVMConstInt(i32, 1, 0);
		st_call(mod, b, "precc_emu_barrier", vd, &site, 1);
		LLVMBuildBr(b, done);
		LLVMPositionBuilderAtEnd(b, no);
		if (kind == ST_TWO_BARRIERS) {
			site = LLVMConstInt(i32, 2, 0);
			st_call(mod, b, "precc_emu_barrier", vd, &site, 1);
		}
		LLVMBuildBr(b, done);
		LLVMPositionBuilderAtEnd(b, done);
		LLVMSetAlignment(LLVMBuildStore(b, tid, outp), 4);
		break;
	}
	case ST_CP_NO_WAIT: case ST_CP_WAIT: case ST_CP_WAIT_WEAK: case ST_CP_WAIT_OFF1: {
		/* cp.async 16 bytes in[16 (t % 16)] -> s[16 t]; commit; (wait_group 0,
		 * or wait_group 1 with a second, empty group after it; OFF1: the
		 * empty group before it, so that wait_group 1 leaves the copy in
		 * flight); barrier; out[t] = s[16 (t ^ 1)] */
		LLVMValueRef a[2] = {zero, LLVMConstInt(i64, 16 * ST_THREADS, 0)};
		LLVMValueRef sm = st_call(mod, b, "precc_emu_shared", pt, a, 2);
		LLVMValueRef o16 = LLVMBuildMul(b, t64, LLVMConstInt(i64, 16, 0), "");
		LLVMValueRef i16o = LLVMBuildMul(b, LLVMBuildURem(b, t64, LLVMConstInt(i64, 16, 0), ""),
		                                 LLVMConstInt(i64, 16, 0), "");
		LLVMValueRef ca[3] = {LLVMBuildGEP2(b, i8, sm, &o16, 1, ""), LLVMBuildGEP2(b, i8, in, &i16o, 1, ""),
		                      LLVMConstInt(i32, 16, 0)};
		if (kind == ST_CP_WAIT_OFF1)
			st_call(mod, b, "precc_emu_cp_commit", vd, NULL, 0);
		st_call(mod, b, "precc_emu_cp_async", vd, ca, 3);
		st_call(mod, b, "precc_emu_cp_commit", vd, NULL, 0);
		if (kind == ST_CP_WAIT_WEAK)
			st_call(mod, b, "precc_emu_cp_commit", vd, NULL, 0);
		if (kind != ST_CP_NO_WAIT) {
			/* wait_group 1 after two groups completes the first */
			LLVMValueRef n = LLVMConstInt(i32, kind == ST_CP_WAIT_WEAK || kind == ST_CP_WAIT_OFF1, 0);
			st_call(mod, b, "precc_emu_cp_wait", vd, &n, 1);
		}
		LLVMValueRef site = LLVMConstInt(i32, 1, 0);
		st_call(mod, b, "precc_emu_barrier", vd, &site, 1);
		LLVMValueRef o = LLVMBuildMul(b, LLVMBuildXor(b, t64, LLVMConstInt(i64, 1, 0), ""),
		                              LLVMConstInt(i64, 16, 0), "");
		LLVMValueRef v = LLVMBuildLoad2(b, i32, LLVMBuildGEP2(b, i8, sm, &o, 1, ""), "");
		LLVMSetAlignment(v, 4);
		LLVMSetAlignment(LLVMBuildStore(b, v, outp), 4);
		break;
	}
	case ST_LDSM_MISALIGNED: case ST_LDSM: case ST_LDSM_CONFLICT: {
		/* s (1 KiB) holds b16 element e = e at byte 2e; each warp's lanes
		 * address its 32 rows of 16 bytes (ST_LDSM_MISALIGNED: lane 3's 8
		 * bytes off; ST_LDSM_CONFLICT: rows 64 bytes apart, a 4-way bank
		 * conflict); ldmatrix x4 and x4.trans; out[32 t ..] = the 8
		 * registers */
		LLVMValueRef a[2] = {zero, LLVMConstInt(i64, 64 * ST_THREADS, 0)};
		LLVMValueRef sm = st_call(mod, b, "precc_emu_shared", pt, a, 2);
		LLVMTypeRef i16t = LLVMInt16TypeInContext(cx);
		for (int h = 0; h < 8; h++) {
			LLVMValueRef el = LLVMBuildAdd(b, LLVMBuildMul(b, t64, LLVMConstInt(i64, 8, 0), ""),
			                               LLVMConstInt(i64, (unsigned)h, 0), "");
			LLVMValueRef o = LLVMBuildMul(b, el, LLVMConstInt(i64, 2, 0), "");
			LLVMSetAlignment(LLVMBuildStore(b, LLVMBuildTrunc(b, el, i16t, ""),
			                                LLVMBuildGEP2(b, i8, sm, &o, 1, "")), 2);
		}
		LLVMValueRef site = LLVMConstInt(i32, 1, 0);
		st_call(mod, b, "precc_emu_barrier", vd, &site, 1);
		LLVMValueRef ro = LLVMBuildMul(b, t64, LLVMConstInt(i64, kind == ST_LDSM_CONFLICT ? 64 : 16, 0), "");
		if (kind == ST_LDSM_MISALIGNED)
			ro = LLVMBuildAdd(b, ro, LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, tid,
			                  LLVMConstInt(i32, 3, 0), ""), LLVMConstInt(i64, 8, 0),
			                  LLVMConstInt(i64, 0, 0), ""), "");
		LLVMValueRef row = LLVMBuildGEP2(b, i8, sm, &ro, 1, "");
		LLVMTypeRef a4 = LLVMArrayType2(i32, 4);
		LLVMValueRef buf = LLVMBuildAlloca(b, a4, "ldsm");
		for (int tr = 0; tr < 2; tr++) {
			LLVMValueRef la[3] = {LLVMConstInt(i32, (unsigned)tr, 0), row, buf};
			st_call(mod, b, "precc_emu_ldmatrix", vd, la, 3);
			for (int r = 0; r < 4; r++) {
				LLVMValueRef ix[2] = {LLVMConstInt(i64, 0, 0), LLVMConstInt(i64, (unsigned)r, 0)};
				LLVMValueRef v = LLVMBuildLoad2(b, i32, LLVMBuildGEP2(b, a4, buf, ix, 2, ""), "");
				LLVMValueRef o = LLVMBuildAdd(b, LLVMBuildMul(b, t64, LLVMConstInt(i64, 32, 0), ""),
				                              LLVMConstInt(i64, (unsigned)(16 * tr + 4 * r), 0), "");
				LLVMSetAlignment(LLVMBuildStore(b, v, LLVMBuildGEP2(b, i8, out, &o, 1, "")), 4);
			}
		}
		out_bytes = 32 * ST_THREADS;
		break;
	}
	case ST_BANKS: {
		/* bank conflicts, counted: 4-byte stores 8 bytes apart (lanes t and
		 * t + 16 share a bank: 2 wavefronts, 1 extra a warp), a barrier,
		 * then 16-byte loads of consecutive chunks (4 phases of 8 lanes,
		 * 128 bytes each: none) */
		LLVMValueRef a[2] = {zero, LLVMConstInt(i64, 16 * ST_THREADS, 0)};
		LLVMValueRef sm = st_call(mod, b, "precc_emu_shared", pt, a, 2);
		LLVMValueRef o8 = LLVMBuildMul(b, t64, LLVMConstInt(i64, 8, 0), "");
		LLVMSetAlignment(LLVMBuildStore(b, tid, LLVMBuildGEP2(b, i8, sm, &o8, 1, "")), 4);
		LLVMValueRef site = LLVMConstInt(i32, 1, 0);
		st_call(mod, b, "precc_emu_barrier", vd, &site, 1);
		LLVMValueRef o16 = LLVMBuildMul(b, t64, LLVMConstInt(i64, 16, 0), "");
		LLVMTypeRef v4 = LLVMVectorType(i32, 4);
		LLVMValueRef ld = LLVMBuildLoad2(b, v4, LLVMBuildGEP2(b, i8, sm, &o16, 1, ""), "");
		LLVMSetAlignment(ld, 16);
		LLVMSetAlignment(LLVMBuildStore(b, LLVMBuildExtractElement(b, ld, LLVMConstInt(i32, 0, 0), ""),
		                                LLVMBuildGEP2(b, i8, out, &off4, 1, "")), 4);
		break;
	}
	case ST_SMEM: {         /* 64 KiB of static shared memory */
		LLVMValueRef a[2] = {zero, LLVMConstInt(i64, 65536, 0)};
		LLVMValueRef sm = st_call(mod, b, "precc_emu_shared", pt, a, 2);
		LLVMSetAlignment(LLVMBuildStore(b, tid, LLVMBuildGEP2(b, i8, sm, &off4, 1, "")), 4);
		break;
	}
	}
	if (kind == ST_UNKNOWN)      /* what codegen's host mode makes of an unmodelled intrinsic */
		st_call(mod, b, "precc_emu_unknown:llvm.nvvm.read.ptx.sreg.ntid.x", i32, NULL, 0);
	LLVMBuildRetVoid(b);
	LLVMDisposeBuilder(b);

	LLVMExecutionEngineRef ee;
	printf("self-test, %s:%s", what, kind == ST_UNKNOWN ? "\n" : " ");
	void (*entry)(void **) = jit(mod, fn, &ee, what);
	int missed = 1;
	if (kind == ST_UNKNOWN) {
		missed = entry != NULL;   /* jit() must refuse it, with a FAIL line */
		if (entry)
			LLVMDisposeExecutionEngine(ee);
		if (missed)
			printf("FAIL: run anyway, not caught\n");
		LLVMContextDispose(cx);
		return missed;
	}
	if (entry) {
		uint8_t *o = NULL, *i = NULL;
		if (posix_memalign((void **)&o, 64, 64 + out_bytes) || posix_memalign((void **)&i, 64, 64 + 4 * ST_THREADS))
			abort();
		void *args[2] = {o + BUF_ALIGN, i + BUF_ALIGN};
		char msg[512];
		emu_reset();
		emu_region(args[0], out_bytes, 1, "out");
		emu_region(args[1], 4 * ST_THREADS, 0, "in");
		emu_launch(entry, args, ST_THREADS, 1, 1, 0);
		int n = emu_errors(msg, sizeof msg);
		missed = expect ? !n || !strstr(msg, expect) : n != 0;
		printf("%s%s\n", n ? msg : "no report", missed ? expect ? " -- FAIL: not caught" : " -- FAIL: a false report" : "");
		if (kind == ST_LDSM && !missed)
			missed = ldsm_vs_cute(args[0]) || emu_ldsm_conflicts() != 0;
		if (kind == ST_LDSM_CONFLICT) {
			printf("self-test, ldmatrix rows 64 bytes apart: %ld conflicted phases%s\n",
			       emu_ldsm_conflicts(), emu_ldsm_conflicts() ? "" : " -- FAIL: not caught");
			missed = missed || emu_ldsm_conflicts() == 0;
		}
		if (kind == ST_BANKS) {
			long si, sw, sx, sc;
			emu_smem_stats(&si, &sw, &sx, &sc);
			printf("self-test, stores 8 bytes apart, 16-byte loads in a row: %ld warp accesses, "
			       "%ld wavefronts, %ld extra%s\n", si, sw, sx,
			       si == 4 && sw == 2 * 2 + 2 * 4 && sx == 2 ? "" : " -- FAIL: want 4, 12, 2");
			missed = missed || si != 4 || sw != 12 || sx != 2;
		}
		if (kind == ST_CP_WAIT && !missed)
			for (int t = 0; t < ST_THREADS && !missed; t++)
				if (memcmp((uint8_t *)args[0] + 4 * t, (uint8_t *)args[1] + 16 * ((t ^ 1) % 16), 4)) {
					printf("FAIL: thread %d read what cp.async did not copy\n", t);
					missed = 1;
				}
		free(o);
		free(i);
		LLVMDisposeExecutionEngine(ee);
	}
	LLVMContextDispose(cx);
	return missed;
}

int
main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "kernels";
	char *names[256], err[1024];
	int n = 0, fails = 0, self_tests = 1, all_tiles = 0;

	/* test_emu DIR [--target T] [--no-self-test]: the last for kernels of
	 * a build (tests/codegen/emu_build.sh), which the self-tests' named
	 * files are not among */
	for (int a = 2; a < argc; a++) {
		if (!strcmp(argv[a], "--target") && a + 1 < argc) {
			int sm = codegen_sm_by_name(argv[++a]);
			if (sm < 0) {
				fprintf(stderr, "test_emu: unknown target %s\n", argv[a]);
				return 2;
			}
			emu_sm = (CodegenSm)sm;
		} else if (!strcmp(argv[a], "--no-self-test")) {
			self_tests = 0;
		} else if (!strcmp(argv[a], "--tiles")) {
			all_tiles = 1;     /* every tile the wgmma family generates */
			self_tests = 0;
		} else {
			fprintf(stderr, "usage: test_emu DIR [--target T] [--no-self-test] [--tiles]\n");
			return 2;
		}
	}

	const char *once = getenv("PRECC_EMU_ONCE");
	emu_once = once && *once && strcmp(once, "0");
	emu_init();
	LLVMLinkInMCJIT();
	if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
		printf("skipped: this LLVM has no native target to JIT for\n");
		return 77;
	}
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "test_emu: cannot open %s\n", dir);
		return 1;
	}
	for (struct dirent *de; (de = readdir(d));) {
		size_t l = strlen(de->d_name);
		if (l <= 3 || strcmp(de->d_name + l - 3, ".ir"))
			continue;
		if (n == 256) {
			fprintf(stderr, "test_emu: %s holds more than 256 .ir files\n", dir);
			return 2;
		}
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof *names, cmp);
	for (int i = 0; i < n; i++) {
		char path[1024];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		char *text = slurp(path);
		if (text) {
			subst(text, "[4096,4096]", "[512,512]");
			subst(text, "[32,32]{128x128}", "[4,4]{128x128}");
			subst(text, "[256,256]{16x16}", "[32,32]{16x16}");
		}
		const char *em = text ? strstr(text, "# emu: m=") : NULL;
		M = em ? atol(em + 9) : 128;
		/* "# emu: m2=N": the second run's M (a kernel whose M must be a
		 * multiple of a 128 K block takes none of extra_m) */
		const char *em2 = text ? strstr(text, "# emu: m2=") : NULL;
		long m2 = em2 ? atol(em2 + 10) : 0;
		finite_only = text && strstr(text, "# emu: finite") != NULL;
		const char *es = text ? strstr(text, "# emu: scale_inv=") : NULL;
		scale_inv_all = es ? strtof(es + 17, NULL) : 0;
		const char *ex = text ? strstr(text, "# emu: max=") : NULL;
		code_max = ex ? strtof(ex + 11, NULL) : 0;
		moderate = text && strstr(text, "# emu: moderate") != NULL;
		const char *eo = text ? strstr(text, "# emu: offs_align=") : NULL;
		offs_align = eo ? atol(eo + 18) : 1;
		const char *esh = text ? strstr(text, "# emu: offs_short=") : NULL;
		offs_short = esh ? atol(esh + 18) : 0;
		finite_only |= moderate;
		Module *m = text ? ir_parse(text, names[i], err, sizeof err) : NULL;
		/* and a copy through schedule, for its figures */
		Module *ms = text ? ir_parse(text, names[i], err, sizeof err) : NULL;
		if (ms)
			schedule(ms, target_by_name("sm_90"));
		free(text);
		if (!m || ir_verify(m, err, sizeof err)) {
			printf("FAIL %s: %s\n", names[i], err);
			fails++;
		} else {
			for (int k = 0; k < m->nfn && all_tiles; k++)
				fails += check_tiles(m->fn[k], names[i]);
			for (int k = 0; k < m->nfn && !all_tiles; k++) {
				long m0 = M;
				sched_fn = ms && k < ms->nfn && ms->fn[k]->kernel ? ms->fn[k] : NULL;
				fails += check_kernel(m->fn[k], names[i]) < 0;
				if (emu_once)
					continue;
				/* and at an M that divides no tile (partial tiles, rows
				 * and blocks past the last full one), one per file in turn */
				extra_run = 1;
				for (int t = 0; t < (m2 ? 1 : 3) && (!strstr(names[i], "gemm")
				                                     || strstr(names[i], "grouped")); t++) {
					M = m2 ? m2 : extra_m[(i + t) % 3];
					int rc = check_kernel(m->fn[k], names[i]);
					if (rc <= 0) {
						fails += rc < 0;
						break;
					}
				}
				M = m0;
				extra_run = 0;
				/* again on 3 CTAs (cooperative and persistent kernels);
				 * the wgmma family's on the data the next files would
				 * have had, so that they keep theirs */
				uint64_t rng0 = rng;
				coop_small = 1;
				fails += check_kernel(m->fn[k], names[i]) < 0;
				coop_small = 0;
				if (emu_sm == CG_SM90A)
					rng = rng0;
			}
		}
		sched_fn = NULL;
		ir_module_free(m);
		ir_module_free(ms);
		free(names[i]);
	}
	if (!self_tests) {
		printf("%d kernel files, %d failures\n", n, fails);
		return fails ? 1 : 0;
	}
	if (emu_sm == CG_SM90A) {
		/* the wgmma family's runs can fail: its operands read unswizzled
		 * (emu_break 5) must mismatch */
		fails += self_test(dir, "wgmma_e4m3_tensor.ir", 5, 200, "wgmma operands read without the 128B swizzle");
		printf("%d kernel files, %d failures\n", n, fails);
		return fails ? 1 : 0;
	}
	/* the check can fail: a corrupted cvt, a lost mma product must be caught */
	fails += self_test(dir, "quant_tensor.ir", 1, 128, "one cvt corrupted");
	fails += self_test(dir, "gemm_e4m3_tensor.ir", 2, 100, "one mma product lost");
	/* mutants of the GEMM mainloop the checker must report */
	fails += self_test_says(dir, "gemm_e4m3_tensor.ir", 3, 100, "GEMM without cp.async.wait_group",
	                        "cp.async to it is in flight");
	fails += self_test_says(dir, "gemm_bf16_dgrad_t.ir", 3, 100, "bf16 GEMM without cp.async.wait_group",
	                        "cp.async to it is in flight");
	/* and the sanitizer's checks can fail */
	fails += sanitizer_self_test(ST_OOB, "a store past the end", "memcheck");
	fails += sanitizer_self_test(ST_MISALIGNED, "a misaligned 16-byte store", "memcheck: misaligned");
	fails += sanitizer_self_test(ST_INPUT_STORE, "a store into an input", "into input");
	fails += sanitizer_self_test(ST_RACE, "a shared-memory exchange without a barrier", "racecheck");
	fails += sanitizer_self_test(ST_NO_RACE, "the same exchange with a barrier", NULL);
	fails += sanitizer_self_test(ST_PARTIAL_BARRIER, "a barrier one warp of two reaches", "synccheck");
	fails += sanitizer_self_test(ST_TWO_BARRIERS, "two warps at two barriers", "synccheck: divergent");
	fails += sanitizer_self_test(ST_SMEM, "64 KiB of static shared memory", "static shared memory");
	fails += sanitizer_self_test(ST_UNKNOWN, "a special register without a host model", NULL);
	fails += sanitizer_self_test(ST_CP_NO_WAIT, "cp.async read after a barrier but no wait_group",
	                             "cp.async to it is in flight");
	fails += sanitizer_self_test(ST_CP_WAIT_WEAK, "cp.async, wait_group 1 with one group after it",
	                             NULL);
	fails += sanitizer_self_test(ST_CP_WAIT_OFF1, "cp.async in the newest group, wait_group 1",
	                             "cp.async to it is in flight");
	fails += sanitizer_self_test(ST_CP_WAIT, "cp.async, wait_group 0, barrier", NULL);
	fails += sanitizer_self_test(ST_LDSM_MISALIGNED, "an ldmatrix row 8 bytes off",
	                             "misaligned ldmatrix row");
	fails += sanitizer_self_test(ST_LDSM, "ldmatrix x4 and x4.trans of known rows", NULL);
	fails += sanitizer_self_test(ST_LDSM_CONFLICT, "ldmatrix rows 64 bytes apart", NULL);
	fails += sanitizer_self_test(ST_BANKS, "shared-memory bank conflicts", NULL);
	fails += self_test_says(dir, "gemm_e4m3_tensor.ir", 4, 100, "GEMM with one ldmatrix row misaligned",
	                        "misaligned ldmatrix row");
	printf("%d kernel files, %d failures; schedule's grid equal to codegen's in %d runs "
	       "(where both tile alike)\n", n, fails, sched_checked);
	return fails ? 1 : 0;
}
