/*
 * pipeline.c — the list of passes, in order, and the targets they know.
 * Each pass records its decisions in the IR (pass attributes and '#'
 * comments, docs/passes.md), so a dump after any pass shows them; the
 * verifier runs after each (linear in the funcs: name tables, not scans),
 * and a failure is a bug in that pass. Big modules print each pass on a
 * tty (or with PRECC_PROGRESS=1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "passes.h"

static const struct { const char *name; void (*run)(Module *, const Target *); } pipeline[] = {
	{"legalize", legalize},     /* target caps, alignment, fallbacks */
	{"merge", merge},           /* a layer's fprop/dgrad/wgrad → one step func */
	{"fuse", fuse},             /* which ops share a kernel, and why */
	{"partition", partition},   /* kernels become kernel funcs, calls */
	{"dedupe", dedupe},         /* identical kernels share one (content hash) */
	{"schedule", schedule},     /* threads, tiles, vectors, grid, smem */
};
#define NPASS (int)(sizeof pipeline / sizeof pipeline[0])

/* The reference parts: L40S (sm_89), H100/H200 (sm_90, sm_90a). */
static const Target targets[] = {
	{"sm_89", 89, false, false, true, false, 142, 99 << 10, 142L * (80 << 10), true, GEMM_CLUSTER_1X1},
	{"sm_90", 90, false, true, true, false, 132, 227 << 10, 132L * (200 << 10), true, GEMM_CLUSTER_1X1},
	{"sm_90a", 90, true, true, true, false, 132, 227 << 10, 132L * (200 << 10), true, GEMM_CLUSTER_1X1},
};
const char *const target_names = "sm_89, sm_90, sm_90a";

const Target *
target_by_name(const char *s)
{
	for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++)
		if (!strcmp(targets[k].name, s))
			return &targets[k];
	return NULL;
}

int
pass_count(void)
{
	return NPASS;
}

const char *
pass_name(int k)
{
	return k >= 0 && k < NPASS ? pipeline[k].name : NULL;
}

static void
verify_or_abort(const Module *m, const char *pass)
{
	char err[4096];

	if (ir_verify(m, err, sizeof err) == 0)
		return;
	fprintf(stderr, "precc: internal error: the IR after %s does not verify:\n%s\n", pass, err);
	abort();
}

/* As lower.c's lower_progress_wanted: the same switch for the passes
 * (3 funcs per layer before merge). */
static bool
progress_wanted(int nfn)
{
	const char *e = getenv("PRECC_PROGRESS");

	if (e && *e)
		return strcmp(e, "0") != 0;
	return nfn >= 3 * 2000 && isatty(2);
}

void
passes_run(Module *m, const PassOptions *o)
{
	Target t = *(o->target ? o->target : target_by_name("sm_90a"));
	bool show = progress_wanted(m->nfn);

	if (o->no_grid_barrier)
		t.grid_barrier = false;
	t.cluster = o->cluster;
	for (int k = 0; k < NPASS; k++) {
		if (show) {
			fprintf(stderr, "\rprecc: %s: pass %d/%d %-10s (%d funcs)", t.name, k + 1, NPASS,
			        pipeline[k].name, m->nfn);
			fflush(stderr);
		}
		pipeline[k].run(m, &t);
		verify_or_abort(m, pipeline[k].name);
		if (o->print_after)
			o->print_after(pipeline[k].name, m, o->ctx);
		if (o->stop_after && !strcmp(o->stop_after, pipeline[k].name))
			break;
	}
	if (show)
		fprintf(stderr, "\rprecc: %s: passes done (%d funcs)%20s\n", t.name, m->nfn, "");
}
