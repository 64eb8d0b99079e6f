/*
 * lower.c — lower a resolved Plan to IR: one Func per (layer, GEMM),
 * named FQN.fprop / .dgrad / .wgrad (docs/ir.md, "Lowering").
 *
 * Each GEMM is TN, C[M,N] = A[M,K]·B[N,K]ᵀ, the layout fp8 tensor cores
 * take. Per GEMM the operands in that layout are
 *	fprop  Y  = X·Wᵀ     A = X[M,K]     B = W[N,K]
 *	dgrad  dX = dY·W     A = dY[M,N]    B = Wᵀ[K,N]
 *	wgrad  dW = dYᵀ·X    A = dYᵀ[N,M]   B = Xᵀ[K,M]
 * and a Cast's block is given in that layout (block[1] runs along the
 * GEMM's K), as plan.c resolves it. Sources (params) are in their stored
 * layout, X[M,in], W[out,in], dY[M,out], in the layer's compute dtype
 * (source_format).
 *
 * Scaling state (delayed scaling): a tensor's scale and amax history are
 * state params. Updates commit at the end of the step, so every GEMM of
 * the step reads the same scale; the first GEMM (fprop, dgrad, wgrad
 * order) that casts a tensor with a given delayed setting owns its update.
 */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "recipe.h"
#include "ir.h"

static const char *const gname[NGEMM] = {"fprop", "dgrad", "wgrad"};
static const char *const tname[NROLE] = {"x", "w", "dy"};   /* by role */
static const char *const outname[NGEMM] = {"y", "dx", "dw"};

typedef struct Lo {
	Func *f;
	const LayerPlan *lp;
	Gemm g;
	long in, out;           /* padded features (the GEMM's shape) */
	int groups;             /* an expert group's G (gemm_grouped), else 0 */
	int offs;               /* its %offs param, -1 */
	int upd[4][2]; int nupd;/* state updates, emitted before ret */
} Lo;

/* An operand ready for the GEMM: data in TN layout and its scale_inv(s). */
typedef struct Opnd { int data, sinv, gsinv; } Opnd;

static int
def(Lo *l, Type t, Op op, const int *args, int n, const char *fmt, ...)
{
	char name[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	return ir_def(l->f, name, t, op, args, n);
}

static Ins *
last(Lo *l)
{
	return &l->f->ins[l->f->nins - 1];
}

static Type
vtype(Lo *l, int v)
{
	return l->f->val[v].type;
}

static bool
quantized(precc_format f)
{
	return ir_fmt_quantized(f);
}

static bool
cast_same(const Cast *a, const Cast *b)
{
	return a->format == b->format && a->scaling == b->scaling && a->history == b->history
	    && a->amax_algo == b->amax_algo && a->margin == b->margin
	    && a->pow2_scale == b->pow2_scale && a->amax_eps == b->amax_eps
	    && a->nonfinite == b->nonfinite && !memcmp(a->knobs.v, b->knobs.v, sizeof a->knobs.v);
}

/* The step policy (skip, error) wins; under keep, the nonfinite_scale
 * knob says what the scale becomes (keep, one, ieee). */
static Nonfinite
nonfinite(const Cast *c)
{
	static const Nonfinite knob[3] = {NF_KEEP, NF_ONE, NF_IEEE};

	return c->nonfinite == NONFINITE_SKIP_STEP ? NF_SKIP
	     : c->nonfinite == NONFINITE_ERROR ? NF_ERROR : knob[c->knobs.v[KNOB_NONFINITE_SCALE] % 3];
}

static bool
knob(const Cast *c, Knob k)
{
	return c->knobs.v[k] != 0;
}

/* Whether lower_operand puts knob k (LOWER_AMAX_EPS: amax_eps) of cast c
 * into the IR of an operand of GEMM g, as the switch there does: every
 * amax takes amax_nan; a scale op (all but mx) amax_eps, zero_amax,
 * nonfinite_scale (unless the step policy wins) and pow2_round (with
 * pow2); the default branch scale_form and quantize; mx mx_round; nvfp4
 * nvfp4_scale, and rht on wgrad's operands. precc check --json shows these. */
bool
lower_cast_uses(const Cast *c, Gemm g, int k)
{
	if (!quantized(c->format))
		return false;
	bool mx = c->scaling == SCALING_MX, nvfp4 = c->scaling == SCALING_NVFP4;
	switch (k) {
	case LOWER_AMAX_EPS:
	case KNOB_ZERO_AMAX:
		return !mx;
	case KNOB_AMAX_NAN:
		return true;
	case KNOB_NONFINITE_SCALE:
		return !mx && c->nonfinite == NONFINITE_KEEP_SCALE;
	case KNOB_POW2_ROUND:
		return !mx && c->pow2_scale;
	case KNOB_SCALE_FORM:
	case KNOB_QUANTIZE:
		return !mx && !nvfp4 && c->scaling != SCALING_DELAYED;
	case KNOB_MX_ROUND:
		return mx;
	case KNOB_NVFP4_SCALE:
		return nvfp4;
	case KNOB_RHT:
		return nvfp4 && g == GEMM_WGRAD;
	}
	return false;
}

/* Role r's delayed state in GEMM g: which GEMM's setting it shares (the
 * first with an equal delayed cast), so names and the owner agree. */
static Gemm
state_owner(const LayerPlan *lp, Gemm g, Role r)
{
	const Cast *c = NULL;

	for (int k = 0; k < 2; k++)
		if (lp->gemm[g].role[k] == r)
			c = &lp->gemm[g].operand[k];
	for (int h = 0; h < (int)g; h++)
		for (int k = 0; k < 2; k++) {
			const Cast *o = &lp->gemm[h].operand[k];
			if (lp->gemm[h].role[k] == r && o->scaling == SCALING_DELAYED
			    && quantized(o->format) && cast_same(o, c))
				return (Gemm)h;
		}
	return g;
}

/* The first GEMM with a delayed cast for role r names its state plainly
 * (%x.scale); a GEMM with a different delayed setting gets its own
 * (%x.dgrad.scale). */
static void
state_prefix(const LayerPlan *lp, Gemm owner, Role r, char *buf, size_t n)
{
	for (int h = 0; h < (int)owner; h++)
		for (int k = 0; k < 2; k++)
			if (lp->gemm[h].role[k] == r && lp->gemm[h].operand[k].scaling == SCALING_DELAYED
			    && quantized(lp->gemm[h].operand[k].format)) {
				snprintf(buf, n, "%s.%s", tname[r], gname[owner]);
				return;
			}
	snprintf(buf, n, "%s", tname[r]);
}

typedef struct State { int scale, hist; bool owner; char prefix[64]; } State;

static State
delayed_params(Lo *l, Role r, const Cast *c)
{
	State s;
	Gemm o = state_owner(l->lp, l->g, r);

	state_prefix(l->lp, o, r, s.prefix, sizeof s.prefix);
	s.owner = o == l->g;
	s.scale = def(l, ir_scale_type(PRECC_FP32, 1, 1, 0, 0), OP_param, NULL, 0, "%s.scale",
	              s.prefix);
	last(l)->param = PARAM_STATE;
	s.hist = -1;
	if (!s.owner)       /* reads the scale; the owner advances the history */
		return s;
	s.hist = def(l, ir_vector(PRECC_FP32, c->history > 0 ? c->history : 1), OP_param,
	             NULL, 0, "%s.amax_history", s.prefix);
	last(l)->param = PARAM_STATE;
	return s;
}

/* The dtype the layer's tensors are stored in: that of its first
 * high-precision operand (fp16 for an fp16 recipe; tf32 is stored as f32),
 * bf16 when every operand is quantized. */
static precc_format
source_format(const LayerPlan *lp)
{
	for (int g = 0; g < NGEMM; g++)
		for (int k = 0; k < 2; k++) {
			precc_format f = lp->gemm[g].operand[k].format;
			if (ir_fmt_high(f))
				return f == PRECC_TF32 ? PRECC_FP32 : f;
		}
	return PRECC_BF16;
}

static void
scale_attrs(Ins *i, const Cast *c)
{
	i->fmt = c->format;
	i->margin = c->margin;
	i->pow2 = c->pow2_scale;
	i->eps = c->amax_eps;
	i->nonfinite = nonfinite(c);
	i->zero_keep = knob(c, KNOB_ZERO_AMAX);
	i->pow2_log2 = c->pow2_scale && knob(c, KNOB_POW2_ROUND);
}

static void
quant_attrs(Ins *i, const Cast *c, Role r)
{
	i->round = c->round == PRECC_SR ? PRECC_SR : c->round == PRECC_RZ ? PRECC_RZ : PRECC_RNE;
	i->sat = c->saturate;
	i->stream = (int)r;
}

/* An amax of the cast's operand: NaN as the amax_nan knob says. */
static int
amax_of(Lo *l, Type t, int x, const Cast *c, const char *fmt, const char *pre)
{
	int v = def(l, t, OP_amax, &x, 1, fmt, pre);

	last(l)->nan_ignore = knob(c, KNOB_AMAX_NAN);
	return v;
}

/* The amax of each expert's routed rows of x (amax %x, %offs: {gx*}). */
static int
group_amax_of(Lo *l, int x, const Cast *c, const char *fmt, const char *pre)
{
	int args[2] = {x, l->offs};
	int v = def(l, ir_scale_type(PRECC_FP32, l->groups, 1, BLOCK_GROUP, 0), OP_amax, args, 2,
	            fmt, pre);

	last(l)->nan_ignore = knob(c, KNOB_AMAX_NAN);
	return v;
}

/*
 * Cast source `src` (stored layout) to operand `k` of the GEMM. `tr`: the
 * GEMM takes the source transposed. Which comes first:
 *  - tensorwise (current, delayed) and square blocks (128x128): quantize
 *    in the stored layout, then transpose the quantized data (and the
 *    block scales). Bit-identical to the other order, since the same
 *    elements share each scale; it moves 1-byte codes instead of 2-byte
 *    bf16, and the cast and its transpose come out of one read.
 *  - blocks that are not square (1x128, MX 1x32, NVFP4 1x16, rowwise):
 *    the GEMM needs the blocks along its K, which is the other dimension
 *    of the stored layout, so the copy quantized for the other GEMM cannot
 *    be reused (its scales run the wrong way): transpose the
 *    high-precision source, then quantize it along K (DeepSeek-V3's 1x128
 *    forward / 128x1 backward).
 */
static Opnd
lower_operand(Lo *l, int k, int src, bool tr, State *st)
{
	const GemmPolicy *p = &l->lp->gemm[l->g];
	const Cast *c = &p->operand[k];
	Role r = p->role[k];
	const char *n = tname[r];
	Opnd o = {src, -1, -1};
	Type st_ = vtype(l, src), qt;
	long b0 = c->block[0], b1 = c->block[1];
	bool square = b0 == b1;
	bool after = tr && square;   /* transpose the quantized copy */
	char pre[80];
	int v = src, amax, scale, q, args[3];
	/* the routed rows of a group (x in fprop, dY in dgrad) under current
	 * scaling: one tensorwise scale per expert, the amax of its rows
	 * [offs[g-1], offs[g]) ({gx*}), as TE's GroupedLinear quantizes each
	 * expert's rows with its own quantizer (grouped_linear.py's
	 * tex.split_quantize(inp_view, m_splits, input_quantizers)); rows past
	 * the last offset quantize to 0. wgrad's dY and x too: quantized in
	 * the stored layout with the same per-expert scale, then transposed
	 * (`after`), the codes' token columns of expert g and the scale's
	 * transpose f32[1,G]{*xg} g's */
	bool gact = l->groups && (k == 0 || l->g == GEMM_WGRAD) && c->scaling == SCALING_CURRENT;
	int nq = gact ? 3 : 2;

	if (c->scaling == SCALING_DELAYED || c->scaling == SCALING_CURRENT)
		b0 = b1 = 0, square = true, after = tr;
	/* the stacked weights of a group: one tensorwise scale per expert is
	 * the granularity {N x *} over [G*N, K] (fprop), {* x N} over their
	 * transpose [K, G*N] (dgrad; quantized stored, so {N x *} there too:
	 * the swap below), as TE's GroupedLinear quantizes each expert's
	 * weight with its own quantizer (transformer_engine/pytorch/module/
	 * grouped_linear.py:137-140 at 0069563f) */
	if (l->groups && k == 1 && l->g != GEMM_WGRAD && c->scaling == SCALING_CURRENT) {
		if (l->g == GEMM_DGRAD)
			b1 = l->out;
		else
			b0 = l->out;
	}
	/* (and a rowwise scale of dgrad's Wᵀ [K, G*N] would be {1 x N}:
	 * group_refusal keeps it per expert too) */
	/* a 16-bit operand: the format change first (its own kernel, which
	 * reads and writes rows), then the transpose (the GEMM's operand
	 * layout: passes/fuse.c's prologue) */
	if (!quantized(c->format)) {
		if (c->format != st_.fmt) {
			st_.fmt = c->format;
			v = def(l, st_, OP_cast, &v, 1, "%s.%s", n, ir_fmt_name(c->format));
		}
		if (tr) {
			st_.dim[0] = vtype(l, src).dim[1], st_.dim[1] = vtype(l, src).dim[0];
			v = def(l, st_, OP_transpose, &v, 1, "%s%s%s.t", n, v == src ? "" : ".",
			        v == src ? "" : ir_fmt_name(c->format));
		}
		o.data = v;
		return o;
	}
	if (tr && !after) {
		st_.dim[0] = vtype(l, src).dim[1], st_.dim[1] = vtype(l, src).dim[0];
		v = def(l, st_, OP_transpose, &src, 1, "%s.t", n);
		snprintf(pre, sizeof pre, "%s.t", n);
	} else
		snprintf(pre, sizeof pre, "%s", n);
	if (after) {            /* blocks in the stored layout */
		long t = b0;
		b0 = b1, b1 = t;
	}
	qt = st_;
	qt.fmt = c->format;
	switch (c->scaling) {
	case SCALING_DELAYED:
		/* quantize with the scale of the previous steps; record amax */
		args[0] = v, args[1] = st->scale;
		q = def(l, qt, OP_quantize, args, 2, "%s.q", pre);
		quant_attrs(last(l), c, r);
		o.sinv = def(l, vtype(l, st->scale), OP_recip, &st->scale, 1, "%s.scale_inv", pre);
		if (st->owner) {
			Type ts = ir_scale_type(PRECC_FP32, 1, 1, 0, 0);
			amax = amax_of(l, ts, src, c, "%s.amax", n);
			args[0] = st->hist, args[1] = amax;
			int h = def(l, vtype(l, st->hist), OP_history_push, args, 2,
			            "%s.amax_history.next", st->prefix);
			last(l)->zero_keep = knob(c, KNOB_ZERO_AMAX);
			int ra = def(l, ts, OP_history_reduce, &h, 1, "%s.amax_reduced", st->prefix);
			last(l)->algo = c->amax_algo == AMAX_MOST_RECENT ? HIST_MOST_RECENT : HIST_MAX;
			last(l)->nan_ignore = knob(c, KNOB_AMAX_NAN);
			args[0] = ra, args[1] = st->scale;
			int ns = def(l, ts, OP_scale, args, 2, "%s.scale.next", st->prefix);
			scale_attrs(last(l), c);
			l->upd[l->nupd][0] = st->hist, l->upd[l->nupd++][1] = h;
			l->upd[l->nupd][0] = st->scale, l->upd[l->nupd++][1] = ns;
		}
		break;
	case SCALING_MX:
		amax = amax_of(l, ir_scale_of(PRECC_FP32, &st_, b0, b1), v, c, "%s.amax", pre);
		o.sinv = def(l, ir_scale_of(PRECC_E8M0, &st_, b0, b1), OP_mx_scale, &amax, 1,
		             "%s.scale_inv", pre);
		last(l)->fmt = c->format;
		/* the recipe's mx_round knob (recipe_sem.c: rceil_div, rceil, floor) */
		last(l)->mxmode = c->knobs.v[KNOB_MX_ROUND] == 1 ? MX_RCEIL_TE
		                  : c->knobs.v[KNOB_MX_ROUND] == 2 ? MX_FLOOR : MX_RCEIL;
		scale = def(l, ir_scale_of(PRECC_FP32, &st_, b0, b1), OP_recip, &o.sinv, 1,
		            "%s.scale", pre);
		args[0] = v, args[1] = scale;
		q = def(l, qt, OP_quantize, args, 2, "%s.q", pre);
		quant_attrs(last(l), c, r);
		break;
	case SCALING_NVFP4: {
		Type ts = ir_scale_type(PRECC_FP32, 1, 1, 0, 0);
		/* rht = wgrad: TE's random Hadamard transform of the wgrad
		 * operands along the GEMM's K (their transposed copies), with
		 * TE's fixed signs (pytorch/tensor/nvfp4_tensor.py:49-60); both
		 * operands take it, so it cancels in dW. Its global amax is of
		 * the transformed copy (TE's with_post_rht_amax). */
		bool rht = knob(c, KNOB_RHT) && l->g == GEMM_WGRAD && v != src;
		if (rht) {
			v = def(l, st_, OP_hadamard, &v, 1, "%s.rht", pre);
			last(l)->signs = 0xd7e8;
			snprintf(pre + strlen(pre), sizeof pre - strlen(pre), ".rht");
		}
		/* otherwise the global amax does not depend on the layout: take
		 * it from the source, so both layouts of a tensor share it */
		const char *gn = rht ? pre : n;
		Nvfp4Rule rule = (Nvfp4Rule)(c->knobs.v[KNOB_NVFP4_SCALE] % NNVFP4RULE);
		int ga = amax_of(l, ts, rht ? v : src, c, "%s.global_amax", gn);
		/* torchao scales by the decode scale amax / 2688 itself
		 * (per_tensor_amax_to_scale), not by 1 / (2688 / amax) */
		int gs = def(l, ts, OP_scale, &ga, 1, rule == NV_TORCHAO ? "%s.global_scale_inv"
		             : "%s.global_scale", gn);
		scale_attrs(last(l), c);
		last(l)->has_blockfmt = true;
		last(l)->blockfmt = c->scale_format;
		last(l)->inv = rule == NV_TORCHAO;
		amax = amax_of(l, ir_scale_of(PRECC_FP32, &st_, b0, b1), v, c, "%s.amax", pre);
		args[0] = amax, args[1] = gs;
		o.sinv = def(l, ir_scale_of(c->scale_format, &st_, b0, b1), OP_block_scale, args, 2,
		             "%s.scale_inv", pre);
		last(l)->fmt = c->format;
		last(l)->nvfp4 = rule;
		args[0] = v, args[1] = o.sinv, args[2] = gs;
		q = def(l, qt, OP_quantize, args, 3, "%s.q", pre);
		quant_attrs(last(l), c, r);
		last(l)->nvfp4 = rule;
		o.gsinv = rule == NV_TORCHAO ? gs : def(l, ts, OP_recip, &gs, 1, "%s.global_scale_inv", gn);
		break;
	}
	default:    /* current, rowwise, blockwise: amax -> scale -> quantize */
		args[2] = l->offs;     /* read by a {gx*} quantize only (nq 3) */
		amax = gact ? group_amax_of(l, v, c, "%s.amax", pre)
		     : amax_of(l, ir_scale_of(PRECC_FP32, &st_, b0, b1), v, c, "%s.amax", pre);
		if (knob(c, KNOB_SCALE_FORM)) {
			/* DeepGEMM/DeepSeek: sf = amax / fmax is the scale_inv, the
			 * multiplier its reciprocal (or x / sf with quantize=divide) */
			o.sinv = def(l, vtype(l, amax), OP_scale, &amax, 1, "%s.scale_inv", pre);
			scale_attrs(last(l), c);
			last(l)->inv = true;
			scale = knob(c, KNOB_QUANTIZE) ? o.sinv
			      : def(l, vtype(l, amax), OP_recip, &o.sinv, 1, "%s.scale", pre);
			args[0] = v, args[1] = scale;
			q = def(l, qt, OP_quantize, args, nq, "%s.q", pre);
			quant_attrs(last(l), c, r);
			last(l)->divide = knob(c, KNOB_QUANTIZE);
			break;
		}
		scale = def(l, vtype(l, amax), OP_scale, &amax, 1, "%s.scale", pre);
		scale_attrs(last(l), c);
		if (knob(c, KNOB_QUANTIZE)) {   /* x / scale_inv */
			o.sinv = def(l, vtype(l, scale), OP_recip, &scale, 1, "%s.scale_inv", pre);
			args[0] = v, args[1] = o.sinv;
			q = def(l, qt, OP_quantize, args, nq, "%s.q", pre);
			quant_attrs(last(l), c, r);
			last(l)->divide = true;
			break;
		}
		args[0] = v, args[1] = scale;
		q = def(l, qt, OP_quantize, args, nq, "%s.q", pre);
		quant_attrs(last(l), c, r);
		o.sinv = def(l, vtype(l, scale), OP_recip, &scale, 1, "%s.scale_inv", pre);
		break;
	}
	o.data = q;
	if (after) {
		Type t = vtype(l, q), s = vtype(l, o.sinv);
		long d;
		d = t.dim[0], t.dim[0] = t.dim[1], t.dim[1] = d;
		o.data = def(l, t, OP_transpose, &q, 1, "%s.q.t", n);
		if (!(s.dim[0] == 1 && s.dim[1] == 1 && s.block[0] == 0 && s.block[1] == 0)) {
			d = s.dim[0], s.dim[0] = s.dim[1], s.dim[1] = d;
			d = s.block[0], s.block[0] = s.block[1], s.block[1] = d;
			o.sinv = def(l, s, OP_transpose, &o.sinv, 1, "%s.scale_inv.t", n);
		}
	}
	return o;
}

static void
describe_cast(char *buf, size_t n, const Cast *c)
{
	size_t k = (size_t)snprintf(buf, n, "%s", ir_fmt_name(c->format));

	if (!quantized(c->format) || k >= n)
		return;
	k += (size_t)snprintf(buf + k, n - k, " %s", scaling_name(c->scaling));
	if (k < n && c->scaling == SCALING_DELAYED)
		snprintf(buf + k, n - k, " (history %d, %s)", c->history,
		         c->amax_algo == AMAX_MOST_RECENT ? "most_recent" : "max");
}

static void
block_desc(char *buf, size_t n, const Cast *c)
{
	char a[16] = "*", b[16] = "*";

	describe_cast(buf, n, c);
	if (!quantized(c->format) || c->scaling == SCALING_DELAYED || c->scaling == SCALING_CURRENT
	    || (!c->block[0] && !c->block[1]))
		return;
	if (c->block[0])
		snprintf(a, sizeof a, "%d", c->block[0]);
	if (c->block[1])
		snprintf(b, sizeof b, "%d", c->block[1]);
	snprintf(buf + strlen(buf), n - strlen(buf), " %sx%s", a, b);
}

static void
lower_gemm(Module *m, const LayerPlan *lp, Gemm g, int groups, const char *gfqn)
{
	static const char *const eq[NGEMM] = {
		"Y[M,N] = X[M,K]·W[N,K]ᵀ", "dX[M,K] = dY[M,N]·W[N,K]", "dW[N,K] = dY[M,N]ᵀ·X[M,K]"};
	const GemmPolicy *p = &lp->gemm[g];
	const Linear *li = lp->linear;
	char name[512], da[96], db[96];
	Lo l = {.lp = lp, .g = g, .groups = groups, .offs = -1};
	long G = groups ? groups : 1;
	long K = li->in_features, N = li->out_features;
	int src[2], a[6], na, acc, y;
	State st[2] = {{0}};
	Opnd o[2];
	bool hasbias = g == GEMM_FPROP && (p->bias || li->bias);
	precc_format sf = source_format(lp);
	/* sources of A and B in stored layout, and whether the GEMM transposes */
	static const Role srole[NGEMM][2] = {
		{ROLE_INPUT, ROLE_WEIGHT}, {ROLE_GRAD_OUTPUT, ROLE_WEIGHT},
		{ROLE_GRAD_OUTPUT, ROLE_INPUT}};
	static const bool tr[NGEMM][2] = {{0, 0}, {0, 1}, {1, 1}};

	l.in = lp->pad[0] > K ? lp->pad[0] : K;
	l.out = lp->pad[1] > N ? lp->pad[1] : N;
	snprintf(name, sizeof name, "%s.%s", gfqn ? gfqn : li->fqn, gname[g]);
	l.f = ir_func_new(m, name);
	block_desc(da, sizeof da, &p->operand[0]);
	block_desc(db, sizeof db, &p->operand[1]);
	ir_comment(&l.f->comment, "%s %s: %s, K=%ld N=%ld", gfqn ? gfqn : li->fqn, gname[g], eq[g],
	           K, N);
	if (groups)
		ir_comment(&l.f->comment, "%d experts as one gemm_grouped (%s): %s", groups,
		           g == GEMM_WGRAD ? "group=k, dW stacked [G*N,K]"
		           : g == GEMM_DGRAD ? "group=m, W stacked [G*N,K], B its transpose [K,G*N]"
		           : "group=m, W stacked [G*N,K]",
		           "rows sorted by expert, %offs their end offsets");
	char acc_s[32];
	if (p->accum == ACCUM_PROMOTE || p->accum == ACCUM_FAST)
		snprintf(acc_s, sizeof acc_s, "%s:%d", accum_name(p->accum),
		         p->accum == ACCUM_PROMOTE ? p->promote_every : p->accum_bits);
	else
		snprintf(acc_s, sizeof acc_s, "%s", accum_name(p->accum));
	bool accumulate = g == GEMM_WGRAD && p->out_accumulate;
	ir_comment(&l.f->comment, "A (%s): %s; B (%s): %s; accum %s; out %s%s%s%s",
	           role_name(p->role[0]), da, role_name(p->role[1]), db, acc_s,
	           ir_fmt_name(p->out_format), hasbias ? " +bias" : "", p->out_amax ? " +amax" : "",
	           accumulate ? " +main_grad" : "");
	if (lp->rule)
		ir_comment(&l.f->comment, "rule: %s", lp->rule);
	if (lp->reason[g])
		ir_comment(&l.f->comment, "fallback: %s", lp->reason[g]);

	/* params: data, bias, then delayed-scaling state */
	for (int k = 0; k < 2; k++) {
		Role r = srole[g][k];
		static const ParamKind kind[NROLE] = {PARAM_IN, PARAM_WEIGHT, PARAM_GRAD};
		Type t = r == ROLE_INPUT ? ir_tensor(sf, DIM_M, K)
		       : r == ROLE_WEIGHT ? ir_tensor(sf, G * N, K)
		       : ir_tensor(sf, DIM_M, N);
		src[k] = def(&l, t, OP_param, NULL, 0, "%s", tname[r]);
		last(&l)->param = kind[r];
	}
	int offs = -1;
	if (groups) {
		offs = def(&l, ir_index_vector(groups), OP_param, NULL, 0, "offs");
		last(&l)->param = PARAM_IN;
		l.offs = offs;
	}
	int b = -1;
	if (hasbias) {
		b = def(&l, ir_vector(sf, N), OP_param, NULL, 0, "bias");
		last(&l)->param = PARAM_BIAS;
	}
	int mg = -1;
	if (accumulate) {
		/* dW = fl(main_grad + dW.acc): wgrad into the fp32 main_grad */
		mg = def(&l, ir_tensor(PRECC_FP32, G * N, K), OP_param, NULL, 0, "main_grad");
		last(&l)->param = PARAM_MAIN_GRAD;
	}
	for (int k = 0; k < 2; k++)
		if (p->operand[k].scaling == SCALING_DELAYED && quantized(p->operand[k].format))
			st[k] = delayed_params(&l, p->role[k], &p->operand[k]);

	/* padding: zero-fill to the aligned GEMM shape */
	if (l.in != K || l.out != N)
		ir_comment(&l.f->comment, "padded to in_features %ld, out_features %ld", l.in, l.out);
	for (int k = 0; k < 2; k++) {
		Type t = vtype(&l, src[k]);
		Role r = srole[g][k];
		long want1 = r == ROLE_GRAD_OUTPUT ? l.out : l.in;
		long want0 = r == ROLE_WEIGHT ? G * l.out : t.dim[0];
		if (t.dim[0] != want0 || t.dim[1] != want1) {
			t.dim[0] = want0, t.dim[1] = want1;
			src[k] = def(&l, t, OP_pad, &src[k], 1, "%s.pad", tname[r]);
		}
	}
	if (b >= 0 && l.out != N)
		b = def(&l, ir_vector(sf, l.out), OP_pad, &b, 1, "bias.pad");

	for (int k = 0; k < 2; k++)
		o[k] = lower_operand(&l, k, src[k], tr[g][k], &st[k]);
	/* a GEMM takes both operands quantized or neither: recipe.c ensures
	 * it; should one slip through, the quantized side is dequantized
	 * (fake quantization, as torchao's emulate does). */
	bool q0 = quantized(vtype(&l, o[0].data).fmt), q1 = quantized(vtype(&l, o[1].data).fmt);
	for (int k = 0; k < 2 && q0 != q1; k++)
		if (quantized(vtype(&l, o[k].data).fmt)) {
			Type t = vtype(&l, o[k].data);
			int args[3] = {o[k].data, o[k].sinv, o[k].gsinv};
			t.fmt = PRECC_BF16;
			o[k].data = def(&l, t, OP_dequantize, args, o[k].gsinv >= 0 ? 3 : 2, "%s.dq",
			                tname[p->role[k]]);
			o[k].sinv = o[k].gsinv = -1;
		}

	na = 0;
	a[na++] = o[0].data, a[na++] = o[1].data;
	if (groups)
		a[na++] = offs;
	if (o[0].sinv >= 0 && o[1].sinv >= 0)
		a[na++] = o[0].sinv, a[na++] = o[1].sinv;
	if (o[0].gsinv >= 0 && o[1].gsinv >= 0)
		a[na++] = o[0].gsinv, a[na++] = o[1].gsinv;
	long r0 = vtype(&l, o[0].data).dim[0], r1 = vtype(&l, o[1].data).dim[0];
	if (groups && g == GEMM_WGRAD)
		r0 *= G;
	else if (groups && g == GEMM_FPROP)
		r1 /= G;    /* dgrad: B[K, G*N] stacks the experts along its K */
	acc = def(&l, ir_tensor(PRECC_FP32, r0, r1), groups ? OP_gemm_grouped : OP_gemm, a, na,
	          "%s.acc", outname[g]);
	last(&l)->group_k = groups && g == GEMM_WGRAD;
	last(&l)->accum = p->accum == ACCUM_PROMOTE ? ACC_PROMOTE : p->accum == ACCUM_FAST ? ACC_FAST
	                : ACC_FP32;
	last(&l)->accum_n = p->accum == ACCUM_PROMOTE ? p->promote_every
	                  : p->accum == ACCUM_FAST ? p->accum_bits : 0;
	y = acc;
	if (b >= 0) {
		a[0] = y, a[1] = b;
		y = def(&l, vtype(&l, acc), OP_bias, a, 2, "%s.bias", outname[g]);
	}

	/* epilogue: output amax (of the fp32 result, before the output cast),
	 * output cast, unpadding */
	int rets[3], nret = 0, amax = -1, sinv = -1;
	Type ot = vtype(&l, y);
	long w0 = g == GEMM_WGRAD ? G * N : DIM_M, w1 = g == GEMM_FPROP ? N : K;
	bool padded = ot.dim[0] != w0 || ot.dim[1] != w1;
	bool blk_amax = p->out_amax && (p->out_amax_block[0] || p->out_amax_block[1]);
	if (p->out_amax)
		/* tensorwise, or per block of the (padded) result: amax = {1, 128} */
		amax = def(&l, blk_amax ? ir_scale_of(PRECC_FP32, &ot, p->out_amax_block[0],
		                                      p->out_amax_block[1])
		                        : ir_scale_type(PRECC_FP32, 1, 1, 0, 0),
		           OP_amax, &y, 1, "%s.amax", outname[g]);
	if (quantized(p->out_format)) {
		/* an fp8 output: current tensorwise scaling */
		Type ts = ir_scale_type(PRECC_FP32, 1, 1, 0, 0);
		int am = amax >= 0 && !blk_amax ? amax
		       : def(&l, ts, OP_amax, &y, 1, "%s.amax%s", outname[g], blk_amax ? ".tensor" : "");
		int s = def(&l, ts, OP_scale, &am, 1, "%s.scale", outname[g]);
		last(&l)->fmt = p->out_format;
		ot.fmt = p->out_format;
		a[0] = y, a[1] = s;
		y = def(&l, ot, OP_quantize, a, 2, "%s.q", outname[g]);
		last(&l)->sat = true;
		sinv = def(&l, ts, OP_recip, &s, 1, "%s.scale_inv", outname[g]);
	} else if (p->out_format != PRECC_FP32) {
		ot.fmt = p->out_format;
		y = def(&l, ot, OP_cast, &y, 1, "%s%s", outname[g], padded ? ".padded" : "");
	}
	if (padded) {
		ot.dim[0] = w0, ot.dim[1] = w1;
		y = def(&l, ot, OP_slice, &y, 1, "%s%s", outname[g], mg >= 0 ? ".new" : "");
	}
	if (mg >= 0) {
		a[0] = y, a[1] = mg;
		y = def(&l, ot, OP_accumulate, a, 2, "%s", outname[g]);
	}
	rets[nret++] = y;
	if (sinv >= 0)
		rets[nret++] = sinv;
	if (amax >= 0)
		rets[nret++] = amax;
	for (int k = 0; k < l.nupd; k++)
		ir_emit(l.f, OP_update, -1, l.upd[k], 2);
	ir_emit(l.f, OP_ret, -1, rets, nret);
}

static bool
layer_matches(const char *fqn, const char *pat)
{
	if (!pat || !*pat)
		return true;
	if (strpbrk(pat, "*?["))
		return fnmatch(pat, fqn, 0) == 0;
	return strstr(fqn, pat) != NULL;
}

/* Big builds (a DeepSeek-V3 has ~45,000 linears) say where they are, on
 * a tty or with PRECC_PROGRESS=1; small ones print nothing. */
bool
lower_progress_wanted(long work)
{
	const char *e = getenv("PRECC_PROGRESS");

	if (e && *e)
		return strcmp(e, "0") != 0;
	return work >= LOWER_PROGRESS_MIN && isatty(2);
}

Module *
lower_plan(const Plan *plan, const char *layer_pattern)
{
	Module *m = ir_module_new();
	bool show = lower_progress_wanted(plan->nlayers);
	int step = plan->nlayers / 20 + 1;

	for (int i = 0; i < plan->nlayers; i++) {
		const LayerPlan *lp = &plan->layers[i];
		if (show && (i % step == 0 || i == plan->nlayers - 1)) {
			fprintf(stderr, "\rprecc: lowering layer %d/%d", i + 1, plan->nlayers);
			fflush(stderr);
		}
		if (!layer_matches(lp->linear->fqn, layer_pattern))
			continue;
		for (int g = 0; g < NGEMM; g++)
			lower_gemm(m, lp, (Gemm)g, 0, NULL);
	}
	if (show)
		fprintf(stderr, "\rprecc: lowered %d layers to %d funcs\n", plan->nlayers, m->nfn);
	return m;
}

/* Can GEMM g of an expert group run as one gemm_grouped that computes,
 * expert by expert, what each expert's own GEMM does? fprop and dgrad
 * (m-grouped; dgrad's B the stacked weights transposed, [K, G*N], expert
 * e's Wᵀ its columns e*N..) and wgrad (k-grouped). Scales must be
 * expressible per expert over the stacked or token-sorted operands: rows
 * of A (and 1xB, MX blocks) follow the tokens; a rowwise scale of
 * dgrad's Wᵀ becomes {1 x N}; a weight block may not straddle two experts;
 * a tensorwise weight scale becomes {N x *} ({* x N} transposed); a
 * tensorwise activation scale of fprop's x or dgrad's dY becomes {gx*},
 * each expert's own amax over its rows of %offs (amax %x, %offs), and of
 * wgrad's dYᵀ and xᵀ its transpose {*xg} (the same per-expert scale). */
static const char *
group_refusal(const LayerPlan *lp, Gemm g)
{
	const GemmPolicy *p = &lp->gemm[g];

	if (lp->pad[0] || lp->pad[1])
		return "padded";
	if ((g == GEMM_FPROP && (p->bias || lp->linear->bias)) || p->out_amax
	    || quantized(p->out_format))
		return "an epilogue per expert (bias, output amax or fp8 output)";
	for (int k = 0; k < 2; k++) {
		const Cast *c = &p->operand[k];
		if (!quantized(c->format))
			continue;
		switch (c->scaling) {
		case SCALING_BLOCK: case SCALING_MX:
			if (g == GEMM_FPROP && k == 1 && c->block[0] > 1 && lp->linear->out_features
			                                                    % c->block[0])
				return "a weight block straddles two experts";
			if (g == GEMM_DGRAD && k == 1 && c->block[1] > 1 && lp->linear->out_features
			                                                    % c->block[1])
				return "a weight block straddles two experts";
			break;
		case SCALING_ROWWISE:
			if (g == GEMM_WGRAD)
				return "rowwise wgrad scales span every expert's tokens";
			/* dgrad's Wᵀ [K, G*N] would take {1 x N} row scales, one per
			 * row per expert: codegen fuses that amax with its quantize
			 * at small shapes only (Mixtral-8x7B's 4096 x 14336 failed:
			 * "amax-only kernels are tensorwise, columnwise or rows and
			 * columns"), so per expert until it does at every shape */
			if (g == GEMM_DGRAD && k == 1)
				return "a rowwise weight scale per expert ({1 x N} over the stacked "
				       "weights' transpose: not generated at every shape yet)";
			break;
		case SCALING_CURRENT:
			/* the weight's: {N x *} over the stacked weights, one amax
			 * and scale per expert's N rows (codegen's amax_tensor and
			 * quant_tensor of that granularity, k_flat.c); x's or dY's:
			 * {gx*}, one per expert's routed rows (wgrad's token
			 * columns: its transpose {*xg}) */
			break;
		default:
			return "delayed or NVFP4 scaling per expert";
		}
	}
	return NULL;
}

static bool
same_policy(const GemmPolicy *a, const GemmPolicy *b)
{
	return !memcmp(a, b, sizeof *a);
}

Module *
lower_grouped(const Plan *plan, const char *layer_pattern)
{
	Module *m = ir_module_new();

	for (int i = 0; i < plan->nlayers; i++) {
		const LayerPlan *lp = &plan->layers[i];
		const Linear *li = lp->linear;
		char key[256];
		int n = 1;
		if (li->expert != 0 || !layer_matches(li->fqn, layer_pattern))
			continue;   /* a group starts at its expert 0 */
		model_fused_param(li, key, sizeof key);
		for (int j = i + 1; j < plan->nlayers; j++) {
			char k2[256];
			const Linear *lj = plan->layers[j].linear;
			if (lj->expert != n || lj->block != li->block)
				continue;
			model_fused_param(lj, k2, sizeof k2);
			if (!strcmp(k2, key) && lj->in_features == li->in_features
			    && lj->out_features == li->out_features)
				n++;
		}
		if (n < 2)
			continue;
		for (int g = 0; g < NGEMM; g++) {
			bool same = !group_refusal(lp, (Gemm)g);
			for (int j = i + 1, e = 1; same && j < plan->nlayers && e < n; j++) {
				char k2[256];
				const LayerPlan *lq = &plan->layers[j];
				model_fused_param(lq->linear, k2, sizeof k2);
				if (lq->linear->expert == e && lq->linear->block == li->block
				    && !strcmp(k2, key)) {
					same = same_policy(&lq->gemm[g], &lp->gemm[g])
					    && lq->linear->bias == li->bias;
					e++;
				}
			}
			if (same)
				lower_gemm(m, lp, (Gemm)g, n, key);
		}
	}
	return m;
}
