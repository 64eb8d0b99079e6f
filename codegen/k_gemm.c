/*
 * k_gemm.c — the mma.sync GEMM family (sm_89; sm_90 and sm_90a until the
 * wgmma family exists): C[M,N] = epilogue(A[M,K] · B[N,K]ᵀ) as the IR's
 * gemm says (docs/ir.md), with its prologue (transposes of 16-bit
 * operands, e2m1 upcast to bf16) and its epilogue (block-scale promotion,
 * bias (padded or not), the output's amax (tensorwise or per block), cast, slice of the
 * padded columns, accumulate into an f32 main_grad) in one kernel.
 *
 * A CTA of 4 warps (2 x 2) computes a 64 x 64 tile of C, each warp 32 x 32
 * as 2 x 4 mma tiles of 16 x 8; or (schedule's tile=128x128, for large M)
 * 8 warps (2 x 4) a 128 x 128 tile, each warp 64 x 32 as 4 x 4 mma tiles. Per K tile (64 bytes of every row of A and
 * B: 64 fp8 or 32 16-bit elements), a 3-stage pipeline: while the warps
 * work on tile kt, the copies of tiles kt+1 and kt+2 are in flight
 * (cp.async.cg 16 bytes, zero-filled past M, N and K by src-size 0; one
 * commit group per tile, wait_group 1 and one bar.sync per tile).
 * Shared tiles are XOR-swizzled (mma_frag.h: 64-byte K-major rows,
 * Swizzle<2,4,3>; 16-bit transposes MN-major, 128-byte k-rows,
 * Swizzle<3,4,3>) so that every ldmatrix phase and every copy phase hits
 * 8 different bank groups; each warp reads its fragments with
 * ldmatrix.x4 (.trans for the MN-major tiles) and issues mma.sync with
 * f32 accumulation. Transposes of fp8 or of a dynamic / odd R, narrow K
 * and e2m1 upcasts keep synchronous loads into the same stages. Scales apply
 * the interpreter's way: every P K-elements the inner accumulator is
 * promoted, outer = fma(inner, fl(sa · sb), outer) (one fma.rn.f32, as
 * DeepGEMM's FFMA; tensorwise two roundings, below), in K order; P is
 * the recipe's promote:N, else the scales' block along K (MX 32, NVFP4
 * 16, 1x128 128), else all of K (tensorwise, rowwise: one promotion at
 * the end); tensorwise, sa · sb as tensor_scale's s · p · p, which
 * overflows only where the result does. The epilogue uses mul.rn/add.rn so that ptxas cannot fuse
 * them into an FMA the interpreter does not do.
 *
 * On the host (emulation) mma.sync is precc_emu_mma, which sums each dot
 * product in ascending k in fp32: a kernel then matches the interpreter
 * bit for bit with fp32_accum (accum=fp32, and fast:B and promote:N summed
 * in fp32). The
 * tensor core's own accumulation is what `fast:B` and `promote:N` model;
 * on a GPU the comparison is within that model's bound.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gemm.h"
#include "mma_frag.h"

enum {
	KB = 64,              /* bytes of K per row per tile in shared memory */
	STAGES = 3,           /* K tiles in shared memory: one read, STAGES-1 in flight */
	NACC_MAX = GEMM_MI_MAX * GEMM_NI_MAX * 4,
	MN_SUB = 64,          /* rows of an MN-major sub-tile (one 128-byte k-row) */
};

/* 64 x 64: 4 warps of 32 x 32 (2 A and 2 B ldmatrix.x4 per 8 mma), 32
 * accumulators a thread, 3 x 2 x 4 KiB of stages. 128 x 128: 8 warps of
 * 64 x 32 (4 A and 2 B per 16 mma: a quarter fewer shared bytes per mma;
 * half the global bytes per mma of the CTA), 64 accumulators, 3 x 2 x 8 KiB
 * = 48 KiB of stages, all the static shared memory a CTA may have, so the
 * amax partials reuse a stage. */
const GTile gemm_tile_small = {64, 64, 2, 2, 4, 128, 0};
const GTile gemm_tile_large = {128, 128, 4, 4, 4, 256, 1};

static int stage_bytes(const G *g) { return g->t.bm * GEMM_ROW_BYTES; }   /* bm == bn */
static int nacc(const G *g) { return g->t.mi * g->t.ni * 4; }

int
gemm_ebytes(precc_format f)
{
	return f == PRECC_BF16 || f == PRECC_FP16 ? 2 : f == PRECC_FP32 || f == PRECC_TF32 ? 4 : 1;
}

/* accumulate %y, %old (wgrad into main_grad): the last op, of the f32
 * result (after bias and slice, no cast), old a param of the result's
 * type; the epilogue reads old where it stores the result. */
static int
epi_accumulate_plan(Kern *k, G *g, const Ins *in, int last)
{
	const Ins *d = ir_def_ins(k->f, in->arg[1]);

	if (in->arg[0] != last || g->cast >= 0 || g->acc_old >= 0)
		return kfail(k, "accumulate in a GEMM kernel: once, of the f32 result, last");
	if (!d || d->op != OP_param)
		return kfail(k, "accumulate: %%%s must be a param (main_grad)",
		             k->f->val[in->arg[1]].name);
	g->acc_old = in->arg[1];
	return 0;
}

/* amax %y : f32[..]{b0xb1} of the f32 result before its cast, per block
 * for the next layer's blockwise quantize: rows of 1 or whole CTA tiles
 * (a multiple of 64, or all), columns whole CTA tiles. */
static int
epi_block_amax_plan(Kern *k, G *g, const Ins *in, int last)
{
	long br = in->type.block[0], bc = in->type.block[1];

	if (in->arg[0] != last || g->cast >= 0 || g->amax >= 0)
		return kfail(k, "amax in a GEMM kernel: one, of the f32 result before its cast");
	if (!(br == 0 || br == 1 || br % g->t.bm == 0) || !(bc == 0 || bc % g->t.bn == 0))
		return kfail(k, "amax {%ldx%ld} in a GEMM kernel: blocks of 1, %dk or all rows by "
		             "%dk or all columns (the %d x %d tile)", br, bc, g->t.bm, g->t.bn,
		             g->t.bm, g->t.bn);
	g->amax_block = 1;
	return 0;
}

/* Recognise the GEMM kernel and fill g; an error names what does not fit. */
int
gemm_plan(Kern *k, G *g)
{
	const Func *f = k->f;
	const Ins *gm = NULL;

	memset(g, 0, sizeof *g);
	const char *tile = f->pattr[PA_TILE];
	if (!tile || !strcmp(tile, "64x64"))
		g->t = gemm_tile_small;
	else if (!strcmp(tile, "128x128"))
		g->t = gemm_tile_large;
	else
		return kfail(k, "tile=%s: GEMM tiles are 64x64 or 128x128", tile);
	g->bias = g->cast = g->out = g->amax = g->amax_arg = g->bias_src = -1;
	g->acc_old = -1;
	for (int i = 0; i < f->nins; i++)
		if (ir_op_gemm(f->ins[i].op)) {
			if (gm)
				return kfail(k, "one gemm per kernel");
			gm = &f->ins[i];
			k->gm = i;
		}
	/* gemm_grouped: %offs is the third operand, the scales follow it */
	int sarg = 2;
	g->offs = -1;
	if (gm->op == OP_gemm_grouped) {
		g->grouped = 1;
		g->group_k = gm->group_k;
		g->offs = gm->arg[2];
		sarg = 3;
		g->bkstack = !g->group_k && f->val[gm->arg[1]].type.dim[1]
		                            != f->val[gm->arg[0]].type.dim[1];
	}
	g->n = f->val[gm->res].type.dim[1];
	int last = gm->res;
	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		switch (in->op) {
		case OP_param: case OP_gemm: case OP_gemm_grouped: case OP_ret: case OP_transpose:
			break;
		case OP_pad: {
			/* the bias, zero-filled to the padded N */
			const Ins *d = ir_def_ins(f, in->arg[0]);
			if (!d || d->op != OP_param || in->type.rank != 1)
				return kfail(k, "pad in a GEMM kernel: of a bias param only");
			break;
		}
		case OP_bias: {
			if (in->arg[0] != last || g->cast >= 0)
				return kfail(k, "bias must take the gemm's accumulator");
			const Ins *d = ir_def_ins(f, in->arg[1]);
			g->bias_src = d && d->op == OP_pad ? d->arg[0] : in->arg[1];
			g->bias = i, last = in->res;
			break;
		}
		case OP_amax:
			if (in->type.is_scale && (in->type.block[0] || in->type.block[1])) {
				if (epi_block_amax_plan(k, g, in, last))
					return -1;
			} else if (in->arg[0] != last || g->cast >= 0 || !in->type.is_scale)
				return kfail(k, "amax in a GEMM kernel: tensorwise, of the f32 result before "
				             "its cast");
			g->amax = i, g->amax_arg = last;
			break;
		case OP_slice:
			if (in->arg[0] != last || in->type.dim[0] != f->val[last].type.dim[0])
				return kfail(k, "slice in a GEMM kernel: of the result's columns only");
			g->slice = in->type.dim[1], last = in->res;
			break;
		case OP_accumulate:
			if (epi_accumulate_plan(k, g, in, last))
				return -1;
			last = in->res;
			break;
		case OP_cast:
			if (in->arg[0] != last)
				return kfail(k, "cast must take the gemm's (or bias's) result");
			if (in->type.fmt != PRECC_BF16 && in->type.fmt != PRECC_FP16
			    && in->type.fmt != PRECC_FP32)
				return kfail(k, "GEMM output %s: bf16, fp16 or f32 are generated",
				             ir_fmt_name(in->type.fmt));
			g->cast = i, last = in->res;
			break;
		default:
			return kfail(k, "%s in a GEMM kernel (prologue: transpose; epilogue: bias, amax, "
			             "slice, cast, accumulate)",
			             opinfo[in->op].name);
		}
	}
	g->out = last;
	if (g->grouped && (g->bias >= 0 || g->amax >= 0 || g->slice || g->acc_old >= 0))
		return kfail(k, "a grouped GEMM's epilogue is its cast only (bias, amax, slice and "
		             "accumulate per expert: the per-expert path)");
	for (int o = 0; o < 2; o++) {
		GOp *op = &g->op[o];
		const Ins *d = ir_def_ins(f, gm->arg[o]);
		op->v = gm->arg[o];
		if (d && d->op == OP_transpose) {
			op->tr = 1;
			op->v = d->arg[0];
			d = ir_def_ins(f, op->v);
		}
		if (!d || d->op != OP_param)
			return kfail(k, "gemm operand %%%s must be a param or the transpose of one",
			             f->val[gm->arg[o]].name);
		op->fmt = f->val[op->v].type.fmt;
		op->rows = f->val[gm->arg[o]].type.dim[0];
		op->s = gm->narg >= sarg + 2 ? gm->arg[sarg + o] : -1;
		op->g = gm->narg == sarg + 4 ? gm->arg[sarg + 2 + o] : -1;
		op->up = op->fmt == PRECC_E2M1;
		if (op->tr && op->s >= 0)
			return kfail(k, "a transposed operand with scales (the quantize kernel writes "
			             "its transpose)");
		if (op->tr && op->up)
			return kfail(k, "a transposed e2m1 operand");
		if (op->s >= 0) {
			precc_format sf = f->val[op->s].type.fmt;
			if (sf != PRECC_FP32 && sf != PRECC_E8M0 && sf != PRECC_E4M3)
				return kfail(k, "scale %%%s: f32, e8m0 or e4m3 scales are generated",
				             f->val[op->s].name);
			if ((sf == PRECC_E4M3) != (op->g >= 0))
				return kfail(k, "scale %%%s: e4m3 block scales come with a global scale",
				             f->val[op->s].name);
		}
	}
	g->K = f->val[gm->arg[0]].type.dim[1];
	precc_format fa = g->op[0].up ? PRECC_BF16 : g->op[0].fmt;
	precc_format fb = g->op[1].up ? PRECC_BF16 : g->op[1].fmt;
	if ((g->row = asm_mma_row(fa, fb)) < 0)
		return kfail(k, "no mma.sync for %s x %s (e4m3/e5m2 in any mix, bf16, fp16, e2m1 "
		             "upcast to bf16)", ir_fmt_name(g->op[0].fmt), ir_fmt_name(g->op[1].fmt));
	g->e = gemm_ebytes(fa) == 1 ? 4 : 2;
	g->bke = KB / gemm_ebytes(fa);
	/* 16-byte loads along K where K * bytes is a multiple of 16; element
	 * loads where a static K is not (routers, gates: K = 60, K = 1); an M
	 * that is K (wgrad) must be a multiple */
	long kq = 1;
	for (int o = 0; o < 2; o++)
		if (!g->op[o].tr && 16 / gemm_ebytes(g->op[o].fmt) > kq)
			kq = 16 / gemm_ebytes(g->op[o].fmt);
	for (int o = 0; o < 2; o++)
		g->op[o].narrow = g->K >= 0 && !g->op[o].tr && g->K % (16 / gemm_ebytes(g->op[o].fmt));
	for (int o = 0; o < 2; o++)
		g->op[o].mnmaj = g->op[o].tr && gemm_ebytes(g->op[o].fmt) == 2 && g->op[o].rows > 0
		                && g->op[o].rows % 8 == 0;
	/* K = M: also whole scale blocks along K (the interpreter refuses a
	 * partial one; the quantize kernels' m_multiple says the same) */
	for (int o = 0; o < 2 && g->K == DIM_M; o++) {
		long kb = g->op[o].s >= 0 ? f->val[g->op[o].s].type.block[1] : 0;
		if (kb > 0 && kq % kb && kb % kq == 0)
			kq = kb;
		else if (kb > 0 && kq % kb)
			return kfail(k, "K = M with scale blocks of %ld along K and 16-byte loads of %ld", kb, kq);
	}
	k->m_multiple = g->K == DIM_M ? kq : 1;
	/* group=k: an expert's tokens start anywhere a K-major operand's
	 * copies may not (16-byte cp.async); where its scale blocks along the
	 * tokens make every expert start a block (the interpreter's rule)
	 * they are aligned; with a scale per expert ({*xg}, current scaling)
	 * the window's loads take any start and end (kwin) */
	for (int o = 0; o < 2 && g->group_k; o++) {
		long kb = g->op[o].s >= 0 ? f->val[g->op[o].s].type.block[1] : 0;
		g->op[o].kwin = !g->op[o].tr && kb == BLOCK_GROUP;
		if (!g->op[o].tr && !g->op[o].kwin && (kb <= 0 || kb % (16 / gemm_ebytes(g->op[o].fmt))))
			return kfail(k, "gemm_grouped group=k: K-major %%%s needs scale blocks along the "
			             "tokens (a multiple of %d) so that every expert starts a 16-byte copy",
			             f->val[g->op[o].v].name, 16 / gemm_ebytes(g->op[o].fmt));
	}
	if (g->K < 0 && g->K != DIM_M)
		return kfail(k, "K must be static or M");
	/* promotion interval, as precc_gemm resolves it */
	long P = 0;
	if (gm->accum == ACC_PROMOTE)
		P = gm->accum_n;
	for (int o = 0; o < 2 && gm->accum != ACC_PROMOTE; o++) {
		long kb = g->op[o].s >= 0 ? f->val[g->op[o].s].type.block[1] : 0;
		if (kb > 0 && (P == 0 || kb < P))
			P = kb;
	}
	if (P > 0 && g->K >= 0 && P >= g->K)
		P = 0;
	if (P > 0 && (P % (8 * g->e) || (g->bke % P && P % g->bke)))
		return kfail(k, "promotion every %ld K-elements: a multiple of the mma's K (%d) "
		             "dividing or divided by the tile's %ld", P, 8 * g->e, g->bke);
	g->P = P;
	return 0;
}

/* Whether the mma.sync family generates kernel f with the 128 x 128 tile
 * (schedule asks): the kernel plans with it (a per-block output amax's
 * blocks whole tiles) and promotes once, after all of K (tensorwise,
 * rowwise, 16-bit): its 64 accumulators a thread, with a second 64 for
 * in-loop promotion, would not fit 255 registers. Else why says why. */
int
codegen_gemm_large_takes(const Func *f, char *why, size_t n)
{
	Kern k;
	G g;
	char err[256];
	Func copy = *f;

	memset(&k, 0, sizeof k);
	copy.pattr[PA_TILE] = (char *)"128x128";
	k.f = &copy;
	k.err = err;
	k.errsz = sizeof err;
	if (gemm_plan(&k, &g)) {
		snprintf(why, n, "%s", err);
		return 0;
	}
	if (g.P) {
		snprintf(why, n, "a promotion every %ld K-elements (64 more accumulators a thread)",
		         g.P);
		return 0;
	}
	return 1;
}

/* Fill k from the GEMM: ABI, shape and launch geometry. */
int
gemm_classify(Kern *k)
{
	const Func *f = k->f;
	G g;

	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (in->op == OP_param) {
			if (k->nin >= KMAXP)
				return kfail(k, "too many params");
			k->in[k->nin++] = in->res;
		} else if (in->op == OP_ret) {
			for (int j = 0; j < in->narg; j++) {
				if (k->nout >= KMAXP)
					return kfail(k, "too many outputs");
				k->out[k->nout++] = in->arg[j];
			}
		}
	}
	if (gemm_plan(k, &g))
		return -1;
	for (int i = 0; i < k->nout; i++)
		if (k->out[i] != g.out && (g.amax < 0 || k->out[i] != f->ins[g.amax].res))
			return kfail(k, "a GEMM kernel returns its result and its amax only (%%%s)",
			             f->val[k->out[i]].name);
	k->shape = CG_GEMM;
	k->x = g.out;
	k->threads = g.t.threads;
	k->tiled = 1;
	k->tile_rows = g.t.bm;
	k->tile_cols = g.t.bn;
	k->rows = g.op[0].rows;
	k->cols = g.op[1].rows;
	return 0;
}

/* ---- emission ---------------------------------------------------------- */

/* a · b or a + b, rounded on its own: on the GPU mul.rn / add.rn, which
 * ptxas never contracts into an FMA */
static LLVMValueRef
op_rn(E *e, LLVMOpcode op, LLVMValueRef a, LLVMValueRef b)
{
	if (e->g->host)
		return LLVMBuildBinOp(e->b, op, a, b, "");
	LLVMValueRef x[2] = {a, b};
	return intrin(e, op == LLVMFMul ? "llvm.nvvm.mul.rn.f" : "llvm.nvvm.add.rn.f", NULL, 0, x, 2);
}

LLVMValueRef fmul_rn(E *e, LLVMValueRef a, LLVMValueRef b) { return op_rn(e, LLVMFMul, a, b); }
LLVMValueRef fadd_rn(E *e, LLVMValueRef a, LLVMValueRef b) { return op_rn(e, LLVMFAdd, a, b); }

/* a · b + c rounded once: on the GPU fma.rn.f32 (llvm.nvvm.fma.rn.f, one
 * FFMA), on the host llvm.fma.f32 (the emulator's, correctly rounded
 * whether or not the host has an FMA unit) */
LLVMValueRef
ffma_rn(E *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMValueRef x[3] = {a, b, c};
	if (e->g->host) {
		LLVMTypeRef t = e->g->f32;
		return intrin(e, "llvm.fma.f32", &t, 1, x, 3);
	}
	return intrin(e, "llvm.nvvm.fma.rn.f", NULL, 0, x, 3);
}

/* a ^ ((a >> 3) & mask): the XOR swizzles of mma_frag.h */
static LLVMValueRef
xor_swizzle(E *e, LLVMValueRef a, unsigned mask)
{
	LLVMBuilderRef b = e->b;
	LLVMTypeRef t = LLVMTypeOf(a);
	LLVMValueRef y = LLVMBuildAnd(b, LLVMBuildLShr(b, a, LLVMConstInt(t, 3, 0), ""), LLVMConstInt(t, mask, 0), "");
	return LLVMBuildXor(b, a, y, "");
}

/* byte offset a (i64) of a tile -> where it is stored: mma_frag.h's
 * gemm_smem_swizzle, bits 4-5 ^= bits 7-8 */
static LLVMValueRef
swz(E *e, LLVMValueRef a)
{
	return xor_swizzle(e, a, 0x30);
}

/* the same for MN-major tiles: mma_frag.h's gemm_smem_swizzle_k, bits 4-6
 * ^= bits 7-9 */
static LLVMValueRef
swz_k(E *e, LLVMValueRef a)
{
	return xor_swizzle(e, a, 0x70);
}

/* tile row r (i64), byte k of it -> the swizzled offset */
static LLVMValueRef
tile_off(E *e, LLVMValueRef r, LLVMValueRef k)
{
	return swz(e, add64(e, mul64(e, r, GEMM_ROW_BYTES), k));
}

static LLVMValueRef
slot(E *e, LLVMValueRef arr, int i)
{
	LLVMValueRef ix = c64(e, (uint64_t)i);
	return LLVMBuildGEP2(e->b, e->g->f32, arr, &ix, 1, "");
}

/* e2m1 code (low 4 bits of c, i32) -> bf16 bits (i32): every e2m1 value
 * is a bf16 value. */
static LLVMValueRef
e2m1_to_bf16(E *e, LLVMValueRef c)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef mag = LLVMBuildAnd(b, c, c32(e, 7), "");
	LLVMValueRef lo = LLVMConstInt(e->g->i64, 0x3fc03f803f000000ULL, 0);    /* 0 .5 1 1.5 */
	LLVMValueRef hi = LLVMConstInt(e->g->i64, 0x40c0408040404000ULL, 0);    /* 2 3 4 6 */
	LLVMValueRef tab = sel(e, LLVMBuildICmp(b, LLVMIntUGE, mag, c32(e, 4), ""), hi, lo);
	LLVMValueRef sh = LLVMBuildZExt(b, LLVMBuildMul(b, LLVMBuildAnd(b, mag, c32(e, 3), ""),
	                                                c32(e, 16), ""), e->g->i64, "");
	LLVMValueRef v = LLVMBuildTrunc(b, LLVMBuildAnd(b, LLVMBuildLShr(b, tab, sh, ""),
	                                                c64(e, 0xffff), ""), e->g->i32, "");
	return LLVMBuildOr(b, v, LLVMBuildShl(b, LLVMBuildAnd(b, c, c32(e, 8), ""), c32(e, 12), ""), "");
}

/* 16 e2m1 codes of row gr, K elements gk.. (packed: code 2i in the low
 * nibble of byte i), widened to 16 bf16 (32 bytes) into chunk cb of the
 * stage: one 8-byte load where K % 16 == 0 (then gk % 16 == 0 and the
 * bytes are 8-aligned), else each code's byte on its own, zero past K. */
static void
upcast_chunk(E *e, const GOp *op, LLVMValueRef base, LLVMValueRef sm, LLVMValueRef r,
             LLVMValueRef cb, LLVMValueRef gr, LLVMValueRef gk, LLVMValueRef ok, LLVMValueRef K,
             LLVMValueRef R)
{
	LLVMBuilderRef b = e->b;
	LLVMTypeRef v2 = LLVMVectorType(e->g->i32, 2), v4 = LLVMVectorType(e->g->i32, 4);
	LLVMValueRef code[16];

	if (!op->narrow) {
		LLVMValueRef off = LLVMBuildLShr(b, add64(e, LLVMBuildMul(b, sel(e, ok, gr, c64(e, 0)), K, ""),
		                                          sel(e, ok, gk, c64(e, 0))), c64(e, 1), "");
		LLVMValueRef v = sel(e, ok, load_al(e, v2, gep(e, base, off), 8), LLVMConstNull(v2));
		for (int j = 0; j < 16; j++)
			code[j] = LLVMBuildLShr(b, LLVMBuildExtractElement(b, v, c32(e, (uint64_t)(j / 8)), ""),
			                        c32(e, (uint64_t)(4 * (j % 8))), "");
	} else {
		LLVMValueRef okr = ult(e, gr, R);
		for (int j = 0; j < 16; j++) {
			LLVMValueRef kj = add64(e, gk, c64(e, (uint64_t)j));
			LLVMValueRef okj = LLVMBuildAnd(b, okr, ult(e, kj, K), "");
			LLVMValueRef el = add64(e, LLVMBuildMul(b, sel(e, okj, gr, c64(e, 0)), K, ""),
			                        sel(e, okj, kj, c64(e, 0)));
			LLVMValueRef byte = LLVMBuildZExt(b, load_al(e, e->g->i8, gep(e, base, LLVMBuildLShr(b, el, c64(e, 1), "")), 1),
			                                  e->g->i32, "");
			LLVMValueRef sh = LLVMBuildTrunc(b, LLVMBuildShl(b, LLVMBuildAnd(b, el, c64(e, 1), ""), c64(e, 2), ""),
			                                 e->g->i32, "");
			code[j] = sel(e, okj, LLVMBuildLShr(b, byte, sh, ""), c32(e, 0));
		}
	}
	for (int h = 0; h < 2; h++) {
		LLVMValueRef w = LLVMGetUndef(v4);
		for (int q = 0; q < 4; q++) {
			LLVMValueRef pr = c32(e, 0);
			for (int z = 0; z < 2; z++)
				pr = LLVMBuildOr(b, pr, LLVMBuildShl(b, e2m1_to_bf16(e, code[8 * h + 2 * q + z]),
				                                     c32(e, (uint64_t)(16 * z)), ""), "");
			w = LLVMBuildInsertElement(b, w, pr, c32(e, (uint64_t)q), "");
		}
		store_al(e, w, gep(e, sm, tile_off(e, r, add64(e, mul64(e, cb, 32), c64(e, (uint64_t)(16 * h))))), 16);
	}
}

/* One 16-byte chunk of the tile, 16 / eb elements of row gr at K elements
 * gk.., each loaded on its own from base[(gr rs + k ks) eb] and zero where
 * gr >= R or k >= K: rs = K, ks = 1 for a row-major operand whose K is
 * not a multiple of the chunk, rs = 1, ks = R for a transposed [K, R]. */
static LLVMValueRef
gather_chunk(E *e, LLVMValueRef base, int eb, LLVMValueRef gr, LLVMValueRef gk,
             LLVMValueRef R, LLVMValueRef K, LLVMValueRef rs, LLVMValueRef ks)
{
	LLVMBuilderRef b = e->b;
	LLVMTypeRef t = eb == 2 ? e->g->i16 : e->g->i8, vt = LLVMVectorType(t, (unsigned)(16 / eb));
	LLVMValueRef x = LLVMConstNull(vt), okr = ult(e, gr, R);

	for (int j = 0; j < 16 / eb; j++) {
		LLVMValueRef kj = add64(e, gk, c64(e, (uint64_t)j));
		LLVMValueRef okj = LLVMBuildAnd(b, okr, ult(e, kj, K), "");
		LLVMValueRef oj = mul64(e, add64(e, LLVMBuildMul(b, sel(e, okj, gr, c64(e, 0)), rs, ""),
		                                 LLVMBuildMul(b, sel(e, okj, kj, c64(e, 0)), ks, "")),
		                        (uint64_t)eb);
		LLVMValueRef el = sel(e, okj, load_al(e, t, gep(e, base, oj), (unsigned)eb),
		                      LLVMConstInt(t, 0, 0));
		x = LLVMBuildInsertElement(b, x, el, c32(e, (uint64_t)j), "");
	}
	return LLVMBuildBitCast(b, x, LLVMVectorType(e->g->i32, 4), "");
}

/* One operand's K tile (rows r0.., K elements k0..) into the shared
 * stage at sm: row r of the tile at 64 r (16-byte chunks swizzled,
 * mma_frag.h's gemm_smem_off), in the mma's element
 * format; rows at or past R (the operand's rows, or an expert's end) and
 * K elements at or past KE (K, or an expert's last token) are zero. Rows of 16-byte chunks go by cp.async (zero-filled past M, N
 * and K through src-size 0), in the group the caller commits, and so do
 * MN-major transposes (mnmaj); other transposes, narrow and e2m1
 * operands go by loads and stores. */
static void
load_tile(E *e, const G *g, const GOp *op, LLVMValueRef sm, LLVMValueRef r0, LLVMValueRef R,
          LLVMValueRef k0, LLVMValueRef KE, LLVMValueRef tid)
{
	LLVMBuilderRef b = e->b;
	/* a row-major operand's row pitch: K, or B's G*K where it stacks the
	 * experts along K */
	LLVMValueRef K = dimv(e, op->tr ? g->K : e->k->f->val[op->v].type.dim[1]);
	LLVMValueRef base = e->ptr[op->v];
	int eb = gemm_ebytes(op->fmt);
	long br = op == &g->op[0] ? g->t.bm : g->t.bn, GT = g->t.threads;

	if (op->mnmaj) {
		/* v is [K, R]: k-row kk of a 64-row sub-tile is 64 R-elements
		 * (128 bytes) at 128 kk, 16-byte chunks swizzled
		 * (gemm_smem_swizzle_k), sub-tile h (rows 64 h..) at h bke 128;
		 * consecutive threads take consecutive chunks of a k-row (br / 8
		 * of them: 128 or 256 contiguous bytes of global memory). R % 8
		 * == 0, so a chunk is all in R or all past it */
		for (long i = 0; i < g->bke * (br / 8) / GT; i++) {
			LLVMValueRef c = add64(e, tid, c64(e, (uint64_t)(i * GT)));
			LLVMValueRef kk = LLVMBuildUDiv(b, c, c64(e, (uint64_t)(br / 8)), "");
			LLVMValueRef rc = LLVMBuildURem(b, c, c64(e, (uint64_t)(br / 8)), "");
			LLVMValueRef gr = add64(e, r0, mul64(e, rc, 8)), gk = add64(e, k0, kk);
			LLVMValueRef ok = LLVMBuildAnd(b, ult(e, gr, R), ult(e, gk, KE), "");
			LLVMValueRef off = mul64(e, add64(e, LLVMBuildMul(b, sel(e, ok, gk, c64(e, 0)), R, ""),
			                                  sel(e, ok, gr, c64(e, 0))), 2);
			LLVMValueRef sub = mul64(e, LLVMBuildUDiv(b, rc, c64(e, MN_SUB / 8), ""),
			                         (uint64_t)(g->bke * GEMM_KROW_BYTES));
			LLVMValueRef ch = LLVMBuildURem(b, rc, c64(e, MN_SUB / 8), "");
			LLVMValueRef dst = add64(e, sub, swz_k(e, add64(e, mul64(e, kk, GEMM_KROW_BYTES),
			                                                mul64(e, ch, 16))));
			asm_cp_async(e->g, gep(e, sm, dst), gep(e, base, off), sel(e, ok, c32(e, 16), c32(e, 0)));
		}
		return;
	}
	long rowbytes = g->bke * eb, cpr = rowbytes / 16, per = 16 / eb;
	if (op->tr) {
		/* v is [K, R]: a thread gathers one 16-byte chunk of row r (per
		 * k-elements, each a load: consecutive threads read consecutive
		 * r) and stores it whole, so that each quarter-warp's stores hit
		 * 8 different bank groups (element stores 64 bytes apart were
		 * 4-way conflicted) */
		for (long i = 0; i < br * cpr / GT; i++) {
			LLVMValueRef c = add64(e, tid, c64(e, (uint64_t)(i * GT)));
			LLVMValueRef r = LLVMBuildURem(b, c, c64(e, (uint64_t)br), "");
			LLVMValueRef cb = LLVMBuildUDiv(b, c, c64(e, (uint64_t)br), "");
			LLVMValueRef gr = add64(e, r0, r), gk = add64(e, k0, mul64(e, cb, (uint64_t)per));
			LLVMValueRef v = gather_chunk(e, base, eb, gr, gk, R, KE, c64(e, 1), R);
			store_al(e, v, gep(e, sm, tile_off(e, r, mul64(e, cb, 16))), 16);
		}
		return;
	}
	for (long i = 0; i < br * cpr / GT; i++) {
		LLVMValueRef c = add64(e, tid, c64(e, (uint64_t)(i * GT)));
		LLVMValueRef r = LLVMBuildUDiv(b, c, c64(e, (uint64_t)cpr), "");
		LLVMValueRef cb = LLVMBuildURem(b, c, c64(e, (uint64_t)cpr), "");
		LLVMValueRef gr = add64(e, r0, r), gk = add64(e, k0, mul64(e, cb, (uint64_t)per));
		LLVMValueRef ok = LLVMBuildAnd(b, ult(e, gr, R), ult(e, gk, KE), "");
		LLVMValueRef off = mul64(e, add64(e, LLVMBuildMul(b, sel(e, ok, gr, c64(e, 0)), K, ""),
		                                  sel(e, ok, gk, c64(e, 0))), (uint64_t)eb);
		if (op->up) {
			upcast_chunk(e, op, base, sm, r, cb, gr, gk, ok, K, R);
			continue;
		}
		if (op->kwin) {
			/* an expert's window (group=k): from a 16-byte aligned first
			 * token (k0 % per: one answer for the whole tile) cp.async
			 * of the bytes before its end, the rest zero-filled (no
			 * token of the next expert); else element loads */
			LLVMValueRef al = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, k0, c64(e, (uint64_t)per), ""),
			                                c64(e, 0), "");
			LLVMValueRef left = LLVMBuildSub(b, KE, sel(e, ok, gk, KE), "");
			LLVMValueRef nb = LLVMBuildTrunc(b, mul64(e, sel(e, ult(e, left, c64(e, (uint64_t)per)), left,
			                                                  c64(e, (uint64_t)per)), (uint64_t)eb), e->g->i32, "");
			LLVMValueRef dst = tile_off(e, r, mul64(e, cb, 16));
			LLVMBasicBlockRef c0 = begin_if(e, al);
			asm_cp_async(e->g, gep(e, sm, dst), gep(e, base, off), sel(e, ok, nb, c32(e, 0)));
			end_if(e, c0);
			c0 = begin_if(e, LLVMBuildNot(b, al, ""));
			store_al(e, gather_chunk(e, base, eb, gr, gk, R, KE, K, c64(e, 1)), gep(e, sm, dst), 16);
			end_if(e, c0);
			continue;
		}
		if (!op->narrow) {
			LLVMValueRef dst = tile_off(e, r, mul64(e, cb, 16));
			asm_cp_async(e->g, gep(e, sm, dst), gep(e, base, off), sel(e, ok, c32(e, 16), c32(e, 0)));
			continue;
		}
		LLVMValueRef v = gather_chunk(e, base, eb, gr, gk, R, KE, K, c64(e, 1));
		store_al(e, v, gep(e, sm, tile_off(e, r, mul64(e, cb, 16))), 16);
	}
}

/* Decoded scale_inv of operand op for row i (clamped in range by the
 * caller) and the K chunk starting at kstart. */
LLVMValueRef
scale_at(E *e, const GOp *op, LLVMValueRef i, LLVMValueRef kstart)
{
	LLVMBuilderRef b = e->b;
	if (op->s < 0)
		return cf(e, 1.0);
	const Type *st = &e->k->f->val[op->s].type;
	i = LLVMBuildZExt(b, i, e->g->i64, "");
	LLVMValueRef bi = st->block[0] ? LLVMBuildUDiv(b, i, c64(e, (uint64_t)st->block[0]), "") : c64(e, 0);
	LLVMValueRef bk = st->block[1] ? LLVMBuildUDiv(b, kstart, c64(e, (uint64_t)st->block[1]), "")
	                               : c64(e, 0);
	LLVMValueRef ix = add64(e, LLVMBuildMul(b, bi, dimv(e, st->dim[1]), ""), bk);
	if (st->block[0] == BLOCK_GROUP || st->block[1] == BLOCK_GROUP)
		ix = e->grp;    /* one per group: the tile's (k_gemm_grouped*.c) */
	LLVMValueRef base = e->ptr[op->s];
	if (st->fmt == PRECC_FP32)
		return load_al(e, e->g->f32, gep(e, base, mul64(e, ix, 4)), 4);
	LLVMValueRef code = LLVMBuildZExt(b, load_al(e, e->g->i8, gep(e, base, ix), 1), e->g->i32, "");
	if (st->fmt == PRECC_E8M0) {
		/* 2^(c-127); 0 -> 2^-127 (subnormal), 0xff -> NaN */
		LLVMValueRef bits = sel(e, LLVMBuildICmp(b, LLVMIntEQ, code, c32(e, 0), ""), c32(e, 0x00400000),
		                        LLVMBuildShl(b, code, c32(e, 23), ""));
		bits = sel(e, LLVMBuildICmp(b, LLVMIntEQ, code, c32(e, 0xff), ""), c32(e, 0x7fffffff), bits);
		return LLVMBuildBitCast(b, bits, e->g->f32, "");
	}
	/* e4m3 through the f16 cvt (exact), times the global scale_inv */
	LLVMValueRef h = asm_cvt_f16x2_from_f8x2(e->g, PRECC_E4M3, LLVMBuildTrunc(b, code, e->g->i16, ""));
	LLVMValueRef d = LLVMBuildFPExt(b, LLVMBuildBitCast(b, LLVMBuildTrunc(b, h, e->g->i16, ""),
	                                                    e->g->f16, ""), e->g->f32, "");
	return fmul_rn(e, d, load_al(e, e->g->f32, e->ptr[op->g], 4));
}

/* Each operand has one scale_inv ({*x*}) or none. */
int
gemm_tensorwise(const E *e, const G *g)
{
	for (int i = 0; i < 2; i++) {
		const GOp *op = &g->op[i];
		const Type *st = op->s >= 0 ? &e->k->f->val[op->s].type : NULL;
		if (!st || (!st->block[0] && !st->block[1]))
			continue;
		if (g->grouped && (st->block[0] == BLOCK_GROUP || st->block[1] == BLOCK_GROUP))
			continue;
		/* an expert's weight scale is one over its tiles, but as one
		 * with a {gx*} A (else the per-element path, as before) */
		const GOp *a = &g->op[0];
		const Type *at = a->s >= 0 ? &e->k->f->val[a->s].type : NULL;
		bool ga = at && (at->block[0] == BLOCK_GROUP || at->block[1] == BLOCK_GROUP);
		if (g->grouped && i == 1 && ga && !g->group_k
		    && ((!g->bkstack && st->block[0] == g->n && !st->block[1])
		        || (g->bkstack && !st->block[0] && st->block[1] == g->K)))
			continue;
		return 0;
	}
	return 1;
}

/* A tensorwise GEMM's sa · sb as s · p · p, so that inner · sa · sb
 * overflows or underflows only where its value does (fl(sa · sb) = inf
 * made every output inf or NaN where float64 and torch._scaled_mm are
 * finite): p = 1 and s = fl(sa · sb), unless that overflows (p = 2^64)
 * or is subnormal (p = 2^-64), when s = fl(fl(sa / p) · fl(sb / p)), both
 * quotients exact. The interpreter's tensor_scale (interp/gemm.c). */
void
tensor_scale(E *e, LLVMValueRef sa, LLVMValueRef sb, LLVMValueRef *s, LLVMValueRef *p)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef x = fabs_(e, fmul_rn(e, sa, sb));
	LLVMValueRef fin = LLVMBuildAnd(b, is_finite(e, sa), is_finite(e, sb), "");
	LLVMValueRef over = LLVMBuildAnd(b, fin, LLVMBuildFCmp(b, LLVMRealOGT, x, cf(e, FLT_MAX), ""), "");
	LLVMValueRef under = LLVMBuildAnd(b, fin, LLVMBuildFCmp(b, LLVMRealOLT, x, cf(e, FLT_MIN), ""), "");
	LLVMValueRef k = sel(e, over, cf(e, 0x1p-64), sel(e, under, cf(e, 0x1p64), cf(e, 1.0)));
	*p = sel(e, over, cf(e, 0x1p64), sel(e, under, cf(e, 0x1p-64), cf(e, 1.0)));
	*s = fmul_rn(e, fmul_rn(e, sa, k), fmul_rn(e, sb, k));
}

/* This thread's place: its lane's group and thread-in-group (the mma
 * fragment maps' g and t), its warp's place in the 2 x 2, the CTA's tile. */
typedef struct Lane {
	LLVMValueRef tid, gq, t4, wm, wn, row0, col0;   /* i64 */
} Lane;

static Lane
lane_of(E *e, const G *g, const GPos *p)
{
	LLVMBuilderRef b = e->b;
	Lane l;
	l.tid = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef warp = LLVMBuildUDiv(b, l.tid, c64(e, 32), ""), lane = LLVMBuildURem(b, l.tid, c64(e, 32), "");
	l.gq = LLVMBuildUDiv(b, lane, c64(e, 4), "");
	l.t4 = LLVMBuildURem(b, lane, c64(e, 4), "");
	l.wm = LLVMBuildUDiv(b, warp, c64(e, (uint64_t)g->t.wn), "");
	l.wn = LLVMBuildURem(b, warp, c64(e, (uint64_t)g->t.wn), "");
	l.row0 = p->row0;
	l.col0 = p->col0;
	return l;
}

typedef struct Frag {
	LLVMValueRef rowv[GEMM_MI_MAX][2], colv[GEMM_NI_MAX][2];   /* global row / column of each lane's C */
	LLVMValueRef rowc[GEMM_MI_MAX][2], colc[GEMM_NI_MAX][2];   /* clamped in range, for scale reads (i32:
	                                            live across the K loop, half the registers) */
	LLVMValueRef bk;      /* B's K minus A's (GPos.bkbase), or NULL */
} Frag;

/* The global rows and columns of this lane's accumulators; rowc and colc
 * are the rows of A and of B (from p->brow0) the scales are read at. */
static void
frag_init(E *e, const G *g, Frag *fr, const GPos *p, LLVMValueRef N)
{
	LLVMBuilderRef b = e->b;
	Lane l = lane_of(e, g, p);
	LLVMValueRef M = p->mend;
	int MI = g->t.mi, NI = g->t.ni;
	LLVMValueRef gq = l.gq, t4 = l.t4, wm = l.wm, wn = l.wn, row0 = l.row0, col0 = l.col0;

	fr->bk = p->bkbase ? LLVMBuildSub(b, p->bkbase, p->kbase ? p->kbase : c64(e, 0), "") : NULL;

	for (int mi = 0; mi < MI; mi++)
		for (int h = 0; h < 2; h++) {
			fr->rowv[mi][h] = add64(e, add64(e, row0, mul64(e, wm, (uint64_t)(16 * MI))),
			                        add64(e, gq, c64(e, (uint64_t)(mi * 16 + 8 * h))));
			fr->rowc[mi][h] = LLVMBuildTrunc(b, sel(e, ult(e, fr->rowv[mi][h], M), fr->rowv[mi][h],
			                                        c64(e, 0)), e->g->i32, "");
		}
	for (int ni = 0; ni < NI; ni++)
		for (int c = 0; c < 2; c++) {
			fr->colv[ni][c] = add64(e, add64(e, col0, mul64(e, wn, (uint64_t)(8 * NI))),
			                        add64(e, mul64(e, t4, 2), c64(e, (uint64_t)(ni * 8 + c))));
			fr->colc[ni][c] = LLVMBuildTrunc(b, add64(e, p->brow0, sel(e, ult(e, fr->colv[ni][c], N),
			                                                         fr->colv[ni][c], c64(e, 0))),
			                                 e->g->i32, "");
		}
}

/* outer = fma(inner, fl(sa · sb), outer) for the chunk at kstart, one
 * FFMA as DeepGEMM promotes and the interpreter models it (ir/interp/
 * gemm.c's promote_body); tensorwise two roundings, fl(outer +
 * fl(fl(fl(inner · s) · p) · p)) (tensor_scale); inner = 0. outer NULL:
 * the only promotion, outer starts at +0 and the result goes to res. */
static void
promote(E *e, const G *g, const Frag *fr, LLVMValueRef inner, LLVMValueRef outer,
        LLVMValueRef kstart, LLVMValueRef res[NACC_MAX])
{
	LLVMValueRef sa[GEMM_MI_MAX][2], sb[GEMM_NI_MAX][2], ts = NULL, tp = NULL;
	int MI = g->t.mi, NI = g->t.ni;

	LLVMValueRef bk = fr->bk ? add64(e, kstart, fr->bk) : kstart;   /* B's K */

	if (gemm_tensorwise(e, g))
		tensor_scale(e, scale_at(e, &g->op[0], fr->rowc[0][0], kstart),
		             scale_at(e, &g->op[1], fr->colc[0][0], bk), &ts, &tp);
	for (int mi = 0; mi < MI && !ts; mi++)
		for (int h = 0; h < 2; h++)
			sa[mi][h] = scale_at(e, &g->op[0], fr->rowc[mi][h], kstart);
	for (int ni = 0; ni < NI && !ts; ni++)
		for (int c = 0; c < 2; c++)
			sb[ni][c] = scale_at(e, &g->op[1], fr->colc[ni][c], bk);
	for (int mi = 0; mi < MI; mi++)
		for (int ni = 0; ni < NI; ni++)
			for (int v = 0; v < 4; v++) {
				int a = (mi * NI + ni) * 4 + v;
				LLVMValueRef in = LLVMBuildLoad2(e->b, e->g->f32, slot(e, inner, a), "");
				LLVMValueRef o = outer ? LLVMBuildLoad2(e->b, e->g->f32, slot(e, outer, a), "") : cf(e, 0);
				o = ts ? fadd_rn(e, o, fmul_rn(e, fmul_rn(e, fmul_rn(e, in, ts), tp), tp))
				       : ffma_rn(e, in, fmul_rn(e, sa[mi][v >> 1], sb[ni][v & 1]), o);
				if (outer) {
					LLVMBuildStore(e->b, o, slot(e, outer, a));
					LLVMBuildStore(e->b, cf(e, 0), slot(e, inner, a));
				} else {
					res[a] = o;
				}
			}
}

/* promote only when the chunk ending at kend holds any of the klen K
 * elements (counted from kbase: an expert's first token, else 0) */
static void
promote_if(E *e, const G *g, const Frag *fr, LLVMValueRef inner, LLVMValueRef outer,
           LLVMValueRef kend, LLVMValueRef extra, LLVMValueRef kbase, LLVMValueRef klen)
{
	LLVMValueRef kstart = LLVMBuildSub(e->b, kend, c64(e, (uint64_t)g->P), "");
	LLVMValueRef c = ult(e, kstart, klen);
	if (extra)
		c = LLVMBuildAnd(e->b, c, extra, "");
	LLVMBasicBlockRef cont = begin_if(e, c);
	promote(e, g, fr, inner, outer, add64(e, kbase, kstart), NULL);
	end_if(e, cont);
}

/* The bias at column col (i64) of the result, as f32; +0 past a padded
 * bias. NULL (with the error) for a bias format without a load. */
LLVMValueRef
epi_bias(E *e, const G *g, LLVMValueRef col)
{
	LLVMBuilderRef b = e->b;
	Cg *cg = e->g;
	int bv = g->bias_src;
	precc_format bfm = e->k->f->val[bv].type.fmt;
	long blen = e->k->f->val[bv].type.dim[0];
	LLVMValueRef jok = ult(e, col, c64(e, (uint64_t)blen));
	LLVMValueRef j = sel(e, jok, col, c64(e, 0)), bx;

	if (bfm == PRECC_FP32)
		bx = load_al(e, cg->f32, gep(e, e->ptr[bv], mul64(e, j, 4)), 4);
	else if (bfm == PRECC_BF16)
		bx = LLVMBuildBitCast(b, LLVMBuildShl(b, LLVMBuildZExt(b,
		         load_al(e, cg->i16, gep(e, e->ptr[bv], mul64(e, j, 2)), 2), cg->i32, ""),
		         c32(e, 16), ""), cg->f32, "");
	else if (bfm == PRECC_FP16)
		bx = LLVMBuildFPExt(b, load_al(e, cg->f16, gep(e, e->ptr[bv], mul64(e, j, 2)), 2),
		                    cg->f32, "");
	else {
		kfail(e->k, "bias %s: f32, bf16 or fp16", ir_fmt_name(bfm));
		return NULL;
	}
	return sel(e, jok, bx, cf(e, 0));     /* past a padded bias: +0 */
}

/* The value stored at byte offset off of the result: fl(old[off] + y)
 * when the GEMM accumulates into old (main_grad), else y. old and the
 * result may be one buffer: each element is read, then written, by the
 * one thread that owns it. */
LLVMValueRef
epi_accumulate(E *e, const G *g, LLVMValueRef off, LLVMValueRef y)
{
	if (g->acc_old < 0)
		return y;
	LLVMValueRef old = load_al(e, e->g->f32, gep(e, e->ptr[g->acc_old], off), 4);
	return fadd_rn(e, old, y);
}

/* The per-block output amax: rbits[mi][h] is this lane's max |y| bits
 * over its columns of row fr->rowv[mi][h] (0 past M and N). 1 x bc
 * blocks: the row's max over the 4 lanes holding it (shuffles), one
 * atom.global.max.u32 per row and warp; taller blocks: the CTA's max
 * (shuffles, then shared memory), one atomic per CTA. Every value is a
 * nonnegative float's bits (NaN above inf), so the unsigned max is the
 * float max. The launcher zeroes the output first. */
static void
epi_block_amax_out(E *e, const G *g, const GPos *p, const Frag *fr, LLVMValueRef rbits[GEMM_MI_MAX][2])
{
	int MI = g->t.mi;
	LLVMBuilderRef b = e->b;
	const Type *t = &e->k->f->ins[g->amax].type;
	LLVMValueRef out = e->ptr[e->k->f->ins[g->amax].res], M = dimv(e, g->op[0].rows);
	long br = t->block[0], bc = t->block[1];
	Lane l = lane_of(e, g, p);
	LLVMValueRef nbc = dimv(e, t->dim[1]);
	LLVMValueRef cb = bc ? LLVMBuildUDiv(b, l.col0, c64(e, (uint64_t)bc), "") : c64(e, 0);

	if (br == 1) {
		for (int mi = 0; mi < MI; mi++)
			for (int h = 0; h < 2; h++) {
				LLVMValueRef v = group_max(e, rbits[mi][h], 4), r = fr->rowv[mi][h];
				LLVMValueRef ok = LLVMBuildAnd(b, ult(e, r, M), LLVMBuildICmp(b, LLVMIntEQ, l.t4,
				                                                             c64(e, 0), ""), "");
				LLVMBasicBlockRef cont = begin_if(e, ok);
				LLVMValueRef ix = add64(e, LLVMBuildMul(b, r, nbc, ""), cb);
				LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpUMax, gep(e, out, mul64(e, ix, 4)), v,
				                   LLVMAtomicOrderingMonotonic, 0);
				end_if(e, cont);
			}
		return;
	}
	LLVMValueRef v = c32(e, 0);
	for (int mi = 0; mi < MI; mi++)
		for (int h = 0; h < 2; h++)
			v = umax(e, v, rbits[mi][h]);
	v = cta_max(e, v);
	LLVMValueRef rb = br ? LLVMBuildUDiv(b, l.row0, c64(e, (uint64_t)br), "") : c64(e, 0);
	LLVMBasicBlockRef cont = begin_if(e, LLVMBuildICmp(b, LLVMIntEQ, l.tid, c64(e, 0), ""));
	LLVMValueRef ix = add64(e, LLVMBuildMul(b, rb, nbc, ""), cb);
	LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpUMax, gep(e, out, mul64(e, ix, 4)), v,
	                   LLVMAtomicOrderingMonotonic, 0);
	end_if(e, cont);
}

void
gemm_accumulators(E *e, const G *g, LLVMValueRef *inner, LLVMValueRef *outer)
{
	LLVMTypeRef at = LLVMArrayType2(e->g->f32, (uint64_t)nacc(g));
	*inner = LLVMBuildAlloca(e->b, at, "inner");
	*outer = g->P ? LLVMBuildAlloca(e->b, at, "outer") : NULL;
}

int
emit_gemm(E *e)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef inner, outer;
	G g;

	if (gemm_plan(e->k, &g))
		return -1;
	gemm_accumulators(e, &g, &inner, &outer);
	GPos p = {
		.row0 = mul64(e, LLVMBuildZExt(b, sreg(e, "ctaid.y"), e->g->i64, ""), (uint64_t)g.t.bm),
		.col0 = mul64(e, LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, ""), (uint64_t)g.t.bn),
		.mend = dimv(e, g.op[0].rows), .brow0 = c64(e, 0), .bend = dimv(e, g.op[1].rows),
	};
	return gemm_tile(e, &g, &p, inner, outer);
}

int
gemm_tile(E *e, const G *gp, const GPos *pos, LLVMValueRef inner, LLVMValueRef outer)
{
	Kern *k = e->k;
	Cg *cg = e->g;
	LLVMBuilderRef b = e->b;
	G g = *gp;

	int MI = g.t.mi, NI = g.t.ni, NACC = nacc(&g), STAGE_BYTES = stage_bytes(&g);
	for (int a = 0; a < NACC; a++) {
		LLVMBuildStore(b, cf(e, 0), slot(e, inner, a));
		if (outer)
			LLVMBuildStore(b, cf(e, 0), slot(e, outer, a));
	}
	Lane ln = lane_of(e, &g, pos);
	LLVMValueRef tid = ln.tid, wm = ln.wm, wn = ln.wn;
	LLVMValueRef row0 = ln.row0, col0 = ln.col0, b0 = add64(e, pos->brow0, col0);
	LLVMValueRef M = pos->mend, N = g.grouped ? dimv(e, g.n) : dimv(e, g.op[1].rows);
	LLVMTypeRef st = LLVMArrayType2(cg->i8, (uint64_t)(STAGES * STAGE_BYTES));
	LLVMValueRef sA = shared_array(e, "gemm_a", 0, st, 1024), sB = shared_array(e, "gemm_b", 1, st, 1024);
	Frag fr;
	if (g.P)              /* promotions inside the K loop read scales */
		frag_init(e, &g, &fr, pos, N);
	/* ldmatrix row addresses (i32 offsets in a stage). Lane l = 8j + i
	 * gives row i of matrix j. A, per 16-row mma tile: matrix j = rows
	 * 8 (j & 1).., K chunk j >> 1 of the 32-byte step = registers a0..a3;
	 * B, per two 8-row mma tiles: matrix j = rows 8 (j >> 1).., chunk j & 1
	 * = b0, b1 of the first, then of the second (mma_frag.h's maps with 4
	 * bytes per register). Every row of a lane has (row >> 1) & 3 = i >> 1,
	 * so the swizzled chunk is (chunk ^ (i >> 1)) and the 32-byte steps
	 * (ks) XOR 32 onto the lane's offset; mi, pairs and stages add. The
	 * warp's tile is 16 MI rows by 8 NI columns. */
	LLVMValueRef lane = LLVMBuildURem(b, tid, c64(e, 32), "");
	LLVMValueRef lj = LLVMBuildLShr(b, lane, c64(e, 3), ""), li = LLVMBuildAnd(b, lane, c64(e, 7), "");
	LLVMValueRef lx = LLVMBuildLShr(b, li, c64(e, 1), "");
	LLVMValueRef arow = add64(e, add64(e, mul64(e, wm, (uint64_t)(16 * MI)),
	                                   mul64(e, LLVMBuildAnd(b, lj, c64(e, 1), ""), 8)), li);
	LLVMValueRef brow = add64(e, add64(e, mul64(e, wn, (uint64_t)(8 * NI)),
	                                   mul64(e, LLVMBuildLShr(b, lj, c64(e, 1), ""), 8)), li);
	LLVMValueRef ac = LLVMBuildXor(b, LLVMBuildLShr(b, lj, c64(e, 1), ""), lx, "");
	LLVMValueRef bc = LLVMBuildXor(b, LLVMBuildAnd(b, lj, c64(e, 1), ""), lx, "");
	/* lo[o][x]: x = ks for a row-major tile (+ 1024 per mma tile or
	 * pair), x = the mma tile (A) or pair (B) for an MN-major one (+ 2048
	 * per ks) */
	LLVMValueRef lo[2][GEMM_MI_MAX];
	LLVMValueRef rowv[2] = {arow, brow}, cv[2] = {ac, bc}, wv[2] = {wm, wn};
	int wch[2] = {2 * MI, NI};    /* 8-element chunks of M or N per warp */
	for (int o = 0; o < 2; o++)
		for (int x = 0; x < (g.op[o].mnmaj ? (o ? NI / 2 : MI) : KB / 32); x++) {
			LLVMValueRef v;
			if (!g.op[o].mnmaj)
				v = add64(e, mul64(e, rowv[o], GEMM_ROW_BYTES),
				          LLVMBuildXor(b, mul64(e, cv[o], 16), c64(e, (uint64_t)(32 * x)), ""));
			else {
				/* MN-major (ldmatrix.trans: matrix j's 8 rows are 8 k, its
				 * 16 bytes 8 of M or N). A: k rows 8 (j >> 1) + i, chunk
				 * w + 2 mi + (j & 1) = registers a0..a3; B: k rows
				 * 8 (j & 1) + i, chunk w + 2 p + (j >> 1) = b0, b1 of
				 * the pair's first tile, then of its second; w = the
				 * warp's first chunk, wch per warp. Chunk q is in 64-row
				 * sub-tile q / 8 at chunk q % 8, and the row's swizzle is
				 * ^ i. w % 8 is 0 or 4 and 2 x + (j & 1) stays below 8
				 * (or 4), so the sum has no carries and XORs. */
				LLVMValueRef jk = o == 0 ? LLVMBuildLShr(b, lj, c64(e, 1), "") : LLVMBuildAnd(b, lj, c64(e, 1), "");
				LLVMValueRef jc = o == 0 ? LLVMBuildAnd(b, lj, c64(e, 1), "") : LLVMBuildLShr(b, lj, c64(e, 1), "");
				LLVMValueRef krow = add64(e, mul64(e, jk, 8), li);
				LLVMValueRef w = mul64(e, wv[o], (uint64_t)wch[o]);
				LLVMValueRef sub = mul64(e, LLVMBuildLShr(b, w, c64(e, 3), ""),
				                         (uint64_t)(g.bke * GEMM_KROW_BYTES));
				LLVMValueRef ch = LLVMBuildXor(b, add64(e, LLVMBuildAnd(b, w, c64(e, 7), ""), jc), li, "");
				ch = LLVMBuildXor(b, ch, c64(e, (uint64_t)(2 * x)), "");
				v = add64(e, sub, add64(e, mul64(e, krow, GEMM_KROW_BYTES), mul64(e, ch, 16)));
			}
			lo[o][x] = LLVMBuildTrunc(b, v, cg->i32, "");
		}
	/* K elements kbase .. kbase + K: all of K, or an expert's tokens */
	LLVMValueRef kbase = pos->kbase ? pos->kbase : c64(e, 0);
	LLVMValueRef K = pos->klen ? pos->klen : dimv(e, g.K), KE = add64(e, kbase, K);
	/* B's K elements: those of A, or from the expert's g·K (B[N, G*K]) */
	LLVMValueRef bsh = pos->bkbase ? LLVMBuildSub(b, pos->bkbase, kbase, "") : NULL;
	LLVMValueRef BKE = bsh ? add64(e, KE, bsh) : KE;
	LLVMValueRef nkt = LLVMBuildUDiv(b, add64(e, K, c64(e, (uint64_t)g.bke - 1)), c64(e, (uint64_t)g.bke), "");
	if (pos->zero)          /* rows of no expert: no K loop */
		nkt = sel(e, pos->zero, c64(e, 0), nkt);
	/* the pipeline's prologue: tiles 0 .. STAGES-2 in flight, one commit
	 * group each (empty past the last tile, so that the counts hold) */
	for (int s = 0; s < STAGES - 1; s++) {
		LLVMBasicBlockRef cont = begin_if(e, ult(e, c64(e, (uint64_t)s), nkt));
		LLVMValueRef so = c64(e, (uint64_t)s * STAGE_BYTES);
		LLVMValueRef k0 = add64(e, kbase, c64(e, (uint64_t)s * (uint64_t)g.bke));
		load_tile(e, &g, &g.op[0], gep(e, sA, so), row0, M, k0, KE, tid);
		load_tile(e, &g, &g.op[1], gep(e, sB, so), b0, pos->bend, bsh ? add64(e, k0, bsh) : k0, BKE, tid);
		end_if(e, cont);
		asm_cp_async_commit(cg);
	}
	Loop l;
	LLVMValueRef kt = loop_begin(e, &l, c64(e, 0), nkt);
	LLVMValueRef k0 = mul64(e, kt, (uint64_t)g.bke);
	/* tile kt has landed (this thread's copies: all but the STAGES-2
	 * newest groups; CUTLASS's sm80_mma_multistage.hpp:283 waits the
	 * same), and everyone's, after the barrier, which also
	 * says that every warp is done with tile kt-1's stage, the one the
	 * next copy overwrites */
	asm_cp_async_wait(cg, STAGES - 2);
	barrier(e);
	LLVMValueRef nk = add64(e, kt, c64(e, STAGES - 1));
	LLVMBasicBlockRef ncont = begin_if(e, ult(e, nk, nkt));
	LLVMValueRef nso = mul64(e, LLVMBuildURem(b, nk, c64(e, STAGES), ""), STAGE_BYTES);
	LLVMValueRef nk0 = add64(e, kbase, mul64(e, nk, (uint64_t)g.bke));
	load_tile(e, &g, &g.op[0], gep(e, sA, nso), row0, M, nk0, KE, tid);
	load_tile(e, &g, &g.op[1], gep(e, sB, nso), b0, pos->bend, bsh ? add64(e, nk0, bsh) : nk0, BKE, tid);
	end_if(e, ncont);
	asm_cp_async_commit(cg);
	LLVMValueRef cso = LLVMBuildTrunc(b, mul64(e, LLVMBuildURem(b, kt, c64(e, STAGES), ""), STAGE_BYTES),
	                                  cg->i32, "");
	int kstep = 8 * g.e;
	for (int ks = 0; ks < KB / 32; ks++) {
		LLVMValueRef af[GEMM_MI_MAX][4], bf[GEMM_NI_MAX][2];
		for (int mi = 0; mi < MI; mi++) {
			int km = g.op[0].mnmaj;
			LLVMValueRef a = LLVMBuildAdd(b, LLVMBuildAdd(b, lo[0][km ? mi : ks], cso, ""),
			                              c32(e, (uint64_t)(km ? ks * 16 * GEMM_KROW_BYTES
			                                                   : mi * 16 * GEMM_ROW_BYTES)), "");
			asm_ldmatrix_x4(cg, km, gep(e, sA, a), af[mi]);
		}
		for (int p = 0; p < NI / 2; p++) {
			LLVMValueRef d[4];
			int km = g.op[1].mnmaj;
			LLVMValueRef a = LLVMBuildAdd(b, LLVMBuildAdd(b, lo[1][km ? p : ks], cso, ""),
			                              c32(e, (uint64_t)(km ? ks * 16 * GEMM_KROW_BYTES
			                                                   : p * 16 * GEMM_ROW_BYTES)), "");
			asm_ldmatrix_x4(cg, km, gep(e, sB, a), d);
			bf[2 * p][0] = d[0], bf[2 * p][1] = d[1], bf[2 * p + 1][0] = d[2], bf[2 * p + 1][1] = d[3];
		}
		for (int mi = 0; mi < MI; mi++)
			for (int ni = 0; ni < NI; ni++) {
				LLVMValueRef c[4], d[4];
				int a0 = (mi * NI + ni) * 4;
				for (int v = 0; v < 4; v++)
					c[v] = LLVMBuildLoad2(b, cg->f32, slot(e, inner, a0 + v), "");
				asm_mma(cg, g.row, af[mi], bf[ni], c, d);
				for (int v = 0; v < 4; v++)
					LLVMBuildStore(b, d[v], slot(e, inner, a0 + v));
			}
		long done = (long)(ks + 1) * kstep;     /* K elements of this tile so far */
		if (g.P && g.P <= g.bke && done % g.P == 0)
			promote_if(e, &g, &fr, inner, outer, add64(e, k0, c64(e, (uint64_t)done)), NULL, kbase, K);
	}
	if (g.P > g.bke) {
		LLVMValueRef kend = add64(e, k0, c64(e, (uint64_t)g.bke));
		LLVMValueRef at_p = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, kend, c64(e, (uint64_t)g.P), ""),
		                                  c64(e, 0), "");
		/* the last tile closes a partial chunk too */
		LLVMValueRef last = LLVMBuildICmp(b, LLVMIntUGE, kend, K, "");
		LLVMValueRef kchunk = sel(e, at_p, kend,
		                          mul64(e, LLVMBuildUDiv(b, add64(e, kend, c64(e, (uint64_t)g.P - 1)),
		                                                 c64(e, (uint64_t)g.P), ""), (uint64_t)g.P));
		promote_if(e, &g, &fr, inner, outer, kchunk, LLVMBuildOr(b, at_p, last, ""), kbase, K);
	}
	loop_end(e, &l);
	/* rolled: ptxas unrolled it 4 times and hoisted the ldmatrix of the
	 * next iterations, 255 registers and spills on the 128 x 128 tile */
	loop_nounroll(e, &l);
	asm_cp_async_wait(cg, 0);     /* only empty groups are left */

	/* epilogue; a one-promotion GEMM computes the lanes' rows and
	 * columns only now, so that they are not live across the K loop */
	if (!g.P)
		frag_init(e, &g, &fr, pos, N);
	LLVMValueRef acc[NACC_MAX];
	if (!g.P)     /* the scales at kbase (an empty expert's may be at K: 0) */
		promote(e, &g, &fr, inner, NULL, pos->kbase ? sel(e, ult(e, kbase, dimv(e, g.K)), kbase, c64(e, 0))
		                                            : c64(e, 0), acc);
	else
		for (int a = 0; a < NACC; a++)
			acc[a] = LLVMBuildLoad2(b, cg->f32, slot(e, outer, a), "");
	for (int a = 0; a < NACC && pos->zero; a++)
		acc[a] = sel(e, pos->zero, cf(e, 0), acc[a]);
	precc_format of = g.cast >= 0 ? k->f->ins[g.cast].type.fmt : PRECC_FP32;
	int oeb = gemm_ebytes(of);
	LLVMValueRef NS = g.slice ? c64(e, (uint64_t)g.slice) : N;   /* stored columns, row pitch */
	LLVMValueRef mbits = c32(e, 0), rbits[GEMM_MI_MAX][2];
	for (int mi = 0; mi < MI; mi++)
		rbits[mi][0] = rbits[mi][1] = c32(e, 0);
	for (int mi = 0; mi < MI; mi++)
		for (int ni = 0; ni < NI; ni++)
			for (int h = 0; h < 2; h++) {
				LLVMValueRef y[2], r = fr.rowv[mi][h];
				for (int c = 0; c < 2; c++) {
					y[c] = acc[(mi * NI + ni) * 4 + 2 * h + c];
					if (g.bias >= 0) {
						LLVMValueRef bx = epi_bias(e, &g, fr.colv[ni][c]);
						if (!bx)
							return -1;
						y[c] = fadd_rn(e, y[c], bx);
					}
					if (g.amax >= 0) {
						LLVMValueRef ok = LLVMBuildAnd(b, ult(e, r, M), ult(e, fr.colv[ni][c], N), "");
						LLVMValueRef v = g.amax_arg == k->f->ins[k->gm].res ? acc[(mi * NI + ni) * 4 + 2 * h + c] : y[c];
						LLVMValueRef bits = sel(e, ok, vec_amax_bits(e, &v, 1), c32(e, 0));
						if (g.amax_block)
							rbits[mi][h] = umax(e, rbits[mi][h], bits);
						else
							mbits = umax(e, mbits, bits);
					}
				}
				LLVMValueRef pair = oeb == 2 ? asm_cvt_16x2(cg, of, y[0], y[1]) : NULL;
				for (int c = 0; c < 2; c++) {
					LLVMValueRef col = fr.colv[ni][c];
					LLVMValueRef ok = LLVMBuildAnd(b, ult(e, r, M), ult(e, col, NS), "");
					LLVMBasicBlockRef cont = begin_if(e, ok);
					LLVMValueRef cr = pos->crow0 ? add64(e, pos->crow0, r) : r;
					LLVMValueRef off = mul64(e, add64(e, LLVMBuildMul(b, cr, NS, ""), col), (uint64_t)oeb);
					LLVMValueRef p = gep(e, e->ptr[g.out], off);
					if (oeb == 2)
						store_al(e, LLVMBuildTrunc(b, c ? LLVMBuildLShr(b, pair, c32(e, 16), "") : pair,
						                           cg->i16, ""), p, 2);
					else
						store_al(e, epi_accumulate(e, &g, off, y[c]), p, 4);
					end_if(e, cont);
				}
			}
	if (g.amax >= 0 && !(g.amax_block && k->f->ins[g.amax].type.block[0] == 1)) {
		/* the warps' partials: in a stage once every warp is done with
		 * the stages (the last tile's ldmatrix), where the stages fill
		 * the static shared memory */
		if (g.t.red_in_stage) {
			barrier(e);
			e->red = sA;
		} else
			e->red = shared_array(e, "red", 2, LLVMArrayType2(cg->i32, 32), 4);
	}
	if (g.amax >= 0 && g.amax_block)
		epi_block_amax_out(e, &g, pos, &fr, rbits);
	else if (g.amax >= 0)
		tensor_amax_out(e, mbits);
	return 0;
}
