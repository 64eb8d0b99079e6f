/*
 * interp/transpose.c — cache-blocked out-of-place transpose of a
 * row-major [rows, cols] tensor of 1, 2, 4 or 8-byte elements.
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
TRANSPOSE(uint8_t)
TRANSPOSE(uint16_t)
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
	case 1: transpose_uint8_t(x, rows, cols, y); break;
	case 2: transpose_uint16_t(x, rows, cols, y); break;
	case 4: transpose_uint32_t(x, rows, cols, y); break;
	default: transpose_uint64_t(x, rows, cols, y); break;
	}
	return PRECC_IOK;
}
