/*
 * test_grouped.c — expert groups through the runtime (runtime/grouped.c,
 * issue 29) on the cpu backend, on what `precc build` writes for a
 * Mixtral-style block (8 experts):
 *
 *   test_grouped DIR [TARGET]    (TARGET: that target's layers and groups)
 *
 * For every group of DIR: precc_rt_forward_grouped / backward_grouped on
 * the tokens sorted by expert against each expert's own layer
 * (precc_rt_forward / precc_rt_backward of the per-expert plan, same
 * recipe) on its rows and its slice of the stacked weights: y, dX (where
 * the group's dgrad is grouped) and dW bit for bit, zero-token experts
 * (dW 0, no rows), a single token, unaligned counts (where the recipe's
 * token_align allows), padding rows past the last expert (y and dX 0).
 * With a bf16 recipe, every row lands exactly once, in its own expert:
 * W_e = (e+1)·I gives y = (e+1)·x and dX = (e+1)·dY row by row, and dW_e
 * sums the products of expert e's rows' markers (one in x, one in dY). Then bad offsets, refused before anything
 * runs (y left as it was): a wrong count, NULL, negative, not monotone,
 * past m_total, an expert starting inside a token block (token_align >
 * 1), and, for a group whose dgrad is not grouped, dx.
 *
 * Each group's line says which GEMMs it runs grouped ("gemms fprop dgrad
 * wgrad"), for grouped_test.sh to hold each recipe to what it should
 * group.
 *
 *   test_grouped fake DIR LIB   the cuda path on the counting fake driver:
 *                               the calls only enqueue, bad offsets come
 *                               back from precc_rt_grouped_check
 */
#include <dlfcn.h>
#include <stdint.h>

#include "rtcheck.h"
#include "precc/precc_rt.h"
#include "precc/numerics.h"
#include "precc/interp.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t next(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng >> 33);
}

static void *zalloc(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, n ? n : 1))
		abort();
	memset(p, 0, n ? n : 1);
	return p;
}

static uint16_t bf16(float v) { return (uint16_t)precc_encode(PRECC_BF16, v, PRECC_RNE, true, 0); }

/* n bf16 in [-amax, amax], range growing with the block of `per` elements
 * (experts of different ranges) */
static uint16_t *fill(long n, float amax, long per)
{
	uint16_t *p = zalloc((size_t)n * 2);
	for (long i = 0; i < n; i++)
		p[i] = bf16(((float)(next() % 20001) - 10000.0f) / 10000.0f * amax
		            * (1.0f + (float)(per ? i / per : 0) * 0.5f));
	return p;
}

typedef struct Regions { void *saved, *state, *work; } Regions;

static void regions(Regions *r, const precc_layer_sizes *s)
{
	r->saved = zalloc(s->saved_bytes);
	r->state = zalloc(s->state_bytes);
	r->work = zalloc(s->workspace_bytes);
}

static void regions_free(Regions *r)
{
	free(r->saved), free(r->state), free(r->work);
}

static size_t eb(int fmt) { return precc_interp_elem_bytes((precc_format)fmt); }

static int compared;   /* experts compared with their own layer */

/* m up to the layer's M multiple (the blockwise recipes quantize xᵀ in
 * 128-token blocks: M a multiple of 128) */
static long round_m(precc_rt *rt, int layer, long m)
{
	long mm = precc_rt_layer_m_multiple(rt, layer);
	return mm > 1 ? (m + mm - 1) / mm * mm : m;
}

/* One group at the expert row counts cnt[] (+ pad rows of no expert). */
static void check_group(precc_rt *rt, int g, const int *cnt, int pad)
{
	precc_group_info gi;
	precc_layer_sizes gs;
	int32_t offs[256] __attribute__((aligned(16)));   /* the runtime's buffer alignment */
	long m = 0;

	CHECK(precc_rt_group_info(rt, g, &gi) == 0);
	for (int e = 0; e < gi.experts; e++)
		offs[e] = (int32_t)(m += cnt[e]);
	m = round_m(rt, gi.layer, m + pad);
	if (precc_rt_group_sizes(rt, g, m, &gs)) {
		fprintf(stderr, "group %s at M=%ld: %s\n", gi.name, m, precc_rt_last_error());
		failures++;
		return;
	}
	long n = gi.n, k = gi.k, E = gi.experts;
	uint16_t *x = fill(m * k, 2.0f, 0), *w = fill(E * n * k, 0.5f, n * k),
	         *dy = fill(m * n, 0.01f, 0);
	/* the rows of no expert: zeros (they share the last expert's last
	 * token block where the recipe scales tokens in blocks) */
	memset(x + (size_t)offs[E - 1] * k, 0, (size_t)(m - offs[E - 1]) * k * 2);
	memset(dy + (size_t)offs[E - 1] * n, 0, (size_t)(m - offs[E - 1]) * n * 2);
	size_t ysz = (size_t)m * n * eb(gs.y_format), dwsz = (size_t)(E * n * k) * eb(gs.dw_format);
	size_t dxsz = gi.grouped[1] ? (size_t)m * k * eb(gs.dx_format) : 0;
	/* a group without a grouped wgrad: no dW from the group */
	char *y = zalloc(ysz), *dw = gi.grouped[2] ? zalloc(dwsz) : NULL;
	char *dx = gi.grouped[1] ? zalloc(dxsz) : NULL;
	Regions r;
	regions(&r, &gs);
	memset(y, 0x5a, ysz);   /* the padding rows must become 0 */
	if (dx)
		memset(dx, 0x5a, dxsz);   /* and dX's */
	if (precc_rt_forward_grouped(rt, g, m, offs, (int)E, x, w, y, r.saved, r.state, r.work, 1,
	                             NULL) ||
	    precc_rt_backward_grouped(rt, g, m, offs, (int)E, x, w, dy, dx, dw, NULL, r.saved,
	                              r.state, r.work, 1, NULL)) {
		fprintf(stderr, "group %s: %s\n", gi.name, precc_rt_last_error());
		failures++;
		goto out;
	}
	size_t yrow = (size_t)n * eb(gs.y_format), dwe = (size_t)(n * k) * eb(gs.dw_format);
	size_t dxrow = (size_t)k * eb(gs.dx_format);
	for (int e = 0, r0 = 0; e < E; r0 = offs[e++]) {
		long c = cnt[e];
		int l = precc_rt_group_expert_layer(rt, g, e);
		CHECK(l >= 0);
		if (!c) {   /* no rows: dW_e = 0 */
			for (size_t b = 0; dw && b < dwe; b++)
				if (dw[(size_t)e * dwe + b]) {
					fprintf(stderr, "group %s: expert %d has no tokens, its dW is not 0\n",
					        gi.name, e);
					failures++;
					break;
				}
			continue;
		}
		/* its own layer on its rows, padded with zero rows to the
		 * layer's M multiple (as its caller would) */
		long cm = round_m(rt, l, c);
		precc_layer_sizes es;
		if (precc_rt_layer_sizes(rt, l, cm, &es)) {
			fprintf(stderr, "expert %d at M=%ld: %s\n", e, cm, precc_rt_last_error());
			failures++;
			continue;
		}
		Regions er;
		regions(&er, &es);
		/* (the expert's own dW format: a group without wgrad has none) */
		char *ey = zalloc((size_t)cm * yrow), *edw = zalloc((size_t)(n * k) * eb(es.dw_format));
		char *edx = dx ? zalloc((size_t)cm * (size_t)k * eb(es.dx_format)) : NULL;
		uint16_t *ex = zalloc((size_t)(cm * k) * 2), *edy = zalloc((size_t)(cm * n) * 2);
		const uint16_t *ew = w + (size_t)e * n * k;
		memcpy(ex, x + (size_t)r0 * k, (size_t)(c * k) * 2);
		memcpy(edy, dy + (size_t)r0 * n, (size_t)(c * n) * 2);
		if (precc_rt_forward(rt, l, cm, ex, ew, NULL, ey, er.saved, er.state, er.work, 1, NULL) ||
		    precc_rt_backward(rt, l, cm, ex, ew, edy, edx, edw, NULL, er.saved, er.state,
		                      er.work, 1, NULL)) {
			fprintf(stderr, "expert %d (%ld tokens): %s\n", e, c, precc_rt_last_error());
			failures++;
		} else {
			if (memcmp(ey, y + (size_t)r0 * yrow, (size_t)c * yrow)) {
				fprintf(stderr, "group %s: expert %d (%ld tokens): y differs from its own "
				        "layer's\n", gi.name, e, c);
				failures++;
			}
			if (dx && (es.dx_format != gs.dx_format ||
			           memcmp(edx, dx + (size_t)r0 * dxrow, (size_t)c * dxrow))) {
				fprintf(stderr, "group %s: expert %d (%ld tokens): dX differs from its own "
				        "layer's\n", gi.name, e, c);
				failures++;
			}
			if (dw && memcmp(edw, dw + (size_t)e * dwe, dwe)) {
				fprintf(stderr, "group %s: expert %d (%ld tokens): dW differs from its own "
				        "layer's\n", gi.name, e, c);
				failures++;
			}
			compared++;
		}
		free(ey), free(edw), free(edx), free(ex), free(edy);
		regions_free(&er);
	}
	for (size_t b = (size_t)offs[E - 1] * yrow; b < ysz; b++)
		if (y[b]) {
			fprintf(stderr, "group %s: padding row %zu of y is not 0\n", gi.name,
			        b / yrow);
			failures++;
			break;
		}
	for (size_t b = dx ? (size_t)offs[E - 1] * dxrow : dxsz; b < dxsz; b++)
		if (dx[b]) {
			fprintf(stderr, "group %s: padding row %zu of dX is not 0\n", gi.name,
			        b / dxrow);
			failures++;
			break;
		}
out:
	free(x), free(w), free(dy), free(y), free(dw), free(dx);
	regions_free(&r);
}

/* bf16 only: every row lands exactly once, in its own expert. */
static void check_rows_once(precc_rt *rt, int g, const int *cnt)
{
	precc_group_info gi;
	precc_layer_sizes gs;
	int32_t offs[256] __attribute__((aligned(16)));   /* the runtime's buffer alignment */
	long m = 0;

	CHECK(precc_rt_group_info(rt, g, &gi) == 0);
	for (int e = 0; e < gi.experts; e++)
		offs[e] = (int32_t)(m += cnt[e]);
	m = round_m(rt, gi.layer, m);
	CHECK(precc_rt_group_sizes(rt, g, m, &gs) == 0);
	if (gs.y_format != PRECC_BF16 || gs.dw_format != PRECC_BF16 || !gi.grouped[2])
		return;
	/* (a tensorwise activation scale per expert, {gx*}, is fmax / amax:
	 * the markers' codes are not exact, as they are under bf16 and the
	 * power-of-two MX and blockwise scales) */
	for (int i = 0; i < precc_rt_buffer_count(rt, gi.layer); i++) {
		precc_buffer_info bi;
		if (precc_rt_buffer_info(rt, gi.layer, i, m, &bi) == 0 && strstr(bi.type, "{gx*}"))
			return;
	}
	long n = gi.n, k = gi.k, E = gi.experts, d = n < k ? n : k;
	uint16_t *x = zalloc((size_t)(m * k) * 2), *w = zalloc((size_t)(E * n * k) * 2),
	         *dy = zalloc((size_t)(m * n) * 2), *y = zalloc((size_t)(m * n) * 2),
	         *dw = zalloc((size_t)(E * n * k) * 2), *dx = zalloc((size_t)(m * k) * 2);
	int with_dx = gi.grouped[1] && gs.dx_format == PRECC_BF16;
	for (long r = 0; r < offs[E - 1]; r++) {
		x[r * k + r % d] = bf16((float)(1 + r % 7));   /* a marker per row */
		dy[r * n + r % d] = bf16((float)(1 + r % 5));
	}
	for (long e = 0; e < E; e++)
		for (long i = 0; i < d; i++)
			w[(e * n + i) * k + i] = bf16((float)(e + 1));
	Regions r;
	regions(&r, &gs);
	CHECK(precc_rt_forward_grouped(rt, g, m, offs, (int)E, x, w, y, r.saved, r.state, r.work,
	                               1, NULL) == 0);
	CHECK(precc_rt_backward_grouped(rt, g, m, offs, (int)E, x, w, dy, with_dx ? dx : NULL, dw,
	                                NULL, r.saved, r.state, r.work, 1, NULL) == 0);
	int bad = 0;
	for (long row = 0, e = 0; row < offs[E - 1]; row++) {
		while (row >= offs[e])
			e++;
		for (long i = 0; i < n; i++) {
			float want = i == row % d ? (float)((e + 1) * (1 + row % 7)) : 0.0f;
			bad += precc_decode(PRECC_BF16, y[row * n + i]) != want;
		}
		for (long j = 0; with_dx && j < k; j++) {   /* dX = dY·W_e = (e+1)·dY */
			float want = j == row % d ? (float)((e + 1) * (1 + row % 5)) : 0.0f;
			bad += precc_decode(PRECC_BF16, dx[row * k + j]) != want;
		}
	}
	for (long e = 0; e < E; e++) {
		double sum = 0;   /* dW_e = Σ dYᵀx over its rows: the markers' products */
		for (long i = 0; i < n * k; i++)
			sum += precc_decode(PRECC_BF16, dw[e * n * k + i]);
		long want = 0;
		for (long row = e ? offs[e - 1] : 0; row < offs[e]; row++)
			want += (1 + row % 5) * (1 + row % 7);
		bad += sum != (double)want;
	}
	if (bad) {
		fprintf(stderr, "group %s: %d rows or experts did not get exactly their tokens\n",
		        gi.name, bad);
		failures++;
	}
	free(x), free(w), free(dy), free(y), free(dw), free(dx);
	regions_free(&r);
}

/* A refused call: -1, the message has `want`, and y is untouched. */
static void refused(precc_rt *rt, int g, long m, const int32_t *offs, int noffs, int with_dx,
                    const char *want)
{
	precc_group_info gi;
	precc_layer_sizes gs;
	CHECK(precc_rt_group_info(rt, g, &gi) == 0);
	CHECK(precc_rt_group_sizes(rt, g, m, &gs) == 0);
	long n = gi.n, k = gi.k, E = gi.experts;
	uint16_t *x = fill(m * k, 1.0f, 0), *w = fill(E * n * k, 1.0f, 0), *dy = fill(m * n, 1.0f, 0);
	size_t ysz = (size_t)(m * n) * eb(gs.y_format);
	char *y = zalloc(ysz), *dx = zalloc((size_t)(m * k) * 2), *dw = zalloc((size_t)(E * n * k) * 4);
	Regions r;
	regions(&r, &gs);
	memset(y, 0x5a, ysz);
	int rc = with_dx
	       ? precc_rt_backward_grouped(rt, g, m, offs, noffs, x, w, dy, dx, dw, NULL, r.saved,
	                                   r.state, r.work, 1, NULL)
	       : precc_rt_forward_grouped(rt, g, m, offs, noffs, x, w, y, r.saved, r.state, r.work,
	                                  1, NULL);
	CHECK(rc == -1);
	if (!strstr(precc_rt_last_error(), want)) {
		fprintf(stderr, "refused: want \"%s\" in \"%s\"\n", want, precc_rt_last_error());
		failures++;
	}
	for (size_t b = 0; b < ysz; b++)
		if ((unsigned char)y[b] != 0x5a) {
			fprintf(stderr, "refused (%s): y was written\n", want);
			failures++;
			break;
		}
	free(x), free(w), free(dy), free(y), free(dx), free(dw);
	regions_free(&r);
}

/* The cuda path on the counting fake driver (fake_count.c, which checks
 * every launch against the manifest and runs nothing): the grouped calls
 * only enqueue (no allocation, synchronous copy or sync), and bad offsets,
 * which a call on device memory cannot see, are reported by
 * precc_rt_grouped_check after the fact; the count and NULL at once. */
static int test_fake(const char *dir, const char *lib)
{
	char why[512];
	void *h = dlopen(lib, RTLD_NOW);
	void (*reset)(void) = h ? (void (*)(void))dlsym(h, "fake_count_reset") : NULL;
	long (*blocking)(void) = h ? (long (*)(void))dlsym(h, "fake_count_blocking") : NULL;
	long (*launches)(void) = h ? (long (*)(void))dlsym(h, "fake_count_launches") : NULL;
	precc_rt *rt;

	CHECK(reset && blocking && launches);
	if (!reset)
		return finish("test_grouped fake");
	setenv("PRECC_LIBCUDA", lib, 1);
	if (!(rt = precc_rt_open(dir, PRECC_BACKEND_CUDA, why, sizeof why))) {
		fprintf(stderr, "%s\n", why);
		failures++;
		return finish("test_grouped fake");
	}
	for (int g = 0; g < precc_rt_group_count(rt); g++) {
		precc_group_info gi;
		precc_layer_sizes gs;
		long al, m;
		CHECK(precc_rt_group_info(rt, g, &gi) == 0);
		al = gi.token_align;
		m = round_m(rt, gi.layer, 4 * al + 37);
		CHECK(precc_rt_group_sizes(rt, g, m, &gs) == 0);
		int32_t host[8] = {(int32_t)al, (int32_t)al, (int32_t)(3 * al), (int32_t)(3 * al),
		                   (int32_t)(4 * al), (int32_t)(4 * al), (int32_t)(4 * al),
		                   (int32_t)(4 * al + 37)};
		void *st = precc_rt_malloc(rt, gs.state_bytes + 16), *sv = precc_rt_malloc(rt, gs.saved_bytes);
		void *wk = precc_rt_malloc(rt, gs.workspace_bytes);
		void *x = precc_rt_malloc(rt, (size_t)(m * gi.k) * 2);
		void *w = precc_rt_malloc(rt, (size_t)(8 * gi.n * gi.k) * 2);
		void *y = precc_rt_malloc(rt, (size_t)(m * gi.n) * 4), *dy = precc_rt_malloc(rt, (size_t)(m * gi.n) * 2);
		void *dw = precc_rt_malloc(rt, (size_t)(8 * gi.n * gi.k) * 4);
		void *dx = gi.grouped[1] ? precc_rt_malloc(rt, (size_t)(m * gi.k) * 4) : NULL;
		int32_t *offs = precc_rt_malloc(rt, sizeof host);
		CHECK(precc_rt_upload(rt, offs, host, sizeof host) == 0);
		reset();
		int rc = precc_rt_forward_grouped(rt, g, m, offs, 8, x, w, y, sv, st, wk, 1, NULL);
		if (rc)
			fprintf(stderr, "%s\n", precc_rt_last_error());
		CHECK(rc == 0);
		CHECK(precc_rt_backward_grouped(rt, g, m, offs, 8, x, w, dy, dx, dw, NULL, sv, st,
		                                wk, 1, NULL) == 0);
		printf("%s: grouped forward + backward on cuda: %ld launches (%d steps), %ld "
		       "allocations, synchronous copies or syncs\n", gi.name, launches(),
		       precc_rt_step_count(rt, gi.layer), blocking());
		CHECK(blocking() == 0 &&
		      launches() >= precc_rt_step_count(rt, gi.layer) - !gi.grouped[1]);
		CHECK(precc_rt_sync(rt, NULL) == 0);
		CHECK(precc_rt_grouped_check(rt) == 0);
		/* bad ones: the calls enqueue, the check after the sync says why */
		static const struct { int at; int32_t v; const char *want; } bad[] = {
			{3, -5, "offsets[3] = -5 is negative"},
			{5, 0, "not monotone: offsets[5] = 0"},
			{7, 1 << 30, "exceeds m_total"},
			{0, 1, "not a multiple of"},   /* expert 1 starts at row 1 */
		};
		for (int b = 0; b < 4; b++) {
			int32_t o[8];
			if (b == 3 && al == 1)
				continue;
			memcpy(o, host, sizeof o);
			o[bad[b].at] = bad[b].v;
			CHECK(precc_rt_upload(rt, offs, o, sizeof o) == 0);
			CHECK(precc_rt_forward_grouped(rt, g, m, offs, 8, x, w, y, sv, st, wk, 1,
			                               NULL) == 0);
			CHECK(precc_rt_backward_grouped(rt, g, m, offs, 8, x, w, dy, dx, dw, NULL, sv,
			                                st, wk, 1, NULL) == 0);
			CHECK(precc_rt_sync(rt, NULL) == 0);
			CHECK(precc_rt_grouped_check(rt) == -1);
			if (!strstr(precc_rt_last_error(), bad[b].want) ||
			    !strstr(precc_rt_last_error(), gi.name)) {
				fprintf(stderr, "fake: want \"%s\" in \"%s\"\n", bad[b].want,
				        precc_rt_last_error());
				failures++;
			}
			CHECK(precc_rt_grouped_check(rt) == 0);   /* reported once */
		}
		CHECK(precc_rt_forward_grouped(rt, g, m, offs, 9, x, w, y, sv, st, wk, 1, NULL) == -1);
		CHECK(strstr(precc_rt_last_error(), "9 offsets for 8 experts") != NULL);
		CHECK(precc_rt_forward_grouped(rt, g, m, NULL, 8, x, w, y, sv, st, wk, 1, NULL) == -1);
		int32_t hostoffs[8] __attribute__((aligned(16)));
		memcpy(hostoffs, host, sizeof hostoffs);
		CHECK(precc_rt_forward_grouped(rt, g, m, hostoffs, 8, x, w, y, sv, st, wk, 1,
		                               NULL) == -1);   /* host memory on cuda */
		void *ptrs[] = {st, sv, wk, x, w, y, dy, dw, offs, dx};
		for (int i = 0; i < 10; i++)
			if (ptrs[i])
				precc_rt_free(rt, ptrs[i]);
	}
	precc_rt_close(rt);
	return finish("test_grouped fake");
}

int main(int argc, char **argv)
{
	char why[512];
	precc_rt *rt;

	if (argc == 4 && !strcmp(argv[1], "fake"))
		return test_fake(argv[2], argv[3]);
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: test_grouped DIR [TARGET] | fake DIR LIB\n");
		return 2;
	}
	/* TARGET: that target's layers and groups (target_groups) */
	if (!(rt = precc_rt_open_backend(PRECC_BACKEND_CPU, why, sizeof why)) ||
	    precc_rt_load_target(rt, argv[1], argc == 3 ? argv[2] : NULL)) {
		fprintf(stderr, "%s\n", rt ? precc_rt_last_error() : why);
		return 1;
	}
	int ng = precc_rt_group_count(rt);
	CHECK(ng > 0);
	for (int g = 0; g < ng; g++) {
		precc_group_info gi;
		CHECK(precc_rt_group_info(rt, g, &gi) == 0);
		CHECK(precc_rt_group_find(rt, gi.name) == g);
		CHECK(gi.experts == 8);
		/* this block's recipes group fprop and dgrad or wgrad */
		CHECK(gi.grouped[0] && (gi.grouped[1] || gi.grouped[2]));
		CHECK(gi.layer == precc_rt_layer_count(rt) + g);
		printf("group %s: %d experts, [%ld, %ld], gemms fprop%s%s, token_align %ld "
		       "(forward %ld)\n", gi.name, gi.experts, gi.n, gi.k,
		       gi.grouped[1] ? " dgrad" : "", gi.grouped[2] ? " wgrad" : "", gi.token_align,
		       gi.token_align_fwd);
		/* zero-token experts, one token, unaligned counts; where the wgrad
		 * scales tokens in blocks, starts on blocks (the last count odd) */
		static const int free_cnt[8] = {130, 0, 1, 128, 37, 5, 3, 60};
		static const int blk_cnt[8] = {128, 0, 256, 128, 0, 128, 384, 37};
		const int *cnt = gi.token_align > 1 ? blk_cnt : free_cnt;
		check_group(rt, g, cnt, 0);
		check_group(rt, g, cnt, 9);   /* rows of no expert after the last */
		static const int one[8] = {0, 0, 0, 1, 0, 0, 0, 0};
		check_group(rt, g, one, 0);   /* one token in all */
		check_rows_once(rt, g, cnt);

		/* bad offsets, refused before anything runs */
		int32_t ok[8] __attribute__((aligned(16))), o[8] __attribute__((aligned(16)));
		long m = 0;
		for (int e = 0; e < 8; e++)
			ok[e] = (int32_t)(m += cnt[e]);
		m = round_m(rt, gi.layer, m);
		refused(rt, g, m, ok, 7, 0, "7 offsets for 8 experts");
		refused(rt, g, m, NULL, 8, 0, "offsets is NULL");
		int32_t nine[12] __attribute__((aligned(16)));
		memcpy(nine + 1, ok, sizeof ok);
		refused(rt, g, m, nine + 1, 8, 0, "is not 16-byte aligned");
		memcpy(o, ok, sizeof o), o[2] = -1;
		refused(rt, g, m, o, 8, 0, "offsets[2] = -1 is negative");
		memcpy(o, ok, sizeof o), o[5] = o[4] - 1;
		refused(rt, g, m, o, 8, 0, "offsets are not monotone: offsets[5]");
		memcpy(o, ok, sizeof o), o[6] = o[7] = (int32_t)m + 1;
		refused(rt, g, m, o, 8, 0, "exceeds m_total");
		if (!gi.grouped[1])   /* dgrad per expert: each expert's own layer */
			refused(rt, g, m, ok, 8, 1, "dx given, but the group's dgrad is not grouped");
		if (gi.token_align > 1) {
			memcpy(o, ok, sizeof o), o[0] = 100;   /* expert 2 then starts at 100 */
			char want[64];
			snprintf(want, sizeof want, "not a multiple of %ld", gi.token_align);
			precc_layer_sizes gs;
			CHECK(precc_rt_group_sizes(rt, g, m, &gs) == 0);
			/* the forward alone (m-grouped, rows follow the tokens) takes it
			 * when only the wgrad scales tokens in blocks */
			if (gi.token_align_fwd == 1) {
				uint16_t *x = fill(m * gi.k, 1.0f, 0), *w = fill(8 * gi.n * gi.k, 1.0f, 0);
				char *y = zalloc((size_t)(m * gi.n) * eb(gs.y_format));
				Regions r;
				regions(&r, &gs);
				CHECK(precc_rt_forward_grouped(rt, g, m, o, 8, x, w, y, r.saved, r.state,
				                               r.work, 1, NULL) == 0);
				uint16_t *dy = fill(m * gi.n, 1.0f, 0);
				char *dw = zalloc((size_t)(8 * gi.n * gi.k) * eb(gs.dw_format));
				CHECK(precc_rt_backward_grouped(rt, g, m, o, 8, x, w, dy, NULL, dw, NULL,
				                                r.saved, r.state, r.work, 1, NULL) == -1);
				CHECK(strstr(precc_rt_last_error(), want) != NULL);
				free(x), free(w), free(y), free(dy), free(dw);
				regions_free(&r);
			} else
				refused(rt, g, m, o, 8, 0, want);
		}
		/* the plain layer calls refuse the group's step */
		precc_layer_sizes gs;
		CHECK(precc_rt_layer_sizes(rt, gi.layer, m, &gs) == 0);
		Regions r;
		regions(&r, &gs);
		uint16_t *x = fill(m * gi.k, 1.0f, 0), *w = fill(8 * gi.n * gi.k, 1.0f, 0);
		char *y = zalloc((size_t)(m * gi.n) * eb(gs.y_format));
		CHECK(precc_rt_forward(rt, gi.layer, m, x, w, NULL, y, r.saved, r.state, r.work, 0,
		                       NULL) == -1);
		CHECK(strstr(precc_rt_last_error(), "precc_rt_forward_grouped") != NULL);
		free(x), free(w), free(y);
		regions_free(&r);
	}
	CHECK(precc_rt_grouped_check(rt) == 0);
	CHECK(precc_rt_group_info(rt, ng, &(precc_group_info){0}) == -1);
	printf("%d experts compared with their own layers\n", compared);
	CHECK(compared > 0);
	precc_rt_close(rt);
	return finish("test_grouped");
}
