/*
 * grouped.c — floor 4 (rt.h): expert groups (precc_rt.h, "expert
 * groups"; issue 29). A group's step is a layer after the manifest's
 * (manifest.h's rt_group), cut by split.c like any other; these calls
 * check what the caller says of the experts (the offsets), bind them, and
 * run the step's phases through layer.c's forward and backward; an output
 * of a GEMM the group does not run grouped is refused (not_grouped).
 *
 * The offsets contract is the IR's (gemm_grouped, ir/interp/grouped.c):
 * one i32 per expert, its END offset into the token rows. cpu checks them
 * before anything runs; cuda cannot read them without a sync, so each
 * call enqueues an asynchronous copy into pinned host memory (the
 * backend's offs_snapshot) and precc_rt_grouped_check reads those later.
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static const rt_group *need_group(const precc_rt *rt, int group)
{
	if (!rt || !rt->art) {
		rt_error("plan: no artifact directory is loaded (precc_rt_load)");
		return NULL;
	}
	if (group < 0 || group >= rt->art->ngroup) {
		rt_error("plan: expert group %d is out of range (the manifest has %d)", group,
		         rt->art->ngroup);
		return NULL;
	}
	return &rt->art->group[group];
}

int precc_rt_group_count(const precc_rt *rt)
{
	return rt && rt->art ? rt->art->ngroup : 0;
}

const char *precc_rt_group_name(const precc_rt *rt, int group)
{
	return rt && rt->art && group >= 0 && group < rt->art->ngroup
	       ? rt->art->group[group].name : NULL;
}

int precc_rt_group_find(const precc_rt *rt, const char *name)
{
	for (int g = 0; name && rt && rt->art && g < rt->art->ngroup; g++)
		if (!strcmp(rt->art->group[g].name, name))
			return g;
	return -1;
}

int precc_rt_group_expert_layer(const precc_rt *rt, int group, int expert)
{
	const rt_group *g = rt && rt->art && group >= 0 && group < rt->art->ngroup
	                    ? &rt->art->group[group] : NULL;

	return g && expert >= 0 && expert < g->experts ? g->expert[expert] : -1;
}

static long gcd(long a, long b) { while (b) { long t = a % b; a = b; b = t; } return a; }

/* Where the recipe scales along the tokens in blocks (an operand M/B wide
 * or high of a grouped GEMM: the blockwise and MX wgrads' xᵀ and dYᵀ
 * scales), each expert's window must start on a block (gemm_grouped
 * refuses a block straddling two experts, ir/interp/grouped.c): the lcm
 * of those B over the grouped GEMM steps (those that read the offsets) of
 * phase ph (-1: every phase). */
static long token_align(const rt_artifact *a, const rt_layer *l, const rt_group *g, int ph)
{
	const rt_split *s = l->split;
	long al = 1;

	for (int st = 0; s && !s->why && st < l->nstep; st++) {
		const rt_step *sp = &l->step[st];
		const rt_kdesc *k = &a->kern[sp->kernel];
		int grouped = 0;
		if (ph >= 0 && s->phase[st] != ph)
			continue;
		for (int p = 0; p < k->nparam; p++)
			grouped |= sp->arg[p] == g->offs;
		for (int p = 0; grouped && p < k->nparam; p++) {
			const rt_type *t = &l->buf[sp->arg[p]].type;
			for (int d = 0; d < t->rank; d++)
				if (t->dim[d] < -1)
					al = al / gcd(al, -t->dim[d]) * -t->dim[d];
		}
	}
	return al;
}

int precc_rt_group_info(const precc_rt *rt, int group, precc_group_info *info)
{
	const rt_group *g = need_group(rt, group);

	memset(info, 0, sizeof *info);
	if (!g)
		return -1;
	const rt_layer *l = &rt->art->layer[rt->art->nlayer + group];
	info->name = g->name;
	info->experts = g->experts;
	for (int k = 0; k < 3; k++)
		info->grouped[k] = g->gemm[k];
	info->n = g->n;
	info->k = g->k;
	info->layer = rt->art->nlayer + group;
	info->token_align = token_align(rt->art, l, g, -1);
	info->token_align_fwd = token_align(rt->art, l, g, RT_PH_FWD);
	return 0;
}

int precc_rt_group_sizes(const precc_rt *rt, int group, long m_total, precc_layer_sizes *s)
{
	if (!need_group(rt, group)) {
		memset(s, 0, sizeof *s);
		return -1;
	}
	return precc_rt_layer_sizes(rt, rt->art->nlayer + group, m_total, s);
}

/* The offsets of a call at m_total, host memory (cpu, or a cuda snapshot):
 * 0, or -1 with the reason. */
static int offsets_ok(const rt_group *g, const char *call, long m, const int32_t *o, long align)
{
	int32_t prev = 0;

	for (int e = 0; e < g->experts; e++) {
		int32_t v = o[e];
		if (v < 0) {
			rt_error("plan: group '%s': %s: offsets[%d] = %d is negative (offsets are the "
			         "experts' end rows, 0 <= offsets[e] <= m_total)", g->name, call, e, v);
			return -1;
		}
		if (v < prev) {
			rt_error("plan: group '%s': %s: offsets are not monotone: offsets[%d] = %d < "
			         "offsets[%d] = %d (the tokens must be sorted by expert)", g->name, call,
			         e, v, e - 1, prev);
			return -1;
		}
		if (v > m) {
			rt_error("plan: group '%s': %s: offsets[%d] = %d exceeds m_total = %ld", g->name,
			         call, e, v, m);
			return -1;
		}
		if (v > prev && prev % align) {
			rt_error("plan: group '%s': %s: expert %d starts at row %d, not a multiple of "
			         "%ld: the recipe scales xᵀ and dYᵀ in %ld-token blocks for the grouped "
			         "wgrad, and a block may not straddle two experts (pad each expert's "
			         "rows to a multiple of %ld; precc_group_info.token_align)", g->name, call,
			         e, prev, align, align, align);
			return -1;
		}
		prev = v;
	}
	return 0;
}

/* The checks every grouped call makes before it runs anything: the count,
 * the pointer (where the backend's buffers live), and on cpu the values. */
static int snapshot(precc_rt *rt, int group, const char *call, long m, const int32_t *offsets,
                    long align, void *stream);

static int check_offsets(precc_rt *rt, int group, const char *call, long m,
                         const int32_t *offsets, int noffsets, int ph, void *stream)
{
	const rt_group *g = &rt->art->group[group];
	const rt_layer *l = &rt->art->layer[rt->art->nlayer + group];
	const rt_split *s = l->split;

	if (!s || s->why) {
		rt_error("plan: group '%s': %s", g->name, s ? s->why : "not prepared");
		return -1;
	}
	if (noffsets != g->experts) {
		rt_error("plan: group '%s': %s: %d offsets for %d experts (one end offset per "
		         "expert)", g->name, call, noffsets, g->experts);
		return -1;
	}
	if (!offsets) {
		rt_error("plan: group '%s': %s: offsets is NULL", g->name, call);
		return -1;
	}
	if (m <= 0) {
		rt_error("plan: group '%s': %s: m_total = %ld, the token count must be positive",
		         g->name, call, m);
		return -1;
	}
	s->ptr[g->offs] = (void *)(uintptr_t)offsets;
	if (rt_check_buffer(rt, l, m, s->ptr, NULL, g->offs, NULL))
		return -1;
	if (rt->backend == PRECC_BACKEND_CPU)
		return offsets_ok(g, call, m, offsets, token_align(rt->art, l, g, ph));
	return snapshot(rt, group, call, m, offsets, token_align(rt->art, l, g, ph), stream);
}

/* An output of a GEMM the group does not run grouped (precc build left it
 * per expert: driver/grouped.c, frontend/lower.c group_refusal): its step
 * has no such output, so a pointer given for it would be left unwritten;
 * refused, rather than run per expert behind the caller's back (cuda
 * would need the offsets on the host). */
static int not_grouped(const rt_group *g, const char *call, int gemm, const void *p,
                       const char *what)
{
	static const char *const g3[] = {"fprop", "dgrad", "wgrad"};

	if (!p || g->gemm[gemm])
		return 0;
	rt_error("plan: group '%s': %s: %s given, but the group's %s is not grouped (precc "
	         "build left it per expert): pass %s = NULL and run each expert's %s with its "
	         "own layer (precc_rt_group_expert_layer)", g->name, call, what, g3[gemm], what,
	         g3[gemm]);
	return -1;
}

int precc_rt_forward_grouped(precc_rt *rt, int group, long m_total,
                             const int32_t *offsets, int noffsets,
                             const void *x, const void *w, void *y,
                             void *saved, void *state, void *workspace,
                             uint64_t seed, void *stream)
{
	static const char call[] = "precc_rt_forward_grouped";
	precc_layer_ptrs p = {x, w, NULL, y, NULL, NULL, NULL, state, saved, workspace};
	const rt_group *g = need_group(rt, group);

	if (!g || not_grouped(g, call, 0, y, "y") ||
	    check_offsets(rt, group, call, m_total, offsets, noffsets, RT_PH_FWD, stream))
		return -1;
	return rt_forward_at(rt, rt->art->nlayer + group, m_total, &p, NULL, offsets, seed, stream);
}

int precc_rt_backward_grouped(precc_rt *rt, int group, long m_total,
                              const int32_t *offsets, int noffsets,
                              const void *x, const void *w, const void *dy,
                              void *dx, void *dw, float *main_grad,
                              void *saved, void *state, void *workspace,
                              uint64_t seed, void *stream)
{
	static const char call[] = "precc_rt_backward_grouped";
	precc_layer_ptrs p = {x, w, NULL, NULL, dy, dx, dw, state, saved, workspace};
	const rt_group *g = need_group(rt, group);

	if (!g || not_grouped(g, call, 1, dx, "dx") || not_grouped(g, call, 2, dw, "dw") ||
	    not_grouped(g, call, 2, main_grad, "main_grad") ||
	    check_offsets(rt, group, call, m_total, offsets, noffsets, -1, stream))
		return -1;
	return rt_backward_at(rt, rt->art->nlayer + group, m_total, &p, main_grad, NULL, offsets,
	                      seed, stream);
}

/* ---- cuda: the offsets checked after the fact ------------------------------
 * A ring of PRECC_GROUPED_CHECKS slots of pinned host memory, one per
 * grouped call (the largest group's offsets each), made at load: a call
 * enqueues a copy of its offsets into the next slot on its stream and
 * notes what to check them against; precc_rt_grouped_check, after the
 * caller's sync, checks the calls since the last check (the newest
 * PRECC_GROUPED_CHECKS of them). No allocation, no sync in a call. */
typedef struct rt_gcheck {
	int32_t *slot;            /* PRECC_GROUPED_CHECKS x maxe, pinned */
	int maxe;
	long next, from;          /* calls made; the first not checked yet */
	struct { int group; const char *call; long m, align; } meta[PRECC_GROUPED_CHECKS];
} rt_gcheck;

int rt_grouped_prepare(precc_rt *rt, const rt_artifact *a)
{
	rt_gcheck *c;
	int maxe = 0;

	if (!a->ngroup || !rt->ops->download_async)
		return 0;
	for (int g = 0; g < a->ngroup; g++)
		maxe = a->group[g].experts > maxe ? a->group[g].experts : maxe;
	if (!(c = calloc(1, sizeof *c))) {
		rt_error("plan: out of memory");
		return -1;
	}
	c->maxe = maxe;
	if (!(c->slot = rt->ops->host_alloc(rt, (size_t)PRECC_GROUPED_CHECKS * (size_t)maxe * 4))) {
		free(c);
		return -1;
	}
	rt->gcheck = c;
	return 0;
}

void rt_grouped_release(precc_rt *rt)
{
	if (!rt->gcheck)
		return;
	rt->ops->host_free(rt, rt->gcheck->slot);
	free(rt->gcheck);
	rt->gcheck = NULL;
}

static int snapshot(precc_rt *rt, int group, const char *call, long m, const int32_t *offsets,
                    long align, void *stream)
{
	rt_gcheck *c = rt->gcheck;

	if (!c)
		return 0;
	int at = (int)(c->next % PRECC_GROUPED_CHECKS);
	const rt_group *g = &rt->art->group[group];
	if (rt->ops->download_async(rt, c->slot + (size_t)at * (size_t)c->maxe, offsets,
	                            (size_t)g->experts * 4, stream))
		return -1;
	c->meta[at].group = group;
	c->meta[at].call = call;
	c->meta[at].m = m;
	c->meta[at].align = align;
	c->next++;
	return 0;
}

int precc_rt_grouped_check(precc_rt *rt)
{
	rt_gcheck *c = rt ? rt->gcheck : NULL;

	if (!c)
		return 0;
	long from = c->next - c->from > PRECC_GROUPED_CHECKS ? c->next - PRECC_GROUPED_CHECKS
	                                                     : c->from;
	long lost = from - c->from;
	for (long i = from; i < c->next; i++) {
		int at = (int)(i % PRECC_GROUPED_CHECKS);
		const rt_group *g = &rt->art->group[c->meta[at].group];
		if (offsets_ok(g, c->meta[at].call, c->meta[at].m, c->slot + (size_t)at * (size_t)c->maxe,
		               c->meta[at].align)) {
			char msg[RT_ERR_MAX];
			snprintf(msg, sizeof msg, "%s (grouped call %ld since the load%s)",
			         precc_rt_last_error(), i + 1,
			         lost ? "; older unchecked calls were dropped" : "");
			rt_error("%s", msg);
			c->from = c->next;
			return -1;
		}
	}
	c->from = c->next;
	return 0;
}
