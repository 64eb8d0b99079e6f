/*
 * test_mma_frag — codegen/mma_frag.h against CuTe's MMA traits, which
 * NVIDIA wrote independently of us (NVIDIA/cutlass commit 7107b055,
 * include/cute/atom/mma_traits_sm89.hpp:48-66 for SM89_16x8x32_*_TN and
 * include/cute/atom/mma_traits_sm80.hpp:53-54, 87-91 for
 * SM80_16x8x16_*_TN). A CuTe TV layout maps (thread, value) to the
 * column-major index m + M·k of the tile; thread and value coordinates
 * unfold colexicographically over their shapes. Value v of a lane is
 * byte/half v % e of its register v / e. Every element must land on
 * exactly the (lane, register, position) mma_frag.h says, and each map
 * must be a bijection onto the warp's registers.
 */
#include <stdio.h>
#include <string.h>
#include "mma_frag.h"

typedef struct TV {
	const char *name;
	int ts[2], tst[2];          /* thread shape (4,8) and strides */
	int nv, vs[3], vst[3];      /* value shape and strides */
	int rows;                   /* M of the tile (column-major index) */
} TV;

static int
tv_index(const TV *l, int t, int v)
{
	int idx = (t % l->ts[0]) * l->tst[0] + (t / l->ts[0]) * l->tst[1];
	for (int i = 0; i < l->nv; i++) {
		idx += (v % l->vs[i]) * l->vst[i];
		v /= l->vs[i];
	}
	return idx;
}

static int
nvals(const TV *l)
{
	int n = 1;
	for (int i = 0; i < l->nv; i++)
		n *= l->vs[i];
	return n;
}

/* which: 0 = A, 1 = B, 2 = C */
static int
check(const TV *l, int which, int e)
{
	int seen[32][4][4];
	int bad = 0, n = nvals(l);

	memset(seen, 0, sizeof seen);
	for (int t = 0; t < 32; t++)
		for (int v = 0; v < n; v++) {
			int idx = tv_index(l, t, v), r = idx % l->rows, k = idx / l->rows;
			int lane, reg, pos = 0;
			if (which == 0)
				mma_frag_a(e, r, k, &lane, &reg, &pos);
			else if (which == 1)
				mma_frag_b(e, r, k, &lane, &reg, &pos);
			else
				mma_frag_c(r, k, &lane, &reg);
			int wreg = which == 2 ? v : v / e, wpos = which == 2 ? 0 : v % e;
			if (lane != t || reg != wreg || pos != wpos) {
				if (bad++ < 5)
					printf("FAIL %s: (t%d, v%d) is (%d, %d) in CuTe; mma_frag says lane %d "
					       "reg %d pos %d, CuTe lane %d reg %d pos %d\n", l->name, t, v, r, k,
					       lane, reg, pos, t, wreg, wpos);
			}
			if (lane >= 0 && lane < 32 && reg >= 0 && reg < 4 && pos >= 0 && pos < 4
			    && seen[lane][reg][pos]++)
				bad++;
		}
	printf("%s %s: %d elements\n", bad ? "FAIL" : "ok  ", l->name, 32 * n);
	return bad != 0;
}

int
main(void)
{
	/* mma_traits_sm89.hpp:62-66, SM89_16x8x32_F32E4M3E4M3F32_TN (and the
	 * other three e4m3/e5m2 mixes, which inherit it) */
	static const TV a89 = {"sm89 16x8x32 A", {4, 8}, {64, 1}, 3, {4, 2, 2}, {16, 8, 256}, 16};
	static const TV b89 = {"sm89 16x8x32 B", {4, 8}, {32, 1}, 2, {4, 2}, {8, 128}, 8};
	/* mma_traits_sm89.hpp:48-49 and mma_traits_sm80.hpp:53-54, SM80_16x8_Row */
	static const TV c80 = {"sm80 16x8 C", {4, 8}, {32, 1}, 2, {2, 2}, {16, 8}, 16};
	/* mma_traits_sm80.hpp:87-91, SM80_16x8x16_F16F16F16F16_TN (the bf16
	 * and f32-accumulating traits inherit its layouts) */
	static const TV a80 = {"sm80 16x8x16 A", {4, 8}, {32, 1}, 3, {2, 2, 2}, {16, 8, 128}, 16};
	static const TV b80 = {"sm80 16x8x16 B", {4, 8}, {16, 1}, 2, {2, 2}, {8, 64}, 8};
	int fails = check(&a89, 0, 4) + check(&b89, 1, 4) + check(&c80, 2, 0)
	          + check(&a80, 0, 2) + check(&b80, 1, 2);

	/* the check can fail: B with its thread strides swapped must not pass */
	static const TV bogus = {"self-test: B with lanes transposed (must FAIL)", {4, 8}, {1, 32}, 2,
	                         {4, 2}, {8, 128}, 8};
	if (!check(&bogus, 1, 4)) {
		printf("FAIL: a wrong layout went unnoticed\n");
		fails++;
	}
	printf("%d failures\n", fails);
	return fails != 0;
}
