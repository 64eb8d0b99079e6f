/*
 * k_hadamard.c — NVFP4's random Hadamard transform (the hadamard op,
 * precc_hadamard16): y = x_block · diag(s) · H16 / 4 over blocks of 16
 * along the rows of the result. Thread g owns one block: of transpose(x),
 * column c = g % C of x, rows 16 (g / C) .. +15 (the wgrad copy, walked as
 * quant_colblock walks it), else elements 16 g .. 16 g + 15 of x. Each
 * output is the fp32 sum in ascending i of the exact products x_i · ±1/4,
 * each add rounded on its own (add.rn, never an FMA), then one cvt.rn to
 * the result format. The kernel writes the result, or (the global amax of
 * a wgrad copy, fuse.c) only its tensorwise amaxes; quant_colblock
 * transforms the blocks it reads with rht_block, so the transformed copy
 * need not be written at all.
 */
#include "emit.h"

/* The 16 fp32 sums of one block. */
static void
sums(E *e, const Ins *h, LLVMValueRef xv[16], LLVMValueRef y[16])
{
	LLVMBuilderRef b = e->b;

	for (int j = 0; j < 16; j++) {
		LLVMValueRef s = cf(e, 0.0);
		for (int i = 0; i < 16; i++) {
			int neg = (__builtin_popcount((unsigned)(i & j)) & 1) ^ ((h->signs >> i) & 1);
			LLVMValueRef p = LLVMBuildFMul(b, xv[i], cf(e, neg ? -0.25 : 0.25), "");
			LLVMValueRef a[2] = {s, p};
			s = e->g->host ? LLVMBuildFAdd(b, s, p, "")
			               : intrin(e, "llvm.nvvm.add.rn.f", NULL, 0, a, 2);
		}
		y[j] = s;
	}
}

/* y: the block's outputs in the result's format, widened back to f32 (the
 * values a read of the written copy would give). */
void
rht_block(E *e, const Ins *h, LLVMValueRef x[16], LLVMValueRef y[16])
{
	LLVMBuilderRef b = e->b;

	sums(e, h, x, y);
	if (h->type.fmt == PRECC_FP32)
		return;
	for (int j = 0; j < 16; j += 2) {
		LLVMValueRef pair = asm_cvt_16x2(e->g, h->type.fmt, y[j], y[j + 1]);
		LLVMValueRef lo = LLVMBuildAnd(b, pair, c32(e, 0xffff), "");
		LLVMValueRef hi = LLVMBuildLShr(b, pair, c32(e, 16), "");
		LLVMValueRef h2[2] = {lo, hi};
		for (int t = 0; t < 2; t++)
			y[j + t] = h->type.fmt == PRECC_BF16
			         ? LLVMBuildBitCast(b, LLVMBuildShl(b, h2[t], c32(e, 16), ""), e->g->f32, "")
			         : LLVMBuildFPExt(b, LLVMBuildBitCast(b, LLVMBuildTrunc(b, h2[t], e->g->i16, ""),
			                                              e->g->f16, ""), e->g->f32, "");
	}
}

/* The 16 outputs of one block, stored at elements base .. base + 15. */
static void
transform(E *e, const Ins *h, LLVMValueRef xv[16], LLVMValueRef base)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef y[16];

	sums(e, h, xv, y);
	for (int j = 0; j < 16; j += 2) {
		LLVMValueRef idx = LLVMBuildAdd(b, base, c64(e, (uint64_t)j), "");
		if (h->type.fmt == PRECC_FP32) {
			store_al(e, y[j], fptr(e, h->res, idx), 4);
			store_al(e, y[j + 1], fptr(e, h->res, LLVMBuildAdd(b, idx, c64(e, 1), "")), 4);
		} else {
			LLVMValueRef pair = asm_cvt_16x2(e->g, h->type.fmt, y[j], y[j + 1]);
			store_al(e, pair, gep(e, e->ptr[h->res], LLVMBuildMul(b, idx, c64(e, 2), "")), 4);
		}
	}
}

int
emit_hadamard(E *e)
{
	Kern *k = e->k;
	const Ins *h = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	LLVMValueRef R = dimv(e, k->rows), C = dimv(e, k->cols), gid = gid64(e), valid, base;
	LLVMValueRef xv[16];
	LLVMBasicBlockRef cont, pre = LLVMGetInsertBlock(b);
	int amax = k->nout && ir_def_ins(k->f, k->out[0])->op == OP_amax;

	if (k->qsrc != k->x) {
		LLVMValueRef c = LLVMBuildURem(b, gid, C, ""), rb = LLVMBuildUDiv(b, gid, C, "");
		valid = LLVMBuildICmp(b, LLVMIntULT, rb, LLVMBuildUDiv(b, R, c64(e, 16), ""), "");
		cont = begin_if(e, valid);
		LLVMValueRef r0 = LLVMBuildMul(b, rb, c64(e, 16), "");
		for (int i = 0; i < 16; i++) {
			LLVMValueRef r = LLVMBuildAdd(b, r0, c64(e, (uint64_t)i), "");
			xv[i] = load_elem(e, k->x, LLVMBuildAdd(b, LLVMBuildMul(b, r, C, ""), c, ""));
		}
		base = LLVMBuildAdd(b, LLVMBuildMul(b, c, R, ""), r0, "");
	} else {
		LLVMValueRef n = LLVMBuildUDiv(b, LLVMBuildMul(b, R, C, ""), c64(e, 16), "");
		cont = begin_if(e, LLVMBuildICmp(b, LLVMIntULT, gid, n, ""));
		base = LLVMBuildMul(b, gid, c64(e, 16), "");
		for (int i = 0; i < 16; i++)
			xv[i] = load_elem(e, k->x, LLVMBuildAdd(b, base, c64(e, (uint64_t)i), ""));
	}
	if (!amax) {
		transform(e, h, xv, base);
		end_if(e, cont);
		return 0;
	}
	/* only the amaxes: of the rounded outputs, as of the written copy, and
	 * of the data param (x and xᵀ have one amax) from the values read */
	LLVMValueRef y[16];
	rht_block(e, h, xv, y);
	LLVMValueRef mb[2] = {vec_amax_bits(e, y, 16), vec_amax_bits(e, xv, 16)}, zero = c32(e, 0);
	LLVMBasicBlockRef last = LLVMGetInsertBlock(b);
	end_if(e, cont);
	LLVMValueRef m[2];
	for (int s = 0; s < 2; s++) {
		m[s] = LLVMBuildPhi(b, e->g->i32, "m");
		LLVMAddIncoming(m[s], &zero, &pre, 1);
		LLVMAddIncoming(m[s], &mb[s], &last, 1);
	}
	for (int s = 0; s < 2; s++) {
		int any = 0;
		for (int i = 0; i < k->nout; i++)
			any |= (ir_def_ins(k->f, k->out[i])->arg[0] == h->res) == !s;
		if (!any)
			continue;
		LLVMValueRef cm = cta_max(e, m[s]);
		LLVMBasicBlockRef t0 = begin_if(e, LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "tid.x"), c32(e, 0), ""));
		for (int i = 0; i < k->nout; i++)
			if ((ir_def_ins(k->f, k->out[i])->arg[0] == h->res) == !s)
				LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpUMax, e->ptr[k->out[i]], cm,
				                   LLVMAtomicOrderingMonotonic, 0);
		end_if(e, t0);
	}
	return 0;
}
