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

/* The GEMM's shared tiles (k_gemm.c): row r of a K tile is 64 bytes (64
 * fp8 or 32 16-bit elements) at 64r, and its 16-byte chunk c is stored at
 * chunk c ^ ((r >> 1) & 3): byte address bits 4-5 ^= bits 7-8, CuTe's
 * Swizzle<2,4,3> (the K-major SW64 atom, NVIDIA/cutlass 7107b055,
 * include/cute/atom/mma_traits_sm90_gmma.hpp:83, Layout_K_SW64_Atom_Bits).
 * Banks: 32 of 4 bytes, so a 16-byte chunk at byte a covers bank group
 * (a / 16) % 8. Chunk c of row r lands in group 4 (r & 1) + (c ^ ((r >> 1)
 * & 3)): the 8 rows of an ldmatrix matrix (r0 + 0..7, r0 % 8 == 0, one
 * chunk) take (r & 1, (r >> 1) & 3) through all 8 pairs, hence 8
 * different groups: conflict-free. Unswizzled, a 64-byte pitch puts them
 * in 2 groups (a 4-way conflict). The same holds for the copies' 16-byte
 * stores, 8 threads = 2 rows x 4 chunks. */
enum { GEMM_ROW_BYTES = 64 };

static inline int
gemm_smem_swizzle(int a)
{
	return a ^ ((a >> 3) & 0x30);
}

static inline int
gemm_smem_off(int row, int byte)
{
	return gemm_smem_swizzle(row * GEMM_ROW_BYTES + byte);
}

/* MN-major tiles (M or N contiguous, CuTe's term) of 16-bit transposed
 * operands, read with ldmatrix.trans: k-row k is 64 elements of M or N,
 * 128 bytes at 128k, chunk c stored at c ^ (k & 7): bits 4-6 ^= bits 7-9,
 * CuTe's Swizzle<3,4,3> (SW128, mma_traits_sm90_gmma.hpp:78,
 * Layout_MN_SW128_Atom_Bits). An ldmatrix
 * matrix is 8 consecutive k-rows at one chunk: chunks c ^ 0..7, 8 groups;
 * a copy phase is one k-row's 8 chunks. */
enum { GEMM_KROW_BYTES = 128 };

static inline int
gemm_smem_swizzle_k(int a)
{
	return a ^ ((a >> 3) & 0x70);
}

#endif
