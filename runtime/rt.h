/*
 * rt.h — the runtime's internal map: the precc_rt handle, the error path,
 * and the CUDA driver layer (cuda.c) that the manifest reader and plan
 * execution build on. Not installed; include/precc/precc_rt.h is public.
 *
 * Everything CUDA-typed is behind PRECC_HAVE_CUDA_H: without cuda.h the
 * runtime builds with the cpu backend only, and opening cuda says why.
 */
#ifndef PRECC_RT_INTERNAL_H
#define PRECC_RT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "precc/precc_rt.h"
#include "ir.h"
#include "limits.h"

#ifdef PRECC_HAVE_CUDA_H
#include <cuda.h>
#endif

#define RT_ERR_MAX 16384   /* room for a message plus a JIT log */
#define RT_JIT_LOG 8192    /* bytes of each JIT log buffer */

struct rt_artifact;

struct precc_rt {
	precc_backend backend;
	struct rt_artifact *art;   /* precc_rt_load, or NULL */
	int timing;                /* precc_rt_set_timing */
#ifdef PRECC_HAVE_CUDA_H
	CUdevice dev;
	CUcontext ctx;
	bool primary;          /* we retained dev's primary context */
	int sm_major, sm_minor, sm_count;
	int smem_optin;        /* most dynamic shared memory a block may opt into */
	char dev_name[256];
	char jit_info[RT_JIT_LOG];  /* info log of the last module load */
#endif
};

/* rt.c */
void rt_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The whole of path, NUL-terminated, if it is a regular file of at most
 * max bytes: opened with O_NOFOLLOW | O_NONBLOCK (a symlink is refused,
 * a FIFO cannot block), fstat before any read. NULL with why filled. */
char *rt_read_file(const char *path, long max, size_t *len, char *why, size_t whysz);

/* json.c — strict JSON (why not cJSON: see the file). */
typedef enum json_kind { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR,
                         JSON_OBJ } json_kind;
typedef struct json json;
struct json {
	json_kind kind;
	int line, col;            /* where the value starts */
	int b;                    /* JSON_BOOL */
	double num;               /* JSON_NUM */
	char *str; size_t len;    /* JSON_STR: UTF-8, NUL-terminated */
	json **item;              /* JSON_ARR, JSON_OBJ: n values */
	char **key;               /* JSON_OBJ: n keys, in file order */
	size_t n, cap;
};
/* NULL with "name:line:col: error: message" in err on failure. */
json *json_parse(const char *text, size_t len, const char *name, char *err,
                 size_t errsz);
void json_free(json *);
const json *json_get(const json *obj, const char *key);  /* NULL: absent */
const char *json_kind_name(json_kind);                   /* "a string" */

/* artifact.c — the manifest read into these (docs/artifacts.md). */
typedef struct rt_type {
	precc_format fmt;
	int rank;
	long dim[2];              /* ir.h's dims: < 0 is ceil(M / -d) */
} rt_type;
/* Parses "bf16[M,4096]", "f32[1,1]{*x*}", "e8m0[4096,M/32]{1x32}". */
int rt_type_parse(const char *s, rt_type *t);
/* Bytes at M (0 on overflow); rows and cols (rank 1: 1 x n) may be NULL. */
size_t rt_type_bytes(const rt_type *t, long m, long *rows, long *cols);

typedef struct rt_param {
	char *name, *type_str;
	rt_type type;
	int out;                  /* dir "out" */
} rt_param;

/* Launch geometry of a kernel, or of one phase of a fused kernel. */
typedef struct rt_geom {
	int tiled, data;          /* data: index into param */
	long elems_per_cta, tile_rows, tile_cols;
} rt_geom;


/* A TMA tensor map the kernel takes (manifest "tmaps", codegen.h's
 * CodegenTmap): encoded at each launch over the buffer of param `param`. */
typedef struct rt_tmap {
	int param, elem_bytes;
	long rows, cols;          /* -1: the launch's M */
	int box_rows, box_cols, swizzle;
} rt_tmap;
enum { RT_MAXTMAP = 4 };

typedef struct rt_kdesc {
	char *name, *shape, *entry, *ir;
	char *bulk_entry;         /* optional: a delayed update's many-layer
	                             entry (ptr table, i64 rows), or NULL */
	int threads;
	int tiled, data;          /* data: index into param */
	long elems_per_cta, tile_rows, tile_cols, m_multiple;
	rt_geom phase[RT_MAXPHASE]; int nphase;  /* fused: grid = sum of phases */
	int cooperative;          /* "launch": "cooperative" */
	int persistent;           /* "launch": "persistent" */
	long sync_words;          /* u32 sync scratch, zeroed per launch */
	unsigned smem;            /* optional "smem": dynamic shared bytes */
	rt_tmap tmap[RT_MAXTMAP]; int ntmap;  /* optional "tmaps", params after the scalars */
	rt_param *param; int nparam;
	int has_m, has_seed;
	int *zero; int nzero;     /* zero_outputs as param indices */
	int var;                  /* "m_variant": the kernel launched instead
	                             at M >= var_m_min (the same GEMM on a
	                             larger tile), or -1 */
	long var_m_min;
	char *var_name;           /* as read, until resolved */
	char *target;             /* "target" (sm_90a), or NULL */
	int used;                 /* a step of the chosen layers runs it */
	Module *mod;              /* the parsed ir */
	const Func *fn;
	int *abi_value;           /* per param: its IR value */
	/* run statistics */
	long launches;
	double elems, seconds;
	char loaded[160];         /* cuda: the file loaded; cpu: "ir" */
#ifdef PRECC_HAVE_CUDA_H
	CUmodule cumod;
	struct rt_kernel *k;
	struct rt_kernel *kbulk;  /* bulk_entry's function, or NULL */
	CUdeviceptr sync;         /* sync_words u32 of device memory */
#endif
} rt_kdesc;

typedef struct rt_buffer {
	char *name, *type_str, *role;
	rt_type type;
	int written;              /* some step writes it */
} rt_buffer;

typedef struct rt_step {
	int kernel;
	char *gemm;
	int *arg;                 /* per kernel param: buffer index */
} rt_step;

struct rt_split;

typedef struct rt_layer {
	char *fqn;
	char *shares_input;       /* the manifest's, or NULL */
	rt_buffer *buf; int nbuf;
	rt_step *step; int nstep;
	int (*update)[2]; int nupdate;  /* (state, next) buffers, after the steps */
	long m_multiple;          /* lcm over its steps' kernels */
	struct rt_split *split;   /* layer.c: the plan as forward/backward/commit */
	int root;                 /* the layer whose input it reads (the
	                             manifest's shares_input), -1 none */
	struct rt_share *share;   /* share.c: what a shared forward skips */
} rt_layer;

typedef struct rt_artifact {
	char *dir;
	char *precc_version, *llvm_version;
	char *recipe_name, *model_name;
	uint64_t recipe_hash, model_hash;
	char **target; int ntarget;
	const char *layers_of;    /* the target whose layers were read */
	rt_kdesc *kern; int nkern;
	rt_layer *layer; int nlayer;
	precc_training_policy training;   /* "training", or the defaults */
} rt_artifact;

void rt_artifact_free(precc_rt *rt, rt_artifact *a);
/* Kernel file `what` ("ptx" or "cubin") of one target's object tf in a
 * kernel's manifest "files": DIR/NAME read whole (rt_read_file) and, where
 * precc build recorded <what>_bytes and <what>_fnv1a64, checked against
 * them. 1: *image read and checked; 0: read, the manifest records neither
 * (an older one); -1: absent or unreadable; -2: a bad name, a bad record
 * or not the bytes precc build wrote. Below 0, why names the file. */
int rt_kernel_file(const char *dir, const json *tf, const char *what,
                   char **image, size_t *len, char *why, size_t whysz);

/* plan.c — the pieces of a layer run that layer.c reuses */
const rt_layer *rt_need_layer(const precc_rt *rt, int layer);
int rt_check_m(const rt_layer *l, long m, void *const *buffers);
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

int rt_check_buffer(precc_rt *rt, const rt_layer *l, long m,
                    void *const *buffers, const size_t *sizes, int b);
int rt_check_step(precc_rt *rt, const rt_layer *l, int s, long m,
                  void *const *buffers, const size_t *sizes);
/* one step, no checks; cpu ORs its nonfinite=skip into *skipped */
int rt_run_step_at(precc_rt *rt, const rt_layer *l, int s, long m,
                   void *const *buffers, uint64_t seed, void *stream,
                   int *skipped);
/* the layer's updates: each next_state buffer copied over its state */
int rt_apply_updates(precc_rt *rt, const rt_layer *l, long m,
                     void *const *buffers, void *stream);

/* layer.c — called by artifact.c once a manifest is read */
int rt_layers_split(rt_artifact *a);     /* -1 only when out of memory */

/* layer.c's cut of a layer, for share.c */
enum { RT_PH_FWD, RT_PH_BWD, RT_PH_COMMIT };
typedef struct rt_split {
	char *why;              /* not NULL: the layer cannot be cut, and why */
	unsigned char *phase;   /* per step */
	unsigned char *place;   /* per buffer: precc_place */
	unsigned char *minv;    /* per buffer: its size does not depend on M */
	size_t *state_off;      /* per buffer: offset in state (PLACE_STATE) */
	size_t state_bytes;
	int io[7];              /* buffer index of each caller tensor (x, w,
	                           bias, y, dy, dx, dw), or -1 */
	int main_grad;          /* the main_grad param the wgrad kernel
	                           accumulates dW into, or -1 (older plans: the
	                           runtime adds dW on the host, cpu only) */
	int reads_x, reads_w;   /* backward reads the caller's x / w */
	int has_state;
	unsigned char *amax;    /* per buffer: a saved f32 the commit reads (an
	                           amax to reduce across data-parallel ranks) */
	void **ptr;             /* nbuf pointers: the bound buffers of a call */
	/* the region layout at M = at_m (0: none yet), kept for the next call
	 * at the same M (forward, backward and commit run at one M): */
	long at_m;
	size_t *at_off;         /* per buffer: offset in saved or workspace */
	size_t at_saved, at_work, at_dw_slot;
} rt_split;

/* share.c — linears that read one tensor (docs/runtime.md, "Shared
 * inputs"): per layer with a root, the forward steps the root runs alike
 * on the same tensors (same kernel, same inputs up to the shared x and its
 * state), which a shared forward skips, reading their outputs in the
 * root's saved region (the root keeps them there: promoted to saved). */
typedef struct rt_share {
	unsigned char *skip;    /* per step */
	int *alias;             /* per buffer: the root's buffer read instead, -1 */
	unsigned char *copy;    /* per buffer: copied from the root's after the
	                           forward (its commit reads it) */
	int nskip;
} rt_share;
int rt_share_plan(rt_artifact *a);       /* after rt_layers_split; -1: no memory */
void rt_share_free(rt_share *);
/* The amaxes layer's commit reads from saved: their offsets and f32
 * counts (at most max); returns how many there are, or -1. */
int rt_commit_amaxes(const precc_rt *rt, int layer, long m, size_t *off,
                     size_t *nfloat, int max);
void rt_split_free(struct rt_split *s);

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

#ifdef PRECC_HAVE_CUDA_H
/* plan.c: 0, or -1 with the reason (kernel, grid, limit) when the device
 * cannot launch k (after k->k is loaded). */
int rt_kernel_launchable(precc_rt *rt, const rt_kdesc *k);
#endif

/* cuda.c
 * rt_cuda_open fills rt's cuda fields; on failure returns -1 with the
 * reason as the error. Every other function returns 0 or -1 (error set:
 * "cuda: <entry point>: <CUDA_ERROR_NAME> (<description>) <context>"),
 * and makes rt's context current for the call only. */
int rt_cuda_open(precc_rt *rt);
void rt_cuda_close(precc_rt *rt);

#ifdef PRECC_HAVE_CUDA_H
typedef struct rt_kernel {
	CUfunction fn;
	char name[128];
	int num_regs;            /* CU_FUNC_ATTRIBUTE_NUM_REGS */
	int local_bytes;         /* CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES (spills) */
	int max_dyn_smem;        /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
	int resident;            /* CTAs per SM at its block (occupancy) */
} rt_kernel;

/* Loads a PTX (NUL-terminated) or cubin image with the JIT error and info
 * logs; what names it in errors ("kernel 'x'"). A failure's error carries
 * the JIT error log; rt->jit_info keeps the last info log. */
int rt_cuda_module_load(precc_rt *rt, const void *image, const char *what,
                        CUmodule *mod);
void rt_cuda_module_unload(precc_rt *rt, CUmodule mod);

/* Looks name up in mod and reads its attributes into *k. */
int rt_cuda_kernel(precc_rt *rt, CUmodule mod, const char *name, rt_kernel *k);

/* Raises k's dynamic shared memory limit to at least bytes (no-op when it
 * already allows that). */
int rt_cuda_kernel_reserve_smem(precc_rt *rt, rt_kernel *k, unsigned bytes);
/* k->resident: how many CTAs of `threads` with smem dynamic bytes fit on
 * one SM (cuOccupancyMaxActiveBlocksPerMultiprocessor). */
int rt_cuda_kernel_resident(precc_rt *rt, rt_kernel *k, int threads,
                            unsigned smem);

/* Launches k on the caller's stream (NULL: the legacy default stream). */
/* out (a CUtensorMap) := cuTensorMapEncodeTiled of t over the buffer at
 * base, at M = m. */
int rt_cuda_tmap_encode(precc_rt *rt, const rt_tmap *t, CUdeviceptr base, long m, void *out);
int rt_cuda_launch(precc_rt *rt, const rt_kernel *k, const unsigned grid[3],
                   const unsigned block[3], unsigned smem, CUstream stream,
                   void **params);

/* The same through cuLaunchCooperativeKernel (a grid-wide barrier). */
int rt_cuda_launch_cooperative(precc_rt *rt, const rt_kernel *k,
                               const unsigned grid[3], const unsigned block[3],
                               unsigned smem, CUstream stream, void **params);

int rt_cuda_alloc(precc_rt *rt, size_t bytes, CUdeviceptr *p);
int rt_cuda_free(precc_rt *rt, CUdeviceptr p);
int rt_cuda_htod(precc_rt *rt, CUdeviceptr dst, const void *src, size_t bytes);
int rt_cuda_dtoh(precc_rt *rt, void *dst, CUdeviceptr src, size_t bytes);
int rt_cuda_memset8(precc_rt *rt, CUdeviceptr dst, unsigned char v, size_t n);
int rt_cuda_sync(precc_rt *rt, CUstream stream);
int rt_cuda_memset8_async(precc_rt *rt, CUdeviceptr dst, unsigned char v,
                          size_t n, CUstream stream);
int rt_cuda_dtod_async(precc_rt *rt, CUdeviceptr dst, CUdeviceptr src,
                       size_t bytes, CUstream stream);

/* 0 when p is device (or managed) memory of the driver; -1 with "what is a
 * host pointer, the cuda backend needs device memory" otherwise. */
int rt_cuda_check_device_ptr(precc_rt *rt, const void *p, const char *what);
/* The same check, quiet: 1 when rt_cuda_check_device_ptr would pass p
 * (the per-call fast path; it formats no message). */
int rt_cuda_device_ptr_ok(precc_rt *rt, const void *p);
#endif
/* 1 when the driver is loaded in this process and says p is device (or
 * managed) memory; 0 otherwise (no driver, host memory, or unknown). For
 * the cpu backend's check against device pointers. */
int rt_cuda_is_device_ptr(const void *p);

#endif
