/*
 * interp/gemm.c — C[M,N] = epilogue(A[M,K] . B[N,K]^T) on the CPU, with
 * precc's accumulation models (exact fp32, promotion every P K-elements
 * with block scales, a B-bit truncating inner accumulator).
 *
 * Structure (BLIS-like): each task owns an NC-column strip of up to
 * MAXGRP MC-row blocks of C. For each K-chunk of P elements and each KC
 * panel inside it, the task packs B (NR-column micro-panels) once and A
 * (MR-row micro-panels) per block, decoded to fp32, and runs a 6x16
 * register-blocked microkernel. Every element of C sees the
 * same operation sequence (ascending k, one fp32 mul then one fp32 add;
 * a block-scaled promotion is one fused multiply-add, DeepGEMM's FFMA,
 * promote_body) whatever the tile, thread or vector width, so results are
 * bit-identical for any thread count and on any x86-64 or other machine.
 * On x86-64 the macro kernel is compiled twice (baseline SSE2 with 4-float
 * vectors, and AVX2 without FMA with 8-float vectors) and picked at run
 * time. This file relies on -ffp-contract=off, the default in ISO C mode
 * (-std=c17); a GNU-mode build could contract mul+add into FMA where the
 * baseline target has one (aarch64), and tests/interp/test_gemm.c, which
 * compares bit for bit against a scalar model, would say so.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

enum { MR = 6, NR = 16, KC = 256, MC = 192, NC = 256, MAXGRP = 8 };

/* 8-float GNU vectors for the AVX2 copy (the baseline uses 4-float ones,
 * below). Static and always inlined, so the -Wpsabi note does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));

/* An AVX2 copy of the macro kernel, chosen at run time. No ifunc
 * (target_clones): its resolvers run before sanitizers start, and not
 * every libc has them. AVX2 without FMA: the arithmetic is the same. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_COPY 1
/* The vector helpers carry the target of their callers: clang refuses a
 * 256/512-bit vector return from a function compiled without AVX. */
#define TGT_AVX2 __attribute__((target("avx2")))
#define TGT_AVX512 __attribute__((target("avx512f")))
#else
#define TGT_AVX2
#define TGT_AVX512
#endif

typedef struct Gemm {
	const precc_gemm_desc *d;
	long P;                     /* promotion chunk along K */
	long abr, abc, anbc;        /* A scale blocks (resolved) */
	long bbr, bbc, bnbc;        /* B scale blocks */
	uint32_t accmask;           /* inner accumulator mask, ~0 = fp32 */
	int tensorwise;             /* one scale_inv per operand (or none) */
	float ts, tp;               /* then sa * sb as ts * tp * tp (tensor_scale) */
	int exact;                  /* exact_products(a, b) */
	int fused;                  /* promotion in the micro-kernel (promo_*) */
	const float *lut_a, *lut_b; /* 8-bit decode tables, fetched up front */
	long nmc, nnc, ntasks;
	long grp, ngrp;             /* MC blocks per task, tasks per strip */
	atomic_long next;
} Gemm;

typedef struct Worker {
	Gemm *g;
	float *ap, *bp, *inner, *outer, *row;
	float amax;
	int nan;
} Worker;

TGT_AVX2 static inline __attribute__((always_inline)) v8
vload(const float *p)
{
	v8 v;
	memcpy(&v, p, sizeof v);
	return v;
}

#define VSTORE(p, v) memcpy((p), &(v), sizeof(v))

TGT_AVX2 static inline __attribute__((always_inline)) v8
vsplat(float x)
{
	v8 v = { x, x, x, x, x, x, x, x };
	return v;
}

/* Truncate v toward zero to the bits of mask (a macro: GCC notes an ABI
 * change for vector parameters). inf has a zero mantissa and every NaN an
 * fp32 add produces is quiet (bit 22 set, kept for any B >= 1), so both
 * pass unchanged without a test. */
#define VTRUNC(v) do { \
	__typeof__(mask) u_; \
	memcpy(&u_, &(v), sizeof u_); \
	u_ &= mask; \
	memcpy(&(v), &u_, sizeof u_); \
} while (0)

/*
 * c[MR x NR] (row stride ldc) = (load ? c : 0) + sum over kc of a (x) b,
 * one fl(mul) then one fl(add) per k, ascending; trunc after each add when
 * trunc is set. a: kc x MR, b: kc x NR, both packed.
 */
#ifdef HAVE_AVX2_COPY
/* c + a*b in one rounding: only where the product is exact in fp32
 * (exact_products below), so the bits equal the separate mul and add. */
#define FMA8(a, b, c) ((v8)_mm256_fmadd_ps(_mm256_set1_ps(a), (b), (c)))
#define FMA16(a, b, c) ((v16)_mm512_fmadd_ps(_mm512_set1_ps(a), (b), (c)))
#define MULADD8(a, b, c) (fma ? FMA8(a, b, c) : (c) + (a) * (b))
#define MULADD16(a, b, c) (fma ? FMA16(a, b, c) : (c) + (a) * (b))

/* A promotion done from the micro-kernel's registers (the AVX2 and
 * AVX-512 copies, blockwise scales, chunks of at most KC): the tile's sums go
 * straight into the outer sums at o, never to memory as inner sums. */
typedef struct Promo {
	const float *sa, *sb;       /* the tile's rows' and columns' scales */
	float *o;                   /* its outer sums, stride ldc */
	int first;                  /* the first chunk: o = 0 + ... */
} Promo;

__attribute__((target("avx2,fma"))) static inline
__attribute__((always_inline)) void
microkernel(long kc, const float *restrict a, const float *restrict b,
            float *restrict c, long ldc, int load, int trunc, uint32_t m32,
            int fma, const Promo *pr)
{
	vi8 mask = { (int32_t)m32, (int32_t)m32, (int32_t)m32, (int32_t)m32,
	             (int32_t)m32, (int32_t)m32, (int32_t)m32, (int32_t)m32 };
	/* MR = 6 rows x 2 vectors, spelled out so they stay in registers */
	v8 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
	long k;

#define LD(i) do { \
	c##i##0 = load ? vload(c + i * ldc) : vsplat(0.0f); \
	c##i##1 = load ? vload(c + i * ldc + 8) : vsplat(0.0f); \
} while (0)
	LD(0); LD(1); LD(2); LD(3); LD(4); LD(5);
#undef LD
	if (!trunc) {
		for (k = 0; k < kc; k++) {
			v8 b0 = vload(b + k * NR), b1 = vload(b + k * NR + 8);
			float as;
#define STEP(i) do { \
	as = a[k * MR + i]; \
	c##i##0 = MULADD8(as, b0, c##i##0); \
	c##i##1 = MULADD8(as, b1, c##i##1); \
} while (0)
			STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5);
#undef STEP
		}
	} else {
		/* 12 accumulators, both B vectors, one broadcast and the mask:
		 * all 16 registers, each a[] broadcast once a k (reloading it
		 * for the second B vector made 12 broadcasts a k, 1.65x the
		 * cycles of OpenBLAS's kernel) */
		__m256 fmask = (__m256)mask;
		for (k = 0; k < kc; k++) {
			const float *ak = a + k * MR;
			v8 b0 = vload(b + k * NR), b1 = vload(b + k * NR + 8);
			float as;
/* the mask as a float AND (vandps): the accumulator stays in the FP
 * domain (an integer AND costs a bypass delay each way on some cores) */
#define STEP(i) do { \
	as = ak[i]; \
	c##i##0 = MULADD8(as, b0, c##i##0); \
	c##i##1 = MULADD8(as, b1, c##i##1); \
	c##i##0 = (v8)_mm256_and_ps((__m256)c##i##0, fmask); \
	c##i##1 = (v8)_mm256_and_ps((__m256)c##i##1, fmask); \
} while (0)
			STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5);
#undef STEP
		}
	}
	if (pr) {
		/* the chunk's promotion, as promote_body does it */
		v8 sb0 = vload(pr->sb), sb1 = vload(pr->sb + 8), z = vsplat(0.0f);
#define PR(i) do { \
	v8 s_ = vsplat(pr->sa[i]); \
	v8 o0_ = pr->first ? z : vload(pr->o + i * ldc); \
	v8 o1_ = pr->first ? z : vload(pr->o + i * ldc + 8); \
	o0_ = (v8)_mm256_fmadd_ps(c##i##0, s_ * sb0, o0_); \
	o1_ = (v8)_mm256_fmadd_ps(c##i##1, s_ * sb1, o1_); \
	VSTORE(pr->o + i * ldc, o0_); \
	VSTORE(pr->o + i * ldc + 8, o1_); \
} while (0)
		PR(0); PR(1); PR(2); PR(3); PR(4); PR(5);
#undef PR
		return;
	}
#define ST(i) do { \
	VSTORE(c + i * ldc, c##i##0); \
	VSTORE(c + i * ldc + 8, c##i##1); \
} while (0)
	ST(0); ST(1); ST(2); ST(3); ST(4); ST(5);
#undef ST
}

#endif

/* The same 6x16 tile with 4-float vectors, for targets whose native width
 * is 128 bits (the SSE2 baseline, NEON): two passes of 6x8, 12
 * accumulators each. Every element still sees the same operations in the
 * same order, so the bits are those of microkernel(). */
typedef float v4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) v4
vload4(const float *p)
{
	v4 v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline __attribute__((always_inline)) void
microkernel4(long kc, const float *restrict a, const float *restrict b,
             float *restrict c, long ldc, int load, int trunc, uint32_t m32)
{
	vi4 mask = { (int32_t)m32, (int32_t)m32, (int32_t)m32, (int32_t)m32 };
	v4 zero = { 0, 0, 0, 0 };

	for (int h = 0; h < NR; h += 8) {
		v4 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
		float *ch = c + h;
		long k;
#define LD(i) do { \
	c##i##0 = load ? vload4(ch + i * ldc) : zero; \
	c##i##1 = load ? vload4(ch + i * ldc + 4) : zero; \
} while (0)
		LD(0); LD(1); LD(2); LD(3); LD(4); LD(5);
#undef LD
		for (k = 0; k < kc; k++) {
			v4 b0 = vload4(b + k * NR + h), b1 = vload4(b + k * NR + h + 4);
			float as;
#define STEP(i) do { \
	as = a[k * MR + i]; \
	c##i##0 = c##i##0 + as * b0; \
	c##i##1 = c##i##1 + as * b1; \
	if (trunc) { \
		VTRUNC(c##i##0); \
		VTRUNC(c##i##1); \
	} \
} while (0)
			STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5);
#undef STEP
		}
#define ST(i) do { \
	VSTORE(ch + i * ldc, c##i##0); \
	VSTORE(ch + i * ldc + 4, c##i##1); \
} while (0)
		ST(0); ST(1); ST(2); ST(3); ST(4); ST(5);
#undef ST
	}
}

/* The same 6x16 tile with 16-float vectors (AVX-512): one vector per
 * row, 6 accumulators. Separate mul and add still, so the bits are those
 * of microkernel(); on cores with two 512-bit FP ports (Skylake-SP and
 * later Xeons) it halves the cycles per k of the AVX2 copy. */
typedef float v16 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));

TGT_AVX512 static inline __attribute__((always_inline)) v16
vload16(const float *p)
{
	v16 v;
	memcpy(&v, p, sizeof v);
	return v;
}

#ifdef HAVE_AVX2_COPY
TGT_AVX512 static inline __attribute__((always_inline)) v16
vsplat16(float x)
{
	return (v16){ 0 } + x;
}

__attribute__((target("avx512f"))) static inline
__attribute__((always_inline)) void
microkernel16(long kc, const float *restrict a, const float *restrict b,
              float *restrict c, long ldc, int load, int trunc, uint32_t m32,
              int fma, const Promo *pr)
{
	vi16 mask = (vi16){ 0 } + (int32_t)m32;
	v16 zero = { 0 };
	v16 c0, c1, c2, c3, c4, c5;
	long k;

#define LD(i) c##i = load ? vload16(c + i * ldc) : zero
	LD(0); LD(1); LD(2); LD(3); LD(4); LD(5);
#undef LD
	for (k = 0; k < kc; k++) {
		v16 bv = vload16(b + k * NR);
		const float *ak = a + k * MR;
#define STEP(i) do { \
	c##i = MULADD16(ak[i], bv, c##i); \
	if (trunc) \
		VTRUNC(c##i); \
} while (0)
		STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5);
#undef STEP
	}
	if (pr) {
		/* the chunk's promotion, as promote_body does it:
		 * o = fma(in, fl(sa[i] * sb[j]), first ? 0 : o) */
		v16 sbv = vload16(pr->sb);
#define PR(i) do { \
	v16 o_ = pr->first ? zero : vload16(pr->o + i * ldc); \
	o_ = (v16)_mm512_fmadd_ps(c##i, vsplat16(pr->sa[i]) * sbv, o_); \
	VSTORE(pr->o + i * ldc, o_); \
} while (0)
		PR(0); PR(1); PR(2); PR(3); PR(4); PR(5);
#undef PR
		return;
	}
#define ST(i) VSTORE(c + i * ldc, c##i)
	ST(0); ST(1); ST(2); ST(3); ST(4); ST(5);
#undef ST
}

/* Two MR-row panels at once (12 x 16): twelve accumulators hide the
 * add's latency (and the trunc path's add-then-mask chain) better than
 * six; the bits are the same. */
__attribute__((target("avx512f"))) static inline
__attribute__((always_inline)) void
microkernel16x2(long kc, const float *restrict a0, const float *restrict a1,
                const float *restrict b, float *restrict c, long ldc,
                int load, int trunc, uint32_t m32, int fma, const Promo *pr)
{
	vi16 mask = (vi16){ 0 } + (int32_t)m32;
	v16 zero = { 0 };
	v16 c0, c1, c2, c3, c4, c5, d0, d1, d2, d3, d4, d5;
	long k;

#define LD(i) do { \
	c##i = load ? vload16(c + i * ldc) : zero; \
	d##i = load ? vload16(c + (i + MR) * ldc) : zero; \
} while (0)
	LD(0); LD(1); LD(2); LD(3); LD(4); LD(5);
#undef LD
	for (k = 0; k < kc; k++) {
		v16 bv = vload16(b + k * NR);
		const float *ak = a0 + k * MR, *bk = a1 + k * MR;
#define STEP(i) do { \
	c##i = MULADD16(ak[i], bv, c##i); \
	d##i = MULADD16(bk[i], bv, d##i); \
	if (trunc) { \
		VTRUNC(c##i); \
		VTRUNC(d##i); \
	} \
} while (0)
		STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5);
#undef STEP
	}
	if (pr) {
		v16 sbv = vload16(pr->sb);
#define PR(i) do { \
	v16 o_ = pr->first ? zero : vload16(pr->o + i * ldc); \
	v16 p_ = pr->first ? zero : vload16(pr->o + (i + MR) * ldc); \
	o_ = (v16)_mm512_fmadd_ps(c##i, vsplat16(pr->sa[i]) * sbv, o_); \
	p_ = (v16)_mm512_fmadd_ps(d##i, vsplat16(pr->sa[i + MR]) * sbv, p_); \
	VSTORE(pr->o + i * ldc, o_); \
	VSTORE(pr->o + (i + MR) * ldc, p_); \
} while (0)
		PR(0); PR(1); PR(2); PR(3); PR(4); PR(5);
#undef PR
		return;
	}
#define ST(i) do { \
	VSTORE(c + i * ldc, c##i); \
	VSTORE(c + (i + MR) * ldc, d##i); \
} while (0)
	ST(0); ST(1); ST(2); ST(3); ST(4); ST(5);
#undef ST
}
#endif

/* All micro-tiles of one packed panel pair into inner (stride NC); trunc,
 * wide (0 baseline, 1 AVX2, 2 AVX-512) and fma are constants after
 * inlining, so the fp32 copies hold no mask. */
#define MACRO_BODY(mk4, mk8, mk16, mk16x2) do {                               \
	for (long jr = 0; jr < nc; jr += NR) {                                   \
		const float *b = bp + jr * kc;                                       \
		long ir = 0;                                                         \
		mk16x2;                                                              \
		for (; ir < mc; ir += MR) {                                          \
			const float *a = ap + ir * kc;                                   \
			float *c = inner + ir * NC + jr;                                 \
			mk16; mk8; mk4;                                                  \
		}                                                                    \
	}                                                                        \
} while (0)

#define MACRO_COPY(name, attr, trunc, body)                                  \
attr static void                                                             \
name(long mc, long nc, long kc, const float *ap, const float *bp,            \
     float *inner, int load, uint32_t accmask)                               \
{                                                                            \
	(void)accmask;                                                           \
	body;                                                                    \
}
#define BASE(t) MACRO_BODY(microkernel4(kc, a, b, c, NC, load, t, accmask), \
                           (void)0, (void)0, (void)0)
MACRO_COPY(macro_fp32, , 0, BASE(0))
MACRO_COPY(macro_trunc, , 1, BASE(1))
#ifdef HAVE_AVX2_COPY
#define AVX2(t, f) MACRO_BODY((void)0,                                        \
	microkernel(kc, a, b, c, NC, load, t, accmask, f, NULL), (void)0, (void)0)
#define AVX512(t, f) MACRO_BODY((void)0, (void)0,                             \
	microkernel16(kc, a, b, c, NC, load, t, accmask, f, NULL),               \
	for (; ir + 2 * MR <= mc; ir += 2 * MR)                                  \
		microkernel16x2(kc, ap + ir * kc, ap + (ir + MR) * kc, b,            \
		                inner + ir * NC + jr, NC, load, t, accmask, f, NULL))
#define T_AVX2 __attribute__((target("avx2,fma")))
#define T_AVX512 __attribute__((target("avx512f")))
MACRO_COPY(macro_fp32_avx2, T_AVX2, 0, AVX2(0, 0))
MACRO_COPY(macro_trunc_avx2, T_AVX2, 1, AVX2(1, 0))
MACRO_COPY(macro_fp32_avx2_fma, T_AVX2, 0, AVX2(0, 1))
MACRO_COPY(macro_trunc_avx2_fma, T_AVX2, 1, AVX2(1, 1))
MACRO_COPY(macro_fp32_avx512, T_AVX512, 0, AVX512(0, 0))
MACRO_COPY(macro_trunc_avx512, T_AVX512, 1, AVX512(1, 0))
MACRO_COPY(macro_fp32_avx512_fma, T_AVX512, 0, AVX512(0, 1))
MACRO_COPY(macro_trunc_avx512_fma, T_AVX512, 1, AVX512(1, 1))

/* The AVX-512 macro kernel with the chunk's promotion in the micro-kernel
 * (load is 0: a chunk is one panel): sa[mc rows], sb[nc columns], outer
 * like inner (stride NC). */
#define PROMO_BODY(t, f) do {                                                 \
	for (long jr = 0; jr < nc; jr += NR) {                                   \
		const float *b = bp + jr * kc;                                       \
		long ir = 0;                                                         \
		for (; ir + 2 * MR <= mc; ir += 2 * MR) {                            \
			Promo pr = { sa + ir, sb + jr, outer + ir * NC + jr, first };    \
			microkernel16x2(kc, ap + ir * kc, ap + (ir + MR) * kc, b, NULL,  \
			                NC, 0, t, accmask, f, &pr);                       \
		}                                                                    \
		for (; ir < mc; ir += MR) {                                          \
			Promo pr = { sa + ir, sb + jr, outer + ir * NC + jr, first };    \
			microkernel16(kc, ap + ir * kc, b, NULL, NC, 0, t, accmask, f,   \
			              &pr);                                              \
		}                                                                    \
	}                                                                        \
} while (0)
#define PROMO_COPY(name, t, f)                                               \
T_AVX512 static void                                                         \
name(long mc, long nc, long kc, const float *ap, const float *bp,            \
     const float *sa, const float *sb, float *outer, int first,              \
     uint32_t accmask)                                                       \
{                                                                            \
	(void)accmask;                                                           \
	PROMO_BODY(t, f);                                                        \
}
PROMO_COPY(promo_fp32_avx512, 0, 0)
PROMO_COPY(promo_trunc_avx512, 1, 0)
PROMO_COPY(promo_fp32_avx512_fma, 0, 1)
PROMO_COPY(promo_trunc_avx512_fma, 1, 1)

#define PROMO2_COPY(name, t, f)                                              \
T_AVX2 static void                                                           \
name(long mc, long nc, long kc, const float *ap, const float *bp,            \
     const float *sa, const float *sb, float *outer, int first,              \
     uint32_t accmask)                                                       \
{                                                                            \
	for (long jr = 0; jr < nc; jr += NR)                                     \
		for (long ir = 0; ir < mc; ir += MR) {                               \
			Promo pr = { sa + ir, sb + jr, outer + ir * NC + jr, first };    \
			microkernel(kc, ap + ir * kc, bp + jr * kc, NULL, NC, 0, t,      \
			            accmask, f, &pr);                                    \
		}                                                                    \
}
PROMO2_COPY(promo_fp32_avx2, 0, 0)
PROMO2_COPY(promo_trunc_avx2, 1, 0)
PROMO2_COPY(promo_fp32_avx2_fma, 0, 1)
PROMO2_COPY(promo_trunc_avx2_fma, 1, 1)
#endif

/* Which copy runs: precc_isa_level (numerics.c), the widest the CPU has
 * or what PRECC_INTERP_ISA says (baseline, avx2, avx512; the tests run
 * every copy and compare bits). An ISA the CPU lacks falls back to a
 * narrower one. */
enum { ISA_BASE = 1, ISA_AVX2, ISA_AVX512 };

static int
isa(void)
{
#ifdef HAVE_AVX2_COPY
	return precc_isa_level();
#else
	return ISA_BASE;
#endif
}

/* exact: every product a*b of the operands is exact in fp32 (see
 * exact_products), so the copies may fuse the multiply and add. */
static void
macro_kernel(long mc, long nc, long kc, const float *ap, const float *bp,
             float *inner, int load, uint32_t accmask, int exact)
{
	int trunc = accmask != 0xffffffffu;
	typedef void Macro(long, long, long, const float *, const float *,
	                   float *, int, uint32_t);
	Macro *m = trunc ? macro_trunc : macro_fp32;

#ifdef HAVE_AVX2_COPY
	static Macro *const copies[2][2][2] = {   /* [avx512][exact][trunc] */
		{ { macro_fp32_avx2, macro_trunc_avx2 },
		  { macro_fp32_avx2_fma, macro_trunc_avx2_fma } },
		{ { macro_fp32_avx512, macro_trunc_avx512 },
		  { macro_fp32_avx512_fma, macro_trunc_avx512_fma } },
	};
	int i = isa();
	if (i != ISA_BASE)
		m = copies[i == ISA_AVX512][exact != 0][trunc];
#else
	(void)exact;
#endif
	m(mc, nc, kc, ap, bp, inner, load, accmask);
}

/* One packed panel of w rows (w = MR or NR, a constant after inlining):
 * panel[k*w + ii] = x[ii][k]. Rows of a [rows, K] operand are often 4 KiB
 * apart and share L1 sets, so each row is read a cache line (16 k) at a
 * time; inside a line, 4x4 blocks are transposed in registers (4-float
 * vectors: SSE2 and NEON alike), which made the scalar copy's 4 cycles
 * per element about 1 (perf, bench_gemm 1024). */
static inline __attribute__((always_inline)) void
transpose4(const float *const *x, int ii, long k, int w, float *restrict panel)
{
	v4 r0 = vload4(x[ii] + k), r1 = vload4(x[ii + 1] + k);
	v4 r2 = vload4(x[ii + 2] + k), r3 = vload4(x[ii + 3] + k);
	v4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5);
	v4 t1 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
	v4 t2 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
	v4 t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
	v4 c0 = __builtin_shufflevector(t0, t1, 0, 1, 4, 5);
	v4 c1 = __builtin_shufflevector(t0, t1, 2, 3, 6, 7);
	v4 c2 = __builtin_shufflevector(t2, t3, 0, 1, 4, 5);
	v4 c3 = __builtin_shufflevector(t2, t3, 2, 3, 6, 7);

	VSTORE(panel + (k + 0) * w + ii, c0);
	VSTORE(panel + (k + 1) * w + ii, c1);
	VSTORE(panel + (k + 2) * w + ii, c2);
	VSTORE(panel + (k + 3) * w + ii, c3);
}

static inline __attribute__((always_inline)) void
panel_f32(const float *const *x, long kc, int w, float *restrict panel)
{
	int ii;

	for (long k0 = 0; k0 < kc; k0 += 16) {
		long k1 = k0 + 16 < kc ? k0 + 16 : kc, k = k0;
		for (; k + 4 <= k1; k += 4) {
			for (ii = 0; ii + 4 <= w; ii += 4)
				transpose4(x, ii, k, w, panel);
			for (; ii < w; ii++)       /* MR = 6: rows 4 and 5 */
				for (long kk = k; kk < k + 4; kk++)
					panel[kk * w + ii] = x[ii][kk];
		}
		for (; k < k1; k++)
			for (ii = 0; ii < w; ii++)
				panel[k * w + ii] = x[ii][k];
	}
}

static inline __attribute__((always_inline)) void
panel_lut(const uint8_t *const *q, const float *lut, long kc, int w,
          float *restrict panel)
{
	for (long k0 = 0; k0 < kc; k0 += 64) {
		long k1 = k0 + 64 < kc ? k0 + 64 : kc;
		for (int ii = 0; ii < w; ii++)
			for (long k = k0; k < k1; k++)
				panel[k * w + ii] = lut[q[ii][k]];
	}
}

/* Pack rows [r0, r0+nr) x k-range [k0, k0+kc) of an operand into panels
 * of w rows: dst[p*w*kc + k*w + ii]; rows past the edge are zero. fp32
 * and 8-bit operands are read w rows at a time, so the writes stream. */
static void
pack(const precc_gemm_operand *op, const float *lut, long K, long r0, long nr,
     long rows, long k0, long kc, int w, float *dst, float *row)
{
	static const float zeros[KC];
	long p, k;
	int ii;

	for (p = 0; p < nr; p += w) {
		float *panel = dst + p * kc;
		long valid = rows - (r0 + p);
		if (valid > w)
			valid = w;
		if (valid > nr - p)
			valid = nr - p;
		if (op->fmt == PRECC_FP32 || op->fmt == PRECC_TF32) {
			const float *x[NR];
			for (ii = 0; ii < w; ii++)
				x[ii] = ii < valid ? (const float *)op->data
				        + (size_t)(r0 + p + ii) * (size_t)K + (size_t)k0
				        : zeros;
			if (w == MR)
				panel_f32(x, kc, MR, panel);
			else
				panel_f32(x, kc, NR, panel);
			continue;
		}
		if (lut) {
			static const uint8_t zcode[KC];
			const uint8_t *q[NR];
			/* padding rows read code 0, which is +0 in every operand
			 * format */
			for (ii = 0; ii < w; ii++)
				q[ii] = ii < valid ? (const uint8_t *)op->data
				        + (size_t)(r0 + p + ii) * (size_t)K + (size_t)k0
				        : zcode;
			if (w == MR)
				panel_lut(q, lut, kc, MR, panel);
			else
				panel_lut(q, lut, kc, NR, panel);
			continue;
		}
		for (ii = 0; ii < w; ii++) {
			if (ii >= valid) {
				for (k = 0; k < kc; k++)
					panel[k * w + ii] = 0.0f;
				continue;
			}
			interp_load(op->data, op->fmt, (size_t)(r0 + p + ii) * (size_t)K
			            + (size_t)k0, kc, row);
			for (k = 0; k < kc; k++)
				panel[k * w + ii] = row[k];
		}
	}
}

/* A tensorwise GEMM's sa * sb as s * p * p, so that inner * sa * sb
 * overflows or underflows only where its value does (cuBLASLt's
 * D = scaleA * scaleB * (A.B) in float64 and torch._scaled_mm stay finite
 * where fl(sa * sb) is inf): p = 1 and s = fl(sa * sb) unless that
 * overflows (p = 2^64) or is subnormal (p = 2^-64), when
 * s = fl(fl(sa / p) * fl(sb / p)), both quotients exact. codegen's
 * tensor_scale (k_gemm.c) is the same. */
static void
tensor_scale(float sa, float sb, float *s, float *p)
{
	float x = sa * sb, k = 1.0f;

	*p = 1.0f;
	if (fabsf(sa) <= FLT_MAX && fabsf(sb) <= FLT_MAX) {
		if (fabsf(x) > FLT_MAX)
			k = 0x1p-64f, *p = 0x1p64f;
		else if (fabsf(x) < FLT_MIN)
			k = 0x1p64f, *p = 0x1p-64f;
	}
	*s = (sa * k) * (sb * k);
}

/* outer += inner * (sa * sb) for one MC block after chunk kq; compiled
 * once per ISA like the macro kernel (at P = 128 the baseline copy took
 * 7% of an fp8 GEMM).
 *
 * Block scales: outer = fma(inner, fl(sa * sb), outer), one rounding, as
 * DeepGEMM promotes (deepseek-ai/DeepGEMM 54e2261 deep_gemm/include/
 * deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh:333 scale_0_0 = scale_a_0 *
 * scale_b_0, :343 shifted_accum[i] += scale_0_0 * accum[i], which nvcc
 * contracts into one FFMA: its JIT never passes --fmad=false) and as
 * precc's kernels emit it (fma.rn.f32, k_gemm.c's promote). The first
 * chunk is fma(inner, s, +0): fl(inner * s), +0 for a -0 product, as
 * DeepGEMM's final_accum starts at 0. Tensorwise scales keep two
 * roundings, fl(outer + fl(fl(fl(inner * s) * p) * p)) (tensor_scale's
 * s * p * p, docs/interpreter.md). */
static inline __attribute__((always_inline)) void
promote_body(const Gemm *g, long ic, long mc, long jc, long nc, long kq,
        const float *inner, float *outer)
{
	const precc_gemm_desc *d = g->d;
	float sa[MC], sb[NC];
	long i, j;

	if (g->tensorwise) {
		float s = g->ts, p = g->tp;
		for (i = 0; i < mc; i++) {
			float *o = outer + i * NC;
			const float *in = inner + i * NC;
			if (kq == 0)
				for (j = 0; j < nc; j++)
					o[j] = 0.0f + in[j] * s * p * p;
			else
				for (j = 0; j < nc; j++)
					o[j] = o[j] + in[j] * s * p * p;
		}
		return;
	}
	for (i = 0; i < mc; i++)
		sa[i] = d->a.scale_inv ? d->a.scale_inv[((ic + i) / g->abr)
		        * g->anbc + kq / g->abc] : 1.0f;
	for (j = 0; j < nc; j++)
		sb[j] = d->b.scale_inv ? d->b.scale_inv[((jc + j) / g->bbr)
		        * g->bnbc + kq / g->bbc] : 1.0f;
	for (i = 0; i < mc; i++) {
		float *o = outer + i * NC;
		const float *in = inner + i * NC;
		float s = sa[i];
		if (kq == 0)
			for (j = 0; j < nc; j++)
				o[j] = fmaf(in[j], s * sb[j], 0.0f);
		else
			for (j = 0; j < nc; j++)
				o[j] = fmaf(in[j], s * sb[j], o[j]);
	}
}

#define PROMOTE_COPY(name, attr)                                             \
attr static void                                                             \
name(const Gemm *g, long ic, long mc, long jc, long nc, long kq,              \
     const float *inner, float *outer)                                       \
{                                                                            \
	promote_body(g, ic, mc, jc, nc, kq, inner, outer);                       \
}
PROMOTE_COPY(promote_base, )
#ifdef HAVE_AVX2_COPY
PROMOTE_COPY(promote_avx2, __attribute__((target("avx2,fma"))))
PROMOTE_COPY(promote_avx512, __attribute__((target("avx512f,fma"))))
#endif

static void
promote(const Gemm *g, long ic, long mc, long jc, long nc, long kq,
        const float *inner, float *outer)
{
#ifdef HAVE_AVX2_COPY
	switch (isa()) {
	case ISA_AVX512:
		promote_avx512(g, ic, mc, jc, nc, kq, inner, outer);
		return;
	case ISA_AVX2:
		promote_avx2(g, ic, mc, jc, nc, kq, inner, outer);
		return;
	}
#endif
	promote_base(g, ic, mc, jc, nc, kq, inner, outer);
}

/* alpha, bias, output amax, out_scale and the output cast of one block. */
static void
epilogue(Worker *w, long ic, long mc, long jc, long nc, float *outer)
{
	const precc_gemm_desc *d = w->g->d;
	size_t oes = precc_interp_elem_bytes(d->out_fmt);
	long i, j;

	for (i = 0; i < mc; i++) {
		float *o = outer + i * NC;
		size_t off = (size_t)(ic + i) * (size_t)d->n + (size_t)jc;
		float m = w->amax;
		int nan = 0;
		for (j = 0; j < nc; j++) {
			float y = o[j] * d->alpha;
			if (d->bias)
				y = y + d->bias[jc + j];
			float a = fabsf(y);
			nan |= a != a;
			m = a > m ? a : m;
			o[j] = y * d->out_scale;
		}
		w->amax = m;
		w->nan |= nan;
		if (d->out_fmt == PRECC_FP32 && !d->out_saturate) {
			memcpy((float *)d->c + off, o, (size_t)nc * sizeof *o);
		} else if (d->out_fmt == PRECC_E4M3 && d->out_saturate) {
			precc_encode_e4m3_rne_sat(o, (uint8_t *)d->c + off, nc);
		} else if (d->out_fmt == PRECC_E5M2 && d->out_saturate) {
			precc_encode_e5m2_rne_sat(o, (uint8_t *)d->c + off, nc);
		} else {
			for (j = 0; j < nc; j++) {
				uint32_t code = precc_encode(d->out_fmt, o[j], PRECC_RNE,
				                             d->out_saturate, 0);
				if (oes == 1)
					((uint8_t *)d->c)[off + j] = (uint8_t)code;
				else if (oes == 2)
					((uint16_t *)d->c)[off + j] = (uint16_t)code;
				else
					((uint32_t *)d->c)[off + j] = code;
			}
		}
	}
}

#ifdef HAVE_AVX2_COPY
/* One chunk of one block, packed, into outer through promo_*: the
 * scales of its rows and columns as promote_body reads them (padding 1). */
static void
promo_block(const Gemm *g, long ic, long mc, long mcp, long jc, long nc,
            long ncp, long kq, long kc, const float *ap, const float *bp,
            float *outer)
{
	typedef void Promo_fn(long, long, long, const float *, const float *,
	                      const float *, const float *, float *, int,
	                      uint32_t);
	static Promo_fn *const copies[2][2][2] = {   /* [avx512][exact][trunc] */
		{ { promo_fp32_avx2, promo_trunc_avx2 },
		  { promo_fp32_avx2_fma, promo_trunc_avx2_fma } },
		{ { promo_fp32_avx512, promo_trunc_avx512 },
		  { promo_fp32_avx512_fma, promo_trunc_avx512_fma } },
	};
	const precc_gemm_desc *d = g->d;
	float sa[MC], sb[NC];
	long i, j;

	for (i = 0; i < mcp; i++)
		sa[i] = i < mc && d->a.scale_inv ? d->a.scale_inv[((ic + i) / g->abr)
		        * g->anbc + kq / g->abc] : 1.0f;
	for (j = 0; j < ncp; j++)
		sb[j] = j < nc && d->b.scale_inv ? d->b.scale_inv[((jc + j) / g->bbr)
		        * g->bnbc + kq / g->bbc] : 1.0f;
	copies[isa() == ISA_AVX512][g->exact != 0][g->accmask != 0xffffffffu](
		mcp, ncp, kc, ap, bp, sa, sb, outer, kq == 0, g->accmask);
}
#endif

/* Task t: the NC-column strip jc, rows of grp consecutive MC blocks. Each
 * B panel is packed once per task and reused by all its MC blocks. */
static void
run_task(Worker *w, long t)
{
	Gemm *g = w->g;
	const precc_gemm_desc *d = g->d;
	long jc = (t / g->ngrp) * NC, i0 = (t % g->ngrp) * g->grp * MC;
	long i1 = i0 + g->grp * MC < d->m ? i0 + g->grp * MC : d->m;
	long nc = d->n - jc < NC ? d->n - jc : NC;
	long ncp = (nc + NR - 1) / NR * NR;
	long kq, pc, ic;

	for (kq = 0; kq < d->k; kq += g->P) {
		long kend = kq + g->P < d->k ? kq + g->P : d->k;
#ifdef HAVE_AVX2_COPY
		if (g->fused) {         /* the chunk is one panel */
			pack(&d->b, g->lut_b, d->k, jc, ncp, d->n, kq, kend - kq, NR,
			     w->bp, w->row);
			for (ic = i0; ic < i1; ic += MC) {
				long mc = i1 - ic < MC ? i1 - ic : MC;
				long mcp = (mc + MR - 1) / MR * MR;
				pack(&d->a, g->lut_a, d->k, ic, mcp, d->m, kq, kend - kq, MR,
				     w->ap, w->row);
				promo_block(g, ic, mc, mcp, jc, nc, ncp, kq, kend - kq, w->ap,
				            w->bp, w->outer + ((ic - i0) / MC) * MC * NC);
			}
			continue;
		}
#endif
		for (pc = kq; pc < kend; pc += KC) {
			long kc = kend - pc < KC ? kend - pc : KC;
			pack(&d->b, g->lut_b, d->k, jc, ncp, d->n, pc, kc, NR, w->bp,
			     w->row);
			for (ic = i0; ic < i1; ic += MC) {
				long mc = i1 - ic < MC ? i1 - ic : MC;
				long mcp = (mc + MR - 1) / MR * MR;
				float *inner = w->inner + ((ic - i0) / MC) * MC * NC;
				pack(&d->a, g->lut_a, d->k, ic, mcp, d->m, pc, kc, MR, w->ap,
				     w->row);
				macro_kernel(mcp, ncp, kc, w->ap, w->bp, inner, pc != kq,
				             g->accmask, g->exact);
			}
		}
		for (ic = i0; ic < i1; ic += MC) {
			long b = (ic - i0) / MC, mc = i1 - ic < MC ? i1 - ic : MC;
			promote(g, ic, mc, jc, nc, kq, w->inner + b * MC * NC,
			        w->outer + b * MC * NC);
		}
	}
	for (ic = i0; ic < i1; ic += MC) {
		long b = (ic - i0) / MC, mc = i1 - ic < MC ? i1 - ic : MC;
		epilogue(w, ic, mc, jc, nc, w->outer + b * MC * NC);
	}
}

static void *
worker_main(void *arg)
{
	Worker *w = arg;
	long t;

	while ((t = atomic_fetch_add(&w->g->next, 1)) < w->g->ntasks)
		run_task(w, t);
	return NULL;
}

/* 1 if the multiply and add may be fused with the bits unchanged: every
 * product of an a and a b value is exact in fp32 (at most 24 significant
 * bits, no underflow), so fma(a, b, c) = fl(fl(a*b) + c), and no format
 * encodes inf, so no inf*0 makes a default NaN where the fused form would
 * pass on the accumulator's NaN instead (tests/interp/test_gemm.c's
 * test_fused found that for e5m2). e4m3 and the MX fp6/fp4 formats
 * qualify; e5m2 and fp16 (exact products, but inf), bf16, tf32 and fp32
 * do not. */
static int
exact_format(precc_format f)
{
	return f == PRECC_E4M3 || f == PRECC_E2M1 || f == PRECC_E3M2
	       || f == PRECC_E2M3;
}

static int
gemm_format(precc_format f)
{
	return f == PRECC_FP32 || f == PRECC_TF32 || f == PRECC_BF16
	       || f == PRECC_FP16 || f == PRECC_E4M3 || f == PRECC_E5M2
	       || f == PRECC_E2M1 || f == PRECC_E3M2 || f == PRECC_E2M3;
}

/* Resolve an operand's scale blocks; *varies set if they vary along K. */
static int
operand_blocks(const char *name, const precc_gemm_operand *op, long rows,
               long K, long *br, long *bc, long *nbc, int *varies)
{
	int e;

	*varies = 0;
	*br = rows;
	*bc = K;
	*nbc = 1;
	if (!op->scale_inv)
		return PRECC_IOK;
	if ((e = interp_block(name, rows, K, op->blk, br, bc)) != 0)
		return e;
	*nbc = (K + *bc - 1) / *bc;
	*varies = *bc < K;
	return PRECC_IOK;
}

void
precc_gemm_desc_init(precc_gemm_desc *d)
{
	memset(d, 0, sizeof *d);
	d->alpha = 1.0f;
	d->out_scale = 1.0f;
	d->out_fmt = PRECC_FP32;
	d->a.fmt = d->b.fmt = PRECC_FP32;
}

static int gemm_run(const precc_gemm_desc *d);

/* An e2m1 operand (two codes a byte) is re-encoded as e4m3 codes, one a
 * byte, for the decode tables: every e2m1 value is an e4m3 value, so the
 * products, and the result, are the same. */
static uint8_t *
e2m1_as_e4m3(const precc_gemm_operand *op, long rows, long k, precc_gemm_operand *w)
{
	size_t n = (size_t)rows * (size_t)k;
	uint8_t *c = malloc(n), lut[16];
	const float *t = precc_decode_table8(PRECC_E2M1);

	if (!c)
		return NULL;
	for (int i = 0; i < 16; i++)
		lut[i] = (uint8_t)precc_encode(PRECC_E4M3, t[i], PRECC_RNE, true, 0);
	precc_e2m1_unpack(op->data, n, c);
	for (size_t i = 0; i < n; i++)
		c[i] = lut[c[i]];
	*w = *op;
	w->data = c, w->fmt = PRECC_E4M3;
	return c;
}

int
precc_gemm(const precc_gemm_desc *d)
{
	precc_gemm_desc w;
	uint8_t *ca = NULL, *cb = NULL;
	int e;

	if (!d || !d->a.data || !d->b.data || !d->c)
		return interp_fail(PRECC_IEINVAL, "gemm: NULL operand");
	if (d->a.fmt != PRECC_E2M1 && d->b.fmt != PRECC_E2M1)
		return gemm_run(d);
	if ((e = interp_check_fmt("gemm A", d->a.fmt, d->m, d->k)) != 0
	    || (e = interp_check_fmt("gemm B", d->b.fmt, d->n, d->k)) != 0)
		return e;
	w = *d;
	if ((d->a.fmt == PRECC_E2M1 && !(ca = e2m1_as_e4m3(&d->a, d->m, d->k, &w.a)))
	    || (d->b.fmt == PRECC_E2M1 && !(cb = e2m1_as_e4m3(&d->b, d->n, d->k, &w.b)))) {
		free(ca);
		return interp_fail(PRECC_IENOMEM, "gemm: out of memory unpacking e2m1");
	}
	e = gemm_run(&w);
	free(ca), free(cb);
	return e;
}

static int
gemm_run(const precc_gemm_desc *d)
{
	Gemm g;
	Worker *w;
	pthread_t *tid;
	size_t per, total;
	int e, va, vb, nt, started, i;
	float amax = 0.0f;
	int nan = 0;

	if (!d || !d->a.data || !d->b.data || !d->c)
		return interp_fail(PRECC_IEINVAL, "gemm: NULL operand");
	if (!gemm_format(d->a.fmt) || !gemm_format(d->b.fmt))
		return interp_fail(PRECC_IEINVAL, "gemm: operands must be fp32, "
		                   "tf32, bf16, fp16, e4m3, e5m2, e2m1, e3m2 or "
		                   "e2m3");
	if (precc_interp_elem_bytes(d->out_fmt) == 0)
		return interp_fail(PRECC_IEINVAL, "gemm: bad output format");
	if ((e = interp_check_fmt("gemm A", d->a.fmt, d->m, d->k)) != 0
	    || (e = interp_check_fmt("gemm B", d->b.fmt, d->n, d->k)) != 0
	    || (e = interp_check_tensor("gemm C", d->m, d->n,
	                                precc_interp_elem_bytes(d->out_fmt))) != 0)
		return e;
	if (d->promote_every < 0)
		return interp_fail(PRECC_IEINVAL, "gemm: promote_every %d < 0",
		                   d->promote_every);
	if (d->acc_mbits < 0)
		return interp_fail(PRECC_IEINVAL, "gemm: acc_mbits %d < 0",
		                   d->acc_mbits);
	memset(&g, 0, sizeof g);
	g.d = d;
	if ((e = operand_blocks("gemm A scale", &d->a, d->m, d->k, &g.abr,
	                        &g.abc, &g.anbc, &va)) != 0
	    || (e = operand_blocks("gemm B scale", &d->b, d->n, d->k, &g.bbr,
	                           &g.bbc, &g.bnbc, &vb)) != 0)
		return e;
	g.P = d->promote_every > 0 ? d->promote_every : d->k;
	if (d->promote_every == 0) {
		if (va)
			g.P = g.abc;
		if (vb && g.bbc < g.P)
			g.P = g.bbc;
	}
	if (g.P > d->k)
		g.P = d->k;
	if ((va && g.abc % g.P) || (vb && g.bbc % g.P))
		return interp_fail(PRECC_IESHAPE, "gemm: promotion every %ld "
		                   "K-elements does not divide the scale blocks "
		                   "along K (A: %ld, B: %ld)", g.P,
		                   va ? g.abc : d->k, vb ? g.bbc : d->k);
	g.tensorwise = (!d->a.scale_inv || (!d->a.blk.br && !d->a.blk.bc))
	               && (!d->b.scale_inv || (!d->b.blk.br && !d->b.blk.bc));
	if (g.tensorwise)
		tensor_scale(d->a.scale_inv ? d->a.scale_inv[0] : 1.0f,
		             d->b.scale_inv ? d->b.scale_inv[0] : 1.0f, &g.ts, &g.tp);
	g.accmask = d->acc_mbits == 0 || d->acc_mbits >= 23 ? 0xffffffffu
	            : ~((1u << (23 - d->acc_mbits)) - 1u);
	g.exact = exact_format(d->a.fmt) && exact_format(d->b.fmt)
	          && !getenv("PRECC_INTERP_NOFMA");
	/* small promotion chunks (NVFP4's 16, MX's 32) spent a third of the
	 * GEMM passing inner and outer sums through memory every P k */
#ifdef HAVE_AVX2_COPY
	g.fused = isa() != ISA_BASE && !g.tensorwise && g.P <= KC
	          && !getenv("PRECC_INTERP_NOFUSEPROMO");
#endif
	g.lut_a = precc_interp_elem_bytes(d->a.fmt) == 1
	          ? precc_decode_table8(d->a.fmt) : NULL;
	g.lut_b = precc_interp_elem_bytes(d->b.fmt) == 1
	          ? precc_decode_table8(d->b.fmt) : NULL;
	g.nmc = (d->m + MC - 1) / MC;
	g.nnc = (d->n + NC - 1) / NC;
	nt = precc_interp_threads(d->threads);
	/* below ~1 ms of work a thread costs more than it brings */
	if ((double)d->m * (double)d->n * (double)d->k < 4e6)
		nt = 1;
	/* enough tasks to balance nt threads, each as tall as possible */
	g.ngrp = (2 * nt + g.nnc - 1) / g.nnc;
	if (g.ngrp > g.nmc)
		g.ngrp = g.nmc;
	g.grp = (g.nmc + g.ngrp - 1) / g.ngrp;
	if (g.grp > MAXGRP)
		g.grp = MAXGRP;
	g.ngrp = (g.nmc + g.grp - 1) / g.grp;
	g.ntasks = g.ngrp * g.nnc;
	atomic_init(&g.next, 0);
	if (nt > g.ntasks)
		nt = (int)g.ntasks;
	per = (size_t)(MC * KC + NC * KC + 2 * g.grp * MC * NC + KC)
	      * sizeof(float);
	/* operands + output + scratch must fit in physical memory (each
	 * product was checked for overflow above) */
	size_t ops = precc_interp_tensor_bytes(d->a.fmt, d->m, d->k)
	             + precc_interp_tensor_bytes(d->b.fmt, d->n, d->k)
	             + precc_interp_tensor_bytes(d->out_fmt, d->m, d->n);
	if (interp_mul(per, (size_t)nt, &total) != 0 || total > SIZE_MAX - ops
	    || total + ops > interp_phys_bytes())
		return interp_fail(PRECC_IETOOBIG, "gemm: %ldx%ldx%ld needs %zu "
		                   "bytes (operands, output and %d threads' "
		                   "scratch), more than the %zu bytes of physical "
		                   "memory", d->m, d->n, d->k, ops + total, nt,
		                   interp_phys_bytes());
	w = calloc((size_t)nt, sizeof *w);
	tid = calloc((size_t)nt, sizeof *tid);
	float *scratch = malloc(total);
	if (!w || !tid || !scratch) {
		free(w);
		free(tid);
		free(scratch);
		return interp_fail(PRECC_IENOMEM, "gemm: out of memory (%zu bytes)",
		                   total);
	}
	for (i = 0; i < nt; i++) {
		float *s = scratch + (size_t)i * (per / sizeof(float));
		w[i].g = &g;
		w[i].ap = s;
		w[i].bp = s + MC * KC;
		w[i].inner = w[i].bp + NC * KC;
		w[i].outer = w[i].inner + g.grp * MC * NC;
		w[i].row = w[i].outer + g.grp * MC * NC;
	}
	/* workers 1..nt-1 on threads; worker 0 on this one. A thread that
	 * fails to start just leaves its tiles to the others. */
	started = 0;
	for (i = 1; i < nt; i++) {
		if (pthread_create(&tid[i], NULL, worker_main, &w[i]) != 0)
			break;
		started = i;
	}
	worker_main(&w[0]);
	for (i = 1; i <= started; i++)
		pthread_join(tid[i], NULL);
	for (i = 0; i < nt; i++) {
		nan |= w[i].nan;
		amax = w[i].amax > amax ? w[i].amax : amax;
	}
	if (d->out_amax)
		*d->out_amax = nan ? NAN : amax;
	free(scratch);
	free(w);
	free(tid);
	return PRECC_IOK;
}
