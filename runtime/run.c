/*
 * run.c — floor 4 (rt.h): run a layer's plan (docs/artifacts.md,
 * "layers"): argument checks before any launch (the plan floor's M check,
 * then each buffer: not NULL, big enough, aligned, the backend's kind of
 * memory), then each step through the backend's table on the caller's
 * buffers and stream, then the layer's updates. Also the layer and kernel
 * queries, backend memory, and the scaling state of an artifact.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "precc/grid.h"
#include "rt.h"

#define ALIGN PRECC_BUFFER_ALIGN   /* kernels load and store 16-byte vectors */

static const rt_layer *layer_at(const precc_rt *rt, int layer)
{
	/* nlayer + g: expert group g's step (precc_rt_group_layer) */
	if (!rt || !rt->art || layer < 0 || layer >= rt->art->nlayer + rt->art->ngroup)
		return NULL;
	return &rt->art->layer[layer];
}

const rt_layer *rt_need_layer(const precc_rt *rt, int layer)
{
	const rt_layer *l = layer_at(rt, layer);

	if (!l) {
		if (!rt || !rt->art)
			rt_error("plan: no artifact directory is loaded (precc_rt_load)");
		else
			rt_error("plan: layer %d is out of range (the manifest has %d)",
			         layer, rt->art->nlayer);
	}
	return l;
}

void precc_rt_artifact_info(const precc_rt *rt, precc_artifact_info *info)
{
	const rt_artifact *a = rt ? rt->art : NULL;

	memset(info, 0, sizeof *info);
	if (!a)
		return;
	info->dir = a->dir;
	info->precc_version = a->precc_version;
	info->llvm_version = a->llvm_version;
	info->recipe_name = a->recipe_name;
	info->model_name = a->model_name;
	info->recipe_hash = a->recipe_hash;
	info->model_hash = a->model_hash;
	info->target = a->layers_of;
	info->nkernels = a->nkern;
	info->nlayers = a->nlayer;
}

int precc_rt_layer_count(const precc_rt *rt)
{
	return rt && rt->art ? rt->art->nlayer : 0;
}

const char *precc_rt_layer_name(const precc_rt *rt, int layer)
{
	const rt_layer *l = layer_at(rt, layer);
	return l ? l->fqn : NULL;
}

int precc_rt_layer_find(const precc_rt *rt, const char *fqn)
{
	for (int i = 0; fqn && i < precc_rt_layer_count(rt); i++)
		if (strcmp(rt->art->layer[i].fqn, fqn) == 0)
			return i;
	return -1;
}

long precc_rt_layer_m_multiple(const precc_rt *rt, int layer)
{
	const rt_layer *l = layer_at(rt, layer);
	return l ? l->m_multiple : -1;
}

int precc_rt_buffer_count(const precc_rt *rt, int layer)
{
	const rt_layer *l = layer_at(rt, layer);
	return l ? l->nbuf : -1;
}

int precc_rt_buffer_info(const precc_rt *rt, int layer, int i, long m,
                         precc_buffer_info *info)
{
	const rt_layer *l = rt_need_layer(rt, layer);
	const rt_buffer *b;

	memset(info, 0, sizeof *info);
	if (!l)
		return -1;
	if (i < 0 || i >= l->nbuf) {
		rt_error("plan: buffer %d of layer '%s' is out of range (it has %d)",
		         i, l->fqn, l->nbuf);
		return -1;
	}
	b = &l->buf[i];
	info->name = b->name;
	info->type = b->type_str;
	info->role = b->role;
	info->format = ir_fmt_name(b->type.fmt);
	info->format_id = (int)b->type.fmt;
	info->written = b->written;
	info->bytes = rt_type_bytes(&b->type, m, &info->rows, &info->cols);
	if (!info->bytes) {
		rt_error("plan: layer '%s' buffer '%s' %s has no size at M=%ld",
		         l->fqn, b->name, b->type_str, m);
		return -1;
	}
	return 0;
}

int precc_rt_step_count(const precc_rt *rt, int layer)
{
	const rt_layer *l = layer_at(rt, layer);
	return l ? l->nstep : -1;
}

/* layer's plan when step is one of its steps, else NULL with the error */
static const rt_layer *need_step(const precc_rt *rt, int layer, int step)
{
	const rt_layer *l = rt_need_layer(rt, layer);

	if (l && (step < 0 || step >= l->nstep)) {
		rt_error("plan: step %d of layer '%s' is out of range (it has %d)",
		         step, l->fqn, l->nstep);
		return NULL;
	}
	return l;
}

int precc_rt_step_info(const precc_rt *rt, int layer, int step,
                       precc_step_info *info)
{
	const rt_layer *l = need_step(rt, layer, step);
	const rt_kdesc *k;

	memset(info, 0, sizeof *info);
	if (!l)
		return -1;
	k = &rt->art->kern[l->step[step].kernel];
	info->kernel = l->step[step].kernel;
	info->gemm = l->step[step].gemm;
	info->nargs = k->nparam;
	info->args = l->step[step].arg;
	for (int p = 0; p < k->nparam; p++)
		if (k->param[p].out)
			info->out_mask |= 1u << p;
	return 0;
}

int precc_rt_step_kernel(const precc_rt *rt, int layer, int step, long m)
{
	const rt_layer *l = need_step(rt, layer, step);

	if (!l)
		return -1;
	return rt_step_kernel(rt->art, l->step[step].kernel, m);
}

void precc_rt_set_timing(precc_rt *rt, int on) { rt->timing = on; }

int precc_rt_kernel_count(const precc_rt *rt)
{
	return rt && rt->art ? rt->art->nkern : 0;
}

int precc_rt_kernel_info(const precc_rt *rt, int k, precc_kernel_info *info)
{
	const rt_kdesc *d;

	memset(info, 0, sizeof *info);
	if (k < 0 || k >= precc_rt_kernel_count(rt)) {
		rt_error("plan: kernel %d is out of range", k);
		return -1;
	}
	d = &rt->art->kern[k];
	info->name = d->name;
	info->shape = d->shape;
	info->entry = d->entry;
	info->loaded = d->loaded;
	info->num_regs = d->num_regs;
	info->spill_bytes = d->spill_bytes;
	info->launches = d->launches;
	info->elements = d->elems;
	info->seconds = d->seconds;
	return 0;
}

/* ---- memory ------------------------------------------------------------- */

void *precc_rt_malloc(precc_rt *rt, size_t bytes) { return rt->ops->alloc(rt, bytes); }

void precc_rt_free(precc_rt *rt, void *p)
{
	if (p)
		rt->ops->free(rt, p);
}

int precc_rt_upload(precc_rt *rt, void *dst, const void *src, size_t bytes)
{
	return rt->ops->upload(rt, dst, src, bytes);
}

int precc_rt_download(precc_rt *rt, void *dst, const void *src, size_t bytes)
{
	return rt->ops->download(rt, dst, src, bytes);
}

int precc_rt_sync(precc_rt *rt, void *stream) { return rt->ops->sync(rt, stream); }

/* ---- argument checks ------------------------------------------------------ */

static int seen_holds(const rt_seen *seen, const void *p)
{
	for (int i = 0; seen && i < seen->n; i++)
		if ((uintptr_t)p >= seen->lo[i] && (uintptr_t)p < seen->hi[i])
			return 1;
	return 0;
}

static int mem_ok(precc_rt *rt, const void *p, rt_seen *seen)
{
	uintptr_t range[2];

	if (seen_holds(seen, p))
		return 1;
	if (!rt->ops->mem_ok(rt, p, range))
		return 0;
	if (seen && seen->n < RT_SEEN_MAX) {
		seen->lo[seen->n] = range[0];
		seen->hi[seen->n++] = range[1];
	}
	return 1;
}

int rt_check_buffer(precc_rt *rt, const rt_layer *l, long m,
                    void *const *buffers, const size_t *sizes, int b, rt_seen *seen)
{
	const void *ptr = buffers[b];
	char what[512];
	size_t need = rt_buffer_extent(l, b, m)->bytes;

	if (!need) {
		rt_error("plan: layer '%s': buffer '%s' %s overflows at M=%ld",
		         l->fqn, l->buf[b].name, l->buf[b].type_str, m);
		return -1;
	}
	if (ptr && (!sizes || sizes[b] >= need) && (uintptr_t)ptr % ALIGN == 0 &&
	    mem_ok(rt, ptr, seen))
		return 0;
	/* something is wrong: the checks again, with the message (the name
	 * is formatted here only, not on every call) */
	snprintf(what, sizeof what, "layer '%s' buffer %d '%s'", l->fqn, b,
	         l->buf[b].name);
	if (!ptr) {
		rt_error("plan: %s is NULL", what);
		return -1;
	}
	if (sizes && sizes[b] < need) {
		rt_error("plan: %s has %zu bytes; %s at M=%ld needs %zu", what,
		         sizes[b], l->buf[b].type_str, m, need);
		return -1;
	}
	if ((uintptr_t)ptr % ALIGN) {
		rt_error("plan: %s (%p) is not %d-byte aligned (kernels use "
		         "%d-byte vector access)", what, ptr, ALIGN, ALIGN);
		return -1;
	}
	return rt->ops->check_mem(rt, ptr, what);
}

int rt_check_step(precc_rt *rt, const rt_layer *l, int s, long m,
                  void *const *buffers, const size_t *sizes, rt_seen *seen)
{
	const rt_kdesc *k = &rt->art->kern[l->step[s].kernel];

	for (int p = 0; p < k->nparam; p++)
		if (rt_check_buffer(rt, l, m, buffers, sizes, l->step[s].arg[p], seen))
			return -1;
	return 0;
}

/* Checks steps [first, last) and, when updates, the layer's updates. */
static int check_args(precc_rt *rt, const rt_layer *l, long m,
                      void *const *buffers, const size_t *sizes, int first,
                      int last, int updates, void *stream)
{
	rt_seen seen = {0};

	if (rt_check_m(l, m, buffers) || rt->ops->check_stream(rt, stream))
		return -1;
	for (int s = first; s < last; s++)
		if (rt_check_step(rt, l, s, m, buffers, sizes, &seen))
			return -1;
	for (int p = 0; updates && p < 2 * l->nupdate; p++)
		if (rt_check_buffer(rt, l, m, buffers, sizes, l->update[p / 2][p % 2], &seen))
			return -1;
	return 0;
}

/* ---- steps --------------------------------------------------------------- */

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int rt_run_step_at(precc_rt *rt, const rt_layer *l, int s, long m,
                   void *const *buffers, uint64_t seed, void *stream,
                   int *skipped)
{
	const rt_step *st = &l->step[s];
	/* at this M, maybe the same GEMM on a larger tile (manifest m_variant) */
	rt_kdesc *k = &rt->art->kern[rt_step_kernel(rt->art, st->kernel, m)];
	double t0 = rt->timing ? now() : 0;
	const rt_extent *ext;
	int rc;

	rc = rt->ops->run(rt, l, st, k, m, buffers, seed, stream, skipped);
	if (rc == 0 && rt->timing)
		rc = rt->ops->sync(rt, stream);
	if (rc)
		return -1;
	ext = rt_buffer_extent(l, st->arg[k->data], m);
	k->launches++;
	k->elems += (double)ext->rows * (double)ext->cols;
	if (rt->timing)
		k->seconds += now() - t0;
	return 0;
}

int rt_apply_updates(precc_rt *rt, const rt_layer *l, long m,
                     void *const *buffers, void *stream)
{
	for (int u = 0; u < l->nupdate; u++) {
		int sb = l->update[u][0], nb = l->update[u][1];
		size_t bytes = rt_buffer_extent(l, sb, m)->bytes;
		if (rt->ops->copy(rt, buffers[sb], buffers[nb], bytes, stream))
			return -1;
	}
	return 0;
}

static int run_steps(precc_rt *rt, const rt_layer *l, int first, int last,
                     int updates, long m, void *const *buffers,
                     const size_t *sizes, uint64_t seed, void *stream)
{
	int skipped = 0;

	if (check_args(rt, l, m, buffers, sizes, first, last, updates, stream))
		return -1;
	for (int s = first; s < last; s++)
		if (rt_run_step_at(rt, l, s, m, buffers, seed, stream, &skipped))
			return -1;
	/* the layer's state updates commit after its steps (none after a
	 * step that nonfinite=skip skipped: cpu only, see docs/runtime.md) */
	if (updates && !skipped)
		return rt_apply_updates(rt, l, m, buffers, stream);
	return 0;
}

int precc_rt_run_layer(precc_rt *rt, int layer, long m, void *const *buffers,
                       uint64_t seed, void *stream)
{
	const rt_layer *l = rt_need_layer(rt, layer);

	return l ? run_steps(rt, l, 0, l->nstep, 1, m, buffers, NULL, seed, stream)
	         : -1;
}

int precc_rt_run_layer_sized(precc_rt *rt, int layer, long m,
                             void *const *buffers, const size_t *bytes,
                             uint64_t seed, void *stream)
{
	const rt_layer *l = rt_need_layer(rt, layer);

	return l ? run_steps(rt, l, 0, l->nstep, 1, m, buffers, bytes, seed, stream)
	         : -1;
}

int precc_rt_run_step(precc_rt *rt, int layer, int step, long m,
                      void *const *buffers, uint64_t seed, void *stream)
{
	const rt_layer *l = need_step(rt, layer, step);

	if (!l)
		return -1;
	return run_steps(rt, l, step, step + 1, 0, m, buffers, NULL, seed, stream);
}

/* ---- scaling state ------------------------------------------------------ */

static int is_state(const rt_buffer *b) { return strcmp(b->role, "state") == 0; }

precc_state *precc_rt_state_new(const precc_rt *rt)
{
	const rt_artifact *a = rt ? rt->art : NULL;
	char **names = NULL;
	uint32_t *len = NULL;
	size_t n = 0, cap = 0;
	precc_state *st = NULL;

	if (!a) {
		rt_error("state: no artifact directory is loaded (precc_rt_load)");
		return NULL;
	}
	for (int i = 0; i < a->nlayer; i++)
		for (int b = 0; b < a->layer[i].nbuf; b++)
			cap += is_state(&a->layer[i].buf[b]);
	names = calloc(cap + 1, sizeof *names);
	len = calloc(cap + 1, sizeof *len);
	if (!names || !len)
		goto oom;
	for (int i = 0; i < a->nlayer; i++)
		for (int b = 0; b < a->layer[i].nbuf; b++) {
			const rt_buffer *bf = &a->layer[i].buf[b];
			size_t bytes = rt_type_bytes(&bf->type, 1, NULL, NULL), sz;
			if (!is_state(bf))
				continue;
			if (bytes == 0 || bytes > (size_t)RT_MAX_STATE_ELEMS * 4) {
				rt_error("state: layer '%s' buffer '%s' (%s) is more than %ld "
				         "f32 words of state", a->layer[i].fqn, bf->name,
				         bf->type_str, RT_MAX_STATE_ELEMS);
				goto out;
			}
			sz = strlen(a->layer[i].fqn) + strlen(bf->name) + 2;
			if (!(names[n] = malloc(sz)))
				goto oom;
			snprintf(names[n], sz, "%s:%s", a->layer[i].fqn, bf->name);
			len[n++] = (uint32_t)((bytes + 3) / 4);
		}
	st = precc_state_new(a->recipe_hash, a->model_hash, n,
	                     (const char *const *)names, len);
	goto out;
oom:
	rt_error("state: out of memory");
out:
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
	free(len);
	return st;
}

static int state_copy(precc_rt *rt, precc_state *st, int layer,
                      void *const *buffers, int pull)
{
	const rt_layer *l = rt_need_layer(rt, layer);
	uint64_t recipe, model;

	if (!l)
		return -1;
	if (!st || !buffers) {
		rt_error("state: NULL %s", st ? "buffers" : "state");
		return -1;
	}
	rt_state_ids(st, &recipe, &model);
	if (recipe != rt->art->recipe_hash || model != rt->art->model_hash) {
		rt_error("state: this state is for recipe %016llx model %016llx, the "
		         "artifact '%s' for recipe %016llx model %016llx",
		         (unsigned long long)recipe, (unsigned long long)model,
		         rt->art->dir, (unsigned long long)rt->art->recipe_hash,
		         (unsigned long long)rt->art->model_hash);
		return -1;
	}
	for (int b = 0; b < l->nbuf; b++) {
		const rt_buffer *bf = &l->buf[b];
		size_t bytes = rt_type_bytes(&bf->type, 1, NULL, NULL);
		char name[8192];
		precc_state_tensor t;
		long i;
		if (!is_state(bf))
			continue;
		snprintf(name, sizeof name, "%s:%s", l->fqn, bf->name);
		if ((i = precc_state_find(st, name)) < 0 ||
		    precc_state_tensor_at(st, (size_t)i, &t) ||
		    (size_t)t.history_len * 4 < bytes) {
			rt_error("state: no tensor '%s' of %zu bytes in this state", name,
			         bytes);
			return -1;
		}
		if (!buffers[b]) {
			rt_error("state: layer '%s' buffer '%s' is NULL", l->fqn, bf->name);
			return -1;
		}
		if (pull ? precc_rt_download(rt, t.amax_history, buffers[b], bytes)
		         : precc_rt_upload(rt, buffers[b], t.amax_history, bytes))
			return -1;
	}
	return 0;
}

int precc_rt_state_pull(precc_rt *rt, precc_state *st, int layer,
                        void *const *buffers)
{
	return state_copy(rt, st, layer, buffers, 1);
}

int precc_rt_state_push(precc_rt *rt, precc_state *st, int layer,
                        void *const *buffers)
{
	return state_copy(rt, st, layer, buffers, 0);
}
