/*
 * k_tile.c — quant_tile: 128x128 and 16x16 block scales, with transposes of
 * the codes and of the block scales.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "precc/interp.h"
#include "emit.h"

/* The tile's codes through shared memory to the transposed result
 * (rows of x % 16): each thread's 16 codes go in as one 16-byte store and
 * come out as 4-byte loads of the words holding its column, byte col % 4,
 * in a layout that keeps both sides free of bank conflicts (the emulator
 * counts them):
 *   128x128: rows of 128 bytes; row r's 16-byte chunk c at c ^ (r / 64), so
 *   that the two 64-row halves a warp reads at once (thread t writes
 *   transposed row t/2 from source rows (t%2)*64 + 16s .. +15, four
 *   16-byte stores) are 16 bytes apart in the banks;
 *   16x16: block b of 16 lanes at 256 b, lane l's row at chunk l ^ (b % 2),
 *   so that the warp's two blocks differ in the banks; lane l writes
 *   transposed row l of its block. */
static void
tile_transpose(E *e, const Ins *tr_ins, int big, LLVMValueRef code[4][VEC], LLVMValueRef tid,
               LLVMValueRef tr, LLVMValueRef tc, LLVMValueRef tcok, LLVMValueRef rows,
               LLVMValueRef cols)
{
	LLVMBuilderRef b = e->b;
	enum { PITCH = 128 };
	long bytes = big ? 128 * PITCH : (long)e->k->threads * VEC;
	LLVMTypeRef at = LLVMArrayType2(e->g->i8, (uint64_t)bytes);
	LLVMValueRef sm = shared_array(e, "ttile", 2, at, 16);
	int passes = big ? 4 : 1;
	LLVMValueRef l16 = LLVMBuildURem(b, tid, c64(e, 16), "");
	LLVMValueRef blk = LLVMBuildUDiv(b, tid, c64(e, 16), "");
	LLVMValueRef bsw = LLVMBuildURem(b, blk, c64(e, 2), "");

	for (int p = 0; p < passes; p++) {
		LLVMValueRef off;
		if (big) {
			LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildUDiv(b, tid, c64(e, 8), ""), c64(e, 32 * p), "");
			LLVMValueRef ch = LLVMBuildXor(b, LLVMBuildURem(b, tid, c64(e, 8), ""),
			                               LLVMBuildUDiv(b, r, c64(e, 64), ""), "");
			off = LLVMBuildAdd(b, LLVMBuildMul(b, r, c64(e, PITCH), ""),
			                   LLVMBuildMul(b, ch, c64(e, VEC), ""), "");
		} else {
			off = LLVMBuildAdd(b, LLVMBuildMul(b, blk, c64(e, 16 * VEC), ""),
			                   LLVMBuildMul(b, LLVMBuildXor(b, l16, bsw, ""), c64(e, VEC), ""), "");
		}
		store_al(e, pack_codes(e, code[p]), LLVMBuildGEP2(b, e->g->i8, sm, &off, 1, ""), 16);
	}
	barrier(e);
	for (int s = 0; s < (big ? 4 : 1); s++) {
		LLVMValueRef t[VEC], orow, ocol, ok, col, wbase;
		if (big) {
			LLVMValueRef j = LLVMBuildUDiv(b, tid, c64(e, 2), "");
			LLVMValueRef r0 = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildURem(b, tid, c64(e, 2), ""),
			                                               c64(e, 64), ""), c64(e, 16 * s), "");
			/* byte j of a row: chunk j/16 (swizzled by the row's half), word j/4 */
			LLVMValueRef ch = LLVMBuildXor(b, LLVMBuildUDiv(b, j, c64(e, 16), ""),
			                               LLVMBuildUDiv(b, r0, c64(e, 64), ""), "");
			col = j;
			wbase = LLVMBuildAdd(b, LLVMBuildMul(b, r0, c64(e, PITCH), ""),
			                     LLVMBuildAdd(b, LLVMBuildMul(b, ch, c64(e, VEC), ""),
			                                  LLVMBuildMul(b, LLVMBuildUDiv(b, LLVMBuildURem(b, j, c64(e, 16), ""),
			                                                                c64(e, 4), ""), c64(e, 4), ""), ""), "");
			orow = LLVMBuildAdd(b, LLVMBuildMul(b, tc, c64(e, 128), ""), j, "");
			ocol = LLVMBuildAdd(b, LLVMBuildMul(b, tr, c64(e, 128), ""), r0, "");
			ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, ocol, rows, ""),
			                  LLVMBuildICmp(b, LLVMIntULT, orow, cols, ""), "");
		} else {
			/* column l of the block: row i's chunk i ^ (b % 2), word l/4 */
			col = l16;
			wbase = LLVMBuildAdd(b, LLVMBuildMul(b, blk, c64(e, 16 * VEC), ""),
			                     LLVMBuildMul(b, LLVMBuildUDiv(b, l16, c64(e, 4), ""), c64(e, 4), ""), "");
			orow = LLVMBuildAdd(b, LLVMBuildMul(b, tc, c64(e, 16), ""), l16, "");
			ocol = LLVMBuildMul(b, tr, c64(e, 16), "");
			ok = LLVMBuildAnd(b, tcok, LLVMBuildICmp(b, LLVMIntULT, ocol, rows, ""), "");
		}
		LLVMValueRef sh = LLVMBuildTrunc(b, LLVMBuildMul(b, LLVMBuildURem(b, col, c64(e, 4), ""),
		                                                 c64(e, 8), ""), e->g->i32, "");
		for (int i = 0; i < VEC; i++) {
			LLVMValueRef o = big ? LLVMBuildAdd(b, wbase, c64(e, (uint64_t)i * PITCH), "")
			                     : LLVMBuildAdd(b, wbase, LLVMBuildMul(b, LLVMBuildXor(b, c64(e, (uint64_t)i), bsw, ""),
			                                                           c64(e, VEC), ""), "");
			LLVMValueRef w = load_al(e, e->g->i32, LLVMBuildGEP2(b, e->g->i8, sm, &o, 1, ""), 4);
			t[i] = LLVMBuildAnd(b, LLVMBuildLShr(b, w, sh, ""), c32(e, 0xff), "");
		}
		LLVMBasicBlockRef cont = begin_if(e, ok);
		store_codes(e, tr_ins->res, LLVMBuildAdd(b, LLVMBuildMul(b, orow, rows, ""), ocol, ""), t);
		end_if(e, cont);
	}
}

/* quant_tile: 128x128 (one CTA of 256 threads per tile, 4 passes of 32
 * rows) or 16x16 (16 lanes per tile, one row each). */
int
emit_tile(E *e)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	int big = k->br == 128, passes = big ? 4 : 1;

	if (check_amax_ops(e, 1) || check_scalar_ops(e) || check_quantize(e, q))
		return -1;
	k->tiled = 1;
	k->tile_rows = k->br;
	k->tile_cols = big ? 128 : k->threads;
	LLVMValueRef rows = dimv(e, k->rows), cols = dimv(e, k->cols);
	LLVMValueRef ntc = LLVMBuildUDiv(b, LLVMBuildAdd(b, cols, c64(e, (uint64_t)k->bc - 1), ""),
	                                 c64(e, (uint64_t)k->bc), "");
	LLVMValueRef tid = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef cx = LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, "");
	LLVMValueRef tr = LLVMBuildZExt(b, sreg(e, "ctaid.y"), e->g->i64, "");
	LLVMValueRef tc, r0, col, rstep, leader, tcok;
	if (big) {
		tc = cx;
		col = LLVMBuildAdd(b, LLVMBuildMul(b, tc, c64(e, 128), ""),
		                   LLVMBuildMul(b, LLVMBuildURem(b, tid, c64(e, 8), ""), c64(e, VEC), ""), "");
		r0 = LLVMBuildAdd(b, LLVMBuildMul(b, tr, c64(e, 128), ""), LLVMBuildUDiv(b, tid, c64(e, 8), ""), "");
		rstep = c64(e, 32);
		leader = LLVMBuildICmp(b, LLVMIntEQ, tid, c64(e, 0), "");
		tcok = LLVMBuildICmp(b, LLVMIntULT, col, cols, "");   /* partial right tiles */
	} else {
		LLVMValueRef l = LLVMBuildURem(b, tid, c64(e, 16), "");
		tc = LLVMBuildAdd(b, LLVMBuildMul(b, cx, c64(e, (uint64_t)k->threads / 16), ""),
		                  LLVMBuildUDiv(b, tid, c64(e, 16), ""), "");
		col = LLVMBuildMul(b, tc, c64(e, 16), "");
		r0 = LLVMBuildAdd(b, LLVMBuildMul(b, tr, c64(e, 16), ""), l, "");
		rstep = c64(e, 0);
		leader = LLVMBuildICmp(b, LLVMIntEQ, l, c64(e, 0), "");
		tcok = LLVMBuildICmp(b, LLVMIntULT, tc, ntc, "");
	}
	LLVMValueRef x[4][VEC], idx[4], valid[4], m = c32(e, 0);
	for (int p = 0; p < passes; p++) {
		LLVMValueRef row = LLVMBuildAdd(b, r0, LLVMBuildMul(b, rstep, c64(e, p), ""), "");
		valid[p] = LLVMBuildAnd(b, tcok, LLVMBuildICmp(b, LLVMIntULT, row, rows, ""), "");
		idx[p] = LLVMBuildSelect(b, valid[p], LLVMBuildAdd(b, LLVMBuildMul(b, row, cols, ""),
		                                                    col, ""), c64(e, 0), "");
		load_vec(e, k->x, idx[p], x[p]);
		for (int i = 0; i < VEC; i++)
			x[p][i] = LLVMBuildSelect(b, valid[p], x[p][i], cf(e, 0), "");
		m = umax(e, m, vec_amax_bits(e, x[p], VEC));
	}
	if (k->gridamax >= 0)
		e->sc[k->gridamax] = grid_amax(e, m);
	m = big ? cta_max(e, m) : group_max(e, m, 16);
	LLVMValueRef tcc = big ? tc : LLVMBuildSelect(b, tcok, tc, c64(e, 0), "");
	LLVMValueRef bidx = LLVMBuildAdd(b, LLVMBuildMul(b, tr, ntc, ""), tcc, "");
	for (int i = 0; i < k->f->nins; i++)
		if (kin(k, i) && k->f->ins[i].op == OP_amax && k->f->ins[i].res != k->gridamax)
			e->sc[k->f->ins[i].res] = LLVMBuildBitCast(b, m, e->g->f32, "");
	LLVMValueRef mult = quant_multiplier(e, q, bidx);
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(k->f, k->out[i]);
		if (d->op != OP_quantize && !(d->op == OP_transpose && d->arg[0] == q->res))
			scalar(e, k->out[i], bidx);
	}
	LLVMValueRef code[4][VEC];
	for (int p = 0; p < passes; p++) {
		quantize_vec(e, q, mult, x[p], idx[p], code[p]);
		if (is_out(e, q->res)) {
			LLVMBasicBlockRef cont = begin_if(e, valid[p]);
			store_codes(e, q->res, idx[p], code[p]);
			end_if(e, cont);
		}
	}
	/* scale transposes: block (tr, tc) of an [ntr, ntc] grid is (tc, tr) */
	LLVMValueRef ntr = LLVMBuildUDiv(b, LLVMBuildAdd(b, rows, c64(e, (uint64_t)k->br - 1), ""),
	                                 c64(e, (uint64_t)k->br), "");
	LLVMValueRef tbidx = LLVMBuildAdd(b, LLVMBuildMul(b, tcc, ntr, ""), tr, "");
	store_scalars(e, LLVMBuildAnd(b, leader, big ? LLVMConstInt(e->g->i1, 1, 0) : valid[0], ""),
	              bidx, tbidx);
	(void)cols;
	if (k->tr >= 0)
		tile_transpose(e, &k->f->ins[k->tr], big, code, tid, tr, tc, tcok, rows, cols);
	return 0;
}
