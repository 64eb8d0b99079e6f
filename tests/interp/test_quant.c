/*
 * test_quant.c — quantize/dequantize: hand-computed RNE/RZ cases, block
 * scales, float64 round-trip bounds at every granularity (tensor, row,
 * 1x128, 128x128, MX, NVFP4), SR unbiasedness and reproducibility, the SR
 * bit layout, transpose, and errors for bad arguments.
 */
#include "check.h"

static float
dec(precc_format f, uint32_t c)
{
	return precc_decode(f, c);
}

static void
test_hand(void)
{
	float x[6] = { 1.0625f, 1.12f, -1.19f, 500.0f, 0.0f, -1.0f / 1024 };
	uint8_t q[8];
	precc_quant_opts o = { .qf = PRECC_E4M3, .round = PRECC_RNE,
	                       .saturate = true };

	CHECK_OK(precc_quantize(x, PRECC_FP32, 1, 6, &o, q));
	/* tie -> even 1.0; 1.125; -1.25; satfinite 448; 0; -2^-10 -> -0 (tie
	 * below the smallest subnormal 2^-9 rounds to even 0) */
	static const uint8_t rne[6] = { 0x38, 0x39, 0xba, 0x7e, 0x00, 0x80 };
	for (int i = 0; i < 6; i++) {
		if (q[i] != rne[i])
			fprintf(stderr, "rne %d: %02x want %02x\n", i, q[i], rne[i]);
		CHECK(q[i] == rne[i]);
	}
	o.round = PRECC_RZ;
	CHECK_OK(precc_quantize(x, PRECC_FP32, 1, 6, &o, q));
	static const uint8_t rz[6] = { 0x38, 0x38, 0xb9, 0x7e, 0x00, 0x80 };
	for (int i = 0; i < 6; i++)
		CHECK(q[i] == rz[i]);

	/* per-block scales {1, 2} over [2, 4] */
	float y[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	float s[4] = { 2, 0.5f, 1, 0.25f }, si[4] = { 0.5f, 2, 1, 4 }, back[8];
	o.round = PRECC_RNE;
	o.blk = (precc_block){ 1, 2 };
	o.scale = s;
	CHECK_OK(precc_quantize(y, PRECC_FP32, 2, 4, &o, q));
	static const float want[8] = { 2, 4, 1.5f, 2, 5, 6, 1.75f, 2 };
	for (int i = 0; i < 8; i++)
		CHECK(dec(PRECC_E4M3, q[i]) == want[i]);
	CHECK_OK(precc_dequantize(q, PRECC_E4M3, 2, 4, (precc_block){ 1, 2 }, si,
	                          back));
	for (int i = 0; i < 8; i++)
		CHECK(back[i] == y[i]);

	/* 16-bit outputs: bf16 tie 1 + 2^-8 -> 1.0; fp16 overflow -> inf */
	uint16_t h[2];
	float z[2] = { 1.00390625f, 70000.0f };
	o = (precc_quant_opts){ .qf = PRECC_BF16, .round = PRECC_RNE };
	CHECK_OK(precc_quantize(z, PRECC_FP32, 1, 2, &o, h));
	CHECK(h[0] == 0x3f80);
	o.qf = PRECC_FP16;
	CHECK_OK(precc_quantize(z, PRECC_FP32, 1, 2, &o, h));
	CHECK(h[1] == 0x7c00);
	/* bf16 input -> e5m2 */
	uint16_t bx[2] = { 0x4040, 0xc0a0 };   /* 3.0, -5.0 */
	o = (precc_quant_opts){ .qf = PRECC_E5M2, .round = PRECC_RNE,
	                        .saturate = true };
	CHECK_OK(precc_quantize(bx, PRECC_BF16, 1, 2, &o, q));
	CHECK(dec(PRECC_E5M2, q[0]) == 3.0f && dec(PRECC_E5M2, q[1]) == -5.0f);
}

/* Round trip x -> q -> x' against float64 at granularity blk with scales
 * from amax: |x' - x| <= rel*|x| + sub*scale_inv + fp32 slack. */
static void
roundtrip(precc_format f, precc_round r, precc_block blk, long rows,
          long cols)
{
	const precc_format_info *fi = precc_format_get(f);
	long n = rows * cols, nb = precc_block_count(rows, cols, blk, NULL, NULL);
	long nbr, nbc, br, bc;
	float *x = malloc(n * 4), *y = malloc(n * 4), *am = malloc(nb * 4);
	float *s = malloc(nb * 4), *si = malloc(nb * 4);
	double *want = malloc(n * 8), *bound = malloc(n * 8);
	uint8_t *q = malloc(n);
	precc_scale_params p = { .fmax = fi->max, .eps = 1e-12f };
	char what[96];

	precc_block_count(rows, cols, blk, &nbr, &nbc);
	br = blk.br ? blk.br : rows;
	bc = blk.bc ? blk.bc : cols;
	for (long i = 0; i < n; i++)
		x[i] = nrand() * (i % 97 == 0 ? 30.0f : 1.0f);
	CHECK_OK(precc_amax(x, PRECC_FP32, rows, cols, blk, am, NULL));
	CHECK_OK(precc_scales(am, nb, &p, PRECC_NF_ERROR, NULL, s, si, NULL));
	precc_quant_opts o = { .qf = f, .round = r, .saturate = true,
	                       .blk = blk, .scale = s, .seed = 7, .stream = 3 };
	CHECK_OK(precc_quantize(x, PRECC_FP32, rows, cols, &o, q));
	CHECK_OK(precc_dequantize(q, f, rows, cols, blk, si, y));
	double rel = ldexp(1.0, -fi->mbits - (r == PRECC_RNE ? 1 : 0));
	for (long i = 0; i < n; i++) {
		long b = (i / cols / br) * nbc + (i % cols) / bc;
		want[i] = x[i];
		bound[i] = rel * fabs((double)x[i]) * (1 + 0x1p-20)
		           + fi->min_subnormal * (double)si[b] * (r == PRECC_RNE
		           ? 0.5 : 1.0) + 4 * 0x1p-24 * (double)am[b];
	}
	snprintf(what, sizeof what, "roundtrip %s %s {%ldx%ld}", fi->name,
	         r == PRECC_SR ? "sr" : r == PRECC_RZ ? "rz" : "rne", blk.br,
	         blk.bc);
	check_bound(what, y, want, bound, n);
	free(x); free(y); free(am); free(s); free(si); free(want); free(bound);
	free(q);
}

static void
test_mx_nvfp4(void)
{
	long rows = 8, cols = 128, n = rows * cols;
	float x[1024], y[1024], am[64], s[64], si[64], gam, gsi;
	double want[1024], bound[1024];
	uint8_t q[1024], e[64];

	for (long i = 0; i < n; i++)
		x[i] = nrand() * (i % 61 == 0 ? 20.0f : 1.0f);
	/* MX e4m3, 32-element blocks, FLOOR: x*2^-e may exceed 448 (OCP) and
	 * saturate; the bound allows for it */
	CHECK_OK(precc_amax(x, PRECC_FP32, rows, cols, (precc_block){ 1, 32 }, am,
	                    &gam));
	CHECK_OK(precc_mx_scales(am, 32, PRECC_E4M3, PRECC_MX_FLOOR, e, s, si,
	                         NULL));
	precc_quant_opts o = { .qf = PRECC_E4M3, .round = PRECC_RNE,
	                       .saturate = true, .blk = { 1, 32 }, .scale = s };
	CHECK_OK(precc_quantize(x, PRECC_FP32, rows, cols, &o, q));
	CHECK_OK(precc_dequantize(q, PRECC_E4M3, rows, cols, (precc_block){ 1, 32 },
	                          si, y));
	for (long i = 0; i < n; i++) {
		long b = i / 32;
		want[i] = x[i];
		bound[i] = 0x1p-4 * fabs(x[i]) + 0x1p-10 * si[b]
		           + fmax(0.0, fabs(x[i]) - 448.0 * si[b]);
		CHECK(am[b] * s[b] < 512.0f && am[b] * s[b] >= 256.0f);
	}
	check_bound("mx e4m3 roundtrip", y, want, bound, n);

	/* NVFP4: e2m1, 16-element blocks, e4m3 block scale + fp32 global */
	CHECK_OK(precc_amax(x, PRECC_FP32, rows, cols, (precc_block){ 1, 16 }, am,
	                    &gam));
	CHECK_OK(precc_nvfp4_scales(am, 64, gam, e, &gsi, s, si));
	o = (precc_quant_opts){ .qf = PRECC_E2M1, .round = PRECC_RNE,
	                        .saturate = true, .blk = { 1, 16 }, .scale = s };
	CHECK_OK(precc_quantize(x, PRECC_FP32, rows, cols, &o, q));
	CHECK_OK(precc_dequantize(q, PRECC_E2M1, rows, cols, (precc_block){ 1, 16 },
	                          si, y));
	for (long i = 0; i < n; i++) {
		long b = i / 16;
		want[i] = x[i];
		/* e2m1 half-ulp (1/4 relative) + the block scale's e4m3 rounding
		 * (1/16 of the block amax) + half the subnormal step */
		bound[i] = 0.25 * fabs(x[i]) + 0x1p-4 * am[b] * 1.01 + 0.25 * si[b];
	}
	check_bound("nvfp4 roundtrip", y, want, bound, n);
	CHECK(fabsf(gsi - gam / 2688.0f) <= 1e-6f * gsi);
}

static void
test_sr(void)
{
	long n = SMALL ? 4000 : 40000;
	static const struct { precc_format f; float x; } cs[] = {
		{ PRECC_E4M3, 1.03f }, { PRECC_E4M3, -2.7f },
		{ PRECC_E4M3, 0.0041f }, { PRECC_E4M3, 300.5f },
		{ PRECC_E5M2, 0.3f }, { PRECC_E2M1, 2.6f }, { PRECC_BF16, 1.001f },
	};
	float *x = malloc(n * 4);
	uint16_t *q = malloc(n * 2), *q2 = malloc(n * 2);
	uint8_t *q8 = malloc(n), *q8b = malloc(n);

	for (unsigned t = 0; t < sizeof cs / sizeof cs[0]; t++) {
		precc_format f = cs[t].f;
		int wide = precc_interp_elem_bytes(f) == 2;
		for (long i = 0; i < n; i++)
			x[i] = cs[t].x;
		precc_quant_opts o = { .qf = f, .round = PRECC_SR, .saturate = true,
		                       .seed = 1234 + t, .stream = 9 };
		CHECK_OK(precc_quantize(x, PRECC_FP32, 1, n, &o, wide ? (void *)q
		                        : (void *)q8));
		uint32_t lo = precc_encode(f, cs[t].x, PRECC_RZ, true, 0);
		double vlo = dec(f, lo), vhi = dec(f, lo + 1), sum = 0;
		long ups = 0, odd = 0;
		for (long i = 0; i < n; i++) {
			uint32_t c = wide ? q[i] : precc_interp_code(q8, f, (size_t)i);
			if (c == lo + 1)
				ups++;
			else if (c != lo)
				odd++;
			sum += dec(f, c);
		}
		CHECK(odd == 0);
		double mean = sum / n, sd = fabs(vhi - vlo) / 2 / sqrt((double)n);
		if (fabs(mean - cs[t].x) > 5 * sd) {
			fprintf(stderr, "sr %s x=%g: mean %.9g, |bias| %.3g > 5 sd %.3g "
			        "(%ld of %ld up)\n", precc_format_get(f)->name,
			        (double)cs[t].x, mean, fabs(mean - cs[t].x), 5 * sd, ups,
			        n);
			failures++;
		}
		/* reproducible: same seed -> same codes; the bits of element i are
		 * precc_sr_bits(seed, stream, i) */
		CHECK_OK(precc_quantize(x, PRECC_FP32, 1, n, &o, wide ? (void *)q2
		                        : (void *)q8b));
		CHECK(memcmp(wide ? (void *)q : (void *)q8, wide ? (void *)q2
		             : (void *)q8b, precc_interp_tensor_bytes(f, 1, n)) == 0);
		for (long i = 0; i < 50; i++) {
			long j = (i * 7919) % n;
			/* e2m1: 16 bits an element (precc_sr_bits16) */
			uint32_t c = f == PRECC_E2M1
			             ? precc_encode_sr(f, cs[t].x, true,
			                               precc_sr_bits16(o.seed, o.stream, j), 16)
			             : precc_encode(f, cs[t].x, PRECC_SR, true,
			                            precc_sr_bits(o.seed, o.stream, j));
			CHECK(c == (wide ? q[j] : precc_interp_code(q8, f, (size_t)j)));
		}
		o.stream = 10;
		CHECK_OK(precc_quantize(x, PRECC_FP32, 1, n, &o, wide ? (void *)q2
		                        : (void *)q8b));
		CHECK(memcmp(wide ? (void *)q : (void *)q8, wide ? (void *)q2
		             : (void *)q8b, precc_interp_tensor_bytes(f, 1, n)) != 0);
	}
	free(x); free(q); free(q2); free(q8); free(q8b);
}

/* Same seed -> same codes for 1, 2, 3 and 7 threads (SR and RNE). */
static void
test_threads(void)
{
	long rows = 300, cols = 512, n = rows * cols;
	float *x = malloc(n * 4), s[300];
	uint8_t *q1 = malloc(n), *q2 = malloc(n);
	int th[3] = { 2, 3, 7 };

	for (long i = 0; i < n; i++)
		x[i] = nrand();
	for (long r = 0; r < rows; r++)
		s[r] = 100.0f + (float)r;
	for (int round = 0; round < 2; round++) {
		precc_quant_opts o = { .qf = PRECC_E4M3, .round = round ? PRECC_SR
		                       : PRECC_RNE, .saturate = true, .blk = { 1, 0 },
		                       .scale = s, .seed = 99, .stream = 1,
		                       .threads = 1 };
		CHECK_OK(precc_quantize(x, PRECC_FP32, rows, cols, &o, q1));
		for (int t = 0; t < 3; t++) {
			o.threads = th[t];
			memset(q2, 0xaa, n);
			CHECK_OK(precc_quantize(x, PRECC_FP32, rows, cols, &o, q2));
			CHECK(memcmp(q1, q2, n) == 0);
		}
	}
	free(x); free(q1); free(q2);
}

static void
test_transpose(void)
{
	uint16_t a[6] = { 1, 2, 3, 4, 5, 6 }, t[6];
	CHECK_OK(precc_transpose(a, 2, 2, 3, t));
	static const uint16_t want[6] = { 1, 4, 2, 5, 3, 6 };
	CHECK(memcmp(t, want, sizeof t) == 0);
	for (size_t es = 1; es <= 8; es *= 2) {
		long r = 67, c = 45;
		unsigned char *x = malloc(r * c * es), *y = malloc(r * c * es);
		unsigned char *z = malloc(r * c * es);
		for (long i = 0; i < r * c * (long)es; i++)
			x[i] = (unsigned char)(i * 31 + 7);
		CHECK_OK(precc_transpose(x, es, r, c, y));
		CHECK_OK(precc_transpose(y, es, c, r, z));
		CHECK(memcmp(x, z, r * c * es) == 0);
		CHECK(memcmp(y + es * (5 * r + 3), x + es * (3 * c + 5), es) == 0);
		free(x); free(y); free(z);
	}
	CHECK_ERR(precc_transpose(a, 3, 2, 3, t), PRECC_IEINVAL);
	CHECK_ERR(precc_transpose(a, 2, 0, 3, t), PRECC_IEEMPTY);
	CHECK_ERR(precc_transpose(a, 8, 1L << 40, 1L << 30, t), PRECC_IETOOBIG);
}

static void
test_errors(void)
{
	float x[4] = { 0 };
	uint8_t q[4];
	precc_quant_opts o = { .qf = PRECC_E4M3, .round = PRECC_RNE };
	CHECK_ERR(precc_quantize(x, PRECC_FP32, 0, 4, &o, q), PRECC_IEEMPTY);
	CHECK_ERR(precc_quantize(x, PRECC_FP32, 1L << 50, 1L << 20, &o, q),
	          PRECC_IETOOBIG);
	CHECK_ERR(precc_quantize(NULL, PRECC_FP32, 1, 4, &o, q), PRECC_IEINVAL);
	o.qf = PRECC_NFORMAT;
	CHECK_ERR(precc_quantize(x, PRECC_FP32, 1, 4, &o, q), PRECC_IEINVAL);
	o.qf = PRECC_E4M3;
	o.round = PRECC_NROUND;
	CHECK_ERR(precc_quantize(x, PRECC_FP32, 1, 4, &o, q), PRECC_IEINVAL);
	CHECK_ERR(precc_dequantize(q, PRECC_E4M3, 1, -4, (precc_block){ 0, 0 },
	                           NULL, x), PRECC_IESHAPE);
}

int
main(void)
{
	static const precc_block blks[] = {
		{ 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 128 }, { 128, 128 }, { 1, 32 },
		{ 1, 16 },
	};
	static const precc_format fmts[] = { PRECC_E4M3, PRECC_E5M2, PRECC_E2M1,
	                                     PRECC_E3M2, PRECC_E2M3 };
	long rows = SMALL ? 130 : 260, cols = SMALL ? 200 : 384;

	test_hand();
	for (unsigned f = 0; f < sizeof fmts / sizeof fmts[0]; f++)
		for (unsigned b = 0; b < sizeof blks / sizeof blks[0]; b++)
			for (int r = 0; r < 3; r++)
				roundtrip(fmts[f], r == 0 ? PRECC_RNE : r == 1 ? PRECC_RZ
				          : PRECC_SR, blks[b], rows, cols);
	test_mx_nvfp4();
	test_sr();
	test_threads();
	test_transpose();
	test_errors();
	return finish("quant");
}
