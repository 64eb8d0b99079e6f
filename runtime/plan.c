/*
 * plan.c — floor 2 (plan.h): a layer's plan as data. Which kernel a step
 * launches at M, its grid, the M checks, and the planning done once per
 * manifest (the cut, split.c; shared inputs, share.c).
 */
#include <stdlib.h>

#include "precc/grid.h"
#include "plan.h"

int rt_check_m(const rt_layer *l, long m, void *const *buffers)
{
	if (m <= 0) {
		rt_error("plan: layer '%s': M = %ld, the token count must be positive",
		         l->fqn, m);
		return -1;
	}
	if (m % l->m_multiple) {
		rt_error("plan: layer '%s': M = %ld is not a multiple of %ld (its "
		         "kernels' block size along M)", l->fqn, m, l->m_multiple);
		return -1;
	}
	if (!buffers) {
		rt_error("plan: layer '%s': buffers is NULL (it needs %d)", l->fqn,
		         l->nbuf);
		return -1;
	}
	return 0;
}

int rt_step_kernel(const rt_artifact *a, int k, long m)
{
	const rt_kdesc *d = &a->kern[k];
	return d->var >= 0 && m >= d->var_m_min ? d->var : k;
}

int rt_kernel_grid(const rt_kdesc *k, const rt_layer *l, const rt_step *st, long m,
                   unsigned grid[3])
{
	precc_grid_phase ph[RT_MAXPHASE];
	int np = k->nphase ? k->nphase : 1;

	for (int p = 0; p < np && p < RT_MAXPHASE; p++) {
		rt_geom one = {k->tiled, k->data, k->elems_per_cta, k->tile_rows,
		               k->tile_cols};
		const rt_geom *g = k->nphase ? &k->phase[p] : &one;
		const rt_extent *e = rt_buffer_extent(l, st->arg[g->data], m);
		ph[p] = (precc_grid_phase){g->tiled, e->rows, e->cols, g->elems_per_cta,
		                           g->tile_rows, g->tile_cols};
	}
	return precc_grid(ph, np, grid);
}


int rt_plan_artifact(rt_artifact *a)
{
	return rt_layers_split(a) || rt_share_plan(a) ? -1 : 0;
}

void rt_plan_free(rt_artifact *a)
{
	for (int i = 0; a && i < a->nlayer + a->ngroup; i++) {
		rt_split_free(a->layer[i].split);
		rt_share_free(a->layer[i].share);
		a->layer[i].split = NULL;
		a->layer[i].share = NULL;
	}
}
