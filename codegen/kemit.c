/*
 * kemit.c — a kernel's LLVM function: its parameters and launch bounds, then
 * the body of its shape's family (k_*.c), or of each phase of a fused
 * kernel (docs/codegen.md).
 *
 * Every thread owns VEC (16) consecutive elements of one row: 16-byte
 * vector loads (two of bf16, four of f32) and one 16-byte store of the
 * 8-bit codes. Block amaxes reduce the |x| bit patterns with unsigned max
 * (non-negative floats order like their bits; NaN is made 0x7fc00000, C's
 * NAN, which is above inf, so NaN anywhere gives NaN as in the
 * interpreter): within a thread, then across the block's lanes with
 * shfl.sync.bfly, across warps through shared memory, and across CTAs
 * with atom.global.max.u32. Per-block values (scales, MX and NVFP4 codes)
 * are computed redundantly by every lane of the block, in the op order of
 * the Func, with the interpreter's arithmetic (fp32 ops, the scale
 * division in fp64 as precc_compute_scale does, no FMA: there is no add).
 */
#include <stdlib.h>
#include <string.h>
#include "emit.h"

static int
emit_shape(E *e)
{
	Kern *k = e->k;

	switch (k->shape) {
	case CG_AMAX_TENSOR:
	case CG_QUANT_ROWBLOCK:
		return emit_flat(e);
	case CG_QUANT_TENSOR:
		return k->tr >= 0 ? emit_transpose(e) : emit_flat(e);
	case CG_QUANT_TILE: return emit_tile(e);
	case CG_AMAX_COLS: return emit_amax_cols(e);
	case CG_AMAX_ROWCOL: return emit_amax_rowcol(e);
	case CG_QUANT_COLBLOCK: return emit_colblock(e);
	case CG_DEQUANT: return emit_dequant(e);
	case CG_CAST: return emit_cast(e);
	case CG_DELAYED_UPDATE: return emit_delayed(e);
	case CG_GEMM: return k->wgmma ? (k->grouped ? emit_gemm_grouped_sm90(e) : emit_gemm_sm90(e))
	                              : k->grouped ? emit_gemm_grouped(e)
	                                                              : emit_gemm(e);
	case CG_HADAMARD: return emit_hadamard(e);
	default: return kfail(k, "shape %d", (int)k->shape);
	}
}

/* Whether phase k holds an amax_scheme=grid amax (a grid-wide barrier). */
static int
has_grid_amax(const Kern *k)
{
	for (int i = 0; i < k->f->nins; i++) {
		const Ins *in = &k->f->ins[i];
		if (kin(k, i) && in->op == OP_amax && in->pattr[PA_AMAX_SCHEME]
		    && !strcmp(in->pattr[PA_AMAX_SCHEME], "grid"))
			return 1;
	}
	return 0;
}

/* CTAs of phase k at run time, and its grid width (tiled). */
static LLVMValueRef
phase_ctas(E *e, const Kern *k, LLVMValueRef *gx)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef rows = dimv(e, k->rows), cols = dimv(e, k->cols);

	if (k->tiled) {
		*gx = LLVMBuildUDiv(b, LLVMBuildAdd(b, cols, c64(e, (uint64_t)k->tile_cols - 1), ""),
		                    c64(e, (uint64_t)k->tile_cols), "");
		LLVMValueRef gy = LLVMBuildUDiv(b, LLVMBuildAdd(b, rows, c64(e, (uint64_t)k->tile_rows - 1), ""),
		                                c64(e, (uint64_t)k->tile_rows), "");
		return LLVMBuildMul(b, *gx, gy, "");
	}
	*gx = NULL;
	LLVMValueRef n = LLVMBuildMul(b, rows, cols, "");
	return LLVMBuildUDiv(b, LLVMBuildAdd(b, n, c64(e, (uint64_t)k->elems_per_cta - 1), ""),
	                     c64(e, (uint64_t)k->elems_per_cta), "");
}

/* A fused kernel: CTA b runs the phase whose range holds b, with its own
 * CTA ids; each phase's body is CTA-uniform, so its barriers and
 * shuffles see every thread. */
static int
emit_phases(E *base)
{
	Kern *top = base->k;
	LLVMBuilderRef b = base->b;
	LLVMValueRef cta = LLVMBuildZExt(b, sreg(base, "ctaid.x"), base->g->i64, "");
	LLVMValueRef start = c64(base, 0);
	int rc = 0;

	for (int p = 0; p < top->nphase && rc == 0; p++) {
		E e = *base;
		Kern *k = &top->phase[p];
		LLVMValueRef gx, n = phase_ctas(&e, k, &gx);
		LLVMValueRef end = LLVMBuildAdd(b, start, n, "");
		if (base->coop_pass == 1 && !has_grid_amax(k)) {
			start = end;     /* nothing to add before the grid-wide barrier */
			continue;
		}
		LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntUGE, cta, start, ""),
		                               LLVMBuildICmp(b, LLVMIntULT, cta, end, ""), "");
		LLVMBasicBlockRef cont = begin_if(&e, in);
		LLVMValueRef local = LLVMBuildSub(b, cta, start, "");
		e.k = k;
		e.ncta = n;
		e.slot = p;
		e.sc = calloc((size_t)k->f->nval + 1, sizeof *e.sc);
		if (!e.sc)
			return kfail(top, "out of memory");
		e.vcx = LLVMBuildTrunc(b, gx ? LLVMBuildURem(b, local, gx, "") : local, e.g->i32, "");
		e.vcy = LLVMBuildTrunc(b, gx ? LLVMBuildUDiv(b, local, gx, "") : c64(&e, 0), e.g->i32, "");
		rc = emit_shape(&e);
		free(e.sc);
		if (rc == 0)
			end_if(&e, cont);
		start = end;
	}
	return rc;
}

/* The body once, at virtual CTA v (i64) of a grid gx wide (tiled; NULL:
 * 1-D): fused kernels deal v out to their phases. */
static int
emit_body(E *e, LLVMValueRef v, LLVMValueRef gx)
{
	LLVMBuilderRef b = e->b;

	if (e->k->nphase) {
		e->vcx = LLVMBuildTrunc(b, v, e->g->i32, "");
		e->vcy = c32(e, 0);
		return emit_phases(e);
	}
	e->vcx = LLVMBuildTrunc(b, gx ? LLVMBuildURem(b, v, gx, "") : v, e->g->i32, "");
	e->vcy = LLVMBuildTrunc(b, gx ? LLVMBuildUDiv(b, v, gx, "") : c64(e, 0), e->g->i32, "");
	memset(e->sc, 0, ((size_t)e->k->f->nval + 1) * sizeof *e->sc);
	return emit_shape(e);
}

/* A cooperative kernel (a grid-wide barrier inside) on a 1-D grid of G =
 * nctaid.x CTAs over its nv tiles (virtual CTAs, in the order of the
 * manifest's grid): the runtime launches min(nv, resident CTAs x SMs), so
 * any device runs it. G >= nv: CTA c is tile c, its data kept on chip
 * across the barrier (one read). G < nv: CTA c takes tiles c, c + G, ...
 * twice: pass 1 adds each tile's amax, a grid-wide barrier, pass 2
 * quantizes (the source is read twice, as by two kernels, in one launch). */
static int
emit_coop(E *e)
{
	Kern *k = e->k;
	LLVMBuilderRef b = e->b;
	LLVMValueRef gx = NULL, nv = c64(e, 0), dummy;
	int rc;

	if (k->nphase) {
		for (int p = 0; p < k->nphase; p++)
			nv = LLVMBuildAdd(b, nv, phase_ctas(e, &k->phase[p], &dummy), "");
	} else {
		nv = phase_ctas(e, k, &gx);
		e->ncta = nv;
	}
	LLVMValueRef G = LLVMBuildZExt(b, sreg(e, "nctaid.x"), e->g->i64, "");
	LLVMValueRef c = LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef iv = LLVMBuildAlloca(b, e->g->i64, "tile");
	LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "coop.one");
	LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "coop.loop");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "coop.done");

	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntUGE, G, nv, ""), one, loop);
	LLVMPositionBuilderAtEnd(b, one);
	e->coop_pass = 0;
	LLVMBasicBlockRef in = begin_if(e, LLVMBuildICmp(b, LLVMIntULT, c, nv, ""));
	if ((rc = emit_body(e, c, gx)))
		return rc;
	end_if(e, in);
	LLVMBuildBr(b, done);
	LLVMPositionBuilderAtEnd(b, loop);
	for (int pass = 1; pass <= 2; pass++) {
		LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "coop.head");
		LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "coop.body");
		LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "coop.next");
		LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "coop.after");
		LLVMBuildStore(b, c, iv);
		LLVMBuildBr(b, head);
		LLVMPositionBuilderAtEnd(b, head);
		LLVMValueRef v = LLVMBuildLoad2(b, e->g->i64, iv, "");
		LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntULT, v, nv, ""), body, after);
		LLVMPositionBuilderAtEnd(b, body);
		e->coop_pass = pass;
		e->pass_exit = next;
		if ((rc = emit_body(e, v, gx)))
			return rc;
		LLVMBuildBr(b, next);
		LLVMPositionBuilderAtEnd(b, next);
		barrier(e);    /* the next tile reuses shared memory */
		LLVMBuildStore(b, LLVMBuildAdd(b, LLVMBuildLoad2(b, e->g->i64, iv, ""), G, ""), iv);
		LLVMBuildBr(b, head);
		LLVMPositionBuilderAtEnd(b, after);
		if (pass == 1)   /* every tile's amax is in: the grid-wide barrier */
			grid_sync(e, gep(e, e->sync, c64(e, 4)), G);
	}
	LLVMBuildBr(b, done);
	LLVMPositionBuilderAtEnd(b, done);
	e->coop_pass = 0;
	return 0;
}

int
kemit(Cg *g, Kern *k, char *err, size_t errsz)
{
	const Func *f = k->f;
	E e = {.g = g, .k = k, .b = g->b};
	LLVMTypeRef pt[KMAXP * 2 + 2];
	int np = 0, rc;

	(void)err;
	(void)errsz;
	for (int i = 0; i < k->nin; i++)
		pt[np++] = g->gptr;
	for (int i = 0; i < k->nout; i++)
		pt[np++] = g->gptr;
	if (k->has_sync)
		pt[np++] = g->gptr;
	if (k->has_m)
		pt[np++] = g->i64;
	if (k->has_cols)
		pt[np++] = g->i64;
	if (k->has_seed)
		pt[np++] = g->i64;
	int tmap0 = np;
	for (int i = 0; i < k->ntmap; i++)   /* generic: byval params live in param space */
		pt[np++] = LLVMPointerTypeInContext(g->ctx, 0);
	g->fn = LLVMAddFunction(g->mod, k->name, LLVMFunctionType(g->vd, pt, (unsigned)np, 0));
	if (!g->host) {
		/* ptxas 13 holds the 128x128 tiles (64 values live per thread) and
		 * the grid-barrier kernels at 80 registers and spills. Tiles get
		 * what two CTAs per SM leave; grid-barrier kernels what four leave,
		 * so that a cooperative grid of up to 4 x SMs CTAs of 256 threads
		 * stays resident. Others keep ptxas's choice. */
		int big = k->has_sync || (k->shape == CG_QUANT_TILE && k->br == 128);
		for (int p = 0; p < k->nphase; p++)
			big |= k->phase[p].shape == CG_QUANT_TILE && k->phase[p].br == 128;
		int r = 65536 / k->threads / (k->has_sync ? 4 : 2) / 8 * 8;
		LLVMSetFunctionCallConv(g->fn, LLVMPTXKernelCallConv);
		/* GEMM: with only a thread bound, ptxas caps registers for
		 * occupancy and spills a few bytes (72 registers + 4 bytes of
		 * spill, against 93 and none with a .maxnreg); give it all 255 and
		 * let it use what it needs */
		if (k->wgmma) {
			/* setmaxnreg needs .maxntid and .minnctapersm (and no .maxnreg);
			 * the tensor maps are grid-constant byval params */
			cg_annotate_threads(g, g->fn, k->threads, 0);
			cg_annotate_minctas(g, g->fn, 1);
			if (k->ntmap)   /* none: NVFP4's f32 result (e2m1 operands are not TMA's) */
				cg_byval_grid_constant(g, g->fn, tmap0, k->ntmap, 128, 64);
		} else {
			/* stochastic rounding over 256 threads: with only a thread
			 * bound, ptxas 13 holds a 512-thread row kernel with Philox at
			 * 64 registers on sm_89 and spills 16 bytes; give it what one
			 * CTA per SM leaves (at 256 threads a bound makes ptxas drop
			 * its occupancy aim: 58 -> 86 registers, 4 -> 2 CTAs) */
			int sr = k->threads > 256 ? 65536 / k->threads / 8 * 8 : 0;
			/* quant_rowcol: ptxas 13 aims at 5 CTAs an SM (48 registers)
			 * and spills 4 bytes with rowwise scales from params; at 64
			 * (4 CTAs) f16 sources spill 24; 80 (3 CTAs, 102 KiB of tiles
			 * in flight an SM) spills none, and ptxas keeps the others at
			 * the CTAs an SM they had (test_ptxas) */
			int rc4 = 65536 / k->threads / 3 / 8 * 8;
			/* {gx*} (a scale per expert of routed rows): the row's
			 * expert by a binary search of %offs beside the vector;
			 * ptxas aims at 8 CTAs an SM (32 registers) on sm_90 and
			 * spills 12 bytes at 256 experts; 6 CTAs (40) spill none */
			int rg6 = 65536 / k->threads / 6 / 8 * 8;
			cg_annotate_threads(g, g->fn, k->threads, k->shape == CG_GEMM ? 255
			                    : big ? (r > 255 ? 255 : r)
			                    : k->shape == CG_QUANT_ROWCOL ? (rc4 > 255 ? 255 : rc4)
			                    : k->goffs >= 0 ? (rg6 > 255 ? 255 : rg6)
			                    : k->has_seed ? (sr > 255 ? 255 : sr) : 0);
		}
	}
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, g->fn, "entry"));
	e.ptr = calloc((size_t)f->nval + 1, sizeof *e.ptr);
	e.sc = calloc((size_t)f->nval + 1, sizeof *e.sc);
	if (!e.ptr || !e.sc) {
		free(e.ptr);
		free(e.sc);
		return kfail(k, "out of memory");
	}
	np = 0;
	for (int i = 0; i < k->nin; i++)
		e.ptr[k->in[i]] = LLVMGetParam(g->fn, (unsigned)np++);
	for (int i = 0; i < k->nout; i++)
		e.ptr[k->out[i]] = LLVMGetParam(g->fn, (unsigned)np++);
	if (k->has_sync)
		e.sync = LLVMGetParam(g->fn, (unsigned)np++);
	if (k->has_m)
		e.m = LLVMGetParam(g->fn, (unsigned)np++);
	if (k->has_cols)
		e.cols = LLVMGetParam(g->fn, (unsigned)np++);
	if (k->has_seed)
		e.seed = LLVMGetParam(g->fn, (unsigned)np++);
	for (int i = 0; i < tmap0; i++)
		if (LLVMGetTypeKind(LLVMTypeOf(LLVMGetParam(g->fn, (unsigned)i))) == LLVMPointerTypeKind)
			LLVMAddAttributeAtIndex(g->fn, (unsigned)i + 1,
			                        LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName("noalias", 7), 0));
	LLVMTypeRef rt = LLVMArrayType2(g->i32, 32);
	if (k->shape != CG_DELAYED_UPDATE && k->shape != CG_DEQUANT && k->shape != CG_CAST
	    && k->shape != CG_GEMM
	    && (k->shape != CG_HADAMARD || ir_def_ins(k->f, k->out[0])->op == OP_amax)) {
		e.red = shared_array(&e, "red", 0, rt, 4);
	}
	if (k->has_sync)
		rc = emit_coop(&e);
	else if (k->shape == CG_QUANT_ROWCOL)
		rc = emit_rowcol(&e);
	else if (k->nphase)
		rc = emit_phases(&e);
	else
		rc = emit_shape(&e);
	if (rc == 0)
		LLVMBuildRetVoid(g->b);
	free(e.ptr);
	free(e.sc);
	if (rc == 0 && k->shape == CG_DELAYED_UPDATE && !k->nphase)
		rc = emit_delayed_bulk(g, k);
	return rc;
}
