/*
 * test_layer.c — the layer API (runtime/layer.c): forward, backward and
 * commit on caller-owned state / saved / workspace regions, against
 * precc_rt_run_layer on the same plan.
 *
 *   test_layer DIR [delayed]   DIR: what `precc build` wrote (tiny model)
 *   test_layer refuse INPUTS   a hand-written manifest it cannot cut
 *   test_layer fake DIR LIB    the cuda path on a fake driver that counts
 *                              its calls (fake_count.c): forward, backward
 *                              and commit neither allocate nor synchronize
 *   test_layer main_grad ACC F32 [LIB]
 *                              ACC's wgrad accumulates dW into main_grad in
 *                              its epilogue (output.accumulate), F32 is the
 *                              same recipe writing dW in f32: on cpu,
 *                              main_grad after backward == fl(main_grad +
 *                              dW of F32) bit for bit, twice; with LIB (the
 *                              counting fake driver) main_grad on cuda
 *                              only enqueues
 *
 * Per layer, two training steps, each forward + backward + commit vs one
 * run_layer on the bound buffers: y, dx, dw and every state byte equal,
 * bit for bit. With `delayed` (a delayed-scaling recipe): stepping through
 * the plan with precc_rt_run_step leaves x.scale at its initial 1 (it
 * commits nothing); precc_rt_commit_buffers then gives run_layer's scale,
 * which is fp8 max / amax(x) = 448 / 5 = 89.6 for an x whose largest
 * magnitude is 5. Also: main_grad accumulation, a NULL dx skipping the
 * dgrad GEMM, the region checks, and the sizes query.
 */
#include <math.h>
#include <stdint.h>
#include <dlfcn.h>
#include <unistd.h>

#include "rtcheck.h"
#include "precc/precc_rt.h"
#include "precc/numerics.h"
#include "precc/interp.h"

static uint64_t rng = 0x5eed;
static uint32_t next(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng >> 33);
}

/* n elements of format f, |v| <= amax, with one element exactly amax. */
static void *fill(precc_format f, long n, float amax)
{
	size_t es = precc_interp_elem_bytes(f);
	char *p = calloc((size_t)n, es);

	for (long i = 0; i < n; i++) {
		float v = ((float)(next() % 20001) - 10000.0f) / 10000.0f * amax * 0.9f;
		uint32_t c = precc_encode(f, i == n / 3 ? -amax : v, PRECC_RNE, true, 0);
		memcpy(p + (size_t)i * es, &c, es);
	}
	return p;
}

static int find_buf(precc_rt *rt, int l, const char *name)
{
	for (int i = 0; i < precc_rt_buffer_count(rt, l); i++) {
		precc_buffer_info bi;
		if (precc_rt_buffer_info(rt, l, i, 64, &bi) == 0 && strcmp(bi.name, name) == 0)
			return i;
	}
	return -1;
}

static size_t bytes_of(precc_rt *rt, int l, int i, long m)
{
	precc_buffer_info bi;
	return precc_rt_buffer_info(rt, l, i, m, &bi) ? 0 : bi.bytes;
}

static void *zalloc(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, n ? n : 1))
		abort();
	memset(p, 0, n ? n : 1);
	return p;
}

static float buf_f32(void **buf, int i) { float v; memcpy(&v, buf[i], 4); return v; }

/* One layer: forward/backward/commit == run_layer, over two steps. */
static void test_one_layer(precc_rt *rt, int l, long m, int delayed)
{
	precc_layer_sizes sz;
	int nb = precc_rt_buffer_count(rt, l);
	const char *fqn = precc_rt_layer_name(rt, l);

	if (precc_rt_layer_sizes(rt, l, m, &sz)) {
		fprintf(stderr, "%s: %s\n", fqn, precc_rt_last_error());
		CHECK(0);
		return;
	}
	size_t ybytes = (size_t)m * sz.n * precc_interp_elem_bytes(sz.y_format);
	size_t dxbytes = (size_t)m * sz.k * precc_interp_elem_bytes(sz.dx_format);
	size_t dwbytes = (size_t)sz.n * sz.k * precc_interp_elem_bytes(sz.dw_format);
	void *x = fill(sz.x_format, m * sz.k, 5.0f);
	void *w = fill(sz.w_format, sz.n * sz.k, 0.25f);
	void *dy = fill(sz.dy_format, m * sz.n, 0.01f);
	/* A: the layer API; B: run_layer on the same layout, its own regions */
	void *stA = zalloc(sz.state_bytes), *svA = zalloc(sz.saved_bytes);
	void *wkA = zalloc(sz.workspace_bytes);
	void *stB = zalloc(sz.state_bytes), *svB = zalloc(sz.saved_bytes);
	void *wkB = zalloc(sz.workspace_bytes);
	void *yA = zalloc(ybytes), *dxA = zalloc(dxbytes), *dwA = zalloc(dwbytes);
	void *yB = zalloc(ybytes), *dxB = zalloc(dxbytes), *dwB = zalloc(dwbytes);
	void **bufB = calloc((size_t)nb, sizeof *bufB);
	precc_layer_ptrs pB = {x, w, NULL, yB, dy, dxB, dwB, stB, svB, wkB};

	CHECK(sz.k > 0 && sz.n > 0);
	CHECK(precc_rt_layer_state_init(rt, l, stA) == 0);
	CHECK(precc_rt_layer_state_init(rt, l, stB) == 0);
	CHECK(precc_rt_layer_bind(rt, l, m, &pB, bufB) == 0);
	for (int step = 0; step < 2; step++) {
		uint64_t seed = 77 + (uint64_t)step;
		int rcf = precc_rt_forward(rt, l, m, x, w, NULL, yA, svA, stA, wkA, seed, NULL);
		int rcb = precc_rt_backward(rt, l, m, sz.backward_reads_x ? x : NULL,
		                            sz.backward_reads_w ? w : NULL, dy, dxA,
		                            dwA, NULL, svA, stA, wkA, seed, NULL);
		int rcc = precc_rt_commit(rt, l, m, svA, stA, NULL);
		if (rcf || rcb || rcc)
			fprintf(stderr, "%s: %s\n", fqn, precc_rt_last_error());
		CHECK(rcf == 0 && rcb == 0 && rcc == 0);
		CHECK(precc_rt_run_layer(rt, l, m, bufB, seed, NULL) == 0);
		CHECK(memcmp(yA, yB, ybytes) == 0);
		CHECK(memcmp(dxA, dxB, dxbytes) == 0);
		CHECK(memcmp(dwA, dwB, dwbytes) == 0);
		CHECK(memcmp(stA, stB, sz.state_bytes) == 0);
	}
	/* what backward reads of saved is what run_layer computed */
	for (int i = 0; i < nb; i++) {
		precc_place pl;
		size_t off;
		CHECK(precc_rt_buffer_place(rt, l, i, m, &pl, &off) == 0);
		if (pl == PRECC_PLACE_SAVED)
			CHECK(memcmp((char *)svA + off, bufB[i], bytes_of(rt, l, i, m)) == 0);
		if (pl == PRECC_PLACE_STATE)
			CHECK(bufB[i] == (char *)stB + off);
	}
	/* main_grad: dW added in fp32, twice; a NULL dx skips dgrad */
	{
		float *mg = zalloc((size_t)sz.n * sz.k * 4);
		void *dxC = zalloc(dxbytes);
		int ok = 1;
		memset(dxC, 0x5a, dxbytes);
		for (int r = 0; r < 2; r++) {
			CHECK(precc_rt_forward(rt, l, m, x, w, NULL, yA, svA, stA, wkA, 9, NULL) == 0);
			CHECK(precc_rt_backward(rt, l, m, x, w, dy, r ? NULL : dxC, NULL, mg,
			                        svA, stA, wkA, 9, NULL) == 0);
		}
		CHECK(precc_rt_forward(rt, l, m, x, w, NULL, yA, svA, stA, wkA, 9, NULL) == 0);
		CHECK(precc_rt_backward(rt, l, m, x, w, dy, NULL, dwA, NULL, svA, stA,
		                        wkA, 9, NULL) == 0);
		for (long i = 0; i < sz.n * sz.k; i++) {
			uint32_t c = 0;
			memcpy(&c, (char *)dwA + (size_t)i * precc_interp_elem_bytes(sz.dw_format),
			       precc_interp_elem_bytes(sz.dw_format));
			float d = precc_decode(sz.dw_format, c);
			ok &= mg[i] == (0.0f + d) + d;
		}
		CHECK(ok);
		free(mg);
		free(dxC);
	}
	if (delayed) {
		int xs = find_buf(rt, l, "x.scale");
		void **bufC = calloc((size_t)nb, sizeof *bufC);
		void *stC = zalloc(sz.state_bytes), *svC = zalloc(sz.saved_bytes);
		void *wkC = zalloc(sz.workspace_bytes);
		precc_layer_ptrs pC = {x, w, NULL, yA, dy, dxA, dwA, stC, svC, wkC};
		CHECK(xs >= 0);
		CHECK(precc_rt_layer_state_init(rt, l, stC) == 0);
		CHECK(precc_rt_layer_bind(rt, l, m, &pC, bufC) == 0);
		CHECK(precc_rt_layer_state_init(rt, l, stB) == 0);
		CHECK(precc_rt_run_layer(rt, l, m, bufB, 5, NULL) == 0);
		for (int s = 0; s < precc_rt_step_count(rt, l); s++)
			CHECK(precc_rt_run_step(rt, l, s, m, bufC, 5, NULL) == 0);
		/* the report: step by step, nothing commits */
		CHECK(buf_f32(bufC, xs) == 1.0f);
		CHECK(buf_f32(bufB, xs) == 448.0f / 5.0f);
		CHECK(precc_rt_commit_buffers(rt, l, m, bufC, NULL) == 0);
		CHECK(buf_f32(bufC, xs) == 448.0f / 5.0f);
		CHECK(memcmp(stB, stC, sz.state_bytes) == 0);
		/* the phases: quantize of x in forward, the update in commit */
		int nf = 0, nc = 0;
		for (int s = 0; s < precc_rt_step_count(rt, l); s++) {
			nf += precc_rt_step_phase(rt, l, s) == 0;
			nc += precc_rt_step_phase(rt, l, s) == 2;
		}
		CHECK(nf >= 2 && nc == 1);
		CHECK(sz.has_state && !sz.backward_reads_x);
		free(bufC);
		free(stC);
		free(svC);
		free(wkC);
	}
	/* region checks */
	if (sz.saved_bytes) {
		CHECK(precc_rt_forward(rt, l, m, x, w, NULL, yA, NULL, stA, wkA, 1, NULL) == -1);
		CHECK(strstr(precc_rt_last_error(), "saved is NULL") != NULL);
	}
	CHECK(precc_rt_forward(rt, l, m, x, w, NULL, yA, (char *)svA + 8, stA, wkA, 1, NULL) == -1);
	CHECK(strstr(precc_rt_last_error(), "not 16-byte aligned") != NULL);
	CHECK(precc_rt_forward(rt, l, m, NULL, w, NULL, yA, svA, stA, wkA, 1, NULL) == -1);
	CHECK(strstr(precc_rt_last_error(), "'x' is NULL") != NULL);
	CHECK(precc_rt_forward(rt, l, 0, x, w, NULL, yA, svA, stA, wkA, 1, NULL) == -1);
	CHECK(strstr(precc_rt_last_error(), "M = 0") != NULL);
	free(x); free(w); free(dy);
	free(stA); free(svA); free(wkA); free(stB); free(svB); free(wkB);
	free(yA); free(dxA); free(dwA); free(yB); free(dxB); free(dwB);
	free(bufB);
}

/* The bulk commit (runtime/commit_bulk.c) of every layer with state,
 * after forward + backward of each on its own saved region, against
 * precc_rt_commit per layer on a copy of the same state: the model's
 * state equal byte for byte, one launch per distinct update kernel, every
 * table row pointing into its layer's regions; and what bad arguments get. */
/* Linears that read one tensor (tiny.lua's k shares q's input, up
 * gate's): root forward, then the layer's forward on the same x either
 * plain (A) or shared with the root's saved region (B), backward and
 * commit, two steps: y, dx, dw of both layers, their state and the
 * layer's saved amaxes bit for bit equal. B's own saved region of the
 * layer starts poisoned where it aliases the root's: the shared forward
 * must not need it. wants: whether the recipe quantizes x (then shares). */
static void test_shared(precc_rt *rt, const char *root_name, const char *name, long m, int wants)
{
	int r = precc_rt_layer_find(rt, root_name), l = precc_rt_layer_find(rt, name);
	precc_layer_sizes zr, zl;

	CHECK(r >= 0 && l >= 0);
	if (r < 0 || l < 0)
		return;
	CHECK(precc_rt_layer_input_root(rt, l) == r && precc_rt_layer_input_root(rt, r) == -1);
	int nskip = precc_rt_layer_shared_steps(rt, l);
	CHECK(wants ? nskip > 0 : nskip == 0);
	if (precc_rt_layer_sizes(rt, r, m, &zr) || precc_rt_layer_sizes(rt, l, m, &zl)) {
		fprintf(stderr, "%s\n", precc_rt_last_error());
		CHECK(0);
		return;
	}
	CHECK(zr.k == zl.k);
	void *x = fill(zl.x_format, m * zl.k, 3.0f);
	void *w[2] = {fill(zr.w_format, zr.n * zr.k, 0.25f), fill(zl.w_format, zl.n * zl.k, 0.25f)};
	void *dy[2] = {fill(zr.dy_format, m * zr.n, 0.01f), fill(zl.dy_format, m * zl.n, 0.02f)};
	const precc_layer_sizes *z[2] = {&zr, &zl};
	int id[2] = {r, l};
	void *st[2][2], *sv[2][2], *y[2][2], *dx[2][2], *dw[2][2];
	size_t yb[2], dxb[2], dwb[2];
	void *wk = zalloc(zr.workspace_bytes > zl.workspace_bytes ? zr.workspace_bytes
	                                                          : zl.workspace_bytes);
	for (int i = 0; i < 2; i++) {
		yb[i] = (size_t)m * z[i]->n * precc_interp_elem_bytes(z[i]->y_format);
		dxb[i] = (size_t)m * z[i]->k * precc_interp_elem_bytes(z[i]->dx_format);
		dwb[i] = (size_t)z[i]->n * z[i]->k * precc_interp_elem_bytes(z[i]->dw_format);
		for (int v = 0; v < 2; v++) {   /* v: A plain, B shared */
			st[v][i] = zalloc(z[i]->state_bytes);
			sv[v][i] = zalloc(z[i]->saved_bytes);
			y[v][i] = zalloc(yb[i]);
			dx[v][i] = zalloc(dxb[i]);
			dw[v][i] = zalloc(dwb[i]);
			CHECK(precc_rt_layer_state_init(rt, id[i], st[v][i]) == 0);
		}
	}
	memset(sv[1][1], 0xa5, zl.saved_bytes);
	if (!wants) {   /* nothing to share: a root_saved is refused with the reason */
		CHECK(precc_rt_forward_shared(rt, l, m, x, w[1], NULL, y[1][1], sv[1][1], st[1][1], wk,
		                              1, NULL, sv[1][0]) == -1);
		CHECK(strstr(precc_rt_last_error(), "shares nothing") != NULL);
	}
	for (int step = 0; step < 2 && wants; step++) {
		uint64_t seed = 31 + (uint64_t)step;
		for (int v = 0; v < 2; v++) {
			int rc = precc_rt_forward(rt, r, m, x, w[0], NULL, y[v][0], sv[v][0], st[v][0], wk,
			                          seed, NULL);
			rc |= precc_rt_forward_shared(rt, l, m, x, w[1], NULL, y[v][1], sv[v][1], st[v][1],
			                              wk, seed, NULL, v ? sv[v][0] : NULL);
			rc |= precc_rt_backward_shared(rt, l, m, zl.backward_reads_x ? x : NULL,
			                               zl.backward_reads_w ? w[1] : NULL, dy[1], dx[v][1],
			                               dw[v][1], NULL, sv[v][1], st[v][1], wk, seed, NULL,
			                               v ? sv[v][0] : NULL);
			rc |= precc_rt_backward(rt, r, m, zr.backward_reads_x ? x : NULL,
			                        zr.backward_reads_w ? w[0] : NULL, dy[0], dx[v][0], dw[v][0],
			                        NULL, sv[v][0], st[v][0], wk, seed, NULL);
			rc |= precc_rt_commit(rt, l, m, sv[v][1], st[v][1], NULL) < 0;
			rc |= precc_rt_commit(rt, r, m, sv[v][0], st[v][0], NULL) < 0;
			if (rc)
				fprintf(stderr, "%s: %s\n", name, precc_rt_last_error());
			CHECK(rc == 0);
		}
		for (int i = 0; i < 2; i++) {
			CHECK(memcmp(y[0][i], y[1][i], yb[i]) == 0);
			CHECK(memcmp(dx[0][i], dx[1][i], dxb[i]) == 0);
			CHECK(memcmp(dw[0][i], dw[1][i], dwb[i]) == 0);
			CHECK(memcmp(st[0][i], st[1][i], z[i]->state_bytes) == 0);
		}
		/* the amaxes in the layer's own saved region, which its commit and
		 * a data-parallel reduce read (copied there from the root's) */
		for (int b = 0; b < precc_rt_buffer_count(rt, l); b++) {
			precc_buffer_info bi;
			precc_place pl;
			size_t off;
			size_t n = strlen(precc_rt_buffer_info(rt, l, b, m, &bi) ? "" : bi.name);
			if (n < 4 || strcmp(bi.name + n - 4, "amax") ||
			    precc_rt_buffer_place(rt, l, b, m, &pl, &off) || pl != PRECC_PLACE_SAVED)
				continue;
			CHECK(memcmp((char *)sv[0][1] + off, (char *)sv[1][1] + off, bi.bytes) == 0);
		}
	}
	for (int i = 0; i < 2; i++) {
		free(w[i]);
		free(dy[i]);
		for (int v = 0; v < 2; v++) {
			free(st[v][i]);
			free(sv[v][i]);
			free(y[v][i]);
			free(dx[v][i]);
			free(dw[v][i]);
		}
	}
	free(x);
	free(wk);
}

static void test_bulk_commit(precc_rt *rt)
{
	int n = precc_rt_layer_count(rt), *layers = calloc((size_t)n, sizeof *layers);
	void **sv = calloc((size_t)n, sizeof *sv), **st1 = calloc((size_t)n, sizeof *st1);
	void **st2 = calloc((size_t)n, sizeof *st2);
	size_t total = precc_rt_model_state_bytes(rt);
	char *all1 = zalloc(total), *all2 = zalloc(total);
	long m = 64;
	int nl = 0;

	CHECK(precc_rt_model_state_init(rt, all1) == 0);
	for (int l = 0; l < n; l++) {
		precc_layer_sizes sz;
		if (precc_rt_layer_sizes(rt, l, m, &sz) || !sz.has_state)
			continue;
		void *x = fill(sz.x_format, m * sz.k, 1.0f + (float)l);
		void *w = fill(sz.w_format, sz.n * sz.k, 0.25f);
		void *dy = fill(sz.dy_format, m * sz.n, 0.01f * (float)(l + 1));
		void *y = zalloc((size_t)m * sz.n * 4), *dx = zalloc((size_t)m * sz.k * 4);
		void *dw = zalloc((size_t)sz.n * sz.k * 4), *wk = zalloc(sz.workspace_bytes);
		layers[nl] = l;
		sv[nl] = zalloc(sz.saved_bytes);
		st1[nl] = all1 + precc_rt_model_state_offset(rt, l);
		st2[nl] = all2 + precc_rt_model_state_offset(rt, l);
		CHECK(precc_rt_forward(rt, l, m, x, w, NULL, y, sv[nl], st1[nl], wk, 1, NULL) == 0);
		CHECK(precc_rt_backward(rt, l, m, x, w, dy, dx, dw, NULL, sv[nl], st1[nl], wk, 1,
		                        NULL) == 0);
		nl++;
		free(x); free(w); free(dy); free(y); free(dx); free(dw); free(wk);
	}
	memcpy(all2, all1, total);
	size_t tb = precc_rt_bulk_commit_table_bytes(rt, nl, layers);
	void *table = zalloc(tb);
	CHECK(nl > 2 && tb > 0);
	/* bad input: a table too small, none, misaligned */
	CHECK(precc_rt_bulk_commit_new(rt, nl, layers, m, sv, st2, table, tb - 8) == NULL);
	CHECK(strstr(precc_rt_last_error(), "needs") != NULL);
	CHECK(precc_rt_bulk_commit_new(rt, nl, layers, m, sv, st2, NULL, tb) == NULL);
	CHECK(precc_rt_bulk_commit_new(rt, nl, layers, m, sv, st2, (char *)table + 8, tb) == NULL);
	CHECK(strstr(precc_rt_last_error(), "aligned") != NULL);
	precc_rt_bulk_commit *bc = precc_rt_bulk_commit_new(rt, nl, layers, m, sv, st2, table, tb);
	if (!bc)
		fprintf(stderr, "bulk: %s\n", precc_rt_last_error());
	CHECK(bc != NULL);
	if (bc) {
		CHECK(precc_rt_bulk_commit_layers(bc) == nl);
		CHECK(precc_rt_bulk_commit_launches(bc) == 1);   /* tiny: one update kernel */
		/* every pointer of the table in the layers' saved or state regions */
		const uint64_t *t = table;
		int inside = 0, words = (int)(tb / 8);
		for (int i = 0; i < words; i++)
			for (int j = 0; j < nl; j++) {
				precc_layer_sizes sz;
				precc_rt_layer_sizes(rt, layers[j], m, &sz);
				uintptr_t p = (uintptr_t)t[i], a = (uintptr_t)sv[j], b = (uintptr_t)st2[j];
				if ((p >= a && p < a + sz.saved_bytes) || (p >= b && p < b + sz.state_bytes)) {
					inside++;
					break;
				}
			}
		CHECK(inside == words);
		for (int i = 0; i < nl; i++)
			CHECK(precc_rt_commit(rt, layers[i], m, sv[i], st1[i], NULL) == 0);
		CHECK(precc_rt_bulk_commit_run(rt, bc, NULL) == 0);
		CHECK(memcmp(all1, all2, total) == 0);
		printf("bulk commit: %d layers, %zu table bytes, %d launch; state equal to "
		       "per-layer commits\n", nl, tb, precc_rt_bulk_commit_launches(bc));
		precc_rt_bulk_commit_free(bc);
	}
	for (int i = 0; i < nl; i++)
		free(sv[i]);
	free(sv); free(st1); free(st2); free(all1); free(all2); free(table); free(layers);
}

/* Inputs/plan's layers are quantize steps only: two outputs of the
 * forward, no weight, so they are refused (run_layer still runs them). */
static int test_refuse(const char *inputs)
{
	char path[4096], why[512];
	precc_layer_sizes sz;
	precc_rt *rt;

	snprintf(path, sizeof path, "%s/plan", inputs);
	rt = precc_rt_open(path, PRECC_BACKEND_CPU, why, sizeof why);
	CHECK(rt != NULL);
	if (!rt)
		return finish("runtime.layer.refuse");
	CHECK(precc_rt_layer_sizes(rt, 0, 128, &sz) == -1);
	CHECK_STR(precc_rt_last_error(), "plan: layer 'model.layers.0.self_attn."
	          "q_proj' cannot be run as forward/backward/commit: buffers "
	          "'x.amax' and 'x.q' would both be its y");
	CHECK(precc_rt_forward(rt, 1, 128, path, path, NULL, path, NULL, NULL,
	                       NULL, 0, NULL) == -1);
	CHECK(strstr(precc_rt_last_error(), "would both be its y") != NULL);
	CHECK(precc_rt_step_phase(rt, 0, 0) == -1);
	precc_rt_close(rt);
	return finish("runtime.layer.refuse");
}

/* On the fake driver: the layer API only enqueues (launches, async
 * memsets and copies): no allocation, no synchronous copy, no sync. */
static int test_fake(const char *dir, const char *lib)
{
	char why[512];
	void *h = dlopen(lib, RTLD_NOW);
	void (*reset)(void) = h ? (void (*)(void))dlsym(h, "fake_count_reset") : NULL;
	long (*blocking)(void) = h ? (long (*)(void))dlsym(h, "fake_count_blocking") : NULL;
	long (*launches)(void) = h ? (long (*)(void))dlsym(h, "fake_count_launches") : NULL;
	long (*queries)(void) = h ? (long (*)(void))dlsym(h, "fake_count_pointer_queries") : NULL;
	precc_rt *rt;

	CHECK(reset && blocking && launches && queries);
	if (!reset)
		return finish("runtime.layer.fake");
	setenv("PRECC_LIBCUDA", lib, 1);
	rt = precc_rt_open(dir, PRECC_BACKEND_CUDA, why, sizeof why);
	if (!rt)
		fprintf(stderr, "%s\n", why);
	CHECK(rt != NULL);
	if (!rt)
		return finish("runtime.layer.fake");
	for (int l = 0; l < 2; l++) {
		precc_layer_sizes sz;
		long m = 128;
		CHECK(precc_rt_layer_sizes(rt, l, m, &sz) == 0);
		void *st = precc_rt_malloc(rt, sz.state_bytes), *sv = precc_rt_malloc(rt, sz.saved_bytes);
		void *wk = precc_rt_malloc(rt, sz.workspace_bytes);
		void *x = precc_rt_malloc(rt, (size_t)(m * sz.k) * 4), *w = precc_rt_malloc(rt, (size_t)(sz.n * sz.k) * 4);
		void *y = precc_rt_malloc(rt, (size_t)(m * sz.n) * 4), *dy = precc_rt_malloc(rt, (size_t)(m * sz.n) * 4);
		void *dx = precc_rt_malloc(rt, (size_t)(m * sz.k) * 4), *dw = precc_rt_malloc(rt, (size_t)(sz.n * sz.k) * 4);
		float mg[16];
		CHECK(precc_rt_layer_state_init(rt, l, st) == 0);
		reset();
		int rcf = precc_rt_forward(rt, l, m, x, w, NULL, y, sv, st, wk, 1, NULL);
		if (rcf)
			fprintf(stderr, "%s\n", precc_rt_last_error());
		CHECK(rcf == 0);
		/* the checks ask the driver once per allocation the forward
		 * touches (x, w, y, saved, state, workspace), not once per
		 * buffer of each step (rt_seen): the host cost of a call */
		printf("%s: forward: %ld pointer queries, %ld launches\n",
		       precc_rt_layer_name(rt, l), queries(), launches());
		CHECK(queries() >= 1 && queries() <= 6);
		CHECK(precc_rt_backward(rt, l, m, x, w, dy, dx, dw, NULL, sv, st, wk, 1, NULL) == 0);
		CHECK(precc_rt_commit(rt, l, m, sv, st, NULL) == 0);
		printf("%s: forward + backward + commit on cuda: %ld launches, %ld "
		       "allocations, synchronous copies or syncs\n",
		       precc_rt_layer_name(rt, l), launches(), blocking());
		CHECK(launches() >= precc_rt_step_count(rt, l) - 1 && blocking() == 0);
		/* a stream of another context (the fake's on device 1): forward,
		 * backward and commit refuse it before any launch */
		if (l == 0) {
			void *(*other)(void) = (void *(*)(void))dlsym(h, "fake_cuda_other_ctx");
			void *(*mkstream)(void *) = (void *(*)(void *))dlsym(h, "fake_cuda_stream");
			CHECK(other && mkstream);
			void *theirs = other && mkstream ? mkstream(other()) : NULL;
			long before = launches();
			CHECK(theirs && precc_rt_forward(rt, l, m, x, w, NULL, y, sv, st, wk, 1, theirs) == -1);
			CHECK(strstr(precc_rt_last_error(), " belongs to another context (") != NULL);
			CHECK(precc_rt_backward(rt, l, m, x, w, dy, dx, dw, NULL, sv, st, wk, 1, theirs) == -1);
			CHECK(strstr(precc_rt_last_error(), " belongs to another context (") != NULL);
			CHECK(!sz.has_state || precc_rt_commit(rt, l, m, sv, st, theirs) == -1);
			CHECK(launches() == before);
		}
		/* main_grad is host code: refused on cuda, with the reason */
		CHECK(precc_rt_backward(rt, l, m, x, w, dy, dx, NULL, mg, sv, st, wk, 1, NULL) == -1);
		CHECK(strstr(precc_rt_last_error(), "main_grad epilogue") != NULL);
		void *b[] = {st, sv, wk, x, w, y, dy, dx, dw};
		for (int i = 0; i < 9; i++)
			precc_rt_free(rt, b[i]);
	}
	/* the bulk commit of both layers: one launch of the bulk entry, a CTA
	 * per layer, its params the table and the row count; nothing blocks */
	{
		const unsigned *(*last)(void) = (const unsigned *(*)(void))dlsym(h, "fake_cuda_last_launch");
		void (*record)(int) = (void (*)(int))dlsym(h, "fake_cuda_record_params");
		const uint64_t *(*params)(void) = (const uint64_t *(*)(void))dlsym(h, "fake_cuda_last_params");
		int layers[2] = {0, 1};
		void *sv[2], *st[2], *mem[16];
		int nm = 0;
		long m = 128;
		CHECK(last && record && params);
		for (int l = 0; l < 2 && last; l++) {
			precc_layer_sizes sz;
			CHECK(precc_rt_layer_sizes(rt, l, m, &sz) == 0);
			mem[nm++] = st[l] = precc_rt_malloc(rt, sz.state_bytes);
			mem[nm++] = sv[l] = precc_rt_malloc(rt, sz.saved_bytes);
			void *wk = mem[nm++] = precc_rt_malloc(rt, sz.workspace_bytes);
			void *x = mem[nm++] = precc_rt_malloc(rt, (size_t)(m * sz.k) * 4);
			void *w = mem[nm++] = precc_rt_malloc(rt, (size_t)(sz.n * sz.k) * 4);
			void *y = mem[nm++] = precc_rt_malloc(rt, (size_t)(m * sz.n) * 4);
			CHECK(precc_rt_layer_state_init(rt, l, st[l]) == 0);
			CHECK(precc_rt_forward(rt, l, m, x, w, NULL, y, sv[l], st[l], wk, 1, NULL) == 0);
		}
		size_t tb = precc_rt_bulk_commit_table_bytes(rt, 2, layers);
		void *table = mem[nm++] = precc_rt_malloc(rt, tb);
		precc_rt_bulk_commit *bc = last ? precc_rt_bulk_commit_new(rt, 2, layers, m, sv, st,
		                                                            table, tb) : NULL;
		if (!bc)
			fprintf(stderr, "bulk: %s\n", precc_rt_last_error());
		CHECK(bc != NULL);
		if (bc) {
			record(2);
			reset();
			CHECK(precc_rt_bulk_commit_run(rt, bc, NULL) == 0);
			printf("bulk commit of 2 layers on cuda: %ld launch (grid %u, %u threads), %ld "
			       "blocking calls\n", launches(), last()[0], last()[3], blocking());
			CHECK(launches() == 1 && blocking() == 0 && last()[0] == 2);
			CHECK(params()[0] == (uint64_t)(uintptr_t)table && params()[1] == 2);
			precc_rt_bulk_commit_free(bc);
			record(0);
		}
		for (int i = 0; i < nm; i++)
			precc_rt_free(rt, mem[i]);
	}
	precc_rt_close(rt);
	return finish("runtime.layer.fake");
}

/* ACC accumulates dW into main_grad in the wgrad kernel; F32 computes the
 * same dW in f32. main_grad after one backward is fl(mg0 + dW), after
 * two fl(fl(mg0 + dW) + dW), bit for bit, with dW from F32. */
static int test_main_grad(const char *acc, const char *f32, const char *lib)
{
	char why[512];
	precc_rt *ra = precc_rt_open(acc, PRECC_BACKEND_CPU, why, sizeof why);
	precc_rt *rf = ra ? precc_rt_open(f32, PRECC_BACKEND_CPU, why, sizeof why) : NULL;
	const char *fqn = "model.layers.0.mlp.gate_proj";

	if (!ra || !rf) {
		fprintf(stderr, "%s\n", why);
		CHECK(0);
		return finish("runtime.layer.main_grad");
	}
	int la = precc_rt_layer_find(ra, fqn), lf = precc_rt_layer_find(rf, fqn);
	long m = 128;
	precc_layer_sizes sa, sf;
	CHECK(la >= 0 && lf >= 0);
	CHECK(precc_rt_layer_sizes(ra, la, m, &sa) == 0 && precc_rt_layer_sizes(rf, lf, m, &sf) == 0);
	CHECK(sa.dw_format == PRECC_FP32 && sf.dw_format == PRECC_FP32);
	/* the main_grad buffer's place says where it comes from */
	int mgb = find_buf(ra, la, "main_grad");
	precc_place pl;
	size_t off;
	CHECK(mgb >= 0 && precc_rt_buffer_place(ra, la, mgb, m, &pl, &off) == 0 &&
	      pl == PRECC_PLACE_MAIN_GRAD);
	long n = sa.n * sa.k;
	void *x = fill(sa.x_format, m * sa.k, 5.0f), *w = fill(sa.w_format, n, 0.25f);
	void *dy = fill(sa.dy_format, m * sa.n, 0.01f);
	float *mg0 = fill(PRECC_FP32, n, 3.0f);
	float *mg = zalloc((size_t)n * 4), *dw = zalloc((size_t)n * 4);
	void *dx = zalloc((size_t)(m * sa.k) * precc_interp_elem_bytes(sa.dx_format));
	void *y = zalloc((size_t)(m * sa.n) * precc_interp_elem_bytes(sa.y_format));
	void *st[2] = {zalloc(sa.state_bytes), zalloc(sf.state_bytes)};
	void *sv[2] = {zalloc(sa.saved_bytes), zalloc(sf.saved_bytes)};
	void *wk[2] = {zalloc(sa.workspace_bytes), zalloc(sf.workspace_bytes)};

	memcpy(mg, mg0, (size_t)n * 4);
	CHECK(precc_rt_forward(rf, lf, m, x, w, NULL, y, sv[1], st[1], wk[1], 3, NULL) == 0);
	CHECK(precc_rt_backward(rf, lf, m, x, w, dy, dx, dw, NULL, sv[1], st[1], wk[1], 3, NULL) == 0);
	for (int r = 0; r < 2; r++) {
		int ok = 1, nz = 0;
		CHECK(precc_rt_forward(ra, la, m, x, w, NULL, y, sv[0], st[0], wk[0], 3, NULL) == 0);
		int rc = precc_rt_backward(ra, la, m, x, w, dy, r ? NULL : dx, NULL, mg, sv[0], st[0],
		                           wk[0], 3, NULL);
		if (rc)
			fprintf(stderr, "%s\n", precc_rt_last_error());
		CHECK(rc == 0);
		for (long i = 0; i < n; i++) {
			float want = r ? (mg0[i] + dw[i]) + dw[i] : mg0[i] + dw[i];
			ok &= memcmp(&mg[i], &want, 4) == 0;
			nz += dw[i] != 0.0f;
		}
		CHECK(ok && nz > n / 2);
	}
	/* dw with an accumulating plan: refused, main_grad untouched */
	float keep = mg[0];
	CHECK(precc_rt_backward(ra, la, m, x, w, dy, NULL, dw, mg, sv[0], st[0], wk[0], 3, NULL) == -1);
	CHECK(strstr(precc_rt_last_error(), "accumulates dW into main_grad") != NULL);
	CHECK(precc_rt_backward(ra, la, m, x, w, dy, NULL, dw, NULL, sv[0], st[0], wk[0], 3, NULL) == -1);
	/* neither: the wgrad GEMM does not run (a frozen weight) */
	CHECK(precc_rt_backward(ra, la, m, x, w, dy, dx, NULL, NULL, sv[0], st[0], wk[0], 3, NULL) == 0);
	CHECK(mg[0] == keep);
	precc_rt_close(ra);
	precc_rt_close(rf);
	if (lib) {
		/* on cuda the kernel does it: backward with main_grad only enqueues */
		void *h = dlopen(lib, RTLD_NOW);
		void (*reset)(void) = h ? (void (*)(void))dlsym(h, "fake_count_reset") : NULL;
		long (*blocking)(void) = h ? (long (*)(void))dlsym(h, "fake_count_blocking") : NULL;
		long (*launches)(void) = h ? (long (*)(void))dlsym(h, "fake_count_launches") : NULL;
		CHECK(reset && blocking && launches);
		setenv("PRECC_LIBCUDA", lib, 1);
		precc_rt *rc = reset ? precc_rt_open(acc, PRECC_BACKEND_CUDA, why, sizeof why) : NULL;
		if (!rc)
			fprintf(stderr, "%s\n", why);
		CHECK(rc != NULL);
		if (rc) {
			int l = precc_rt_layer_find(rc, fqn);
			void *b[9];
			size_t sz[9] = {sa.state_bytes, sa.saved_bytes, sa.workspace_bytes,
			                (size_t)(m * sa.k) * 4, (size_t)n * 4, (size_t)(m * sa.n) * 4,
			                (size_t)(m * sa.n) * 4, (size_t)(m * sa.k) * 4, (size_t)n * 4};
			for (int i = 0; i < 9; i++)
				b[i] = precc_rt_malloc(rc, sz[i]);
			CHECK(precc_rt_layer_state_init(rc, l, b[0]) == 0);
			CHECK(precc_rt_forward(rc, l, m, b[3], b[4], NULL, b[5], b[1], b[0], b[2], 1, NULL) == 0);
			reset();
			int r = precc_rt_backward(rc, l, m, b[3], b[4], b[6], b[7], NULL, b[8], b[1], b[0],
			                          b[2], 1, NULL);
			if (r)
				fprintf(stderr, "%s\n", precc_rt_last_error());
			CHECK(r == 0 && launches() >= 1 && blocking() == 0);
			printf("%s: backward into main_grad on cuda: %ld launches, %ld blocking calls\n",
			       fqn, launches(), blocking());
			for (int i = 0; i < 9; i++)
				precc_rt_free(rc, b[i]);
			precc_rt_close(rc);
		}
	}
	free(x); free(w); free(dy); free(mg0); free(mg); free(dw); free(dx); free(y);
	for (int i = 0; i < 2; i++)
		free(st[i]), free(sv[i]), free(wk[i]);
	return finish("runtime.layer.main_grad");
}

int main(int argc, char **argv)
{
	char why[512];
	precc_rt *rt;

	if (argc < 3 && !(argc == 2)) {
		fprintf(stderr, "usage: test_layer DIR [delayed] | refuse INPUTS\n");
		return 2;
	}
	if (strcmp(argv[1], "refuse") == 0)
		return test_refuse(argv[2]);
	if (strcmp(argv[1], "fake") == 0 && argc == 4)
		return test_fake(argv[2], argv[3]);
	if (strcmp(argv[1], "main_grad") == 0 && argc >= 4)
		return test_main_grad(argv[2], argv[3], argc > 4 ? argv[4] : NULL);
	rt = precc_rt_open(argv[1], PRECC_BACKEND_CPU, why, sizeof why);
	if (!rt) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	/* q_proj (256 -> 256) and gate_proj (256 -> 688) of block 0 */
	const char *names[] = {"model.layers.0.self_attn.q_proj",
	                       "model.layers.0.mlp.gate_proj"};
	for (int i = 0; i < 2; i++) {
		int l = precc_rt_layer_find(rt, names[i]);
		long mm = precc_rt_layer_m_multiple(rt, l);
		CHECK(l >= 0);
		if (l >= 0)
			test_one_layer(rt, l, mm > 64 ? mm : 64, argc > 2 &&
			               strcmp(argv[2], "delayed") == 0);
	}
	if (argc > 2 && strcmp(argv[2], "delayed") == 0)
		test_bulk_commit(rt);
	/* shared inputs: k reads q's x, up gate's; argv[3] "noshare": the
	 * recipe quantizes no x (bf16), so nothing is shared */
	{
		int wants = !(argc > 2 && strcmp(argv[argc - 1], "noshare") == 0);
		long mm = precc_rt_layer_m_multiple(rt, precc_rt_layer_find(rt, "model.layers.0.self_attn.k_proj"));
		test_shared(rt, "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
		            mm > 64 ? mm : 64, wants);
		test_shared(rt, "model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj", 128, wants);
	}
	/* the model's state in one buffer: the layers' regions end to end */
	{
		size_t total = precc_rt_model_state_bytes(rt), off = 0;
		char *all = malloc(total + 1), *one;
		int ok = 1;
		CHECK(precc_rt_model_state_init(rt, all) == 0);
		for (int l = 0; l < precc_rt_layer_count(rt); l++) {
			precc_layer_sizes sz;
			CHECK(precc_rt_layer_sizes(rt, l, 128, &sz) == 0);
			ok &= precc_rt_model_state_offset(rt, l) == off && off % 256 == 0;
			one = calloc(1, sz.state_bytes + 1);
			CHECK(precc_rt_layer_state_init(rt, l, one) == 0);
			ok &= memcmp(all + off, one, sz.state_bytes) == 0;
			free(one);
			off += (sz.state_bytes + 255) / 256 * 256;
		}
		CHECK(ok && total == off);
		free(all);
	}
	precc_rt_close(rt);
	return finish("runtime.layer");
}
