/*
 * passes.h — the passes' interface: the targets they know, the options of
 * a run, and one entry point per pass file (docs/passes.md). The pipeline
 * (pipeline.c) is the flat list
 *
 *	legalize → merge → fuse → partition → dedupe → schedule
 *
 * each entry taking the module and the target; the verifier runs after
 * every pass (a failure there is a bug in the pass: abort).
 */
#ifndef PRECC_PASSES_H
#define PRECC_PASSES_H

#include <stdbool.h>
#include "ir.h"

/* The wgmma GEMM's cluster (schedule.c; precc build --cluster): 1x1, the
 * default until a GPU settles whether multicast pays; 2x1 wherever the
 * kernel family takes it; auto by DeepGEMM's rule (docs/passes.md). */
typedef enum GemmCluster { GEMM_CLUSTER_1X1, GEMM_CLUSTER_AUTO, GEMM_CLUSTER_2X1 } GemmCluster;

typedef struct Target {
	const char *name;      /* sm_89, sm_90, sm_90a */
	int sm;                /* 89, 90 */
	bool wgmma;            /* wgmma.mma_async, setmaxnreg: sm_90a only */
	bool tma;              /* cp.async.bulk.tensor, mbarrier: sm_90 and sm_90a */
	bool cvt_fp8;          /* cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32: sm_89+ */
	bool cvt_mx;           /* cvt ... {e2m1x2,e3m2x2,e2m3x2,ue8m0x2}, cvt.rs:
	                          sm_100a+ and PTX 8.6+, so none of ours */
	int sms;               /* SMs of the reference part (H100/H200 132, L40S 142) */
	long smem_cta;         /* dynamic shared memory one CTA may use, bytes */
	long onchip;           /* bytes a grid-wide barrier kernel may keep on chip
	                          across all co-resident CTAs (smem_cta x sms) */
	bool grid_barrier;     /* fuse may choose one cooperative kernel with a
	                          grid-wide barrier (amax_scheme=grid) */
	GemmCluster cluster;   /* the wgmma GEMMs' clusters (PassOptions') */
} Target;

typedef struct PassOptions {
	const Target *target;
	/* called after each pass with its name; NULL: no dumps */
	void (*print_after)(const char *pass, const Module *, void *ctx);
	void *ctx;
	const char *stop_after; /* last pass to run; NULL: all */
	bool no_grid_barrier;   /* never amax_scheme=grid: two kernels instead
	                           (for a code generator without grid barriers) */
	GemmCluster cluster;    /* precc build --cluster (default 1x1) */
} PassOptions;

/* pipeline.c */
const Target *target_by_name(const char *);     /* NULL if unknown */
extern const char *const target_names;          /* "sm_89, sm_90, sm_90a" */
int pass_count(void);
const char *pass_name(int);
void passes_run(Module *, const PassOptions *);

/* One public entry per pass file. */
void legalize(Module *, const Target *);        /* legalize.c */
void merge(Module *, const Target *);           /* merge.c */
void fuse(Module *, const Target *);            /* fuse.c */
void partition(Module *, const Target *);       /* partition.c */
void dedupe(Module *, const Target *);          /* dedupe.c */
void schedule(Module *, const Target *);        /* schedule.c */
void drop_variants(Module *);    /* schedule.c: remove m_variant copies (passes rerun) */

#endif
