/*
 * interp/grouped.c — the reference of gemm_grouped (docs/ir.md, grouped.h):
 * the experts of one MoE block as one op, run here as one precc_gemm per
 * group on that group's slice of the operands and of their scales, so a
 * group computes exactly what the expert's own gemm would (the per-expert
 * path), bit for bit. group=m slices rows (pointer offsets, no copy);
 * group=k slices the token columns, which are strided, so they are copied
 * into a contiguous [rows, tokens of g] buffer first, and so are B's
 * columns of group g where B stacks the groups along K (dgrad's Wᵀ).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grouped.h"
#include "util.h"

/* The offsets: >= 0, non-decreasing, at most total. */
static int
check_offsets_of(const char *op, const int32_t *offs, int ng, long total, const char *what)
{
	for (int g = 0; g < ng; g++) {
		if (offs[g] < 0)
			return interp_fail(PRECC_IEINVAL, "%s: offsets[%d] = %d is negative",
			                   op, g, offs[g]);
		if (g && offs[g] < offs[g - 1])
			return interp_fail(PRECC_IEINVAL, "%s: offsets are not monotone: "
			                   "offsets[%d] = %d < offsets[%d] = %d", op, g, offs[g], g - 1,
			                   offs[g - 1]);
		if (offs[g] > total)
			return interp_fail(PRECC_IEINVAL, "%s: offsets[%d] = %d exceeds %s = "
			                   "%ld", op, g, offs[g], what, total);
	}
	return PRECC_IOK;
}

static int
check_offsets(const int32_t *offs, int ng, long total, const char *what)
{
	return check_offsets_of("gemm_grouped", offs, ng, total, what);
}

static size_t
ebytes(precc_format f)
{
	const precc_format_info *fi = precc_format_get(f);

	return fi ? (size_t)fi->bits / 8 : 0;
}

/* The scale_inv of the window [r0, r1) x [c0, c1) of an operand [rows,
 * cols] with granularity blk, and the window's own granularity: a pointer
 * into s when the window's scales are contiguous, else a copy in *tmp.
 * A window's first row and column must start a block unless one block
 * spans that whole dim. */
static int
sub_scale(const float *s, long rows, long cols, precc_block blk, long r0, long r1, long c0,
          long c1, const char *op, int g, const float **out, precc_block *sub, float **tmp)
{
	long br, bc, nbc, s0, s1, t0, t1;
	int e;

	*tmp = NULL;
	*sub = blk;
	*out = s;
	if (!s)
		return PRECC_IOK;
	if (blk.br == BLK_GROUP || blk.bc == BLK_GROUP) {
		/* one scale per group ({gx*} of A's rows, {*xg} of the token
		 * columns): the group's own, tensorwise over its slice */
		*out = s + g;
		sub->br = sub->bc = 0;
		return PRECC_IOK;
	}
	if ((e = interp_block(op, rows, cols, blk, &br, &bc)) != 0)
		return e;
	if (br == rows)
		sub->br = 0, br = 0;
	if (bc == cols)
		sub->bc = 0, bc = 0;
	if ((br && r0 % br) || (bc && c0 % bc))
		return interp_fail(PRECC_IESHAPE, "gemm_grouped: group %d starts at %s %ld, inside "
		                   "a %ld-wide scale block of %s: a block may not straddle two "
		                   "groups", g, br && r0 % br ? "row" : "token",
		                   br && r0 % br ? r0 : c0, br && r0 % br ? br : bc, op);
	nbc = bc ? (cols + bc - 1) / bc : 1;
	s0 = br ? r0 / br : 0, s1 = br ? (r1 + br - 1) / br : 1;
	t0 = bc ? c0 / bc : 0, t1 = bc ? (c1 + bc - 1) / bc : 1;
	if (t0 == 0 && t1 == nbc) {
		*out = s + s0 * nbc;
		return PRECC_IOK;
	}
	if (!(*tmp = malloc(sizeof **tmp * (size_t)((s1 - s0) * (t1 - t0)))))
		return interp_fail(PRECC_IENOMEM, "gemm_grouped: out of memory");
	for (long r = s0; r < s1; r++)
		memcpy(*tmp + (r - s0) * (t1 - t0), s + r * nbc + t0, sizeof **tmp * (size_t)(t1 - t0));
	*out = *tmp;
	return PRECC_IOK;
}

int
precc_amax_grouped(const void *x, precc_format xf, long rows, long cols, const int32_t *offs,
                   int ng, precc_amax_nan nan, float *out)
{
	size_t ex = ebytes(xf);
	long start = 0;
	int e;

	if (!x || !offs || !out || ng < 1 || ex < 1)
		return interp_fail(PRECC_IEINVAL, "amax per group: NULL operand, no group or an "
		                   "operand under 8 bits");
	if ((e = check_offsets_of("amax", offs, ng, rows, "the rows")) != 0)
		return e;
	for (int g = 0; g < ng; start = offs[g++]) {
		out[g] = 0.0f;      /* a group without rows */
		if (offs[g] > start
		    && (e = precc_amax_policy((const char *)x + (size_t)start * (size_t)cols * ex, xf,
		                              offs[g] - start, cols, (precc_block){0, 0}, nan,
		                              &out[g], NULL)) != 0)
			return e;
	}
	return PRECC_IOK;
}

int
precc_quantize_grouped(const void *x, precc_format xf, long rows, long cols, const int32_t *offs,
                       int ng, const precc_quant_opts *o, void *q)
{
	size_t ex = ebytes(xf), eq = ebytes(o ? o->qf : PRECC_FP32);
	long start = 0, end = ng > 0 ? offs[ng - 1] : 0;
	int e;

	if (!x || !offs || !o || !q || ng < 1 || ex < 1 || eq != 1 || o->round == PRECC_SR
	    || (!o->scale && !o->divisor))
		return interp_fail(PRECC_IEINVAL, "quantize per group: 8-bit results, a scale per "
		                   "group, no stochastic rounding");
	if ((e = check_offsets_of("quantize", offs, ng, rows, "the rows")) != 0)
		return e;
	for (int g = 0; g < ng; start = offs[g++]) {
		precc_quant_opts s = *o;
		if (offs[g] == start)
			continue;
		s.blk = (precc_block){0, 0};
		s.scale = o->scale ? o->scale + g : NULL;
		s.divisor = o->divisor ? o->divisor + g : NULL;
		if ((e = precc_quantize((const char *)x + (size_t)start * (size_t)cols * ex, xf,
		                        offs[g] - start, cols, &s,
		                        (char *)q + (size_t)start * (size_t)cols)) != 0)
			return e;
	}
	/* rows of no group (padding): code 0, as the grouped GEMM's rows
	 * past the last offset are zero */
	memset((char *)q + (size_t)end * (size_t)cols, 0, (size_t)(rows - end) * (size_t)cols);
	return PRECC_IOK;
}

/* Columns [c0, c1) of x[rows, cols] (elements of eb bytes), contiguous. */
static void *
columns(const void *x, size_t eb, long rows, long cols, long c0, long c1)
{
	size_t w = (size_t)(c1 - c0) * eb;
	char *y = malloc(w * (size_t)rows);

	if (y)
		for (long r = 0; r < rows; r++)
			memcpy(y + (size_t)r * w, (const char *)x + ((size_t)r * (size_t)cols
			                                             + (size_t)c0) * eb, w);
	return y;
}

/* kstack: B is [n, ng * k], group g's weights its columns g*k .. */
static int
group_m(const precc_gemm_desc *d, const int32_t *offs, int ng, bool kstack)
{
	size_t ea = ebytes(d->a.fmt), eb = ebytes(d->b.fmt), ec = precc_interp_elem_bytes(d->out_fmt);
	long start = 0, end = ng ? offs[ng - 1] : 0;
	int e = PRECC_IOK;

	for (int g = 0; g < ng && !e; start = offs[g++]) {
		precc_gemm_desc s = *d;
		float *ta, *tb = NULL;
		void *xb = NULL;
		long r1 = offs[g];
		if (r1 == start)
			continue;   /* an expert without tokens costs nothing */
		s.m = r1 - start;
		s.a.data = (const char *)d->a.data + (size_t)start * (size_t)d->k * ea;
		s.b.data = (const char *)d->b.data + (size_t)g * (size_t)d->n * (size_t)d->k * eb;
		s.c = (char *)d->c + (size_t)start * (size_t)d->n * ec;
		if ((e = sub_scale(d->a.scale_inv, d->m, d->k, d->a.blk, start, r1, 0, d->k, "A", g,
		                   &s.a.scale_inv, &s.a.blk, &ta)) != 0)
			break;
		if (kstack) {
			long c0 = (long)g * d->k;
			if (!(xb = columns(d->b.data, eb, d->n, (long)ng * d->k, c0, c0 + d->k)))
				e = interp_fail(PRECC_IENOMEM, "gemm_grouped: out of memory");
			if (!e)
				e = sub_scale(d->b.scale_inv, d->n, (long)ng * d->k, d->b.blk, 0, d->n, c0,
				              c0 + d->k, "B", g, &s.b.scale_inv, &s.b.blk, &tb);
			s.b.data = xb;
		} else
			e = sub_scale(d->b.scale_inv, (long)ng * d->n, d->k, d->b.blk, (long)g * d->n,
			              (long)(g + 1) * d->n, 0, d->k, "B", g, &s.b.scale_inv, &s.b.blk,
			              &tb);
		if (!e)
			e = precc_gemm(&s);
		free(ta);
		free(tb);
		free(xb);
	}
	if (!e && end < d->m)   /* rows of no group (padding): zero */
		memset((char *)d->c + (size_t)end * (size_t)d->n * ec, 0,
		       (size_t)(d->m - end) * (size_t)d->n * ec);
	return e;
}

static int
group_k(const precc_gemm_desc *d, const int32_t *offs, int ng)
{
	size_t ea = ebytes(d->a.fmt), eb = ebytes(d->b.fmt), ec = precc_interp_elem_bytes(d->out_fmt);
	size_t out = (size_t)d->m * (size_t)d->n * ec;   /* one group's [m, n] */
	long start = 0;
	int e = PRECC_IOK;

	for (int g = 0; g < ng && !e; start = offs[g++]) {
		precc_gemm_desc s = *d;
		float *ta = NULL, *tb = NULL;
		void *xa, *xb;
		long c1 = offs[g];
		s.c = (char *)d->c + (size_t)g * out;
		if (c1 == start) {   /* no tokens: dW_g = 0 */
			memset(s.c, 0, out);
			continue;
		}
		s.k = c1 - start;
		xa = columns(d->a.data, ea, d->m, d->k, start, c1);
		xb = columns(d->b.data, eb, d->n, d->k, start, c1);
		if (!xa || !xb)
			e = interp_fail(PRECC_IENOMEM, "gemm_grouped: out of memory");
		if (!e)
			e = sub_scale(d->a.scale_inv, d->m, d->k, d->a.blk, 0, d->m, start, c1, "A", g,
			              &s.a.scale_inv, &s.a.blk, &ta);
		if (!e)
			e = sub_scale(d->b.scale_inv, d->n, d->k, d->b.blk, 0, d->n, start, c1, "B", g,
			              &s.b.scale_inv, &s.b.blk, &tb);
		if (!e) {
			s.a.data = xa, s.b.data = xb;
			e = precc_gemm(&s);
		}
		free(xa), free(xb), free(ta), free(tb);
	}
	return e;
}

int
precc_gemm_grouped(const precc_gemm_desc *d, int group, const int32_t *offs, int ngroups)
{
	bool group_k_ = group == GROUP_K;
	int e;

	if (!d || !offs || !d->a.data || !d->b.data || !d->c || ngroups < 1)
		return interp_fail(PRECC_IEINVAL, "gemm_grouped: NULL operand or no group");
	if (d->bias || d->out_amax)
		return interp_fail(PRECC_IEINVAL, "gemm_grouped: no bias or out_amax (the "
		                   "epilogue's ops follow it)");
	if (ebytes(d->a.fmt) < 1 || ebytes(d->b.fmt) < 1)
		return interp_fail(PRECC_IEINVAL, "gemm_grouped: operands of 8 bits or more "
		                   "(widen fp4/fp6 to e4m3 first)");
	if ((e = check_offsets(offs, ngroups, d->k >= 0 && group_k_ ? d->k : d->m,
	                       group_k_ ? "the tokens" : "M")) != 0)
		return e;
	return group_k_ ? group_k(d, offs, ngroups)
	                : group_m(d, offs, ngroups, group == GROUP_M_KSTACK);
}
