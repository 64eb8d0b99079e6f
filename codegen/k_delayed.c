/*
 * k_delayed.c — delayed scaling's update: history push and reduce, the next
 * scale.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "precc/interp.h"
#include "emit.h"

/* delayed_update: one thread pushes the amax into the history, reduces
 * it and computes the next scale (and whatever else follows). */
int
emit_delayed(E *e)
{
	Kern *k = e->k;
	const Func *f = k->f;
	LLVMBuilderRef b = e->b;

	if (check_scalar_ops(e))
		return -1;
	LLVMValueRef t0 = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "tid.x"), c32(e, 0), ""),
	                               LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "ctaid.x"), c32(e, 0), ""), "");
	LLVMBasicBlockRef cont = begin_if(e, t0);
	for (int n = 0; n < f->nins; n++) {
		const Ins *in = &f->ins[n];
		if (in->op == OP_history_push) {
			int h = in->arg[0], a = in->arg[1], r = in->res;
			long len = f->val[h].type.dim[0];
			if (f->val[h].type.rank != 1 || len <= 0)
				return kfail(k, "%%%s = history_push: f32[H] histories only", f->val[r].name);
			if (!e->ptr[r])
				return kfail(k, "%%%s = history_push: its result must be an output",
				             f->val[r].name);
			/* zero=keep: a zero amax leaves the history as it is (TE) */
			LLVMValueRef av = scalar(e, a, NULL);
			LLVMValueRef keep = in->zero_keep ? LLVMBuildFCmp(b, LLVMRealOEQ, av, cf(e, 0), "")
			                                  : LLVMConstInt(e->g->i1, 0, 0);
			Loop l;
			LLVMValueRef i = loop_begin(e, &l, c64(e, 1), c64(e, (uint64_t)len));
			LLVMValueRef src = LLVMBuildSelect(b, keep, i, LLVMBuildSub(b, i, c64(e, 1), ""), "");
			store_al(e, load_al(e, e->g->f32, fptr(e, h, src), 4), fptr(e, r, i), 4);
			loop_end(e, &l);
			store_al(e, LLVMBuildSelect(b, keep, load_al(e, e->g->f32, fptr(e, h, c64(e, 0)), 4),
			                            av, ""), fptr(e, r, c64(e, 0)), 4);
		} else if (in->op == OP_history_reduce) {
			int h = in->arg[0];
			long len = f->val[h].type.dim[0];
			if (!e->ptr[h])
				return kfail(k, "%%%s = history_reduce: of a buffer (param or output)",
				             f->val[in->res].name);
			LLVMValueRef m0 = load_al(e, e->g->f32, fptr(e, h, c64(e, 0)), 4);
			int ign = in->nan_ignore && in->algo == HIST_MAX;
			if (ign)       /* fmaxf(0, h[0]): TE's reduction starts at 0 */
				m0 = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, m0, cf(e, 0), ""), m0,
				                     cf(e, 0), "");
			if (in->algo == HIST_MOST_RECENT || len <= 1) {
				e->sc[in->res] = m0;
				continue;
			}
			Loop l;
			LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
			LLVMValueRef i = loop_begin(e, &l, c64(e, 1), c64(e, (uint64_t)len));
			/* the running max lives in a phi next to i */
			LLVMPositionBuilderBefore(b, LLVMGetNextInstruction(l.i));
			LLVMValueRef m = LLVMBuildPhi(b, e->g->f32, "m");
			LLVMAddIncoming(m, &m0, &pre, 1);
			LLVMPositionBuilderAtEnd(b, l.body);
			LLVMValueRef v = load_al(e, e->g->f32, fptr(e, h, i), 4);
			LLVMValueRef nan = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""),
			                               LLVMBuildFCmp(b, LLVMRealUNO, m, m, ""), "");
			LLVMValueRef mx = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, v, m, ""), v, m, "");
			if (!ign)      /* nan=ignore: fmaxf skips NaN, m never is */
				mx = LLVMBuildSelect(b, nan, cfbits(e, 0x7fc00000), mx, "");
			LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
			LLVMAddIncoming(m, &mx, &from, 1);
			loop_end(e, &l);
			e->sc[in->res] = m;
		}
	}
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(f, k->out[i]);
		if (d->op != OP_history_push)
			scalar(e, k->out[i], NULL);
	}
	/* scalar outputs, same thread */
	for (int i = 0; i < k->nout; i++) {
		int v = k->out[i];
		if (ir_def_ins(f, v)->op == OP_history_push)
			continue;
		if (f->val[v].type.fmt != PRECC_FP32)
			return kfail(k, "%%%s: f32 outputs only", f->val[v].name);
		store_al(e, e->sc[v], fptr(e, v, c64(e, 0)), 4);
	}
	end_if(e, cont);
	return 0;
}
