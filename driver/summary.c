/*
 * summary.c — what a build says when it is done: one line on stderr,
 *
 *	precc build: wrote 24 kernels x 2 targets (sm_90a, sm_89) to out in 3.1 s (cache: 20 of 48 hits)
 *
 * or, with --json, the same figures as one JSON object on stdout
 * (docs/artifacts.md, "Build summary"), for scripts and CI.
 */
#include <stdio.h>
#include <stdlib.h>
#include <cjson/cJSON.h>
#include "build.h"
#include "recipe.h"

void
build_summary(const Build *b, int whole, double total_ms, const char *rname, const char *mname)
{
	int per[MAXTARGET] = {0}, hits = 0, same = 1;

	for (int k = 0; k < b->njobs; k++) {
		per[b->jobs[k].t]++;
		hits += whole || b->jobs[k].hit;
	}
	for (int t = 1; t < b->ntg; t++)
		same &= per[t] == per[0];
	if (b->json) {
		cJSON *o = cJSON_CreateObject(), *tg = cJSON_CreateObject(), *ms = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "recipe", rname);
		cJSON_AddStringToObject(o, "model", mname);
		/* paths need not be UTF-8; JSON must (names are refused, frontend) */
		char *out = text_lossy(b->out);
		cJSON_AddStringToObject(o, "out", out);
		free(out);
		cJSON_AddStringToObject(o, "manifest", "manifest.json");
		for (int t = 0; t < b->ntg; t++)
			cJSON_AddNumberToObject(tg, b->tg[t]->name, per[t]);
		cJSON_AddItemToObject(o, "kernels", tg);
		cJSON_AddNumberToObject(o, "kernel_builds", b->njobs);
		cJSON_AddNumberToObject(o, "cache_hits", hits);
		cJSON_AddBoolToObject(o, "whole_build_from_cache", whole);
		cJSON_AddBoolToObject(o, "cache", b->cache != NULL);
		cJSON_AddBoolToObject(o, "cubins", b->ptxas[0] != 0);
		if (b->ptxas[0]) {
			char *px = text_lossy(b->ptxas);
			cJSON_AddStringToObject(o, "ptxas", px);
			free(px);
			cJSON_AddStringToObject(o, "ptxas_from", b->ptxas_from);
		}
		cJSON_AddNumberToObject(o, "layers", b->nlayers);
		if (!whole)     /* driver/group.c's classes (0: grouping off) */
			cJSON_AddNumberToObject(o, "layer_classes", b->nclass);
		cJSON_AddNumberToObject(ms, "front", b->ms_front);
		cJSON_AddNumberToObject(ms, "lower_passes", b->ms_passes);
		cJSON_AddNumberToObject(ms, "kernels", b->ms_compile);
		cJSON_AddNumberToObject(ms, "write", b->ms_write);
		cJSON_AddNumberToObject(ms, "total", total_ms);
		cJSON_AddItemToObject(o, "ms", ms);
		char *s = cJSON_Print(o);
		if (s)
			printf("%s\n", s);
		cJSON_free(s);
		cJSON_Delete(o);
		return;
	}
	fprintf(stderr, "precc build: wrote ");
	if (same)
		fprintf(stderr, "%d kernel%s x %d target%s (", per[0], per[0] == 1 ? "" : "s", b->ntg,
		        b->ntg == 1 ? "" : "s");
	for (int t = 0; t < b->ntg; t++)
		if (same)
			fprintf(stderr, "%s%s", t ? ", " : "", b->tg[t]->name);
		else
			fprintf(stderr, "%s%d kernels for %s", t ? ", " : "", per[t], b->tg[t]->name);
	fprintf(stderr, "%s to %s in %.1f s (cache: ", same ? ")" : "", b->out, total_ms / 1000.0);
	if (!b->cache)
		fprintf(stderr, "off)\n");
	else if (whole)
		fprintf(stderr, "the whole build, %d kernel files)\n", b->njobs);
	else
		fprintf(stderr, "%d of %d hits)\n", hits, b->njobs);
	if (b->ptxas[0])
		fprintf(stderr, "precc build: ptxas %s (from %s)\n", b->ptxas, b->ptxas_from);
}
