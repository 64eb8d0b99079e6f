/*
 * share.c — linears that read one tensor (q, k and v read the same X: the
 * manifest's shares_input). A layer's forward steps that its root runs
 * alike on the same tensors need not run twice: same kernel, inputs that
 * are the shared x, its delayed-scaling state (x.*: one tensor has one
 * amax history, whoever reads it) or outputs of such steps. Their outputs
 * are the root's bytes; a shared forward (precc_rt_forward_shared) reads
 * them in the root's saved region, where the root keeps them (promoted
 * from workspace to saved), and copies the few the commit reads (the amax
 * of delayed scaling) into the layer's own saved region, so that commit,
 * the data-parallel amax reduce and the bulk commit work as before.
 *
 * docs/runtime.md, "Shared inputs". driver/stats.c counts the same steps
 * as bytes a step need not move.
 *
 * Floor 2 (plan.h) of the runtime; base.h lists the floors.
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

void rt_share_free(rt_share *s)
{
	if (!s)
		return;
	free(s->skip);
	free(s->alias);
	free(s->copy);
	free(s);
}

static int is_in(const rt_kdesc *k, int p)
{
	return !k->param[p].out;
}

/* The root's forward step that runs kernel kern on the inputs want[]
 * (buffers of the root; -1 where the param is an output), or -1. */
static int root_step(const rt_layer *r, int kern, const int *want, int np)
{
	for (int st = 0; st < r->nstep; st++) {
		if (r->step[st].kernel != kern || r->split->phase[st] != RT_PH_FWD)
			continue;
		int same = 1;
		for (int p = 0; p < np && same; p++)
			same = want[p] < 0 || r->step[st].arg[p] == want[p];
		if (same)
			return st;
	}
	return -1;
}

/* Layer l's share of its root r; 0 with s->nskip 0 when nothing is. */
static int plan_layer(const rt_artifact *a, const rt_layer *l, rt_layer *r, rt_share *s)
{
	int nb = l->nbuf;
	int *eq = malloc(((size_t)nb + 1) * sizeof *eq);     /* l's buffer -> r's */
	int *from = malloc(((size_t)l->nstep + 1) * sizeof *from);
	int want[64];

	if (!eq || !from) {
		free(eq);
		free(from);
		return -1;
	}
	for (int b = 0; b < nb; b++)
		eq[b] = s->alias[b] = -1;
	int x = l->split->io[0], rx = r->split->io[0];
	if (x < 0 || rx < 0 || strcmp(l->buf[x].type_str, r->buf[rx].type_str))
		goto done;
	eq[x] = rx;
	size_t nx = strlen(l->buf[x].name);
	for (int b = 0; b < nb; b++) {
		const rt_buffer *lb = &l->buf[b];
		if (strcmp(lb->role, "state") || strncmp(lb->name, l->buf[x].name, nx) || lb->name[nx] != '.')
			continue;
		for (int rb = 0; rb < r->nbuf; rb++)
			if (!strcmp(r->buf[rb].role, "state") && !strcmp(r->buf[rb].name, lb->name) &&
			    !strcmp(r->buf[rb].type_str, lb->type_str))
				eq[b] = rb;
	}
	/* steps fed by shared tensors only, which the root runs alike */
	for (int st = 0; st < l->nstep; st++) {
		const rt_kdesc *k = &a->kern[l->step[st].kernel];
		int ok = l->split->phase[st] == RT_PH_FWD && k->nparam <= 64;
		from[st] = -1;
		for (int p = 0; ok && p < k->nparam; p++) {
			int b = l->step[st].arg[p];
			want[p] = is_in(k, p) ? eq[b] : -1;
			ok = !is_in(k, p) || eq[b] >= 0;
		}
		if (!ok || (from[st] = root_step(r, l->step[st].kernel, want, k->nparam)) < 0)
			continue;
		for (int p = 0; p < k->nparam; p++)
			if (!is_in(k, p))
				eq[l->step[st].arg[p]] = r->step[from[st]].arg[p];
		s->skip[st] = 1;
	}
	/* what a skipped step writes and a step that runs reads (the fprop
	 * GEMM's x.q, the wgrad GEMM's x.q.t, the commit's x.amax) is read in
	 * the root's saved region; the commit's is copied into the layer's */
	for (int st = 0; st < l->nstep; st++) {
		const rt_kdesc *k = &a->kern[l->step[st].kernel];
		if (s->skip[st])
			continue;
		for (int p = 0; p < k->nparam; p++) {
			int b = l->step[st].arg[p];
			if (!is_in(k, p) || l->split->place[b] < PRECC_PLACE_SAVED || eq[b] < 0
			    || !strcmp(l->buf[b].role, "state") || b == x)
				continue;
			if (strcmp(l->buf[b].type_str, r->buf[eq[b]].type_str))
				goto none;
			s->alias[b] = eq[b];
			if (l->split->phase[st] == RT_PH_COMMIT)
				s->copy[b] = 1;
		}
	}
	for (int b = 0; b < nb; b++)
		if (s->alias[b] >= 0) {
			/* the root keeps it for the layer's forward and backward */
			if (r->split->place[s->alias[b]] == PRECC_PLACE_WORKSPACE)
				r->split->place[s->alias[b]] = PRECC_PLACE_SAVED;
			if (r->split->place[s->alias[b]] != PRECC_PLACE_SAVED)
				goto none;
		}
	for (int st = 0; st < l->nstep; st++)
		s->nskip += s->skip[st];
	goto done;
none:
	memset(s->skip, 0, (size_t)l->nstep);
	memset(s->copy, 0, (size_t)nb);
	for (int b = 0; b < nb; b++)
		s->alias[b] = -1;
	s->nskip = 0;
done:
	free(eq);
	free(from);
	return 0;
}

int rt_share_plan(rt_artifact *a)
{
	for (int i = 0; i < a->nlayer; i++) {
		rt_layer *l = &a->layer[i];
		if (l->root < 0)
			continue;
		rt_layer *r = &a->layer[l->root];
		if (!l->split || l->split->why || !r->split || r->split->why)
			continue;
		rt_share *s = calloc(1, sizeof *s);
		if (!s || !(s->skip = calloc((size_t)l->nstep + 1, 1)) ||
		    !(s->alias = calloc((size_t)l->nbuf + 1, sizeof *s->alias)) ||
		    !(s->copy = calloc((size_t)l->nbuf + 1, 1)) || plan_layer(a, l, r, s)) {
			rt_share_free(s);
			rt_error("plan: out of memory");
			return -1;
		}
		l->share = s;
	}
	return 0;
}
