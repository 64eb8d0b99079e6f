/*
 * swcvt.c — software conversions for what our targets have no cvt for
 * (e2m1/e3m2/e2m3 encode, fp8 without satfinite, RZ and stochastic
 * rounding, MX e8m0 scales), written once as straight-line 64-bit integer
 * programs. sw_eval runs a program on the host; sw_emit turns the same
 * instruction list into LLVM IR, one LLVM instruction per op with the same
 * semantics (shift amounts are always < 64 by construction, and sw_eval
 * aborts otherwise). tests/codegen compares sw_eval with precc_encode and
 * precc_mx_scales, which is the CPU-side argument that the GPU computes
 * ir/numerics.c's algorithm.
 */
#include <stdlib.h>
#include <string.h>
#include "cg.h"
#include "precc/interp.h"

static int
put(SwProg *p, SwOp op, int a, int b, int c, uint64_t k)
{
	if (p->n >= SW_MAXINS)
		abort();      /* a program bug, not an input error */
	p->ins[p->n] = (SwIns){(uint8_t)op, (uint8_t)a, (uint8_t)b, (uint8_t)c, k};
	return p->n++;
}

#define K(v) put(p, SW_CONST, 0, 0, 0, (uint64_t)(v))
#define OP2(o, x, y) put(p, o, x, y, 0, 0)
#define SEL(c, x, y) put(p, SW_SELECT, c, x, y, 0)

typedef struct Fmt {
	int mbits, bias, sign_shift;
	uint32_t maxcode, infcode, nancode;
} Fmt;

static int
fmt_of(precc_format f, Fmt *e)
{
	switch (f) {
	case PRECC_E4M3: *e = (Fmt){3, 7, 7, 0x7e, 0, 0x7f}; return 0;
	case PRECC_E5M2: *e = (Fmt){2, 15, 7, 0x7b, 0x7c, 0x7f}; return 0;
	case PRECC_E2M1: *e = (Fmt){1, 1, 3, 0x7, 0, 0x7}; return 0;
	case PRECC_E3M2: *e = (Fmt){2, 3, 5, 0x1f, 0, 0x1f}; return 0;
	case PRECC_E2M3: *e = (Fmt){3, 1, 5, 0x1f, 0, 0x1f}; return 0;
	default: return -1;
	}
}

/* e2m1, round to nearest even (saturating either way: e2m1 has no inf):
 * the code counts the midpoints between its 8 magnitudes that |x| is
 * above, a tie counting when the upper neighbour is the even code. */
static int
e2m1_rne(SwProg *p)
{
	/* midpoints 0.25 0.75 1.25 1.75 2.5 3.5 5 as fp32 bits; odd k: >= */
	static const uint32_t mid[7] = {0x3e800000, 0x3f400000, 0x3fa00000, 0x3fe00000,
	                                0x40200000, 0x40600000, 0x40a00000};
	int x = put(p, SW_ARG, 0, 0, 0, 0);
	put(p, SW_ARG, 0, 0, 0, 1);
	int a = OP2(SW_AND, x, K(0x7fffffff));
	int code = K(0);
	for (int k = 0; k < 7; k++)
		code = OP2(SW_ADD, code, OP2(SW_UGT, a, K(mid[k] - (k & 1))));
	int res = OP2(SW_OR, OP2(SW_SHL, OP2(SW_LSHR, x, K(31)), K(3)), code);
	p->result = SEL(OP2(SW_UGT, a, K(0x7f800000)), K(0x7), res);
	return 0;
}

/* numerics.c's precc_encode for the narrow formats, with biased fp32
 * exponents so that every quantity stays non-negative. */
int
sw_encode(SwProg *p, precc_format f, precc_round round, int sat)
{
	Fmt e;

	memset(p, 0, sizeof *p);
	if (fmt_of(f, &e) || (round != PRECC_RNE && round != PRECC_RZ && round != PRECC_SR))
		return -1;
	if (f == PRECC_E2M1 && round == PRECC_RNE)
		return e2m1_rne(p);      /* same results, half the instructions */
	int x = put(p, SW_ARG, 0, 0, 0, 0), rb = put(p, SW_ARG, 0, 0, 0, 1);
	int a = OP2(SW_AND, x, K(0x7fffffff));
	int neg = OP2(SW_LSHR, x, K(31));
	int isnan = OP2(SW_UGT, a, K(0x7f800000));
	int isinf = OP2(SW_EQ, a, K(0x7f800000));
	int E = OP2(SW_LSHR, a, K(23));
	int mant = OP2(SW_AND, a, K(0x7fffff));
	int norm = OP2(SW_UGT, E, K(0));
	int sig = OP2(SW_OR, mant, OP2(SW_SHL, norm, K(23)));
	int eb = SEL(norm, E, K(1));                       /* x's exponent + 127 */
	int eminb = 127 + 1 - e.bias;                      /* target emin + 127 */
	int etb = OP2(SW_UMAX, eb, K(eminb));
	int s = OP2(SW_SUB, OP2(SW_ADD, K(23 - e.mbits), etb), eb);
	s = OP2(SW_UMIN, s, K(63));
	int mask = OP2(SW_SUB, OP2(SW_SHL, K(1), s), K(1));
	int k = OP2(SW_LSHR, sig, s);
	int rem = OP2(SW_AND, sig, mask);
	int up;
	if (round == PRECC_RNE) {
		int half = OP2(SW_SHL, K(1), OP2(SW_SUB, s, K(1)));  /* s >= 20 */
		int gt = OP2(SW_UGT, rem, half);
		int tie = OP2(SW_AND, OP2(SW_EQ, rem, half), OP2(SW_AND, k, K(1)));
		up = OP2(SW_OR, gt, tie);
	} else if (round == PRECC_SR) {
		int r32 = OP2(SW_AND, rb, K(0xffffffff));
		int up_lo = OP2(SW_LSHR, OP2(SW_ADD, rem, OP2(SW_AND, r32, mask)), s);
		int big = OP2(SW_UGT, s, K(32));
		int sh = SEL(big, OP2(SW_SUB, s, K(32)), K(0));
		int up_hi = OP2(SW_LSHR, OP2(SW_ADD, OP2(SW_LSHR, rem, sh), r32), K(32));
		up = SEL(big, up_hi, up_lo);
	} else {
		up = K(0);
	}
	int c = OP2(SW_ADD, OP2(SW_ADD, OP2(SW_SHL, OP2(SW_SUB, etb, K(eminb)), K(e.mbits)), k), up);
	int over = OP2(SW_OR, OP2(SW_UGT, c, K(e.maxcode)), isinf);
	/* overflow code: satfinite, or RZ on a finite x, or a format without
	 * inf/NaN gives max; else e5m2 inf, e4m3 NaN (sign kept) */
	uint32_t ov_nearest = sat || (!e.infcode && f != PRECC_E4M3) ? e.maxcode
	                    : e.infcode ? e.infcode : e.nancode;
	int ov = K(ov_nearest);
	if (round == PRECC_RZ && !sat)
		ov = SEL(isinf, ov, K(e.maxcode));
	int mag = SEL(over, ov, c);
	int res = OP2(SW_OR, OP2(SW_SHL, neg, K(e.sign_shift)), mag);
	p->result = SEL(isnan, K(e.nancode), res);
	return 0;
}

/* precc_mx_scales: rceil from r = fl(a / fmax): code = E for an exact
 * power of two, else E + 1 (at most 254); fp32-subnormal r gives 1 when
 * r > 2^-127, else 0. floor from a: max(E - emax, 0). inf/NaN: 0xff.
 * rceil_te: the same code from r = fl(a * fl(1/fmax)) (the caller's r),
 * but inf gives 0xfe (TE's float_to_e8m0 saturates). */
int
sw_mx_e8m0(SwProg *p, precc_format elem, int mode)
{
	int rceil = mode == MX_RCEIL || mode == MX_RCEIL_TE;
	int emax = precc_mx_emax(elem);

	memset(p, 0, sizeof *p);
	if (emax < 0)
		return -1;
	int a = OP2(SW_AND, put(p, SW_ARG, 0, 0, 0, 0), K(0x7fffffff));
	int r = OP2(SW_AND, put(p, SW_ARG, 0, 0, 0, 1), K(0x7fffffff));
	int nonfinite = OP2(SW_UGT, a, K(0x7f7fffff));
	int code;
	if (rceil) {
		int E = OP2(SW_LSHR, r, K(23)), mant = OP2(SW_AND, r, K(0x7fffff));
		int sub = OP2(SW_EQ, E, K(0));
		int csub = OP2(SW_UGT, mant, K(0x400000));
		int cnorm = SEL(OP2(SW_EQ, mant, K(0)), E, OP2(SW_UMIN, OP2(SW_ADD, E, K(1)), K(254)));
		code = SEL(sub, csub, cnorm);
	} else {
		int E = OP2(SW_LSHR, a, K(23));
		code = SEL(OP2(SW_UGT, E, K(emax)), OP2(SW_SUB, E, K(emax)), K(0));
	}
	int nfcode = mode == MX_RCEIL_TE ? SEL(OP2(SW_UGT, a, K(0x7f800000)), K(0xff), K(0xfe))
	             : K(0xff);
	p->result = SEL(nonfinite, nfcode, code);
	return 0;
}

uint64_t
sw_eval(const SwProg *p, const uint64_t *args)
{
	uint64_t v[SW_MAXINS];

	for (int i = 0; i < p->n; i++) {
		const SwIns *in = &p->ins[i];
		uint64_t a = v[in->a], b = v[in->b];
		switch ((SwOp)in->op) {
		case SW_ARG: v[i] = args[in->k]; break;
		case SW_CONST: v[i] = in->k; break;
		case SW_ADD: v[i] = a + b; break;
		case SW_SUB: v[i] = a - b; break;
		case SW_AND: v[i] = a & b; break;
		case SW_OR: v[i] = a | b; break;
		case SW_SHL:
		case SW_LSHR:
			if (b >= 64)
				abort();
			v[i] = in->op == SW_SHL ? a << b : a >> b;
			break;
		case SW_ULT: v[i] = a < b; break;
		case SW_UGT: v[i] = a > b; break;
		case SW_EQ: v[i] = a == b; break;
		case SW_UMIN: v[i] = a < b ? a : b; break;
		case SW_UMAX: v[i] = a > b ? a : b; break;
		case SW_SELECT: v[i] = a ? b : v[in->c]; break;
		default: abort();
		}
	}
	return v[p->result];
}

LLVMValueRef
sw_emit(Cg *g, const SwProg *p, LLVMValueRef arg0, LLVMValueRef arg1)
{
	LLVMValueRef v[SW_MAXINS];
	LLVMBuilderRef b = g->b;
	LLVMValueRef args[2] = {
		LLVMBuildZExt(b, arg0, g->i64, ""),
		arg1 ? LLVMBuildZExt(b, arg1, g->i64, "") : LLVMConstInt(g->i64, 0, 0),
	};

	for (int i = 0; i < p->n; i++) {
		const SwIns *in = &p->ins[i];
		LLVMValueRef x = i ? v[in->a] : NULL, y = i ? v[in->b] : NULL;
		LLVMIntPredicate pr = LLVMIntEQ;
		switch ((SwOp)in->op) {
		case SW_ARG: v[i] = args[in->k]; continue;
		case SW_CONST: v[i] = LLVMConstInt(g->i64, in->k, 0); continue;
		case SW_ADD: v[i] = LLVMBuildAdd(b, x, y, ""); continue;
		case SW_SUB: v[i] = LLVMBuildSub(b, x, y, ""); continue;
		case SW_AND: v[i] = LLVMBuildAnd(b, x, y, ""); continue;
		case SW_OR: v[i] = LLVMBuildOr(b, x, y, ""); continue;
		case SW_SHL: v[i] = LLVMBuildShl(b, x, y, ""); continue;
		case SW_LSHR: v[i] = LLVMBuildLShr(b, x, y, ""); continue;
		case SW_SELECT:
			v[i] = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntNE, x, LLVMConstInt(g->i64, 0, 0), ""),
			                       y, v[in->c], "");
			continue;
		case SW_UMIN:
		case SW_UMAX:
			pr = in->op == SW_UMIN ? LLVMIntULT : LLVMIntUGT;
			v[i] = LLVMBuildSelect(b, LLVMBuildICmp(b, pr, x, y, ""), x, y, "");
			continue;
		case SW_ULT: pr = LLVMIntULT; break;
		case SW_UGT: pr = LLVMIntUGT; break;
		case SW_EQ: pr = LLVMIntEQ; break;
		default: abort();
		}
		v[i] = LLVMBuildZExt(b, LLVMBuildICmp(b, pr, x, y, ""), g->i64, "");
	}
	return LLVMBuildTrunc(b, v[p->result], g->i32, "");
}
