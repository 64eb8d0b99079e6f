/*
 * test_gemm_check.c — the bound precc-run --check holds GEMM outputs to
 * (runtime/gemm_check.c, docs/numerics.md "The GEMM check bound").
 *
 * For GEMM kernels of three accumulation models, the interpreter's output
 * (the cpu side) against a stand-in for the GPU computed here from the
 * same operands: the dot products summed in descending k (another order
 * than the interpreter's ascending one; for promote:N the chunk sums also
 * truncated to 14 bits, the model's tensor core). That must pass, with
 * some elements differing (f32 outputs; a bf16 cast hides them). The same
 * stand-in with one mma's 32 products of element (0, 0) lost (row 0 of
 * both operands nonnegative, so they are 1/16 of its S) must fail there
 * and pass elsewhere; an output one bound past the cpu's must fail; and the bound
 * function's figures against hand-computed γ_n values.
 */
#include <math.h>
#include <stdint.h>

#include "rtcheck.h"
#include "precc/interp.h"
#include "precc/numerics.h"
#include "rt.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t next(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng >> 33);
}

/* keep B explicit mantissa bits of x, toward zero */
static float trunc_bits(float x, int b)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	if (b < 23 && isfinite(x))
		u &= ~((1u << (23 - b)) - 1);
	memcpy(&x, &u, 4);
	return x;
}

typedef struct Case {
	const char *name, *ir;
	long m, n, k, mval;   /* rows of A, of B, K; the IR's M */
	long P;               /* promotion chunk, 0: all of K */
	int bits;             /* the stand-in's chunk accumulator bits (23: fp32) */
	precc_format out;
} Case;

static const Case cases[] = {
	{"e4m3 tensorwise, fp32, bf16 out + amax",
	 "kernel @y.gemm {\n"
	 "  %a = param buf : e4m3[M,512]\n"
	 "  %b = param buf : e4m3[48,512]\n"
	 "  %sa = param buf : f32[1,1]{*x*}\n"
	 "  %sb = param buf : f32[1,1]{*x*}\n"
	 "  %y.acc = gemm %a, %b, %sa, %sb accum=fp32 : f32[M,48]\n"
	 "  %y.amax = amax %y.acc : f32[1,1]{*x*}\n"
	 "  %y = cast %y.acc : bf16[M,48]\n"
	 "  ret %y, %y.amax\n"
	 "}\n", 40, 48, 512, 40, 0, 23, PRECC_BF16},
	{"e4m3 1x128, promote:128, f32 out",
	 "kernel @y.gemm {\n"
	 "  %a = param buf : e4m3[M,512]\n"
	 "  %b = param buf : e4m3[48,512]\n"
	 "  %sa = param buf : f32[M,4]{1x128}\n"
	 "  %sb = param buf : f32[48,4]{1x128}\n"
	 "  %y = gemm %a, %b, %sa, %sb accum=promote:128 : f32[M,48]\n"
	 "  ret %y\n"
	 "}\n", 40, 48, 512, 40, 128, 14, PRECC_FP32},
	{"bf16, fp32, f32 out into main_grad",
	 "kernel @dw.gemm {\n"
	 "  %a = param buf : bf16[40,M]\n"
	 "  %b = param buf : bf16[48,M]\n"
	 "  %main_grad = param main_grad : f32[40,48]\n"
	 "  %dw.acc = gemm %a, %b accum=fp32 : f32[40,48]\n"
	 "  %dw = accumulate %dw.acc, %main_grad : f32[40,48]\n"
	 "  ret %dw\n"
	 "}\n", 40, 48, 384, 384, 0, 23, PRECC_FP32},
};

static void *rand_codes(precc_format f, long n, float amax)
{
	size_t es = precc_interp_elem_bytes(f);
	unsigned char *p = calloc((size_t)n + 1, es);
	for (long i = 0; i < n; i++) {
		float v = ((float)(next() % 20001) - 10000.0f) / 10000.0f * amax;
		uint32_t c = precc_encode(f, v, PRECC_RNE, true, 0);
		memcpy(p + (size_t)i * es, &c, es);
	}
	return p;
}

static float dec(precc_format f, const void *p, long i)
{
	size_t es = precc_interp_elem_bytes(f);
	uint32_t c = 0;
	memcpy(&c, (const char *)p + (size_t)i * es, es);
	return precc_decode(f, c);
}

static void put(precc_format f, void *p, long i, float v)
{
	size_t es = precc_interp_elem_bytes(f);
	uint32_t c = precc_encode(f, v, PRECC_RNE, false, 0);
	memcpy((char *)p + (size_t)i * es, &c, es);
}

static void run_case(const Case *c)
{
	char err[1024];
	Module *mod = ir_parse(c->ir, c->name, err, sizeof err);
	CHECK(mod != NULL);
	if (!mod) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	const Func *f = mod->fn[0];
	CHECK(rt_kernel_is_gemm(f));
	long M = c->m, N = c->n, K = c->k, nb = c->P ? (K + c->P - 1) / c->P : 1;
	int wg = strstr(c->ir, "main_grad") != NULL;   /* bf16 wgrad into main_grad */
	precc_format af = wg ? PRECC_BF16 : PRECC_E4M3;
	long mval = c->mval;
	/* param values */
	void *A = rand_codes(af, M * K, wg ? 2.0f : 448.0f), *B = rand_codes(af, N * K, wg ? 2.0f : 448.0f);
	/* row 0 of A and of B nonnegative: the 32 products lost at (0, 0)
	 * are then 1/16 of its S whatever the signs elsewhere */
	for (long k = 0; k < K; k++) {
		put(af, A, k, fabsf(dec(af, A, k)));
		put(af, B, k, fabsf(dec(af, B, k)));
	}
	long nsa = c->P ? M * nb : 1, nsb = c->P ? N * nb : 1;
	float *sa = calloc((size_t)nsa + 1, 4), *sb = calloc((size_t)nsb + 1, 4);
	for (long i = 0; i < nsa; i++)
		sa[i] = ldexpf(1.0f + (float)(next() % 8) / 8, -(int)(next() % 8));
	for (long i = 0; i < nsb; i++)
		sb[i] = ldexpf(1.0f + (float)(next() % 8) / 8, -(int)(next() % 8));
	float *old = wg ? (float *)rand_codes(PRECC_FP32, M * N, 100.0f) : NULL;
	const char *names[5];
	const void *data[5];
	size_t bytes[5];
	int np = 0;
	size_t es = precc_interp_elem_bytes(af);
	names[np] = "a", data[np] = A, bytes[np++] = (size_t)(M * K) * es;
	names[np] = "b", data[np] = B, bytes[np++] = (size_t)(N * K) * es;
	if (!wg) {
		names[np] = "sa", data[np] = sa, bytes[np++] = (size_t)nsa * 4;
		names[np] = "sb", data[np] = sb, bytes[np++] = (size_t)nsb * 4;
	} else
		names[np] = "main_grad", data[np] = old, bytes[np++] = (size_t)(M * N) * 4;
	/* the cpu side: the interpreter */
	IrInterpOpts o;
	ir_interp_opts_init(&o);
	o.m = mval;
	IrInterp *ip = ir_interp_new(f, &o, err, sizeof err);
	CHECK(ip != NULL);
	if (!ip)
		return;
	for (int p = 0; p < np; p++)
		CHECK(ir_interp_bind(ip, names[p], (void *)data[p], bytes[p]) == 0);
	CHECK(ir_interp_run(ip) == 0);
	int yv = ir_interp_result(ip, 0);
	const void *ycpu = ir_interp_value(ip, yv);
	/* the stand-in GPU: descending k, chunks of P, chunk sums truncated
	 * to c->bits; and the same with one mma's 32 products of (0, 0) lost */
	size_t oes = precc_interp_elem_bytes(c->out);
	void *ygpu = calloc((size_t)(M * N) + 1, oes), *ylost = calloc((size_t)(M * N) + 1, oes);
	long P = c->P ? c->P : K;
	for (int lost = 0; lost < 2; lost++)
		for (long i = 0; i < M; i++)
			for (long j = 0; j < N; j++) {
				long drop = lost && i == 0 && j == 0 ? 32 : 0;
				float outer = 0;
				for (long c0 = 0; c0 < K; c0 += P) {
					float inner = 0;
					for (long k = (c0 + P < K ? c0 + P : K) - 1; k >= c0; k--) {
						if (k < drop)
							continue;
						float a = dec(af, A, i * K + k), b = dec(af, B, j * K + k);
						inner = trunc_bits(inner + a * b, c->bits);
					}
					float s = wg ? 1.0f : c->P ? sa[i * nb + c0 / P] * sb[j * nb + c0 / P]
					                           : sa[0] * sb[0];
					outer = outer + inner * s;
				}
				if (wg)
					outer = old[i * N + j] + outer;
				put(c->out, lost ? ylost : ygpu, i * N + j, outer);
			}
	float *tol = malloc((size_t)(M * N) * sizeof *tol);
	CHECK(rt_gemm_tolerance(f, mval, np, names, data, bytes, yv, 23, tol, (size_t)(M * N), err,
	                        sizeof err) == 0);
	rt_gemm_diff d;
	rt_gemm_compare(c->out, ygpu, ycpu, tol, M * N, &d);
	printf("%s: another order: %ld of %ld differ, max abs %.3g, max rel %.3g, %.3g ulps, "
	       "%.3g of the bound\n", c->name, d.differ, d.n, d.max_abs, d.max_rel, d.max_ulps,
	       d.max_ratio);
	CHECK(d.over == 0 && (d.differ > 0 || c->out != PRECC_FP32));
	rt_gemm_compare(c->out, ylost, ycpu, tol, M * N, &d);
	printf("%s: one product lost: %ld beyond the bound (first %ld), %.3g of the bound\n",
	       c->name, d.over, d.first_over, d.max_ratio);
	CHECK(d.over == 1 && d.first_over == 0);
	/* one bound and a bit past the cpu's value: fails; half of it: passes */
	if (c->out == PRECC_FP32) {
		float *y2 = malloc((size_t)(M * N) * 4);
		memcpy(y2, ycpu, (size_t)(M * N) * 4);
		long at = M * N / 2;
		y2[at] = (float)(y2[at] + 0.5 * tol[at]);
		rt_gemm_compare(c->out, y2, ycpu, tol, M * N, &d);
		CHECK(d.over == 0);
		y2[at] = (float)(((const float *)ycpu)[at] + 1.01 * tol[at] + rt_ulp(PRECC_FP32, y2[at]));
		rt_gemm_compare(c->out, y2, ycpu, tol, M * N, &d);
		CHECK(d.over == 1 && d.first_over == at);
		free(y2);
	}
	/* the amax output: within the largest element bound */
	if (ir_interp_nresults(ip) > 1) {
		int av = ir_interp_result(ip, 1);
		float am_cpu = *(const float *)ir_interp_value(ip, av), am_gpu = 0, atol;
		/* the cpu amax moved by 0.9 of the bound passes, by 2 fails */
		CHECK(rt_gemm_tolerance(f, mval, np, names, data, bytes, av, 23, &atol, 1, err,
		                        sizeof err) == 0);
		am_gpu = am_cpu + 0.9f * atol;
		rt_gemm_compare(PRECC_FP32, &am_gpu, &am_cpu, &atol, 1, &d);
		CHECK(d.over == 0 && atol > 0 && isfinite(atol));
		am_gpu = am_cpu + 2 * atol;
		rt_gemm_compare(PRECC_FP32, &am_gpu, &am_cpu, &atol, 1, &d);
		CHECK(d.over == 1);
	}
	ir_interp_free(ip);
	free(A); free(B); free(sa); free(sb); free(old); free(ygpu); free(ylost); free(tol);
	ir_module_free(mod);
}

/* Row 0 of A: finite bf16 values whose products with B's row overflow
 * fp32 partway (+big first, then -big), so the cpu's running sum goes +inf
 * then NaN while a wider-range sum (the H200's tensor cores) gives a
 * finite value or -inf: that element has no bound (tol NaN) and any GPU
 * value passes there. Row 1 holds a real inf input: its class (inf) must
 * still match, and row 2, all small, keeps its finite bound. */
static void overflow_case(void)
{
	static const char ir[] =
		"kernel @y.gemm {\n"
		"  %a = param buf : bf16[M,4]\n"
		"  %b = param buf : bf16[2,4]\n"
		"  %y.acc = gemm %a, %b accum=fp32 : f32[M,2]\n"
		"  %y = cast %y.acc : bf16[M,2]\n"
		"  ret %y\n"
		"}\n";
	const float a[3][4] = {{3e38f, 3e38f, -3e38f, -3e38f}, {INFINITY, 1, 1, 1}, {1, 2, 3, 4}};
	const float b[2][4] = {{2, 2, 2, 2}, {1, 1, 1, 1}};
	uint16_t A[12], B[8], cpu[6], gpu[6];
	char err[1024];
	Module *mod = ir_parse(ir, "overflow", err, sizeof err);
	CHECK(mod != NULL);
	if (!mod)
		return;
	const Func *f = mod->fn[0];
	for (int i = 0; i < 12; i++)
		A[i] = (uint16_t)precc_encode(PRECC_BF16, a[i / 4][i % 4], PRECC_RNE, false, 0);
	for (int i = 0; i < 8; i++)
		B[i] = (uint16_t)precc_encode(PRECC_BF16, b[i / 4][i % 4], PRECC_RNE, false, 0);
	const char *names[2] = {"a", "b"};
	const void *data[2] = {A, B};
	size_t bytes[2] = {sizeof A, sizeof B};
	IrInterpOpts o;
	ir_interp_opts_init(&o);
	o.m = 3;
	IrInterp *ip = ir_interp_new(f, &o, err, sizeof err);
	CHECK(ip != NULL);
	if (!ip)
		return;
	CHECK(ir_interp_bind(ip, "a", A, sizeof A) == 0 && ir_interp_bind(ip, "b", B, sizeof B) == 0);
	CHECK(ir_interp_run(ip) == 0);
	int yv = ir_interp_result(ip, 0);
	memcpy(cpu, ir_interp_value(ip, yv), sizeof cpu);
	float tol[6];
	CHECK(rt_gemm_tolerance(f, 3, 2, names, data, bytes, yv, 23, tol, 6, err, sizeof err) == 0);
	/* (0, 0): 6e38 overflows in fp32 whatever the order */
	CHECK(isnan(tol[0]) && isnan(tol[1]));
	CHECK(isinf(precc_decode(PRECC_BF16, cpu[2])) && !isnan(tol[2]));
	CHECK(!isnan(tol[4]) && isfinite(tol[4]));
	rt_gemm_diff d;
	memcpy(gpu, cpu, sizeof gpu);
	gpu[0] = (uint16_t)precc_encode(PRECC_BF16, -INFINITY, PRECC_RNE, false, 0);
	gpu[1] = (uint16_t)precc_encode(PRECC_BF16, 0.0f, PRECC_RNE, false, 0);
	rt_gemm_compare(PRECC_BF16, gpu, cpu, tol, 6, &d);
	printf("overflow: cpu (0,0) %g, gpu -inf: %ld differ, %ld unbounded, %ld beyond\n",
	       precc_decode(PRECC_BF16, cpu[0]), d.differ, d.unbounded, d.over);
	CHECK(d.over == 0 && d.unbounded == 2);
	gpu[2] = (uint16_t)precc_encode(PRECC_BF16, NAN, PRECC_RNE, false, 0);   /* inf input: still inf */
	rt_gemm_compare(PRECC_BF16, gpu, cpu, tol, 6, &d);
	CHECK(d.over == 1 && d.first_over == 2);
	ir_interp_free(ip);
	ir_module_free(mod);
	/* an output cast that overflowed on one side only: f16 inf (the cpu,
	 * pre-cast >= 65520) against 65504 (the GPU, pre-cast < 65520) is 16
	 * apart, within a bound of 1000; 60000 is not; nor is any finite value
	 * where the bound is inf (an inf input: inf is the only answer) */
	uint16_t h[3], hinf = (uint16_t)precc_encode(PRECC_FP16, INFINITY, PRECC_RNE, false, 0);
	float ht[3] = {1000, 1000, INFINITY};
	uint16_t hc[3] = {hinf, hinf, hinf};
	h[0] = (uint16_t)precc_encode(PRECC_FP16, 65504, PRECC_RNE, false, 0);
	h[1] = (uint16_t)precc_encode(PRECC_FP16, 60000, PRECC_RNE, false, 0);
	h[2] = h[0];
	rt_gemm_compare(PRECC_FP16, h, hc, ht, 3, &d);
	printf("f16 overflow on one side: %ld differ, %ld beyond (first %ld)\n", d.differ, d.over,
	       d.first_over);
	CHECK(d.differ == 3 && d.over == 2 && d.first_over == 1);
}

/* fast:14's bound is c · S with S = |A||B| summed in fp32: a sum kept
 * to 14 bits, as the cpu backend runs fast:14, would drop every 2^-16
 * here and give S = 1 instead of 1 + 4095 · 2^-16. */
static void fast_sum_case(void)
{
	static const char ir[] =
		"kernel @y.gemm {\n"
		"  %a = param buf : bf16[M,4096]\n"
		"  %b = param buf : bf16[1,4096]\n"
		"  %y = gemm %a, %b accum=fast:14 : f32[M,1]\n"
		"  ret %y\n"
		"}\n";
	static uint16_t A[4096], B[4096];
	char err[1024];
	Module *mod = ir_parse(ir, "fast_sum", err, sizeof err);
	CHECK(mod != NULL);
	if (!mod)
		return;
	const Func *f = mod->fn[0];
	for (int i = 0; i < 4096; i++) {
		A[i] = (uint16_t)precc_encode(PRECC_BF16, i ? 0x1p-16f : 1.0f, PRECC_RNE, false, 0);
		B[i] = (uint16_t)precc_encode(PRECC_BF16, 1.0f, PRECC_RNE, false, 0);
	}
	const char *names[2] = {"a", "b"};
	const void *data[2] = {A, B};
	size_t bytes[2] = {sizeof A, sizeof B};
	float tol = 0;
	int yv = -1;
	for (int i = 0; i < f->nins; i++)
		if (f->ins[i].op == OP_gemm)
			yv = f->ins[i].res;
	CHECK(rt_gemm_tolerance(f, 1, 2, names, data, bytes, yv, 23, &tol, 1, err, sizeof err) == 0);
	double c = rt_gemm_rel_bound(ACC_FAST, 14, 4096, 0, 23, 14), S = 1 + 4095 * 0x1p-16;
	printf("fast:14, K 4096: tol %.6g, c %.6g, c S %.6g\n", tol, c, c * S);
	CHECK(tol >= c * S * 0.9999 && tol <= c * S * 1.001);
	ir_module_free(mod);
}

int main(void)
{
	/* γ_n = nu / (1 - nu) (Higham, Accuracy and Stability, Lemma 3.1) */
	CHECK(fabs(rt_gamma(4096, 0x1p-24) - 4096 * 0x1p-24 / (1 - 4096 * 0x1p-24)) < 1e-18);
	CHECK(isinf(rt_gamma(1 << 24, 0x1p-24)));
	/* fp32, K = 4096, one chunk: cpu γ_4096(2^-24) + γ_2(2^-24), gpu the
	 * same at 2^-23: about 3 · 4096 · 2^-24 = 7.3e-4 */
	double c = rt_gemm_rel_bound(ACC_FP32, 0, 4096, 0, 23, 14);
	CHECK(c > 7.3e-4 && c < 7.4e-4);
	/* promote:128 over K = 4096 with the 14-bit model: 2 γ_128(2^-14) +
	 * 2 γ_33(2^-24), about 1.57e-2 */
	c = rt_gemm_rel_bound(ACC_PROMOTE, 128, 4096, 128, 23, 14);
	CHECK(c > 1.56e-2 && c < 1.58e-2);
	/* fast:10: 2 γ_4096(2^-10) has no bound (4 nu > 1) */
	CHECK(isinf(rt_gemm_rel_bound(ACC_FAST, 10, 4096, 0, 23, 14)));
	CHECK(rt_ulp(PRECC_BF16, 1.0) == 0x1p-7 && rt_ulp(PRECC_FP32, 1.5) == 0x1p-23 &&
	      rt_ulp(PRECC_FP32, 0) == 0x1p-149 && rt_ulp(PRECC_FP16, 65504) == 32);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		run_case(&cases[i]);
	overflow_case();
	fast_sum_case();
	return finish("runtime.gemm_check");
}
