/*
 * k_dequant.c — dequantize: fp8 codes times a tensorwise or 1xB scale_inv.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "precc/interp.h"
#include "emit.h"

/* dequantize: codes (16 per thread, one 16-byte load) times scale_inv. */
int
emit_dequant(E *e)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	const Func *f = k->f;
	precc_format qf = f->val[q->arg[0]].type.fmt, rf = q->type.fmt;
	const Type *st = &f->val[q->arg[1]].type;
	LLVMBuilderRef b = e->b;

	if (q->narg != 2)
		return kfail(k, "%%%s = dequantize: two-level scales are not generated yet",
		             f->val[q->res].name);
	if (qf != PRECC_E4M3 && qf != PRECC_E5M2)
		return kfail(k, "%%%s = dequantize: %s codes are not generated yet",
		             f->val[q->res].name, ir_fmt_name(qf));
	if (rf != PRECC_BF16 && rf != PRECC_FP16 && rf != PRECC_FP32)
		return kfail(k, "%%%s = dequantize: to %s", f->val[q->res].name, ir_fmt_name(rf));
	int tw = st->block[0] == 0 && st->block[1] == 0;
	if (!tw && !(st->block[0] == 1 && st->block[1] >= 16 && st->block[1] % 16 == 0))
		return kfail(k, "%%%s = dequantize: scale granularity %ldx%ld", f->val[q->res].name,
		             st->block[0], st->block[1]);
	if (!tw && k->cols >= 0 && k->cols % st->block[1])
		return kfail(k, "%%%s = dequantize: columns not a multiple of the block",
		             f->val[q->res].name);
	if (!tw && k->cols == DIM_M)
		k->m_multiple = st->block[1];
	k->elems_per_cta = (long)k->threads * VEC;
	LLVMValueRef total = LLVMBuildMul(b, dimv(e, k->rows), dimv(e, k->cols), "");
	LLVMValueRef e0 = LLVMBuildMul(b, gid64(e), c64(e, VEC), "");
	LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntULT, e0, total, "");
	LLVMBasicBlockRef cont = begin_if(e, valid);
	LLVMValueRef bidx = tw ? c64(e, 0) : LLVMBuildUDiv(b, e0, c64(e, (uint64_t)st->block[1]), "");
	LLVMValueRef si = scalar(e, q->arg[1], bidx);
	if (st->fmt != PRECC_FP32)
		si = decode8(e, st->fmt, si);
	LLVMValueRef w = load_al(e, LLVMVectorType(e->g->i32, 4), gep(e, e->ptr[q->arg[0]], e0), 16);
	LLVMValueRef y[VEC];
	for (int j = 0; j < 4; j++) {
		LLVMValueRef u = LLVMBuildExtractElement(b, w, c32(e, j), "");
		for (int h = 0; h < 2; h++) {
			LLVMValueRef pair = LLVMBuildTrunc(b, LLVMBuildLShr(b, u, c32(e, 16 * h), ""), e->g->i16, "");
			LLVMValueRef hh = asm_cvt_f16x2_from_f8x2(e->g, qf, pair);
			for (int i = 0; i < 2; i++) {
				LLVMValueRef half = LLVMBuildTrunc(b, LLVMBuildLShr(b, hh, c32(e, 16 * i), ""),
				                                   e->g->i16, "");
				LLVMValueRef d = LLVMBuildFPExt(b, LLVMBuildBitCast(b, half, e->g->f16, ""),
				                                e->g->f32, "");
				y[4 * j + 2 * h + i] = LLVMBuildFMul(b, d, si, "");
			}
		}
	}
	store_vec(e, q->res, e0, y);
	end_if(e, cont);
	return 0;
}
