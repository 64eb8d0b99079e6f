/*
 * test_torchao_deepseek.c — precc's interpreter against transcriptions of
 *   torchao (pytorch/ao at 36027d8): tensorwise and rowwise (axiswise)
 *     Float8Linear casts, torchao/float8/float8_utils.py and
 *     float8_training_tensor.py;
 *   DeepGEMM (deepseek-ai/DeepGEMM at 54e2261): per_token_cast_to_fp8
 *     (1x128) and per_block_cast_to_fp8 (128x128), deep_gemm/utils/math.py;
 *   DeepSeek-V3 (deepseek-ai/DeepSeek-V3 at 9b4e978): act_quant_kernel,
 *     inference/kernel.py (divides by s instead of multiplying by 1/s).
 * torch.max / torch.amax propagate NaN; torch.clamp keeps NaN.
 */
#include <float.h>

#include "precc/interp.h"
#include "refs.h"

enum { ROWS = 256, COLS = 384 };
static float x[ROWS * COLS];
static uint8_t q[ROWS * COLS];

/* to_fp8_saturated (float8_utils.py:118-137): clamp(x * scale) to
 * [-max, max] (:136, NaN stays NaN), then .to(fp8); the product in fp32
 * (float8_training_tensor.py:153). */
static int
ao_code(int fmt, float v, float scale)
{
	return rencode(fmt, v * scale);   /* rencode saturates like the clamp */
}

/* torchao tensorwise (current_tensorwise): e4m3 and e5m2. */
static void
ao_tensorwise(int fmt, precc_format pf, float fmax)
{
	for (int kase = 0; kase < NCASE; kase++) {
		float amax, scale, sinv;
		fill(x, ROWS, COLS, kase, fmax);
		float rs = ao_scale(torch_amax(x, ROWS, COLS, COLS), fmax, 0);
		precc_scale_params p = { .fmax = fmax, .eps = 1e-12f };
		precc_amax(x, PRECC_FP32, ROWS, COLS, (precc_block){0, 0}, &amax, NULL);
		precc_scales(&amax, 1, &p, PRECC_NF_IEEE, NULL, &scale, &sinv, NULL);
		precc_quant_opts o = { .qf = pf, .round = PRECC_RNE, .saturate = true,
		                       .scale = &scale };
		precc_quantize(x, PRECC_FP32, ROWS, COLS, &o, q);
		CHECK(same(scale, rs), "torchao tensorwise %s: scale %a vs %a",
		      case_name[kase], scale, rs);
		/* float8_ops.py:44 a_scale.reciprocal() */
		CHECK(same(sinv, 1.0f / rs), "torchao tensorwise %s: scale_inv %a",
		      case_name[kase], sinv);
		for (long i = 0; i < ROWS * COLS; i++)
			if (!code_eq(ao_code(fmt, x[i], rs), q[i])) {
				CHECK(0, "torchao tensorwise %s: x[%ld]=%a code %02x vs %02x",
				      case_name[kase], i, x[i], q[i], ao_code(fmt, x[i], rs));
				break;
			}
	}
}

/* torchao rowwise: axiswise amax along the last dim, pow2 scales. */
static void
ao_rowwise(void)
{
	static float amax[ROWS], scale[ROWS], sinv[ROWS];
	for (int kase = 0; kase < NCASE; kase++) {
		fill(x, ROWS, COLS, kase, 448.0f);
		precc_scale_params p = { .fmax = 448.0f, .eps = 1e-12f, .pow2 = true,
		                         .pow2_log2 = true };
		precc_amax(x, PRECC_FP32, ROWS, COLS, (precc_block){1, 0}, amax, NULL);
		precc_scales(amax, ROWS, &p, PRECC_NF_IEEE, NULL, scale, sinv, NULL);
		precc_quant_opts o = { .qf = PRECC_E4M3, .round = PRECC_RNE,
		                       .saturate = true, .blk = {1, 0}, .scale = scale };
		precc_quantize(x, PRECC_FP32, ROWS, COLS, &o, q);
		for (long r = 0; r < ROWS; r++) {
			float rs = ao_scale(torch_amax(x + r * COLS, 1, COLS, COLS), 448.0, 1);
			if (!same(scale[r], rs)) {
				CHECK(0, "torchao rowwise %s row %ld: scale %a vs %a",
				      case_name[kase], r, scale[r], rs);
				break;
			}
			for (long c = 0; c < COLS; c++)
				if (!code_eq(ao_code(R_E4M3, x[r * COLS + c], rs), q[r * COLS + c])) {
					CHECK(0, "torchao rowwise %s (%ld,%ld)", case_name[kase], r, c);
					r = ROWS;
					break;
				}
		}
	}
	/* pow2 as torchao rounds it: a scale just below 2^k becomes 2^k
	 * (log2f rounds to k), which the mantissa mask would make 2^(k-1). */
	float amax1 = 448.0f / 0x1.fffffep+22f, s1, s2;
	precc_scale_params pl = { .fmax = 448.0f, .pow2 = true, .pow2_log2 = true };
	precc_scale_params pm = { .fmax = 448.0f, .pow2 = true };
	precc_scales(&amax1, 1, &pl, PRECC_NF_IEEE, NULL, &s1, NULL, NULL);
	precc_scales(&amax1, 1, &pm, PRECC_NF_IEEE, NULL, &s2, NULL, NULL);
	CHECK(same(s1, ao_scale(amax1, 448.0, 1)), "torchao pow2: %a", s1);
	printf("pow2 of a scale just below 2^23: torchao %a, TE mask %a\n", s1, s2);
}

/* DeepGEMM per_token (1x128, math.py:26-38) and per_block (128x128,
 * :51-62): sf = clamp(amax, 1e-4) / 448 in fp32, codes of
 * x * (1.0 / sf) (fp32 reciprocal, then fp32 product), float8_e4m3fn. */
static void
deepgemm(long br, long bc)
{
	long nbr = ROWS / br, nbc = COLS / bc, nb = nbr * nbc;
	static float amax[ROWS * COLS / 128], scale[ROWS * COLS / 128],
	             sinv[ROWS * COLS / 128];
	for (int kase = 0; kase < NCASE; kase++) {
		fill(x, ROWS, COLS, kase, 448.0f);
		precc_scale_params p = { .fmax = 448.0f, .eps = 1e-4f,
		                         .amax_over_fmax = true };
		precc_amax(x, PRECC_FP32, ROWS, COLS, (precc_block){br, bc}, amax, NULL);
		precc_scales(amax, nb, &p, PRECC_NF_IEEE, NULL, scale, sinv, NULL);
		precc_quant_opts o = { .qf = PRECC_E4M3, .round = PRECC_RNE,
		                       .saturate = true, .blk = {br, bc}, .scale = scale };
		precc_quantize(x, PRECC_FP32, ROWS, COLS, &o, q);
		for (long b = 0; b < nb; b++) {
			long r0 = b / nbc * br, c0 = b % nbc * bc;
			float a = torch_amax(x + r0 * COLS + c0, br, bc, COLS);
			if (a < 1e-4f)                  /* .clamp(1e-4) */
				a = 1e-4f;
			float sf = a / 448.0f, m = 1.0f / sf;
			if (!same(sinv[b], sf) || !same(scale[b], m)) {
				CHECK(0, "deepgemm %ldx%ld %s block %ld: sf %a vs %a",
				      br, bc, case_name[kase], b, sinv[b], sf);
				break;
			}
			for (long r = r0; r < r0 + br; r++)
				for (long c = c0; c < c0 + bc; c++)
					if (!code_eq(rencode(R_E4M3, x[r * COLS + c] * m), q[r * COLS + c])) {
						CHECK(0, "deepgemm %s (%ld,%ld)", case_name[kase], r, c);
						b = nb, r = ROWS;
						break;
					}
		}
	}
}

/* DeepSeek-V3 act_quant_kernel (inference/kernel.py:10-34): s =
 * max(amax, 1e-4) / 448. (:26-28), y = x / s (:31). NaN cases skipped:
 * tl.max's NaN rule is Triton's, not transcribed here. */
static void
dsv3_act_quant(void)
{
	enum { NB = ROWS * COLS / 128 };
	static float amax[NB], scale[NB], sinv[NB];
	long diff_vs_mul = 0;
	for (int kase = 0; kase < NCASE; kase++) {
		if (kase == C_NAN)
			continue;
		fill(x, ROWS, COLS, kase, 448.0f);
		precc_scale_params p = { .fmax = 448.0f, .eps = 1e-4f,
		                         .amax_over_fmax = true };
		precc_amax(x, PRECC_FP32, ROWS, COLS, (precc_block){1, 128}, amax, NULL);
		precc_scales(amax, NB, &p, PRECC_NF_IEEE, NULL, scale, sinv, NULL);
		precc_quant_opts o = { .qf = PRECC_E4M3, .round = PRECC_RNE,
		                       .saturate = true, .blk = {1, 128}, .divisor = sinv };
		precc_quantize(x, PRECC_FP32, ROWS, COLS, &o, q);
		for (long b = 0; b < NB; b++) {
			float a = torch_amax(x + b * 128, 1, 128, 128);
			a = fmaxf(a, 1e-4f);
			float s = a / 448.0f;
			for (int j = 0; j < 128; j++) {
				float v = x[b * 128 + j];
				int r = rencode(R_E4M3, v / s);
				diff_vs_mul += r != rencode(R_E4M3, v * (1.0f / s));
				if (!code_eq(r, q[b * 128 + j])) {
					CHECK(0, "dsv3 act_quant %s block %ld elem %d", case_name[kase], b, j);
					b = NB;
					break;
				}
			}
		}
	}
	printf("dsv3: x/s and x*(1/s) give different codes for %ld elements\n",
	       diff_vs_mul);
}

int
main(void)
{
	ao_tensorwise(R_E4M3, PRECC_E4M3, 448.0f);
	ao_tensorwise(R_E5M2, PRECC_E5M2, 57344.0f);
	ao_rowwise();
	deepgemm(1, 128);
	deepgemm(128, 128);
	dsv3_act_quant();
	if (fails) {
		printf("%d failures\n", fails);
		return 1;
	}
	printf("torchao tensorwise/rowwise, DeepGEMM 1x128/128x128, DeepSeek-V3 act_quant match\n");
	return 0;
}
