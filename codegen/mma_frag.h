/*
 * mma_frag.h — where each element of an mma.sync.m16n8k{32,16} tile lives
 * in the warp: lane, 32-bit register and position inside it. e is the
 * elements per register: 4 for e4m3/e5m2 (m16n8k32), 2 for bf16/f16
 * (m16n8k16). The PTX ISA's "Matrix fragments for mma.m16n8k32/k16" say
 * the same as CuTe's traits (SM89_16x8x32_*_TN, SM80_16x8x16_*_TN), which
 * tests/codegen/test_mma_frag.c evaluates independently. The host
 * emulation gathers operands with these maps; k_gemm.c addresses shared
 * memory with the equivalent byte formula (4 bytes per register).
 */
#ifndef PRECC_MMA_FRAG_H
#define PRECC_MMA_FRAG_H

/* A is 16 x 8e (row, k): registers 0..3 */
static inline void
mma_frag_a(int e, int row, int k, int *lane, int *reg, int *pos)
{
	int kh = 4 * e;      /* k per half of the tile */

	*lane = 4 * (row & 7) + (k % kh) / e;
	*reg = (row >> 3) + 2 * (k / kh);
	*pos = k % e;
}

/* B is 8 x 8e (n, k), "col" in PTX terms: registers 0..1 */
static inline void
mma_frag_b(int e, int n, int k, int *lane, int *reg, int *pos)
{
	int kh = 4 * e;

	*lane = 4 * n + (k % kh) / e;
	*reg = k / kh;
	*pos = k % e;
}

/* C and D are 16 x 8 (row, col) f32: registers 0..3 */
static inline void
mma_frag_c(int row, int col, int *lane, int *reg)
{
	*lane = 4 * (row & 7) + col / 2;
	*reg = 2 * (row >> 3) + (col & 1);
}

#endif
