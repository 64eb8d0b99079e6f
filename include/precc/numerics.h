/*
 * precc/numerics.h — number formats, conversions and scale helpers.
 *
 * Part of precc_ir: depends on libc and libm only. Conversions are
 * bit-exact with NVIDIA's semantics: the PTX cvt instructions the kernels
 * use, as implemented by the host code in cuda_fp8.h / cuda_fp16.h /
 * cuda_bf16.h / cuda_fp6.h / cuda_fp4.h (tests/numerics checks every fp32
 * bit pattern against those headers). docs/numerics.md has the tables.
 */
#ifndef PRECC_NUMERICS_H
#define PRECC_NUMERICS_H

#include <stdbool.h>
#include <stddef.h>
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
	PRECC_SR,  /* stochastic: caller supplies random bits (see precc_encode) */
	PRECC_RNA, /* round to nearest, ties away from zero (cvt.rna.tf32.f32) */
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

/* The row of f in the format table; NULL when f is out of range. */
const precc_format_info *precc_format_get(precc_format f);
/* The format called `name` ("fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2",
 * "e8m0", "e2m1", "e3m2", "e2m3"; exact, case-sensitive), or -1. */
int precc_format_by_name(const char *name);
/* "rne", "rz", "ru", "sr", "rna"; precc_round_by_name returns -1 for any
 * other string. */
const char *precc_round_name(precc_round r);
int precc_round_by_name(const char *name);

/*
 * Encode fp32 -> f. The result is the code in the low `bits` bits (sign in
 * the top one); tf32 and fp32 return an fp32 bit pattern (tf32's low 13
 * bits are zero).
 *
 * r: PRECC_RNE, RZ, RU, RNA or SR, for every format. The finite result is
 *   the representable value that rounding the exact x in that mode gives
 *   (subnormals included, -0 kept: a negative x that rounds to zero gives
 *   the sign bit alone). For e8m0, which has no zero and no subnormals,
 *   every |x| <= 2^-127 (zero included) gives code 0 (2^-127), in every
 *   mode.
 *
 * saturate: finite results beyond ±max, and ±inf inputs, become ±max
 *   (PTX .satfinite). Without it, overflow gives:
 *   - ±inf for fp16, bf16, tf32, e5m2 (fp32: the input unchanged);
 *   - NaN for e4m3, which has no inf: 0x7f, or 0xff for negative x (the
 *     sign is kept, as the header's __NV_NOSAT does);
 *   - 0xff (NaN) for e8m0;
 *   - ±max anyway for e2m1, e3m2, e2m3, which can express neither.
 *   Overflow follows the rounding mode as IEEE 754 does: under RZ, and RU
 *   for negative x, a finite x gives ±max, never inf or NaN (RNE, RNA, SR
 *   and RU for positive x overflow as listed).
 *
 * NaN input (any payload, either sign) gives the positive canonical NaN:
 *   e4m3 0x7f, e5m2 0x7f, fp16 0x7fff, bf16 0x7fff, tf32 0x7fffffff,
 *   e8m0 0xff; e2m1/e3m2/e2m3 have no NaN and give +max (0x7 / 0x1f /
 *   0x1f), as cvt.rn.satfinite does. fp32 returns x's bits unchanged.
 *
 * e8m0 has no sign: the sign of x is ignored (encodes |x|), as the
 *   header's __nv_cvt_float_to_e8m0 does.
 *
 * rbits (PRECC_SR only; ignored otherwise): let s be the number of bits
 *   of x's 24-bit significand (implicit bit included) that the target
 *   drops at x's magnitude: s = 23 - mbits for targets in their normal
 *   range, more for subnormal targets (s = 23 - mbits + (emin - e), with
 *   e = x's exponent, emin = 1 - bias). With D the dropped bits as an
 *   integer (0 <= D < 2^s): if s <= 32, the result rounds away from zero
 *   iff D + (rbits mod 2^s) >= 2^s, i.e. with probability exactly D / 2^s
 *   for uniform rbits, so SR is unbiased; if s > 32 (only for x below
 *   2^-8 of the target's smallest step), D is first truncated to its top
 *   32 bits and all 32 rbits are used (bias below 2^-32 of one step). Then saturation
 *   and overflow apply as above. e8m0 (mbits 0, no subnormals): s = 23;
 *   between 2^-127 and 2^-126, D = |x| - 2^-127 in units of 2^-149 and
 *   s = 22. The interpreter and the GPU kernels use this same rule.
 *
 * fp32 is the identity in every mode (saturate only turns ±inf into
 *   ±FLT_MAX).
 */
uint32_t precc_encode(precc_format f, float x, precc_round r, bool saturate,
                      uint32_t rbits);

/* precc_encode without its fast paths: the one integer rounding routine
 * every format and mode share, slower; the reference the fast paths are
 * tested against (tests/numerics), with the same results. */
uint32_t precc_encode_generic(precc_format f, float x, precc_round r, bool saturate,
                              uint32_t rbits);

/* Stochastic rounding with nbits (1..32) random bits, the low nbits of
 * rbits: the rule above with nbits for 32, i.e. rounds away iff
 * D + (rbits mod 2^s) >= 2^s when s <= nbits, else iff
 * floor(D / 2^(s - nbits)) + (rbits mod 2^nbits) >= 2^nbits (bias below
 * 2^-nbits of a step). precc_encode(f, x, PRECC_SR, sat, r) is
 * precc_encode_sr(f, x, sat, r, 32); e2m1 quantizes with 16 (interp.h). */
uint32_t precc_encode_sr(precc_format f, float x, bool saturate, uint32_t rbits, int nbits);

/* Decode a code of format f back to fp32; exact, since every format here
 * embeds in fp32. Bits above the format's width are ignored. fp32 and tf32
 * return the bits as a float; bf16 is code << 16 (NaN payload kept); every
 * other format's NaN codes (e4m3 S.1111.111, e5m2/fp16 exponent all ones
 * with mantissa != 0, e8m0 0xff) decode to the canonical NaN 0x7fffffff,
 * as the CUDA headers' host conversions do. e8m0 code 0 is 2^-127. */
float precc_decode(precc_format f, uint32_t code);

/*
 * The defaults the kernels use:
 *   fp8 (e4m3, e5m2), fp6 (e3m2, e2m3), fp4 (e2m1): RNE, saturate
 *     (cvt.rn.satfinite);
 *   fp16, bf16: RNE, no saturation: overflow to inf (cvt.rn);
 *   tf32: RNA, no saturation (cvt.rna.tf32.f32, the form every target
 *     from sm_80 has; PRECC_RNE gives cvt.rn.tf32.f32 instead);
 *   e8m0: RU, saturate (cvt.rp.satfinite.ue8m0x2.f32, as the
 *     __nv_fp8_e8m0 constructor does);
 *   fp32: the identity.
 */
uint32_t precc_encode_default(precc_format f, float x);
precc_round precc_default_round(precc_format f);
bool precc_default_saturate(precc_format f);

/*
 * Array conversions for the interpreter's hot loops, vectorized for the
 * widest ISA the CPU has (detected at run time; PRECC_INTERP_ISA=baseline|
 * avx2|avx512 caps it, as for the interpreter's GEMM). They assume the
 * default fp32 environment (round to nearest even, no flush to zero).
 *
 * precc_encode_rne_n: code i = precc_encode(f, x[i] * scale, PRECC_RNE,
 *   saturate, 0) for i < n, bit for bit (the product rounded to fp32
 *   first; scale 1 leaves x as it is), stored at f's width: two bytes for
 *   fp16/bf16, one for e4m3/e5m2/e3m2/e2m3, and for e2m1 two codes a byte
 *   from out's first byte, element i in nibble i & 1 (low first; an odd
 *   n's last high nibble is written 0). Returns false, writing nothing,
 *   for the formats it has no fast path for (fp32, tf32, e8m0).
 * precc_decode_n: out[i] = precc_decode(f, code off + i) for i < n, the
 *   codes stored as above (e2m1: code j in nibble j & 1 of byte j / 2).
 * precc_convert_isa: "baseline", "avx2" or "avx512", the copy they run.
 * precc_isa_level: that copy as 1 (baseline), 2 (AVX2 with FMA) or 3
 *   (AVX-512 F, BW and VL): the widest the CPU has, capped by
 *   PRECC_INTERP_ISA, read once; the interpreter's GEMM picks by it too.
 */
bool precc_encode_rne_n(precc_format f, bool saturate, const float *x, float scale,
                        void *out, long n);
void precc_decode_n(precc_format f, const void *codes, size_t off, float *out, long n);
const char *precc_convert_isa(void);
int precc_isa_level(void);

/* precc_encode_rne_n for e4m3 / e5m2, saturating, scale 1. */
void precc_encode_e4m3_rne_sat(const float *x, uint8_t *out, long n);
void precc_encode_e5m2_rne_sat(const float *x, uint8_t *out, long n);

/* Decode table for a format of at most 8 bits (e4m3, e5m2, e8m0, e2m1,
 * e3m2, e2m3): 256 floats, entry c = precc_decode(f, c) (so entries at or
 * above 2^bits repeat, the high bits being ignored). NULL for wider
 * formats. All tables are filled on the first call, once (thread-safe). */
const float *precc_decode_table8(precc_format f);

/*
 * Scale helpers (tensorwise/delayed/blockwise all use these).
 *
 *   a     = |amax|, then max(a, eps) when eps > 0
 *   scale = fmax / a / 2^margin, computed in double and rounded once to
 *           fp32 (margin may be negative)
 *   pow2:   scale rounded down to a power of two (the fp32 scale's
 *           mantissa bits cleared, as Transformer Engine does)
 *
 * Defined results for degenerate amax (docs/numerics.md):
 *   amax == 0 (after eps)  -> 1.0
 *   amax inf or NaN        -> NaN, and *nonfinite is set, so the caller
 *                             applies the recipe's inf/NaN policy
 *   scale beyond fp32      -> FLT_MAX, or 2^127 with pow2
 * *nonfinite (when nonfinite is not NULL) is set to false otherwise.
 * fmax must be positive and finite (a format's max).
 */
typedef struct precc_scale_params {
	float fmax;    /* the quantized format's max (448 for e4m3) */
	int margin;    /* TE margin: scale /= 2^margin */
	bool pow2;     /* round scale down to a power of two */
	float eps;     /* amax lower clamp (torchao: 1e-12) */
	/* Appended knobs; zero keeps the behaviour above (docs/recipes.md). */
	bool amax_over_fmax; /* DeepSeek/DeepGEMM: sf = max(amax, eps) / fmax
	                      * in fp32, scale = 1 / sf (the quantize
	                      * multiplier), scale_inv = sf itself */
	bool zero_keep;      /* TE: amax 0 keeps the previous scale (applied by
	                      * precc_scales; precc_compute_scale still says 1) */
	bool pow2_log2;      /* with pow2: exp2f(floorf(log2f(scale))) as
	                      * torchao float8_utils.py:244-247, which rounds
	                      * a scale within an ulp of log2f below 2^k up to
	                      * 2^k; else the mantissa mask (TE) */
} precc_scale_params;

float precc_compute_scale(float amax, const precc_scale_params *p, bool *nonfinite);

#ifdef __cplusplus
}
#endif
#endif
