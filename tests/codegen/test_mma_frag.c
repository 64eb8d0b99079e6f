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
 *
 * Then k_gemm.c's ldmatrix use: lane l = 8j + i addresses row i of matrix
 * j, A: rows 8 (j & 1) + i, K chunk j >> 1; B: rows 8 (j >> 1) + i, chunk
 * j & 1, registers (b0, b1) of n tile 0 then of n tile 1. Through CuTe's
 * SM75_U32x4_LDSM_N (copy_traits_sm75.hpp:76-89, same commit: lane t's
 * register q holds bytes 4 (t % 4).. of the row lane 8q + t / 4
 * addresses) every byte must come to the lane and register mma_frag.h
 * says. And the swizzled shared layout (mma_frag.h's gemm_smem_off): every
 * ldmatrix phase and every 8-thread phase of the 16-byte copies must hit 8
 * different bank groups, where the unswizzled 64-byte pitch must not.
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

/* lane l's (row, 16-byte chunk) of the 16 x 32-byte A step or the 16 x
 * 32-byte B pair, as k_gemm.c addresses them */
static void
ldsm_row(int which, int l, int *row, int *chunk)
{
	int j = l / 8, i = l % 8;
	*row = which == 0 ? 8 * (j & 1) + i : 8 * (j >> 1) + i;
	*chunk = which == 0 ? j >> 1 : j & 1;
}

static int
check_ldsm(int which, int e)
{
	int bad = 0;
	for (int t = 0; t < 32; t++)
		for (int q = 0; q < 4; q++)
			for (int by = 0; by < 4; by++) {
				/* CuTe: register q, byte by of lane t <- row lane 8q + t/4, byte 4 (t%4) + by */
				int L = 8 * q + t / 4, row, chunk;
				ldsm_row(which, L, &row, &chunk);
				int kbyte = 16 * chunk + 4 * (t % 4) + by, k = kbyte / (4 / e);
				int lane, reg, pos, wreg = q;
				if (which == 0)
					mma_frag_a(e, row, k, &lane, &reg, &pos);
				else {
					mma_frag_b(e, row % 8, k, &lane, &reg, &pos);
					reg += 2 * (row / 8);      /* n tile 1: registers 2, 3 */
				}
				if (lane != t || reg != wreg || pos != (kbyte % 4) / (4 / e)) {
					if (bad++ < 4)
						printf("FAIL ldmatrix %s e=%d: lane %d reg %d byte %d is (%d, %d): "
						       "mma_frag says lane %d reg %d pos %d\n", which ? "B" : "A", e, t,
						       q, by, row, k, lane, reg, pos);
				}
			}
	printf("%s ldmatrix x4 -> mma %s fragments, %d elements per register: 512 bytes\n",
	       bad ? "FAIL" : "ok  ", which ? "B" : "A", e);
	return bad != 0;
}

/* 16-bit transposed operands (MN-major tiles, k_gemm.c's mnmaj): lane
 * 8j + i addresses k-row 8 (j >> 1) + i, MN chunk j & 1 (A) or k-row
 * 8 (j & 1) + i, chunk j >> 1 (B), read with ldmatrix.trans: CuTe's
 * SM75_U16x8_LDSM_T (copy_traits_sm75.hpp:127-140) puts in half h of
 * register q of lane t the element t / 4 of the row lane 8q + 2 (t % 4) + h
 * addresses. */
static int
check_ldsm_t(int which)
{
	int bad = 0;
	for (int t = 0; t < 32; t++)
		for (int q = 0; q < 4; q++)
			for (int h = 0; h < 2; h++) {
				int i = 2 * (t % 4) + h, j = q, lane, reg, pos;
				int k = which == 0 ? 8 * (j >> 1) + i : 8 * (j & 1) + i;
				int mn = (which == 0 ? 8 * (j & 1) : 8 * (j >> 1)) + t / 4;
				if (which == 0)
					mma_frag_a(2, mn, k, &lane, &reg, &pos);
				else {
					mma_frag_b(2, mn % 8, k, &lane, &reg, &pos);
					reg += 2 * (mn / 8);
				}
				if ((lane != t || reg != q || pos != h) && bad++ < 4)
					printf("FAIL ldmatrix.trans %s: lane %d reg %d half %d is (%d, %d): mma_frag "
					       "says lane %d reg %d pos %d\n", which ? "B" : "A", t, q, h, mn, k, lane,
					       reg, pos);
			}
	printf("%s ldmatrix x4.trans of MN-major tiles -> mma %s fragments (16-bit)\n",
	       bad ? "FAIL" : "ok  ", which ? "B" : "A");
	return bad != 0;
}

/* the same bank math for MN-major tiles (128-byte k-rows) */
static int
conflicts_k(int (*sw)(int))
{
	int n = 0;
	for (int k0 = 0; k0 < 32; k0 += 8)
		for (int c = 0; c < 8; c++) {
			unsigned seen = 0;
			for (int i = 0; i < 8; i++)
				seen |= 1u << (sw(GEMM_KROW_BYTES * (k0 + i) + 16 * c) / 16 % 8);
			n += seen != 0xff;
		}
	for (int c0 = 0; c0 < 256; c0 += 8) {
		unsigned seen = 0;
		for (int c = c0; c < c0 + 8; c++)
			seen |= 1u << (sw(GEMM_KROW_BYTES * (c / 8) + 16 * (c % 8)) / 16 % 8);
		n += seen != 0xff;
	}
	return n;
}

static int
plain(int a)
{
	return a;
}

/* conflicted 8-address phases of the ldmatrix reads and the copies' writes
 * with a layout off(row, byte) */
static int
conflicts(int (*off)(int, int))
{
	int n = 0;
	for (int which = 0; which < 2; which++)
		for (int ks = 0; ks < 2; ks++)
			for (int r0 = 0; r0 < 64; r0 += 16)
				for (int m = 0; m < 4; m++) {
					unsigned seen = 0;
					for (int i = 0; i < 8; i++) {
						int row, chunk;
						ldsm_row(which, 8 * m + i, &row, &chunk);
						seen |= 1u << (off(r0 + row, 32 * ks + 16 * chunk) / 16 % 8);
					}
					n += seen != 0xff;
				}
	/* copies: thread c of 256 chunks writes row c / 4, chunk c % 4 */
	for (int c0 = 0; c0 < 256; c0 += 8) {
		unsigned seen = 0;
		for (int c = c0; c < c0 + 8; c++)
			seen |= 1u << (off(c / 4, 16 * (c % 4)) / 16 % 8);
		n += seen != 0xff;
	}
	return n;
}

static int
plain64(int row, int byte)
{
	return row * GEMM_ROW_BYTES + byte;
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
	fails += check_ldsm(0, 4) + check_ldsm(1, 4) + check_ldsm(0, 2) + check_ldsm(1, 2);
	/* the swizzle: a bijection on each 512-byte atom that keeps 16-byte chunks */
	int seen[512] = {0}, sbad = 0;
	for (int a = 0; a < 512; a++) {
		int z = gemm_smem_swizzle(a);
		sbad += z < 0 || z >= 512 || seen[z]++ || (z ^ a) % 16;
	}
	int cs = conflicts(gemm_smem_off), cp = conflicts(plain64);
	printf("%s swizzled tiles: %d conflicted phases of %d (unswizzled 64-byte pitch: %d)\n",
	       cs || sbad || !cp ? "FAIL" : "ok  ", cs, 2 * 2 * 4 * 4 + 32, cp);
	fails += cs != 0 || sbad != 0 || cp == 0;
	fails += check_ldsm_t(0) + check_ldsm_t(1);
	int ks = conflicts_k(gemm_smem_swizzle_k), kp = conflicts_k(plain);
	printf("%s MN-major tiles: %d conflicted phases of 64 (unswizzled: %d)\n",
	       ks || !kp ? "FAIL" : "ok  ", ks, kp);
	fails += ks != 0 || kp == 0;
	printf("%d failures\n", fails);
	return fails != 0;
}
