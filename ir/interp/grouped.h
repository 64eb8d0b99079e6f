/*
 * interp/grouped.h — the reference of gemm_grouped (docs/ir.md), private
 * to precc_ir like util.h.
 */
#ifndef PRECC_INTERP_GROUPED_H
#define PRECC_INTERP_GROUPED_H

#include <stdbool.h>
#include <stdint.h>

#include "precc/interp.h"

/* The experts of one MoE block, each through precc_gemm on its own slice.
 * offs[g] is group g's end (group g is [offs[g-1], offs[g]), offs[-1] = 0);
 * the offsets must be >= 0, non-decreasing and at most the rows (group=m)
 * or tokens (group=k); anything else is refused with PRECC_IEINVAL.
 *
 * group=m (fprop, dgrad; rows sorted by group): d->a is A[m, k] (all the
 * rows), d->b the groups' weights B[ngroups * n, k] stacked, d->c C[m, n].
 * Group g's rows of C are A_g . B[g*n .. g*n + n)^T; rows past the last
 * offset are zero.
 * group=m with B's K stacked (GROUP_M_KSTACK; dgrad: the stacked weights
 * transposed): d->b is B[n, ngroups * k], group g's weights its columns
 * g*k .. g*k + k; otherwise as group=m.
 * group=k (wgrad): d->a is A[m, k] and d->b B[n, k], k the tokens; d->c is
 * C[ngroups * m, n], group g's [m, n] the product over its tokens (zero for
 * a group without one).
 * Scales (scale_inv and blk as precc_gemm's, over the whole operands)
 * follow the slices (a BLK_GROUP block: scale_inv[g] is group g's); a scale block may not straddle two groups: a group's
 * first row (group=m, A) or token (group=k) must start a block. No bias,
 * no out_amax; operands of at least 8 bits (the interpreter widens
 * fp4/fp6 to e4m3 first). */
enum { GROUP_M, GROUP_K, GROUP_M_KSTACK };
/* a scale block that is one group (ir.h's BLOCK_GROUP): sa {gx*} of A's
 * rows (group=m), {*xg} of A's or B's token columns (group=k) */
enum { BLK_GROUP = -1 };
int precc_gemm_grouped(const precc_gemm_desc *d, int group, const int32_t *offs, int ngroups);

/* The tensorwise amax of each group's rows of x[rows, cols]: out[g] is
 * precc_amax_policy of rows [offs[g-1], offs[g]) ({*x*}), 0 for a group
 * without rows; rows past the last offset count in no group. Offsets as
 * above. */
int precc_amax_grouped(const void *x, precc_format xf, long rows, long cols,
                       const int32_t *offs, int ngroups, precc_amax_nan nan, float *out);
/* Each group's rows quantized with its own scale: precc_quantize of rows
 * [offs[g-1], offs[g]) with o->scale + g (or o->divisor + g) as a
 * tensorwise scale; rows past the last offset are code 0. 8-bit formats,
 * no stochastic rounding (its bits follow the whole tensor's index). */
int precc_quantize_grouped(const void *x, precc_format xf, long rows, long cols,
                           const int32_t *offs, int ngroups, const precc_quant_opts *o, void *q);

#endif
