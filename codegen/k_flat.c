/*
 * k_flat.c — flat kernels: amax_tensor, quant_tensor without a transpose
 * (and their {N x *} form: a tensorwise scale per expert of stacked
 * weights, one slot per N rows; and their {gx*} form: one per expert of
 * the routed rows, the rows of each read from %offs), quant_rowblock (1xB blocks, MX, NVFP4,
 * rowwise), rows wider than a CTA.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "precc/interp.h"
#include "emit.h"

/* Vector c of thread t in the row at element base: in range, and its
 * first element (0 when out of range). */
static void
chunk(E *e, LLVMValueRef t, LLVMValueRef rowok, LLVMValueRef base, int c, LLVMValueRef *valid,
      LLVMValueRef *idx)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef v = LLVMBuildAdd(b, t, c64(e, (uint64_t)c * e->k->threads), "");

	*valid = LLVMBuildAnd(b, rowok, LLVMBuildICmp(b, LLVMIntULT, v,
	                      c64(e, (uint64_t)e->k->cols / VEC), ""), "");
	*idx = LLVMBuildSelect(b, *valid, LLVMBuildAdd(b, base, LLVMBuildMul(b, v, c64(e, VEC), ""), ""),
	                       c64(e, 0), "");
}

/* Rowwise rows wider than the CTA (T threads x 16 elements): one row per
 * CTA, thread t takes vectors t, t+T, ... of the row. Pass 1 reduces the
 * row's amax, pass 2 reads the row again and quantizes it. */
static int
emit_rowwide(E *e)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	LLVMValueRef row = LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef t = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef rowok = LLVMBuildICmp(b, LLVMIntULT, row, dimv(e, k->rows), "");
	LLVMValueRef base = LLVMBuildMul(b, row, c64(e, (uint64_t)k->cols), "");
	LLVMValueRef x[VEC], code[VEC], valid[64], idx[64];
	LLVMValueRef mbits = c32(e, 0);

	if (k->nchunk > 64)
		return kfail(k, "%%%s: rowwise over %ld columns: more than %d", k->f->val[k->x].name,
		             k->cols, 64 * k->threads * VEC);
	if (check_amax_ops(e, 0) || check_scalar_ops(e) || check_quantize(e, q))
		return -1;
	if (k->gridamax >= 0)
		return kfail(k, "%%%s: rowwise rows wider than %d with a grid amax", k->f->val[k->x].name,
		             1024 * VEC);
	for (int i = 0; i < k->nout; i++)
		if (ir_def_ins(k->f, k->out[i])->op == OP_amax
		    && is_tensorwise_t(&k->f->val[k->out[i]].type))
			return kfail(k, "%%%s: rowwise rows wider than %d with a tensorwise amax output",
			             k->f->val[k->x].name, 1024 * VEC);
	for (int c = 0; c < k->nchunk; c++) {
		chunk(e, t, rowok, base, c, &valid[c], &idx[c]);
		load_vec(e, k->x, idx[c], x);
		for (int i = 0; i < VEC; i++)
			x[i] = LLVMBuildSelect(b, valid[c], x[i], cf(e, 0), "");
		mbits = umax(e, mbits, vec_amax_bits(e, x, VEC));
	}
	LLVMValueRef g = cta_max(e, mbits);
	for (int i = 0; i < k->f->nins; i++)
		if (kin(k, i) && k->f->ins[i].op == OP_amax && !is_tensorwise_t(&k->f->ins[i].type))
			e->sc[k->f->ins[i].res] = LLVMBuildBitCast(b, g, e->g->f32, "");
	LLVMValueRef mult = quant_multiplier(e, q, row);
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(k->f, k->out[i]);
		if (d->op != OP_quantize && d->op != OP_amax)
			scalar(e, k->out[i], row);
	}
	store_scalars(e, LLVMBuildAnd(b, rowok, LLVMBuildICmp(b, LLVMIntEQ, t, c64(e, 0), ""), ""),
	              row, NULL);
	/* pass 2 reads the row again, through a pointer LLVM cannot see is
	 * the same: else it keeps pass 1's nchunk x 8 registers of data live
	 * across the barrier, which spills at 1024 threads' 64 registers */
	LLVMValueRef xp = e->ptr[k->x];
	e->ptr[k->x] = asm_opaque_ptr(e->g, xp);
	/* and its indices again, from a thread id LLVM cannot see is the
	 * same: pass 1's nchunk indices live across the barrier spilled
	 * beside stochastic rounding's Philox */
	LLVMValueRef t2 = asm_opaque_u64(e->g, t);
	for (int c = 0; c < k->nchunk; c++) {
		chunk(e, t2, rowok, base, c, &valid[c], &idx[c]);
		load_vec(e, k->x, idx[c], x);
		quantize_vec(e, q, mult, x, idx[c], code);
		if (is_out(e, q->res)) {
			LLVMBasicBlockRef cont = begin_if(e, valid[c]);
			store_codes(e, q->res, idx[c], code);
			end_if(e, cont);
		}
	}
	e->ptr[k->x] = xp;
	return 0;
}

/* Flat shapes: amax_tensor, quant_tensor, quant_rowblock. */
int
emit_flat(E *e)
{
	Kern *k = e->k;
	const Ins *q = k->q >= 0 ? &k->f->ins[k->q] : NULL;

	if (k->rowcta && k->nchunk > 1 && q)
		return emit_rowwide(e);
	LLVMValueRef total = LLVMBuildMul(e->b, dimv(e, k->rows), dimv(e, k->cols), "");
	LLVMValueRef gid = gid64(e);
	LLVMValueRef e0 = LLVMBuildMul(e->b, gid, c64(e, VEC), "");
	LLVMValueRef valid = LLVMBuildICmp(e->b, LLVMIntULT, e0, total, "");
	if (k->rowcta) {
		/* one row per CTA: thread t has elements 16t.. of row ctaid */
		LLVMValueRef row = LLVMBuildZExt(e->b, sreg(e, "ctaid.x"), e->g->i64, "");
		LLVMValueRef t = LLVMBuildZExt(e->b, sreg(e, "tid.x"), e->g->i64, "");
		e0 = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, row, c64(e, (uint64_t)k->cols), ""),
		                  LLVMBuildMul(e->b, t, c64(e, VEC), ""), "");
		valid = LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntULT, t, c64(e, (uint64_t)k->cols / VEC), ""),
		                     LLVMBuildICmp(e->b, LLVMIntULT, row, dimv(e, k->rows), ""), "");
		gid = LLVMBuildMul(e->b, t, c64(e, 1024), "");   /* leader: t == 0 */
	}
	LLVMValueRef idx = LLVMBuildSelect(e->b, valid, e0, c64(e, 0), "");
	LLVMValueRef x[VEC], code[VEC];

	if (check_amax_ops(e, 0) || check_scalar_ops(e) || (q && check_quantize(e, q)))
		return -1;
	load_vec(e, k->x, idx, x);
	LLVMValueRef grp = NULL, pad = NULL;
	if (k->goffs >= 0) {
		/* {gx*}: the row's group; a row past the last offset (padding)
		 * counts in no amax and quantizes to code 0 */
		grp = group_of(e, LLVMBuildUDiv(e->b, e0, c64(e, (uint64_t)k->cols), ""));
		pad = LLVMBuildICmp(e->b, LLVMIntUGE, grp, c64(e, (uint64_t)k->f->val[k->goffs].type.dim[0]), "");
		for (int i = 0; i < VEC; i++)
			x[i] = LLVMBuildSelect(e->b, pad, cf(e, 0), x[i], "");
	}
	for (int i = 0; i < VEC; i++)
		x[i] = LLVMBuildSelect(e->b, valid, x[i], cf(e, 0), "");
	LLVMValueRef mbits = vec_amax_bits(e, x, VEC);
	if (k->shape == CG_AMAX_TENSOR) {
		if (grp)
			group_amax_out(e, mbits, grp, valid);
		else if (k->seg)
			seg_amax_out(e, mbits, idx);
		else
			tensor_amax_out(e, mbits);
		return 0;
	}
	LLVMValueRef bidx = NULL, leader;
	if (grp) {
		/* {gx*}: the scale of the row's group (the last group's for
		 * padding, whose codes are 0 whatever it is); each group's
		 * scalars are written apart, rows or none (group_scalars_out) */
		LLVMValueRef last = c64(e, (uint64_t)k->f->val[k->goffs].type.dim[0] - 1);
		bidx = LLVMBuildSelect(e->b, pad, last, grp, "");
		leader = LLVMConstInt(e->g->i1, 0, 0);
	} else if (k->seg) {
		/* {N x *}: the scale of the thread's N rows (its expert's), written
		 * by the thread holding their first element */
		uint64_t span = (uint64_t)(k->seg * k->cols);
		bidx = LLVMBuildUDiv(e->b, idx, c64(e, span), "");
		leader = LLVMBuildICmp(e->b, LLVMIntEQ, LLVMBuildURem(e->b, e0, c64(e, span), ""),
		                       c64(e, 0), "");
	} else if (k->shape == CG_QUANT_ROWBLOCK) {
		int lanes = k->rowcta ? 1024 : (int)(k->blen / VEC);
		LLVMValueRef g = lanes <= 32 ? group_max(e, mbits, lanes) : cta_max(e, mbits);
		bidx = LLVMBuildUDiv(e->b, idx, c64(e, (uint64_t)k->blen), "");
		for (int i = 0; i < k->f->nins; i++)
			if (kin(k, i) && k->f->ins[i].op == OP_amax && !is_tensorwise_t(&k->f->ins[i].type))
				e->sc[k->f->ins[i].res] = LLVMBuildBitCast(e->b, g, e->g->f32, "");
		leader = LLVMBuildICmp(e->b, LLVMIntEQ,
		                       LLVMBuildURem(e->b, gid, c64(e, (uint64_t)lanes), ""), c64(e, 0), "");
	} else {
		leader = LLVMBuildICmp(e->b, LLVMIntEQ, gid, c64(e, 0), "");
	}
	if (k->gridamax >= 0)
		e->sc[k->gridamax] = grid_amax(e, mbits);
	LLVMValueRef mult = quant_multiplier(e, q, bidx);
	if (pad)    /* code 0 even where the scale is NaN (nonfinite=ieee) */
		mult = LLVMBuildSelect(e->b, pad, cf(e, 1.0), mult, "");
	/* the scalars every output needs, before any branch */
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(k->f, k->out[i]);
		if (d->op != OP_quantize && d->op != OP_amax)
			scalar(e, k->out[i], bidx);
	}
	quantize_vec(e, q, mult, x, idx, code);
	if (grp)
		group_scalars_out(e);
	else
		store_scalars(e, LLVMBuildAnd(e->b, valid, leader, ""), bidx ? bidx : c64(e, 0), NULL);
	if (is_out(e, q->res)) {
		LLVMBasicBlockRef cont = begin_if(e, valid);
		store_codes(e, q->res, idx, code);
		end_if(e, cont);
	}
	for (int i = 0; i < k->nout; i++)
		if (ir_def_ins(k->f, k->out[i])->op == OP_amax
		    && is_tensorwise_t(&k->f->val[k->out[i]].type)) {
			tensor_amax_out(e, mbits);
			break;
		}
	return 0;
}
