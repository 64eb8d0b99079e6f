/*
 * test_grouped.c — gemm_grouped (docs/ir.md): the text form round-trips,
 * the verifier refuses what it must, and the interpreter's reference
 * (ir/interp/grouped.c) gives, group by group, the bits of the per-expert
 * path: one plain gemm per expert on its own tokens and weights, with its
 * own scales. Cases: zero-token experts, a single token, unaligned group
 * sizes, 256 groups, group=m with B stacked along K (the grouped dgrad's
 * transposed weights, B[N, G*K]), group=k (wgrad) with token blocks, a Mixtral-style
 * block (8 experts, top-2, w1/w3/w2 quantized to e4m3 with per-expert
 * weight scales and 1x32 activation blocks), and bad offsets. And the
 * per-expert activation amax and quantize ({gx*}: amax %x, %offs and
 * quantize %x, %s, %offs) against each expert's own tensorwise amax,
 * scale and quantize on its rows.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static int failures;

#define CHECK(c) do { \
	if (!(c)) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
		failures++; \
	} \
} while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static float
urand(void)   /* xorshift64*, [-1, 1) */
{
	rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
	return (float)((rng * 2685821657736338717ULL) >> 40) / (float)(1 << 23) - 1.0f;
}

/* bf16 bits of x (round to nearest even), and back */
static uint16_t
bf16(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static Module *
parse(const char *text, bool must)
{
	char err[4096];
	Module *m = ir_parse(text, "test", err, sizeof err);

	if (!m || ir_verify(m, err, sizeof err)) {
		if (must) {
			fprintf(stderr, "%s\n%s\n", err, text);
			exit(1);
		}
		if (m)
			ir_module_free(m);
		return NULL;
	}
	return m;
}

/* The verifier's first message for text, or "" */
static const char *
verify_error(const char *text)
{
	static char err[4096];
	Module *m = ir_parse(text, "test", err, sizeof err);

	if (!m)
		return err;
	err[0] = 0;
	ir_verify(m, err, sizeof err);
	ir_module_free(m);
	return err;
}

/* Run f at M with the params bound (name, buffer, bytes; NULL-terminated);
 * the first result, copied (n floats), or NULL with the error in err. */
static float *
run(const Func *f, long M, const char *err_want, size_t n, ...)
{
	IrInterpOpts o;
	char err[1024];
	IrInterp *ip;
	va_list ap;
	float *out = NULL;

	ir_interp_opts_init(&o);
	o.m = M;
	o.threads = 2;
	if (!(ip = ir_interp_new(f, &o, err, sizeof err))) {
		fprintf(stderr, "ir_interp_new @%s: %s\n", f->name, err);
		failures++;
		return NULL;
	}
	va_start(ap, n);
	for (const char *name; (name = va_arg(ap, const char *));) {
		void *p = va_arg(ap, void *);
		size_t b = va_arg(ap, size_t);
		if (ir_interp_bind(ip, name, p, b)) {
			fprintf(stderr, "bind %s: %s\n", name, ir_interp_error(ip));
			failures++;
		}
	}
	va_end(ap);
	if (ir_interp_run(ip)) {
		if (!err_want || !strstr(ir_interp_error(ip), err_want)) {
			fprintf(stderr, "run @%s: %s (wanted %s)\n", f->name, ir_interp_error(ip),
			        err_want ? err_want : "success");
			failures++;
		}
	} else if (err_want) {
		fprintf(stderr, "run @%s succeeded, wanted: %s\n", f->name, err_want);
		failures++;
	} else {
		out = malloc(n * sizeof *out);
		memcpy(out, ir_interp_value(ip, ir_interp_result(ip, 0)), n * sizeof *out);
	}
	ir_interp_free(ip);
	return out;
}

static void
test_text(void)
{
	const char *t =
		"func @experts.fprop {\n"
		"  %x = param in : e4m3[M,256]\n"
		"  %w = param weight : e4m3[1024,256]\n"
		"  %offs = param in : i32[8]\n"
		"  %sa = param state : f32[M,2]{1x128}\n"
		"  %sb = param state : f32[8,1]{128x*}\n"
		"  %y = gemm_grouped %x, %w, %offs, %sa, %sb accum=promote:128 group=m : f32[M,128]\n"
		"  ret %y\n"
		"}\n"
		"\n"
		"func @experts.wgrad {\n"
		"  %dy = param in : bf16[128,M]\n"
		"  %x = param in : bf16[256,M]\n"
		"  %offs = param in : i32[8]\n"
		"  %dw = gemm_grouped %dy, %x, %offs accum=fp32 group=k : f32[1024,256]\n"
		"  ret %dw\n"
		"}\n";
	Module *m = parse(t, true);
	char *s = ir_module_to_string(m);
	CHECK(!strcmp(s, t));
	free(s);
	ir_module_free(m);

#define HEAD "func @f {\n  %x = param in : bf16[M,64]\n  %w = param weight : bf16[256,64]\n" \
	"  %offs = param in : i32[4]\n"
	CHECK(strstr(verify_error(HEAD "  %o2 = param in : f32[4]\n"
	                          "  %y = gemm_grouped %x, %w, %o2 accum=fp32 group=m : f32[M,64]\n"
	                          "  ret %y\n}\n"), "offsets %o2 must be i32[G]"));
	CHECK(strstr(verify_error(HEAD "  %y = gemm_grouped %x, %w, %offs accum=fp32 group=m : "
	                          "f32[M,256]\n  ret %y\n}\n"), "result must be f32[M,64]"));
	CHECK(strstr(verify_error(HEAD "  %y = gemm_grouped %x, %w, %offs accum=fp32 group=k : "
	                          "f32[M,64]\n  ret %y\n}\n"), "their rows are static"));
	CHECK(strstr(verify_error(HEAD "  %c = cast %offs : bf16[4]\n  ret %c\n}\n"),
	              "only gemm_grouped's third operand, amax's second and quantize's third read "
	              "it"));
	CHECK(strstr(verify_error(HEAD "  %y = gemm_grouped %x, %w, %offs accum=fp32 : f32[M,64]\n"
	                          "  ret %y\n}\n"), "needs group=m or group=k"));
	CHECK(strstr(verify_error("func @f {\n  %w = param weight : bf16[250,64]\n"
	                          "  %x = param in : bf16[M,64]\n  %offs = param in : i32[4]\n"
	                          "  %y = gemm_grouped %x, %w, %offs accum=fp32 group=m : f32[M,62]\n"
	                          "  ret %y\n}\n"), "must stack the 4 groups"));
	CHECK(strstr(verify_error("func @f {\n  %x = param in : e4m3[M,64]\n"
	                          "  %w = param weight : e4m3[256,64]\n  %offs = param in : i32[4]\n"
	                          "  %sa = param state : f32[M,1]{1x*}\n"
	                          "  %sb = param state : f32[2,1]{128x*}\n"
	                          "  %y = gemm_grouped %x, %w, %offs, %sa, %sb accum=fp32 group=m : "
	                          "f32[M,64]\n  ret %y\n}\n"), "straddles two groups"));
	/* group=m with B[N,G*K] (dgrad): a K block of B that straddles two
	 * groups' weights is refused */
	CHECK(strstr(verify_error("func @f {\n  %x = param in : e4m3[M,64]\n"
	                          "  %w = param weight : e4m3[48,256]\n  %offs = param in : i32[4]\n"
	                          "  %sa = param state : f32[M,1]{1x*}\n"
	                          "  %sb = param state : f32[1,2]{*x128}\n"
	                          "  %y = gemm_grouped %x, %w, %offs, %sa, %sb accum=fp32 group=m : "
	                          "f32[M,48]\n  ret %y\n}\n"), "K block 128 of %sb straddles two groups"));
	CHECK(strstr(verify_error("func @f {\n  %x = param in : bf16[M,64]\n"
	                          "  %w = param weight : bf16[48,200]\n  %offs = param in : i32[4]\n"
	                          "  %y = gemm_grouped %x, %w, %offs accum=fp32 group=m : f32[M,48]\n"
	                          "  ret %y\n}\n"), "K mismatch"));
#undef HEAD
}

/* group=m with B stacked along K, B[N, G*K] (a grouped dgrad's B: the
 * stacked [G*K, N] weights transposed), against the per-expert gemm on
 * each expert's columns: bf16, or e4m3 with 1xKB blocks of A and one
 * tensorwise weight scale per expert ({* x K} over B, f32[1,G]). */
static void
group_m_kstack(int G, const int *sizes, int N, int K, bool fp8)
{
	long M = 0;
	int32_t *offs = malloc(sizeof *offs * (size_t)G);
	char *text = malloc(1 << 16), *t2 = malloc(1 << 16);
	const int KB = 32;

	for (int g = 0; g < G; g++)
		offs[g] = (int32_t)(M += sizes[g]);
	size_t es = fp8 ? 1 : 2, na = (size_t)M * (size_t)K, nb = (size_t)G * (size_t)N * (size_t)K;
	uint8_t *a = malloc(na * es + 1), *b = malloc(nb * es), *bg = malloc((size_t)N * K * es);
	float *sa = malloc(sizeof *sa * ((size_t)M * (size_t)(K / KB) + 1)), *sb = malloc(sizeof *sb * (size_t)G);
	for (size_t k = 0; k < na; k++)
		if (fp8)
			a[k] = (uint8_t)precc_encode(PRECC_E4M3, 400 * urand(), PRECC_RNE, true, 0);
		else
			((uint16_t *)a)[k] = bf16(urand());
	for (size_t k = 0; k < nb; k++)
		if (fp8)
			b[k] = (uint8_t)precc_encode(PRECC_E4M3, 400 * urand(), PRECC_RNE, true, 0);
		else
			((uint16_t *)b)[k] = bf16(urand() * (float)(1 + k % ((size_t)G * K) / (size_t)K));
	for (long k = 0; k < M * (K / KB); k++)
		sa[k] = ldexpf(1.0f + urand() / 2, -8);
	for (int g = 0; g < G; g++)
		sb[g] = ldexpf(1.0f + urand() / 2, -9 + g % 3);
	const char *f = fp8 ? "e4m3" : "bf16";
	if (fp8) {
		snprintf(text, 1 << 16, "func @dgrad {\n  %%dy = param in : e4m3[M,%d]\n"
		         "  %%wt = param weight : e4m3[%d,%ld]\n  %%offs = param in : i32[%d]\n"
		         "  %%sa = param state : f32[M,%d]{1x%d}\n  %%sb = param state : f32[1,%d]{*x%d}\n"
		         "  %%dx = gemm_grouped %%dy, %%wt, %%offs, %%sa, %%sb accum=promote:%d group=m : "
		         "f32[M,%d]\n  ret %%dx\n}\n", K, N, (long)G * K, G, K / KB, KB, G, K, KB, N);
		snprintf(t2, 1 << 16, "func @expert {\n  %%dy = param in : e4m3[M,%d]\n"
		         "  %%wt = param weight : e4m3[%d,%d]\n  %%sa = param state : f32[M,%d]{1x%d}\n"
		         "  %%sb = param state : f32[1,1]{*x*}\n"
		         "  %%dx = gemm %%dy, %%wt, %%sa, %%sb accum=promote:%d : f32[M,%d]\n"
		         "  ret %%dx\n}\n", K, N, K, K / KB, KB, KB, N);
	} else {
		snprintf(text, 1 << 16, "func @dgrad {\n  %%dy = param in : bf16[M,%d]\n"
		         "  %%wt = param weight : bf16[%d,%ld]\n  %%offs = param in : i32[%d]\n"
		         "  %%dx = gemm_grouped %%dy, %%wt, %%offs accum=fp32 group=m : f32[M,%d]\n"
		         "  ret %%dx\n}\n", K, N, (long)G * K, G, N);
		snprintf(t2, 1 << 16, "func @expert {\n  %%dy = param in : bf16[M,%d]\n"
		         "  %%wt = param weight : bf16[%d,%d]\n  %%dx = gemm %%dy, %%wt accum=fp32 : "
		         "f32[M,%d]\n  ret %%dx\n}\n", K, N, K, N);
	}
	Module *mg = parse(text, true), *me = parse(t2, true);
	float *y = fp8 ? run(mg->fn[0], M, NULL, (size_t)M * N, "dy", a, na * es, "wt", b, nb * es,
	                     "offs", offs, sizeof *offs * (size_t)G, "sa", sa,
	                     sizeof *sa * (size_t)M * (K / KB), "sb", sb, sizeof *sb * (size_t)G, NULL)
	               : run(mg->fn[0], M, NULL, (size_t)M * N, "dy", a, na * es, "wt", b, nb * es,
	                     "offs", offs, sizeof *offs * (size_t)G, NULL);
	int bad = 0;
	for (int g = 0, r0 = 0; y && g < G; r0 = offs[g++]) {
		long m = offs[g] - r0;
		if (!m)
			continue;   /* the per-expert path launches nothing */
		for (int r = 0; r < N; r++)   /* the expert's columns g*K .. of B */
			memcpy(bg + (size_t)r * K * es, b + ((size_t)r * G * K + (size_t)g * K) * es,
			       (size_t)K * es);
		uint8_t *ag = a + (size_t)r0 * (size_t)K * es;
		float *ye = fp8 ? run(me->fn[0], m, NULL, (size_t)m * N, "dy", ag, (size_t)m * K * es,
		                      "wt", bg, (size_t)N * K * es, "sa", sa + (size_t)r0 * (K / KB),
		                      sizeof *sa * (size_t)m * (K / KB), "sb", sb + g, sizeof *sb, NULL)
		                : run(me->fn[0], m, NULL, (size_t)m * N, "dy", ag, (size_t)m * K * es,
		                      "wt", bg, (size_t)N * K * es, NULL);
		if (ye && memcmp(ye, y + (size_t)r0 * N, sizeof *ye * (size_t)m * N))
			bad++;
		free(ye);
	}
	if (bad)
		fprintf(stderr, "group=m B[N,G*K] G=%d %s: %d groups differ from the per-expert path\n",
		        G, f, bad);
	failures += bad != 0;
	free(y), free(a), free(b), free(bg), free(sa), free(sb), free(offs), free(text), free(t2);
	ir_module_free(mg), ir_module_free(me);
}

static void
test_group_m_kstack(void)
{
	int four[] = {0, 1, 37, 5}, *many = malloc(sizeof *many * 256);

	group_m_kstack(4, four, 40, 64, false);   /* zero-token, single token, unaligned */
	group_m_kstack(4, four, 40, 64, true);
	for (int g = 0; g < 256; g++)
		many[g] = (int)(rng % 4), urand();    /* 256 groups of 0..3 tokens */
	group_m_kstack(256, many, 16, 32, true);
	free(many);
}

/* group=m against the per-expert path, in bf16 (no scales) or e4m3 with
 * 1xKB activation blocks and per-expert tensorwise weight scales given as
 * data (the reference of what the quantize chain makes). */
static void
group_m(int G, const int *sizes, int pad, int N, int K, bool fp8)
{
	long M = pad;
	int32_t *offs = malloc(sizeof *offs * (size_t)G);
	char *text = malloc(1 << 16), *t2 = malloc(1 << 16);
	const int KB = 32;

	for (int g = 0; g < G; g++)
		offs[g] = (int32_t)(M += sizes[g]) - pad;
	M = offs[G - 1] + pad;
	size_t es = fp8 ? 1 : 2, na = (size_t)M * (size_t)K, nb = (size_t)G * (size_t)N * (size_t)K;
	uint8_t *a = malloc(na * es), *b = malloc(nb * es);
	float *sa = malloc(sizeof *sa * (size_t)M * (size_t)(K / KB)), *sb = malloc(sizeof *sb * (size_t)G);
	for (size_t k = 0; k < na; k++)
		if (fp8)
			a[k] = (uint8_t)precc_encode(PRECC_E4M3, 400 * urand(), PRECC_RNE, true, 0);
		else
			((uint16_t *)a)[k] = bf16(urand());
	for (size_t k = 0; k < nb; k++)
		if (fp8)
			b[k] = (uint8_t)precc_encode(PRECC_E4M3, 400 * urand(), PRECC_RNE, true, 0);
		else
			((uint16_t *)b)[k] = bf16(urand());
	for (long k = 0; k < M * (K / KB); k++)
		sa[k] = ldexpf(1.0f + urand() / 2, -8);
	for (int g = 0; g < G; g++)
		sb[g] = ldexpf(1.0f + urand() / 2, -9);
	const char *f = fp8 ? "e4m3" : "bf16";
	if (fp8)
		snprintf(text, 1 << 16, "func @grouped {\n  %%x = param in : e4m3[M,%d]\n"
		         "  %%w = param weight : e4m3[%ld,%d]\n  %%offs = param in : i32[%d]\n"
		         "  %%sa = param state : f32[M,%d]{1x%d}\n  %%sb = param state : f32[%d,1]{%dx*}\n"
		         "  %%y = gemm_grouped %%x, %%w, %%offs, %%sa, %%sb accum=promote:%d group=m : "
		         "f32[M,%d]\n  ret %%y\n}\n", K, (long)G * N, K, G, K / KB, KB, G, N, KB, N);
	else
		snprintf(text, 1 << 16, "func @grouped {\n  %%x = param in : %s[M,%d]\n"
		         "  %%w = param weight : %s[%ld,%d]\n  %%offs = param in : i32[%d]\n"
		         "  %%y = gemm_grouped %%x, %%w, %%offs accum=fp32 group=m : f32[M,%d]\n"
		         "  ret %%y\n}\n", f, K, f, (long)G * N, K, G, N);
	if (fp8)
		snprintf(t2, 1 << 16, "func @expert {\n  %%x = param in : e4m3[M,%d]\n"
		         "  %%w = param weight : e4m3[%d,%d]\n  %%sa = param state : f32[M,%d]{1x%d}\n"
		         "  %%sb = param state : f32[1,1]{*x*}\n"
		         "  %%y = gemm %%x, %%w, %%sa, %%sb accum=promote:%d : f32[M,%d]\n  ret %%y\n}\n",
		         K, N, K, K / KB, KB, KB, N);
	else
		snprintf(t2, 1 << 16, "func @expert {\n  %%x = param in : %s[M,%d]\n"
		         "  %%w = param weight : %s[%d,%d]\n  %%y = gemm %%x, %%w accum=fp32 : f32[M,%d]\n"
		         "  ret %%y\n}\n", f, K, f, N, K, N);
	Module *mg = parse(text, true), *me = parse(t2, true);
	float *y = fp8 ? run(mg->fn[0], M, NULL, (size_t)M * N, "x", a, na * es, "w", b, nb * es,
	                     "offs", offs, sizeof *offs * (size_t)G, "sa", sa,
	                     sizeof *sa * (size_t)M * (K / KB), "sb", sb, sizeof *sb * (size_t)G, NULL)
	               : run(mg->fn[0], M, NULL, (size_t)M * N, "x", a, na * es, "w", b, nb * es,
	                     "offs", offs, sizeof *offs * (size_t)G, NULL);
	int bad = 0;
	for (int g = 0, r0 = 0; y && g < G; r0 = offs[g++]) {
		long m = offs[g] - r0;
		if (!m)
			continue;   /* the per-expert path launches nothing */
		uint8_t *ag = a + (size_t)r0 * (size_t)K * es, *bg = b + (size_t)g * N * K * es;
		float *ye = fp8 ? run(me->fn[0], m, NULL, (size_t)m * N, "x", ag, (size_t)m * K * es,
		                      "w", bg, (size_t)N * K * es, "sa", sa + (size_t)r0 * (K / KB),
		                      sizeof *sa * (size_t)m * (K / KB), "sb", sb + g, sizeof *sb, NULL)
		                : run(me->fn[0], m, NULL, (size_t)m * N, "x", ag, (size_t)m * K * es,
		                      "w", bg, (size_t)N * K * es, NULL);
		if (ye && memcmp(ye, y + (size_t)r0 * N, sizeof *ye * (size_t)m * N))
			bad++;
		free(ye);
	}
	for (long k = (long)offs[G - 1] * N; y && k < M * N; k++)
		bad += y[k] != 0;   /* rows of no group */
	if (bad)
		fprintf(stderr, "group=m G=%d %s: %d groups differ from the per-expert path\n", G, f,
		        bad);
	failures += bad != 0;
	free(y), free(a), free(b), free(sa), free(sb), free(offs), free(text), free(t2);
	ir_module_free(mg), ir_module_free(me);
}

static void
test_group_m(void)
{
	int four[] = {0, 1, 37, 5}, *many = malloc(sizeof *many * 256);

	group_m(4, four, 0, 48, 64, false);     /* zero-token, single token, unaligned */
	group_m(4, four, 3, 48, 64, true);      /* padding rows after the last group */
	for (int g = 0; g < 256; g++)
		many[g] = (int)(rng % 4), urand();  /* 256 groups of 0..3 tokens */
	group_m(256, many, 0, 16, 32, true);
	int one[] = {1};
	group_m(1, one, 0, 16, 32, false);      /* one group, one token */
	free(many);
}

/* group=k: dW_g = dY_gᵀ X_g over each group's tokens; bf16, then e4m3
 * with 1x16 token blocks (group sizes multiples of 16, one group empty). */
static void
group_k(bool fp8, const int *sizes, int G, const char *err_want)
{
	const int N = 24, K = 40, TB = 16;
	long T = 0;
	int32_t offs[8];
	char text[2048], t2[2048];

	for (int g = 0; g < G; g++)
		offs[g] = (int32_t)(T += sizes[g]);
	size_t es = fp8 ? 1 : 2;
	uint8_t *a = malloc((size_t)N * T * es), *b = malloc((size_t)K * T * es);
	float *sa = malloc(sizeof *sa * (size_t)N * (size_t)(T / TB + 1)),
	      *sb = malloc(sizeof *sb * (size_t)K * (size_t)(T / TB + 1));
	for (long k = 0; k < N * T; k++)
		if (fp8) a[k] = (uint8_t)precc_encode(PRECC_E4M3, 300 * urand(), PRECC_RNE, true, 0);
		else ((uint16_t *)a)[k] = bf16(urand());
	for (long k = 0; k < K * T; k++)
		if (fp8) b[k] = (uint8_t)precc_encode(PRECC_E4M3, 300 * urand(), PRECC_RNE, true, 0);
		else ((uint16_t *)b)[k] = bf16(urand());
	long nbt = (T + TB - 1) / TB;
	for (long k = 0; k < N * nbt; k++)
		sa[k] = ldexpf(1 + urand() / 2, -7);
	for (long k = 0; k < K * nbt; k++)
		sb[k] = ldexpf(1 + urand() / 2, -7);
	if (fp8) {
		snprintf(text, sizeof text, "func @wgrad {\n  %%dy = param in : e4m3[%d,M]\n"
		         "  %%x = param in : e4m3[%d,M]\n  %%offs = param in : i32[%d]\n"
		         "  %%sa = param state : f32[%d,M/%d]{1x%d}\n  %%sb = param state : f32[%d,M/%d]{1x%d}\n"
		         "  %%dw = gemm_grouped %%dy, %%x, %%offs, %%sa, %%sb accum=promote:%d group=k : "
		         "f32[%ld,%d]\n  ret %%dw\n}\n", N, K, G, N, TB, TB, K, TB, TB, TB, (long)G * N, K);
		snprintf(t2, sizeof t2, "func @expert {\n  %%dy = param in : e4m3[%d,M]\n"
		         "  %%x = param in : e4m3[%d,M]\n"
		         "  %%sa = param state : f32[%d,M/%d]{1x%d}\n  %%sb = param state : f32[%d,M/%d]{1x%d}\n"
		         "  %%dw = gemm %%dy, %%x, %%sa, %%sb accum=promote:%d : f32[%d,%d]\n"
		         "  ret %%dw\n}\n", N, K, N, TB, TB, K, TB, TB, TB, N, K);
	} else {
		snprintf(text, sizeof text, "func @wgrad {\n  %%dy = param in : bf16[%d,M]\n"
		         "  %%x = param in : bf16[%d,M]\n  %%offs = param in : i32[%d]\n"
		         "  %%dw = gemm_grouped %%dy, %%x, %%offs accum=fp32 group=k : f32[%ld,%d]\n"
		         "  ret %%dw\n}\n", N, K, G, (long)G * N, K);
		snprintf(t2, sizeof t2, "func @expert {\n  %%dy = param in : bf16[%d,M]\n"
		         "  %%x = param in : bf16[%d,M]\n  %%dw = gemm %%dy, %%x accum=fp32 : f32[%d,%d]\n"
		         "  ret %%dw\n}\n", N, K, N, K);
	}
	Module *mg = parse(text, true), *me = parse(t2, true);
	size_t nout = (size_t)G * N * K;
	float *dw = fp8 ? run(mg->fn[0], T, err_want, nout, "dy", a, (size_t)N * T, "x", b,
	                      (size_t)K * T, "offs", offs, sizeof *offs * (size_t)G, "sa", sa,
	                      sizeof *sa * (size_t)(N * nbt), "sb", sb, sizeof *sb * (size_t)(K * nbt),
	                      NULL)
	                : run(mg->fn[0], T, err_want, nout, "dy", a, (size_t)N * T * 2, "x", b,
	                      (size_t)K * T * 2, "offs", offs, sizeof *offs * (size_t)G, NULL);
	int bad = 0;
	for (int g = 0, c0 = 0; dw && g < G; c0 = offs[g++]) {
		long m = offs[g] - c0, mb = m / TB;
		float *want = calloc((size_t)N * K, sizeof *want);
		if (m) {   /* the expert's own tokens, contiguous, and its scale columns */
			uint8_t *ag = malloc((size_t)N * m * es), *bg = malloc((size_t)K * m * es);
			float *sag = malloc(sizeof *sag * (size_t)(N * (mb + 1))),
			      *sbg = malloc(sizeof *sbg * (size_t)(K * (mb + 1)));
			for (int r = 0; r < N; r++) {
				memcpy(ag + (size_t)r * m * es, a + ((size_t)r * T + c0) * es, (size_t)m * es);
				for (long c = 0; fp8 && c < mb; c++)
					sag[r * mb + c] = sa[r * nbt + c0 / TB + c];
			}
			for (int r = 0; r < K; r++) {
				memcpy(bg + (size_t)r * m * es, b + ((size_t)r * T + c0) * es, (size_t)m * es);
				for (long c = 0; fp8 && c < mb; c++)
					sbg[r * mb + c] = sb[r * nbt + c0 / TB + c];
			}
			float *e = fp8 ? run(me->fn[0], m, NULL, (size_t)N * K, "dy", ag, (size_t)N * m,
			                     "x", bg, (size_t)K * m, "sa", sag, sizeof *sag * (size_t)(N * mb),
			                     "sb", sbg, sizeof *sbg * (size_t)(K * mb), NULL)
			               : run(me->fn[0], m, NULL, (size_t)N * K, "dy", ag, (size_t)N * m * 2,
			                     "x", bg, (size_t)K * m * 2, NULL);
			if (e)
				memcpy(want, e, sizeof *want * (size_t)N * K);
			free(e), free(ag), free(bg), free(sag), free(sbg);
		}
		bad += memcmp(want, dw + (size_t)g * N * K, sizeof *want * (size_t)N * K) != 0;
		free(want);
	}
	if (bad)
		fprintf(stderr, "group=k %s: %d groups differ from the per-expert path\n",
		        fp8 ? "e4m3" : "bf16", bad);
	failures += bad != 0;
	free(dw), free(a), free(b), free(sa), free(sb);
	ir_module_free(mg), ir_module_free(me);
}

static void
test_group_k(void)
{
	int s1[] = {7, 0, 1, 30, 12}, s2[] = {32, 0, 16, 48}, s3[] = {16, 8, 24};

	group_k(false, s1, 5, NULL);
	group_k(true, s2, 4, NULL);
	group_k(true, s3, 3, "inside a 16-wide scale block");
}

/* A Mixtral-style block (8 experts, top-2 of 24 tokens, H=64, I=96):
 * w1 (gate), w3 (up) and w2 (down) as three grouped GEMMs whose weights
 * are quantized in the IR with one e4m3 scale per expert ({I x *} over
 * the stacked [8I, H]), the routed tokens 1x32-blockwise, against the
 * same chain per expert (a tensorwise weight scale each). Bit for bit. */
static void
test_mixtral(void)
{
	enum { E = 8, T = 24, H = 64, I = 96, TOP = 2 };
	int count[E] = {0};
	int32_t offs[E];
	char tg[4096], te[4096];

	for (int t = 0; t < T; t++) {   /* top-2 routing: two distinct experts a token */
		int e0 = (int)(rng % 7), e1 = (e0 + 1 + (int)((rng >> 8) % 6)) % 7;   /* expert 7 idle */
		urand();
		count[e0]++, count[e1]++;
	}
	for (int e = 0, s = 0; e < E; e++)
		offs[e] = s += count[e];
	const int M = T * TOP;
	const struct { const char *name; int in, out; } w[3] = {{"w1", H, I}, {"w3", H, I},
	                                                        {"w2", I, H}};
	for (int k = 0; k < 3; k++) {
		int K = w[k].in, N = w[k].out;
		uint16_t *x = malloc(sizeof *x * (size_t)M * K), *wt = malloc(sizeof *wt * (size_t)E * N * K);
		for (long j = 0; j < (long)M * K; j++)
			x[j] = bf16(3 * urand());
		for (long j = 0; j < (long)E * N * K; j++)
			wt[j] = bf16(urand() * (1 + (j / (N * K))));   /* experts of different ranges */
		snprintf(tg, sizeof tg, "func @block.%s {\n  %%x = param in : bf16[M,%d]\n"
		         "  %%w = param weight : bf16[%d,%d]\n  %%offs = param in : i32[%d]\n"
		         "  %%x.amax = amax %%x : f32[M,%d]{1x32}\n"
		         "  %%x.scale = scale %%x.amax fmt=e4m3 : f32[M,%d]{1x32}\n"
		         "  %%x.q = quantize %%x, %%x.scale sat : e4m3[M,%d]\n"
		         "  %%x.si = recip %%x.scale : f32[M,%d]{1x32}\n"
		         "  %%w.amax = amax %%w : f32[%d,1]{%dx*}\n"
		         "  %%w.scale = scale %%w.amax fmt=e4m3 : f32[%d,1]{%dx*}\n"
		         "  %%w.q = quantize %%w, %%w.scale sat : e4m3[%d,%d]\n"
		         "  %%w.si = recip %%w.scale : f32[%d,1]{%dx*}\n"
		         "  %%y = gemm_grouped %%x.q, %%w.q, %%offs, %%x.si, %%w.si accum=promote:32 "
		         "group=m : f32[M,%d]\n  ret %%y\n}\n", w[k].name, K, E * N, K, E, K / 32, K / 32,
		         K, K / 32, E, N, E, N, E * N, K, E, N, N);
		snprintf(te, sizeof te, "func @expert.%s {\n  %%x = param in : bf16[M,%d]\n"
		         "  %%w = param weight : bf16[%d,%d]\n"
		         "  %%x.amax = amax %%x : f32[M,%d]{1x32}\n"
		         "  %%x.scale = scale %%x.amax fmt=e4m3 : f32[M,%d]{1x32}\n"
		         "  %%x.q = quantize %%x, %%x.scale sat : e4m3[M,%d]\n"
		         "  %%x.si = recip %%x.scale : f32[M,%d]{1x32}\n"
		         "  %%w.amax = amax %%w : f32[1,1]{*x*}\n"
		         "  %%w.scale = scale %%w.amax fmt=e4m3 : f32[1,1]{*x*}\n"
		         "  %%w.q = quantize %%w, %%w.scale sat : e4m3[%d,%d]\n"
		         "  %%w.si = recip %%w.scale : f32[1,1]{*x*}\n"
		         "  %%y = gemm %%x.q, %%w.q, %%x.si, %%w.si accum=promote:32 : f32[M,%d]\n"
		         "  ret %%y\n}\n", w[k].name, K, N, K, K / 32, K / 32, K, K / 32, N, K, N);
		Module *mg = parse(tg, true), *me = parse(te, true);
		float *y = run(mg->fn[0], M, NULL, (size_t)M * N, "x", x, sizeof *x * (size_t)M * K,
		               "w", wt, sizeof *wt * (size_t)E * N * K, "offs", offs, sizeof offs, NULL);
		int bad = 0;
		for (int e = 0, r0 = 0; y && e < E; r0 = offs[e++]) {
			long m = offs[e] - r0;
			if (!m)
				continue;
			float *ye = run(me->fn[0], m, NULL, (size_t)m * N, "x", x + (size_t)r0 * K,
			                sizeof *x * (size_t)m * K, "w", wt + (size_t)e * N * K,
			                sizeof *wt * (size_t)N * K, NULL);
			bad += ye && memcmp(ye, y + (size_t)r0 * N, sizeof *ye * (size_t)m * N) != 0;
			free(ye);
		}
		if (bad)
			fprintf(stderr, "mixtral %s: %d experts differ from the per-expert path\n",
			        w[k].name, bad);
		failures += bad != 0;
		CHECK(count[7] == 0 && offs[7] == offs[6]);   /* one expert without tokens */
		free(y), free(x), free(wt);
		ir_module_free(mg), ir_module_free(me);
	}
}

/* Offsets that are not monotone, exceed M, or are negative: refused. */
static void
test_bad_offsets(void)
{
	const char *t = "func @f {\n  %x = param in : bf16[M,16]\n  %w = param weight : bf16[64,16]\n"
	                "  %offs = param in : i32[4]\n"
	                "  %y = gemm_grouped %x, %w, %offs accum=fp32 group=m : f32[M,16]\n"
	                "  ret %y\n}\n";
	const char *tk = "func @f {\n  %x = param in : bf16[16,M]\n  %w = param weight : bf16[8,M]\n"
	                 "  %offs = param in : i32[4]\n"
	                 "  %y = gemm_grouped %x, %w, %offs accum=fp32 group=k : f32[64,8]\n"
	                 "  ret %y\n}\n";
	Module *m = parse(t, true), *mk = parse(tk, true);
	uint16_t x[10 * 16] = {0}, w[64 * 16] = {0};
	struct { int32_t o[4]; const char *err; } c[] = {
		{{2, 5, 4, 10}, "offsets are not monotone: offsets[2] = 4 < offsets[1] = 5"},
		{{2, 5, 7, 11}, "offsets[3] = 11 exceeds M = 10"},
		{{-1, 5, 7, 10}, "offsets[0] = -1 is negative"},
	};
	for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
		free(run(m->fn[0], 10, c[k].err, 0, "x", x, sizeof x, "w", w, sizeof w, "offs", c[k].o,
		         sizeof c[k].o, NULL));
		free(run(mk->fn[0], 10, strstr(c[k].err, "exceeds") ? "exceeds the tokens = 10"
		                                                    : c[k].err, 0,
		         "x", x, sizeof x, "w", w, 8 * 10 * 2, "offs", c[k].o, sizeof c[k].o, NULL));
	}
	ir_module_free(m), ir_module_free(mk);
}

/* Run f at M with x (bf16 [M,K]) and offs bound; copy ret operand k
 * (bytes) to out[k]; the error, or NULL. */
static const char *
run_all(const Func *f, long M, const uint16_t *x, size_t xb, const int32_t *offs, int G,
        void **out, int nout)
{
	static char err[1024];
	IrInterpOpts o;
	IrInterp *ip;

	ir_interp_opts_init(&o);
	o.m = M;
	o.threads = 2;
	if (!(ip = ir_interp_new(f, &o, err, sizeof err)))
		return err;
	if (ir_interp_bind(ip, "x", (void *)x, xb)
	    || ir_interp_bind(ip, "offs", (void *)offs, (size_t)G * 4) || ir_interp_run(ip)) {
		snprintf(err, sizeof err, "%s", ir_interp_error(ip));
		ir_interp_free(ip);
		return err;
	}
	for (int k = 0; k < nout; k++) {
		long r, c;
		size_t b = ir_interp_value_bytes(ip, ir_interp_result(ip, k), &r, &c);
		out[k] = malloc(b);
		memcpy(out[k], ir_interp_value(ip, ir_interp_result(ip, k)), b);
	}
	ir_interp_free(ip);
	return NULL;
}

/* amax %x, %offs and quantize %x, %s, %offs (a tensorwise activation
 * scale per expert, current scaling as TE's: nonfinite=one) against the
 * per-expert path: each expert's rows through amax {*x*}, scale and
 * quantize of their own. Zero-row experts (amax 0, scale 1), a one-row
 * expert, unaligned sizes, 256 experts, and padding rows past the last
 * offset: in no amax, code 0. */
static void
group_amax_quant(int G, const int *sizes, long pad, int K)
{
	long M = pad;
	for (int g = 0; g < G; g++)
		M += sizes[g];
	int32_t *offs = malloc(sizeof *offs * (size_t)G);
	uint16_t *x = malloc(sizeof *x * (size_t)(M * K));
	for (long g = 0, at = 0; g < G; g++)
		offs[g] = (int32_t)(at += sizes[g]);
	for (long i = 0; i < M * K; i++)    /* experts of different magnitudes */
		x[i] = bf16(urand() * (float)(1 + (i / K) % 7) * 64.0f);
	for (long i = (M - pad) * K; i < M * K; i++)
		x[i] = bf16(1e4f);    /* padding: larger than any expert's */
	char t[1024];
	snprintf(t, sizeof t, "func @f {\n  %%x = param in : bf16[M,%d]\n"
	         "  %%offs = param in : i32[%d]\n"
	         "  %%x.amax = amax %%x, %%offs : f32[%d,1]{gx*}\n"
	         "  %%x.scale = scale %%x.amax fmt=e4m3 nonfinite=one : f32[%d,1]{gx*}\n"
	         "  %%x.q = quantize %%x, %%x.scale, %%offs sat : e4m3[M,%d]\n"
	         "  %%x.scale_inv = recip %%x.scale : f32[%d,1]{gx*}\n"
	         "  ret %%x.q, %%x.scale_inv, %%x.amax\n}\n", K, G, G, G, K, G);
	Module *mg = parse(t, true);
	char *s = ir_module_to_string(mg);
	CHECK(!strcmp(s, t));     /* {gx*} round-trips */
	free(s);
	snprintf(t, sizeof t, "func @e {\n  %%x = param in : bf16[M,%d]\n"
	         "  %%offs = param in : i32[1]\n"
	         "  %%x.amax = amax %%x : f32[1,1]{*x*}\n"
	         "  %%x.scale = scale %%x.amax fmt=e4m3 nonfinite=one : f32[1,1]{*x*}\n"
	         "  %%x.q = quantize %%x, %%x.scale sat : e4m3[M,%d]\n"
	         "  %%x.scale_inv = recip %%x.scale : f32[1,1]{*x*}\n"
	         "  ret %%x.q, %%x.scale_inv, %%x.amax\n}\n", K, K);
	Module *me = parse(t, true);
	void *r[3] = {0};
	const char *err = run_all(mg->fn[0], M, x, sizeof *x * (size_t)(M * K), offs, G, r, 3);
	CHECK(!err);
	if (err) {
		fprintf(stderr, "group_amax_quant: %s\n", err);
		goto out;
	}
	int bad = 0;
	for (int g = 0; g < G; g++) {
		long r0 = g ? offs[g - 1] : 0, n = offs[g] - r0;
		float sinv = ((float *)r[1])[g], am = ((float *)r[2])[g];
		if (!n) {   /* no rows: amax 0, TE's scale 1 */
			bad += am != 0.0f || sinv != 1.0f;
			continue;
		}
		void *e[3] = {0};
		int32_t one = (int32_t)n;
		const char *ee = run_all(me->fn[0], n, x + r0 * K, sizeof *x * (size_t)(n * K), &one, 1,
		                         e, 3);
		if (ee) {
			fprintf(stderr, "expert %d: %s\n", g, ee);
			bad++;
			continue;
		}
		bad += memcmp(e[0], (uint8_t *)r[0] + r0 * K, (size_t)(n * K)) != 0
		    || memcmp(e[1], &sinv, 4) || memcmp(e[2], &am, 4);
		free(e[0]), free(e[1]), free(e[2]);
	}
	for (long i = (M - pad) * K; i < M * K; i++)
		bad += ((uint8_t *)r[0])[i] != 0;   /* padding: code 0 */
	if (bad)
		fprintf(stderr, "group_amax_quant G=%d: %d experts or padding rows differ from the "
		        "per-expert path\n", G, bad);
	failures += bad != 0;
out:
	free(r[0]), free(r[1]), free(r[2]);
	free(x), free(offs);
	ir_module_free(mg), ir_module_free(me);
}

static void
test_group_amax_quant(void)
{
	static const int s8[8] = {0, 1, 37, 5, 0, 64, 3, 17};
	static int s256[256];
	int32_t bad_offs[4] = {2, 5, 4, 10};
	uint16_t x[10 * 16] = {0};
	void *r[1];

	group_amax_quant(8, s8, 9, 32);
	for (int g = 0; g < 256; g++)
		s256[g] = g % 3 == 0 ? 0 : g % 7 == 1 ? 1 : (g * 5) % 11;
	group_amax_quant(256, s256, 3, 16);
	group_amax_quant(1, (const int[]){24}, 0, 16);
	/* the verifier: the scale's shape, 8-bit results; the interpreter:
	 * bad offsets */
#define HEAD "func @f {\n  %x = param in : bf16[M,16]\n  %offs = param in : i32[4]\n"
	CHECK(strstr(verify_error(HEAD "  %a = amax %x, %offs : f32[8,1]{gx*}\n  ret %a\n}\n"),
	             "must be f32[4,1]{gx*}, one scale per group of %x's rows"));
	CHECK(strstr(verify_error(HEAD "  %a = amax %x : f32[4,1]{gx*}\n  ret %a\n}\n"),
	             "goes with the %offs"));
	CHECK(strstr(verify_error(HEAD "  %s = param state : f32[4,1]{gx*}\n"
	                          "  %q = quantize %x, %s, %offs sat : e2m1[M,16]\n  ret %q\n}\n"),
	             "for e4m3 and e5m2 results"));
	Module *m = parse(HEAD "  %a = amax %x, %offs : f32[4,1]{gx*}\n  ret %a\n}\n", true);
	const char *err = run_all(m->fn[0], 10, x, sizeof x, bad_offs, 4, r, 1);
	CHECK(err && strstr(err, "amax: offsets are not monotone: offsets[2] = 4 < offsets[1] = 5"));
	ir_module_free(m);
#undef HEAD
}

int
main(void)
{
	test_text();
	test_group_m();
	test_group_m_kstack();
	test_group_k();
	test_mixtral();
	test_bad_offsets();
	test_group_amax_quant();
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
