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
	LLVMValueRef t0 = LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "tid.x"), c32(e, 0), "");
	if (!e->bulk)     /* the per-layer kernel: one CTA does it */
		t0 = LLVMBuildAnd(b, t0, LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "ctaid.x"), c32(e, 0), ""), "");
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

/* CG_BULK_ENTRY(ptr table, i64 rows): the delayed-scaling update of many
 * layers in one launch, as TE's bulk amax_and_scale_update updates every
 * tensor's history in one (a CTA per history set; TE's
 * recipe/delayed_scaling.cu kernel_bulk). Row r of the table is
 * nin + 2 * nout u64 pointers: the per-layer kernel's params in order,
 * then for each output the state buffer it commits to (0: none). CTA c
 * takes rows c, c + nctaid.x, ...: thread 0 runs the update exactly as
 * the per-layer kernel does, a barrier makes its outputs visible to the
 * CTA, and the lanes copy each output over its state buffer: the commit
 * the runtime otherwise does with one copy per buffer (rt_apply_updates).
 * Rows are independent (each layer has its own state), so no grid-wide
 * ordering is needed. */
int
emit_delayed_bulk(Cg *g, Kern *k)
{
	const Func *f = k->f;
	LLVMValueRef main = g->fn;
	LLVMTypeRef pt[2] = {g->gptr, g->i64};
	LLVMValueRef fn = LLVMAddFunction(g->mod, CG_BULK_ENTRY, LLVMFunctionType(g->vd, pt, 2, 0));
	E e = {.g = g, .k = k, .b = g->b, .bulk = 1};
	LLVMBuilderRef b = g->b;
	long width = k->nin + 2L * k->nout;
	int rc = -1;

	for (int i = 0; i < k->nout; i++) {
		const Type *t = &f->val[k->out[i]].type;
		for (int d = 0; d < t->rank; d++)
			if (t->dim[d] <= 0)
				return kfail(k, "%%%s: a delayed update's outputs have static shapes",
				             f->val[k->out[i]].name);
		if (t->fmt != PRECC_FP32)
			return kfail(k, "%%%s: f32 outputs only", f->val[k->out[i]].name);
	}
	g->fn = fn;
	if (!g->host) {
		LLVMSetFunctionCallConv(fn, LLVMPTXKernelCallConv);
		cg_annotate_threads(g, fn, k->threads, 0);
	}
	e.ptr = calloc((size_t)f->nval + 1, sizeof *e.ptr);
	e.sc = calloc((size_t)f->nval + 1, sizeof *e.sc);
	if (!e.ptr || !e.sc) {
		rc = kfail(k, "out of memory");
		goto out;
	}
	LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
	LLVMValueRef table = LLVMGetParam(fn, 0), rows = LLVMGetParam(fn, 1);
	LLVMValueRef tid = LLVMBuildZExt(b, sreg(&e, "tid.x"), g->i64, "");
	LLVMValueRef step = LLVMBuildZExt(b, sreg(&e, "nctaid.x"), g->i64, "");
	LLVMValueRef rv = LLVMBuildAlloca(b, g->i64, "row");
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(g->ctx, fn, "bulk.head");
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, fn, "bulk.body");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, fn, "bulk.done");
	LLVMBuildStore(b, LLVMBuildZExt(b, sreg(&e, "ctaid.x"), g->i64, ""), rv);
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, head);
	LLVMValueRef r = LLVMBuildLoad2(b, g->i64, rv, "r");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntULT, r, rows, ""), body, done);
	LLVMPositionBuilderAtEnd(b, body);
	LLVMValueRef row = gep(&e, table, LLVMBuildMul(b, r, c64(&e, (uint64_t)width * 8), ""));
	for (int i = 0; i < k->nin; i++)
		e.ptr[k->in[i]] = load_al(&e, g->gptr, gep(&e, row, c64(&e, 8u * (unsigned)i)), 8);
	for (int i = 0; i < k->nout; i++)
		e.ptr[k->out[i]] = load_al(&e, g->gptr,
		                           gep(&e, row, c64(&e, 8u * (unsigned)(k->nin + i))), 8);
	if ((rc = emit_delayed(&e)))
		goto out;
	barrier(&e);     /* thread 0's outputs, visible to the CTA */
	for (int i = 0; i < k->nout; i++) {
		const Type *t = &f->val[k->out[i]].type;
		long n = 1;
		for (int d = 0; d < t->rank; d++)
			n *= t->dim[d];
		LLVMValueRef dst = load_al(&e, g->gptr,
		                           gep(&e, row, c64(&e, 8u * (unsigned)(k->nin + k->nout + i))), 8);
		LLVMBasicBlockRef cont = begin_if(&e, LLVMBuildIsNotNull(b, dst, ""));
		Loop l;
		long per = (n + k->threads - 1) / k->threads;
		LLVMValueRef j = loop_begin(&e, &l, c64(&e, 0), c64(&e, (uint64_t)per));
		LLVMValueRef ix = LLVMBuildAdd(b, LLVMBuildMul(b, j, c64(&e, (uint64_t)k->threads), ""),
		                               tid, "");
		LLVMBasicBlockRef in = begin_if(&e, LLVMBuildICmp(b, LLVMIntULT, ix, c64(&e, (uint64_t)n), ""));
		LLVMValueRef off = LLVMBuildMul(b, ix, c64(&e, 4), "");
		store_al(&e, load_al(&e, g->i32, gep(&e, e.ptr[k->out[i]], off), 4), gep(&e, dst, off), 4);
		end_if(&e, in);
		loop_end(&e, &l);
		end_if(&e, cont);
	}
	/* rows have disjoint buffers: no barrier before the next row */
	LLVMBuildStore(b, LLVMBuildAdd(b, LLVMBuildLoad2(b, g->i64, rv, ""), step, ""), rv);
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, done);
	LLVMBuildRetVoid(b);
	rc = 0;
out:
	free(e.ptr);
	free(e.sc);
	g->fn = main;
	return rc;
}
