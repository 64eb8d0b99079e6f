/*
 * numerics.c — the format table, fp32 <-> format conversions in every
 * rounding mode, the fast fp8 paths and the scale helpers
 * (include/precc/numerics.h documents the semantics; docs/numerics.md
 * the tables and how tests/numerics checks them against CUDA's headers).
 *
 * One integer rounding routine serves every format: x's 24-bit
 * significand is shifted right by the number of bits the target drops at
 * x's magnitude, the dropped bits decide the increment, and the code is
 * built as ((exponent + bias - 1) << mbits) + significand so that a carry
 * out of the mantissa moves into the exponent and subnormal targets need
 * no special case.
 */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include "precc/numerics.h"

static const precc_format_info formats[PRECC_NFORMAT] = {
	/* name    bits eb mb bias  sign   inf    nan    max                   min_normal     min_subnormal */
	[PRECC_FP32] = {"fp32", 32, 8, 23, 127, true, true, true, FLT_MAX, 0x1p-126f, 0x1p-149f},
	[PRECC_TF32] = {"tf32", 32, 8, 10, 127, true, true, true, 0x1.ffcp127f, 0x1p-126f, 0x1p-136f},
	[PRECC_FP16] = {"fp16", 16, 5, 10, 15, true, true, true, 65504.0f, 0x1p-14f, 0x1p-24f},
	[PRECC_BF16] = {"bf16", 16, 8, 7, 127, true, true, true, 0x1.fep127f, 0x1p-126f, 0x1p-133f},
	[PRECC_E4M3] = {"e4m3", 8, 4, 3, 7, true, false, true, 448.0f, 0x1p-6f, 0x1p-9f},
	[PRECC_E5M2] = {"e5m2", 8, 5, 2, 15, true, true, true, 57344.0f, 0x1p-14f, 0x1p-16f},
	[PRECC_E8M0] = {"e8m0", 8, 8, 0, 127, false, false, true, 0x1p127f, 0x1p-127f, 0x1p-127f},
	[PRECC_E2M1] = {"e2m1", 4, 2, 1, 1, true, false, false, 6.0f, 1.0f, 0.5f},
	[PRECC_E3M2] = {"e3m2", 6, 3, 2, 3, true, false, false, 28.0f, 0x1p-2f, 0x1p-4f},
	[PRECC_E2M3] = {"e2m3", 6, 2, 3, 1, true, false, false, 7.5f, 1.0f, 0x1p-3f},
};

/* Per-format encoding constants, in the format's own code space (tf32:
 * 19 bits, moved into fp32 position at the end). */
typedef struct Enc {
	int mbits, bias;
	int sign_shift;     /* where the sign bit goes in the result */
	int code_shift;     /* magnitude code << code_shift (tf32: 13) */
	uint32_t maxcode;   /* largest finite magnitude code */
	uint32_t infcode;   /* magnitude code of inf, 0 = none */
	uint32_t nancode;   /* full result for NaN input */
} Enc;

static const Enc enc[PRECC_NFORMAT] = {
	[PRECC_TF32] = {10, 127, 31, 13, 0x3fbff, 0x3fc00, 0x7fffffff},
	[PRECC_FP16] = {10, 15, 15, 0, 0x7bff, 0x7c00, 0x7fff},
	[PRECC_BF16] = {7, 127, 15, 0, 0x7f7f, 0x7f80, 0x7fff},
	[PRECC_E4M3] = {3, 7, 7, 0, 0x7e, 0, 0x7f},
	[PRECC_E5M2] = {2, 15, 7, 0, 0x7b, 0x7c, 0x7f},
	[PRECC_E2M1] = {1, 1, 3, 0, 0x7, 0, 0x7},
	[PRECC_E3M2] = {2, 3, 5, 0, 0x1f, 0, 0x1f},
	[PRECC_E2M3] = {3, 1, 5, 0, 0x1f, 0, 0x1f},
};

static const char *const round_names[PRECC_NROUND] = {
	[PRECC_RNE] = "rne", [PRECC_RZ] = "rz", [PRECC_RU] = "ru",
	[PRECC_SR] = "sr", [PRECC_RNA] = "rna",
};

static uint32_t
f2u(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof u);
	return u;
}

static float
u2f(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof x);
	return x;
}

const precc_format_info *
precc_format_get(precc_format f)
{
	return (unsigned)f < PRECC_NFORMAT ? &formats[f] : NULL;
}

int
precc_format_by_name(const char *name)
{
	for (int i = 0; name && i < PRECC_NFORMAT; i++)
		if (!strcmp(name, formats[i].name))
			return i;
	return -1;
}

const char *
precc_round_name(precc_round r)
{
	return (unsigned)r < PRECC_NROUND ? round_names[r] : "?";
}

int
precc_round_by_name(const char *name)
{
	for (int i = 0; name && i < PRECC_NROUND; i++)
		if (!strcmp(name, round_names[i]))
			return i;
	return -1;
}

/* Whether to add one to the truncated magnitude `code`, given the s
 * dropped bits `rem` (s >= 1); SR with nb (1..32) random bits. */
static int
round_up(precc_round r, uint64_t rem, int s, uint32_t code, bool neg, uint32_t rbits, int nb)
{
	uint64_t half = (uint64_t)1 << (s - 1);

	switch (r) {
	case PRECC_RNE: return rem > half || (rem == half && (code & 1));
	case PRECC_RNA: return rem >= half;
	case PRECC_RU:  return rem != 0 && !neg;
	case PRECC_SR:
		if (s <= nb)
			return (rem + (rbits & (uint32_t)(((uint64_t)1 << s) - 1))) >> s != 0;
		return ((rem >> (s - nb)) + (rbits & (uint32_t)(((uint64_t)1 << nb) - 1))) >> nb != 0;
	default:        return 0;     /* RZ */
	}
}

static uint32_t
encode_e8m0(float x, precc_round r, bool saturate, uint32_t rbits, int nb)
{
	uint32_t a = f2u(x) & 0x7fffffff, code;

	if (a > 0x7f800000)
		return 0xff;
	if (a == 0x7f800000)
		return saturate ? 0xfe : 0xff;
	if (a < 0x00800000) {
		/* Between 0 and 2^-126: code 0 (2^-127) or code 1 (2^-126). */
		if (a <= 0x00400000)
			return 0;
		uint64_t rem = a - 0x00400000;     /* 22 bits past 2^-127 */
		code = (uint32_t)round_up(r, rem, 22, 0, false, rbits, nb);
	} else {
		code = a >> 23;
		code += (uint32_t)round_up(r, a & 0x7fffff, 23, code, false, rbits, nb);
	}
	if (code == 0xff && saturate)
		code = 0xfe;
	return code;
}

static uint32_t
encode(precc_format f, float x, precc_round r, bool saturate, uint32_t rbits, int nb)
{
	uint32_t u = f2u(x), a = u & 0x7fffffff;
	bool neg = u >> 31;

	if (f == PRECC_FP32) {
		if (saturate && a == 0x7f800000)
			return f2u(neg ? -FLT_MAX : FLT_MAX);
		return u;
	}
	if (f == PRECC_E8M0)
		return encode_e8m0(x, r, saturate, rbits, nb);
	if ((unsigned)f >= PRECC_NFORMAT)
		return 0;

	const Enc *e = &enc[f];
	if (a > 0x7f800000)
		return e->nancode;

	uint32_t sign = (uint32_t)neg << e->sign_shift, code;
	bool toward_zero = r == PRECC_RZ || (r == PRECC_RU && neg);
	if (a == 0x7f800000) {
		code = e->maxcode + 1;        /* overflow, handled below */
		toward_zero = false;
	} else {
		int ex = (int)(a >> 23);
		uint64_t sig = a & 0x7fffff;
		if (ex)
			sig |= 0x800000;
		else
			ex = 1;                   /* fp32 subnormal: 2^-126 scale */
		ex -= 127;
		int emin = 1 - e->bias, et = ex > emin ? ex : emin;
		int s = 23 - e->mbits + (et - ex);
		if (s > 63)
			s = 63;                   /* everything dropped, sig < 2^24 */
		uint64_t k = sig >> s, rem = sig & (((uint64_t)1 << s) - 1);
		/* code = ((et + bias - 1) << mbits) + k, in 64 bits: et may be
		 * far above the format's range. */
		int64_t c = ((int64_t)(et + e->bias - 1) << e->mbits) + (int64_t)k;
		c += round_up(r, rem, s, (uint32_t)k, neg, rbits, nb);
		code = c > (int64_t)e->maxcode ? e->maxcode + 1 : (uint32_t)c;
	}
	if (code > e->maxcode) {
		if (saturate || toward_zero || (!e->infcode && f != PRECC_E4M3))
			code = e->maxcode;
		else if (e->infcode)
			code = e->infcode;
		else
			return sign | e->nancode; /* e4m3: no inf; NaN keeps x's sign */
	}
	return sign | code << e->code_shift;
}

static uint32_t rne_fast(precc_format f, float x, bool saturate);

uint32_t
precc_encode(precc_format f, float x, precc_round r, bool saturate, uint32_t rbits)
{
	if (r == PRECC_RNE && f != PRECC_FP32 && f != PRECC_TF32 && f != PRECC_E8M0
	    && (unsigned)f < PRECC_NFORMAT)
		return rne_fast(f, x, saturate);
	return encode(f, x, r, saturate, rbits, 32);
}

uint32_t
precc_encode_generic(precc_format f, float x, precc_round r, bool saturate, uint32_t rbits)
{
	return encode(f, x, r, saturate, rbits, 32);
}

uint32_t
precc_encode_sr(precc_format f, float x, bool saturate, uint32_t rbits, int nbits)
{
	return encode(f, x, PRECC_SR, saturate, rbits, nbits < 1 ? 1 : nbits > 32 ? 32 : nbits);
}

/* Decode from the bit fields; precc_decode serves the narrow formats from
 * tables filled by this. */
static float
decode_fields(precc_format f, uint32_t code)
{
	switch (f) {
	case PRECC_FP32:
	case PRECC_TF32:
		return u2f(code);
	case PRECC_BF16:
		return u2f((code & 0xffff) << 16);
	case PRECC_E8M0:
		code &= 0xff;
		if (code == 0xff)
			return u2f(0x7fffffff);
		return code ? u2f(code << 23) : 0x1p-127f;
	default:
		break;
	}
	if ((unsigned)f >= PRECC_NFORMAT)
		return u2f(0x7fffffff);

	const precc_format_info *fi = &formats[f];
	int m = fi->mbits, eb = fi->ebits;
	uint32_t mag = code & ((1u << (fi->bits - 1)) - 1);
	bool neg = code >> (fi->bits - 1) & 1;
	uint32_t ef = mag >> m, mf = mag & ((1u << m) - 1);

	if (f == PRECC_E4M3 && mag == 0x7f)
		return u2f(0x7fffffff);
	if (fi->has_inf && ef == (1u << eb) - 1) {
		if (mf)
			return u2f(0x7fffffff);
		return neg ? -INFINITY : INFINITY;
	}
	/* value = (ef ? 2^m + mf : mf) * 2^(max(ef,1) - bias - m), exact */
	float v = ldexpf((float)(ef ? (1u << m) + mf : mf), (ef ? (int)ef : 1) - fi->bias - m);
	return neg ? -v : v;
}

static float tables8[PRECC_NFORMAT][256];
static float e2m1_pairs[256][2];     /* byte -> its two e2m1 values */
static once_flag tables8_once = ONCE_FLAG_INIT;

static void
fill_tables8(void)
{
	for (int f = 0; f < PRECC_NFORMAT; f++)
		if (formats[f].bits <= 8)
			for (uint32_t c = 0; c < 256; c++)
				tables8[f][c] = decode_fields((precc_format)f, c);
	for (uint32_t c = 0; c < 256; c++) {
		e2m1_pairs[c][0] = tables8[PRECC_E2M1][c & 0xf];
		e2m1_pairs[c][1] = tables8[PRECC_E2M1][c >> 4];
	}
}

float
precc_decode(precc_format f, uint32_t code)
{
	switch (f) {
	case PRECC_FP32:
	case PRECC_TF32:
		return u2f(code);
	case PRECC_BF16:
		return u2f((code & 0xffff) << 16);
	case PRECC_FP16: {
		uint32_t sign = (code & 0x8000) << 16, e = (code >> 10) & 0x1f, m = code & 0x3ff;
		if (e == 0x1f)
			return m ? u2f(0x7fffffff) : u2f(sign | 0x7f800000);
		if (e == 0)                       /* subnormal: m * 2^-24, exact */
			return u2f(sign | f2u((float)m * 0x1p-24f));
		return u2f(sign | (e + 112) << 23 | m << 13);
	}
	default:
		if ((unsigned)f >= PRECC_NFORMAT)
			return u2f(0x7fffffff);
		call_once(&tables8_once, fill_tables8);
		return tables8[f][code & 0xff];
	}
}

precc_round
precc_default_round(precc_format f)
{
	switch (f) {
	case PRECC_TF32: return PRECC_RNA;
	case PRECC_E8M0: return PRECC_RU;
	default:         return PRECC_RNE;
	}
}

bool
precc_default_saturate(precc_format f)
{
	switch (f) {
	case PRECC_E4M3: case PRECC_E5M2: case PRECC_E8M0:
	case PRECC_E2M1: case PRECC_E3M2: case PRECC_E2M3:
		return true;
	default:
		return false;
	}
}

uint32_t
precc_encode_default(precc_format f, float x)
{
	return precc_encode(f, x, precc_default_round(f), precc_default_saturate(f), 0);
}

/*
 * Fast RNE paths (docs/numerics.md, "Fast paths"). Narrow formats, normal
 * targets: rebias the fp32 pattern and round the dropped bits with the
 * usual "add half-ulp-minus-one plus the kept LSB" trick. Subnormal
 * targets: |x| + 2^(q+23), where 2^q is the target's subnormal step, makes
 * the FPU round |x| to a multiple of 2^q (ties to even); the low bits of
 * the sum are the code. bf16 is fp32's top half, rounded the same way.
 * Branches are masks, so the loops vectorize; each loop is compiled for
 * the baseline, AVX2 and AVX-512 and the widest the CPU has runs
 * (PRECC_INTERP_ISA caps it, as for the GEMM). Every one is checked bit
 * for bit against the generic encoder (tests/numerics).
 */
/* all-ones when cond, else zero */
#define MASK(cond) (0u - (uint32_t)(cond))
#define INLINE static inline __attribute__((always_inline))

/* The constants of one narrow format's RNE encoder. */
typedef struct Rne {
	int mbits, bias, sign_shift;
	uint32_t big;       /* |x| bits above this overflow (or saturate) */
	uint32_t bigcode;   /* the magnitude code they get; sign is kept */
	uint32_t nancode;   /* the result for NaN input */
} Rne;

/* Above max for satfinite; for no-saturate, from the midpoint between max
 * and the next step up that ties away from max (e4m3 464 -> NaN, e5m2
 * 61440 -> inf, fp16 65520 -> inf). e2m1/e3m2/e2m3 saturate either way. */
static const Rne rne_sat[PRECC_NFORMAT] = {
	[PRECC_FP16] = {10, 15, 15, 0x477fe000, 0x7bff, 0x7fff},
	[PRECC_E4M3] = {3, 7, 7, 0x43e00000, 0x7e, 0x7f},
	[PRECC_E5M2] = {2, 15, 7, 0x47600000, 0x7b, 0x7f},
	[PRECC_E2M1] = {1, 1, 3, 0x40c00000, 0x7, 0x7},
	[PRECC_E3M2] = {2, 3, 5, 0x41e00000, 0x1f, 0x1f},
	[PRECC_E2M3] = {3, 1, 5, 0x40f00000, 0x1f, 0x1f},
};
static const Rne rne_nosat[PRECC_NFORMAT] = {
	[PRECC_FP16] = {10, 15, 15, 0x477fefff, 0x7c00, 0x7fff},
	[PRECC_E4M3] = {3, 7, 7, 0x43e80000, 0x7f, 0x7f},
	[PRECC_E5M2] = {2, 15, 7, 0x476fffff, 0x7c, 0x7f},
	[PRECC_E2M1] = {1, 1, 3, 0x40c00000, 0x7, 0x7},
	[PRECC_E3M2] = {2, 3, 5, 0x41e00000, 0x1f, 0x1f},
	[PRECC_E2M3] = {3, 1, 5, 0x40f00000, 0x1f, 0x1f},
};

/* k's fields are compile-time constants where this is inlined. */
INLINE uint32_t
rne_narrow(float x, const Rne k)
{
	int drop = 23 - k.mbits;
	uint32_t u = f2u(x), a = u & 0x7fffffff, sign = (u >> 31) << k.sign_shift;
	uint32_t n = (a - ((uint32_t)(127 - k.bias) << 23) + ((1u << (drop - 1)) - 1)
	              + ((a >> drop) & 1)) >> drop;
	/* 2^(q+23), q = 1 - bias - mbits the subnormal step's exponent */
	uint32_t addbits = (uint32_t)(127 + 24 - k.bias - k.mbits) << 23;
	uint32_t d = f2u(u2f(a) + u2f(addbits)) - addbits;
	uint32_t sub = MASK(a < (uint32_t)(128 - k.bias) << 23), big = MASK(a > k.big);
	uint32_t nan = MASK(a > 0x7f800000);
	uint32_t c = (d & sub) | (n & ~sub);
	c = (k.bigcode & big) | (c & ~big);
	return (k.nancode & nan) | ((c | sign) & ~nan);
}

/* bf16: fp32's top half; overflow carries into inf. */
INLINE uint32_t
rne_bf16(float x, bool sat)
{
	uint32_t u = f2u(x), a = u & 0x7fffffff;
	uint32_t c = (u + 0x7fff + ((u >> 16) & 1)) >> 16;
	uint32_t nan = MASK(a > 0x7f800000);
	uint32_t big = MASK(sat && (c & 0x7fff) == 0x7f80);
	c = (((c & 0x8000) | 0x7f7f) & big) | (c & ~big);
	return (0x7fff & nan) | (c & ~nan);
}

/* precc_encode's RNE path for fp16, bf16 and the narrow formats. */
static uint32_t
rne_fast(precc_format f, float x, bool saturate)
{
	if (f == PRECC_BF16)
		return rne_bf16(x, saturate);
	return rne_narrow(x, saturate ? rne_sat[f] : rne_nosat[f]);
}

/* One copy of every array loop per ISA: BODY(name, target) defines
 * name##_base, name##_avx2 and name##_avx512. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_ISA_COPIES 1
/* 512-bit vectors: GCC prefers 256 bits by default (twice slower here:
 * bench/RESULTS.md); byte and word stores want AVX512BW/VL. */
#ifdef __clang__
#define TGT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl"), min_vector_width(512)))
#else
#define TGT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,prefer-vector-width=512")))
#endif
#define COPIES(BODY, name) \
	BODY(name##_base, ) \
	BODY(name##_avx2, __attribute__((target("avx2")))) \
	BODY(name##_avx512, TGT_AVX512)
#else
#define COPIES(BODY, name) BODY(name##_base, )
#endif

enum { ISA_BASE = 1, ISA_AVX2, ISA_AVX512 };

/* The widest copy the CPU runs, capped by PRECC_INTERP_ISA (baseline,
 * avx2, avx512), read once; ir/interp/gemm.c picks its copies by it too.
 * AVX2 comes with FMA (the GEMM's copies use it), AVX-512 with BW and VL
 * (byte and word stores here). */
int
precc_isa_level(void)
{
#ifdef HAVE_ISA_COPIES
	static atomic_int state;       /* 0 unknown */
	int s = atomic_load_explicit(&state, memory_order_relaxed);

	if (s == 0) {
		const char *e = getenv("PRECC_INTERP_ISA");
		int want = !e ? ISA_AVX512 : !strcmp(e, "baseline") ? ISA_BASE
		           : !strcmp(e, "avx2") ? ISA_AVX2 : ISA_AVX512;
		int have = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
		           && __builtin_cpu_supports("avx512vl") ? ISA_AVX512
		           : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? ISA_AVX2
		           : ISA_BASE;
		s = want < have ? want : have;
		atomic_store_explicit(&state, s, memory_order_relaxed);
	}
	return s;
#else
	return ISA_BASE;
#endif
}

const char *
precc_convert_isa(void)
{
	static const char *const names[] = {"?", "baseline", "avx2", "avx512"};
	return names[precc_isa_level()];
}

/* out[i] = code of x[i] * scale; fixed trip counts vectorize at -O2. The
 * product is rounded to fp32 first (no contraction: ISO C mode). */
#define NARROW_LOOP(T, FMT, SAT) \
	do { \
		T *o = out; \
		const Rne k = (SAT) ? rne_sat[FMT] : rne_nosat[FMT]; \
		for (; i + 32 <= n; i += 32) \
			for (int j = 0; j < 32; j++) \
				o[i + j] = (T)rne_narrow(x[i + j] * scale, k); \
		for (; i < n; i++) \
			o[i] = (T)rne_narrow(x[i] * scale, k); \
	} while (0)

/* e2m1: element i is nibble i & 1 (low first) of byte i / 2; the codes of
 * 32 elements go through a buffer, so that both loops vectorize. */
#define E2M1_LOOP() \
	do { \
		uint8_t *o = out, c[32]; \
		const Rne k = rne_sat[PRECC_E2M1]; \
		for (; i + 32 <= n; i += 32) { \
			for (int j = 0; j < 32; j++) \
				c[j] = (uint8_t)rne_narrow(x[i + j] * scale, k); \
			for (int j = 0; j < 16; j++) \
				o[i / 2 + j] = (uint8_t)(c[2 * j] | c[2 * j + 1] << 4); \
		} \
		for (; i + 1 < n; i += 2) \
			o[i / 2] = (uint8_t)(rne_narrow(x[i] * scale, k) \
			                     | rne_narrow(x[i + 1] * scale, k) << 4); \
		if (i < n) \
			o[i / 2] = (uint8_t)rne_narrow(x[i] * scale, k); \
	} while (0)

#define BF16_LOOP(SAT) \
	do { \
		uint16_t *o = out; \
		for (; i + 32 <= n; i += 32) \
			for (int j = 0; j < 32; j++) \
				o[i + j] = (uint16_t)rne_bf16(x[i + j] * scale, SAT); \
		for (; i < n; i++) \
			o[i] = (uint16_t)rne_bf16(x[i] * scale, SAT); \
	} while (0)

#define ENCODE_BODY(name, target) \
target static void \
name(precc_format f, bool sat, const float *restrict x, float scale, void *restrict out, long n) \
{ \
	long i = 0; \
	switch (f) { \
	case PRECC_BF16: \
		if (sat) BF16_LOOP(true); else BF16_LOOP(false); \
		break; \
	case PRECC_FP16: \
		if (sat) NARROW_LOOP(uint16_t, PRECC_FP16, true); else NARROW_LOOP(uint16_t, PRECC_FP16, false); \
		break; \
	case PRECC_E4M3: \
		if (sat) NARROW_LOOP(uint8_t, PRECC_E4M3, true); else NARROW_LOOP(uint8_t, PRECC_E4M3, false); \
		break; \
	case PRECC_E5M2: \
		if (sat) NARROW_LOOP(uint8_t, PRECC_E5M2, true); else NARROW_LOOP(uint8_t, PRECC_E5M2, false); \
		break; \
	case PRECC_E3M2: NARROW_LOOP(uint8_t, PRECC_E3M2, true); break; \
	case PRECC_E2M3: NARROW_LOOP(uint8_t, PRECC_E2M3, true); break; \
	case PRECC_E2M1: E2M1_LOOP(); break; \
	default: break; \
	} \
}
COPIES(ENCODE_BODY, encode_rne)

bool
precc_encode_rne_n(precc_format f, bool saturate, const float *x, float scale, void *out, long n)
{
	switch (f) {
	case PRECC_BF16: case PRECC_FP16: case PRECC_E4M3: case PRECC_E5M2:
	case PRECC_E2M1: case PRECC_E3M2: case PRECC_E2M3:
		break;
	default:
		return false;
	}
	if (n <= 0)
		return true;
	switch (precc_isa_level()) {
#ifdef HAVE_ISA_COPIES
	case ISA_AVX512: encode_rne_avx512(f, saturate, x, scale, out, n); break;
	case ISA_AVX2: encode_rne_avx2(f, saturate, x, scale, out, n); break;
#endif
	default: encode_rne_base(f, saturate, x, scale, out, n); break;
	}
	return true;
}

void
precc_encode_e4m3_rne_sat(const float *x, uint8_t *out, long n)
{
	precc_encode_rne_n(PRECC_E4M3, true, x, 1.0f, out, n);
}

void
precc_encode_e5m2_rne_sat(const float *x, uint8_t *out, long n)
{
	precc_encode_rne_n(PRECC_E5M2, true, x, 1.0f, out, n);
}

/* Decoders: bf16 is a shift; fp16 rebiases (x 2^112 makes its subnormals
 * fp32 normals, exactly) and fixes inf/NaN; the 8-bit formats look up
 * their table, e2m1 a table of byte -> two floats. */
INLINE float
dec_fp16(uint32_t h)
{
	uint32_t sign = (h & 0x8000) << 16, m = h & 0x7fff;
	uint32_t v = f2u(u2f(m << 13) * 0x1p112f);
	uint32_t inf = MASK(m == 0x7c00), nan = MASK(m > 0x7c00);
	v = (0x7f800000 & inf) | (v & ~inf);
	return u2f((0x7fffffff & nan) | ((v | sign) & ~nan));
}

#define DECODE_BODY(name, target) \
target static void \
name(precc_format f, const void *restrict codes, size_t off, float *restrict out, long n, \
     const float *restrict t) \
{ \
	long i = 0; \
	switch (f) { \
	case PRECC_BF16: { \
		const uint16_t *s = (const uint16_t *)codes + off; \
		for (; i + 32 <= n; i += 32) \
			for (int j = 0; j < 32; j++) \
				out[i + j] = u2f((uint32_t)s[i + j] << 16); \
		for (; i < n; i++) \
			out[i] = u2f((uint32_t)s[i] << 16); \
		break; \
	} \
	case PRECC_FP16: { \
		const uint16_t *s = (const uint16_t *)codes + off; \
		for (; i + 32 <= n; i += 32) \
			for (int j = 0; j < 32; j++) \
				out[i + j] = dec_fp16(s[i + j]); \
		for (; i < n; i++) \
			out[i] = dec_fp16(s[i]); \
		break; \
	} \
	case PRECC_E2M1: { \
		const uint8_t *s = (const uint8_t *)codes + off / 2; \
		if (off % 2 && n > 0) \
			out[i++] = t[*s++ >> 4]; \
		for (; i + 1 < n; i += 2, s++) { \
			out[i] = e2m1_pairs[*s][0]; \
			out[i + 1] = e2m1_pairs[*s][1]; \
		} \
		if (i < n) \
			out[i] = t[*s & 0xf]; \
		break; \
	} \
	default: { \
		const uint8_t *s = (const uint8_t *)codes + off; \
		for (; i < n; i++) \
			out[i] = t[s[i]]; \
		break; \
	} \
	} \
}
COPIES(DECODE_BODY, decode)

const float *
precc_decode_table8(precc_format f)
{
	if ((unsigned)f >= PRECC_NFORMAT || formats[f].bits > 8)
		return NULL;
	call_once(&tables8_once, fill_tables8);
	return tables8[f];
}

void
precc_decode_n(precc_format f, const void *codes, size_t off, float *out, long n)
{
	const float *t = NULL;

	if (n <= 0 || (unsigned)f >= PRECC_NFORMAT)
		return;
	if (f == PRECC_FP32 || f == PRECC_TF32) {
		memcpy(out, (const float *)codes + off, (size_t)n * sizeof *out);
		return;
	}
	if (formats[f].bits <= 8) {
		call_once(&tables8_once, fill_tables8);
		t = tables8[f];
	}
	switch (precc_isa_level()) {
#ifdef HAVE_ISA_COPIES
	case ISA_AVX512: decode_avx512(f, codes, off, out, n, t); break;
	case ISA_AVX2: decode_avx2(f, codes, off, out, n, t); break;
#endif
	default: decode_base(f, codes, off, out, n, t); break;
	}
}

float
precc_compute_scale(float amax, const precc_scale_params *p, bool *nonfinite)
{
	float a = fabsf(amax);

	if (nonfinite)
		*nonfinite = false;
	if (!isfinite(a)) {
		if (nonfinite)
			*nonfinite = true;
		return NAN;
	}
	if (p->eps > 0 && a < p->eps)
		a = p->eps;
	if (a == 0)
		return 1.0f;
	if (p->amax_over_fmax) {
		/* DeepGEMM utils/math.py:34-38: sf = amax / 448; x * (1.0 / sf) */
		float sf = a / p->fmax;
		if (sf == 0.0f)
			return FLT_MAX;
		return 1.0f / sf;
	}

	double d = ldexp((double)p->fmax / (double)a, -p->margin);
	if (d > FLT_MAX)
		return p->pow2 ? 0x1p127f : FLT_MAX;
	float s = (float)d;
	if (p->pow2 && p->pow2_log2)
		return exp2f(floorf(log2f(s)));
	if (p->pow2 && s > 0) {
		uint32_t b = f2u(s);
		if (b >= 0x00800000)
			b &= 0xff800000;
		else {
			while (b & (b - 1))    /* subnormal: keep the top bit */
				b &= b - 1;
		}
		s = u2f(b);
	}
	return s;
}
