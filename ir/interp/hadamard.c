/*
 * interp/hadamard.c — the 16-point random Hadamard transform NVFP4 applies
 * to the wgrad operands (Transformer Engine's RHT), along each row in
 * blocks of 16: y = x_block · (diag(s) · H16 / 4).
 */
#include <math.h>

#include "util.h"

/* H16[i][j] = (-1)^popcount(i & j): Sylvester's construction, the matrix
 * of TE's get_hadamard_matrix (pytorch/tensor/nvfp4_tensor.py:63-87). */
static float
h16(int i, int j, unsigned signs)
{
	float h = __builtin_popcount((unsigned)(i & j)) & 1 ? -0.25f : 0.25f;
	return (signs >> i) & 1 ? -h : h;
}

typedef struct Had {
	const void *x;
	precc_format xf, yf;
	long cols;
	unsigned signs;
	void *y;
	size_t yes;
} Had;

static void
had_rows(void *ctx, int part, long r0, long r1)
{
	const Had *k = ctx;
	float h[16][16], in[16];

	(void)part;
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++)
			h[i][j] = h16(i, j, k->signs);
	for (long r = r0; r < r1; r++)
		for (long c0 = 0; c0 < k->cols; c0 += 16) {
			size_t off = (size_t)r * (size_t)k->cols + (size_t)c0;
			interp_load(k->x, k->xf, off, 16, in);
			for (int j = 0; j < 16; j++) {
				float s = 0.0f;       /* fp32, ascending i, no FMA */
				for (int i = 0; i < 16; i++) {
					float p = in[i] * h[i][j];
					s = s + p;
				}
				if (k->yf == PRECC_FP32)
					((float *)k->y)[off + (size_t)j] = s;
				else
					((uint16_t *)k->y)[off + (size_t)j] =
						(uint16_t)precc_encode(k->yf, s, PRECC_RNE, false, 0);
			}
		}
}

int
precc_hadamard16(const void *x, precc_format xf, long rows, long cols, unsigned signs,
                 void *y, precc_format yf, int threads)
{
	Had k = {x, xf, yf, cols, signs & 0xffffu, y, precc_interp_elem_bytes(yf)};
	int e;

	if (!x || !y)
		return interp_fail(PRECC_IEINVAL, "hadamard: NULL buffer");
	if (!interp_input_format(xf) || precc_interp_elem_bytes(xf) < 2)
		return interp_fail(PRECC_IEINVAL, "hadamard: input %s is not f32, f16 or bf16",
		                   precc_format_get(xf)->name);
	if (yf != PRECC_FP32 && yf != PRECC_BF16 && yf != PRECC_FP16)
		return interp_fail(PRECC_IEINVAL, "hadamard: output %s is not f32, f16 or bf16",
		                   precc_format_get(yf)->name);
	if ((e = interp_check_tensor("hadamard", rows, cols, k.yes)) != 0)
		return e;
	if (cols % 16)
		return interp_fail(PRECC_IESHAPE, "hadamard: %ld columns is not a multiple of 16",
		                   cols);
	interp_parallel_rows(rows, cols, threads, had_rows, &k);
	return PRECC_IOK;
}
