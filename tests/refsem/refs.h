/*
 * refs.h — the reference formulas, transcribed with the file:line of each
 * (TE at d0067d0, torchao at 36027d8), shared by test_te.c,
 * test_torchao_deepseek.c and test_e2e.c. Nothing here calls precc.
 */
#ifndef REFSEM_REFS_H
#define REFSEM_REFS_H

#include <float.h>
#include "ref.h"

/* common/utils.cuh:873-998 and recipe/current_scaling.cu:55-60: amax is
 * a chain of fmaxf(fabsf(v), m), so NaN never wins. */
static inline float
te_amax(const float *v, long n, long stride)
{
	float m = 0.0f;
	for (long i = 0; i < n; i++)
		m = fmaxf(fabsf(v[i * stride]), m);
	return m;
}

/* recipe/recipe_common.cuh:14-41 compute_scale_from_amax */
static inline float
te_scale_from_amax(float amax, float max_fp8, int pow2, float eps,
                   float value_for_inf)
{
	float scale = 1.f;
	if (amax < eps)
		amax = eps;
	if (isinf(amax) || amax == 0.f || isnan(amax))
		return scale;
	scale = max_fp8 / amax;           /* __fdiv_rn */
	if (isinf(scale))
		scale = value_for_inf;
	if (pow2) {
		uint32_t b = fbits(scale) & 0xFF800000u;
		memcpy(&scale, &b, 4);
	}
	return scale;
}

/* ---- DelayedScaling: the state as TE keeps it (amax_history[0] is this
 * step's amax, written by the cast kernel), updated by kernel_bulk
 * (recipe/delayed_scaling.cu:163-253, no reduction buffer), scaled_max
 * = fp8_max * pow(2, -margin) (:331). */
typedef struct TeState {
	float hist[1024];
	int len;
	float scale;
} TeState;

static inline void
te_update(TeState *s, int most_recent, float scaled_max)
{
	float amax = 0, last = s->hist[0];
	if (last != 0.0f) {                                  /* :186 */
		float a[1024];
		for (int i = 0; i < s->len; i++) {
			a[i] = (i < s->len - 1) ? s->hist[i + 1] : last;  /* :191 */
			amax = fmaxf(amax, a[i]);                        /* :192 */
		}
		for (int i = 0; i < s->len; i++)
			s->hist[i] = (i > 0) ? a[i] : 0;                 /* :196 */
	}
	if (most_recent)
		amax = last;                                     /* :204 */
	float scale = isfinite(amax) && amax > 0 ? scaled_max / amax
	                                         : s->scale;  /* :238-242 */
	if (isinf(scale))
		scale = FLT_MAX;                                 /* :247-249 */
	s->scale = scale;
}

/* ---- MXFP8BlockScaling helpers (cast/mxfp8/quantize_mxfp8.cuh:271-283) */
static inline uint8_t
te_float_to_e8m0(float val)           /* util/ptx_arch_spec.cuh:84-103 */
{
	if (isnan(val))
		return 0xFF;
	if (isinf(val))
		return 0xFE;
	if (val == 0.0f)
		return 0x00;
	uint32_t u = fbits(val);
	uint8_t exponent = (uint8_t)(u >> 23);
	uint32_t mantissa = u & 0x7FFFFF;
	if ((mantissa > 0 && exponent != 0xFE) && !(exponent == 0 && mantissa <= 0x400000))
		++exponent;
	return exponent;
}

static inline float
te_exp2f_rcp(uint8_t b)               /* util/ptx.cuh:309-318 */
{
	uint32_t u = b == 255 ? 0x7fffffffu : b == 254 ? 0x00400000u
	             : (uint32_t)(254 - b) << 23;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* NVFP4 S_enc (cast/nvfp4/core_nvfp4.cuh:82-95) */
static inline float
te_genc(float g)
{
	float s = 448.0f * 6.0f / g;
	s = fminf(s, FLT_MAX);
	if (g == 0.0f || s == 0.0f)
		return 1.0f;
	return s;
}

/* max |v| with NaN winning (torch.max(torch.abs(x)), float8_utils.py:65,
 * torch.amax for axiswise :69, DeepGEMM's .amax, math.py:34/57). */
static inline float
torch_amax(const float *v, long rows, long cols, long stride)
{
	float m = 0.0f;
	for (long r = 0; r < rows; r++)
		for (long c = 0; c < cols; c++) {
			float a = fabsf(v[r * stride + c]);
			if (isnan(a))
				return NAN;
			m = a > m ? a : m;
		}
	return m;
}

/* float8_utils.py:32-51 amax_to_scale: fp64 amax, max / clamp(amax,
 * min=EPS=1e-12) (:20, :47) in fp64, to fp32; optional
 * _round_scale_down_to_power_of_2 (:244-247) = exp2(floor(log2(s))). */
static inline float
ao_scale(float amax, double fmax, int pow2)
{
	double a = (double)amax;
	if (a < 1e-12)                    /* torch.clamp keeps NaN */
		a = 1e-12;
	float s = (float)(fmax / a);
	if (pow2)
		s = exp2f(floorf(log2f(s)));
	return s;
}

/* Codes equal, or both e4m3/e5m2 NaN */
static inline int
code_eq(int r, int g)
{
	return r == g || (r == 0x7f && (g & 0x7f) == 0x7f);
}

/* ---- NVFP4's random Hadamard transform (RHT) on the wgrad operands:
 * the sign vector (pytorch/tensor/nvfp4_tensor.py:49-60) and its mask
 * (get_sign_from_vector, :36-46), the 16x16 matrix by Sylvester's
 * construction (custom_recipes/reference_nvfp4.py:396-419: h = [[h, h],
 * [h, -h]], then diag(signs) @ h), scaled by 1/sqrt(16) (:439), in bf16
 * (nvfp4_tensor.py:103), applied as x_mat @ transform over rows of 16
 * (reference_nvfp4.py:441-443), the product in bf16: each output the
 * exactly rounded sum (computed in fp64), then bf16 RNE. */
static const float te_wgrad_signs[16] = {1, 1, 1, -1, 1, -1, -1, -1,
                                         -1, -1, -1, 1, -1, 1, -1, -1};

static inline unsigned
te_sign_mask(void)
{
	unsigned mask = 0;
	for (int i = 0; i < 16; i++)
		mask |= (unsigned)(te_wgrad_signs[i] == -1) << i;
	return mask;
}

static inline void
te_rht_matrix(float t[16][16])
{
	float h[16][16] = {{1}};
	for (int n = 1; n < 16; n *= 2)             /* Sylvester */
		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++) {
				h[i][j + n] = h[i][j];
				h[i + n][j] = h[i][j];
				h[i + n][j + n] = -h[i][j];
			}
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++)
			t[i][j] = te_wgrad_signs[i] * h[i][j] * (1.0f / 4.0f);
}

/* bf16 RNE of a double, one rounding: the two bf16 neighbours from the
 * fp32 of v rounded toward zero, then the nearer (ties to even). */
static inline uint16_t
bf16_of(double v)
{
	double a = fabs(v);
	if (isnan(v))
		return 0x7fc0;
	uint16_t s = signbit(v) ? 0x8000 : 0;
	if (a >= 0x1.ffp127)
		return s | 0x7f80;
	float f = (float)a;
	if ((double)f > a)
		f = nextafterf(f, 0.0f);
	uint16_t c = (uint16_t)(fbits(f) >> 16);
	uint32_t ul = (uint32_t)c << 16, uh = (uint32_t)(c + 1) << 16;
	float lo, hi;
	memcpy(&lo, &ul, 4);
	memcpy(&hi, &uh, 4);
	if (a - lo > hi - a || (a - lo == hi - a && (c & 1)))
		c++;
	return s | c;
}

/* One block of 16 bf16 values through x @ transform: out[j] the exactly
 * rounded sum (the fp64 sum of the 16 exact products is exact unless the
 * block spans more than about 40 binades). */
static inline void
te_rht16(const float *xin, float t[16][16], uint16_t out[16])
{
	for (int j = 0; j < 16; j++) {
		double sum = 0;
		for (int i = 0; i < 16; i++)
			sum += (double)xin[i] * t[i][j];
		out[j] = bf16_of(sum);
	}
}

#endif
