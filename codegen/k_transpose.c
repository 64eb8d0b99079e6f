/*
 * k_transpose.c — quant_tensor with a fused transpose of the codes: 64x64
 * tiles through shared memory; tensorwise, {N x *} (a scale per expert's
 * N rows of stacked weights, looked up by the thread's row), or {gx*} (a
 * scale per expert of routed rows, %offs: the row's group; a grouped
 * wgrad's K-major copy, each expert's tokens a range of its columns).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "precc/interp.h"
#include "emit.h"

/* quant_tensor with a fused transpose: 64x64 tiles (partial at the edges:
 * rows and columns % 16), 256 threads, each one row segment of 16; the
 * codes go through shared memory: 64-byte rows whose 4-byte words are
 * XOR-swizzled by the row's 16-row group (word j of row r at j ^ 2(r/16)),
 * so that a thread's 16-byte store stays one aligned chunk and the
 * transposed read, 16 4-byte loads of the words holding its column
 * (lanes 4 apart read rows 16 apart), hits 8 different banks per load:
 * no bank conflicts, where byte loads of an 80-byte pitch made 4-way ones
 * (the emulator counts them). */
int
emit_transpose(E *e)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q], *tr = &k->f->ins[k->tr];
	enum { T = 64, PITCH = 64 };
	LLVMBuilderRef b = e->b;

	if (tr->arg[0] != q->res)
		return kfail(k, "%%%s = transpose: of the quantized data only",
		             k->f->val[tr->res].name);
	if (k->threads != 256)
		return kfail(k, "fused transpose kernels are generated for 256 threads");
	if (!is_out(e, tr->res))
		return kfail(k, "%%%s = transpose: not an output", k->f->val[tr->res].name);
	if (check_amax_ops(e, 0) || check_scalar_ops(e) || check_quantize(e, q))
		return -1;
	k->tiled = 1;
	k->tile_rows = k->tile_cols = T;
	LLVMTypeRef at = LLVMArrayType2(e->g->i8, T * PITCH);
	LLVMValueRef tile = shared_array(e, "tile", 1, at, 16);

	LLVMValueRef rows = dimv(e, k->rows), cols = dimv(e, k->cols);
	LLVMValueRef tid = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef tc = LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef trw = LLVMBuildZExt(b, sreg(e, "ctaid.y"), e->g->i64, "");
	LLVMValueRef r = LLVMBuildUDiv(b, tid, c64(e, 4), "");
	LLVMValueRef seg = LLVMBuildMul(b, LLVMBuildURem(b, tid, c64(e, 4), ""), c64(e, VEC), "");
	LLVMValueRef grow = LLVMBuildAdd(b, LLVMBuildMul(b, trw, c64(e, T), ""), r, "");
	LLVMValueRef gcol = LLVMBuildAdd(b, LLVMBuildMul(b, tc, c64(e, T), ""), seg, "");
	LLVMValueRef valid = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, grow, rows, ""),
	                                  LLVMBuildICmp(b, LLVMIntULT, gcol, cols, ""), "");
	LLVMValueRef idx = LLVMBuildSelect(b, valid, LLVMBuildAdd(b, LLVMBuildMul(b, grow, cols, ""),
	                                                          gcol, ""), c64(e, 0), "");
	LLVMValueRef x[VEC], code[VEC];

	load_vec(e, k->x, idx, x);
	/* {gx*}: the row's group; a row past the last offset (padding) is
	 * code 0 in both copies (k_flat.c's rule) */
	LLVMValueRef grp = NULL, pad = NULL;
	if (k->goffs >= 0) {
		grp = group_of(e, grow);
		pad = LLVMBuildICmp(b, LLVMIntUGE, grp, c64(e, (uint64_t)k->f->val[k->goffs].type.dim[0]), "");
		for (int i = 0; i < VEC; i++)
			x[i] = LLVMBuildSelect(b, pad, cf(e, 0), x[i], "");
	}
	for (int i = 0; i < VEC; i++)
		x[i] = LLVMBuildSelect(b, valid, x[i], cf(e, 0), "");
	if (k->gridamax >= 0)
		e->sc[k->gridamax] = grid_amax(e, vec_amax_bits(e, x, VEC));
	/* {N x *} (a tensorwise scale per expert): the scale of the thread's
	 * row's N rows, stored by the thread at their first row's column 0;
	 * its transpose [1,G] is the same vector */
	LLVMValueRef bidx = NULL, first;
	if (grp) {
		/* the last group's scale for padding (its codes are 0); each
		 * group's scalars are written apart (group_scalars_out) */
		bidx = LLVMBuildSelect(b, pad, c64(e, (uint64_t)k->f->val[k->goffs].type.dim[0] - 1), grp, "");
		first = LLVMConstInt(e->g->i1, 0, 0);
	} else if (k->seg) {
		bidx = LLVMBuildSelect(b, valid, LLVMBuildUDiv(b, grow, c64(e, (uint64_t)k->seg), ""),
		                       c64(e, 0), "");
		first = LLVMBuildAnd(b, valid, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildOr(b,
		                     LLVMBuildURem(b, grow, c64(e, (uint64_t)k->seg), ""), gcol, ""),
		                     c64(e, 0), ""), "");
	} else
		first = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, tid, c64(e, 0), ""),
		                     LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildOr(b, tc, trw, ""),
		                                   c64(e, 0), ""), "");
	LLVMValueRef mult = quant_multiplier(e, q, bidx);
	if (pad)    /* code 0 even where the scale is NaN (nonfinite=ieee) */
		mult = LLVMBuildSelect(b, pad, cf(e, 1.0), mult, "");
	/* (a scale's transpose is {N x *}'s or {gx*}'s [1,G]: the same vector) */
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(k->f, k->out[i]);
		if (d->op != OP_quantize && d->op != OP_amax
		    && (d->op != OP_transpose || d->arg[0] != q->res))
			scalar(e, k->out[i], bidx);
	}
	quantize_vec(e, q, mult, x, idx, code);
	if (grp)
		group_scalars_out(e);
	else
		store_scalars(e, first, bidx ? bidx : c64(e, 0), bidx ? bidx : c64(e, 0));
	if (is_out(e, q->res)) {
		LLVMBasicBlockRef c0 = begin_if(e, valid);
		store_codes(e, q->res, idx, code);
		end_if(e, c0);
	}
	/* the tile in shared memory: row r, bytes seg..seg+15 */
	LLVMValueRef vec = pack_codes(e, code);
	/* row r, words seg/4.. swizzled by x = 2(r/16): the chunk moves by x & 4
	 * words and its word pairs swap by x & 2 */
	LLVMValueRef sx = LLVMBuildShl(b, LLVMBuildAnd(b, LLVMBuildLShr(b, r, c64(e, 4), ""), c64(e, 3), ""),
	                               c64(e, 1), "");
	LLVMValueRef swap = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, sx, c64(e, 2), ""), c64(e, 0), "");
	LLVMValueRef pv = LLVMGetUndef(LLVMVectorType(e->g->i32, 4));
	for (int w = 0; w < 4; w++)
		pv = LLVMBuildInsertElement(b, pv, LLVMBuildSelect(b, swap,
		                            LLVMBuildExtractElement(b, vec, c32(e, (unsigned)(w ^ 2)), ""),
		                            LLVMBuildExtractElement(b, vec, c32(e, (unsigned)w), ""), ""),
		                            c32(e, (unsigned)w), "");
	LLVMValueRef sword = LLVMBuildXor(b, LLVMBuildUDiv(b, seg, c64(e, 4), ""),
	                                  LLVMBuildAnd(b, sx, c64(e, 4), ""), "");
	LLVMValueRef soff = LLVMBuildAdd(b, LLVMBuildMul(b, r, c64(e, PITCH), ""),
	                                 LLVMBuildMul(b, sword, c64(e, 4), ""), "");
	store_al(e, pv, LLVMBuildGEP2(b, e->g->i8, tile, &soff, 1, ""), 16);
	barrier(e);
	/* transposed: column c = tid/4 of the tile, rows seg..seg+15 (one
	 * 16-row group: one swizzle), byte c % 4 of word c / 4 */
	LLVMValueRef tcode[VEC];
	LLVMValueRef tw = LLVMBuildXor(b, LLVMBuildUDiv(b, r, c64(e, 4), ""),
	                               LLVMBuildShl(b, LLVMBuildUDiv(b, seg, c64(e, 16), ""), c64(e, 1), ""), "");
	LLVMValueRef sh = LLVMBuildTrunc(b, LLVMBuildMul(b, LLVMBuildURem(b, r, c64(e, 4), ""), c64(e, 8), ""),
	                                 e->g->i32, "");
	for (int i = 0; i < VEC; i++) {
		LLVMValueRef o = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, seg, c64(e, i), ""),
		                                              c64(e, PITCH), ""),
		                              LLVMBuildMul(b, tw, c64(e, 4), ""), "");
		LLVMValueRef word = load_al(e, e->g->i32, LLVMBuildGEP2(b, e->g->i8, tile, &o, 1, ""), 4);
		tcode[i] = LLVMBuildAnd(b, LLVMBuildLShr(b, word, sh, ""), c32(e, 0xff), "");
	}
	LLVMValueRef trow = LLVMBuildAdd(b, LLVMBuildMul(b, tc, c64(e, T), ""), r, "");
	LLVMValueRef tcol = LLVMBuildAdd(b, LLVMBuildMul(b, trw, c64(e, T), ""), seg, "");
	LLVMValueRef tok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, trow, cols, ""),
	                                LLVMBuildICmp(b, LLVMIntULT, tcol, rows, ""), "");
	LLVMBasicBlockRef c1 = begin_if(e, tok);
	store_codes(e, tr->res, LLVMBuildAdd(b, LLVMBuildMul(b, trow, rows, ""), tcol, ""), tcode);
	end_if(e, c1);
	for (int i = 0; i < k->nout; i++)
		if (ir_def_ins(k->f, k->out[i])->op == OP_amax) {
			tensor_amax_out(e, vec_amax_bits(e, x, VEC));
			break;
		}
	return 0;
}
