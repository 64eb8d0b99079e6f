/*
 * test_amax_scale.c — amax at every granularity (hand-computed), NaN/inf
 * behaviour, scale/scale_inv with margin/pow2/eps and the inf/NaN
 * policies, MX e8m0 (FLOOR and RCEIL), NVFP4 two-level scales, and the
 * delayed-scaling history.
 */
#include "check.h"

static const float X[4][6] = {
	{ 1, -2, 3, -4, 5, -6 },
	{ 0.5f, 7, -0.25f, 1, 2, 3 },
	{ -8, 1, 1, 1, 1, 9 },
	{ 0, 0, 0, 0, 0, -10 },
};

static void
expect(const char *what, const float *got, const float *want, long n)
{
	for (long i = 0; i < n; i++) {
		int same = fbits(got[i]) == fbits(want[i])
		           || (isnan(got[i]) && isnan(want[i]));
		if (!same) {
			fprintf(stderr, "%s[%ld]: got %g want %g\n", what, i,
			        (double)got[i], (double)want[i]);
			failures++;
		}
	}
}

static void
test_amax(precc_format f)
{
	uint16_t h[24];
	const void *x = X;
	float out[16], g;

	if (f != PRECC_FP32) {
		for (int i = 0; i < 24; i++)
			h[i] = (uint16_t)precc_encode(f, (&X[0][0])[i], PRECC_RNE,
			                              false, 0);
		x = h;
	}
	CHECK_OK(precc_amax(x, f, 4, 6, (precc_block){ 0, 0 }, out, &g));
	expect("tensor", out, (float[]){ 10 }, 1);
	CHECK(g == 10.0f);
	CHECK_OK(precc_amax(x, f, 4, 6, (precc_block){ 1, 0 }, out, NULL));
	expect("row", out, (float[]){ 6, 7, 9, 10 }, 4);
	CHECK_OK(precc_amax(x, f, 4, 6, (precc_block){ 0, 1 }, out, NULL));
	expect("col", out, (float[]){ 8, 7, 3, 4, 5, 10 }, 6);
	CHECK_OK(precc_amax(x, f, 4, 6, (precc_block){ 1, 4 }, out, NULL));
	expect("1x4", out, (float[]){ 4, 6, 7, 3, 8, 9, 0, 10 }, 8);
	CHECK_OK(precc_amax(x, f, 4, 6, (precc_block){ 2, 2 }, out, NULL));
	expect("2x2", out, (float[]){ 7, 4, 6, 8, 1, 10 }, 6);
	CHECK_OK(precc_amax(x, f, 4, 6, (precc_block){ 3, 4 }, out, NULL));
	expect("3x4 partial", out, (float[]){ 8, 9, 0, 10 }, 4);
}

static void
test_amax_special(void)
{
	float x[4][6], out[8], g;
	memcpy(x, X, sizeof x);
	x[1][2] = NAN;
	x[0][0] = -INFINITY;
	CHECK_OK(precc_amax(x, PRECC_FP32, 4, 6, (precc_block){ 1, 0 }, out, &g));
	expect("row nan/inf", out, (float[]){ INFINITY, NAN, 9, 10 }, 4);
	CHECK(isnan(g));
	CHECK_OK(precc_amax(x, PRECC_FP32, 4, 6, (precc_block){ 0, 1 }, out, &g));
	expect("col nan/inf", out, (float[]){ INFINITY, 7, NAN, 4, 5, 10 }, 6);

	/* MX 1x32 and NVFP4 1x16 blocks over a 2x64 tensor */
	float y[128];
	for (int i = 0; i < 128; i++)
		y[i] = (float)((i * 37) % 101) * (i & 1 ? -1.0f : 1.0f);
	float mx[4], nv[8];
	CHECK(precc_block_count(2, 64, (precc_block){ 1, 32 }, NULL, NULL) == 4);
	CHECK_OK(precc_amax(y, PRECC_FP32, 2, 64, (precc_block){ 1, 32 }, mx, &g));
	CHECK_OK(precc_amax(y, PRECC_FP32, 2, 64, (precc_block){ 1, 16 }, nv, NULL));
	for (int b = 0; b < 4; b++) {
		float m = 0;
		for (int i = 0; i < 32; i++)
			m = fmaxf(m, fabsf(y[b * 32 + i]));
		CHECK(mx[b] == m);
		CHECK(fmaxf(nv[2 * b], nv[2 * b + 1]) == m);
	}
	CHECK(g == 100.0f);

	/* errors, not crashes */
	CHECK_ERR(precc_amax(y, PRECC_FP32, 0, 64, (precc_block){ 0, 0 }, mx, &g),
	          PRECC_IEEMPTY);
	CHECK_ERR(precc_amax(y, PRECC_FP32, -1, 64, (precc_block){ 0, 0 }, mx, &g),
	          PRECC_IESHAPE);
	CHECK_ERR(precc_amax(y, PRECC_FP32, 1L << 40, 1L << 40,
	                     (precc_block){ 0, 0 }, mx, &g), PRECC_IETOOBIG);
	CHECK_ERR(precc_amax(y, PRECC_FP32, 1L << 62, 1L << 62,
	                     (precc_block){ 0, 0 }, mx, &g), PRECC_IETOOBIG);
	CHECK_ERR(precc_amax(NULL, PRECC_FP32, 2, 2, (precc_block){ 0, 0 }, mx, &g),
	          PRECC_IEINVAL);
	CHECK_ERR(precc_amax(y, PRECC_FP32, 2, 2, (precc_block){ -1, 0 }, mx, &g),
	          PRECC_IESHAPE);
}

/* Large enough to be split across threads: every granularity against a
 * plain loop, with and without NaN and inf, under both NaN policies. */
static void
test_amax_big(void)
{
	long rows = 600, cols = 700, n = rows * cols;
	float *x = malloc(n * 4), *out = malloc(n * 4), *want = malloc(n * 4);
	static const precc_block blks[] = { { 0, 0 }, { 1, 0 }, { 0, 1 },
	                                    { 1, 32 }, { 128, 128 }, { 7, 3 },
	                                    { 5, 1 }, { 256, 1 } };
	float g;

	for (long i = 0; i < n; i++)
		x[i] = nrand() * (i % 1013 == 0 ? 50.0f : 1.0f);
	for (int pass = 0; pass < 2; pass++) {
		if (pass) {
			x[345 * cols + 678] = NAN;
			x[100 * cols + 33] = -INFINITY;
			x[599 * cols + 699] = -NAN;
		}
		for (unsigned t = 0; t < sizeof blks / sizeof blks[0]; t++) {
			precc_block b = blks[t];
			long nbc, nb = precc_block_count(rows, cols, b, NULL, &nbc);
			long br = b.br ? b.br : rows, bc = b.bc ? b.bc : cols;
			float wg = 0;
			for (long i = 0; i < nb; i++)
				want[i] = 0;
			for (long r = 0; r < rows; r++)
				for (long c = 0; c < cols; c++) {
					float a = fabsf(x[r * cols + c]);
					float *w = &want[(r / br) * nbc + c / bc];
					*w = isnan(a) || isnan(*w) ? NAN : fmaxf(*w, a);
					wg = isnan(a) || isnan(wg) ? NAN : fmaxf(wg, a);
				}
			CHECK_OK(precc_amax(x, PRECC_FP32, rows, cols, b, out, &g));
			expect("big amax", out, want, nb);
			CHECK(fbits(g) == fbits(wg) || (isnan(g) && isnan(wg)));
			/* NaN skipped (TE's fmaxf): inf and the rest still count */
			wg = 0;
			for (long i = 0; i < nb; i++)
				want[i] = 0;
			for (long r = 0; r < rows; r++)
				for (long c = 0; c < cols; c++) {
					float a = fabsf(x[r * cols + c]);
					float *w = &want[(r / br) * nbc + c / bc];
					*w = fmaxf(*w, a);
					wg = fmaxf(wg, a);
				}
			CHECK_OK(precc_amax_policy(x, PRECC_FP32, rows, cols, b,
			                           PRECC_AMAX_NAN_IGNORE, out, &g));
			expect("big amax, NaN ignored", out, want, nb);
			CHECK(fbits(g) == fbits(wg));
		}
	}
	free(x);
	free(out);
	free(want);
}

static void
test_scales(void)
{
	float amax[6] = { 448, 224, 0, INFINITY, NAN, 1e-20f };
	float prev[6] = { 9, 9, 9, 5, 6, 9 };
	float s[6], si[6];
	long bad = -1;
	precc_scale_params p = { .fmax = 448.0f };

	CHECK_OK(precc_scales(amax, 6, &p, PRECC_NF_PROPAGATE, prev, s, si, &bad));
	CHECK(bad == 2);
	expect("scale", s, (float[]){ 1, 2, 1, NAN, NAN, 448.0f / 1e-20f }, 6);
	expect("scale_inv", si, (float[]){ 1, 0.5f, 1, NAN, NAN,
	                                   1.0f / (448.0f / 1e-20f) }, 6);
	CHECK_OK(precc_scales(amax, 6, &p, PRECC_NF_KEEP_PREV, prev, s, si, &bad));
	expect("keep prev", s, (float[]){ 1, 2, 1, 5, 6, 448.0f / 1e-20f }, 6);
	CHECK_OK(precc_scales(amax, 6, &p, PRECC_NF_KEEP_PREV, NULL, s, si, &bad));
	CHECK(s[3] == 1.0f && s[4] == 1.0f);
	CHECK_ERR(precc_scales(amax, 6, &p, PRECC_NF_ERROR, prev, s, si, &bad),
	          PRECC_IENONFINITE);
	CHECK(s[3] == 5.0f && s[0] == 1.0f);

	/* pow2, margin, eps */
	float a2[3] = { 300, 224, 1e-30f };
	precc_scale_params q = { .fmax = 448.0f, .margin = 1, .pow2 = true, .eps = 1e-12f };
	CHECK_OK(precc_scales(a2, 3, &q, PRECC_NF_PROPAGATE, NULL, s, si, NULL));
	/* 448/300/2 = 0.747 -> 0.5; 448/224/2 = 1; 448/1e-12/2 -> pow2 below */
	CHECK(s[0] == 0.5f && s[1] == 1.0f);
	CHECK(s[2] <= 448.0f / 1e-12f / 2 && s[2] > 448.0f / 1e-12f / 4);
	CHECK(fbits(s[2]) & 0x007fffff ? 0 : 1);
	CHECK(si[0] == 2.0f);
	CHECK_ERR(precc_scales(amax, 0, &p, PRECC_NF_PROPAGATE, NULL, s, si, NULL),
	          PRECC_IEEMPTY);
}

static void
test_mx(void)
{
	float a[8] = { 448, 1, 0, 3.40282347e38f, 1e-45f, 449, 224, NAN };
	uint8_t e[8];
	float s[8], si[8];
	long bad;

	CHECK_OK(precc_mx_scales(a, 8, PRECC_E4M3, PRECC_MX_FLOOR, e, s, si, &bad));
	/* floor(log2 a) - 8 */
	static const uint8_t fl[8] = { 127, 119, 0, 127 + 119, 0, 127, 126, 0xff };
	for (int i = 0; i < 8; i++)
		CHECK(e[i] == fl[i]);
	CHECK(bad == 1);
	CHECK(s[1] == 256.0f && si[1] == 1.0f / 256.0f && isnan(s[7]));
	CHECK(si[2] == ldexpf(1.0f, -127));
	CHECK_OK(precc_mx_scales(a, 8, PRECC_E4M3, PRECC_MX_RCEIL, e, s, si, &bad));
	/* ceil(log2(a / 448)): 0, ceil(-8.8) = -8, ... , 449 -> 1, 224 -> -1 */
	static const uint8_t rc[8] = { 127, 119, 0, 127 + 120, 0, 128, 126, 0xff };
	for (int i = 0; i < 8; i++) {
		if (e[i] != rc[i])
			fprintf(stderr, "rceil %d: got %u want %u\n", i, e[i], rc[i]);
		CHECK(e[i] == rc[i]);
	}
	/* e2m1: emax 2; e5m2: emax 15 */
	float b[3] = { 6, 8, 5.9f };
	CHECK_OK(precc_mx_scales(b, 3, PRECC_E2M1, PRECC_MX_FLOOR, e, NULL, NULL,
	                         NULL));
	CHECK(e[0] == 127 && e[1] == 128 && e[2] == 127);
	CHECK_OK(precc_mx_scales(b, 3, PRECC_E5M2, PRECC_MX_FLOOR, e, NULL, NULL,
	                         NULL));
	CHECK(e[0] == 127 + 2 - 15 && e[1] == 127 + 3 - 15);
	CHECK_ERR(precc_mx_scales(b, 3, PRECC_BF16, PRECC_MX_FLOOR, e, NULL, NULL,
	                          NULL), PRECC_IEINVAL);
}

static void
test_nvfp4(void)
{
	float a[3] = { 6, 3, 0 }, s[3], si[3], gi;
	uint8_t e[3];

	CHECK_OK(precc_nvfp4_scales(a, 3, 6.0f * 448.0f, e, &gi, s, si));
	CHECK(gi == 1.0f);
	CHECK(e[0] == 0x38 && e[1] == 0x30 && e[2] == 0x00);
	expect("nvfp4 scale", s, (float[]){ 1, 2, 0 }, 3);
	expect("nvfp4 scale_inv", si, (float[]){ 1, 0.5f, 0 }, 3);
	/* global 2688*4: genc = 0.25, block 6 -> 0.25 (e4m3 0x28) */
	CHECK_OK(precc_nvfp4_scales(a, 3, 4.0f * 2688.0f, e, &gi, s, si));
	CHECK(gi == 4.0f && e[0] == 0x28);
	CHECK(s[0] == 1.0f && si[0] == 1.0f);
	CHECK_OK(precc_nvfp4_scales(a, 3, 0.0f, e, &gi, s, si));
	CHECK(gi == 1.0f);
}

static void
test_history(void)
{
	float buf[6], out[2];
	precc_amax_history h;

	CHECK_OK(precc_history_init(&h, buf, 3, 2));
	CHECK_OK(precc_history_reduce(&h, PRECC_HIST_MAX, out));
	CHECK(out[0] == 0 && out[1] == 0);
	CHECK_OK(precc_history_push(&h, (float[]){ 1, 5 }));
	CHECK_OK(precc_history_push(&h, (float[]){ 3, 2 }));
	CHECK_OK(precc_history_reduce(&h, PRECC_HIST_MAX, out));
	CHECK(out[0] == 3 && out[1] == 5);
	CHECK_OK(precc_history_reduce(&h, PRECC_HIST_MOST_RECENT, out));
	CHECK(out[0] == 3 && out[1] == 2);
	CHECK_OK(precc_history_push(&h, (float[]){ 0, 1 }));
	CHECK_OK(precc_history_push(&h, (float[]){ 0.5f, 0.5f }));  /* wraps */
	CHECK_OK(precc_history_reduce(&h, PRECC_HIST_MAX, out));
	CHECK(out[0] == 3 && out[1] == 2);
	CHECK_OK(precc_history_reduce(&h, PRECC_HIST_MOST_RECENT, out));
	CHECK(out[0] == 0.5f && out[1] == 0.5f);
	CHECK_OK(precc_history_push(&h, (float[]){ NAN, 1 }));
	CHECK_OK(precc_history_reduce(&h, PRECC_HIST_MAX, out));
	CHECK(isnan(out[0]) && out[1] == 1);
	CHECK_ERR(precc_history_init(&h, buf, 0, 2), PRECC_IEEMPTY);
}

int
main(void)
{
	test_amax(PRECC_FP32);
	test_amax(PRECC_BF16);
	test_amax(PRECC_FP16);
	test_amax_special();
	test_amax_big();
	test_scales();
	test_mx();
	test_nvfp4();
	test_history();
	return finish("amax_scale");
}
