/*
 * k_cast.c — cast: a high-precision tensor to another high-precision
 * format (bf16, f16, f32), 16 elements a thread. A GEMM operand in a
 * format other than its source's (a recipe's dgrad = { format = fp16 }
 * under bf16) is cast here, before the GEMM: the GEMM kernels read their
 * operands from shared memory as TMA or cp.async put them, with no
 * conversion on the way (passes/fuse.c keeps casts out of prologues).
 */
#include "emit.h"

int
emit_cast(E *e)
{
	Kern *k = e->k;
	const Func *f = k->f;
	const Ins *c = &f->ins[k->q];
	precc_format sf = f->val[c->arg[0]].type.fmt, rf = c->type.fmt;
	LLVMBuilderRef b = e->b;

	if (c->arg[0] != k->x)
		return kfail(k, "%%%s = cast: of the data param only", f->val[c->res].name);
	if (!is_out(e, c->res))
		return kfail(k, "%%%s = cast: not an output", f->val[c->res].name);
	if ((sf != PRECC_BF16 && sf != PRECC_FP16 && sf != PRECC_FP32)
	    || (rf != PRECC_BF16 && rf != PRECC_FP16 && rf != PRECC_FP32) || sf == rf)
		return kfail(k, "%%%s = cast: %s to %s (bf16, f16 and f32 to another of them are "
		             "generated; fp8 and fp4 are quantize's)", f->val[c->res].name,
		             ir_fmt_name(sf), ir_fmt_name(rf));
	/* cvt.rn: round to nearest even, overflow to inf, as precc_quantize
	 * without saturation */
	if (c->round != PRECC_RNE || (c->sat && rf != PRECC_FP32))
		return kfail(k, "%%%s = cast to %s with round=%s%s is not generated yet",
		             f->val[c->res].name, ir_fmt_name(rf), precc_round_name(c->round),
		             c->sat ? ", saturating" : "");
	LLVMValueRef total = LLVMBuildMul(b, dimv(e, k->rows), dimv(e, k->cols), "");
	LLVMValueRef e0 = LLVMBuildMul(b, gid64(e), c64(e, VEC), "");
	LLVMBasicBlockRef cont = begin_if(e, LLVMBuildICmp(b, LLVMIntULT, e0, total, ""));
	LLVMValueRef x[VEC];
	load_vec(e, k->x, e0, x);
	store_vec(e, c->res, e0, x);
	end_if(e, cont);
	return 0;
}
