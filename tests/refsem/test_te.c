/*
 * test_te.c — precc's interpreter against transcriptions of Transformer
 * Engine (NVIDIA/TransformerEngine at d0067d0, 2.20.0.dev0):
 *   DelayedScaling's default fused update, Float8CurrentScaling,
 *   MXFP8BlockScaling, NVFP4BlockScaling (the quantize_transpose kernel's
 *   block scale in 2.8-2.13 and since 2.14, transcribed from those tags).
 * Each reference function cites the file:line it transcribes.
 */
#include <float.h>
#include <string.h>

#include "precc/interp.h"
#include "refs.h"

enum { ROWS = 48, COLS = 384 };
static float x[ROWS * COLS];
static uint8_t q[ROWS * COLS];

/* ---- Float8CurrentScaling: amax, compute_scale_from_amax_kernel
 * (current_scaling.cu:267-276, value_for_inf FLT_MAX, TE's default
 * amax_epsilon 0 and no pow2), then the cast x * scale, satfinite. */
static void
current(int fmt, precc_format pf, float fmax)
{
	for (int kase = 0; kase < NCASE; kase++) {
		float ramax, rscale, amax, scale, sinv;
		fill(x, ROWS, COLS, kase, fmax);
		ramax = te_amax(x, ROWS * COLS, 1);
		rscale = te_scale_from_amax(ramax, fmax, 0, 0.0f, FLT_MAX);

		precc_scale_params p = { .fmax = fmax };
		precc_amax_policy(x, PRECC_FP32, ROWS, COLS, (precc_block){0, 0},
		                  PRECC_AMAX_NAN_IGNORE, &amax, NULL);
		precc_scales(&amax, 1, &p, PRECC_NF_ONE, NULL, &scale, &sinv, NULL);
		precc_quant_opts o = { .qf = pf, .round = PRECC_RNE, .saturate = true,
		                       .scale = &scale };
		precc_quantize(x, PRECC_FP32, ROWS, COLS, &o, q);
		CHECK(same(amax, ramax), "current %s: amax %a vs TE %a",
		      case_name[kase], amax, ramax);
		CHECK(same(scale, rscale), "current %s: scale %a vs TE %a",
		      case_name[kase], scale, rscale);
		CHECK(same(sinv, 1.0f / rscale), "current %s: scale_inv",
		      case_name[kase]);
		for (long i = 0; i < ROWS * COLS; i++) {
			int r = rencode(fmt, x[i] * rscale);
			if (r != q[i] && !(r == 0x7f && (q[i] & 0x7f) == 0x7f)) {
				CHECK(0, "current %s: x[%ld]=%a code %02x vs TE %02x",
				      case_name[kase], i, x[i], q[i], r);
				break;
			}
		}
	}
}

/* One training run: per step a tensor (its amax from the data, TE's
 * fmaxf), NaN steps, inf steps and long runs of zero-amax steps. */
static void
delayed(int len, int most_recent, int margin, int steps)
{
	enum { R = 8, C = 64 };
	static float t[R * C];
	float hbuf[1024], pscale = 1.0f, smax = 448.0f * powf(2.0f, (float)-margin);
	precc_amax_history h;
	TeState te = { .len = len, .scale = 1.0f };
	int diffs = 0;

	precc_history_init(&h, hbuf, len, 1);
	for (int step = 0; step < steps; step++) {
		int kind = step % 97 == 13 ? C_NAN : step % 211 == 50 ? C_INF
		           : (step / 300) % 4 == 2 ? C_ALL_ZERO     /* 300-step zero runs */
		           : step % 7 == 3 ? C_OUTLIERS : C_NORMAL;
		float amax;
		fill(t, R, C, kind, 448.0f);
		if (kind == C_NORMAL)         /* amax that moves over time */
			for (int i = 0; i < R * C; i++)
				t[i] *= 1.0f + (float)(step % 50);
		te.hist[0] = te_amax(t, R * C, 1);
		te_update(&te, most_recent, smax);
		precc_amax_policy(t, PRECC_FP32, R, C, (precc_block){0, 0},
		                  PRECC_AMAX_NAN_IGNORE, &amax, NULL);
		precc_history_update_te(&h, &amax, most_recent ? PRECC_HIST_MOST_RECENT
		                        : PRECC_HIST_MAX, 448.0f, margin, &pscale);
		if (!same(pscale, te.scale) && diffs++ < 3)
			CHECK(0, "delayed len %d %s margin %d step %d: scale %a vs TE %a",
			      len, most_recent ? "most_recent" : "max", margin, step,
			      pscale, te.scale);
	}
	CHECK(diffs == 0, "delayed len %d: %d of %d steps differ", len, diffs, steps);
	/* the run must have exercised a kept scale after a zero run */
	CHECK(te.scale > 0.0f, "delayed: scale %a", te.scale);
}

/* ---- MXFP8BlockScaling: cast/mxfp8/quantize_mxfp8.cuh:255-295 — block
 * amax by fmaxf, e8m0 = float_to_e8m0(amax * max_norm_rcp) (:271),
 * multiplier exp2f_rcp(e8m0) (:283), x * multiplier (:295), satfinite. */
static void
mxfp8(int fmt, precc_format pf, float fmax)
{
	enum { NB = ROWS * COLS / 32 };
	static float amax[NB], scale[NB], sinv[NB];
	static uint8_t e8[NB];
	const float rcp = (float)(1.0 / fmax);   /* utils.cuh:1044 */

	for (int kase = 0; kase < NCASE; kase++) {
		fill(x, ROWS, COLS, kase, fmax);
		precc_amax_policy(x, PRECC_FP32, ROWS, COLS, (precc_block){1, 32},
		                  PRECC_AMAX_NAN_IGNORE, amax, NULL);
		precc_mx_scales(amax, NB, pf, PRECC_MX_RCEIL_TE, e8, scale, sinv, NULL);
		precc_quant_opts o = { .qf = pf, .round = PRECC_RNE, .saturate = true,
		                       .blk = {1, 32}, .scale = scale };
		precc_quantize(x, PRECC_FP32, ROWS, COLS, &o, q);
		for (int b = 0; b < NB; b++) {
			float ba = te_amax(x + b * 32, 32, 1);
			uint8_t re = te_float_to_e8m0(ba * rcp);
			float m = te_exp2f_rcp(re);
			if (e8[b] != re || !same(scale[b], m)) {
				CHECK(0, "mxfp8 %s block %d: e8m0 %02x vs TE %02x", case_name[kase],
				      b, e8[b], re);
				break;
			}
			for (int j = 0; j < 32; j++) {
				float v = x[b * 32 + j];
				int r = rencode(fmt, v * m), g = q[b * 32 + j];
				if (r != g && !(r == 0x7f && (g & 0x7f) == 0x7f)) {
					CHECK(0, "mxfp8 %s block %d elem %d: %a code %02x vs TE %02x",
					      case_name[kase], b, j, v, g, r);
					b = NB;
					break;
				}
			}
		}
	}
}

/* ---- NVFP4BlockScaling 1x16, the quantize_transpose kernel TE's training
 * runs (cast/nvfp4/core_nvfp4.cuh and quantize_transpose_nvfp4.cuh, the
 * same lines at v2.13 and v2.14): S_enc from the fmaxf global amax
 * (core:79-91), S_dec = 1.0 / S_enc (qt:230), block_scale_inverse =
 * fminf(1 / (S_dec_b * S_dec), FLT_MAX) (qt:530-531), elements
 * e2m1(x * block_scale_inverse) satfinite RN (mul_cvt_fp32_to_fp4_4x).
 * S_dec_b, compute_decoding_scaling_factor in quantization_and_
 * transposition_SF: */
static float
te_block_scale(precc_nvfp4_formula f, float block_amax, float S_enc)
{
	if (f == PRECC_NVFP4_TE214_TRANSPOSE) {     /* core:49-52 at v2.14 */
		const float fp4_max = 6.0f, fp4_max_inv = 1.0f / fp4_max;
		return block_amax * (S_enc * fp4_max_inv);
	}
	const float fp4_max = 6.0f;                  /* core:49-51 at v2.13 */
	return block_amax / fp4_max * S_enc;
}

static void
nvfp4(precc_nvfp4_formula f)
{
	enum { NB = ROWS * COLS / 16 };
	static float amax[NB], scale[NB], sinv[NB];
	static uint8_t e4[NB];
	for (int kase = 0; kase < NCASE; kase++) {
		float g, gsi;
		fill(x, ROWS, COLS, kase, 6.0f);
		if (kase == C_ZERO_BLOCKS)    /* blocks whose e4m3 scale is 0 */
			for (int i = 0; i < 64; i++)
				x[16 * 16 + i] = 1e-30f * (i + 1);
		precc_amax_policy(x, PRECC_FP32, ROWS, COLS, (precc_block){1, 16},
		                  PRECC_AMAX_NAN_IGNORE, amax, &g);
		precc_nvfp4_scales_ref(amax, NB, g, f, e4, &gsi, scale, sinv);
		precc_quant_opts o = { .qf = PRECC_E2M1, .round = PRECC_RNE,
		                       .saturate = true, .blk = {1, 16}, .scale = scale };
		precc_quantize(x, PRECC_FP32, ROWS, COLS, &o, q);

		float rg = te_amax(x, ROWS * COLS, 1), S_enc = te_genc(rg);
		float S_dec = (float)(1.0 / S_enc);
		CHECK(same(g, rg) && same(gsi, S_dec), "nvfp4 %s: global", case_name[kase]);
		for (int b = 0; b < NB; b++) {
			float ba = te_amax(x + b * 16, 16, 1);
			int re = rencode(R_E4M3, te_block_scale(f, ba, S_enc));
			float bsi = fminf(1.0f / ((float)rdecode(R_E4M3, (unsigned)re) * S_dec),
			                  FLT_MAX);
			if (e4[b] != re || !same(scale[b], bsi)) {
				CHECK(0, "nvfp4 %s block %d: e4m3 %02x vs TE %02x, mult %a vs %a",
				      case_name[kase], b, e4[b], re, scale[b], bsi);
				break;
			}
			/* TE stores the codes two a byte, element 2i in the low
			 * nibble (its reference cast_to_fp4x2, pytorch/custom_recipes/
			 * quantization_nvfp4.py:51-73 at 1a4d3b0d: x[:, ::2] +
			 * x[:, 1::2] * 16); precc's buffer is the same bytes */
			for (int j = 0; j < 16; j++) {
				float v = x[b * 16 + j];
				int r = rencode(R_E2M1, v * bsi);
				int got = q[(b * 16 + j) / 2] >> (4 * (j % 2)) & 0xf;
				if (r < 0)     /* NaN has no e2m1 code: numerics.c's rule */
					continue;
				if (r != got) {
					CHECK(0, "nvfp4 %s block %d elem %d: %a code %x vs TE %x",
					      case_name[kase], b, j, v, got, r);
					b = NB;
					break;
				}
			}
		}
	}
}

/* Every bf16 block amax from 0 to 448 at a global amax of 448, through
 * the interpreter's scales (block_scale nvfp4=te2.8-2.13, te2.14+) against
 * each kernel's transcription; and how many of them TE 2.8-2.13's rowwise-only kernel
 * (quantize_nvfp4.cuh, quantization_SF at core:66 of v2.13: (amax *
 * (1/6)) * S_enc, which precc once called "te2.14") gives another code
 * than the 2.8-2.13 transpose kernel (15). */
static void
nvfp4_bf16_amaxes(void)
{
	enum { N = 0x43e0 + 1 };          /* bf16 0 .. 448 */
	static float a[N];
	static uint8_t got28[N], got214[N];
	const float g = 448.0f, S_enc = te_genc(g);
	long rowwise = 0;

	for (int i = 0; i < N; i++) {
		uint32_t u = (uint32_t)i << 16;
		memcpy(&a[i], &u, 4);
	}
	CHECK(precc_nvfp4_scales_ref(a, N, g, PRECC_NVFP4_TE28_TRANSPOSE, got28, NULL, NULL, NULL)
	      == 0 && precc_nvfp4_scales_ref(a, N, g, PRECC_NVFP4_TE214_TRANSPOSE, got214, NULL,
	                                     NULL, NULL) == 0, "nvfp4 bf16: %s", precc_interp_error());
	for (int i = 0; i < N; i++) {
		int r28 = rencode(R_E4M3, te_block_scale(PRECC_NVFP4_TE28_TRANSPOSE, a[i], S_enc));
		int r214 = rencode(R_E4M3, te_block_scale(PRECC_NVFP4_TE214_TRANSPOSE, a[i], S_enc));
		int rrow = rencode(R_E4M3, a[i] * (1.0f / 6.0f) * S_enc);
		if (got28[i] != r28 || got214[i] != r214) {
			CHECK(0, "nvfp4 bf16 amax %a: te2.8-2.13 %02x vs TE 2.13 %02x, te2.14+ %02x vs "
			      "TE 2.14 %02x", a[i], got28[i], r28, got214[i], r214);
			break;
		}
		rowwise += rrow != r28;
	}
	printf("nvfp4: of %d bf16 amaxes at global amax 448, TE 2.8-2.13's rowwise-only kernel "
	       "differs from its transpose kernel in %ld\n", N, rowwise);
	CHECK(rowwise > 0, "the rowwise-only and transpose formulas agree everywhere");
}

/* TE >= 2.14 and 2.8-2.13 must differ somewhere (else the knob is moot):
 * count blocks of uniform random amaxes whose e4m3 scale differs. */
static void
nvfp4_formulas_differ(void)
{
	enum { N = 1 << 16 };
	static float a[N];
	static uint8_t e214[N], e28[N];
	long d = 0;
	for (int t = 0; t < 64; t++) {
		float g = 1.0f + fabsf(urand()) * 100.0f;
		for (int i = 0; i < N; i++)
			a[i] = fabsf(urand()) * g;
		precc_nvfp4_scales_ref(a, N, g, PRECC_NVFP4_TE214_TRANSPOSE, e214, NULL, NULL, NULL);
		precc_nvfp4_scales_ref(a, N, g, PRECC_NVFP4_TE28_TRANSPOSE, e28, NULL, NULL, NULL);
		for (int i = 0; i < N; i++)
			d += e214[i] != e28[i];
	}
	printf("nvfp4: te2.14+ vs te2.8-2.13 block scales differ in %ld of %d blocks\n", d, 64 * N);
	CHECK(d > 0, "the two formulas agree everywhere");
}

static void
rht(void)
{
	enum { R = ROWS, C = COLS };
	static uint16_t xb[R * C], yb[R * C];
	float t[16][16];
	long diff_seq = 0, n = 0;

	te_rht_matrix(t);
	CHECK(te_sign_mask() == 0xd7e8, "TE's sign mask %04x", te_sign_mask());
	for (int kase = 0; kase < NCASE; kase++) {
		fill(x, R, C, kase, 448.0f);
		for (long i = 0; i < R * C; i++)
			xb[i] = bf16_of(x[i]);
		precc_hadamard16(xb, PRECC_BF16, R, C, te_sign_mask(), yb, PRECC_BF16, 0);
		for (long r = 0; r < R; r++)
			for (long b = 0; b < C / 16; b++)
				for (int j = 0; j < 16; j++) {
					double sum = 0;
					float seq = 0;
					for (int i = 0; i < 16; i++) {
						uint32_t u = (uint32_t)xb[r * C + b * 16 + i] << 16;
						float xi;
						memcpy(&xi, &u, 4);
						sum += (double)xi * t[i][j];
						seq += xi * t[i][j];
					}
					uint16_t ref = bf16_of(sum), got = yb[r * C + b * 16 + j];
					int nan = (ref & 0x7fff) > 0x7f80 && (got & 0x7fff) > 0x7f80;
					diff_seq += bf16_of(seq) != ref;
					n++;
					if (got != ref && !nan) {
						CHECK(0, "rht %s (%ld, %ld): %04x vs TE %04x", case_name[kase], r,
						      b * 16 + j, got, ref);
						b = C, r = R;
						break;
					}
				}
	}
	printf("rht: %ld outputs, fp32-sequential sum differs from the exact one in %ld\n", n,
	       diff_seq);
}

int
main(void)
{
	current(R_E4M3, PRECC_E4M3, 448.0f);
	current(R_E5M2, PRECC_E5M2, 57344.0f);
	delayed(1024, 0, 0, 3000);
	delayed(16, 0, 0, 3000);
	delayed(16, 1, 0, 3000);
	delayed(4, 0, 2, 2000);
	mxfp8(R_E4M3, PRECC_E4M3, 448.0f);
	mxfp8(R_E5M2, PRECC_E5M2, 57344.0f);
	nvfp4(PRECC_NVFP4_TE214_TRANSPOSE);
	nvfp4(PRECC_NVFP4_TE28_TRANSPOSE);
	nvfp4_bf16_amaxes();
	nvfp4_formulas_differ();
	rht();
	if (fails) {
		printf("%d failures\n", fails);
		return 1;
	}
	printf("TE: current, delayed, mxfp8, nvfp4 match\n");
	return 0;
}
