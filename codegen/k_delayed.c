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

/* Whether value v is computed from a history_reduce. */
static int
from_reduce(const Func *f, int v, int depth)
{
	const Ins *d = ir_def_ins(f, v);

	if (!d || depth > 64)
		return depth > 64;
	if (d->op == OP_history_reduce)
		return 1;
	for (int a = 0; a < d->narg; a++)
		if (d->arg[a] >= 0 && from_reduce(f, d->arg[a], depth + 1))
			return 1;
	return 0;
}

/* The warp's lanes push the amax into history h (lane l moves entries l,
 * l + 32, ...): r[0] = a, r[i] = h[i - 1]; zero=keep: a zero amax leaves
 * the history as it is (TE). */
static int
push(E *e, const Ins *in, LLVMValueRef lane)
{
	const Func *f = e->k->f;
	LLVMBuilderRef b = e->b;
	int h = in->arg[0], a = in->arg[1], r = in->res;
	long len = f->val[h].type.dim[0];

	if (f->val[h].type.rank != 1 || len <= 0)
		return kfail(e->k, "%%%s = history_push: f32[H] histories only", f->val[r].name);
	if (!e->ptr[r])
		return kfail(e->k, "%%%s = history_push: its result must be an output", f->val[r].name);
	if (from_reduce(f, a, 0))
		return kfail(e->k, "%%%s = history_push: an amax computed from a history_reduce",
		             f->val[r].name);
	LLVMValueRef av = scalar(e, a, NULL);
	LLVMValueRef keep = in->zero_keep ? LLVMBuildFCmp(b, LLVMRealOEQ, av, cf(e, 0), "")
	                                  : LLVMConstInt(e->g->i1, 0, 0);
	Loop l;
	LLVMValueRef j = loop_begin(e, &l, c64(e, 0), c64(e, (uint64_t)((len + 31) / 32)));
	LLVMValueRef i = LLVMBuildAdd(b, LLVMBuildMul(b, j, c64(e, 32), ""), lane, "");
	LLVMBasicBlockRef in_range = begin_if(e, LLVMBuildICmp(b, LLVMIntULT, i, c64(e, (uint64_t)len), ""));
	LLVMValueRef first = LLVMBuildICmp(b, LLVMIntEQ, i, c64(e, 0), "");
	/* i = 0 reads h[0] only when kept; its value is then a, or h[0] */
	LLVMValueRef src = LLVMBuildSelect(b, LLVMBuildOr(b, keep, first, ""), i,
	                                   LLVMBuildSub(b, i, c64(e, 1), ""), "");
	LLVMValueRef v = load_al(e, e->g->f32, fptr(e, h, src), 4);
	v = LLVMBuildSelect(b, LLVMBuildAnd(b, first, LLVMBuildNot(b, keep, ""), ""), av, v, "");
	store_al(e, v, fptr(e, r, i), 4);
	end_if(e, in_range);
	loop_end(e, &l);
	return 0;
}

/* The max of history h (len >= 2) across the warp, bit for bit what the
 * interpreter's sequential loop gives (m = h[0]; m = v > m ? v : m):
 * nan=ignore, the largest positive entry or +0 (TE's fmaxf from 0), as the
 * u32 max of the bits of the positive entries; otherwise canonical NaN if
 * any entry is NaN, else the first entry equal to the max (which of -0
 * and +0 comes first decides the sign of a zero max), as a (key, index)
 * max with the smaller index on equal keys. Every lane gets the result. */
static LLVMValueRef
reduce_max(E *e, int h, long len, int ign, LLVMValueRef lane)
{
	LLVMBuilderRef b = e->b;
	LLVMTypeRef i32 = e->g->i32;
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
	Loop l;
	LLVMValueRef j = loop_begin(e, &l, c64(e, 0), c64(e, (uint64_t)((len + 31) / 32)));
	LLVMPositionBuilderBefore(b, LLVMGetNextInstruction(l.i));
	LLVMValueRef key = LLVMBuildPhi(b, i32, "key"), idx = LLVMBuildPhi(b, i32, "idx");
	LLVMValueRef nan = LLVMBuildPhi(b, e->g->i1, "nan");
	LLVMValueRef k0 = c32(e, 0), i0 = c32(e, 0xffffffffu), n0 = LLVMConstInt(e->g->i1, 0, 0);
	LLVMAddIncoming(key, &k0, &pre, 1);
	LLVMAddIncoming(idx, &i0, &pre, 1);
	LLVMAddIncoming(nan, &n0, &pre, 1);
	LLVMPositionBuilderAtEnd(b, l.body);
	LLVMValueRef i = LLVMBuildAdd(b, LLVMBuildMul(b, j, c64(e, 32), ""), lane, "");
	LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, i, c64(e, (uint64_t)len), "");
	LLVMValueRef v = load_al(e, e->g->f32, fptr(e, h, LLVMBuildSelect(b, ok, i, c64(e, 0), "")), 4);
	LLVMValueRef bits = LLVMBuildBitCast(b, v, i32, "");
	LLVMValueRef nkey, nidx = idx, nnan = nan;
	if (ign) {
		LLVMValueRef pos = LLVMBuildAnd(b, ok, LLVMBuildFCmp(b, LLVMRealOGT, v, cf(e, 0), ""), "");
		nkey = umax(e, key, LLVMBuildSelect(b, pos, bits, k0, ""));
	} else {
		LLVMValueRef isn = LLVMBuildFCmp(b, LLVMRealUNO, v, v, "");
		nnan = LLVMBuildOr(b, nan, LLVMBuildAnd(b, ok, isn, ""), "");
		/* an order-preserving key, -0 and +0 equal: negative entries
		 * inverted, the others with the sign bit set */
		LLVMValueRef zero = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, bits, c32(e, 0x7fffffff), ""),
		                                  k0, "");
		bits = LLVMBuildSelect(b, zero, k0, bits, "");
		LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, bits, k0, "");
		LLVMValueRef kv = LLVMBuildSelect(b, neg, LLVMBuildNot(b, bits, ""),
		                                  LLVMBuildOr(b, bits, c32(e, 0x80000000u), ""), "");
		LLVMValueRef take = LLVMBuildAnd(b, LLVMBuildAnd(b, ok, LLVMBuildNot(b, isn, ""), ""),
		                                 LLVMBuildICmp(b, LLVMIntUGT, kv, key, ""), "");
		nkey = LLVMBuildSelect(b, take, kv, key, "");
		nidx = LLVMBuildSelect(b, take, LLVMBuildTrunc(b, i, i32, ""), idx, "");
	}
	LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
	LLVMAddIncoming(key, &nkey, &from, 1);
	LLVMAddIncoming(idx, &nidx, &from, 1);
	LLVMAddIncoming(nan, &nnan, &from, 1);
	loop_end(e, &l);
	if (ign)
		return LLVMBuildBitCast(b, group_max(e, key, 32), e->g->f32, "");
	LLVMValueRef nn = LLVMBuildZExt(b, nan, i32, "");
	for (int o = 1; o < 32; o <<= 1) {
		LLVMValueRef ok2 = shfl_xor(e, key, o), oi = shfl_xor(e, idx, o);
		LLVMValueRef take = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntUGT, ok2, key, ""),
		                                LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, ok2, key, ""),
		                                             LLVMBuildICmp(b, LLVMIntULT, oi, idx, ""), ""), "");
		key = LLVMBuildSelect(b, take, ok2, key, "");
		idx = LLVMBuildSelect(b, take, oi, idx, "");
		nn = LLVMBuildOr(b, nn, shfl_xor(e, nn, o), "");
	}
	/* every entry NaN: idx was never set, and the result is NaN anyway */
	LLVMValueRef at = LLVMBuildZExt(b, LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, idx,
	                                 c32(e, (uint64_t)len), ""), idx, k0, ""), e->g->i64, "");
	LLVMValueRef m = load_al(e, e->g->f32, fptr(e, h, at), 4);
	return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntNE, nn, k0, ""), cfbits(e, 0x7fc00000), m, "");
}

/* delayed_update, on one warp: the lanes push each amax into its history
 * and, after a barrier, reduce the pushed histories (TE's bulk kernel
 * reduces with the CTA too); thread 0 then computes the next scales (and
 * whatever else follows) and stores them. The per-layer kernel runs in
 * CTA 0 of its one-CTA grid, the bulk entry in every CTA (e->bulk). */
int
emit_delayed(E *e)
{
	Kern *k = e->k;
	const Func *f = k->f;
	LLVMBuilderRef b = e->b;
	int npush = 0;

	if (check_scalar_ops(e))
		return -1;
	if (k->threads != 32)
		return kfail(k, "the delayed update runs on one warp (%d threads)", k->threads);
	LLVMBasicBlockRef cta0 = NULL;
	if (!e->bulk)     /* the per-layer kernel: one CTA does it */
		cta0 = begin_if(e, LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "ctaid.x"), c32(e, 0), ""));
	LLVMValueRef lane = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	for (int n = 0; n < f->nins; n++)
		if (f->ins[n].op == OP_history_push) {
			if (push(e, &f->ins[n], lane))
				return -1;
			npush++;
		}
	if (npush)
		barrier(e);   /* the pushed histories, visible to every lane */
	for (int n = 0; n < f->nins; n++) {
		const Ins *in = &f->ins[n];
		if (in->op != OP_history_reduce)
			continue;
		int h = in->arg[0];
		long len = f->val[h].type.dim[0];
		if (!e->ptr[h])
			return kfail(k, "%%%s = history_reduce: of a buffer (param or output)",
			             f->val[in->res].name);
		int ign = in->nan_ignore && in->algo == HIST_MAX;
		if (in->algo == HIST_MOST_RECENT || len <= 1) {
			LLVMValueRef m0 = load_al(e, e->g->f32, fptr(e, h, c64(e, 0)), 4);
			if (ign)       /* fmaxf(0, h[0]): TE's reduction starts at 0 */
				m0 = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, m0, cf(e, 0), ""), m0,
				                     cf(e, 0), "");
			e->sc[in->res] = m0;
		} else
			e->sc[in->res] = reduce_max(e, h, len, ign, lane);
	}
	LLVMBasicBlockRef t0 = begin_if(e, LLVMBuildICmp(b, LLVMIntEQ, lane, c64(e, 0), ""));
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(f, k->out[i]);
		if (d->op != OP_history_push)
			scalar(e, k->out[i], NULL);
	}
	/* scalar outputs, thread 0 */
	for (int i = 0; i < k->nout; i++) {
		int v = k->out[i];
		if (ir_def_ins(f, v)->op == OP_history_push)
			continue;
		if (f->val[v].type.fmt != PRECC_FP32)
			return kfail(k, "%%%s: f32 outputs only", f->val[v].name);
		store_al(e, e->sc[v], fptr(e, v, c64(e, 0)), 4);
	}
	end_if(e, t0);
	if (cta0)
		end_if(e, cta0);
	return 0;
}

/* CG_BULK_ENTRY(ptr table, i64 rows): the delayed-scaling update of many
 * layers in one launch, as TE's bulk amax_and_scale_update updates every
 * tensor's history in one (a CTA per history set; TE's
 * recipe/delayed_scaling.cu kernel_bulk). Row r of the table is
 * nin + 2 * nout u64 pointers: the per-layer kernel's params in order,
 * then for each output the state buffer it commits to (0: none). CTA c
 * takes rows c, c + nctaid.x, ...: its warp runs the update exactly as
 * the per-layer kernel does, a barrier makes thread 0's outputs visible,
 * and the lanes copy each output over its state buffer: the commit
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
