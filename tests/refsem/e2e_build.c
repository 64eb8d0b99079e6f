/*
 * e2e_build.c — each shipped recipe end to end: `precc build RECIPE`,
 * then the layer run by precc_rt's cpu backend (the kernels' IR through
 * the interpreter), and the quantized X (and W) of fprop compared bit for
 * bit with the transcriptions of refs.h, on every data case of ref.h.
 * What this adds to test_te.c and test_torchao_deepseek.c: the recipe's
 * knobs reach the IR, the passes and the kernels the runtime runs.
 *
 * usage: refsem_e2e PRECC SRCDIR TMPDIR
 */
#include <float.h>
#include "precc/precc_rt.h"
#include "refs.h"

enum { M = 128, K = 384, N = 256, MAXB = 96 };
static const char *precc, *src, *tmp;
static float x[M * K], w[N * K], dy[M * N];

typedef struct Run {
	precc_rt *rt;
	int layer, nb;
	void *buf[MAXB];
	precc_buffer_info bi[MAXB];
} Run;

static uint16_t
bf16_rne(float f)     /* fp32 -> bf16, ties to even; NaN stays NaN */
{
	uint32_t u = fbits(f);
	if (isnan(f))
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static float
bf16_val(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* Round a case to bf16 (the layer's dtype), so both sides see one input. */
static void
to_bf16(float *v, long n)
{
	for (long i = 0; i < n; i++)
		v[i] = bf16_val(bf16_rne(v[i]));
}

static int
open_run(Run *r, const char *recipe)
{
	char cmd[4096], dir[1024], why[256];
	/* a shipped recipe, or one of tests/refsem */
	const char *where = strcmp(recipe, "te_delayed_h16") && strcmp(recipe, "nvfp4_no_rht")
	                    ? "recipes" : "tests/refsem";

	memset(r, 0, sizeof *r);
	snprintf(dir, sizeof dir, "%s/%s", tmp, recipe);
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && PRECC_PTXAS=/nonexistent PRECC_CACHE_DIR='%s/cache' "
	         "'%s' build '%s/%s/%s.lua' --model '%s/tests/refsem/e2e_model.lua' -o '%s' "
	         ">/dev/null 2>&1", dir, tmp, precc, src, where, recipe, src, dir);
	if (system(cmd) != 0) {
		CHECK(0, "%s: precc build failed: %s", recipe, cmd);
		return -1;
	}
	if (!(r->rt = precc_rt_open(dir, PRECC_BACKEND_CPU, why, sizeof why))) {
		CHECK(0, "%s: %s", recipe, precc_rt_last_error());
		return -1;
	}
	r->layer = precc_rt_layer_find(r->rt, "model.layers.0.mlp.up_proj");
	r->nb = precc_rt_buffer_count(r->rt, r->layer);
	if (r->layer < 0 || r->nb <= 0 || r->nb > MAXB) {
		CHECK(0, "%s: layer or buffers missing", recipe);
		return -1;
	}
	for (int i = 0; i < r->nb; i++) {
		precc_rt_buffer_info(r->rt, r->layer, i, M, &r->bi[i]);
		r->buf[i] = precc_rt_malloc(r->rt, r->bi[i].bytes);
		memset(r->buf[i], 0, r->bi[i].bytes);
		size_t l = strlen(r->bi[i].name);
		/* a delayed scale starts at 1.0, its history at 0 (docs/ir.md) */
		if (!strcmp(r->bi[i].role, "state") && l > 6 && !strcmp(r->bi[i].name + l - 6, ".scale"))
			for (long k = 0; k < r->bi[i].rows * r->bi[i].cols; k++)
				((float *)r->buf[i])[k] = 1.0f;
	}
	return 0;
}

static void *
get(Run *r, const char *name)
{
	for (int i = 0; i < r->nb; i++)
		if (!strcmp(r->bi[i].name, name))
			return r->buf[i];
	CHECK(0, "no buffer '%s'", name);
	return NULL;
}

static void
put(Run *r, const char *name, const float *v, long n)
{
	uint16_t *b = get(r, name);
	for (long i = 0; b && i < n; i++)
		b[i] = bf16_rne(v[i]);
}

/* Inputs of one case: X the case (normal data times grow), W and dY
 * normal data. */
static int
run_grown(Run *r, int kase, float fmax, float grow)
{
	fill(x, M, K, kase, fmax);
	if (kase == C_NORMAL)
		for (long i = 0; i < M * K; i++)
			x[i] *= grow;
	to_bf16(x, M * K);
	fill(w, N, K, C_NORMAL, fmax);
	to_bf16(w, N * K);
	fill(dy, M, N, C_NORMAL, fmax);
	to_bf16(dy, M * N);
	put(r, "x", x, M * K);
	put(r, "w", w, N * K);
	put(r, "dy", dy, M * N);
	if (precc_rt_run_layer(r->rt, r->layer, M, r->buf, 0, NULL)) {
		CHECK(0, "run: %s", precc_rt_last_error());
		return -1;
	}
	return 0;
}

static int
run_case(Run *r, int kase, float fmax)
{
	return run_grown(r, kase, fmax, 1.0f);
}

static void
close_run(Run *r)
{
	for (int i = 0; i < r->nb; i++)
		precc_rt_free(r->rt, r->buf[i]);
	precc_rt_close(r->rt);
}

/* codes of v (n values) with one multiplier each block of b along rows;
 * e2m1 codes are two a byte, element 2i in the low nibble: q is then the
 * buffer and at the element where v starts (else q is v's first code) */
static int
codes_ok(const char *what, int kase, const uint8_t *q, long at, const float *v, long n, int fmt,
         float m)
{
	for (long i = 0; i < n; i++) {
		int rc = rencode(fmt, v[i] * m);
		int got = fmt == R_E2M1 ? q[(at + i) / 2] >> (4 * ((at + i) % 2)) & 0xf : q[i];
		if (rc < 0)         /* NaN has no e2m1 code */
			continue;
		if (!code_eq(rc, got)) {
			CHECK(0, "%s %s: x[%ld]=%a code %02x vs reference %02x", what, case_name[kase], i,
			      v[i], got, rc);
			return 0;
		}
	}
	return 1;
}

/* TE Float8CurrentScaling (te_current) and torchao tensorwise
 * (current_tensorwise): one scale over X. */
static void
tensorwise(const char *recipe, int torchao)
{
	Run r;
	if (open_run(&r, recipe))
		return;
	for (int kase = 0; kase < NCASE; kase++) {
		if (run_case(&r, kase, 448.0f))
			break;
		float s = torchao ? ao_scale(torch_amax(x, M, K, K), 448.0, 0)
		                  : te_scale_from_amax(te_amax(x, M * K, 1), 448.0f, 0, 0.0f, FLT_MAX);
		const float *si = get(&r, "x.scale_inv");
		CHECK(si && same(si[0], 1.0f / s), "%s %s: scale_inv %a vs %a", recipe, case_name[kase],
		      si ? si[0] : 0.0f, 1.0f / s);
		codes_ok(recipe, kase, get(&r, "x.q"), 0, x, M * K, R_E4M3, s);
	}
	close_run(&r);
}

/* torchao rowwise: per row, pow2 by exp2(floor(log2)). */
static void
rowwise(const char *recipe)
{
	Run r;
	if (open_run(&r, recipe))
		return;
	for (int kase = 0; kase < NCASE; kase++) {
		if (run_case(&r, kase, 448.0f))
			break;
		const float *si = get(&r, "x.scale_inv");
		const uint8_t *q = get(&r, "x.q");
		for (long row = 0; row < M; row++) {
			float s = ao_scale(torch_amax(x + row * K, 1, K, K), 448.0, 1);
			if (!same(si[row], 1.0f / s)) {
				CHECK(0, "rowwise %s row %ld: scale_inv %a vs %a", case_name[kase], row, si[row],
				      1.0f / s);
				break;
			}
			if (!codes_ok("rowwise", kase, q + row * K, 0, x + row * K, K, R_E4M3, s))
				break;
		}
	}
	close_run(&r);
}

/* DeepGEMM: sf = max(amax, 1e-4) / 448 per 1x128 tile of X and 128x128
 * block of W (deep_gemm/utils/math.py:26-62), codes of x * (1/sf). */
static int
deepgemm_blocks(const char *what, int kase, const float *v, long rows, long br, const float *sf,
                const uint8_t *q)
{
	long nbc = K / 128;
	for (long b = 0; b < (rows / br) * nbc; b++) {
		long r0 = b / nbc * br, c0 = b % nbc * 128;
		float a = torch_amax(v + r0 * K + c0, br, 128, K);
		if (a < 1e-4f)
			a = 1e-4f;
		float s = a / 448.0f, m = 1.0f / s;
		if (!same(sf[b], s)) {
			CHECK(0, "deepseek_v3 %s %s block %ld: sf %a vs %a", what, case_name[kase], b, sf[b], s);
			return 0;
		}
		for (long rr = r0; rr < r0 + br; rr++)
			if (!codes_ok(what, kase, q + rr * K + c0, 0, v + rr * K + c0, 128, R_E4M3, m))
				return 0;
	}
	return 1;
}

static void
deepseek(void)
{
	Run r;
	if (open_run(&r, "deepseek_v3"))
		return;
	for (int kase = 0; kase < NCASE; kase++) {
		if (run_case(&r, kase, 448.0f))
			break;
		deepgemm_blocks("x", kase, x, M, 1, get(&r, "x.scale_inv"), get(&r, "x.q"));
		deepgemm_blocks("w", kase, w, N, 128, get(&r, "w.scale_inv"), get(&r, "w.q"));
	}
	close_run(&r);
}

/* TE MXFP8BlockScaling: fmaxf block amax, float_to_e8m0(amax * 1/448),
 * x * exp2f_rcp(e8m0). */
static void
mxfp8(void)
{
	Run r;
	const float rcp = (float)(1.0 / 448.0);
	if (open_run(&r, "mxfp8"))
		return;
	for (int kase = 0; kase < NCASE; kase++) {
		if (run_case(&r, kase, 448.0f))
			break;
		const uint8_t *e8 = get(&r, "x.scale_inv"), *q = get(&r, "x.q");
		for (long b = 0; b < M * K / 32; b++) {
			uint8_t re = te_float_to_e8m0(te_amax(x + b * 32, 32, 1) * rcp);
			if (e8[b] != re) {
				CHECK(0, "mxfp8 %s block %ld: e8m0 %02x vs TE %02x", case_name[kase], b, e8[b], re);
				break;
			}
			if (!codes_ok("mxfp8", kase, q + b * 32, 0, x + b * 32, 32, R_E4M3, te_exp2f_rcp(re)))
				break;
		}
	}
	close_run(&r);
}

/* TE NVFP4BlockScaling >= 2.14 on X (1x16). */
static void
nvfp4(void)
{
	Run r;
	const float rcp6 = 1.0f / 6.0f;
	if (open_run(&r, "nvfp4"))
		return;
	for (int kase = 0; kase < NCASE; kase++) {
		if (run_case(&r, kase, 6.0f))
			break;
		float S_enc = te_genc(te_amax(x, M * K, 1)), S_dec = (float)(1.0 / S_enc);
		const float *gsi = get(&r, "x.global_scale_inv");
		const uint8_t *e4 = get(&r, "x.scale_inv"), *q = get(&r, "x.q");
		CHECK(same(gsi[0], S_dec), "nvfp4 %s: global scale_inv %a vs TE %a", case_name[kase],
		      gsi[0], S_dec);
		for (long b = 0; b < M * K / 16; b++) {
			float ba = te_amax(x + b * 16, 16, 1);
			int re = rencode(R_E4M3, ba * (S_enc * rcp6));
			float bsi = fminf(1.0f / ((float)rdecode(R_E4M3, (unsigned)re) * S_dec), FLT_MAX);
			if (e4[b] != re) {
				CHECK(0, "nvfp4 %s block %ld: e4m3 %02x vs TE %02x", case_name[kase], b, e4[b], re);
				break;
			}
			if (!codes_ok("nvfp4", kase, q, b * 16, x + b * 16, 16, R_E2M1, bsi))
				break;
		}
	}
	close_run(&r);
}

/* NVFP4 with TE's RHT on the wgrad operands (nvfp4): X^T through
 * the transform (refs.h te_rht16, 16 rows of X at a time), then TE's
 * NVFP4 >= 2.14 with the post-RHT global amax. Also the wgrad's error
 * against fp64 with and without the transform, on outlier channels. */
static double
dw_error(Run *r)
{
	const uint16_t *dw = get(r, "dw");
	double num = 0, den = 0;
	for (long n = 0; dw && n < N; n++)
		for (long kk = 0; kk < K; kk++) {
			double ref = 0;
			for (long m = 0; m < M; m++)
				ref += (double)dy[m * N + n] * x[m * K + kk];
			double d = bf16_val(dw[n * K + kk]) - ref;
			num += d * d, den += ref * ref;
		}
	return sqrt(num / den);
}

static void
nvfp4_rht(void)
{
	static float xt[K * M];
	static uint16_t ht[K * M];
	float t[16][16], blk[16];
	const float rcp6 = 1.0f / 6.0f;
	Run r, plain;
	double e_rht = 0, e_plain = 0;

	te_rht_matrix(t);
	if (open_run(&r, "nvfp4") || open_run(&plain, "nvfp4_no_rht"))
		return;
	for (int kase = 0; kase < NCASE; kase++) {
		uint64_t seed = rng;      /* the same data again without the RHT */
		if (run_case(&r, kase, 6.0f))
			break;
		for (long m = 0; m < M; m++)
			for (long kk = 0; kk < K; kk++)
				xt[kk * M + m] = x[m * K + kk];
		for (long b = 0; b < K * M / 16; b++) {
			te_rht16(xt + b * 16, t, ht + b * 16);
			for (int j = 0; j < 16; j++)
				xt[b * 16 + j] = bf16_val(ht[b * 16 + j]);
		}
		/* the transform is fused into the quantize pass (docs/passes.md): no
		 * buffer holds the transformed copy, which the global scale, the
		 * block scales and the codes below are of */
		for (int i = 0; kase == 0 && i < r.nb; i++)
			CHECK(strcmp(r.bi[i].name, "x.t.rht") != 0, "rht: the plan writes the "
			      "transformed copy x.t.rht (the RHT is not fused into the quantize pass)");
		float S_enc = te_genc(te_amax(xt, K * M, 1)), S_dec = (float)(1.0 / S_enc);
		const float *gsi = get(&r, "x.t.rht.global_scale_inv");
		const uint8_t *e4 = get(&r, "x.t.rht.scale_inv"), *q = get(&r, "x.t.rht.q");
		CHECK(same(gsi[0], S_dec), "rht %s: global scale_inv %a vs TE %a", case_name[kase],
		      gsi[0], S_dec);
		for (long b = 0; b < K * M / 16; b++) {
			int re = rencode(R_E4M3, te_amax(xt + b * 16, 16, 1) * (S_enc * rcp6));
			float bsi = fminf(1.0f / ((float)rdecode(R_E4M3, (unsigned)re) * S_dec), FLT_MAX);
			if (e4[b] != re) {
				CHECK(0, "rht %s block %ld: e4m3 %02x vs TE %02x", case_name[kase], b, e4[b], re);
				break;
			}
			memcpy(blk, xt + b * 16, sizeof blk);
			if (!codes_ok("rht", kase, q, b * 16, blk, 16, R_E2M1, bsi))
				break;
		}
		if (kase == C_OUTLIERS) {
			e_rht = dw_error(&r);
			rng = seed;
			run_case(&plain, kase, 6.0f);
			e_plain = dw_error(&plain);
		}
	}
	printf("nvfp4 wgrad on outlier channels, relative error vs fp64: %.4g without RHT, %.4g "
	       "with\n", e_plain, e_rht);
	close_run(&r);
	close_run(&plain);
}

/* TE DelayedScaling (te_delayed_hybrid: history 1024, max, margin 0; and
 * te_delayed_h16, the same with 16 steps of history): steps with NaN, inf
 * and runs of all-zero X longer than 16 steps, an amax that grows and
 * shrinks; per step the codes use the scale of the step before, and the
 * next scale is kernel_bulk's. */
static void
delayed(const char *recipe, int len, int steps)
{
	Run r;
	TeState te = {.len = len, .scale = 1.0f};
	int diffs = 0, kept = 0;
	if (open_run(&r, recipe))
		return;
	for (int step = 0; step < steps; step++) {
		int kind = step % 37 == 13 ? C_NAN : step % 53 == 20 ? C_INF
		           : (step / 40) % 4 == 2 ? C_ALL_ZERO : step % 7 == 3 && step > 60 ? C_OUTLIERS : C_NORMAL;
		float before = te.scale, grow = 1.0f + (float)(step % 50);
		if (run_grown(&r, kind, 448.0f, grow))   /* the amax moves over time */
			break;
		te.hist[0] = te_amax(x, M * K, 1);
		te_update(&te, 0, 448.0f);
		kept += kind == C_ALL_ZERO && te.scale == before && before != 1.0f;
		const float *sc = get(&r, "x.scale");
		if (!same(sc[0], te.scale) && diffs++ < 3)
			CHECK(0, "%s step %d (%s): scale %a vs TE %a", recipe, step, case_name[kind], sc[0],
			      te.scale);
		if (step % 10 == 0)
			codes_ok(recipe, kind, get(&r, "x.q"), 0, x, M * K, R_E4M3, before);
	}
	CHECK(diffs == 0, "%s: %d of %d steps differ", recipe, diffs, steps);
	CHECK(kept > 0, "%s: no zero step kept a scale other than 1", recipe);
	close_run(&r);
}

int
main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s PRECC SRCDIR TMPDIR\n", argv[0]);
		return 2;
	}
	precc = argv[1], src = argv[2], tmp = argv[3];
	tensorwise("te_current", 0);
	tensorwise("current_tensorwise", 1);
	rowwise("rowwise");
	rowwise("rowwise_gw_hp");
	deepseek();
	mxfp8();
	nvfp4();
	nvfp4_rht();
	delayed("te_delayed_hybrid", 1024, 120);
	delayed("te_delayed_h16", 16, 240);
	if (fails) {
		printf("%d failures\n", fails);
		return 1;
	}
	printf("e2e: te_current, current_tensorwise, rowwise, rowwise_gw_hp, deepseek_v3, mxfp8, "
	       "nvfp4 (and with RHT), te_delayed_hybrid (and a 16-step history) match their references through "
	       "precc build + cpu\n");
	return 0;
}
