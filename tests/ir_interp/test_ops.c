/*
 * test_ops.c — the IR interpreter (ir/interp/interp.c) op by op on small Funcs
 * parsed from IR text, each checked against values computed by hand, and
 * its error paths (unbound params, bad M, memory, partial K blocks,
 * nonfinite=error/skip, bind sizes).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "precc/interp.h"

static int failures;

#define CHECK(c) do { \
	if (!(c)) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
		failures++; \
	} \
} while (0)

#define CHECK_F(got, want) do { \
	double g_ = (got), w_ = (want); \
	if (!(g_ == w_ || (isnan(g_) && isnan(w_)))) { \
		fprintf(stderr, "%s:%d: %s = %.9g, want %.9g\n", __FILE__, __LINE__, #got, g_, w_); \
		failures++; \
	} \
} while (0)

static Module *
parse(const char *text)
{
	char err[2048];
	Module *m = ir_parse(text, "test", err, sizeof err);

	if (!m) {
		fprintf(stderr, "parse: %s\n", err);
		exit(1);
	}
	if (ir_verify(m, err, sizeof err)) {
		fprintf(stderr, "verify: %s\n", err);
		exit(1);
	}
	return m;
}

static IrInterp *
start(const Func *f, long m, IrInterpOpts *o)
{
	IrInterpOpts d;
	char err[1024];
	IrInterp *ip;

	if (!o) {
		ir_interp_opts_init(&d);
		o = &d;
	}
	o->m = m;
	ip = ir_interp_new(f, o, err, sizeof err);
	if (!ip) {
		fprintf(stderr, "ir_interp_new: %s\n", err);
		exit(1);
	}
	return ip;
}

static void
bind(IrInterp *ip, const char *name, void *p, size_t n)
{
	if (ir_interp_bind(ip, name, p, n)) {
		fprintf(stderr, "bind %s: %s\n", name, ir_interp_error(ip));
		exit(1);
	}
}

static void
run_ok(IrInterp *ip)
{
	if (ir_interp_run(ip)) {
		fprintf(stderr, "run: %s\n", ir_interp_error(ip));
		failures++;
	}
}

static const void *
val(const Func *f, IrInterp *ip, const char *name)
{
	return ir_interp_value(ip, ir_find_value(f, name));
}

static const float *
fval(const Func *f, IrInterp *ip, const char *name)
{
	return val(f, ip, name);
}

/* amax -> scale -> quantize -> recip -> dequantize, rowwise */
static void
test_rowwise(void)
{
	Module *m = parse(
		"func @t {\n"
		"  %x = param in : f32[2,4]\n"
		"  %a = amax %x : f32[2,1]{1x*}\n"
		"  %s = scale %a fmt=e4m3 : f32[2,1]{1x*}\n"
		"  %q = quantize %x, %s sat : e4m3[2,4]\n"
		"  %si = recip %s : f32[2,1]{1x*}\n"
		"  %dq = dequantize %q, %si : f32[2,4]\n"
		"  ret %dq\n"
		"}\n");
	const Func *f = m->fn[0];
	float x[8] = {1, -2, 4, 0.5f, 0, 0, 0, 0};
	IrInterp *ip = start(f, 1, NULL);
	const uint8_t *q;

	bind(ip, "x", x, sizeof x);
	run_ok(ip);
	CHECK_F(fval(f, ip, "a")[0], 4);
	CHECK_F(fval(f, ip, "a")[1], 0);
	CHECK_F(fval(f, ip, "s")[0], 112);      /* 448 / 4 */
	CHECK_F(fval(f, ip, "s")[1], 1);        /* amax 0 -> 1 */
	q = val(f, ip, "q");
	CHECK_F(precc_decode(PRECC_E4M3, q[0]), 112);
	CHECK_F(precc_decode(PRECC_E4M3, q[1]), -224);
	CHECK_F(precc_decode(PRECC_E4M3, q[2]), 448);
	CHECK_F(precc_decode(PRECC_E4M3, q[3]), 56);
	for (int i = 0; i < 8; i++)
		CHECK_F(fval(f, ip, "dq")[i], x[i]);
	CHECK(ir_interp_nresults(ip) == 1 && ir_interp_result(ip, 0) == ir_find_value(f, "dq"));
	ir_interp_free(ip);
	ir_module_free(m);
}

/* scale attributes: margin, pow2, eps; tensorwise amax of bf16 */
static void
test_scale_attrs(void)
{
	Module *m = parse(
		"func @t {\n"
		"  %x = param in : f32[1,2]\n"
		"  %a = amax %x : f32[1,1]{*x*}\n"
		"  %s1 = scale %a fmt=e4m3 margin=1 : f32[1,1]{*x*}\n"
		"  %s2 = scale %a fmt=e4m3 pow2 : f32[1,1]{*x*}\n"
		"  %s3 = scale %a fmt=e5m2 eps=8 : f32[1,1]{*x*}\n"
		"  ret %s1, %s2, %s3\n"
		"}\n");
	const Func *f = m->fn[0];
	float x[2] = {-3, 1};
	IrInterp *ip = start(f, 1, NULL);

	bind(ip, "x", x, sizeof x);
	run_ok(ip);
	CHECK_F(fval(f, ip, "a")[0], 3);
	CHECK_F(fval(f, ip, "s1")[0], (float)(448.0 / 3 / 2));
	CHECK_F(fval(f, ip, "s2")[0], 128);           /* 149.33 down to 2^7 */
	CHECK_F(fval(f, ip, "s3")[0], 57344.0f / 8);  /* amax clamped to eps */
	ir_interp_free(ip);
	ir_module_free(m);
}

/* MX: 1x32 blocks, e8m0 scale_inv (rceil), recip, quantize */
static void
test_mx(void)
{
	Module *m = parse(
		"func @t {\n"
		"  %x = param in : f32[1,64]\n"
		"  %a = amax %x : f32[1,2]{1x32}\n"
		"  %si = mx_scale %a fmt=e4m3 mode=rceil : e8m0[1,2]{1x32}\n"
		"  %s = recip %si : f32[1,2]{1x32}\n"
		"  %q = quantize %x, %s sat : e4m3[1,64]\n"
		"  ret %q, %si\n"
		"}\n");
	const Func *f = m->fn[0];
	float x[64] = {0};
	IrInterp *ip = start(f, 1, NULL);
	const uint8_t *q, *e;

	x[0] = 6, x[1] = -1.5f, x[32] = 0.25f;
	bind(ip, "x", x, sizeof x);
	run_ok(ip);
	e = val(f, ip, "si");
	CHECK(e[0] == 127 - 6);       /* ceil(log2(6/448)) = -6 */
	CHECK(e[1] == 127 - 10);      /* ceil(log2(0.25/448)) = -10 */
	CHECK_F(fval(f, ip, "s")[0], 64);
	q = val(f, ip, "q");
	CHECK_F(precc_decode(PRECC_E4M3, q[0]), 384);
	CHECK_F(precc_decode(PRECC_E4M3, q[1]), -96);
	CHECK_F(precc_decode(PRECC_E4M3, q[32]), 256);
	ir_interp_free(ip);
	ir_module_free(m);
}

/* NVFP4: global scale, e4m3 block scales, e2m1 codes, 6-operand gemm */
static void
test_nvfp4(void)
{
	Module *m = parse(
		"func @t {\n"
		"  %x = param in : f32[1,16]\n"
		"  %w = param weight : f32[1,16]\n"
		"  %ga = amax %x : f32[1,1]{*x*}\n"
		"  %gs = scale %ga fmt=e2m1 block_fmt=e4m3 : f32[1,1]{*x*}\n"
		"  %a = amax %x : f32[1,1]{1x16}\n"
		"  %si = block_scale %a, %gs fmt=e2m1 : e4m3[1,1]{1x16}\n"
		"  %q = quantize %x, %si, %gs sat : e2m1[1,16]\n"
		"  %gi = recip %gs : f32[1,1]{*x*}\n"
		"  %wa = amax %w : f32[1,1]{*x*}\n"
		"  %wgs = scale %wa fmt=e2m1 block_fmt=e4m3 : f32[1,1]{*x*}\n"
		"  %wb = amax %w : f32[1,1]{1x16}\n"
		"  %wsi = block_scale %wb, %wgs fmt=e2m1 : e4m3[1,1]{1x16}\n"
		"  %wq = quantize %w, %wsi, %wgs sat : e2m1[1,16]\n"
		"  %wgi = recip %wgs : f32[1,1]{*x*}\n"
		"  %y = gemm %q, %wq, %si, %wsi, %gi, %wgi accum=fp32 : f32[1,1]\n"
		"  %dq = dequantize %q, %si, %gi : bf16[1,16]\n"
		"  ret %y, %dq\n"
		"}\n");
	const Func *f = m->fn[0];
	float x[16] = {6, 3, -1.5f, 0.5f, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	float w[16];
	IrInterp *ip = start(f, 1, NULL);
	const uint8_t *q;
	double ref = 0;

	for (int i = 0; i < 16; i++)
		w[i] = i % 2 ? 1 : -0.5f, ref += (double)x[i] * w[i];
	bind(ip, "x", x, sizeof x);
	bind(ip, "w", w, sizeof w);
	run_ok(ip);
	CHECK_F(fval(f, ip, "gs")[0], 448);                        /* 2688 / 6 */
	CHECK_F(precc_decode(PRECC_E4M3, *(const uint8_t *)val(f, ip, "si")), 448); /* 6/6*448 */
	q = val(f, ip, "q");
	/* two codes a byte: element 2i in the low nibble of byte i */
	for (int i = 0; i < 16; i++)
		CHECK_F(precc_decode(PRECC_E2M1, q[i / 2] >> (4 * (i % 2)) & 0xf), x[i]);
	CHECK(ir_interp_value_bytes(ip, ir_find_value(f, "q"), NULL, NULL) == 8);
	CHECK(fabs(fval(f, ip, "y")[0] - ref) <= 1e-6 * fabs(ref));
	for (int i = 0; i < 16; i++) {      /* 448 * (1/448) within an ulp of 1 */
		float d = precc_decode(PRECC_BF16, ((const uint16_t *)val(f, ip, "dq"))[i]);
		CHECK(fabsf(d - x[i]) <= 0x1p-7f * fabsf(x[i]));
	}
	ir_interp_free(ip);
	ir_module_free(m);
}

/* history_push shifts (slot 0 newest), reduce max / most_recent; delayed
 * scale.next from the reduced amax; update commits only on commit */
static void
test_history(void)
{
	Module *m = parse(
		"func @t {\n"
		"  %x = param in : f32[1,2]\n"
		"  %s = param state : f32[1,1]{*x*}\n"
		"  %h = param state : f32[4]\n"
		"  %q = quantize %x, %s sat : e4m3[1,2]\n"
		"  %a = amax %x : f32[1,1]{*x*}\n"
		"  %h2 = history_push %h, %a : f32[4]\n"
		"  %mx = history_reduce %h2 algo=max : f32[1,1]{*x*}\n"
		"  %mr = history_reduce %h2 algo=most_recent : f32[1,1]{*x*}\n"
		"  %s2 = scale %mx, %s fmt=e4m3 : f32[1,1]{*x*}\n"
		"  update %h, %h2\n"
		"  update %s, %s2\n"
		"  ret %q\n"
		"}\n");
	const Func *f = m->fn[0];
	float x[2] = {0.5f, -0.25f}, s[1] = {2}, h[4] = {3, 1, 7, 0};
	IrInterp *ip = start(f, 1, NULL);
	const float *h2;

	bind(ip, "x", x, sizeof x);
	bind(ip, "s", s, sizeof s);
	bind(ip, "h", h, sizeof h);
	run_ok(ip);
	h2 = fval(f, ip, "h2");
	CHECK_F(h2[0], 0.5f);
	CHECK_F(h2[1], 3);
	CHECK_F(h2[2], 1);
	CHECK_F(h2[3], 7);
	CHECK_F(fval(f, ip, "mx")[0], 7);
	CHECK_F(fval(f, ip, "mr")[0], 0.5f);
	CHECK_F(fval(f, ip, "s2")[0], 64);
	CHECK_F(precc_decode(PRECC_E4M3, *(const uint8_t *)val(f, ip, "q")), 1); /* 0.5 * 2 */
	CHECK_F(s[0], 2);             /* nothing written before commit */
	CHECK(ir_interp_commit(ip) == 0);
	CHECK_F(s[0], 64);
	CHECK_F(h[0], 0.5f);
	CHECK_F(h[3], 7);
	ir_interp_free(ip);
	ir_module_free(m);
}

/* inf/NaN amax: keep (previous scale, or 1), skip (same, and commit writes
 * nothing), error (the run fails naming the instruction) */
static void
test_nonfinite(void)
{
	static const char *const pol[3] = {"keep", "skip", "error"};

	for (int p = 0; p < 3; p++) {
		char text[1024];
		snprintf(text, sizeof text,
		         "func @t {\n"
		         "  %%x = param in : f32[1,2]\n"
		         "  %%s = param state : f32[1,1]{*x*}\n"
		         "  %%a = amax %%x : f32[1,1]{*x*}\n"
		         "  %%c = scale %%a fmt=e4m3%s%s : f32[1,1]{*x*}\n"
		         "  %%n = scale %%a, %%s fmt=e4m3%s%s : f32[1,1]{*x*}\n"
		         "  update %%s, %%n\n"
		         "  ret %%c\n"
		         "}\n", p ? " nonfinite=" : "", p ? pol[p] : "", p ? " nonfinite=" : "",
		         p ? pol[p] : "");
		Module *m = parse(text);
		const Func *f = m->fn[0];
		float x[2] = {NAN, 1}, s[1] = {5};
		IrInterp *ip = start(f, 1, NULL);
		bind(ip, "x", x, sizeof x);
		bind(ip, "s", s, sizeof s);
		int rc = ir_interp_run(ip);
		if (p == 2) {
			CHECK(rc != 0);
			CHECK(strstr(ir_interp_error(ip), "@t: %c = scale:") != NULL);
			CHECK(strstr(ir_interp_error(ip), "inf or NaN") != NULL);
		} else {
			CHECK(rc == 0);
			CHECK_F(fval(f, ip, "c")[0], 1);    /* no previous scale: 1 */
			CHECK_F(fval(f, ip, "n")[0], 5);    /* the previous scale */
			CHECK(ir_interp_nonfinite(ip) == 2);
			CHECK(ir_interp_skipped(ip) == (p == 1));
			s[0] = 9;
			CHECK(ir_interp_commit(ip) == 0);
			CHECK_F(s[0], p == 1 ? 9 : 5);      /* skip: the step's updates dropped */
		}
		ir_interp_free(ip);
		ir_module_free(m);
	}
}

/* transpose, pad, slice, cast (bf16 RNE tie to even), bias */
static void
test_layout_cast_bias(void)
{
	Module *m = parse(
		"func @t {\n"
		"  %x = param in : f32[2,3]\n"
		"  %b = param bias : bf16[3]\n"
		"  %t = transpose %x : f32[3,2]\n"
		"  %p = pad %x : f32[3,4]\n"
		"  %s = slice %p : f32[1,2]\n"
		"  %c = cast %x : bf16[2,3]\n"
		"  %y = bias %x, %b : f32[2,3]\n"
		"  ret %t, %s, %c, %y\n"
		"}\n");
	const Func *f = m->fn[0];
	float x[6] = {1, 2, 3, 4, 5, 1.00390625f};   /* 1 + 2^-8: a bf16 tie */
	uint16_t b[3] = {0x3f80, 0x4000, 0xbf80};   /* 1, 2, -1 */
	IrInterp *ip = start(f, 1, NULL);
	const float *t, *p;
	const uint16_t *c;

	bind(ip, "x", x, sizeof x);
	bind(ip, "b", b, sizeof b);
	run_ok(ip);
	t = fval(f, ip, "t");
	CHECK_F(t[0], 1); CHECK_F(t[1], 4); CHECK_F(t[2], 2); CHECK_F(t[5], x[5]);
	p = fval(f, ip, "p");
	CHECK_F(p[0], 1); CHECK_F(p[3], 0); CHECK_F(p[4], 4); CHECK_F(p[6], x[5]);
	CHECK_F(p[8], 0); CHECK_F(p[11], 0);
	CHECK_F(fval(f, ip, "s")[0], 1); CHECK_F(fval(f, ip, "s")[1], 2);
	c = val(f, ip, "c");
	CHECK(c[0] == 0x3f80 && c[5] == 0x3f80);
	CHECK_F(fval(f, ip, "y")[0], 2); CHECK_F(fval(f, ip, "y")[2], 2);
	CHECK_F(fval(f, ip, "y")[5], x[5] - 1);
	ir_interp_free(ip);
	ir_module_free(m);
}

/* gemm: exact small integers; fast:4 truncates 1 + 2^-10 to 1 (but with
 * fp32_accum); promote with promote_bits; M bound at run time */
static void
test_gemm(void)
{
	Module *m = parse(
		"func @t {\n"
		"  %a = param in : f32[M,2]\n"
		"  %b = param weight : f32[3,2]\n"
		"  %y = gemm %a, %b accum=fp32 : f32[M,3]\n"
		"  %z = gemm %a, %b accum=fast:4 : f32[M,3]\n"
		"  %p = gemm %a, %b accum=promote:1 : f32[M,3]\n"
		"  ret %y, %z, %p\n"
		"}\n");
	const Func *f = m->fn[0];
	float a[4] = {1, 0.0009765625f, 2, -1}, b[6] = {1, 1, 0, 1, 3, 2};
	IrInterpOpts o;
	IrInterp *ip;
	const float *y, *z, *p;

	ir_interp_opts_init(&o);
	o.promote_bits = 4;
	ip = start(f, 2, &o);
	bind(ip, "a", a, sizeof a);
	bind(ip, "b", b, sizeof b);
	run_ok(ip);
	y = fval(f, ip, "y"), z = fval(f, ip, "z"), p = fval(f, ip, "p");
	CHECK_F(y[0], 1.0009765625); CHECK_F(y[1], 0.0009765625); CHECK_F(y[2], 3.001953125);
	CHECK_F(y[3], 1); CHECK_F(y[4], -1); CHECK_F(y[5], 4);
	CHECK_F(z[0], 1);                         /* the small addend falls off 4 bits */
	CHECK_F(p[0], 1.0009765625);              /* each chunk of 1 promoted to fp32 */
	ir_interp_free(ip);
	/* fp32_accum (test_emu's reference, the bound's |A||B|): fast:4 sums
	 * in fp32 too */
	o.fp32_accum = true;
	ip = start(f, 2, &o);
	bind(ip, "a", a, sizeof a);
	bind(ip, "b", b, sizeof b);
	run_ok(ip);
	z = fval(f, ip, "z");
	CHECK_F(z[0], 1.0009765625); CHECK_F(z[2], 3.001953125);
	ir_interp_free(ip);
	ir_module_free(m);
}

/* errors: unbound param, bad M, memory limit, bind size, partial K blocks
 * at run time (K = M) */
static void
test_errors(void)
{
	Module *m = parse(
		"func @w {\n"
		"  %a = param grad : bf16[4,M]\n"
		"  %b = param in : bf16[8,M]\n"
		"  %aa = amax %a : f32[4,M/128]{1x128}\n"
		"  %as = scale %aa fmt=e4m3 : f32[4,M/128]{1x128}\n"
		"  %aq = quantize %a, %as sat : e4m3[4,M]\n"
		"  %ai = recip %as : f32[4,M/128]{1x128}\n"
		"  %ba = amax %b : f32[8,M/128]{1x128}\n"
		"  %bs = scale %ba fmt=e4m3 : f32[8,M/128]{1x128}\n"
		"  %bq = quantize %b, %bs sat : e4m3[8,M]\n"
		"  %bi = recip %bs : f32[8,M/128]{1x128}\n"
		"  %y = gemm %aq, %bq, %ai, %bi accum=promote:128 : f32[4,8]\n"
		"  ret %y\n"
		"}\n");
	const Func *f = m->fn[0];
	IrInterpOpts o;
	char err[1024];
	IrInterp *ip;
	uint16_t *a = calloc(4 * 200, 2), *b = calloc(8 * 200, 2);

	ir_interp_opts_init(&o);
	o.m = 0;
	CHECK(!ir_interp_new(f, &o, err, sizeof err) && strstr(err, "M = 0"));
	o.m = -3;
	CHECK(!ir_interp_new(f, &o, err, sizeof err) && strstr(err, "must be positive"));
	o.m = 1L << 62;
	CHECK(!ir_interp_new(f, &o, err, sizeof err));
	o.m = 128, o.mem_limit = 1000;
	CHECK(!ir_interp_new(f, &o, err, sizeof err) && strstr(err, "more than the 1000 bytes"));
	o.mem_limit = 0;

	ip = start(f, 128, &o);
	CHECK(ir_interp_run(ip) != 0 && strstr(ir_interp_error(ip), "%a = param: param grad %a")
	      && strstr(ir_interp_error(ip), "not bound"));
	CHECK(ir_interp_bind(ip, "a", a, 4 * 100 * 2) != 0
	      && strstr(ir_interp_error(ip), "1024 bytes, got a buffer of 800"));
	CHECK(ir_interp_bind(ip, "nope", a, 8) != 0);
	CHECK(ir_interp_bind(ip, "aa", a, 8) != 0 && strstr(ir_interp_error(ip), "not a param"));
	bind(ip, "a", a, 4 * 128 * 2);
	bind(ip, "b", b, 8 * 128 * 2);
	run_ok(ip);
	ir_interp_free(ip);

	ip = start(f, 200, &o);
	bind(ip, "a", a, 4 * 200 * 2);
	bind(ip, "b", b, 8 * 200 * 2);
	CHECK(ir_interp_run(ip) != 0);
	CHECK(strstr(ir_interp_error(ip), "@w: %y = gemm: K=200 is not a multiple of the K block "
	                                  "128") != NULL);
	CHECK(ir_interp_commit(ip) != 0);
	ir_interp_free(ip);
	free(a);
	free(b);
	ir_module_free(m);
}

/* stochastic rounding: seeded, reproducible, different under another seed,
 * and the same for any thread count */
static void
test_sr_threads(void)
{
	Module *m = parse(
		"func @t {\n"
		"  %x = param in : f32[M,64]\n"
		"  %a = amax %x : f32[1,1]{*x*}\n"
		"  %s = scale %a fmt=e4m3 : f32[1,1]{*x*}\n"
		"  %q = quantize %x, %s round=sr sat stream=2 : e4m3[M,64]\n"
		"  ret %q\n"
		"}\n");
	const Func *f = m->fn[0];
	enum { M = 96 };
	float *x = malloc(M * 64 * sizeof *x);
	uint8_t *q[3];
	IrInterpOpts o;

	for (int i = 0; i < M * 64; i++)
		x[i] = sinf((float)i * 0.37f) * 3.0f;
	for (int r = 0; r < 3; r++) {
		ir_interp_opts_init(&o);
		o.threads = r == 1 ? 3 : 1;
		o.seed = r == 2 ? 8 : 7;
		IrInterp *ip = start(f, M, &o);
		bind(ip, "x", x, M * 64 * sizeof *x);
		run_ok(ip);
		q[r] = malloc(M * 64);
		memcpy(q[r], val(f, ip, "q"), M * 64);
		ir_interp_free(ip);
	}
	CHECK(memcmp(q[0], q[1], M * 64) == 0);
	CHECK(memcmp(q[0], q[2], M * 64) != 0);
	for (int r = 0; r < 3; r++)
		free(q[r]);
	free(x);
	ir_module_free(m);
}

/* f's interpreter with the quantize counts on (o.stats), at M = 1 */
static IrInterp *
start_stats(const Func *f)
{
	IrInterpOpts o;

	ir_interp_opts_init(&o);
	o.stats = true;
	return start(f, 1, &o);
}

/* instruction ins's counts: n values, so many saturated, flushed, nonfinite */
static void
check_stats(const IrInterp *ip, int ins, long n, long sat, long flushed, long nonfinite)
{
	const IrQuantStats *st = ir_interp_quant_stats(ip, ins);

	CHECK(st && st->n == n);
	CHECK(st && st->saturated == sat);
	CHECK(st && st->flushed == flushed);
	CHECK(st && st->nonfinite == nonfinite);
}

/* the counts of a quantize with a scale per group of rows: each routed
 * row under its group's scale, the padding row past the last offset not
 * counted */
static void
test_stats_grouped(void)
{
	Module *m = parse(
		"func @t {\n"
		"  %x = param in : f32[4,2]\n"
		"  %offs = param in : i32[2]\n"
		"  %s = param state : f32[2,1]{gx*}\n"
		"  %q = quantize %x, %s, %offs sat : e4m3[4,2]\n"
		"  ret %q\n"
		"}\n");
	const Func *f = m->fn[0];
	/* row 0: group 0 (scale 1); rows 1, 2: group 1 (scale 100); row 3:
	 * padding, whose 1e9 and 1e-9 would count as saturated and flushed */
	float x[8] = {470, 0, 4.7f, 1e-6f, 1, 2, 1e9f, 1e-9f}, s[2] = {1, 100};
	int32_t offs[2] = {1, 3};
	IrInterp *ip = start_stats(f);

	bind(ip, "x", x, sizeof x);
	bind(ip, "offs", offs, sizeof offs);
	bind(ip, "s", s, sizeof s);
	run_ok(ip);
	/* saturated: 470 · 1 and 4.7 · 100; flushed: 1e-6 · 100 */
	check_stats(ip, 3, 6, 2, 1, 0);
	ir_interp_free(ip);
	ir_module_free(m);
}

/* saturation and flush counts */
static void
test_stats(void)
{
	Module *m = parse(
		"func @t {\n"
		"  %x = param in : f32[1,4]\n"
		"  %s = param state : f32[1,1]{*x*}\n"
		"  %q = quantize %x, %s sat : e4m3[1,4]\n"
		"  ret %q\n"
		"}\n");
	const Func *f = m->fn[0];
	float x[4] = {460, 470, 1e-4f, INFINITY}, s[1] = {1};
	IrInterp *ip = start_stats(f);

	bind(ip, "x", x, sizeof x);
	bind(ip, "s", s, sizeof s);
	run_ok(ip);
	/* saturated: 470 (460 rounds to 448); flushed: 1e-4, under half the
	 * smallest e4m3 step */
	check_stats(ip, 2, 4, 1, 1, 1);
	CHECK(ir_interp_quant_stats(ip, 0) == NULL);
	ir_interp_free(ip);
	ir_module_free(m);
}

int
main(void)
{
	test_rowwise();
	test_scale_attrs();
	test_mx();
	test_nvfp4();
	test_history();
	test_nonfinite();
	test_layout_cast_bias();
	test_gemm();
	test_errors();
	test_sr_threads();
	test_stats();
	test_stats_grouped();
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	else
		printf("ir_interp ops: ok\n");
	return failures != 0;
}
