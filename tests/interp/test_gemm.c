/*
 * test_gemm.c — GEMM C = A.B^T: hand-computed cases for every accumulation
 * model and the epilogue; bit-exact agreement with a scalar model of the
 * documented arithmetic; float64 error bounds derived from the model;
 * bit-identical results for 1, 2, 3 and 7 threads; errors for bad shapes.
 */
#include <unistd.h>

#include "check.h"

static float
trunc_bits(float x, int mbits)
{
	uint32_t u = fbits(x);
	if (mbits == 0 || mbits >= 23 || (u & 0x7f800000) == 0x7f800000)
		return x;
	u &= ~((1u << (23 - mbits)) - 1);
	memcpy(&x, &u, 4);
	return x;
}

static long
bidx(const precc_gemm_operand *op, long rows, long K, long r, long k)
{
	long br = op->blk.br && op->blk.br < rows ? op->blk.br : rows;
	long bc = op->blk.bc && op->blk.bc < K ? op->blk.bc : K;
	return (r / br) * ((K + bc - 1) / bc) + k / bc;
}

/* A tensorwise GEMM's sa * sb as s * p * p (docs/interpreter.md): p = 1
 * unless fl(sa * sb) overflows (2^64) or is subnormal (2^-64). */
static void
ref_tensor_scale(float sa, float sb, float *s, float *p)
{
	float x = sa * sb, k = 1;

	*p = 1;
	if (isfinite(sa) && isfinite(sb) && isinf(x))
		k = 0x1p-64f, *p = 0x1p64f;
	else if (isfinite(sa) && isfinite(sb) && fabsf(x) < 0x1p-126f)
		k = 0x1p64f, *p = 0x1p-64f;
	*s = (sa * k) * (sb * k);
}

/* The documented arithmetic, one element at a time. */
static void
ref_gemm(const precc_gemm_desc *d, long P, float *out, float *amax)
{
	long M = d->m, N = d->n, K = d->k;
	float *A = malloc(M * K * 4), *B = malloc(N * K * 4);
	float m = 0;
	int nan = 0;
	int tw = (!d->a.scale_inv || (!d->a.blk.br && !d->a.blk.bc))
	         && (!d->b.scale_inv || (!d->b.blk.br && !d->b.blk.bc));

	precc_dequantize(d->a.data, d->a.fmt, M, K, (precc_block){ 0, 0 }, NULL, A);
	precc_dequantize(d->b.data, d->b.fmt, N, K, (precc_block){ 0, 0 }, NULL, B);
	for (long i = 0; i < M; i++)
		for (long j = 0; j < N; j++) {
			float outer = 0;
			for (long kq = 0; kq < K; kq += P) {
				float inner = 0;
				for (long k = kq; k < kq + P && k < K; k++) {
					float p = A[i * K + k] * B[j * K + k];
					inner = trunc_bits(inner + p, d->acc_mbits);
				}
				float sa = d->a.scale_inv ? d->a.scale_inv[bidx(&d->a, M, K, i,
				           kq)] : 1.0f;
				float sb = d->b.scale_inv ? d->b.scale_inv[bidx(&d->b, N, K, j,
				           kq)] : 1.0f;
				float s = sa * sb, p2 = 1;
				if (tw)
					ref_tensor_scale(sa, sb, &s, &p2);
				/* block scales: one FMA (DeepGEMM's FFMA);
				 * tensorwise: two roundings */
				outer = tw ? outer + inner * s * p2 * p2 : fmaf(inner, s, outer);
			}
			float y = outer * d->alpha;
			if (d->bias)
				y = y + d->bias[j];
			nan |= isnan(y);
			m = fabsf(y) > m ? fabsf(y) : m;
			out[i * N + j] = y * d->out_scale;
		}
	*amax = nan ? NAN : m;
	free(A);
	free(B);
}

static void
test_hand(void)
{
	float a[6] = { 1, 2, 3, 4, 5, 6 }, b[6] = { 1, 0, 1, 0, 1, 0 }, c[4];
	float bias[2] = { 1, -1 }, amax;
	precc_gemm_desc d;

	precc_gemm_desc_init(&d);
	d.m = 2; d.n = 2; d.k = 3;
	d.a.data = a; d.b.data = b; d.c = c;
	CHECK_OK(precc_gemm(&d));
	CHECK(c[0] == 4 && c[1] == 2 && c[2] == 10 && c[3] == 5);
	d.alpha = 2; d.bias = bias; d.out_amax = &amax;
	CHECK_OK(precc_gemm(&d));
	CHECK(c[0] == 9 && c[1] == 3 && c[2] == 21 && c[3] == 9 && amax == 21);
	/* bf16 output, fp8 e4m3 output with out_scale 0.5 (amax before it) */
	uint16_t h[4];
	d.out_fmt = PRECC_BF16; d.c = h;
	CHECK_OK(precc_gemm(&d));
	CHECK(h[0] == 0x4110 && h[2] == 0x41a8);     /* 9.0, 21.0 */
	uint8_t q[4];
	d.out_fmt = PRECC_E4M3; d.out_saturate = true; d.out_scale = 0.5f; d.c = q;
	CHECK_OK(precc_gemm(&d));
	CHECK(precc_decode(PRECC_E4M3, q[0]) == 4.5f
	      && precc_decode(PRECC_E4M3, q[2]) == 10.0f && amax == 21);

	/* accumulation models: a = [1, 1/8 x 8], b = 1, K = 9 */
	float x[9] = { 1, .125f, .125f, .125f, .125f, .125f, .125f, .125f, .125f };
	float one[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 }, r;
	precc_gemm_desc_init(&d);
	d.m = 1; d.n = 1; d.k = 9;
	d.a.data = x; d.b.data = one; d.c = &r;
	CHECK_OK(precc_gemm(&d));
	CHECK(r == 2.0f);                 /* exact fp32 */
	d.acc_mbits = 2;                  /* 1.xx: 1 + 1/8 truncates to 1 */
	CHECK_OK(precc_gemm(&d));
	CHECK(r == 1.0f);
	d.promote_every = 2;              /* 1 + .25 + .25 + .25 + .125 */
	CHECK_OK(precc_gemm(&d));
	CHECK(r == 1.875f);
	d.acc_mbits = 0;
	CHECK_OK(precc_gemm(&d));
	CHECK(r == 2.0f);

	/* per-K-block scales are applied at each promotion: A scales {1,4}
	 * over K = 8 -> two chunks of 4 */
	float a8[8] = { 1, 1, 1, 1, 1, 1, 1, 1 }, sa[2] = { 2, 10 }, sb = 0.5f;
	precc_gemm_desc_init(&d);
	d.m = 1; d.n = 1; d.k = 8; d.c = &r;
	d.a = (precc_gemm_operand){ a8, PRECC_FP32, sa, { 1, 4 } };
	d.b = (precc_gemm_operand){ a8, PRECC_FP32, &sb, { 0, 0 } };
	CHECK_OK(precc_gemm(&d));
	CHECK(r == 4 * 2 * 0.5f + 4 * 10 * 0.5f);

	/* a block-scaled promotion is one fused multiply-add (DeepGEMM's
	 * FFMA): chunk 1 gives outer = -1, chunk 2 inner = 1 + 2^-12 with
	 * s = 1 + 2^-12: fma(inner, s, -1) = 2^-11 + 2^-24 exactly, where
	 * the separate multiply would round the product to 1 + 2^-11 and
	 * the add give 2^-11 */
	float af[2] = { -1, 1 + 0x1p-12f }, bf[2] = { 1, 1 }, sf[2] = { 1, 1 + 0x1p-12f };
	precc_gemm_desc_init(&d);
	d.m = 1; d.n = 1; d.k = 2; d.c = &r;
	d.a = (precc_gemm_operand){ af, PRECC_FP32, sf, { 1, 1 } };
	d.b = (precc_gemm_operand){ bf, PRECC_FP32, NULL, { 0, 0 } };
	CHECK_OK(precc_gemm(&d));
	CHECK(r == 0x1p-11f + 0x1p-24f);

	/* NaN propagates to its row and to the output amax */
	float an[4] = { 1, NAN, 1, 1 }, bn[4] = { 1, 1, 1, 1 }, cn[4];
	precc_gemm_desc_init(&d);
	d.m = 2; d.n = 2; d.k = 2; d.a.data = an; d.b.data = bn; d.c = cn;
	d.out_amax = &amax;
	CHECK_OK(precc_gemm(&d));
	CHECK(isnan(cn[0]) && isnan(cn[1]) && cn[2] == 2 && cn[3] == 2);
	CHECK(isnan(amax));
	d.acc_mbits = 14;                 /* truncation keeps NaN a NaN */
	CHECK_OK(precc_gemm(&d));
	CHECK(isnan(cn[0]) && isnan(cn[1]) && cn[2] == 2 && cn[3] == 2);
	an[1] = INFINITY;                 /* and inf an inf */
	CHECK_OK(precc_gemm(&d));
	CHECK(cn[0] == INFINITY && cn[2] == 2);
}

#define NOSCALE { -1, 0 }

typedef struct Case {
	const char *name;
	precc_format fa, fb;
	precc_block ba, bb;   /* scale granularity; {-1} = no scale */
	int promote, mbits;
	long P;               /* expected chunk (0 = K) */
} Case;

/* Random operands in format f with per-block scale_inv for blk. */
static void *
make_operand(precc_format f, long rows, long K, precc_block blk, float **si)
{
	long n = rows * K;
	float *x = malloc(n * 4);
	void *q = malloc(precc_interp_tensor_bytes(f, rows, K));   /* e2m1: packed */

	for (long i = 0; i < n; i++)
		x[i] = nrand() * (i % 53 == 0 ? 8.0f : 1.0f);
	*si = NULL;
	if (blk.br >= 0) {
		long nb = precc_block_count(rows, K, blk, NULL, NULL);
		float *am = malloc(nb * 4), *s = malloc(nb * 4);
		*si = malloc(nb * 4);
		precc_scale_params p = { .fmax = precc_format_get(f)->max, .eps = 1e-12f };
		precc_amax(x, PRECC_FP32, rows, K, blk, am, NULL);
		precc_scales(am, nb, &p, PRECC_NF_ERROR, NULL, s, *si, NULL);
		precc_quant_opts o = { .qf = f, .round = PRECC_RNE, .saturate = true,
		                       .blk = blk, .scale = s };
		precc_quantize(x, PRECC_FP32, rows, K, &o, q);
		free(am);
		free(s);
	} else if (f == PRECC_FP32) {
		memcpy(q, x, n * 4);
	} else {
		precc_quant_opts o = { .qf = f, .round = PRECC_RNE, .saturate = true };
		precc_quantize(x, PRECC_FP32, rows, K, &o, q);
	}
	free(x);
	return q;
}

static void
run_case(const Case *cs, long M, long N, long K)
{
	float *sia, *sib, amax, ramax;
	void *a = make_operand(cs->fa, M, K, cs->ba, &sia);
	void *b = make_operand(cs->fb, N, K, cs->bb, &sib);
	float *c = malloc(M * N * 4), *c2 = malloc(M * N * 4), *r = malloc(M * N * 4);
	float *bias = malloc(N * 4);
	double *want = malloc(M * N * 8), *bound = malloc(M * N * 8);
	float *A = malloc(M * K * 4), *B = malloc(N * K * 4);
	precc_gemm_desc d;
	char what[128];

	for (long j = 0; j < N; j++)
		bias[j] = nrand();
	precc_gemm_desc_init(&d);
	d.m = M; d.n = N; d.k = K;
	d.a = (precc_gemm_operand){ a, cs->fa, sia, cs->ba };
	d.b = (precc_gemm_operand){ b, cs->fb, sib, cs->bb };
	d.promote_every = cs->promote;
	d.acc_mbits = cs->mbits;
	d.alpha = 0.75f;
	d.bias = bias;
	d.c = c;
	d.out_amax = &amax;
	d.threads = 2;
	CHECK_OK(precc_gemm(&d));
	long P = cs->P ? cs->P : K;
	ref_gemm(&d, P, r, &ramax);
	long diff = 0, first = -1;
	for (long i = 0; i < M * N; i++)
		if (fbits(c[i]) != fbits(r[i]) && diff++ == 0)
			first = i;
	if (diff) {
		fprintf(stderr, "%s %ldx%ldx%ld: %ld elements differ from the scalar "
		        "model; first %ld: got %.9g want %.9g\n", cs->name, M, N, K,
		        diff, first, (double)c[first], (double)r[first]);
		failures++;
	}
	CHECK(fbits(amax) == fbits(ramax));

	/* float64 reference over the dequantized operands */
	precc_dequantize(a, cs->fa, M, K, cs->ba.br >= 0 ? cs->ba
	                 : (precc_block){ 0, 0 }, sia, A);
	precc_dequantize(b, cs->fb, N, K, cs->bb.br >= 0 ? cs->bb
	                 : (precc_block){ 0, 0 }, sib, B);
	double u = 0x1p-24, ub = cs->mbits && cs->mbits < 23
	           ? ldexp(1.0, -cs->mbits) : 0;
	for (long i = 0; i < M; i++)
		for (long j = 0; j < N; j++) {
			double s = 0, sabs = 0;
			for (long k = 0; k < K; k++) {
				double p = (double)A[i * K + k] * B[j * K + k];
				s += p;
				sabs += fabs(p);
			}
			want[i * N + j] = 0.75 * s + bias[j];
			/* chunk of P adds (each fp32 + truncation), one scale
			 * product and multiply per chunk, K/P outer adds, alpha,
			 * bias; the dequantized operands carry the rounding of
			 * scale_inv products (1 u each) */
			double g = (P + 1) * (u + ub) + (K / P + 6) * u;
			bound[i * N + j] = 0.75 * g * sabs + 2 * u * fabs(want[i * N + j])
			                   + 1e-30;
		}
	snprintf(what, sizeof what, "%s %ldx%ldx%ld vs float64", cs->name, M, N, K);
	check_bound(what, c, want, bound, M * N);

	/* bit-identical for any thread count */
	int threads[] = { 1, 3, 7 };
	for (int t = 0; t < 3; t++) {
		d.threads = threads[t];
		d.c = c2;
		CHECK_OK(precc_gemm(&d));
		if (memcmp(c, c2, M * N * 4) != 0) {
			fprintf(stderr, "%s: %d threads differ from 2\n", cs->name,
			        threads[t]);
			failures++;
		}
	}
	free(a); free(b); free(sia); free(sib); free(c); free(c2); free(r);
	free(bias); free(want); free(bound); free(A); free(B);
}

/* Tensorwise scales whose fp32 product overflows or underflows, with
 * results that do not (issue 30): e4m3 codes times sa = sb = 2^70 (the
 * product 2^140) and times sa = sb ~ 2^-75 (about 2^-150, 0 or subnormal),
 * against float64, and bit-exact where everything is a power of two. */
static void
test_scale_range(void)
{
	enum { M = 3, N = 5, K = 8 };
	uint8_t a[M * K], b[N * K];
	float c[M * N], A[M * K], B[N * K];
	static const struct { float sa, sb, va, vb; int promote; } cs[] = {
		{ 0x1p70f, 0x1p70f, 0x1p-9f, 0x1p-9f, 0 },          /* 2^-15 * 2^140 */
		{ 0x1p70f, 0x1p70f, 0x1p-9f, 0x1p-9f, 4 },          /* two promotions */
		{ 0x1.8p65f, 0x1.4p66f, 0x1p-8f, 0x1.8p-8f, 0 },    /* 1.875 * 2^131 */
		{ 0x1p-75f, 0x1p-75f, 448, 416, 0 },                /* 2^-150 -> 0 */
		{ 0x1.fffffep-70f, 0x1.555556p-71f, 448, 320, 0 },  /* subnormal product */
		{ 0x1p100f, 0x1p-100f, 448, 448, 0 },               /* in range: as before */
	};
	precc_gemm_desc d;

	for (unsigned t = 0; t < sizeof cs / sizeof cs[0]; t++) {
		float sa = cs[t].sa, sb = cs[t].sb;
		for (int i = 0; i < M * K; i++) {
			/* values va, va/2, -va/4 ... (exact in e4m3) */
			float v = ldexpf(cs[t].va, -(i % 3)) * (i % 5 == 4 ? -1 : 1);
			a[i] = (uint8_t)precc_encode(PRECC_E4M3, v, PRECC_RNE, true, 0);
			A[i] = precc_decode(PRECC_E4M3, a[i]);
		}
		for (int i = 0; i < N * K; i++) {
			float v = ldexpf(cs[t].vb, -(i % 2));
			b[i] = (uint8_t)precc_encode(PRECC_E4M3, v, PRECC_RNE, true, 0);
			B[i] = precc_decode(PRECC_E4M3, b[i]);
		}
		precc_gemm_desc_init(&d);
		d.m = M; d.n = N; d.k = K; d.c = c;
		d.a = (precc_gemm_operand){ a, PRECC_E4M3, &sa, { 0, 0 } };
		d.b = (precc_gemm_operand){ b, PRECC_E4M3, &sb, { 0, 0 } };
		d.promote_every = cs[t].promote;
		CHECK_OK(precc_gemm(&d));
		int pow2 = frexpf(sa, &(int){ 0 }) == 0.5f && frexpf(sb, &(int){ 0 }) == 0.5f;
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				double s = 0;
				for (int k = 0; k < K; k++)
					s += (double)A[i * K + k] * B[j * K + k];
				double want = s * sa * sb, got = c[i * N + j];
				/* products and sums exact in fp32; then the roundings of
				 * s and fl(in * s) (none for powers of two), and of a
				 * subnormal result */
				double tol = (pow2 ? 0 : 0x1p-23 * fabs(want)) + 0x1p-150;
				if (!(fabs(got - want) <= tol)) {
					fprintf(stderr, "scale range %u [%d,%d]: got %a want %a "
					        "(sa %a sb %a)\n", t, i, j, got, want,
					        (double)sa, (double)sb);
					failures++;
					i = M, j = N;
				}
			}
	}
}

static void
test_errors(void)
{
	float a[4] = { 0 }, c[4];
	precc_gemm_desc d;

	precc_gemm_desc_init(&d);
	d.m = 2; d.n = 2; d.k = 2; d.a.data = a; d.b.data = a; d.c = c;
	d.k = 0;
	CHECK_ERR(precc_gemm(&d), PRECC_IEEMPTY);
	d.k = -2;
	CHECK_ERR(precc_gemm(&d), PRECC_IESHAPE);
	d.k = 2; d.m = 1L << 40; d.n = 1L << 40;
	CHECK_ERR(precc_gemm(&d), PRECC_IETOOBIG);
	d.m = 1L << 62;
	CHECK_ERR(precc_gemm(&d), PRECC_IETOOBIG);
	d.m = d.n = 2;
	d.a.fmt = PRECC_E8M0;
	CHECK_ERR(precc_gemm(&d), PRECC_IEINVAL);
	d.a.fmt = PRECC_FP32;
	d.c = NULL;
	CHECK_ERR(precc_gemm(&d), PRECC_IEINVAL);
	d.c = c;
	d.promote_every = -1;
	CHECK_ERR(precc_gemm(&d), PRECC_IEINVAL);
	/* each operand fits in memory, all three together do not */
	double phys = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	long side = (long)sqrt(phys * 0.4 / 4);
	d.promote_every = 0;
	d.m = d.n = d.k = side;
	CHECK_ERR(precc_gemm(&d), PRECC_IETOOBIG);
	d.m = d.n = d.k = 2;
	/* promotion must divide the scale blocks along K */
	float big[256 * 2] = { 0 }, s[4] = { 1, 1, 1, 1 }, cc[4];
	precc_gemm_desc_init(&d);
	d.m = 2; d.n = 2; d.k = 256; d.c = cc;
	d.a = (precc_gemm_operand){ big, PRECC_FP32, s, { 1, 128 } };
	d.b = (precc_gemm_operand){ big, PRECC_FP32, NULL, { 0, 0 } };
	d.promote_every = 96;
	CHECK_ERR(precc_gemm(&d), PRECC_IESHAPE);
	d.promote_every = 64;
	CHECK_OK(precc_gemm(&d));
}

/* The fused multiply-add copies against the separate mul and add
 * (PRECC_INTERP_NOFMA): every e4m3 and e5m2 code, NaN, inf, subnormals
 * and zeros included, times every other, accumulated over K, in fp32 and
 * with a 14-bit inner accumulator; and fp16 down to its subnormals. Bit
 * for bit, NaN payloads and the output amax included (e5m2's inf*0 is
 * why gemm.c fuses only formats without inf). */
static void
test_fused(void)
{
	static const precc_format fmts[] = { PRECC_E4M3, PRECC_E5M2, PRECC_FP16 };
	enum { R = 256, K = 300 };
	uint16_t *a = malloc(R * K * 2), *b = malloc(R * K * 2);
	float *c1 = malloc(R * R * 4), *c2 = malloc(R * R * 4), m1, m2;

	for (unsigned f = 0; f < 3; f++)
		for (int mbits = 0; mbits <= 14; mbits += 14) {
			int w = fmts[f] == PRECC_FP16 ? 2 : 1;
			for (long i = 0; i < R; i++)
				for (long k = 0; k < K; k++) {
					/* 8-bit: row i is code i against codes (j + 7k) mod 256;
					 * fp16: small and subnormal halves, both signs */
					uint32_t ca = w == 1 ? (uint32_t)i
					              : (uint32_t)(i * 131 + k * 17) & 0x83ff;
					uint32_t cb = w == 1 ? (uint32_t)(i + 7 * k) & 0xff
					              : (uint32_t)(i * 7 + k * 29) & 0x87ff;
					if (w == 1) {
						((uint8_t *)a)[i * K + k] = (uint8_t)ca;
						((uint8_t *)b)[i * K + k] = (uint8_t)cb;
					} else {
						a[i * K + k] = (uint16_t)ca;
						b[i * K + k] = (uint16_t)cb;
					}
				}
			precc_gemm_desc d;
			precc_gemm_desc_init(&d);
			d.m = d.n = R; d.k = K;
			d.a = (precc_gemm_operand){ a, fmts[f], NULL, { 0, 0 } };
			d.b = (precc_gemm_operand){ b, fmts[f], NULL, { 0, 0 } };
			d.acc_mbits = mbits;
			d.out_amax = &m1;
			d.c = c1;
			CHECK_OK(precc_gemm(&d));
			setenv("PRECC_INTERP_NOFMA", "1", 1);
			d.out_amax = &m2;
			d.c = c2;
			CHECK_OK(precc_gemm(&d));
			unsetenv("PRECC_INTERP_NOFMA");
			long diff = 0;
			for (long i = 0; i < R * R; i++)
				if (fbits(c1[i]) != fbits(c2[i]) && diff++ < 3)
					fprintf(stderr, "  [%ld]: %08x vs %08x\n", i,
					        fbits(c1[i]), fbits(c2[i]));
			if (diff || fbits(m1) != fbits(m2)) {
				fprintf(stderr, "fused %s, %d-bit acc: %ld elements differ "
				        "from mul then add\n", (const char *[]){ "e4m3", "e5m2", "fp16" }[f],
				        mbits, diff);
				failures++;
			}
		}
	free(a); free(b); free(c1); free(c2);
}

/* The fast path against the scalar model, bit for bit, at random odd
 * shapes: partial micro-tiles (MR = 6, NR = 16, AVX-512's 12-row pairs)
 * and cache blocks (KC = 256, MC = 192, NC = 256) in every dimension, K
 * not a multiple of the promotion interval, for the fp32, fast:14 and
 * promote:N models; each at 1 and 3 threads. */
static void
test_odd_shapes(void)
{
	static const struct {
		precc_format f;
		precc_block blk;
		int mbits;
	} models[] = {
		{ PRECC_FP32, NOSCALE, 0 },            /* exact fp32 */
		{ PRECC_E4M3, { 0, 0 }, 14 },          /* fast:14, tensorwise */
		{ PRECC_E4M3, { 1, 0 }, 14 },          /* promote:N, rowwise */
		{ PRECC_E4M3, { 0, 0 }, 0 },           /* fused, exact products */
		{ PRECC_BF16, NOSCALE, 14 },
		{ PRECC_E5M2, { 1, 0 }, 10 },
	};
	static const int promote[] = { 0, 1, 7, 32, 100, 128 };
	int rounds = SMALL ? 12 : 48;

	for (int r = 0; r < rounds; r++) {
		int mi = r % (int)(sizeof models / sizeof *models);
		long M = 1 + (long)(urand() * (r % 5 == 4 ? 260 : 40));
		long N = 1 + (long)(urand() * (r % 7 == 6 ? 300 : 50));
		long K = 1 + (long)(urand() * (r % 3 == 2 ? 600 : 140));
		int P = promote[(r / 2) % 6];
		float *sia, *sib, amax, ramax;
		void *a = make_operand(models[mi].f, M, K, models[mi].blk, &sia);
		void *b = make_operand(models[mi].f, N, K, models[mi].blk, &sib);
		float *c = malloc(M * N * 4), *c3 = malloc(M * N * 4);
		float *ref = malloc(M * N * 4);
		precc_gemm_desc d;

		precc_gemm_desc_init(&d);
		d.m = M; d.n = N; d.k = K;
		d.a = (precc_gemm_operand){ a, models[mi].f, sia, models[mi].blk };
		d.b = (precc_gemm_operand){ b, models[mi].f, sib, models[mi].blk };
		d.promote_every = P;
		d.acc_mbits = models[mi].mbits;
		d.out_amax = &amax;
		d.c = c;
		d.threads = 1;
		CHECK_OK(precc_gemm(&d));
		d.threads = 3;
		d.c = c3;
		CHECK_OK(precc_gemm(&d));
		ref_gemm(&d, P ? P : K, ref, &ramax);
		long diff = 0, first = -1;
		for (long i = 0; i < M * N; i++)
			if ((fbits(c[i]) != fbits(ref[i]) || fbits(c3[i]) != fbits(c[i]))
			    && diff++ == 0)
				first = i;
		if (diff || fbits(amax) != fbits(ramax)) {
			fprintf(stderr, "odd shape %ldx%ldx%ld, model %d, promote %d: "
			        "%ld elements differ; first %ld: %a (3 threads %a) want "
			        "%a\n", M, N, K, mi, P, diff, first,
			        diff ? (double)c[first] : 0.0,
			        diff ? (double)c3[first] : 0.0,
			        diff ? (double)ref[first] : 0.0);
			failures++;
		}
		free(a); free(b); free(sia); free(sib); free(c); free(c3); free(ref);
	}
}

/* The process default thread count: precc_interp_set_threads, then
 * PRECC_NUM_THREADS, then every core; an explicit count wins. */
static void
test_threads_default(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	unsetenv("PRECC_NUM_THREADS");
	precc_interp_set_threads(0);
	CHECK(precc_interp_threads(0) == (cores > 0 ? cores : 1));
	setenv("PRECC_NUM_THREADS", "5", 1);
	CHECK(precc_interp_threads(0) == 5);
	precc_interp_set_threads(3);
	CHECK(precc_interp_threads(0) == 3);
	CHECK(precc_interp_threads(2) == 2);
	precc_interp_set_threads(0);
	CHECK(precc_interp_threads(0) == 5);
	unsetenv("PRECC_NUM_THREADS");
}

int
main(void)
{
	static const Case cases[] = {
		{ "fp32 exact", PRECC_FP32, PRECC_FP32, NOSCALE, NOSCALE, 0, 0, 0 },
		{ "bf16 exact", PRECC_BF16, PRECC_BF16, NOSCALE, NOSCALE, 0, 0, 0 },
		{ "fp16 exact", PRECC_FP16, PRECC_FP16, NOSCALE, NOSCALE, 0, 0, 0 },
		{ "fp16 x bf16", PRECC_FP16, PRECC_BF16, NOSCALE, NOSCALE, 0, 0, 0 },
		{ "e4m3 tensorwise", PRECC_E4M3, PRECC_E4M3, { 0, 0 }, { 0, 0 }, 0, 0,
		  0 },
		{ "e4m3 x e5m2 rowwise", PRECC_E4M3, PRECC_E5M2, { 1, 0 }, { 1, 0 },
		  0, 0, 0 },
		{ "e4m3 blockwise 1x128 x 128x128", PRECC_E4M3, PRECC_E4M3, { 1, 128 },
		  { 128, 128 }, 0, 0, 128 },
		{ "e4m3 blockwise, promote 64", PRECC_E4M3, PRECC_E4M3, { 1, 128 },
		  { 128, 128 }, 64, 0, 64 },
		{ "e4m3 tensorwise, 14-bit acc", PRECC_E4M3, PRECC_E4M3, { 0, 0 },
		  { 0, 0 }, 0, 14, 0 },
		{ "e4m3 blockwise, 14-bit acc, promote 128", PRECC_E4M3, PRECC_E4M3,
		  { 1, 128 }, { 128, 128 }, 128, 14, 128 },
		{ "fp32, 10-bit acc, promote 32", PRECC_FP32, PRECC_FP32, NOSCALE,
		  NOSCALE, 32, 10, 32 },
		{ "e2m1 1x16 blocks (NVFP4-like)", PRECC_E2M1, PRECC_E2M1, { 1, 16 },
		  { 1, 16 }, 0, 0, 16 },
		{ "e3m2 x e2m3 MX 1x32 blocks", PRECC_E3M2, PRECC_E2M3, { 1, 32 },
		  { 1, 32 }, 0, 0, 32 },
	};
	long M = SMALL ? 199 : 211, N = SMALL ? 270 : 300, K = SMALL ? 200 : 520;

	test_hand();
	test_fused();
	test_scale_range();
	test_threads_default();
	test_odd_shapes();
	for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++)
		run_case(&cases[i], M, N, K);
	/* many tiles, for thread-count determinism */
	if (!SMALL)
		run_case(&cases[5], 600, 700, 384);
	run_case(&cases[0], 5, 3, 1);
	test_errors();
	return finish("gemm");
}
