/*
 * k_colblock.c — column kernels: quant_colblock (1xB blocks over transpose(x),
 * or over its Hadamard transform, without materialising either) and
 * amax_cols (columnwise amax).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "precc/interp.h"
#include "emit.h"

/* quant_colblock of hadamard(transpose(x)) (B = 16, the transform's
 * blocks): the thread's block of 16 rows of column c, transformed and
 * rounded as the hadamard's result (rht_block), then amax, scales and
 * quantize from those registers: x is read once and the transformed copy
 * is never written. */
static int
colblock_rht(E *e, const Ins *q, LLVMValueRef R, LLVMValueRef C, LLVMValueRef c,
             LLVMValueRef rb, LLVMValueRef nrb, LLVMValueRef r0, int has_amax,
             LLVMBasicBlockRef cont)
{
	Kern *k = e->k;
	LLVMBuilderRef b = e->b;
	LLVMValueRef xv[VEC], y[VEC], code[VEC];

	for (int i = 0; i < VEC; i++)
		xv[i] = load_elem(e, k->x, LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, r0, c64(e, (uint64_t)i), ""),
		                                                        C, ""), c, ""));
	rht_block(e, &k->f->ins[k->had], xv, y);
	LLVMValueRef m = has_amax ? vec_amax_bits(e, y, VEC) : c32(e, 0);
	LLVMValueRef bidx = LLVMBuildAdd(b, LLVMBuildMul(b, c, nrb, ""), rb, "");
	LLVMValueRef mult = block_scalars(e, q, m, bidx, LLVMConstInt(e->g->i1, 1, 0));
	if (is_out(e, q->res)) {
		LLVMValueRef tidx = LLVMBuildAdd(b, LLVMBuildMul(b, c, R, ""), r0, "");
		quantize_vec(e, q, mult, y, tidx, code);
		store_codes(e, q->res, tidx, code);
	}
	end_if(e, cont);
	return 0;
}

/* quant_colblock: quantize transpose(x) in 1xB blocks without
 * materialising the transpose. Thread g owns column c = g % C of x and
 * rows rb*B .. rb*B+B-1 (rb = g / C): one pass for the block amax, a
 * second (from L1/L2) to quantize 16 rows at a time and store them as 16
 * contiguous bytes of row c of the transposed result. */
int
emit_colblock(E *e)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	long B = k->bc;

	if (check_amax_ops(e, 1) || check_scalar_ops(e) || check_quantize(e, q))
		return -1;
	k->elems_per_cta = (long)k->threads * B;
	LLVMValueRef R = dimv(e, k->rows), C = dimv(e, k->cols);
	LLVMValueRef gid = gid64(e);
	LLVMValueRef c = LLVMBuildURem(b, gid, C, ""), rb = LLVMBuildUDiv(b, gid, C, "");
	LLVMValueRef nrb = LLVMBuildUDiv(b, R, c64(e, (uint64_t)B), "");
	LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntULT, rb, nrb, "");
	LLVMBasicBlockRef cont = begin_if(e, valid);
	LLVMValueRef r0 = LLVMBuildMul(b, rb, c64(e, (uint64_t)B), "");
	int has_amax = 0;
	for (int n = 0; n < k->f->nins; n++)
		has_amax |= kin(k, n) && k->f->ins[n].op == OP_amax;
	LLVMValueRef m = c32(e, 0);
	if (k->had >= 0)
		return colblock_rht(e, q, R, C, c, rb, nrb, r0, has_amax, cont);
	if (!has_amax)
		goto quant;
	/* pass 1: amax over B rows */
	Loop l;
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
	LLVMValueRef i = loop_begin(e, &l, c64(e, 0), c64(e, (uint64_t)B));
	LLVMPositionBuilderBefore(b, LLVMGetNextInstruction(l.i));
	LLVMValueRef zero = c32(e, 0);
	m = LLVMBuildPhi(b, e->g->i32, "m");
	LLVMAddIncoming(m, &zero, &pre, 1);
	LLVMPositionBuilderAtEnd(b, l.body);
	LLVMValueRef xv = load_elem(e, k->x, LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, r0, i, ""),
	                                                                  C, ""), c, ""));
	LLVMValueRef mx = umax(e, m, vec_amax_bits(e, &xv, 1));
	LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
	LLVMAddIncoming(m, &mx, &from, 1);
	loop_end(e, &l);
quant:;
	LLVMValueRef bidx = k->colwise ? c : LLVMBuildAdd(b, LLVMBuildMul(b, c, nrb, ""), rb, "");
	LLVMValueRef mult = block_scalars(e, q, m, bidx, LLVMConstInt(e->g->i1, 1, 0));
	/* pass 2: 16 rows at a time */
	if (is_out(e, q->res)) {
		Loop l2;
		LLVMValueRef j = loop_begin(e, &l2, c64(e, 0), c64(e, (uint64_t)B / VEC));
		LLVMValueRef rj = LLVMBuildAdd(b, r0, LLVMBuildMul(b, j, c64(e, VEC), ""), "");
		LLVMValueRef x[VEC], code[VEC];
		for (int t = 0; t < VEC; t++)
			x[t] = load_elem(e, k->x, LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, rj, c64(e, t), ""),
			                                                       C, ""), c, ""));
		LLVMValueRef tidx = LLVMBuildAdd(b, LLVMBuildMul(b, c, R, ""), rj, "");
		quantize_vec(e, q, mult, x, tidx, code);
		store_codes(e, q->res, tidx, code);
		loop_end(e, &l2);
	}
	end_if(e, cont);
	return 0;
}

/* amax_cols: thread g takes column g % C, rows 128 (g / C) .. +128 (the
 * last chunk partial), and one atom.global.max.u32 into that column. */
int
emit_amax_cols(E *e)
{
	Kern *k = e->k;
	LLVMBuilderRef b = e->b;
	LLVMValueRef R = dimv(e, k->rows), C = dimv(e, k->cols);
	LLVMValueRef gid = gid64(e);
	LLVMValueRef c = LLVMBuildURem(b, gid, C, ""), rb = LLVMBuildUDiv(b, gid, C, "");
	LLVMValueRef r0 = LLVMBuildMul(b, rb, c64(e, 128), "");
	LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntULT, r0, R, "");
	LLVMBasicBlockRef cont = begin_if(e, valid);
	LLVMValueRef r1 = LLVMBuildAdd(b, r0, c64(e, 128), "");
	r1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, r1, R, ""), r1, R, "");
	Loop l;
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
	LLVMValueRef i = loop_begin(e, &l, r0, r1);
	LLVMPositionBuilderBefore(b, LLVMGetNextInstruction(l.i));
	LLVMValueRef zero = c32(e, 0), m = LLVMBuildPhi(b, e->g->i32, "m");
	LLVMAddIncoming(m, &zero, &pre, 1);
	LLVMPositionBuilderAtEnd(b, l.body);
	LLVMValueRef xv = load_elem(e, k->x, LLVMBuildAdd(b, LLVMBuildMul(b, i, C, ""), c, ""));
	LLVMValueRef mx = umax(e, m, vec_amax_bits(e, &xv, 1));
	LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
	LLVMAddIncoming(m, &mx, &from, 1);
	loop_end(e, &l);
	for (int n = 0; n < k->nout; n++)
		LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpUMax,
		                   gep(e, e->ptr[k->out[n]], LLVMBuildMul(b, c, c64(e, 4), "")), m,
		                   LLVMAtomicOrderingMonotonic, 0);
	end_if(e, cont);
	return 0;
}
