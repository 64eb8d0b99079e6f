/*
 * legalize.c — what the target can do, decided per instruction before any
 * fusion, so that later passes and codegen only read the choice:
 *
 *  - conversions (cvt=hw|sw on quantize, dequantize, mx_scale,
 *    block_scale): e4m3/e5m2 with round-to-nearest have the packed
 *    cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 from sm_89 on; the MX/NVFP4
 *    element forms (cvt.rn.satfinite.e2m1x2.f32, e3m2x2, e2m3x2), the
 *    e8m0 scale form (cvt.rp.satfinite.ue8m0x2.f32) and stochastic rounding
 *    (cvt.rs) need sm_100a and PTX 8.6, so on sm_89/sm_90/sm_90a they get
 *    the exact software sequence (codegen/swcvt.c), bit-identical to the
 *    interpreter.
 *  - GEMMs (mma=wgmma or mma_sync, upcast=bf16): sm_90a gets codegen's
 *    wgmma family (k_gemm_sm90.c; schedule.c sends the kernels it does not
 *    take back to mma_sync), sm_89 and sm_90 (no 'a' features) the
 *    mma.sync family (k_gemm.c).
 *    No Hopper tensor core takes e2m1/e3m2/e2m3 operands: those are
 *    decoded to bf16 on the way to shared memory (exact: every such value
 *    is a bf16), block scales applied at each K block.
 *  - alignment (vec=N): 16-byte vector loads and stores need the
 *    contiguous dim to be a multiple of 16 / element bytes; a tensor whose
 *    dim is not gets the widest vector that divides it. A dynamic
 *    contiguous dim (M, in transposed copies) is assumed aligned and the
 *    func records the requirement (m_align=N) for the launcher to check.
 *
 * The header of every func gets target=NAME.
 */
#include <stdio.h>
#include <string.h>
#include "passes.h"

static int
elem_bytes(precc_format f)
{
	return f == PRECC_FP32 || f == PRECC_TF32 ? 4 : f == PRECC_FP16 || f == PRECC_BF16 ? 2 : 1;
}

static bool
mx_element(precc_format f)
{
	return f == PRECC_E2M1 || f == PRECC_E3M2 || f == PRECC_E2M3;
}

/* Widest vector (bytes, <= 16) over a tensor's contiguous dim; for a
 * dynamic dim 16, and *malign the elements M must be a multiple of. */
static int
vector_bytes(const Type *t, long *malign)
{
	long c = t->dim[t->rank - 1];
	int eb = elem_bytes(t->fmt), v = 16;

	if (c < 0) {
		if (16 / eb > *malign)
			*malign = 16 / eb;
		return 16;
	}
	while (v > eb && (c * eb) % v)
		v /= 2;
	return v;
}

static void
note(Func *f, const char *what)
{
	if (!f->comment || !strstr(f->comment, what))
		ir_comment(&f->comment, "legalize: %s", what);
}

static void
cvt(Func *f, Ins *i, precc_format q, const Target *t)
{
	char why[160];

	if (i->op == OP_mx_scale) {
		ir_set_attr(i->pattr, PA_CVT, t->cvt_mx ? "hw" : "sw");
		snprintf(why, sizeof why, "e8m0 scales in software (cvt.rp.satfinite.ue8m0x2.f32 "
		         "needs sm_100a+, PTX 8.6+; %s)", t->name);
	} else if (mx_element(q)) {
		ir_set_attr(i->pattr, PA_CVT, t->cvt_mx ? "hw" : "sw");
		snprintf(why, sizeof why, "%s in software (cvt.rn.satfinite.%sx2.f32 needs sm_100a+, "
		         "PTX 8.6+; %s)", ir_fmt_name(q), ir_fmt_name(q), t->name);
	} else if (i->op == OP_quantize && i->round == PRECC_SR) {
		ir_set_attr(i->pattr, PA_CVT, "sw");
		snprintf(why, sizeof why, "stochastic rounding in software (cvt.rs needs sm_100a+; %s)",
		         t->name);
	} else {
		ir_set_attr(i->pattr, PA_CVT, t->cvt_fp8 ? "hw" : "sw");
		return;
	}
	if (!t->cvt_mx)
		note(f, why);
}

static void
legalize_func(Func *f, const Target *t)
{
	long malign = 1;

	ir_set_attr(f->pattr, PA_TARGET, "%s", t->name);
	for (int k = 0; k < f->nins; k++) {
		Ins *i = &f->ins[k];
		const Type *rt = &i->type;

		switch (i->op) {
		case OP_quantize: cvt(f, i, rt->fmt, t); break;
		case OP_dequantize: cvt(f, i, f->val[i->arg[0]].type.fmt, t); break;
		case OP_mx_scale: cvt(f, i, PRECC_E8M0, t); break;
		case OP_block_scale: cvt(f, i, rt->fmt, t); break;
		case OP_gemm_grouped:
			/* sm_90a: k_gemm_grouped_sm90.c (schedule.c keeps
			 * k_gemm_grouped.c's mma.sync for what it does not take);
			 * else mma.sync */
			ir_set_attr(i->pattr, PA_MMA, t->wgmma ? "wgmma" : "mma_sync");
			note(f, t->wgmma ? "grouped GEMMs on wgmma (sm_90a)" : "GEMMs on mma.sync (wgmma needs sm_90a)");
			break;
		case OP_gemm: {
			precc_format a = f->val[i->arg[0]].type.fmt;
			/* sm_90a: the wgmma family (schedule.c keeps mma.sync for
			 * the kernels it does not take); sm_89, sm_90: mma.sync */
			/* e2m1 (NVFP4): the wgmma family's producer upcasts the
			 * codes into its bf16 stages; e3m2, e2m3: mma.sync only */
			int wg = t->wgmma && (!mx_element(a) || a == PRECC_E2M1);
			ir_set_attr(i->pattr, PA_MMA, wg ? "wgmma" : "mma_sync");
			note(f, t->wgmma ? (!wg ? "GEMMs on mma.sync (fp6 operands are upcast, "
			                          "which the wgmma family does not take)"
			                        : "GEMMs on wgmma (sm_90a)")
			                 : "GEMMs on mma.sync (wgmma needs sm_90a)");
			if (mx_element(a)) {
				ir_set_attr(i->pattr, PA_UPCAST, "bf16");
				note(f, "no fp4/fp6 tensor-core operands before sm_100: decoded to bf16 in "
				        "the GEMM mainloop (exact)");
			}
			break;
		}
		default: break;
		}
		/* alignment of data a kernel or a GEMM moves */
		if (opinfo[i->op].result && i->op != OP_call && !rt->is_scale && rt->rank == 2) {
			int v = vector_bytes(rt, &malign);
			if (v < 16) {
				char why[160];
				ir_set_attr(i->pattr, PA_VEC, "%d", v);
				snprintf(why, sizeof why, "%ld %s elements per row: %d-byte vectors, not 16",
				         rt->dim[1], ir_fmt_name(rt->fmt), v);
				note(f, why);
			}
		}
	}
	if (malign > 1)
		ir_set_attr(f->pattr, PA_MALIGN, "%ld", malign);
}

void
legalize(Module *m, const Target *t)
{
	for (int k = 0; k < m->nfn; k++)
		legalize_func(m->fn[k], t);
}
