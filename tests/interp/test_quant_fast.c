/*
 * test_quant_fast.c — precc_quantize's RNE fast path (precc_encode_rne_n,
 * scale fused, fp32 read in place) and precc_dequantize's loads
 * (precc_decode_n) against an element-by-element reference built on
 * precc_encode_generic / precc_decode: every RNE format, saturating or
 * not, fp32/bf16/fp16 inputs, no scale / block scales / divisors, blocks
 * of odd and even width, one and several threads. CMakeLists.txt runs it
 * on every ISA copy (PRECC_INTERP_ISA).
 */
#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* Bit patterns spread over every magnitude: random exponent and mantissa,
 * some specials. */
static float
rand_float(void)
{
	uint32_t u;
	float x;

	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	u = (uint32_t)(rng >> 32);
	if ((rng & 63) == 0)
		u = (rng >> 8 & 1) ? 0x7f800000u | (u & 0x80000000u) : 0x7fc00001u;
	else
		u = (u & 0x807fffffu) | (uint32_t)(100 + (rng >> 40) % 60) << 23;
	memcpy(&x, &u, 4);
	return x;
}

static uint32_t
code_at(const void *q, precc_format f, long i)
{
	return precc_interp_code(q, f, (size_t)i);
}

static void
one(precc_format qf, bool sat, precc_format xf, precc_block blk, int mode, int threads)
{
	enum { ROWS = 6, COLS = 1030 };
	long n = ROWS * COLS, nbr, nbc, br, bc;
	float *x = malloc(n * 4), *xin = malloc(n * 4), *y = malloc(n * 4), *s;
	uint8_t *xs = malloc(n * 4), *q = malloc(n * 2 + 8);
	long bad = 0;

	long nb = precc_block_count(ROWS, COLS, blk, &nbr, &nbc);
	br = blk.br ? blk.br : ROWS;
	bc = blk.bc ? blk.bc : COLS;
	s = malloc(nb * 4);
	for (long b = 0; b < nb; b++)
		s[b] = (b % 3 == 0) ? 0.75f : (b % 3 == 1) ? 3.0e-5f : 1.0f / 3.0f;
	for (long i = 0; i < n; i++) {
		x[i] = rand_float();
		/* the input as stored in xf, and its fp32 value */
		uint32_t c = precc_encode_generic(xf, x[i], PRECC_RNE, false, 0);
		precc_interp_set_code(xs, xf, (size_t)i, c);
		xin[i] = precc_decode(xf, c);
	}
	precc_quant_opts o = { .qf = qf, .round = PRECC_RNE, .saturate = sat, .blk = blk,
	                       .scale = mode == 1 ? s : NULL, .divisor = mode == 2 ? s : NULL,
	                       .threads = threads };
	memset(q, 0xa5, n * 2 + 8);
	CHECK_OK(precc_quantize(xs, xf, ROWS, COLS, &o, q));
	for (long i = 0; i < n; i++) {
		long b = (i / COLS / br) * nbc + (i % COLS) / bc;
		float v = mode == 1 ? xin[i] * s[b] : mode == 2 ? xin[i] / s[b] : xin[i];
		uint32_t want = precc_encode_generic(qf, v, PRECC_RNE, sat, 0);
		if (code_at(q, qf, i) != want && bad++ < 3)
			fprintf(stderr, "quantize %s sat %d from %s block {%ldx%ld} mode %d: element %ld "
			        "(%a): 0x%x, want 0x%x\n", precc_format_get(qf)->name, sat,
			        precc_format_get(xf)->name, blk.br, blk.bc, mode, i, v,
			        code_at(q, qf, i), want);
	}
	/* and back: dequantize with the same blocks */
	CHECK_OK(precc_dequantize(q, qf, ROWS, COLS, blk, mode ? s : NULL, y));
	for (long i = 0; i < n; i++) {
		long b = (i / COLS / br) * nbc + (i % COLS) / bc;
		float want = precc_decode(qf, code_at(q, qf, i)) * (mode ? s[b] : 1.0f);
		if (memcmp(&want, &y[i], 4) && !(isnan(want) && isnan(y[i])) && bad++ < 3)
			fprintf(stderr, "dequantize %s: element %ld: %a, want %a\n",
			        precc_format_get(qf)->name, i, y[i], want);
	}
	CHECK(bad == 0);
	free(x); free(xin); free(y); free(s); free(xs); free(q);
}

int
main(void)
{
	static const precc_format qfs[] = {
		PRECC_BF16, PRECC_FP16, PRECC_E4M3, PRECC_E5M2, PRECC_E2M1, PRECC_E3M2, PRECC_E2M3,
	};
	static const precc_format xfs[] = { PRECC_FP32, PRECC_BF16, PRECC_FP16 };
	static const precc_block blks[] = { {0, 0}, {1, 0}, {1, 32}, {1, 16}, {2, 3}, {1, 1}, {3, 128} };

	for (size_t a = 0; a < sizeof qfs / sizeof qfs[0]; a++)
		for (int sat = 0; sat < 2; sat++)
			for (size_t b = 0; b < sizeof xfs / sizeof xfs[0]; b++)
				for (size_t c = 0; c < sizeof blks / sizeof blks[0]; c++)
					for (int mode = 0; mode < 3; mode++)
						one(qfs[a], sat, xfs[b], blks[c], mode, mode == 1 ? 3 : 1);
	if (failures) {
		fprintf(stderr, "quant_fast: %d failure(s)\n", failures);
		return 1;
	}
	printf("quant_fast: ok\n");
	return 0;
}
