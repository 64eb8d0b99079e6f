/*
 * mlp.c — the task and the model: fc1 (DIN -> HID), relu, fc2 (HID ->
 * DOUT), mean squared error. A recipe's run goes through precc_rt's layer
 * API (forward, backward, commit) and its training policy (loss scaling,
 * unscale + check, clipping, AdamW); the fp32 reference run does the same
 * arithmetic with host fp32 GEMMs. Checkpoints are precc_state files.
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "precc/interp.h"
#include "precc/numerics.h"
#include "train.h"

static const char *const lname[2] = {"fc1", "fc2"};

/* ---- the task: counter-based randomness, so step s is the same data in
 * every run and after every resume ---------------------------------------- */

static float normal(uint64_t seed, uint32_t stream, uint32_t step, uint64_t i)
{
	uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), stream, step};
	uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, o[4];
	precc_philox4x32_10(ctr, key, o);
	double u1 = ((double)o[0] + 1.0) / 4294967296.0, u2 = (double)o[1] / 4294967296.0;
	return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static float uniform(uint64_t seed, uint32_t stream, uint64_t i)
{
	uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), stream, 0xffffffffu};
	uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, o[4];
	precc_philox4x32_10(ctr, key, o);
	return (float)((double)o[0] / 4294967296.0 * 2.0 - 1.0);
}

/* y[M,n] = x[M,k] w[n,k]^T, fp32 */
static void gemm_nt(const float *x, const float *w, float *y, long m, long k, long n)
{
	for (long i = 0; i < m; i++)
		for (long j = 0; j < n; j++) {
			float s = 0;
			for (long p = 0; p < k; p++)
				s += x[i * k + p] * w[j * k + p];
			y[i * n + j] = s;
		}
}

/* dx[M,k] = dy[M,n] w[n,k] */
static void gemm_nn(const float *dy, const float *w, float *dx, long m, long k, long n)
{
	memset(dx, 0, (size_t)(m * k) * 4);
	for (long i = 0; i < m; i++)
		for (long j = 0; j < n; j++) {
			float d = dy[i * n + j];
			for (long p = 0; p < k; p++)
				dx[i * k + p] += d * w[j * k + p];
		}
}

/* dw[n,k] += dy[M,n]^T x[M,k] */
static void gemm_tn(const float *dy, const float *x, float *dw, long m, long k, long n)
{
	for (long i = 0; i < m; i++)
		for (long j = 0; j < n; j++) {
			float d = dy[i * n + j];
			for (long p = 0; p < k; p++)
				dw[j * k + p] += d * x[i * k + p];
		}
}

/* The batch of step s: x [BATCH, DIN] and its target [BATCH, DOUT]. */
static void batch(uint64_t seed, long s, float *x, float *t)
{
	static float *A, *B, *h, *y;
	static uint64_t made = ~(uint64_t)0;

	if (!A) {
		A = malloc(sizeof(float) * HID * DIN);
		B = malloc(sizeof(float) * DOUT * HID);
		h = malloc(sizeof(float) * BATCH * HID);
		y = malloc(sizeof(float) * BATCH * DOUT);
	}
	if (made != seed) {   /* the teacher: fixed by the seed */
		for (long i = 0; i < HID * DIN; i++)
			A[i] = normal(seed, 1, 0, (uint64_t)i) / sqrtf((float)DIN);
		for (long i = 0; i < DOUT * HID; i++)
			B[i] = normal(seed, 2, 0, (uint64_t)i) * AMP * sqrtf(2.0f / (float)HID);
		made = seed;
	}
	for (long i = 0; i < BATCH * DIN; i++)
		x[i] = normal(seed, 10, (uint32_t)s, (uint64_t)i);
	gemm_nt(x, A, h, BATCH, DIN, HID);
	for (long i = 0; i < BATCH * HID; i++)
		h[i] = h[i] > 0 ? h[i] : 0;
	gemm_nt(h, B, y, BATCH, HID, DOUT);
	for (long i = 0; i < BATCH * DOUT; i++)
		t[i] = y[i] + NOISE * normal(seed, 11, (uint32_t)s, (uint64_t)i);
}

/* ---- formats ------------------------------------------------------------------- */

static size_t esize(int f) { return precc_interp_elem_bytes((precc_format)f); }

static void enc(int f, const float *x, long n, void *out)
{
	if (f == PRECC_FP32) {
		memcpy(out, x, (size_t)n * 4);
		return;
	}
	for (long i = 0; i < n; i++)
		((uint16_t *)out)[i] = (uint16_t)precc_encode_default((precc_format)f, x[i]);
}

static void dec(int f, const void *in, long n, float *x)
{
	if (f == PRECC_FP32) {
		memcpy(x, in, (size_t)n * 4);
		return;
	}
	for (long i = 0; i < n; i++)
		x[i] = precc_decode((precc_format)f, ((const uint16_t *)in)[i]);
}

static int host_fmt(int f) { return f == PRECC_FP32 || f == PRECC_BF16 || f == PRECC_FP16; }

/* ---- runs ---------------------------------------------------------------------- */

static void *bmalloc(Run *r, size_t n)
{
	if (r->rt)
		return precc_rt_malloc(r->rt, n ? n : 16);
	return calloc(1, n ? n : 16);
}

static void bfree(Run *r, void *p)
{
	if (r->rt)
		precc_rt_free(r->rt, p);
	else
		free(p);
}

static int init_linear(Run *r, int i, const Config *c, char *err, size_t errsz)
{
	Linear *L = &r->L[i];
	long k = i ? HID : DIN, n = i ? DOUT : HID;
	int wf = PRECC_FP32;

	L->k = k;
	L->n = n;
	if (r->rt) {
		L->l = precc_rt_layer_find(r->rt, lname[i]);
		if (L->l < 0 || precc_rt_layer_sizes(r->rt, L->l, BATCH, &L->sz)) {
			snprintf(err, errsz, "%s: layer %s: %s", r->dir, lname[i],
			         L->l < 0 ? "not in the manifest" : precc_rt_last_error());
			return -1;
		}
		if (L->sz.k != k || L->sz.n != n) {
			snprintf(err, errsz, "%s: layer %s is %ld -> %ld, expected %ld -> %ld",
			         r->dir, lname[i], L->sz.k, L->sz.n, k, n);
			return -1;
		}
		int fs[6] = {L->sz.x_format, L->sz.w_format, L->sz.y_format,
		             L->sz.dy_format, L->sz.dx_format, L->sz.dw_format};
		for (int f = 0; f < 6; f++)
			if (!host_fmt(fs[f])) {
				snprintf(err, errsz, "%s: layer %s: a caller tensor in %s; "
				         "precc-train feeds fp32, bf16 or fp16", r->dir,
				         lname[i], precc_format_get(fs[f])->name);
				return -1;
			}
		wf = L->sz.w_format;
		L->state = bmalloc(r, L->sz.state_bytes);
		L->saved = bmalloc(r, L->sz.saved_bytes);
		L->work = bmalloc(r, L->sz.workspace_bytes);
		L->w = bmalloc(r, (size_t)(n * k) * esize(wf));
		L->dw = bmalloc(r, (size_t)(n * k) * esize(L->sz.dw_format));
		if (precc_rt_layer_state_init(r->rt, L->l, L->state)) {
			snprintf(err, errsz, "%s: %s", r->dir, precc_rt_last_error());
			return -1;
		}
	}
	L->master = calloc((size_t)(n * k), 4);
	L->m = calloc((size_t)(n * k), 4);
	L->v = calloc((size_t)(n * k), 4);
	L->working = calloc((size_t)(n * k), 4);
	L->grad = calloc((size_t)(n * k), 4);
	/* torch.nn.Linear's init: U(-1/sqrt(k), 1/sqrt(k)), the same in every run */
	float *w0 = malloc((size_t)(n * k) * 4);
	for (long e = 0; e < n * k; e++)
		w0[e] = uniform(c->seed, 3 + (uint32_t)i, (uint64_t)e) / sqrtf((float)k);
	enc(r->pol.master_weights, w0, n * k, L->master);
	free(w0);
	L->opt = (precc_param){n * k, r->pol.master_weights, L->master,
	                       r->pol.optimizer_state, L->m, L->v, wf, L->working,
	                       (uint32_t)(100 + i)};
	/* the working copy from the master, as after an optimizer step */
	float *tmp = malloc((size_t)(n * k) * 4);
	dec(r->pol.master_weights, L->master, n * k, tmp);
	enc(wf, tmp, n * k, L->working);
	free(tmp);
	if (r->rt && precc_rt_upload(r->rt, L->w, L->working, (size_t)(n * k) * esize(wf))) {
		snprintf(err, errsz, "%s", precc_rt_last_error());
		return -1;
	}
	return 0;
}

int run_open(Run *r, const char *name, const char *dir, precc_backend be,
             const Config *c, char *err, size_t errsz)
{
	char why[512];

	memset(r, 0, sizeof *r);
	snprintf(r->name, sizeof r->name, "%s", name);
	r->ref = dir == NULL;
	precc_training_policy_default(&r->pol);
	if (dir) {
		precc_artifact_info ai;
		snprintf(r->dir, sizeof r->dir, "%s", dir);
		if (!(r->rt = precc_rt_open(dir, be, why, sizeof why))) {
			snprintf(err, errsz, "%s", why);
			return -1;
		}
		precc_rt_training_policy(r->rt, &r->pol);
		precc_rt_artifact_info(r->rt, &ai);
		r->recipe_hash = ai.recipe_hash;
		r->model_hash = ai.model_hash;
		if (!host_fmt(r->pol.master_weights) || !host_fmt(r->pol.optimizer_state)) {
			snprintf(err, errsz, "recipe %s: master weights %s, optimizer state "
			         "%s: precc_adamw_step keeps fp32, bf16 or fp16", name,
			         precc_format_get(r->pol.master_weights)->name,
			         precc_format_get(r->pol.optimizer_state)->name);
			return -1;
		}
	}
	precc_loss_scaler_init(&r->scaler, &r->pol);
	for (int i = 0; i < 2; i++)
		if (init_linear(r, i, c, err, errsz))
			return -1;
	if (r->rt) {
		const Linear *a = &r->L[0], *b = &r->L[1];
		r->x1 = bmalloc(r, BATCH * DIN * esize(a->sz.x_format));
		r->y1 = bmalloc(r, BATCH * HID * esize(a->sz.y_format));
		r->dy1 = bmalloc(r, BATCH * HID * esize(a->sz.dy_format));
		r->x2 = bmalloc(r, BATCH * HID * esize(b->sz.x_format));
		r->y2 = bmalloc(r, BATCH * DOUT * esize(b->sz.y_format));
		r->dy2 = bmalloc(r, BATCH * DOUT * esize(b->sz.dy_format));
		r->dx2 = bmalloc(r, BATCH * HID * esize(b->sz.dx_format));
		int ls[2] = {a->l, b->l};
		void *sv[2] = {a->saved, b->saved}, *st[2] = {a->state, b->state};
		size_t tb = precc_rt_bulk_commit_table_bytes(r->rt, 2, ls);
		if (!tb && (a->sz.has_state || b->sz.has_state)) {
			snprintf(err, errsz, "%s: %s", r->dir, precc_rt_last_error());
			return -1;
		}
		if (tb) {
			r->commit_table = bmalloc(r, tb);
			r->commit = precc_rt_bulk_commit_new(r->rt, 2, ls, BATCH, sv, st,
			                                     r->commit_table, tb);
			if (!r->commit) {
				snprintf(err, errsz, "%s: %s", r->dir, precc_rt_last_error());
				return -1;
			}
		}
	}
	return 0;
}

void run_close(Run *r)
{
	precc_rt_bulk_commit_free(r->commit);
	r->commit = NULL;
	if (r->rt && r->commit_table)
		bfree(r, r->commit_table);
	for (int i = 0; i < 2; i++) {
		Linear *L = &r->L[i];
		if (r->rt) {
			bfree(r, L->state);
			bfree(r, L->saved);
			bfree(r, L->work);
			bfree(r, L->w);
			bfree(r, L->dw);
		}
		free(L->master);
		free(L->m);
		free(L->v);
		free(L->working);
		free(L->grad);
	}
	if (r->rt) {
		void *b[] = {r->x1, r->y1, r->x2, r->y2, r->dy2, r->dx2, r->dy1};
		for (int i = 0; i < 7; i++)
			bfree(r, b[i]);
		precc_rt_close(r->rt);
	}
	free(r->loss);
	memset(r, 0, sizeof *r);
}

static int rt_fail(char *err, size_t errsz, const char *what)
{
	snprintf(err, errsz, "%s: %s", what, precc_rt_last_error());
	return -1;
}

/* Host staging, sized for the largest tensor. */
static float *stage(int i)
{
	static float *s[8];
	if (!s[i])
		s[i] = malloc(sizeof(float) * BATCH * HID * 2);
	return s[i];
}

/* Backend tensor <- host fp32, encoded in format f. */
static int put(Run *r, void *dst, int f, const float *x, long n)
{
	void *tmp = stage(7);
	enc(f, x, n, tmp);
	return precc_rt_upload(r->rt, dst, tmp, (size_t)n * esize(f));
}

static int get(Run *r, float *x, int f, const void *src, long n)
{
	void *tmp = stage(7);
	if (precc_rt_download(r->rt, tmp, src, (size_t)n * esize(f)))
		return -1;
	dec(f, tmp, n, x);
	return 0;
}

/* forward + loss + backward, leaving the (scaled) fp32 gradients in L->grad */
static int grads_precc(Run *r, const float *x, const float *t, double *loss,
                       const Config *c, char *err, size_t errsz)
{
	Linear *a = &r->L[0], *b = &r->L[1];
	float *y1 = stage(0), *h = stage(1), *pred = stage(2), *g = stage(3);
	uint64_t seed = c->seed * 1000003u + (uint64_t)r->steps;
	int cpu = precc_rt_backend(r->rt) == PRECC_BACKEND_CPU;
	double sum = 0;

	if (put(r, r->x1, a->sz.x_format, x, BATCH * DIN) ||
	    precc_rt_forward(r->rt, a->l, BATCH, r->x1, a->w, NULL, r->y1, a->saved,
	                     a->state, a->work, seed, NULL) ||
	    get(r, y1, a->sz.y_format, r->y1, BATCH * HID))
		return rt_fail(err, errsz, "fc1 forward");
	for (long i = 0; i < BATCH * HID; i++)
		h[i] = y1[i] > 0 ? y1[i] : 0;
	if (put(r, r->x2, b->sz.x_format, h, BATCH * HID) ||
	    precc_rt_forward(r->rt, b->l, BATCH, r->x2, b->w, NULL, r->y2, b->saved,
	                     b->state, b->work, seed, NULL) ||
	    get(r, pred, b->sz.y_format, r->y2, BATCH * DOUT))
		return rt_fail(err, errsz, "fc2 forward");
	for (long i = 0; i < BATCH * DOUT; i++) {
		double d = (double)pred[i] - t[i];
		sum += d * d;
		/* d loss / d pred, times the loss scale */
		g[i] = (float)(2.0 * d / ((double)BATCH * DOUT * GLOBAL)) * r->scaler.scale;
	}
	*loss = sum / (BATCH * DOUT);
	for (long i = 0; i < BATCH * DOUT; i++)
		if (g[i] != 0) {
			r->dy_nonzero++;
			r->dy_flushed += precc_decode((precc_format)b->sz.dy_format,
			                              precc_encode_default((precc_format)b->sz.dy_format, g[i])) == 0;
		}
	for (int i = 0; i < 2; i++)
		memset(r->L[i].grad, 0, (size_t)(r->L[i].n * r->L[i].k) * 4);
	/* cpu: dW is added into the fp32 gradient by the runtime (main_grad);
	 * cuda: dW comes back in its format and is added here */
	if (put(r, r->dy2, b->sz.dy_format, g, BATCH * DOUT) ||
	    precc_rt_backward(r->rt, b->l, BATCH, r->x2, b->w, r->dy2, r->dx2,
	                      cpu ? NULL : b->dw, cpu ? b->grad : NULL, b->saved,
	                      b->state, b->work, seed, NULL) ||
	    get(r, h, b->sz.dx_format, r->dx2, BATCH * HID))
		return rt_fail(err, errsz, "fc2 backward");
	for (long i = 0; i < BATCH * HID; i++)
		h[i] = y1[i] > 0 ? h[i] : 0;
	if (put(r, r->dy1, a->sz.dy_format, h, BATCH * HID) ||
	    precc_rt_backward(r->rt, a->l, BATCH, r->x1, a->w, r->dy1, NULL,
	                      cpu ? NULL : a->dw, cpu ? a->grad : NULL, a->saved,
	                      a->state, a->work, seed, NULL))
		return rt_fail(err, errsz, "fc1 backward");
	for (int i = 0; i < 2 && !cpu; i++) {
		Linear *L = &r->L[i];
		if (get(r, L->grad, L->sz.dw_format, L->dw, L->n * L->k))
			return rt_fail(err, errsz, "dW download");
	}
	/* delayed scaling: this step's amaxes into the histories, new scales,
	 * for both layers in one launch (cpu: precc_rt_commit per layer) */
	if (r->commit && precc_rt_bulk_commit_run(r->rt, r->commit, NULL))
		return rt_fail(err, errsz, "commit");
	return 0;
}

static void grads_ref(Run *r, const float *x, const float *t, double *loss)
{
	Linear *a = &r->L[0], *b = &r->L[1];
	float *y1 = stage(0), *h = stage(1), *pred = stage(2), *g = stage(3);
	float *dh = stage(4);
	double sum = 0;

	gemm_nt(x, a->master, y1, BATCH, DIN, HID);
	for (long i = 0; i < BATCH * HID; i++)
		h[i] = y1[i] > 0 ? y1[i] : 0;
	gemm_nt(h, b->master, pred, BATCH, HID, DOUT);
	for (long i = 0; i < BATCH * DOUT; i++) {
		double d = (double)pred[i] - t[i];
		sum += d * d;
		g[i] = (float)(2.0 * d / ((double)BATCH * DOUT * GLOBAL));
	}
	*loss = sum / (BATCH * DOUT);
	for (int i = 0; i < 2; i++)
		memset(r->L[i].grad, 0, (size_t)(r->L[i].n * r->L[i].k) * 4);
	gemm_tn(g, h, b->grad, BATCH, HID, DOUT);
	gemm_nn(g, b->master, dh, BATCH, HID, DOUT);
	for (long i = 0; i < BATCH * HID; i++)
		dh[i] = y1[i] > 0 ? dh[i] : 0;
	gemm_tn(dh, x, a->grad, BATCH, DIN, HID);
}

int run_step(Run *r, const Config *c, char *err, size_t errsz)
{
	float *x = stage(5), *t = stage(6);
	precc_adamw h = {c->lr, 0.9, 0.999, ADAM_EPS, 0.0};
	double loss;
	long s = r->steps + 1;

	batch(c->seed, s, x, t);
	if (r->ref)
		grads_ref(r, x, t, &loss);
	else if (grads_precc(r, x, t, &loss, c, err, errsz))
		return -1;
	if (s == c->inject_nan)
		r->L[0].grad[0] = NAN;
	/* unscale and check every gradient in one pass, then the policy */
	const void *gs[2] = {r->L[0].grad, r->L[1].grad};
	float *out[2] = {r->L[0].grad, r->L[1].grad};
	int fmt[2] = {PRECC_FP32, PRECC_FP32};
	long n[2] = {r->L[0].n * r->L[0].k, r->L[1].n * r->L[1].k};
	int found = precc_unscale_check(2, gs, fmt, n, (float)(1.0 / (double)r->scaler.scale), out);
	if (found < 0)
		return rt_fail(err, errsz, "unscale");
	r->nonfinite += found;
	/* a skipped step leaves masters, moments and the AdamW count alone */
	if (!precc_loss_scaler_update(&r->scaler, found)) {
		precc_clip_grad_norm(2, out, n, c->max_norm);
		r->adam_t++;
		for (int i = 0; i < 2; i++) {
			Linear *L = &r->L[i];
			if (precc_adamw_step(&h, r->adam_t, &L->opt, L->grad,
			                     r->pol.stochastic_rounding,
			                     c->seed ^ ((uint64_t)s << 20)))
				return rt_fail(err, errsz, "adamw");
			if (r->rt && precc_rt_upload(r->rt, L->w, L->working,
			                             (size_t)(L->n * L->k) * esize(L->opt.working_format)))
				return rt_fail(err, errsz, "weights upload");
		}
	}
	if (r->steps >= r->cap) {
		r->cap = r->cap ? 2 * r->cap : 256;
		r->loss = realloc(r->loss, (size_t)r->cap * sizeof *r->loss);
	}
	r->loss[r->steps++] = (float)loss;
	return 0;
}

/* ---- the model file ------------------------------------------------------------ */

int write_model(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f, "-- written by precc-train: the two linears of its MLP\n"
	           "model \"precc_train_mlp\"\n"
	           "linear(\"fc1\", %d, %d)\nlinear(\"fc2\", %d, %d)\n",
	        DIN, HID, HID, DOUT);
	return fclose(f);
}

/* ---- checkpoints ----------------------------------------------------------------
 * One precc_state file (docs/runtime.md, "Scaling state"): its recipe
 * identity is a hash over the runs' recipes, its model identity over the
 * model, the task and the trainer's settings, so precc_state_load refuses a
 * checkpoint of other recipes, another model or other settings, and its
 * format version another precc's, its first tensor's name ("precc-train
 * checkpoint 1") another trainer's. Tensors, per run: meta (steps, AdamW
 * steps, nonfinite count, the loss scaler), each linear's master, m, v and
 * layer state region, and the losses so far. Every value round-trips bit
 * for bit, so a resumed run continues exactly. */

#define CKPT_TAG "precc-train checkpoint 1"

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static void ids(Run *runs, int nr, const Config *c, uint64_t *rh, uint64_t *mh)
{
	uint64_t r = 0xcbf29ce484222325ULL, m = r;
	int dims[6] = {DIN, HID, DOUT, BATCH, 0, 0};
	float task[2] = {AMP, NOISE};

	for (int i = 0; i < nr; i++) {
		r = fnv(r, runs[i].name, strlen(runs[i].name) + 1);
		r = fnv(r, &runs[i].recipe_hash, 8);
		if (!runs[i].ref)
			m = fnv(m, &runs[i].model_hash, 8);
	}
	m = fnv(m, dims, sizeof dims);
	m = fnv(m, task, sizeof task);
	m = fnv(m, &c->seed, 8);
	m = fnv(m, &c->lr, 8);
	m = fnv(m, &c->max_norm, 8);
	*rh = r;
	*mh = m;
}

typedef struct Piece { char name[256]; void *host; size_t bytes; Linear *L; int region; } Piece;

/* The checkpoint's tensors; region: a layer state region (backend memory). */
static int pieces(Run *runs, int nr, long steps, Piece *p, int max)
{
	int n = 0;
	memset(p, 0, sizeof *p * (size_t)max);
	/* first, the trainer's checkpoint version: another one is refused as
	 * "tensor list mismatch: tensor 0 is 'precc-train checkpoint N'" */
	snprintf(p[n].name, sizeof p[n].name, "%s", CKPT_TAG);
	p[n++].bytes = 4;
	for (int i = 0; i < nr && n + 12 < max; i++) {
		Run *r = &runs[i];
		snprintf(p[n].name, sizeof p[n].name, "%s:meta", r->name);
		p[n].host = NULL;   /* filled by the caller */
		p[n++].bytes = 8 * 4;
		for (int j = 0; j < 2; j++) {
			Linear *L = &r->L[j];
			size_t e = (size_t)(L->n * L->k);
			const char *what[3] = {"master", "m", "v"};
			void *where[3] = {L->master, L->m, L->v};
			for (int q = 0; q < 3; q++) {
				snprintf(p[n].name, sizeof p[n].name, "%s:%s.%s", r->name,
				         lname[j], what[q]);
				p[n].host = where[q];
				p[n].region = 0;
				p[n++].bytes = e * 4;
			}
			if (r->rt && L->sz.state_bytes) {
				snprintf(p[n].name, sizeof p[n].name, "%s:%s.state", r->name,
				         lname[j]);
				p[n].L = L;
				p[n].region = 1;
				p[n++].bytes = L->sz.state_bytes;
			}
		}
		snprintf(p[n].name, sizeof p[n].name, "%s:loss", r->name);
		p[n].host = r->loss;
		p[n].region = 0;
		p[n++].bytes = (size_t)(steps ? steps : 1) * 4;
	}
	return n;
}

static precc_state *ckpt_state(Run *runs, int nr, const Config *c, long steps,
                               Piece *p, int *np)
{
	const char *names[256];
	uint32_t len[256];
	uint64_t rh, mh;

	*np = pieces(runs, nr, steps, p, 256);
	for (int i = 0; i < *np; i++) {
		names[i] = p[i].name;
		len[i] = (uint32_t)((p[i].bytes + 3) / 4);
	}
	ids(runs, nr, c, &rh, &mh);
	return precc_state_new(rh, mh, (size_t)*np, names, len);
}

int ckpt_save(Run *runs, int nr, const Config *c, const char *path, char *err,
              size_t errsz)
{
	Piece p[256];
	int np, rc = -1;
	precc_state *st = ckpt_state(runs, nr, c, runs[0].steps, p, &np);

	if (!st) {
		snprintf(err, errsz, "%s", precc_rt_last_error());
		return -1;
	}
	for (int i = 0, run = -1; i < np; i++) {
		precc_state_tensor t;
		precc_state_tensor_at(st, (size_t)i, &t);
		memset(t.amax_history, 0, (size_t)t.history_len * 4);
		if (strstr(p[i].name, ":meta")) {
			Run *r = &runs[++run];
			uint32_t m[8] = {(uint32_t)r->steps, (uint32_t)r->adam_t,
			                 (uint32_t)r->nonfinite, 0, (uint32_t)r->scaler.growth_tracker,
			                 (uint32_t)r->scaler.steps, (uint32_t)r->scaler.skipped, 0};
			memcpy(&m[3], &r->scaler.scale, 4);
			memcpy(t.amax_history, m, sizeof m);
		} else if (p[i].region) {
			Run *r = &runs[run];
			if (precc_rt_download(r->rt, t.amax_history, p[i].L->state, p[i].bytes))
				goto out;
		} else if (p[i].host)
			memcpy(t.amax_history, p[i].host, p[i].bytes);
	}
	if (precc_state_save(st, path))
		goto out;
	rc = 0;
out:
	if (rc)
		snprintf(err, errsz, "%s", precc_rt_last_error());
	precc_state_free(st);
	return rc;
}

/* The number of steps a checkpoint holds: the history length of its first
 * loss tensor, read from the file's tensor table (docs/runtime.md, "File
 * format"), so the state to load it into can be built. 0 when unreadable:
 * precc_state_load then says what is wrong with the file. Opened as
 * precc_rt reads files (O_NOFOLLOW | O_NONBLOCK, regular files only): a
 * FIFO with no writer would block fopen forever. */
static long ckpt_steps(const char *path, const char *first)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat sb;
	FILE *f;
	unsigned char h[56];
	char want[300], name[4097];
	long steps = 0;
	uint32_t n;

	if (fd < 0)
		return 0;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || !(f = fdopen(fd, "rb"))) {
		close(fd);
		return 0;
	}
	snprintf(want, sizeof want, "%s:loss", first);
	if (fread(h, 1, 56, f) == 56 && memcmp(h, "PRECCSST", 8) == 0) {
		memcpy(&n, h + 52, 4);
		for (uint32_t i = 0; i < n && i < 4096; i++) {
			unsigned char e[6];
			uint32_t len;
			uint16_t k;
			if (fread(e, 1, 6, f) != 6)
				break;
			memcpy(&len, e, 4);
			memcpy(&k, e + 4, 2);
			if (fread(name, 1, k, f) != k)
				break;
			name[k] = 0;
			if (strcmp(name, want) == 0) {
				steps = len;
				break;
			}
		}
	}
	fclose(f);
	return steps;
}

int ckpt_load(Run *runs, int nr, const Config *c, const char *path, char *err,
              size_t errsz)
{
	Piece p[256];
	int np, rc = -1;
	long steps = ckpt_steps(path, runs[0].name);
	precc_state *st;

	for (int i = 0; i < nr; i++) {   /* room for the losses to load */
		Run *r = &runs[i];
		if (r->cap < steps + 1) {
			r->cap = steps + 256;
			r->loss = realloc(r->loss, (size_t)r->cap * sizeof *r->loss);
		}
	}
	if (!(st = ckpt_state(runs, nr, c, steps, p, &np))) {
		snprintf(err, errsz, "%s", precc_rt_last_error());
		return -1;
	}
	if (precc_state_load(st, path)) {
		snprintf(err, errsz, "%s (this run: ", precc_rt_last_error());
		for (int i = 0; i < nr; i++)
			snprintf(err + strlen(err), errsz - strlen(err), "%s%s", i ? ", " : "",
			         runs[i].name);
		snprintf(err + strlen(err), errsz - strlen(err), "; seed %llu, lr %g, "
		         "MLP %dx%dx%d)", (unsigned long long)c->seed, c->lr, DIN, HID, DOUT);
		goto out;
	}
	for (int i = 0, run = -1; i < np; i++) {
		precc_state_tensor t;
		precc_state_tensor_at(st, (size_t)i, &t);
		if (strstr(p[i].name, ":meta")) {
			Run *r = &runs[++run];
			uint32_t m[8];
			memcpy(m, t.amax_history, sizeof m);
			r->steps = m[0];
			r->adam_t = m[1];
			r->nonfinite = m[2];
			memcpy(&r->scaler.scale, &m[3], 4);
			r->scaler.growth_tracker = (int32_t)m[4];
			r->scaler.steps = m[5];
			r->scaler.skipped = m[6];
		} else if (p[i].region) {
			Run *r = &runs[run];
			if (precc_rt_upload(r->rt, p[i].L->state, t.amax_history, p[i].bytes)) {
				snprintf(err, errsz, "%s", precc_rt_last_error());
				goto out;
			}
		} else if (p[i].host)
			memcpy(p[i].host, t.amax_history, p[i].bytes);
	}
	/* the working weights from the masters, as the last step left them */
	for (int i = 0; i < nr; i++)
		for (int j = 0; j < 2; j++) {
			Linear *L = &runs[i].L[j];
			long e = L->n * L->k;
			float *tmp = malloc((size_t)e * 4);
			dec(L->opt.master_format, L->master, e, tmp);
			enc(L->opt.working_format, tmp, e, L->working);
			free(tmp);
			if (runs[i].rt && precc_rt_upload(runs[i].rt, L->w, L->working,
			                                  (size_t)e * esize(L->opt.working_format))) {
				snprintf(err, errsz, "%s", precc_rt_last_error());
				goto out;
			}
		}
	rc = 0;
out:
	precc_state_free(st);
	return rc;
}
