/*
 * rt.h — floor 4 of the runtime, the top (base.h lists the floors): the
 * public API's internals, shared by its files (rt.c, run.c, layer.c,
 * commit_bulk.c, reduce.c, train.c, state.c, gemm_check.c). It includes
 * every floor below, so tools and tests (precc-run, tests/runtime) include
 * it alone; a file of a lower floor includes its own floor's header only.
 * Not installed; include/precc/precc_rt.h is public.
 */
#ifndef PRECC_RT_INTERNAL_H
#define PRECC_RT_INTERNAL_H

#include "backend.h"

/* run.c — the pieces of a layer run that layer.c reuses */
const rt_layer *rt_need_layer(const precc_rt *rt, int layer);
/* buffer b: not NULL, sizes[b] (when sizes) enough at M, aligned, the
 * backend's kind of memory */
/* One row of a bulk delayed-update table (commit_bulk.c, layer.c): the
 * commit step's kernel, its params bound, then per output the state buffer
 * it commits to (NULL: none). */
enum { RT_BULK_WIDTH = 48 };
typedef struct rt_commit_row {
	int kernel, width;
	void *p[RT_BULK_WIDTH];
} rt_commit_row;
/* The rows of layer's commit at M (at most max; rows NULL: count only),
 * their number (0: no state), -1 with the error set. */
int rt_commit_rows(precc_rt *rt, int layer, long m, void *saved, void *state,
                   rt_commit_row *rows, int max);

/* The memory one call's checks found good: each allocation (its range
 * from rt_ops.mem_ok) is asked of the driver once per call, not once per
 * buffer of each step (a forward passes 15-25 buffers, most of them in the
 * saved region and the workspace). Local to a call: never kept across
 * calls, whose memory may have been freed. */
enum { RT_SEEN_MAX = 8 };
typedef struct rt_seen {
	int n;
	uintptr_t lo[RT_SEEN_MAX], hi[RT_SEEN_MAX];
} rt_seen;

/* seen: NULL (check every buffer) or the call's rt_seen, zeroed */
int rt_check_buffer(precc_rt *rt, const rt_layer *l, long m,
                    void *const *buffers, const size_t *sizes, int b, rt_seen *seen);
int rt_check_step(precc_rt *rt, const rt_layer *l, int s, long m,
                  void *const *buffers, const size_t *sizes, rt_seen *seen);
/* one step, no checks; cpu ORs its nonfinite=skip into *skipped */
int rt_run_step_at(precc_rt *rt, const rt_layer *l, int s, long m,
                   void *const *buffers, uint64_t seed, void *stream,
                   int *skipped);
/* the layer's updates: each next_state buffer copied over its state */
int rt_apply_updates(precc_rt *rt, const rt_layer *l, long m,
                     void *const *buffers, void *stream);

/* grouped.c: at load, the pinned ring of offsets copies a backend with
 * download_async needs for a's groups (none: nothing); released at unload */
int rt_grouped_prepare(precc_rt *rt, const rt_artifact *a);
void rt_grouped_release(precc_rt *rt);

/* layer.c */
/* precc_rt_forward_shared / precc_rt_backward_shared on the pointers p,
 * with an expert group's offsets (NULL for a layer without; a group's
 * step refuses NULL). */
int rt_forward_at(precc_rt *rt, int layer, long m, const precc_layer_ptrs *p,
                  const void *root_saved, const void *offsets, uint64_t seed,
                  void *stream);
int rt_backward_at(precc_rt *rt, int layer, long m, const precc_layer_ptrs *p,
                   float *main_grad, const void *root_saved, const void *offsets,
                   uint64_t seed, void *stream);
/* The amaxes layer's commit reads from saved: their offsets and f32
 * counts (at most max); returns how many there are, or -1. */
int rt_commit_amaxes(const precc_rt *rt, int layer, long m, size_t *off,
                     size_t *nfloat, int max);

/* gemm_check.c — the accumulation model's bound for precc-run --check
 * (docs/numerics.md, "The GEMM check bound"). */
double rt_gamma(double n, double u);          /* Higham's γ_n at unit roundoff u */
double rt_ulp(precc_format f, double x);      /* f's spacing at |x| */
/* c with |cuda - cpu| <= c · Σ|a||b||s| for one accumulator element: the
 * model (ACC_*, N or B), K, the chunk P (0: K), the GPU's mma sum keeping
 * mma_bits mantissa bits (truncating), the cpu's promote_bits */
double rt_gemm_rel_bound(int accum, int accum_n, long K, long P, int mma_bits,
                         int cpu_promote_bits);
int rt_kernel_is_gemm(const Func *f);         /* one gemm in the kernel */
/* tol[i] for output value `out` of GEMM kernel f at M, from the kernel's
 * inputs (by param name; the cpu side's): per element, or for an amax
 * output the largest over the result, in every one of ntol slots. */
int rt_gemm_tolerance(const Func *f, long m, int nparam, const char *const *pname,
                      const void *const *pdata, const size_t *pbytes, int out,
                      int mma_bits, float *tol, size_t ntol, char *err, size_t errsz);
typedef struct rt_gemm_diff {
	long n, differ, over, first_over;
	long unbounded;           /* elements whose finite products overflow fp32: no bound */
	double max_abs, max_rel, max_ulps, max_ratio;   /* ratio: |diff| / tol */
} rt_gemm_diff;
void rt_gemm_compare(precc_format f, const void *a, const void *b, const float *tol,
                     long n, rt_gemm_diff *d);
/* For every GEMM step of layer: tol[b] (malloc'ed, n elements) of each
 * output buffer b, from the cpu side's buffers after the run, and its
 * kernel's name. Buffers no GEMM writes keep tol[b] NULL (bit for bit).
 * Kept here, not in precc-run: rt_kdesc's layout depends on cuda.h. */
int rt_layer_gemm_tols(precc_rt *rt, int layer, long m, int nbuf, const size_t *bytes,
                       const int *fmt, void *const *cpu, int mma_bits, float **tol,
                       const char **kname, char *err, size_t errsz);

/* state.c */
void rt_state_ids(const precc_state *st, uint64_t *recipe, uint64_t *model);

#endif
