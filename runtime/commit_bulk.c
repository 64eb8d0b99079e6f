/*
 * commit_bulk.c — the delayed-scaling commit of many layers in one launch
 * per distinct update kernel (precc_rt.h, precc_rt_bulk_commit_*).
 *
 * The table is the rows of every layer's commit (layer.c, rt_commit_rows)
 * grouped by kernel, each group contiguous: group g's CG_BULK_ENTRY runs
 * once over its rows (codegen/k_delayed.c). It is written once, when the
 * bulk commit is made; a run only launches. On the cpu backend a run is
 * precc_rt_commit per layer, the reference the bulk kernel is tested
 * against (tests/codegen/test_emu.c runs the kernel itself).
 *
 * Floor 4 (rt.h) of the runtime; base.h lists the floors.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

typedef struct group {
	int kernel;
	size_t off;     /* byte offset of its first row in the table */
	long rows;
} group;

struct precc_rt_bulk_commit {
	long m;
	int nlayers;             /* the layers with state, in the caller's order */
	int *layer;
	void **saved, **state;   /* per layer (the cpu backend's run) */
	group *group; int ngroup;
	void *table;
};

enum { ROWS_PER_LAYER = 4 };

/* Rows per kernel of the layers' commits: the groups in order of first
 * appearance; *nrows all rows, *bytes the table's size. */
static int plan_groups(precc_rt *rt, int n, const int *layers, group **gp, int *ngp,
                       long *nrows, size_t *bytes)
{
	int nk = rt->art->nkern, ng = 0;
	int *gof = malloc(sizeof *gof * (size_t)(nk + 1));
	group *g = calloc((size_t)nk + 1, sizeof *g);

	*nrows = 0;
	*bytes = 0;
	if (!gof || !g) {
		rt_error("out of memory");
		goto fail;
	}
	for (int k = 0; k < nk; k++)
		gof[k] = -1;
	for (int i = 0; i < n; i++) {
		int r = rt_commit_rows(rt, layers[i], 0, NULL, NULL, NULL, ROWS_PER_LAYER);
		if (r < 0)
			goto fail;
		if (r == 0)
			continue;
		/* checked above (the rows do the whole commit): now the kernels */
		const rt_layer *l = rt_need_layer(rt, layers[i]);
		for (int st = 0; st < l->nstep; st++) {
			if (precc_rt_step_phase(rt, layers[i], st) != 2)
				continue;
			int k = l->step[st].kernel;
			const rt_kdesc *kd = &rt->art->kern[k];
			if (!kd->bulk_entry) {
				rt_error("plan: layer '%s': kernel '%s' has no bulk_entry (a manifest "
				         "from an older precc: rebuild it)", l->fqn, kd->name);
				goto fail;
			}
			if (gof[k] < 0) {
				gof[k] = ng;
				g[ng++].kernel = k;
			}
			int nout = 0;
			for (int q = 0; q < kd->nparam; q++)
				nout += kd->param[q].out;
			g[gof[k]].rows++;
			*bytes += 8 * (size_t)(kd->nparam + nout);
			(*nrows)++;
		}
	}
	size_t off = 0;
	for (int i = 0; i < ng; i++) {
		const rt_kdesc *kd = &rt->art->kern[g[i].kernel];
		int nout = 0;
		for (int q = 0; q < kd->nparam; q++)
			nout += kd->param[q].out;
		g[i].off = off;
		off += 8 * (size_t)(kd->nparam + nout) * (size_t)g[i].rows;
	}
	free(gof);
	*gp = g;
	*ngp = ng;
	return 0;
fail:
	free(gof);
	free(g);
	return -1;
}

size_t precc_rt_bulk_commit_table_bytes(precc_rt *rt, int nlayers, const int *layers)
{
	group *g = NULL;
	int ng = 0;
	long nrows;
	size_t bytes;

	if (!rt || nlayers < 0 || (nlayers && !layers)) {
		rt_error("precc_rt_bulk_commit_table_bytes: bad arguments");
		return 0;
	}
	if (plan_groups(rt, nlayers, layers, &g, &ng, &nrows, &bytes))
		return 0;
	free(g);
	return bytes;
}

void precc_rt_bulk_commit_free(precc_rt_bulk_commit *bc)
{
	if (!bc)
		return;
	free(bc->layer);
	free(bc->saved);
	free(bc->state);
	free(bc->group);
	free(bc);
}

precc_rt_bulk_commit *precc_rt_bulk_commit_new(precc_rt *rt, int nlayers, const int *layers,
                                               long m, void *const *saved,
                                               void *const *state, void *table,
                                               size_t table_bytes)
{
	precc_rt_bulk_commit *bc = calloc(1, sizeof *bc);
	unsigned char *img = NULL;
	long *fill = NULL, nrows;
	size_t bytes;
	rt_commit_row row[ROWS_PER_LAYER];

	if (!bc) {
		rt_error("out of memory");
		return NULL;
	}
	if (!rt || nlayers < 0 || (nlayers && (!layers || !saved || !state))) {
		rt_error("precc_rt_bulk_commit_new: bad arguments");
		goto fail;
	}
	if (plan_groups(rt, nlayers, layers, &bc->group, &bc->ngroup, &nrows, &bytes))
		goto fail;
	if (bytes && (!table || table_bytes < bytes)) {
		rt_error("precc_rt_bulk_commit_new: the table is %zu bytes, it needs %zu "
		         "(precc_rt_bulk_commit_table_bytes)", table ? table_bytes : 0, bytes);
		goto fail;
	}
	if ((uintptr_t)table % 16) {
		rt_error("precc_rt_bulk_commit_new: the table (%p) is not 16-byte aligned", table);
		goto fail;
	}
	bc->m = m;
	bc->table = table;
	bc->layer = malloc(sizeof *bc->layer * (size_t)(nlayers + 1));
	bc->saved = malloc(sizeof *bc->saved * (size_t)(nlayers + 1));
	bc->state = malloc(sizeof *bc->state * (size_t)(nlayers + 1));
	img = calloc(1, bytes + 1);
	fill = calloc((size_t)bc->ngroup + 1, sizeof *fill);
	if (!bc->layer || !bc->saved || !bc->state || !img || !fill) {
		rt_error("out of memory");
		goto fail;
	}
	for (int i = 0; i < nlayers; i++) {
		int r = rt_commit_rows(rt, layers[i], m, saved[i], state[i], row, ROWS_PER_LAYER);
		if (r < 0)
			goto fail;
		if (r == 0)
			continue;
		bc->layer[bc->nlayers] = layers[i];
		bc->saved[bc->nlayers] = saved[i];
		bc->state[bc->nlayers++] = state[i];
		for (int j = 0; j < r; j++) {
			int g = 0;
			while (bc->group[g].kernel != row[j].kernel)
				g++;
			size_t w = 8 * (size_t)row[j].width;
			unsigned char *dst = img + bc->group[g].off + w * (size_t)fill[g]++;
			for (int q = 0; q < row[j].width; q++) {
				uint64_t v = (uint64_t)(uintptr_t)row[j].p[q];
				memcpy(dst + 8 * (size_t)q, &v, 8);
			}
		}
	}
	if (bytes && precc_rt_upload(rt, table, img, bytes))
		goto fail;
	free(img);
	free(fill);
	return bc;
fail:
	free(img);
	free(fill);
	precc_rt_bulk_commit_free(bc);
	return NULL;
}

int precc_rt_bulk_commit_launches(const precc_rt_bulk_commit *bc)
{
	return bc ? bc->ngroup : 0;
}

int precc_rt_bulk_commit_layers(const precc_rt_bulk_commit *bc)
{
	return bc ? bc->nlayers : 0;
}

int precc_rt_bulk_commit_run(precc_rt *rt, precc_rt_bulk_commit *bc, void *stream)
{
	if (!rt || !bc) {
		rt_error("precc_rt_bulk_commit_run: bad arguments");
		return -1;
	}
	if (rt->ops->bulk) {
		if (rt->ops->check_stream(rt, stream))
			return -1;
		for (int g = 0; g < bc->ngroup; g++) {
			rt_kdesc *k = &rt->art->kern[bc->group[g].kernel];
			if (rt->ops->bulk(rt, k, (char *)bc->table + bc->group[g].off,
			                  bc->group[g].rows, stream))
				return -1;
			k->launches++;
		}
		return 0;
	}
	for (int i = 0; i < bc->nlayers; i++)
		if (precc_rt_commit(rt, bc->layer[i], bc->m, bc->saved[i], bc->state[i], stream) < 0)
			return -1;
	return 0;
}
