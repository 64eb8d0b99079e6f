/*
 * layer.c — floor 4 (rt.h): a layer as forward, backward and commit
 * (precc_rt.h) on the caller-owned regions (state, saved, workspace) its
 * buffers live in. The cut itself is the plan floor's (split.c, made once
 * when the manifest loads); calls here only walk its tables and run steps
 * (run.c) through the backend's table: nothing allocates or synchronizes.
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

enum { PH_FWD = RT_PH_FWD, PH_BWD = RT_PH_BWD, PH_COMMIT = RT_PH_COMMIT, NPHASE };
enum { IO_X, IO_W, IO_BIAS, IO_Y, IO_DY, IO_DX, IO_DW, NIO };
_Static_assert(NIO == sizeof ((rt_split *)0)->io / sizeof(int), "plan.h's rt_split.io");

#define REGION_ALIGN RT_REGION_ALIGN
#define SAVED_HEADER 64    /* saved[0..4): the cpu backend's skip flag */

static size_t align_up(size_t n) { return (n + REGION_ALIGN - 1) & ~(size_t)(REGION_ALIGN - 1); }

/* ---- regions --------------------------------------------------------------- */

static const rt_split *need_split(const precc_rt *rt, int layer,
                                  const rt_layer **lp)
{
	const rt_layer *l = rt_need_layer(rt, layer);

	if (!l)
		return NULL;
	if (!l->split) {
		rt_error("plan: layer '%s' was not prepared for forward/backward", l->fqn);
		return NULL;
	}
	if (l->split->why) {
		rt_error("plan: %s", l->split->why);
		return NULL;
	}
	*lp = l;
	return l->split;
}

/* Offsets in saved and workspace at M: the M-independent buffers first
 * (so amaxes and scales sit at offsets no M changes), then the rest.
 * Returns the region sizes; off may be NULL. dw_slot: where backward
 * writes dW for main_grad when the caller passes no dw. */
static void region_layout(const rt_layer *l, const rt_split *s, long m,
                          size_t *off, size_t *saved, size_t *work,
                          size_t *dw_slot)
{
	size_t sv = SAVED_HEADER, wk = 0;

	for (int pass = 0; pass < 2; pass++)
		for (int b = 0; b < l->nbuf; b++) {
			size_t bytes;
			if (s->minv[b] != (pass == 0) || (s->place[b] != PRECC_PLACE_SAVED &&
			                                 s->place[b] != PRECC_PLACE_WORKSPACE))
				continue;
			bytes = align_up(rt_type_bytes(&l->buf[b].type, m, NULL, NULL));
			if (s->place[b] == PRECC_PLACE_SAVED) {
				if (off)
					off[b] = sv;
				sv += bytes;
			} else {
				if (off)
					off[b] = wk;
				wk += bytes;
			}
		}
	if (dw_slot)
		*dw_slot = wk;
	if (s->io[IO_DW] >= 0)
		wk += align_up(rt_type_bytes(&l->buf[s->io[IO_DW]].type, m, NULL, NULL));
	*saved = sv;
	*work = wk;
}

static size_t place_offset(const rt_layer *l, const rt_split *s, int b, long m)
{
	size_t off = 0;
	int pb = s->place[b];

	if (pb == PRECC_PLACE_STATE)
		return s->state_off[b];
	if (pb != PRECC_PLACE_SAVED && pb != PRECC_PLACE_WORKSPACE)
		return 0;
	/* the same walk as region_layout, stopping at b */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < l->nbuf; i++) {
			if (s->minv[i] != (pass == 0) || s->place[i] != pb)
				continue;
			if (i == b)
				return off + (pb == PRECC_PLACE_SAVED ? SAVED_HEADER : 0);
			off += align_up(rt_type_bytes(&l->buf[i].type, m, NULL, NULL));
		}
	return 0;
}

/* The layout at M of the calls that run a layer (forward, backward,
 * commit): region_layout once per M, not per call and buffer. */
static const rt_split *layout_at(const rt_layer *l, const rt_split *s, long m)
{
	rt_split *w = (rt_split *)(uintptr_t)s;   /* the cache only */

	if (w->at_m != m) {
		region_layout(l, s, m, w->at_off, &w->at_saved, &w->at_work, &w->at_dw_slot);
		w->at_m = m;
	}
	return s;
}

/* place_offset from the layout at M (layout_at first) */
static size_t offset_at(const rt_split *s, int b)
{
	int pb = s->place[b];

	if (pb == PRECC_PLACE_STATE)
		return s->state_off[b];
	return pb == PRECC_PLACE_SAVED || pb == PRECC_PLACE_WORKSPACE ? s->at_off[b] : 0;
}

static int fmt_of(const rt_layer *l, const rt_split *s, int io)
{
	return s->io[io] >= 0 ? (int)l->buf[s->io[io]].type.fmt : -1;
}

int precc_rt_layer_sizes(const precc_rt *rt, int layer, long m,
                         precc_layer_sizes *out)
{
	const rt_layer *l = NULL;
	const rt_split *s;
	long rows, cols;

	memset(out, 0, sizeof *out);
	if (!(s = need_split(rt, layer, &l)) || rt_check_m(l, m, (void *const *)s->ptr))
		return -1;
	out->state_bytes = s->state_bytes;
	region_layout(l, s, m, NULL, &out->saved_bytes, &out->workspace_bytes, NULL);
	rt_type_bytes(&l->buf[s->io[IO_X]].type, m, &rows, &cols);
	out->k = cols;
	rt_type_bytes(&l->buf[s->io[IO_Y]].type, m, &rows, &cols);
	out->n = cols;
	out->has_bias = s->io[IO_BIAS] >= 0;
	out->backward_reads_x = s->reads_x;
	out->backward_reads_w = s->reads_w;
	out->has_state = s->has_state;
	out->x_format = fmt_of(l, s, IO_X);
	out->w_format = fmt_of(l, s, IO_W);
	out->y_format = fmt_of(l, s, IO_Y);
	out->dy_format = fmt_of(l, s, IO_DY);
	out->dx_format = fmt_of(l, s, IO_DX);
	out->dw_format = fmt_of(l, s, IO_DW);
	return 0;
}

int precc_rt_buffer_place(const precc_rt *rt, int layer, int i, long m,
                          precc_place *place, size_t *offset)
{
	const rt_layer *l = NULL;
	const rt_split *s;

	if (!(s = need_split(rt, layer, &l)))
		return -1;
	if (i < 0 || i >= l->nbuf) {
		rt_error("plan: buffer %d of layer '%s' is out of range (it has %d)",
		         i, l->fqn, l->nbuf);
		return -1;
	}
	if (m <= 0 && !s->minv[i]) {
		rt_error("plan: layer '%s': M = %ld, the token count must be positive",
		         l->fqn, m);
		return -1;
	}
	*place = (precc_place)s->place[i];
	*offset = place_offset(l, s, i, m);
	return 0;
}

static void bind(const rt_layer *l, const rt_split *s, long m,
                 const precc_layer_ptrs *p, void **buf)
{
	const void *io[NIO] = {p->x, p->w, p->bias, p->y, p->dy, p->dx, p->dw};

	layout_at(l, s, m);
	for (int b = 0; b < l->nbuf; b++) {
		int pl = s->place[b];
		char *base = pl == PRECC_PLACE_STATE ? p->state
		           : pl == PRECC_PLACE_SAVED ? p->saved
		           : pl == PRECC_PLACE_WORKSPACE ? p->workspace : NULL;
		if (pl == PRECC_PLACE_MAIN_GRAD)
			buf[b] = p->dw;   /* accumulated in place: dW is main_grad */
		else if (pl < PRECC_PLACE_STATE)
			buf[b] = (void *)(uintptr_t)io[pl - PRECC_PLACE_X];
		else
			buf[b] = base ? base + offset_at(s, b) : NULL;
	}
}

int precc_rt_layer_bind(const precc_rt *rt, int layer, long m,
                        const precc_layer_ptrs *p, void **buffers)
{
	const rt_layer *l = NULL;
	const rt_split *s;

	if (!(s = need_split(rt, layer, &l)))
		return -1;
	if (!p || !buffers) {
		rt_error("plan: precc_rt_layer_bind needs pointers and a buffers array");
		return -1;
	}
	bind(l, s, m, p, buffers);
	return 0;
}

int precc_rt_step_phase(const precc_rt *rt, int layer, int step)
{
	const rt_layer *l;

	if (!rt || !rt->art || layer < 0 || layer >= rt->art->nlayer + rt->art->ngroup)
		return -1;
	l = &rt->art->layer[layer];
	if (!l->split || l->split->why || step < 0 || step >= l->nstep)
		return -1;
	return l->split->phase[step];
}

/* ---- forward, backward, commit --------------------------------------------- */

/* Is every output of step st (an output amax aside) a caller tensor the
 * caller did not pass? */
static int unwanted(const precc_rt *rt, const rt_layer *l, const rt_split *s,
                    int st, void *const *buf)
{
	const rt_kdesc *k = &rt->art->kern[l->step[st].kernel];
	int outs = 0;

	for (int p = 0; p < k->nparam; p++) {
		int b = l->step[st].arg[p];
		if (!k->param[p].out || s->out_amax[b])
			continue;
		if (s->place[b] >= PRECC_PLACE_STATE || buf[b])
			return 0;
		outs++;
	}
	return outs > 0;
}

/* Runs the steps of one phase in plan order: checks first, then steps.
 * *skipped (cpu) collects nonfinite=skip. */
static int run_phase(precc_rt *rt, const rt_layer *l, const rt_split *s,
                     int ph, long m, void *const *buf, uint64_t seed,
                     void *stream, int *skipped, const unsigned char *skip)
{
	rt_seen seen = {0};

	if (rt_check_m(l, m, buf) || rt->ops->check_stream(rt, stream))
		return -1;
	for (int st = 0; st < l->nstep; st++)
		if (s->phase[st] == ph && !(skip && skip[st]) && !unwanted(rt, l, s, st, buf) &&
		    rt_check_step(rt, l, st, m, buf, NULL, &seen))
			return -1;
	for (int st = 0; st < l->nstep; st++)
		if (s->phase[st] == ph && !(skip && skip[st]) && !unwanted(rt, l, s, st, buf) &&
		    rt_run_step_at(rt, l, st, m, buf, seed, stream, skipped))
			return -1;
	return 0;
}

static int need_region(const rt_layer *l, const char *what, const void *p,
                       size_t bytes)
{
	if (bytes && !p) {
		rt_error("plan: layer '%s': %s is NULL (it needs %zu bytes)", l->fqn,
		         what, bytes);
		return -1;
	}
	if ((uintptr_t)p % 16) {
		rt_error("plan: layer '%s': %s (%p) is not 16-byte aligned", l->fqn,
		         what, p);
		return -1;
	}
	return 0;
}

static int regions(const rt_layer *l, const rt_split *s, long m, void *saved,
                   void *state, void *workspace, size_t *dw_slot)
{
	layout_at(l, s, m);
	if (dw_slot)
		*dw_slot = s->at_dw_slot;
	return need_region(l, "saved", saved, s->at_saved) ||
	       need_region(l, "state", state, s->state_bytes) ||
	       (dw_slot && need_region(l, "workspace", workspace, s->at_work)) ? -1 : 0;
}

/* The cpu backend's skip flag in the saved header (host memory there):
 * forward sets it, backward ORs into it, commit reads it. */
static void skip_flag(precc_rt *rt, void *saved, int skipped, int or_in)
{
	uint32_t v = 0;

	if (rt->backend != PRECC_BACKEND_CPU || !saved)
		return;
	if (or_in)
		memcpy(&v, saved, 4);
	v |= (uint32_t)(skipped != 0);
	memcpy(saved, &v, 4);
}

/* ---- shared inputs (share.c) ------------------------------------------------ */

int precc_rt_layer_input_root(const precc_rt *rt, int layer)
{
	const rt_layer *l = rt_need_layer(rt, layer);

	return l ? l->root : -1;
}

int precc_rt_layer_shared_steps(const precc_rt *rt, int layer)
{
	const rt_layer *l = rt_need_layer(rt, layer);

	return l && l->share ? l->share->nskip : 0;
}

/* The buffers a shared call reads in the root's saved region. */
static int share_bind(precc_rt *rt, const rt_layer *l, long m, const void *root_saved,
                      void **buf)
{
	const rt_share *sh = l->share;

	if (!root_saved)
		return 0;
	if (!sh || !sh->nskip) {
		rt_error("plan: layer '%s': root_saved given, but it shares nothing with %s "
		         "(precc_rt_layer_shared_steps is 0)", l->fqn,
		         l->root >= 0 ? rt->art->layer[l->root].fqn : "another layer");
		return -1;
	}
	const rt_layer *r = &rt->art->layer[l->root];
	if (need_region(l, "root_saved", root_saved, 1))
		return -1;
	for (int b = 0; b < l->nbuf; b++)
		if (sh->alias[b] >= 0)
			buf[b] = (char *)(uintptr_t)root_saved +
			         offset_at(layout_at(r, r->split, m), sh->alias[b]);
	return 0;
}

/* After a shared forward: what the commit reads, into the layer's own
 * saved region (a device-to-device copy on the stream on cuda). */
static int share_copy(precc_rt *rt, const rt_layer *l, long m, void *saved,
                      void *const *buf, void *stream)
{
	for (int b = 0; b < l->nbuf; b++) {
		if (!l->share->copy[b])
			continue;
		void *dst = (char *)saved + offset_at(layout_at(l, l->split, m), b);
		size_t n = rt_type_bytes(&l->buf[b].type, m, NULL, NULL);
		if (rt->ops->copy(rt, dst, buf[b], n, stream))
			return -1;
	}
	return 0;
}

int precc_rt_forward(precc_rt *rt, int layer, long m, const void *x,
                     const void *w, const void *bias, void *y, void *saved,
                     void *state, void *workspace, uint64_t seed,
                     void *stream)
{
	return precc_rt_forward_shared(rt, layer, m, x, w, bias, y, saved, state, workspace, seed,
	                               stream, NULL);
}

int precc_rt_forward_shared(precc_rt *rt, int layer, long m, const void *x,
                            const void *w, const void *bias, void *y, void *saved,
                            void *state, void *workspace, uint64_t seed,
                            void *stream, const void *root_saved)
{
	precc_layer_ptrs p = {x, w, bias, y, NULL, NULL, NULL, state, saved,
	                      workspace};

	return rt_forward_at(rt, layer, m, &p, root_saved, NULL, seed, stream);
}

/* An expert group's offsets: the grouped calls bind them, the others refuse
 * the group's step (there is nothing to bind them from). */
static int bind_offsets(const rt_layer *l, const rt_split *s, const void *offsets)
{
	if (s->offsets < 0)
		return 0;
	if (!offsets) {
		rt_error("plan: '%s' is an expert group's step: run it with "
		         "precc_rt_forward_grouped / precc_rt_backward_grouped (it reads "
		         "the experts' offsets)", l->fqn);
		return -1;
	}
	s->ptr[s->offsets] = (void *)(uintptr_t)offsets;
	return 0;
}

int rt_forward_at(precc_rt *rt, int layer, long m, const precc_layer_ptrs *pp,
                  const void *root_saved, const void *offsets, uint64_t seed,
                  void *stream)
{
	const rt_layer *l = NULL;
	const rt_split *s;
	precc_layer_ptrs p = *pp;
	size_t dw_slot;
	int skipped = 0;

	if (!(s = need_split(rt, layer, &l)) ||
	    rt_check_m(l, m, (void *const *)s->ptr) ||
	    regions(l, s, m, p.saved, p.state, p.workspace, &dw_slot))
		return -1;
	if (!p.bias && s->io[IO_BIAS] >= 0) {
		rt_error("plan: layer '%s' has a bias and it is NULL", l->fqn);
		return -1;
	}
	bind(l, s, m, &p, s->ptr);
	if (bind_offsets(l, s, offsets))
		return -1;
	void *saved = p.saved;
	if (share_bind(rt, l, m, root_saved, s->ptr) ||
	    run_phase(rt, l, s, PH_FWD, m, s->ptr, seed, stream, &skipped,
	              root_saved ? l->share->skip : NULL) ||
	    (root_saved && share_copy(rt, l, m, saved, s->ptr, stream)))
		return -1;
	skip_flag(rt, saved, skipped, 0);
	return 0;
}

/* main_grad[i] += decode(dw[i]), in fp32, on the host (cpu backend). */
static void add_main_grad(const rt_buffer *dwb, long m, const void *dw,
                          float *main_grad)
{
	long rows, cols, n;
	precc_format f = dwb->type.fmt;

	rt_type_bytes(&dwb->type, m, &rows, &cols);
	n = rows * cols;
	if (f == PRECC_FP32) {
		const float *d = dw;
		for (long i = 0; i < n; i++)
			main_grad[i] += d[i];
	} else if (f == PRECC_BF16 || f == PRECC_FP16) {
		const uint16_t *d = dw;
		for (long i = 0; i < n; i++)
			main_grad[i] += precc_decode(f, d[i]);
	} else {
		const uint8_t *d = dw;   /* one byte per <= 8-bit element */
		for (long i = 0; i < n; i++)
			main_grad[i] += precc_decode(f, d[i]);
	}
}

int precc_rt_backward(precc_rt *rt, int layer, long m, const void *x,
                      const void *w, const void *dy, void *dx, void *dw,
                      float *main_grad, void *saved, void *state,
                      void *workspace, uint64_t seed, void *stream)
{
	return precc_rt_backward_shared(rt, layer, m, x, w, dy, dx, dw, main_grad, saved, state,
	                                workspace, seed, stream, NULL);
}

int precc_rt_backward_shared(precc_rt *rt, int layer, long m, const void *x,
                             const void *w, const void *dy, void *dx, void *dw,
                             float *main_grad, void *saved, void *state,
                             void *workspace, uint64_t seed, void *stream,
                             const void *root_saved)
{
	precc_layer_ptrs p = {x, w, NULL, NULL, dy, dx, dw, state, saved,
	                      workspace};

	return rt_backward_at(rt, layer, m, &p, main_grad, root_saved, NULL, seed, stream);
}

int rt_backward_at(precc_rt *rt, int layer, long m, const precc_layer_ptrs *pp,
                   float *main_grad, const void *root_saved, const void *offsets,
                   uint64_t seed, void *stream)
{
	const rt_layer *l = NULL;
	const rt_split *s;
	precc_layer_ptrs p = *pp;
	void *saved = p.saved, *state = p.state, *workspace = p.workspace, *dw = p.dw;
	size_t dw_slot = 0;
	int skipped = 0;

	if (!(s = need_split(rt, layer, &l)) ||
	    rt_check_m(l, m, (void *const *)s->ptr) ||
	    regions(l, s, m, saved, state, workspace, &dw_slot))
		return -1;
	if (s->main_grad >= 0) {
		/* the wgrad kernel computes dW = fl(main_grad + dW) in place */
		if (dw) {
			rt_error("plan: layer '%s': the plan accumulates dW into main_grad "
			         "in the wgrad GEMM's epilogue (output.accumulate): pass "
			         "main_grad (fp32 [n, k]) and dw NULL", l->fqn);
			return -1;
		}
		p.dw = main_grad;
	} else if (main_grad) {
		if (rt->backend != PRECC_BACKEND_CPU) {
			rt_error("plan: layer '%s': main_grad: the plan's wgrad kernel has "
			         "no main_grad epilogue yet, and the runtime adds dW into "
			         "main_grad on the host, so only on the cpu backend; pass "
			         "dw and add it on the device", l->fqn);
			return -1;
		}
		if (s->io[IO_DW] < 0) {
			rt_error("plan: layer '%s': main_grad given, but the plan computes "
			         "no dW", l->fqn);
			return -1;
		}
		if (!dw)
			p.dw = (char *)workspace + dw_slot;
	}
	bind(l, s, m, &p, s->ptr);
	if (bind_offsets(l, s, offsets) ||
	    share_bind(rt, l, m, root_saved, s->ptr) ||
	    run_phase(rt, l, s, PH_BWD, m, s->ptr, seed, stream, &skipped, NULL))
		return -1;
	if (main_grad && s->main_grad < 0)
		add_main_grad(&l->buf[s->io[IO_DW]], m, p.dw, main_grad);
	skip_flag(rt, saved, skipped, 1);
	return 0;
}

int precc_rt_commit(precc_rt *rt, int layer, long m, void *saved,
                    void *state, void *stream)
{
	const rt_layer *l = NULL;
	const rt_split *s;
	precc_layer_ptrs p = {0};
	uint32_t skipped = 0;
	int dummy = 0;

	if (!(s = need_split(rt, layer, &l)) ||
	    rt_check_m(l, m, (void *const *)s->ptr))
		return -1;
	if (!s->has_state)
		return 0;
	if (regions(l, s, m, saved, state, NULL, NULL))
		return -1;
	if (rt->backend == PRECC_BACKEND_CPU)
		memcpy(&skipped, saved, 4);
	if (skipped)
		return 1;
	p.saved = saved;
	p.state = state;
	bind(l, s, m, &p, s->ptr);
	if (run_phase(rt, l, s, PH_COMMIT, m, s->ptr, 0, stream, &dummy, NULL))
		return -1;
	for (int u = 0; u < 2 * l->nupdate; u++)
		if (rt_check_buffer(rt, l, m, s->ptr, NULL, l->update[u / 2][u % 2], NULL))
			return -1;
	return rt_apply_updates(rt, l, m, s->ptr, stream);
}

int precc_rt_commit_buffers(precc_rt *rt, int layer, long m,
                            void *const *buffers, void *stream)
{
	const rt_layer *l = NULL;
	const rt_split *s;
	int dummy = 0;

	if (!(s = need_split(rt, layer, &l)) ||
	    run_phase(rt, l, s, PH_COMMIT, m, buffers, 0, stream, &dummy, NULL))
		return -1;
	for (int u = 0; u < 2 * l->nupdate; u++)
		if (rt_check_buffer(rt, l, m, buffers, NULL, l->update[u / 2][u % 2], NULL))
			return -1;
	return rt_apply_updates(rt, l, m, buffers, stream);
}

int precc_rt_layer_state_init(precc_rt *rt, int layer, void *state)
{
	const rt_layer *l = NULL;
	const rt_split *s;
	unsigned char *img;
	int rc = 0;

	if (!(s = need_split(rt, layer, &l)))
		return -1;
	if (!s->has_state)
		return 0;
	if (need_region(l, "state", state, s->state_bytes))
		return -1;
	if (!(img = calloc(1, s->state_bytes))) {
		rt_error("plan: out of memory");
		return -1;
	}
	for (int b = 0; b < l->nbuf; b++) {
		const rt_buffer *bf = &l->buf[b];
		long rows, cols;
		if (s->place[b] != PRECC_PLACE_STATE || !strchr(bf->type_str, '{') ||
		    bf->type.fmt != PRECC_FP32)
			continue;
		rt_type_bytes(&bf->type, 1, &rows, &cols);
		for (long i = 0; i < rows * cols; i++) {
			float one = 1.0f;
			memcpy(img + s->state_off[b] + 4 * (size_t)i, &one, 4);
		}
	}
	rc = precc_rt_upload(rt, state, img, s->state_bytes);
	free(img);
	return rc;
}

int rt_commit_amaxes(const precc_rt *rt, int layer, long m, size_t *off,
                     size_t *nfloat, int max)
{
	const rt_layer *l = NULL;
	const rt_split *s;
	int n = 0;

	if (!(s = need_split(rt, layer, &l)))
		return -1;
	for (int b = 0; b < l->nbuf; b++)
		if (s->amax[b]) {
			if (n < max) {
				off[n] = place_offset(l, s, b, m);
				nfloat[n] = rt_type_bytes(&l->buf[b].type, 1, NULL, NULL) / 4;
			}
			n++;
		}
	return n;
}

/* ---- the model's state in one buffer ----------------------------------------- */

static size_t layer_state_room(const precc_rt *rt, int l)
{
	const rt_split *s = rt->art->layer[l].split;
	return s && !s->why ? align_up(s->state_bytes) : 0;
}

size_t precc_rt_model_state_offset(const precc_rt *rt, int layer)
{
	size_t off = 0;

	for (int l = 0; rt && rt->art && l < layer && l < rt->art->nlayer; l++)
		off += layer_state_room(rt, l);
	return off;
}

size_t precc_rt_model_state_bytes(const precc_rt *rt)
{
	return rt && rt->art ? precc_rt_model_state_offset(rt, rt->art->nlayer) : 0;
}

int precc_rt_model_state_init(precc_rt *rt, void *state)
{
	size_t off = 0;

	if (!rt || !rt->art || !state) {
		rt_error("plan: precc_rt_model_state_init needs a loaded runtime and a buffer");
		return -1;
	}
	for (int l = 0; l < rt->art->nlayer; l++) {
		size_t room = layer_state_room(rt, l);
		if (room && precc_rt_layer_state_init(rt, l, (char *)state + off))
			return -1;
		off += room;
	}
	return 0;
}

/* The commit of a layer as rows of a bulk-update table (commit_bulk.c):
 * per commit step, its kernel and a row of its params bound to saved and
 * state, then per output the state buffer that an update copies it over
 * (NULL: none). The rows do the whole commit, steps and updates, or the
 * layer is refused. rows NULL: only count (and size) them. */
int rt_commit_rows(precc_rt *rt, int layer, long m, void *saved, void *state,
                   rt_commit_row *rows, int max)
{
	const rt_layer *l = NULL;
	const rt_split *s;
	precc_layer_ptrs p = {0};
	int n = 0, covered = 0;

	if (!(s = need_split(rt, layer, &l)))
		return -1;
	if (!s->has_state)
		return 0;
	if (rows) {
		if (rt_check_m(l, m, (void *const *)s->ptr) ||
		    regions(l, s, m, saved, state, NULL, NULL))
			return -1;
		p.saved = saved;
		p.state = state;
		bind(l, s, m, &p, s->ptr);
	}
	for (int st = 0; st < l->nstep; st++) {
		const rt_kdesc *k = &rt->art->kern[l->step[st].kernel];
		int nout = 0, w;
		if (s->phase[st] != PH_COMMIT)
			continue;
		for (int q = 0; q < k->nparam; q++)
			nout += k->param[q].out;
		w = k->nparam + nout;
		if (n == max || w > RT_BULK_WIDTH) {
			rt_error("plan: layer '%s': its commit is %s for one bulk update", l->fqn,
			         n == max ? "too many steps" : "too wide");
			return -1;
		}
		if (rows) {
			if (rt_check_step(rt, l, st, m, s->ptr, NULL, NULL))
				return -1;
			rt_commit_row *r = &rows[n];
			r->kernel = l->step[st].kernel;
			r->width = w;
			int o = k->nparam;
			for (int q = 0; q < k->nparam; q++) {
				int b = l->step[st].arg[q];
				r->p[q] = s->ptr[b];
				if (!k->param[q].out)
					continue;
				r->p[o] = NULL;
				for (int u = 0; u < l->nupdate; u++)
					if (l->update[u][1] == b) {
						r->p[o] = s->ptr[l->update[u][0]];
						covered++;
					}
				o++;
			}
		} else {
			for (int q = 0; q < k->nparam; q++)
				for (int u = 0; u < l->nupdate; u++)
					covered += k->param[q].out && l->update[u][1] == l->step[st].arg[q];
		}
		n++;
	}
	if (covered != l->nupdate) {
		rt_error("plan: layer '%s': %d of its %d state updates are not outputs of its "
		         "commit steps, so no bulk update can do them", l->fqn,
		         l->nupdate - covered, l->nupdate);
		return -1;
	}
	return n;
}
