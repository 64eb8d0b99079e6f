/*
 * build.h — what build.c (precc build: the command, the jobs, ptxas, the
 * cache) and artifacts.c (manifest.json and the generated C) share.
 */
#ifndef PRECC_BUILD_H
#define PRECC_BUILD_H

#include <pthread.h>
#include <stdint.h>
#include "cache.h"
#include "codegen.h"
#include "ir.h"
#include "passes.h"

#define MAXTARGET NCGSM
#define PROGRESS_MIN 8          /* a progress bar for builds with more kernels */

typedef struct Job {
	const Func *f;              /* the kernel func, in mods[t] */
	int t;                      /* index into Build.tg */
	char name[24];              /* k_<16 hex>: manifest name, file stem */
	uint64_t key;               /* cache key */
	CacheEntry e;
	int hit;                    /* came from the cache */
	int reptxas;                /* hit without a cubin: ptxas only */
	double ptxas_ms;
	double llvm_cpu_ms;         /* this thread's CPU time in codegen (LLVM) */
	double ptxas_cpu_ms;        /* ptxas's user + system CPU time (wait4) */
	int cost;                   /* estimated CPU ms of LLVM + ptxas (job_cost):
	                               the larger go first */
	int rank;                   /* its place in Build.order */
	int worker;                 /* the worker that ran it (0: the first) */
	double t0, t1;              /* its start and end, ms into the kernels phase */
	/* LLVM once per kernel of several targets (compile_job): */
	uint64_t xhash;             /* ir_func_hash without the target */
	int llvm_state;             /* 0 not run, 1 running, 2 done, 3 failed */
	int ptx_of;                 /* -1, or the job whose PTX this one took */
	/* one PTX for every column count (codegen_kernel_cols): */
	long cols;                  /* the columns its IR fixes, 0: none at run time */
	uint64_t chash;             /* ir_func_hash of its IR with the columns
	                               masked (ir_func_recols), 0 none */
	/* ptxas once per distinct PTX of a target (compile_job): */
	uint64_t ptx_hash;
	int ptxas_state;            /* 0 not run, 1 running, 2 done, 3 failed */
	int cubin_of;               /* -1, or the job whose cubin this one took */
	char *err;                  /* malloc'ed message when it failed */
} Job;

/* An expert group of the build (grouped.c; the manifest's "groups"). */
typedef struct BuildGroup {
	char *name;                 /* the fused parameter's key: the group's step func */
	int experts;
	int gemm[3];                /* fprop, dgrad, wgrad: grouped */
	long wrows, n, k;           /* the stacked W [wrows = experts * n, k] */
	const char **expert;        /* the experts' own layers (the plan's FQNs) */
} BuildGroup;

typedef struct Build {
	const char *recipe_path, *model_path, *out, *layer, *emit;
	int ntg;
	const Target *tg[MAXTARGET];
	CodegenSm sm[MAXTARGET];
	Module *mods[MAXTARGET];
	int *origin[MAXTARGET];     /* per func of mods[t]: the func it copies (group_expand) */
	Job *jobs; int njobs;
	int *order;                 /* jobs in the order the workers take them */
	struct { const Func *f; int job; } *kmap; int nkmap;   /* kernel func -> job */
	char ptxas[4096];           /* "" when none */
	const char *ptxas_from;     /* PRECC_PTXAS, CUDA_HOME, PATH or /usr/local/cuda */
	int jobs_n, timing, no_cache;
	Cache *cache;
	/* progress, shared by the workers */
	pthread_mutex_t mu;
	pthread_cond_t ptxas_done;  /* a job's ptxas_state or llvm_state left 1 */
	int share_ptx;              /* 0: PRECC_SHARE_PTX=0, LLVM for every target */
	int next, done, progress;
	int nworker;                /* workers started (their ids) */
	double t_kernels;           /* now_ms() when the kernels phase began */
	uint64_t recipe_hash, model_hash;
	const struct TrainingPolicy *training;   /* the recipe's, for the manifest */
	const struct Model *model;  /* the layers' shares_input, for the manifest */
	double ms_front, ms_passes, ms_compile, ms_write;   /* --time phases */
	double cpu_front, cpu_passes, cpu_write;            /* their CPU ms */
	int nlayers, nclass;        /* driver/group.c's classes (0: off) */
	long stats_m;               /* --stats at this M; 0: off */
	GemmCluster cluster;        /* --cluster (passes.h) */
	int json;                   /* --json: the summary as JSON on stdout */
	BuildGroup *groups; int ngroups;   /* grouped.c, from target 0's lowering */
	NameTab group_names;        /* group name -> index (grouped_find) */
	int group_names_on;
	char outdir[4096];          /* -o, symlinks resolved (publish.c) */
	char stage[4200];           /* where this build writes: beside -o, or -o itself */
	int inplace;                /* stage is -o (a mount point, a parent we cannot write) */
} Build;

/* summary.c: the line a build ends with (stderr), or with --json its
 * figures as JSON (stdout); whole: the whole build came from the cache. */
void build_summary(const Build *, int whole, double total_ms, const char *recipe_name,
                   const char *model_name);

/* build.c: the job of kernel func `func` of target t's module. */
Job *build_find_job(Build *, int t, const char *func);

/* artifacts.c: manifest.json (docs/artifacts.md) and precc_kernels.h/.c,
 * malloc'ed texts. */
char *artifacts_manifest(Build *, const char *recipe_name, const char *model_name);
void artifacts_c(Build *, const char *recipe_name, const char *model_name, char **h, char **c);

/* publish.c: -o written as a unit (docs/artifacts.md, "How a build is
 * published"). publish_begin, with -o locked, sweeps what killed builds
 * left and makes b->stage, where the build writes; publish_commit swaps
 * it in for -o in one rename (0, or -1 and err: -o is the old build);
 * publish_abort removes it. publish_ours: a name a build writes into -o
 * (its files, the lock, their hidden temporaries). */
void publish_begin(Build *);
int publish_commit(Build *, char *err, size_t errsz);
void publish_abort(Build *);
int publish_ours(const char *name);
int publish_kernel_file(const char *name); /* k_<hex16>.<sm>.ptx|cubin */
/* PRECC_TEST_KILL_AT=point: SIGKILL at that point (tests only). */
void publish_kill_at(const char *point);

/* grouped.c: lower_grouped's funcs of the plan (--layer's pattern) moved
 * into m, before the passes; with record, b->groups made from them.
 * Returns the number of funcs moved. grouped_find: a group by name, -1. */
struct Plan;
int grouped_lower(Build *, const struct Plan *, Module *m, int record);
int grouped_find(const Build *, const char *name);
void grouped_free(Build *);

/* stats.c: manifest text with the --stats figures at M added (kernels[].stats,
 * layers[].stats, stats), read from it and the PTX files in dir; the table
 * and the summary line go to out. NULL (after a message) on error. */
#include <stdio.h>
char *stats_manifest(const char *text, const char *dir, long m, FILE *out);

#endif
