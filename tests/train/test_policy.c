/*
 * test_policy.c — the training policy's host code (runtime/train.c)
 * against sequences PyTorch itself recorded (gen_torch_refs.py, torch
 * 2.13.0 CPU; data/ holds their text files), and the chapter's stagnation example.
 *
 *   test_policy scaler DATA   GradScaler: per step the unscaled gradients,
 *                             found_inf, the skip, the scale and the growth
 *                             tracker, bit for bit, over inf/-inf/NaN steps,
 *                             growth to fp32's limit and backoff to 0
 *   test_policy adamw DATA    AdamW on fp32: 25 steps, both moments bit for
 *                             bit, the parameter too up to torch's own sqrt
 *                             being an ulp off; bf16 moments (DeepSeek-V3's
 *                             optimizer_state) stay close to torch's fp32
 *   test_policy clip DATA     clip_grad_norm_: total norm and clipped grads
 *   test_policy stagnation    w = 1, updates of 2e-4 (the chapter's fp16
 *                             example): an fp16 master under round to nearest
 *                             never moves; with stochastic rounding it tracks
 *                             the fp32 master; the same for bf16 and 1e-3
 *   test_policy manifest DIR  the training policy read from a manifest
 */
#include <math.h>
#include <stdint.h>

#include "../runtime/rtcheck.h"
#include "precc/precc_rt.h"
#include "precc/numerics.h"

static float unhex(const char *s)
{
	uint32_t u = (uint32_t)strtoul(s, NULL, 16);
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* Reads whitespace-separated tokens of a line into tok (at most max). */
static int split(char *line, char **tok, int max)
{
	int n = 0;
	for (char *t = strtok(line, " \n"); t && n < max; t = strtok(NULL, " \n"))
		tok[n++] = t;
	return n;
}

static FILE *open_data(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (!(f = fopen(path, "r")))
		fprintf(stderr, "cannot open %s\n", path);
	return f;
}

static void test_scaler(const char *dir)
{
	FILE *f = open_data(dir, "grad_scaler.txt");
	char line[4096], *tok[16];
	precc_loss_scaler sc;
	int cases = 0, steps = 0, skips = 0, nan_steps = 0, grew = 0;
	float last_scale = 0;

	CHECK(f != NULL);
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		int n = split(line, tok, 16);
		if (n == 0 || tok[0][0] == '#')
			continue;
		if (strcmp(tok[0], "case") == 0) {
			precc_training_policy p;
			precc_training_policy_default(&p);
			p.loss_scale = PRECC_LOSS_DYNAMIC;
			p.loss_scale_init = unhex(tok[2]);
			p.growth_factor = unhex(tok[3]);
			p.backoff_factor = unhex(tok[4]);
			p.growth_interval = atoi(tok[5]);
			precc_loss_scaler_init(&sc, &p);
			last_scale = sc.scale;
			cases++;
			continue;
		}
		/* step found ran scaled[4] unscaled[4] scale tracker */
		CHECK(n == 13);
		if (n != 13)
			break;
		float g[4], out[4];
		float *outs[1] = {out};
		const void *gs[1] = {g};
		int fmt[1] = {PRECC_FP32};
		long cnt[1] = {4};
		for (int i = 0; i < 4; i++)
			g[i] = unhex(tok[3 + i]);
		/* GradScaler's inv_scale: the reciprocal in fp64, then fp32 */
		float inv = (float)(1.0 / (double)sc.scale);
		int found = precc_unscale_check(1, gs, fmt, cnt, inv, outs);
		CHECK(found == atoi(tok[1]));
		for (int i = 0; i < 4; i++)
			CHECK(bits(out[i]) == bits(unhex(tok[7 + i])) ||
			      (isnan(out[i]) && isnan(unhex(tok[7 + i]))));
		for (int i = 0; i < 4; i++)
			nan_steps += isnan(g[i]);
		int skip = precc_loss_scaler_update(&sc, found);
		CHECK(skip == !atoi(tok[2]));
		CHECK(bits(sc.scale) == bits(unhex(tok[11])));
		CHECK(sc.growth_tracker == atoi(tok[12]));
		grew += sc.scale > last_scale;
		last_scale = sc.scale;
		skips += skip;
		steps++;
	}
	fclose(f);
	/* the data exercised what it should */
	CHECK(cases == 4 && steps > 150 && skips > 40 && nan_steps > 0 && grew > 10);
	/* after 40 overflows at backoff 1/8 from 2^-100 the scale is 0 */
	printf("scaler: %d cases, %d steps, %d skipped, %s\n", cases,
	       steps, skips, failures ? "NOT all equal to torch" : "all equal to torch");
	/* a NaN in a bf16 or fp16 tensor is found too */
	{
		uint16_t h[3] = {0x3c00, 0x7e00, 0x3c00}, b[3] = {0x3f80, 0x3f80, 0x3f80};
		float o1[3], o2[3];
		const void *gs[2] = {h, b};
		float *outs[2] = {o1, o2};
		int fmt[2] = {PRECC_FP16, PRECC_BF16};
		long cnt[2] = {3, 3};
		CHECK(precc_unscale_check(2, gs, fmt, cnt, 0.5f, outs) == 1);
		CHECK(o1[0] == 0.5f && isnan(o1[1]) && o2[2] == 0.5f);
		fmt[0] = PRECC_E4M3;
		CHECK(precc_unscale_check(2, gs, fmt, cnt, 0.5f, outs) == -1);
		CHECK(strstr(precc_rt_last_error(), "tensor 0 is e4m3") != NULL);
	}
	/* static and none never change the scale but still skip on inf */
	{
		precc_training_policy p;
		precc_training_policy_default(&p);
		precc_loss_scaler_init(&sc, &p);
		CHECK(sc.scale == 1.0f && precc_loss_scaler_update(&sc, 1) == 1 &&
		      sc.scale == 1.0f && sc.skipped == 1);
		p.loss_scale = PRECC_LOSS_STATIC;
		p.loss_scale_init = 1024;
		precc_loss_scaler_init(&sc, &p);
		for (int i = 0; i < 5; i++)
			precc_loss_scaler_update(&sc, 0);
		CHECK(sc.scale == 1024.0f);
	}
}

/* Reads one "KEY v0 v1 ..." line of n floats. */
static int read_vec(FILE *f, const char *key, float *v, int n)
{
	static char line[65536];
	char *tok[1024];
	if (!fgets(line, sizeof line, f))
		return -1;
	int k = split(line, tok, 1024);
	if (k != n + 1 || strcmp(tok[0], key))
		return -1;
	for (int i = 0; i < n; i++)
		v[i] = unhex(tok[1 + i]);
	return 0;
}

/* AdamW: m and v bit for bit at every step. The parameter bit for bit
 * too, except where torch's own sqrt (MKL's vsSqrt on this CPU build) was
 * one ulp off the correctly rounded sqrtf this code uses: from the first
 * such step on, that element's parameter may differ, within 1e-5. */
static void test_adamw(const char *dir)
{
	FILE *f = open_data(dir, "adamw.txt");
	char line[256];
	int n = 0, steps = 0, exact = 0, total = 0, mv_exact = 1, sqrt_off = 0;
	int affected_elems = 0, affected_exact = 0;
	float p0[64], g[64], tp[64], tm[64], tv[64], ts[64];
	float w[64], m[64], v[64];
	uint16_t wb[64], mb[64], vb[64];
	float wf[64];
	int affected[64] = {0};
	precc_adamw h = {1e-2, 0.9, 0.999, 1e-8, 0.01};
	double worst_bf16 = 0, worst_rel = 0;

	CHECK(f != NULL);
	if (!f)
		return;
	while (fgets(line, sizeof line, f) && line[0] == '#')
		;
	CHECK(sscanf(line, "adamw %d %d", &n, &steps) == 2 && n <= 64);
	CHECK(read_vec(f, "p0", p0, n) == 0);
	memcpy(w, p0, sizeof p0);
	memcpy(wf, p0, sizeof p0);
	memset(m, 0, sizeof m);
	memset(v, 0, sizeof v);
	memset(mb, 0, sizeof mb);
	memset(vb, 0, sizeof vb);
	memset(wb, 0, sizeof wb);
	precc_param pa = {n, PRECC_FP32, w, PRECC_FP32, m, v, PRECC_FP32, NULL, 1};
	/* the DeepSeek-V3 setting: fp32 master, bf16 moments, bf16 working copy */
	precc_param pb = {n, PRECC_FP32, wf, PRECC_BF16, mb, vb, PRECC_BF16, wb, 2};
	for (int s = 1; s <= steps; s++) {
		CHECK(read_vec(f, "g", g, n) == 0 && read_vec(f, "p", tp, n) == 0 &&
		      read_vec(f, "m", tm, n) == 0 && read_vec(f, "v", tv, n) == 0 &&
		      read_vec(f, "s", ts, n) == 0);
		CHECK(precc_adamw_step(&h, s, &pa, g, 0, 0) == 0);
		CHECK(precc_adamw_step(&h, s, &pb, g, 0, 0) == 0);
		for (int i = 0; i < n; i++) {
			mv_exact &= bits(m[i]) == bits(tm[i]) && bits(v[i]) == bits(tv[i]);
			if (bits(sqrtf(tv[i])) != bits(ts[i])) {
				sqrt_off++;
				affected_elems += !affected[i];
				affected[i] = 1;
			}
			total++;
			if (!affected[i]) {
				if (bits(w[i]) != bits(tp[i]))
					fprintf(stderr, "adamw: step %d element %d: %.9g here, "
					        "%.9g torch\n", s, i, w[i], tp[i]);
				CHECK(bits(w[i]) == bits(tp[i]));
				exact += bits(w[i]) == bits(tp[i]);
			} else {
				double rel = fabs((double)w[i] - tp[i]) / fabs(tp[i]);
				affected_exact += bits(w[i]) == bits(tp[i]);
				if (rel > worst_rel)
					worst_rel = rel;
			}
			double d = fabs((double)wf[i] - tp[i]) / (fabs(tp[i] - p0[i]) + 1e-30);
			if (s == steps && d > worst_bf16)
				worst_bf16 = d;
			/* working weights are the master in bf16 */
			CHECK(wb[i] == (uint16_t)precc_encode(PRECC_BF16, wf[i], PRECC_RNE, false, 0));
		}
	}
	fclose(f);
	printf("adamw: %d steps x %d elements: exp_avg and exp_avg_sq %s torch's bit "
	       "for bit; torch's sqrt was 1 ulp off the correctly rounded one %d "
	       "times, in %d elements; the parameter equals torch's bit for bit in "
	       "all %d (element, step) pairs before that (%d of the rest too, worst "
	       "relative difference %.2g); bf16 moments: final parameters within "
	       "%.3g of the distance travelled\n", steps, n,
	       mv_exact ? "equal" : "DIFFER FROM", sqrt_off, affected_elems, exact,
	       affected_exact, worst_rel, worst_bf16);
	CHECK(mv_exact && total == n * steps);
	CHECK(worst_rel < 1e-5);
	CHECK(exact + affected_exact > total * 9 / 10);
	CHECK(worst_bf16 < 0.05);
	CHECK(precc_adamw_step(&h, 0, &pa, g, 0, 0) == -1);
	pa.state_format = PRECC_E4M3;
	CHECK(precc_adamw_step(&h, 1, &pa, g, 0, 0) == -1);
}

static void test_clip(const char *dir)
{
	FILE *f = open_data(dir, "clip.txt");
	char line[65536], *tok[8];
	int cases = 0;

	CHECK(f != NULL);
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		if (line[0] == '#')
			continue;
		CHECK(split(line, tok, 8) == 3 && strcmp(tok[0], "clip") == 0);
		double max_norm = unhex(tok[1]);
		float total = unhex(tok[2]);
		float g[3][64], want[3][64];
		long n[3];
		float *gs[3] = {g[0], g[1], g[2]};
		for (int t = 0; t < 3; t++) {
			char l2[65536], *tk[80];
			CHECK(fgets(l2, sizeof l2, f) != NULL);
			int k = split(l2, tk, 80);
			n[t] = atol(tk[1]);
			CHECK(k == n[t] + 2);
			for (int i = 0; i < n[t]; i++)
				g[t][i] = unhex(tk[2 + i]);
			CHECK(fgets(l2, sizeof l2, f) != NULL);
			split(l2, tk, 80);
			for (int i = 0; i < n[t]; i++)
				want[t][i] = unhex(tk[2 + i]);
		}
		double got = precc_clip_grad_norm(3, gs, n, max_norm);
		/* the norm's summation order differs from torch's: within 2 ulp */
		CHECK(fabs(got - total) <= 2 * ldexp(1.0, ilogb(total) - 23));
		int within = 1;
		for (int t = 0; t < 3; t++)
			for (int i = 0; i < n[t]; i++)
				within &= fabsf(g[t][i] - want[t][i]) <=
				          2 * ldexpf(1.0f, ilogbf(want[t][i]) - 23);
		CHECK(within);
		cases++;
	}
	fclose(f);
	CHECK(cases == 3);
	printf("clip: %d cases within 2 ulp of torch\n", cases);
}

/* The chapter's example: w = 1, a constant gradient makes AdamW step by
 * lr each time (m / sqrt(v) = 1 after bias correction). */
static void stagnate(int fmt, double lr, int steps, int n)
{
	precc_adamw h = {lr, 0.9, 0.999, 1e-8, 0};
	uint16_t *rn = calloc((size_t)n, 2), *sr = calloc((size_t)n, 2);
	float *ref = calloc((size_t)n, 4), *g = calloc((size_t)n, 4);
	float *m[3], *v[3];
	uint16_t one = (uint16_t)precc_encode(fmt, 1.0f, PRECC_RNE, false, 0);

	for (int k = 0; k < 3; k++) {
		m[k] = calloc((size_t)n, 4);
		v[k] = calloc((size_t)n, 4);
	}
	for (int i = 0; i < n; i++) {
		rn[i] = sr[i] = one;
		ref[i] = 1.0f;
		g[i] = 1.0f;
	}
	precc_param prn = {n, fmt, rn, PRECC_FP32, m[0], v[0], fmt, NULL, 7};
	precc_param psr = {n, fmt, sr, PRECC_FP32, m[1], v[1], fmt, NULL, 7};
	precc_param pref = {n, PRECC_FP32, ref, PRECC_FP32, m[2], v[2], fmt, NULL, 7};
	for (int s = 1; s <= steps; s++) {
		CHECK(precc_adamw_step(&h, s, &prn, g, 0, 0) == 0);
		CHECK(precc_adamw_step(&h, s, &psr, g, 1, 1000 + (uint64_t)s) == 0);
		CHECK(precc_adamw_step(&h, s, &pref, g, 0, 0) == 0);
	}
	double mean = 0, moved_rn = 0;
	for (int i = 0; i < n; i++) {
		mean += precc_decode(fmt, sr[i]);
		moved_rn += rn[i] != one;
	}
	mean /= n;
	/* the ulp just below 1 */
	double ulp = fmt == PRECC_FP16 ? ldexp(1, -11) : ldexp(1, -8);
	/* each SR step is a Bernoulli(lr/ulp) of one ulp: the mean over n
	 * elements has sd ulp * sqrt(steps * p (1 - p) / n); allow 6 sd */
	double p = lr / ulp;
	double sd = ulp * sqrt(steps * p * (1 - p) / n);
	printf("stagnation %s: lr %g < half an ulp (%g) of 1: round to nearest "
	       "moved %g of %d elements (w stays 1); stochastic rounding mean %.6f, "
	       "fp32 master %.6f (|diff| %.2g, 6 sd = %.2g)\n",
	       precc_format_get(fmt)->name, lr, ulp / 2, moved_rn, n, mean, ref[0],
	       fabs(mean - ref[0]), 6 * sd);
	CHECK(lr < ulp / 2);
	CHECK(moved_rn == 0);
	CHECK(fabs(ref[0] - (1.0 - steps * lr)) < 1e-3 * steps * lr);
	CHECK(fabs(mean - ref[0]) < 6 * sd);
	free(rn); free(sr); free(ref); free(g);
	for (int k = 0; k < 3; k++) {
		free(m[k]);
		free(v[k]);
	}
}

static void test_manifest(const char *dir)
{
	char why[512];
	precc_rt *rt = precc_rt_open(dir, PRECC_BACKEND_CPU, why, sizeof why);
	precc_training_policy p;

	CHECK(rt != NULL);
	if (!rt) {
		fprintf(stderr, "%s\n", why);
		return;
	}
	precc_rt_training_policy(rt, &p);
	/* recipes/fp16_dynamic_loss_scale.lua */
	CHECK(p.from_manifest && p.loss_scale == PRECC_LOSS_DYNAMIC &&
	      p.loss_scale_init == 65536.0f && p.growth_factor == 2.0f &&
	      p.backoff_factor == 0.5f && p.growth_interval == 2000 &&
	      p.master_weights == PRECC_FP32 && p.optimizer_state == PRECC_FP32 &&
	      !p.stochastic_rounding);
	precc_rt_close(rt);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_policy scaler|adamw|clip|manifest DIR | stagnation\n");
		return 2;
	}
	if (strcmp(argv[1], "stagnation") == 0) {
		stagnate(PRECC_FP16, 2e-4, 1000, 4096);
		stagnate(PRECC_BF16, 1e-3, 300, 4096);
	} else if (argc < 3) {
		fprintf(stderr, "test_policy %s needs DIR\n", argv[1]);
		return 2;
	} else if (strcmp(argv[1], "scaler") == 0)
		test_scaler(argv[2]);
	else if (strcmp(argv[1], "adamw") == 0)
		test_adamw(argv[2]);
	else if (strcmp(argv[1], "clip") == 0)
		test_clip(argv[2]);
	else if (strcmp(argv[1], "manifest") == 0)
		test_manifest(argv[2]);
	else
		return 2;
	return finish(argv[1]);
}
