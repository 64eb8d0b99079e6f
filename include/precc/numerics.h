/*
 * precc/numerics.h — number formats, conversions and scale helpers.
 *
 * Part of precc_ir: depends on libc and libm only. Every conversion is
 * bit-exact with NVIDIA's semantics (the PTX cvt instructions and the host
 * code in cuda_fp8.h / cuda_fp16.h / cuda_bf16.h / cuda_fp6.h / cuda_fp4.h).
 */
#ifndef PRECC_NUMERICS_H
#define PRECC_NUMERICS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Storage formats. Order is part of the ABI (manifests store the name,
 * never the number, but the tables below are indexed by it). */
typedef enum precc_format {
	PRECC_FP32,  /* IEEE binary32 */
	PRECC_TF32,  /* 1.8.10, stored in 32 bits, low 13 mantissa bits zero */
	PRECC_FP16,  /* IEEE binary16 */
	PRECC_BF16,  /* 1.8.7 */
	PRECC_E4M3,  /* fp8 e4m3fn: bias 7, no inf, NaN = S.1111.111, max 448 */
	PRECC_E5M2,  /* fp8 e5m2: bias 15, IEEE-like inf/NaN, max 57344 */
	PRECC_E8M0,  /* ue8m0 scale: 2^(c-127), c = 0xff is NaN, no sign, no zero */
	PRECC_E2M1,  /* fp4 (MX/NVFP4 element): max 6, no inf/NaN */
	PRECC_E3M2,  /* fp6: max 28, no inf/NaN */
	PRECC_E2M3,  /* fp6: max 7.5, no inf/NaN */
	PRECC_NFORMAT
} precc_format;

typedef enum precc_round {
	PRECC_RNE, /* round to nearest, ties to even (cvt.rn) */
	PRECC_RZ,  /* round toward zero (cvt.rz) */
	PRECC_RU,  /* round toward +inf (cvt.rp; used for e8m0 scales) */
	PRECC_SR,  /* stochastic: caller supplies random bits */
	PRECC_NROUND
} precc_round;

typedef struct precc_format_info {
	const char *name;   /* "e4m3", ... as written in recipes and IR */
	int bits;           /* storage width in bits (tf32: 32) */
	int ebits, mbits;   /* exponent and explicit mantissa bits */
	int bias;
	bool has_sign;
	bool has_inf;
	bool has_nan;
	float max;          /* largest finite value */
	float min_normal;   /* smallest positive normal */
	float min_subnormal;/* smallest positive value (== min_normal if none) */
} precc_format_info;

/* Table lookups. precc_format_by_name returns -1 for an unknown name. */
const precc_format_info *precc_format_get(precc_format f);
int precc_format_by_name(const char *name);

/*
 * Encode fp32 -> f. The result is the code in the low `bits` bits
 * (tf32 and fp32 return the fp32 bit pattern).
 *
 * saturate: finite values beyond max clamp to ±max (PTX .satfinite);
 *   otherwise they become inf where the format has one, else NaN
 *   (e4m3) or — for formats with neither (fp6/fp4/e8m0) — saturate anyway,
 *   since those formats cannot express overflow.
 * NaN input gives the format's canonical NaN (positive, 0x7f for e4m3,
 *   0x7f for e5m2? no: e5m2 NaN is 0x7f; fp16 0x7fff; bf16 0x7fff) or,
 *   for formats without NaN, the saturated... see numerics.c.
 * rbits: random bits for PRECC_SR (ignored otherwise). The low
 *   (23 - mbits) bits... see precc_encode's comment in numerics.c for the
 *   exact rule; it matches cvt.rs (add random bits below the kept
 *   mantissa, then truncate).
 */
uint32_t precc_encode(precc_format f, float x, precc_round r, bool saturate,
                      uint32_t rbits);

/* Decode a code of format f back to fp32 (exact: every format here
 * embeds in fp32). */
float precc_decode(precc_format f, uint32_t code);

/* The defaults the kernels use: fp8/fp6/fp4 -> .rn.satfinite,
 * fp16/bf16 -> .rn (overflow to inf), tf32 -> .rna? no: precc uses rn. */
uint32_t precc_encode_default(precc_format f, float x);
bool precc_default_saturate(precc_format f);

/* Fast paths for the interpreter's hot loops (same results as
 * precc_encode(f, x, PRECC_RNE, true, 0)). */
void precc_encode_e4m3_rne_sat(const float *x, uint8_t *out, long n);
void precc_encode_e5m2_rne_sat(const float *x, uint8_t *out, long n);
/* Decode tables: 256 entries, filled on first use (thread-safe). */
const float *precc_decode_table8(precc_format f);

/*
 * Scale helpers (tensorwise/delayed/blockwise all use these).
 *
 *   scale = fmax / amax / 2^margin, optionally rounded down to a power of
 *   two; amax is first clamped below by eps (eps = 0: no clamp).
 *
 * Defined results for degenerate amax (documented in docs/numerics.md):
 *   amax == 0 (after eps) -> 1.0
 *   amax inf or NaN       -> NaN is returned and *nonfinite is set, so the
 *                            caller applies the recipe's inf/NaN policy.
 *   scale overflows fp32  -> FLT_MAX (or 2^127 with pow2).
 */
typedef struct precc_scale_params {
	float fmax;    /* the quantized format's max (448 for e4m3) */
	int margin;    /* TE margin: scale /= 2^margin */
	bool pow2;     /* round scale down to a power of two */
	float eps;     /* amax lower clamp (torchao: 1e-12) */
} precc_scale_params;

float precc_compute_scale(float amax, const precc_scale_params *p, bool *nonfinite);

#ifdef __cplusplus
}
#endif
#endif
