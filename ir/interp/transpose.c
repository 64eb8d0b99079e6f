/*
 * interp/transpose.c — cache-blocked out-of-place transpose of a
 * row-major [rows, cols] tensor of 1, 2, 4 or 8-byte elements (1 and 2
 * bytes by 8x8 and 4x4 squares in 64-bit registers).
 */
#include <string.h>

#include "util.h"

enum { TB = 32 };

#define TRANSPOSE(T)                                                         \
static void                                                                  \
transpose_##T(const T *x, long rows, long cols, T *y)                        \
{                                                                            \
	long r0, c0, r, c;                                                       \
	for (r0 = 0; r0 < rows; r0 += TB) {                                      \
		long r1 = r0 + TB < rows ? r0 + TB : rows;                           \
		for (c0 = 0; c0 < cols; c0 += TB) {                                  \
			long c1 = c0 + TB < cols ? c0 + TB : cols;                       \
			for (c = c0; c < c1; c++)                                        \
				for (r = r0; r < r1; r++)                                    \
					y[(size_t)c * (size_t)rows + (size_t)r] =                \
						x[(size_t)r * (size_t)cols + (size_t)c];             \
		}                                                                    \
	}                                                                        \
}
/*
 * Bytes and halfwords: a word-sized square at a time, transposed in
 * registers by swapping its off-diagonal halves, then quarters (then
 * eighths), with masks and shifts; 8x8 bytes or 4x4 halfwords a step.
 * Edges that leave no full square take the plain loop.
 */
#define SWAP(a, b, sh, m) do { \
	uint64_t t_ = (((a) >> (sh)) ^ (b)) & (m); \
	(a) ^= t_ << (sh); \
	(b) ^= t_; \
} while (0)

static void
square8(const uint8_t *x, size_t ldx, uint8_t *y, size_t ldy)
{
	uint64_t w[8];
	int i;

	for (i = 0; i < 8; i++)
		memcpy(&w[i], x + (size_t)i * ldx, 8);
	for (i = 0; i < 4; i++)
		SWAP(w[i], w[i + 4], 32, 0x00000000ffffffffull);
	for (i = 0; i < 8; i += (i % 4 == 1) ? 3 : 1)
		SWAP(w[i], w[i + 2], 16, 0x0000ffff0000ffffull);
	for (i = 0; i < 8; i += 2)
		SWAP(w[i], w[i + 1], 8, 0x00ff00ff00ff00ffull);
	for (i = 0; i < 8; i++)
		memcpy(y + (size_t)i * ldy, &w[i], 8);
}

static void
square4x16(const uint16_t *x, size_t ldx, uint16_t *y, size_t ldy)
{
	uint64_t w[4];
	int i;

	for (i = 0; i < 4; i++)
		memcpy(&w[i], x + (size_t)i * ldx, 8);
	for (i = 0; i < 2; i++)
		SWAP(w[i], w[i + 2], 32, 0x00000000ffffffffull);
	for (i = 0; i < 4; i += 2)
		SWAP(w[i], w[i + 1], 16, 0x0000ffff0000ffffull);
	for (i = 0; i < 4; i++)
		memcpy(y + (size_t)i * ldy, &w[i], 8);
}

/* The full squares of rows x cols by S x S, tile by tile: SQ_TR rows
 * (64 bytes of each output row, a cache line) by SQ_TC columns; the
 * remaining right columns and bottom rows by the plain loop. */
enum { SQ_TR = 64, SQ_TC = 32 };
#define TRANSPOSE_SQ(T, S, SQUARE)                                           \
static void                                                                  \
transpose_sq_##T(const T *x, long rows, long cols, T *y)                     \
{                                                                            \
	long rs = rows / S * S, cs = cols / S * S, r0, c0, r, c;                 \
	for (r0 = 0; r0 < rs; r0 += SQ_TR) {                                     \
		long r1 = r0 + SQ_TR < rs ? r0 + SQ_TR : rs;                         \
		for (c0 = 0; c0 < cs; c0 += SQ_TC) {                                 \
			long c1 = c0 + SQ_TC < cs ? c0 + SQ_TC : cs;                     \
			for (c = c0; c < c1; c += S)                                     \
				for (r = r0; r < r1; r += S)                                 \
					SQUARE(x + (size_t)r * (size_t)cols + (size_t)c,         \
					       (size_t)cols,                                     \
					       y + (size_t)c * (size_t)rows + (size_t)r,         \
					       (size_t)rows);                                    \
		}                                                                    \
	}                                                                        \
	for (r = 0; r < rows; r++)                                               \
		for (c = r < rs ? cs : 0; c < cols; c++)                             \
			y[(size_t)c * (size_t)rows + (size_t)r] =                        \
				x[(size_t)r * (size_t)cols + (size_t)c];                     \
}
TRANSPOSE_SQ(uint8_t, 8, square8)
TRANSPOSE_SQ(uint16_t, 4, square4x16)
TRANSPOSE(uint32_t)
TRANSPOSE(uint64_t)

int
precc_transpose(const void *x, size_t elem_bytes, long rows, long cols,
                void *y)
{
	int e;

	if (!x || !y)
		return interp_fail(PRECC_IEINVAL, "transpose: NULL buffer");
	if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4
	    && elem_bytes != 8)
		return interp_fail(PRECC_IEINVAL, "transpose: element size %zu "
		                   "(want 1, 2, 4 or 8)", elem_bytes);
	if ((e = interp_check_tensor("transpose", rows, cols, elem_bytes)) != 0)
		return e;
	switch (elem_bytes) {
	case 1: transpose_sq_uint8_t(x, rows, cols, y); break;
	case 2: transpose_sq_uint16_t(x, rows, cols, y); break;
	case 4: transpose_uint32_t(x, rows, cols, y); break;
	default: transpose_uint64_t(x, rows, cols, y); break;
	}
	return PRECC_IOK;
}
