/*
 * emit_quant.c — the element side of quantize: the multiplier, hardware or
 * software encode, Philox SR bits; tensorwise amax outputs and the
 * grid-wide amax (amax_scheme=grid).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "precc/interp.h"
#include "emit.h"

/* The high and low words of x * mconst: the low one a 32-bit multiply of
 * its own, so that NVPTX selects mul.hi.u32 + mul.lo.u32 (two 32-bit
 * instructions) where one 64-bit product gave mul.wide, shr.u64 and
 * cvt.u32.u64 and kept the rounds' xors in 64 bits. */
static LLVMValueRef
mulhilo(Cg *g, uint32_t mconst, LLVMValueRef x, LLVMValueRef *lo)
{
	LLVMValueRef p = LLVMBuildMul(g->b, LLVMBuildZExt(g->b, x, g->i64, ""),
	                              LLVMConstInt(g->i64, mconst, 0), "");
	*lo = LLVMBuildMul(g->b, x, LLVMConstInt(g->i32, mconst, 0), "");
	return LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, p, LLVMConstInt(g->i64, 32, 0), ""), g->i32, "");
}

/* Philox-4x32-10 (ir/interp/philox.c), in place on the counter c. */
void
cg_philox(Cg *g, LLVMValueRef c[4], LLVMValueRef k0, LLVMValueRef k1)
{
	LLVMBuilderRef b = g->b;

	for (int r = 0; r < 10; r++) {
		if (r > 0) {
			k0 = LLVMBuildAdd(b, k0, LLVMConstInt(g->i32, 0x9E3779B9u, 0), "");
			k1 = LLVMBuildAdd(b, k1, LLVMConstInt(g->i32, 0xBB67AE85u, 0), "");
		}
		LLVMValueRef lo0, lo1;
		LLVMValueRef hi0 = mulhilo(g, 0xD2511F53u, c[0], &lo0);
		LLVMValueRef hi1 = mulhilo(g, 0xCD9E8D57u, c[2], &lo1);
		LLVMValueRef n0 = LLVMBuildXor(b, LLVMBuildXor(b, hi1, c[1], ""), k0, "");
		LLVMValueRef n2 = LLVMBuildXor(b, LLVMBuildXor(b, hi0, c[3], ""), k1, "");
		c[0] = n0;
		c[1] = lo1;
		c[2] = n2;
		c[3] = lo0;
	}
}

/* SR bits of elements idx .. idx+VEC-1: 32 an element, word i & 3 of
 * Philox at counter i >> 2 (idx a multiple of 4; precc_sr_bits); or with
 * half, e2m1's 16 an element, half i & 1 of word (i >> 1) & 3 at counter
 * i >> 3 (idx a multiple of 8; precc_sr_bits16): one call for 8 elements. */
static void
sr_bits_n(E *e, uint32_t stream, LLVMValueRef idx, LLVMValueRef rb[VEC], int half)
{
	LLVMValueRef k0 = LLVMBuildTrunc(e->b, e->seed, e->g->i32, "");
	LLVMValueRef k1 = LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, e->seed, c64(e, 32), ""),
	                                 e->g->i32, "");
	int per = half ? 8 : 4, sh = half ? 3 : 2;

	for (int j = 0; j < VEC / per; j++) {
		LLVMValueRef i = LLVMBuildAdd(e->b, idx, c64(e, (uint64_t)(per * j)), "");
		LLVMValueRef c[4] = {
			LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, i, c64(e, (uint64_t)sh), ""), e->g->i32, ""),
			LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, i, c64(e, 32 + (uint64_t)sh), ""), e->g->i32, ""),
			c32(e, stream), c32(e, 0),
		};
		cg_philox(e->g, c, k0, k1);
		for (int w = 0; w < per; w++)
			if (!half)
				rb[4 * j + w] = c[w];
			else
				rb[8 * j + w] = w & 1 ? LLVMBuildLShr(e->b, c[w / 2], c32(e, 16), "")
				              : LLVMBuildAnd(e->b, c[w / 2], c32(e, 0xffff), "");
	}
}

static void
sr_bits(E *e, uint32_t stream, LLVMValueRef idx, LLVMValueRef rb[VEC])
{
	sr_bits_n(e, stream, idx, rb, 0);
}

static void
sr_bits16(E *e, uint32_t stream, LLVMValueRef idx, LLVMValueRef rb[VEC])
{
	sr_bits_n(e, stream, idx, rb, 1);
}

/* The sign of an e2m1 code from the fp32 bits x (none for NaN, which
 * encodes as +6), or'ed onto its magnitude. */
static LLVMValueRef
e2m1_signed(Cg *g, LLVMValueRef x, LLVMValueRef abs, LLVMValueRef mag)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef sign = LLVMBuildAnd(b, LLVMBuildLShr(b, x, LLVMConstInt(g->i32, 28, 0), ""),
	                                 LLVMConstInt(g->i32, 8, 0), "");
	LLVMValueRef nan = LLVMBuildICmp(b, LLVMIntUGT, abs, LLVMConstInt(g->i32, 0x7f800000, 0), "");

	sign = LLVMBuildSelect(b, nan, LLVMConstInt(g->i32, 0, 0), sign, "");
	return LLVMBuildOr(b, sign, mag, "");
}

/* precc_encode_sr(e2m1, x, sat, r, 16) from the fp32 bits x (i32) and 16
 * random bits r: with a = min(|x| bits, 6.0's) (NaN and inf become 6),
 * g = floor(|x| / step * 2^16), the code's magnitude and 16 bits of the
 * fraction at once: floor(|x| * 2^17) below 1 (step 0.5), and from 1 on
 * (a - bits(0.5)) >> 6, the exponent and mantissa bit over the top 16 of
 * the 22 dropped bits. Then (g + r) >> 16 rounds up exactly when
 * floor(D / 2^6) + r >= 2^16 (numerics.h). The sign is x's, none for NaN. */
LLVMValueRef
cg_e2m1_sr(Cg *g, LLVMValueRef x, LLVMValueRef r)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef abs = LLVMBuildAnd(b, x, LLVMConstInt(g->i32, 0x7fffffff, 0), "");
	LLVMValueRef six = LLVMConstInt(g->i32, 0x40c00000, 0);
	LLVMValueRef a = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, abs, six, ""), abs, six, "");
	LLVMValueRef y = LLVMBuildFMul(b, LLVMBuildBitCast(b, a, g->f32, ""),
	                               LLVMConstReal(g->f32, 131072.0), "");
	LLVMValueRef gs = LLVMBuildFPToUI(b, y, g->i32, "");
	LLVMValueRef gn = LLVMBuildLShr(b, LLVMBuildSub(b, a, LLVMConstInt(g->i32, 0x3f000000, 0), ""),
	                                LLVMConstInt(g->i32, 6, 0), "");
	LLVMValueRef sub = LLVMBuildICmp(b, LLVMIntULT, a, LLVMConstInt(g->i32, 0x3f800000, 0), "");
	LLVMValueRef gg = LLVMBuildSelect(b, sub, gs, gn, "");
	LLVMValueRef mag = LLVMBuildLShr(b, LLVMBuildAdd(b, gg, r, ""), LLVMConstInt(g->i32, 16, 0), "");
	return e2m1_signed(g, x, abs, mag);
}

/* precc_encode(e2m1, x, RNE, sat): with a = min(|x| bits, 6.0's), below 1
 * the code is 2|x| rounded to the nearest even integer (exact in fp32:
 * cvt.rni), from 1 on it is g = a - bits(0.5) (the exponent and mantissa
 * bit over 22 dropped bits) rounded to even at bit 22. */
LLVMValueRef
cg_e2m1_rne(Cg *g, LLVMValueRef x)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef abs = LLVMBuildAnd(b, x, LLVMConstInt(g->i32, 0x7fffffff, 0), "");
	LLVMValueRef six = LLVMConstInt(g->i32, 0x40c00000, 0);
	LLVMValueRef a = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, abs, six, ""), abs, six, "");
	LLVMValueRef y2 = LLVMBuildFMul(b, LLVMBuildBitCast(b, a, g->f32, ""), LLVMConstReal(g->f32, 2.0), "");
	LLVMTypeRef ft = g->f32;
	unsigned id = LLVMLookupIntrinsicID("llvm.roundeven", 14);
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, &ft, 1);
	LLVMValueRef cs = LLVMBuildFPToUI(b, LLVMBuildCall2(b, LLVMIntrinsicGetType(g->ctx, id, &ft, 1), fn,
	                                                    &y2, 1, ""), g->i32, "");
	LLVMValueRef gn = LLVMBuildSub(b, a, LLVMConstInt(g->i32, 0x3f000000, 0), "");
	LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildLShr(b, gn, LLVMConstInt(g->i32, 22, 0), ""),
	                                LLVMConstInt(g->i32, 1, 0), "");
	LLVMValueRef cn = LLVMBuildLShr(b, LLVMBuildAdd(b, LLVMBuildAdd(b, gn, LLVMConstInt(g->i32, 0x1fffff, 0), ""),
	                                                odd, ""), LLVMConstInt(g->i32, 22, 0), "");
	LLVMValueRef sub = LLVMBuildICmp(b, LLVMIntULT, a, LLVMConstInt(g->i32, 0x3f800000, 0), "");
	return e2m1_signed(g, x, abs, LLVMBuildSelect(b, sub, cs, cn, ""));
}

int
check_quantize(E *e, const Ins *q)
{
	precc_format qf = e->k->f->val[q->res].type.fmt;
	SwProg p;

	if ((qf == PRECC_E4M3 || qf == PRECC_E5M2) && q->round == PRECC_RNE && q->sat)
		return 0;
	if (sw_encode(&p, qf, q->round, q->sat))
		return kfail(e->k, "%%%s = quantize: %s with round=%s is not generated yet",
		             e->k->f->val[q->res].name, ir_fmt_name(qf), precc_round_name(q->round));
	return 0;
}

/* Scale multiplier m of the quantize at bidx (two-level: gs / dec(bs),
 * TE's fminf(1 / (dec(bs) * (1 / gs)), FLT_MAX) or torchao's (1 / gs) /
 * dec(bs)); with div, the divisor. */
LLVMValueRef
quant_multiplier(E *e, const Ins *q, LLVMValueRef bidx)
{
	LLVMBuilderRef b = e->b;

	if (q->narg == 3 && !e->k->f->val[q->arg[2]].type.index) {
		precc_format sf = e->k->f->val[q->arg[1]].type.fmt;
		LLVMValueRef dq = decode8(e, sf, scalar(e, q->arg[1], bidx));
		LLVMValueRef gs = scalar(e, q->arg[2], bidx);
		if (q->nvfp4 == NV_TORCHAO)       /* (1 / gdec) / dq, nvfp4_tensor.py:844 */
			return LLVMBuildFDiv(b, LLVMBuildFDiv(b, cf(e, 1.0), gs, ""), dq, "");
		if (q->nvfp4 != NV_PRECC) {
			LLVMValueRef gdec = LLVMBuildFDiv(b, cf(e, 1.0), gs, "");
			LLVMValueRef m = LLVMBuildFDiv(b, cf(e, 1.0), LLVMBuildFMul(b, dq, gdec, ""), "");
			/* fminf: a NaN m gives FLT_MAX */
			return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, m, cf(e, FLT_MAX), ""), m,
			                       cf(e, FLT_MAX), "");
		}
		return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, dq, cf(e, 0), ""),
		                       cf(e, 0), LLVMBuildFDiv(b, gs, dq, ""), "");
	}
	return scalar(e, q->arg[1], bidx);
}

/* code[i] = enc(fl(x[i] * m)) for the quantize q; idx: element index of
 * x[0] (for SR). */
void
quantize_vec(E *e, const Ins *q, LLVMValueRef m, LLVMValueRef x[VEC], LLVMValueRef idx,
             LLVMValueRef code[VEC])
{
	precc_format qf = e->k->f->val[q->res].type.fmt;
	LLVMValueRef y[VEC], rb[VEC];

	for (int i = 0; i < VEC; i++)
		y[i] = q->divide ? LLVMBuildFDiv(e->b, x[i], m, "") : LLVMBuildFMul(e->b, x[i], m, "");
	if ((qf == PRECC_E4M3 || qf == PRECC_E5M2) && q->round == PRECC_RNE && q->sat) {
		for (int i = 0; i < VEC; i += 2) {
			LLVMValueRef p = LLVMBuildZExt(e->b, asm_cvt_f8x2(e->g, qf, y[i], y[i + 1]),
			                               e->g->i32, "");
			code[i] = p;
			code[i + 1] = LLVMBuildLShr(e->b, p, c32(e, 8), "");
		}
		return;
	}
	if (qf == PRECC_E2M1 && q->round == PRECC_RNE) {
		for (int i = 0; i < VEC; i++)
			code[i] = cg_e2m1_rne(e->g, LLVMBuildBitCast(e->b, y[i], e->g->i32, ""));
		return;
	}
	if (qf == PRECC_E2M1 && q->round == PRECC_SR) {
		sr_bits16(e, (uint32_t)q->stream, idx, rb);
		for (int i = 0; i < VEC; i++)
			code[i] = cg_e2m1_sr(e->g, LLVMBuildBitCast(e->b, y[i], e->g->i32, ""), rb[i]);
		return;
	}
	SwProg p;
	sw_encode(&p, qf, q->round, q->sat);
	if (q->round == PRECC_SR)
		sr_bits(e, (uint32_t)q->stream, idx, rb);
	for (int i = 0; i < VEC; i++)
		code[i] = sw_emit(e->g, &p, LLVMBuildBitCast(e->b, y[i], e->g->i32, ""),
		                  q->round == PRECC_SR ? rb[i] : NULL);
}

/* Atomic max of the CTA's amax bits into every amax {*x*} output. */
void
tensor_amax_out(E *e, LLVMValueRef mbits)
{
	const Func *f = e->k->f;
	LLVMValueRef m = cta_max(e, mbits);
	LLVMValueRef t0 = LLVMBuildICmp(e->b, LLVMIntEQ, sreg(e, "tid.x"), c32(e, 0), "");
	LLVMBasicBlockRef cont = begin_if(e, t0);

	for (int i = 0; i < e->k->nout; i++) {
		const Ins *d = ir_def_ins(f, e->k->out[i]);
		if (d->op == OP_amax && is_tensorwise_t(&d->type))
			LLVMBuildAtomicRMW(e->b, LLVMAtomicRMWBinOpUMax, e->ptr[e->k->out[i]], m,
			                   LLVMAtomicOrderingMonotonic, 0);
	}
	end_if(e, cont);
}

/* The amax {N x *} (k->seg rows: a tensorwise scale per expert of the
 * stacked weights) of the thread's vector at element idx: atomic max
 * into the slot of its N rows, from the CTA (each CTA within one slot),
 * else from each group of lanes within one (the largest power of two up
 * to a warp whose vectors always share a slot). */
void
seg_amax_out(E *e, LLVMValueRef mbits, LLVMValueRef idx)
{
	const Func *f = e->k->f;
	long span = e->k->seg * e->k->cols;     /* elements per slot */
	int lanes = 32;
	LLVMValueRef m, lead;
	LLVMValueRef tid = sreg(e, "tid.x");

	while (lanes > 1 && span % ((long)lanes * VEC))
		lanes >>= 1;
	if (lanes == 32 && span % ((long)e->k->threads * VEC) == 0) {
		m = cta_max(e, mbits);
		lead = LLVMBuildICmp(e->b, LLVMIntEQ, tid, c32(e, 0), "");
	} else {
		m = group_max(e, mbits, lanes);
		lead = LLVMBuildICmp(e->b, LLVMIntEQ, LLVMBuildAnd(e->b, tid, c32(e, (unsigned)lanes - 1), ""),
		                     c32(e, 0), "");
	}
	LLVMValueRef slot = LLVMBuildUDiv(e->b, idx, c64(e, (uint64_t)span), "");
	LLVMBasicBlockRef cont = begin_if(e, lead);

	for (int i = 0; i < e->k->nout; i++) {
		const Ins *d = ir_def_ins(f, e->k->out[i]);
		if (d->op == OP_amax && d->type.block[0] == e->k->seg && !d->type.block[1])
			LLVMBuildAtomicRMW(e->b, LLVMAtomicRMWBinOpUMax,
			                   gep(e, e->ptr[e->k->out[i]], LLVMBuildMul(e->b, slot, c64(e, 4), "")),
			                   m, LLVMAtomicOrderingMonotonic, 0);
	}
	end_if(e, cont);
}

/* The offsets of a {gx*} scale: G of them, group g's rows [offs[g-1],
 * offs[g]). */
static long
ngroups(E *e)
{
	return e->k->f->val[e->k->goffs].type.dim[0];
}

/* The group of row r: how many offsets are at most r (a binary search in
 * log2(G) + 1 steps, as gemm_grouped's tile scheduler counts them), G for
 * a row past the last offset (padding). Every load is of offs[0 .. G-1]
 * whatever the offsets hold: bad offsets give a wrong group, never an
 * access out of bounds, and the group is at most G. */
LLVMValueRef
group_of(E *e, LLVMValueRef r)
{
	LLVMBuilderRef b = e->b;
	long G = ngroups(e), step = 1;
	LLVMValueRef g = c64(e, 0);

	while (step * 2 <= G)
		step *= 2;
	for (; step >= 1; step /= 2) {
		LLVMValueRef cand = add64(e, g, c64(e, (uint64_t)step));
		LLVMValueRef in = LLVMBuildICmp(b, LLVMIntULE, cand, c64(e, (uint64_t)G), "");
		LLVMValueRef j = LLVMBuildSelect(b, in, LLVMBuildSub(b, cand, c64(e, 1), ""),
		                                 c64(e, (uint64_t)G - 1), "");
		LLVMValueRef o = LLVMBuildSExt(b, load_al(e, e->g->i32, gep(e, e->ptr[e->k->goffs],
		                                                             mul64(e, j, 4)), 4),
		                               e->g->i64, "");
		LLVMValueRef ok = LLVMBuildAnd(b, in, LLVMBuildICmp(b, LLVMIntSLE, o, r, ""), "");
		g = LLVMBuildSelect(b, ok, cand, g, "");
	}
	return g;
}

/* The amax {gx*} of the thread's vector (bits mbits, of group grp; 0 for
 * padding): a CTA whose first and last element are of one group (every
 * CTA but those at a boundary: a group holds whole CTAs of its rows)
 * reduces over the CTA and adds one atomic max; a CTA that straddles a
 * boundary adds each thread's own. x is read once, coalesced, either way;
 * the test is uniform over the CTA, so its barriers are too. */
void
group_amax_out(E *e, LLVMValueRef mbits, LLVMValueRef grp, LLVMValueRef valid)
{
	Kern *k = e->k;
	LLVMBuilderRef b = e->b;
	const Func *f = k->f;
	long G = ngroups(e);
	uint64_t per = (uint64_t)k->threads * VEC;
	LLVMValueRef total = LLVMBuildMul(b, dimv(e, k->rows), dimv(e, k->cols), "");
	LLVMValueRef first = mul64(e, LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, ""), per);
	LLVMValueRef end = add64(e, first, c64(e, per));
	end = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, end, total, ""), end, total, "");
	LLVMValueRef cols = c64(e, (uint64_t)k->cols);
	LLVMValueRef g0 = group_of(e, LLVMBuildUDiv(b, first, cols, ""));
	LLVMValueRef g1 = group_of(e, LLVMBuildUDiv(b, LLVMBuildSub(b, end, c64(e, 1), ""), cols, ""));
	LLVMValueRef one = LLVMBuildICmp(b, LLVMIntEQ, g0, g1, "");
	LLVMValueRef m = cta_max(e, mbits);
	LLVMValueRef t0 = LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "tid.x"), c32(e, 0), "");
	LLVMValueRef Gv = c64(e, (uint64_t)G);
	/* one group: thread 0 for the CTA; else each valid thread of a group */
	LLVMValueRef cta = LLVMBuildAnd(b, LLVMBuildAnd(b, one, t0, ""),
	                                LLVMBuildICmp(b, LLVMIntULT, g0, Gv, ""), "");
	LLVMValueRef own = LLVMBuildAnd(b, LLVMBuildAnd(b, LLVMBuildNot(b, one, ""), valid, ""),
	                                LLVMBuildICmp(b, LLVMIntULT, grp, Gv, ""), "");
	LLVMValueRef slot = LLVMBuildSelect(b, one, g0, grp, "");
	LLVMValueRef val = LLVMBuildSelect(b, one, m, mbits, "");
	LLVMBasicBlockRef cont = begin_if(e, LLVMBuildOr(b, cta, own, ""));

	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(f, k->out[i]);
		if (d->op == OP_amax && d->narg == 2)
			LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpUMax,
			                   gep(e, e->ptr[k->out[i]], mul64(e, slot, 4)), val,
			                   LLVMAtomicOrderingMonotonic, 0);
	}
	end_if(e, cont);
}

/* Each group's scalars (scale, scale_inv, and a transpose of one: the
 * [1,G] vector is the [G,1]), written whether or not the group has rows:
 * threads t, t + T, ... of CTA (0, 0) take group t's. */
static int
group_scalar(const Func *f, int v)
{
	const Ins *d = ir_def_ins(f, v);
	return d->op != OP_quantize && d->op != OP_amax && (d->op != OP_transpose || f->val[v].type.is_scale);
}

void
group_scalars_out(E *e)
{
	Kern *k = e->k;
	const Func *f = k->f;
	LLVMBuilderRef b = e->b;
	LLVMValueRef *saved = malloc(sizeof *saved * (size_t)f->nval);
	Loop l;
	int any = 0;

	for (int i = 0; i < k->nout; i++)
		any |= group_scalar(f, k->out[i]);
	if (!any || !saved) {
		free(saved);
		return;
	}
	memcpy(saved, e->sc, sizeof *saved * (size_t)f->nval);
	LLVMValueRef c0 = LLVMBuildICmp(b, LLVMIntEQ, k->tr >= 0 ? LLVMBuildOr(b, sreg(e, "ctaid.x"),
	                                sreg(e, "ctaid.y"), "") : sreg(e, "ctaid.x"), c32(e, 0), "");
	LLVMBasicBlockRef cont = begin_if(e, c0);
	LLVMValueRef t = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef it = loop_begin(e, &l, c64(e, 0), c64(e, (uint64_t)((ngroups(e) + k->threads - 1)
	                                                            / k->threads)));
	LLVMValueRef g = add64(e, t, mul64(e, it, (uint64_t)k->threads));
	LLVMValueRef in = LLVMBuildICmp(b, LLVMIntULT, g, c64(e, (uint64_t)ngroups(e)), "");
	LLVMValueRef gc = LLVMBuildSelect(b, in, g, c64(e, (uint64_t)ngroups(e) - 1), "");
	/* the scalars of group g (read in bounds past G too), not of the
	 * thread's rows */
	for (int v = 0; v < f->nval; v++)
		if (e->sc[v] && f->val[v].def >= 0 && f->ins[f->val[v].def].op != OP_amax)
			e->sc[v] = NULL;
	for (int i = 0; i < k->nout; i++)
		if (group_scalar(f, k->out[i]))
			scalar(e, k->out[i], gc);
	store_scalars(e, in, gc, gc);
	loop_end(e, &l);
	end_if(e, cont);
	memcpy(e->sc, saved, sizeof *saved * (size_t)f->nval);
	free(saved);
}

int
check_amax_ops(E *e, int no_tensorwise)
{
	const Func *f = e->k->f;

	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (in->op != OP_amax || !kin(e->k, i))
			continue;
		int src = e->k->qsrc >= 0 ? e->k->qsrc : e->k->x;
		for (int j = 0; j < i; j++)
			if (f->ins[j].op == OP_amax && kin(e->k, j) && f->ins[j].nan_ignore != in->nan_ignore)
				return kfail(e->k, "%%%s = amax: the amaxes of one kernel differ in nan=",
				             f->val[in->res].name);
		if (in->arg[0] != src)
			return kfail(e->k, "%%%s = amax: of %%%s, not of %%%s", f->val[in->res].name,
			             f->val[in->arg[0]].name, f->val[src].name);
		int tw = in->type.block[0] == 0 && in->type.block[1] == 0;
		if (in->type.block[0] > 1 && !in->type.block[1] && e->k->q >= 0)
			return kfail(e->k, "%%%s = amax: an {%ld x *} amax spans many CTAs: its quantize "
			             "runs in the next kernel", f->val[in->res].name, in->type.block[0]);
		int grid = tw && in->pattr[PA_AMAX_SCHEME] && !strcmp(in->pattr[PA_AMAX_SCHEME], "grid");
		if (grid) {
			/* amax_scheme=grid: atomic max + a grid-wide barrier, then every
			 * CTA reads the amax (a cooperative launch) */
			if (e->k->gridamax >= 0 && e->k->gridamax != in->res)
				return kfail(e->k, "%%%s = amax: one grid-wide amax per quantize",
				             f->val[in->res].name);
			e->k->gridamax = in->res;
			continue;
		}
		if (no_tensorwise && tw)
			return kfail(e->k, "%%%s = amax: a tensorwise amax does not fuse with tiles "
			             "(unless amax_scheme=grid)", f->val[in->res].name);
		if (tw) {
			for (int j = 0; j < f->nins; j++)
				for (int a = 0; a < f->ins[j].narg && kin(e->k, j); a++)
					if (f->ins[j].arg[a] == in->res && f->ins[j].op != OP_ret
					    && f->ins[j].op != OP_update)
						return kfail(e->k, "%%%s = amax: a tensorwise amax is not known "
						             "until every CTA is done: %s must run in the next kernel "
						             "(or amax_scheme=grid)",
						             f->val[in->res].name, opinfo[f->ins[j].op].name);
		} else if (e->k->q >= 0
		           && (in->type.block[0] != f->val[f->ins[e->k->q].arg[1]].type.block[0]
		               || in->type.block[1] != f->val[f->ins[e->k->q].arg[1]].type.block[1])) {
			return kfail(e->k, "%%%s = amax: granularity differs from the quantize's",
			             f->val[in->res].name);
		}
	}
	return 0;
}

/* Thread 0 arrives at the counter cnt and waits until n CTAs have
 * (fences around: LLVM 19's NVPTX cannot select an IR fence); then the
 * CTA's barrier. */
void
grid_sync(E *e, LLVMValueRef cnt, LLVMValueRef n)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef t0 = LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "tid.x"), c32(e, 0), "");
	LLVMBasicBlockRef cont = begin_if(e, t0);
	asm_fence_gpu(e->g);
	LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpAdd, cnt, c32(e, 1), LLVMAtomicOrderingMonotonic, 0);
	LLVMBasicBlockRef spin = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "spin");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "arrived");
	LLVMBuildBr(b, spin);
	LLVMPositionBuilderAtEnd(b, spin);
	if (e->g->host) {
		LLVMTypeRef ft = LLVMFunctionType(e->g->vd, NULL, 0, 0);
		LLVMValueRef fn = LLVMGetNamedFunction(e->g->mod, "precc_emu_yield");
		if (!fn)
			fn = LLVMAddFunction(e->g->mod, "precc_emu_yield", ft);
		LLVMBuildCall2(b, ft, fn, NULL, 0, "");
	}
	LLVMValueRef c = load_al(e, e->g->i32, cnt, 4);
	LLVMSetVolatile(c, 1);
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntULT, LLVMBuildZExt(b, c, e->g->i64, ""), n, ""),
	                spin, done);
	LLVMPositionBuilderAtEnd(b, done);
	asm_fence_gpu(e->g);
	end_if(e, cont);
	barrier(e);
}

/* amax_scheme=grid: the CTA's max into sync[2 slot] (atom.max), arrive at
 * sync[2 slot + 1], wait for every CTA of the phase, read the amax. Needs
 * every CTA resident at once (cooperative launch). When the kernel loops
 * over more tiles than CTAs (e->coop_pass, kemit.c), pass 1 only adds the
 * CTA's max and leaves the body, and pass 2, after the grid-wide barrier
 * between the passes, reads the amax. */
LLVMValueRef
grid_amax(E *e, LLVMValueRef mbits)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef am = gep(e, e->sync, c64(e, 8 * (uint64_t)e->slot));
	LLVMValueRef cnt = gep(e, e->sync, c64(e, 8 * (uint64_t)e->slot + 4));

	if (e->coop_pass == 2) {
		LLVMValueRef a = load_al(e, e->g->i32, am, 4);
		LLVMSetVolatile(a, 1);
		return LLVMBuildBitCast(b, a, e->g->f32, "");
	}
	LLVMValueRef m = cta_max(e, mbits);
	LLVMValueRef t0 = LLVMBuildICmp(b, LLVMIntEQ, sreg(e, "tid.x"), c32(e, 0), "");
	LLVMBasicBlockRef cont = begin_if(e, t0);
	LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpUMax, am, m, LLVMAtomicOrderingMonotonic, 0);
	end_if(e, cont);
	if (e->coop_pass == 1) {
		/* the rest of this pass's body is never reached */
		LLVMBuildBr(b, e->pass_exit);
		LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(e->g->ctx, e->g->fn, "pass1.dead"));
		return cf(e, 0);
	}
	grid_sync(e, cnt, e->ncta);
	LLVMValueRef a = load_al(e, e->g->i32, am, 4);
	LLVMSetVolatile(a, 1);
	return LLVMBuildBitCast(b, a, e->g->f32, "");
}
