/*
 * precc/precc_rt.h — the precc runtime: what a host trainer links.
 *
 * libprecc_rt depends on precc_ir, libc and libdl only. The CUDA driver is
 * never linked: libcuda.so.1 is dlopen'ed when the cuda backend is opened,
 * so the same binary runs (on the cpu backend) where no driver exists.
 *
 * Conventions: functions that can fail return NULL or -1 and leave a
 * message in precc_rt_last_error(); they never abort and never print.
 * One precc_rt may be used from any thread, but not from two at once
 * (run statistics are per runtime); open one per thread instead.
 * docs/runtime.md describes the design and the state file byte by byte.
 */
#ifndef PRECC_PRECC_RT_H
#define PRECC_PRECC_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---------------------------------------------------------- */

/* The message of the last call that failed on this thread, with its
 * context: "cuda: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (a PTX JIT
 * compilation failed) while loading kernel 'x'" followed by the JIT log,
 * or "state: 'run/s.pst': recipe mismatch: ...". "" when nothing failed
 * yet. Valid until the next failing call on the same thread. */
const char *precc_rt_last_error(void);

/* ---- backends -------------------------------------------------------- */

typedef enum precc_backend {
	PRECC_BACKEND_AUTO,  /* cuda when a driver and a device exist, else cpu */
	PRECC_BACKEND_CUDA,  /* the CUDA driver API, through dlopen */
	PRECC_BACKEND_CPU,   /* the IR interpreter, on host buffers */
} precc_backend;

/* "auto", "cuda" or "cpu"; "?" for anything else. */
const char *precc_backend_name(precc_backend kind);

/* Parses "auto", "cuda" or "cpu" into *kind. Returns 0, or -1 (with an
 * error naming the choices) for anything else. */
int precc_backend_parse(const char *name, precc_backend *kind);

typedef struct precc_rt precc_rt;

/* Opens a runtime on a backend.
 *
 * cuda: loads libcuda.so.1 (or the file named by $PRECC_LIBCUDA), resolves
 * every driver entry point once per process, calls cuInit, and uses the
 * context current on the calling thread if there is one, else retains the
 * primary context of device $PRECC_DEVICE (default 0). It never leaves a
 * context current that the caller did not make current.
 *
 * auto: tries cuda; falls back to cpu when the driver, cuInit or a device
 * is missing. It never fails for want of a GPU.
 *
 * why (optional, whysize bytes) receives one line saying what was opened
 * and why: "cuda: device 0 'NVIDIA H200' (sm_90, 132 SMs), primary context
 * retained", or "cpu (cuda unavailable: cannot load libcuda.so.1: ...)",
 * or, when cuda was requested and failed, the same message as
 * precc_rt_last_error(). Returns NULL only on failure. */
precc_rt *precc_rt_open_backend(precc_backend kind, char *why, size_t whysize);

/* The backend actually opened (never PRECC_BACKEND_AUTO). */
precc_backend precc_rt_backend(const precc_rt *rt);

/* Releases what the runtime holds (the primary context it retained, if
 * any). NULL is allowed. */
void precc_rt_close(precc_rt *rt);

/* ---- artifacts and plans ---------------------------------------------
 *
 * An artifact directory is what `precc build` writes (docs/artifacts.md):
 * manifest.json, PTX and cubins. One runtime holds one directory. A layer
 * has named buffers (inputs, outputs, state) and a quantize plan: kernel
 * steps in order over those buffers. The caller owns every buffer; on the
 * cuda backend they are device memory, on the cpu backend host memory. */

/* Reads DIR/manifest.json and validates all of it, parses each kernel's IR
 * (both backends take the kernel ABI from it; cpu runs it), and on cuda
 * loads each kernel for the device: the cubin of sm_XYa or sm_XY when the
 * manifest has one, else that target's PTX, else the PTX of the newest
 * older target (JIT, with the driver's error log in the error). Refuses a
 * manifest of another precc version or manifest format, naming both.
 * Errors name the file, line:col and key: "DIR/manifest.json:9:5: error:
 * kernels[0] 'k_..': missing key 'threads'". Returns 0 or -1 (then nothing
 * is loaded). */
int precc_rt_load(precc_rt *rt, const char *dir);

/* precc_rt_load for one target's layers: target (e.g. "sm_89", one of the
 * manifest's targets) or NULL for the backend's own choice. The cpu
 * backend runs that target's layers (precc-run --check uses the target the
 * cuda side picked, so both run the same plans); the cuda backend refuses
 * a target other than the one the device uses. */
int precc_rt_load_target(precc_rt *rt, const char *dir, const char *target);

/* precc_rt_open_backend(kind) then precc_rt_load(dir); NULL on failure
 * (the runtime is closed again). why as for precc_rt_open_backend. */
precc_rt *precc_rt_open(const char *dir, precc_backend kind, char *why,
                        size_t whysize);

/* What the loaded manifest says about itself; the strings live as long as
 * the runtime. All zero/NULL when nothing is loaded. */
typedef struct precc_artifact_info {
	const char *dir;
	const char *precc_version, *llvm_version;
	const char *recipe_name, *model_name;
	uint64_t recipe_hash, model_hash;
	const char *target;     /* the target whose layers were loaded */
	int nkernels, nlayers;
} precc_artifact_info;
void precc_rt_artifact_info(const precc_rt *rt, precc_artifact_info *info);

/* Layers in manifest order; index -1 / NULL when out of range. */
int precc_rt_layer_count(const precc_rt *rt);
const char *precc_rt_layer_name(const precc_rt *rt, int layer);
int precc_rt_layer_find(const precc_rt *rt, const char *fqn);
/* M must be a positive multiple of this for the layer (1 = any M). */
long precc_rt_layer_m_multiple(const precc_rt *rt, int layer);

/* One buffer of a layer at a given M. */
typedef struct precc_buffer_info {
	const char *name;       /* "x", "x.scale", "x.q" */
	const char *type;       /* "bf16[M,4096]", as in the manifest */
	const char *role;       /* "input", "output", "state", ... */
	const char *format;     /* "bf16", "e4m3", "f32" (the IR spelling) */
	int format_id;          /* precc_format (precc/numerics.h) */
	long rows, cols;        /* at M (rank 1: 1 x n) */
	size_t bytes;           /* its storage (interp.h: rows x cols x element
	                           bytes; e2m1 two codes a byte) */
	int written;            /* some step writes it (output or state) */
} precc_buffer_info;
int precc_rt_buffer_count(const precc_rt *rt, int layer);
/* Fills *info for buffer i of layer at M; 0, or -1 when out of range or
 * the size overflows. */
int precc_rt_buffer_info(const precc_rt *rt, int layer, int i, long m,
                         precc_buffer_info *info);

/* precc_rt_run_layer, and first also checks each buffer's size: bytes[i]
 * (the caller's allocation for buffers[i]) must be at least what buffer
 * i's type needs at M ("plan: layer 'L' buffer 0 'x' has 1024 bytes;
 * bf16[M,256] at M=64 needs 32768"). bytes NULL: no size check. */
int precc_rt_run_layer_sized(precc_rt *rt, int layer, long m,
                             void *const *buffers, const size_t *bytes,
                             uint64_t seed, void *stream);

/* The steps of a layer's plan, in order: step s runs kernel `kernel`
 * (precc_rt_kernel_info) on the layer's buffers args[0..nargs) (buffer
 * indices, in kernel-parameter order); bit p of out_mask is set when
 * args[p] is an output. args lives as long as the runtime. */
typedef struct precc_step_info {
	int kernel;
	const char *gemm;       /* "fprop", "dgrad", "wgrad", or NULL */
	int nargs;
	const int *args;
	uint32_t out_mask;
} precc_step_info;
int precc_rt_step_count(const precc_rt *rt, int layer);
int precc_rt_step_info(const precc_rt *rt, int layer, int step,
                       precc_step_info *info);
/* The kernel step launches at token count m: info.kernel, or the kernel
 * its manifest entry's m_variant names when m >= m_min (the same GEMM on
 * a larger tile). -1 when the layer or step is out of range. */
int precc_rt_step_kernel(const precc_rt *rt, int layer, int step, long m);

/* Runs layer's quantize plan at token count M: every step in order, with
 * buffers[i] the caller's memory for the layer's buffer i (the order of
 * precc_rt_buffer_info). Before the first launch it checks every buffer
 * the steps touch: not NULL, 16-byte aligned (kernels use 16-byte vector
 * access), the right kind for the backend (cuda: device memory, through
 * cuPointerGetAttribute; cpu: not device memory, when a driver is loaded
 * in the process), and M > 0 and a multiple of the layer's m_multiple;
 * the sizes it assumes are those of precc_rt_buffer_info at M. Then each
 * step: cuda zeroes the kernel's zero_outputs, launches on stream (a
 * CUstream; NULL is the legacy default stream) with the grid from the
 * manifest, and copies each update's new value over its state buffer,
 * all asynchronously on stream; cpu runs the kernel's IR through the
 * interpreter (seed drives stochastic rounding on both) and commits its
 * updates (none after a step that nonfinite=skip skipped). Returns 0 or
 * -1; after a cuda -1 from a launch, earlier steps may have run. */
int precc_rt_run_layer(precc_rt *rt, int layer, long m, void *const *buffers,
                       uint64_t seed, void *stream);

/* Runs step `step` of layer alone, with the same checks (on that step's
 * buffers only) and launch as precc_rt_run_layer, but no state updates
 * (those belong to the whole layer: precc_rt_commit_buffers commits them
 * after steps run one by one). For benchmarks and bisecting. */
int precc_rt_run_step(precc_rt *rt, int layer, int step, long m,
                      void *const *buffers, uint64_t seed, void *stream);

/* With timing on, run_layer synchronizes after each step and adds the
 * step's wall time to its kernel's statistics (for precc-run; off by
 * default, as it serializes the stream). */
void precc_rt_set_timing(precc_rt *rt, int on);

/* Per kernel, accumulated over every run_layer since the load. */
typedef struct precc_kernel_info {
	const char *name;       /* "k_0123456789abcdef" */
	const char *shape;      /* "quant_tensor" */
	const char *entry;      /* the PTX entry point */
	const char *loaded;     /* cuda: the file loaded; cpu: "ir" */
	int num_regs, spill_bytes;  /* cuda: from the driver; cpu: 0 */
	long launches;
	double elements;        /* elements of the grid's data param */
	double seconds;         /* wall time, with timing on */
} precc_kernel_info;
int precc_rt_kernel_count(const precc_rt *rt);
int precc_rt_kernel_info(const precc_rt *rt, int k, precc_kernel_info *info);

/* Memory of the runtime's backend, for callers without their own CUDA
 * code (precc-run, tests): cuda: cuMemAlloc / cuMemFree / synchronous
 * copies; cpu: 64-byte aligned host memory and memcpy. precc_rt_free
 * allows NULL. */
void *precc_rt_malloc(precc_rt *rt, size_t bytes);
void precc_rt_free(precc_rt *rt, void *p);
int precc_rt_upload(precc_rt *rt, void *dst, const void *src, size_t bytes);
int precc_rt_download(precc_rt *rt, void *dst, const void *src, size_t bytes);
/* Waits for everything queued on stream (cuda); 0 on cpu. */
int precc_rt_sync(precc_rt *rt, void *stream);

/* ---- a layer as forward, backward and commit ---------------------------
 *
 * The training view of a layer's plan (docs/runtime.md, "Training with
 * the layer API"). A step of training calls, per layer:
 *
 *   precc_rt_forward    X, W (, bias) -> Y, and fills `saved`: what the
 *                       backward needs (the quantized X or its transposed
 *                       copy, scales, amaxes);
 *   precc_rt_backward   dY and saved -> dX and dW (or dW added into an
 *                       fp32 main_grad);
 *   precc_rt_commit     once per training step, after the backward: the
 *                       delayed-scaling update (amax histories and scales
 *                       from this step's amaxes) and its copy into `state`.
 *
 * Forward reads the scales in `state` and never changes them, so every
 * micro-batch of a step quantizes with the same scales, and a run of
 * forward + backward + commit equals precc_rt_run_layer bit for bit.
 *
 * Memory, all the caller's (device memory on cuda, host on cpu), sized by
 * precc_rt_layer_sizes:
 *   state      per layer, for the whole run: scales, amax histories (and
 *              the update's next values); M-independent; initialize with
 *              precc_rt_layer_state_init;
 *   saved      per forward call, from the forward to its backward and the
 *              commit (like the tensors autograd saves);
 *   workspace  scratch of one call only: one workspace, sized for the
 *              largest layer and M, may serve every call in turn on a
 *              stream.
 * Each must be 16-byte aligned. On cuda, forward, backward and commit only
 * enqueue work on `stream` (kernels, memsets, device-to-device copies):
 * no host synchronization and no allocation, so a step can be captured in
 * a CUDA graph. On cpu they run the kernels' IR through the interpreter,
 * which allocates its own values. Phases come from the dataflow: a step
 * that reads dY or anything computed from it is backward, the delayed-
 * scaling update (every output a next_state) is commit, the rest forward.
 * A layer that cannot be cut so (two forward outputs, an M-dependent state,
 * no x, w or y) is refused with the reason by every call below. */

typedef enum precc_place {
	PRECC_PLACE_X, PRECC_PLACE_W, PRECC_PLACE_BIAS, PRECC_PLACE_Y,
	PRECC_PLACE_DY, PRECC_PLACE_DX, PRECC_PLACE_DW,
	PRECC_PLACE_STATE,      /* in the layer's state region */
	PRECC_PLACE_SAVED,      /* in the saved region of one forward call */
	PRECC_PLACE_WORKSPACE,  /* in the workspace of one call */
	PRECC_PLACE_MAIN_GRAD,  /* the caller's fp32 main_grad [n, k]: the plan's
	                           wgrad accumulates dW into it in its epilogue
	                           (output.accumulate), so it is also dw's
	                           place: both are the dw pointer */
	PRECC_PLACE_OFFSETS,    /* an expert group's offsets: the caller's
	                           (precc_rt_forward_grouped) */
} precc_place;

typedef struct precc_layer_sizes {
	size_t state_bytes;     /* M-independent */
	size_t saved_bytes;     /* at M */
	size_t workspace_bytes; /* at M; forward's, backward's and commit's max */
	long k, n;              /* X is [M, k], W [n, k], Y and dY [M, n] */
	int has_bias;           /* forward reads a bias of n elements */
	int backward_reads_x;   /* backward reads the caller's X (unquantized
	                           plans, bf16): keep it alive until then */
	int backward_reads_w;   /* likewise the caller's W */
	int has_state;          /* state_bytes > 0: commit has work */
	int x_format, w_format, y_format, dy_format, dx_format, dw_format;
	                        /* precc_format of each caller tensor */
} precc_layer_sizes;

/* Fills *s for layer at M. 0, or -1 (layer out of range, M bad, a plan
 * that cannot be cut into forward/backward/commit, with why). */
int precc_rt_layer_sizes(const precc_rt *rt, int layer, long m,
                         precc_layer_sizes *s);

/* Where buffer i of layer (precc_rt_buffer_info's order) lives at M: one
 * of the caller's tensors, or an offset into state, saved or workspace.
 * So a caller finds the quantized X ("x.q.t") in its saved region, or an
 * amax to reduce across ranks. 0 or -1. */
int precc_rt_buffer_place(const precc_rt *rt, int layer, int i, long m,
                          precc_place *place, size_t *offset);

/* Writes a fresh state into the layer's state region: every scale-typed
 * state buffer (a type with a block, "f32[1,1]{*x*}") 1.0, everything
 * else (amax histories, next values) 0, as Transformer Engine starts.
 * Synchronous (an upload on cuda). 0 or -1. */
int precc_rt_layer_state_init(precc_rt *rt, int layer, void *state);

/* The forward steps of layer at M: x [M, k], w [n, k], bias (NULL when
 * the layer has none) -> y [M, n], filling saved. 0 or -1 (checks as
 * precc_rt_run_layer's, on the buffers these steps touch). */
int precc_rt_forward(precc_rt *rt, int layer, long m, const void *x,
                     const void *w, const void *bias, void *y, void *saved,
                     void *state, void *workspace, uint64_t seed,
                     void *stream);

/* The backward steps: dy [M, n] and the saved region of the forward at
 * the same M (and x, w when backward_reads_x / _w; else they may be NULL)
 * -> dx [M, k] and dw [n, k] in the plan's output formats.
 * dx NULL: the dgrad GEMM is not run (a first layer). dw NULL and
 * main_grad NULL: the wgrad GEMM is not run (a frozen weight).
 * main_grad (fp32 [n, k], or NULL): dW is added into it, main_grad[i] +=
 * dW[i] in fp32, after the wgrad GEMM (dW rounded to the plan's dw format
 * first; dw may then be NULL, the workspace holds it). Older plans have no
 * main_grad epilogue, so the runtime does this add on the host: cpu
 * backend only; on cuda main_grad is refused with the reason. A plan built
 * with output.accumulate on wgrad adds in the kernel (in place, cuda and
 * cpu) and takes main_grad, not dw. 0 or -1. */
int precc_rt_backward(precc_rt *rt, int layer, long m, const void *x,
                      const void *w, const void *dy, void *dx, void *dw,
                      float *main_grad, void *saved, void *state,
                      void *workspace, uint64_t seed, void *stream);

/* Linears that read one tensor (the model's shares_input: q, k and v read
 * the same X, gate and up theirs). precc_rt_layer_input_root: the layer
 * whose input this one reads, its root (-1: none); precc_rt_layer_shared_
 * steps: how many forward steps the root runs alike on that input (the
 * same kernels on the same tensors: quantizing X, its transpose, scales,
 * amaxes), 0 when the plans differ. After the root's forward on x, this
 * layer's precc_rt_forward_shared on the same x at the same M skips those
 * steps and reads their outputs in root_saved, the root's saved region of
 * that forward (the root keeps them there: its saved_bytes count them);
 * the ones its commit reads (delayed scaling's amax) are copied into this
 * layer's saved region. Pass the same root_saved to its
 * precc_rt_backward_shared and keep it until then. The results are the
 * unshared calls' bit for bit: the skipped steps would write the same
 * bytes (delayed scaling: the layers' x histories are equal, as they see
 * the same amaxes). root_saved NULL: the plain calls. 0 or -1. */
int precc_rt_layer_input_root(const precc_rt *rt, int layer);
int precc_rt_layer_shared_steps(const precc_rt *rt, int layer);
int precc_rt_forward_shared(precc_rt *rt, int layer, long m, const void *x,
                            const void *w, const void *bias, void *y, void *saved,
                            void *state, void *workspace, uint64_t seed,
                            void *stream, const void *root_saved);
int precc_rt_backward_shared(precc_rt *rt, int layer, long m, const void *x,
                             const void *w, const void *dy, void *dx, void *dw,
                             float *main_grad, void *saved, void *state,
                             void *workspace, uint64_t seed, void *stream,
                             const void *root_saved);

/* Once per training step, after the backward: runs the layer's state
 * update steps (delayed scaling: amax histories and scales, from the
 * amaxes in saved) and copies their next values over the state, on
 * stream. Returns 0 when committed, 1 when the cpu backend skipped the
 * commit because a step of this forward or backward found non-finite
 * values under nonfinite=skip (the state is unchanged), -1 on error. A
 * layer without state: 0, nothing to do. */
int precc_rt_commit(precc_rt *rt, int layer, long m, void *saved,
                    void *state, void *stream);

/* The regions as a buffers[] array for the buffer-array calls
 * (precc_rt_run_layer, precc_rt_run_step, precc_rt_state_pull/push):
 * buffers[i] = the pointer of buffer i's place (+ its offset). Pointers of
 * places the caller does not have may be NULL; they give NULL entries. */
typedef struct precc_layer_ptrs {
	const void *x, *w, *bias;
	void *y;
	const void *dy;
	void *dx, *dw;
	void *state, *saved, *workspace;
} precc_layer_ptrs;
int precc_rt_layer_bind(const precc_rt *rt, int layer, long m,
                        const precc_layer_ptrs *p, void **buffers);

/* One buffer for the scaling state of the whole model: every layer's state
 * region (amax histories, scales) end to end, each at a 256-byte aligned
 * offset, so a model's delayed-scaling state is one allocation, one copy
 * to checkpoint and one to restore. Pass state + precc_rt_model_state_offset
 * (rt, l) as layer l's state. precc_rt_bulk_commit_* below commits all
 * of them in one launch. Layers that cannot be cut take no room. */
size_t precc_rt_model_state_bytes(const precc_rt *rt);
size_t precc_rt_model_state_offset(const precc_rt *rt, int layer);
/* precc_rt_layer_state_init for every layer of that buffer. 0 or -1. */
int precc_rt_model_state_init(precc_rt *rt, void *state);

/* The commit of many layers in one launch per distinct update kernel (one
 * for the shipped delayed-scaling recipes), where precc_rt_commit costs a
 * launch per layer and a copy per state buffer: every layer's update runs
 * in a CTA of its own and copies its results over its state (TE's bulk
 * amax_and_scale_update). The table holds each layer's pointers: device
 * memory of precc_rt_bulk_commit_table_bytes on cuda (host memory on
 * cpu), written once by _new (a synchronous copy), so that the saved and
 * state regions of each layer must stay where they were. _run only
 * launches (cpu: runs precc_rt_commit per layer, skipped steps included):
 * no allocation, no host sync, capturable in a CUDA graph. Layers without
 * state are left out. */
typedef struct precc_rt_bulk_commit precc_rt_bulk_commit;
size_t precc_rt_bulk_commit_table_bytes(precc_rt *rt, int nlayers, const int *layers);
precc_rt_bulk_commit *precc_rt_bulk_commit_new(precc_rt *rt, int nlayers, const int *layers,
                                               long m, void *const *saved,
                                               void *const *state, void *table,
                                               size_t table_bytes);
/* 0, or -1 with the error set. */
int precc_rt_bulk_commit_run(precc_rt *rt, precc_rt_bulk_commit *bc, void *stream);
/* The launches one _run makes on cuda, and the layers it commits. */
int precc_rt_bulk_commit_launches(const precc_rt_bulk_commit *bc);
int precc_rt_bulk_commit_layers(const precc_rt_bulk_commit *bc);
void precc_rt_bulk_commit_free(precc_rt_bulk_commit *bc);

/* The phase precc_rt_forward/backward/commit runs step `step` of layer
 * in: 0 forward, 1 backward, 2 commit; -1 when out of range or the layer
 * cannot be cut. After stepping through a layer with precc_rt_run_step
 * (which commits nothing), precc_rt_commit_buffers commits. */
int precc_rt_step_phase(const precc_rt *rt, int layer, int step);

/* precc_rt_commit on the buffer-array form: runs the commit steps and the
 * layer's updates. The update steps are pure functions of state and the
 * step's amaxes, so running them again after precc_rt_run_step ran them
 * gives the same state. 0 or -1 (it always commits: the nonfinite=skip
 * flag of a forward and backward lives in their saved region). */
int precc_rt_commit_buffers(precc_rt *rt, int layer, long m,
                            void *const *buffers, void *stream);

/* ---- expert groups: an MoE block's experts as one plan (runtime/grouped.c)
 *
 * precc build writes, per MoE block whose experts share a policy, a group
 * (docs/artifacts.md, "Expert groups"): one grouped quantize per tensor
 * and one grouped GEMM per grouped GEMM kind (fprop and dgrad m-grouped,
 * wgrad k-grouped) for all its experts, instead of a launch per expert.
 * A GEMM the recipe cannot group (group_info.grouped[] 0: e.g. a rowwise
 * wgrad, whose scales span every expert's tokens) stays with each
 * expert's own layer, and the grouped calls refuse its output.
 *
 * The caller routes and permutes: x [m_total, k] holds the routed tokens
 * sorted by expert (expert 0's rows first), offsets the experts' END
 * offsets, int32 offsets[e] = the row after expert e's last (so expert e
 * has rows [offsets[e-1], offsets[e]), offsets[-1] = 0), exactly
 * `experts` of them: non-decreasing, >= 0, <= m_total. Rows past
 * offsets[experts-1] belong to no expert (padding the caller chose): y is
 * 0 there and they add nothing to dW. An expert may have 0 rows (its dW
 * is 0), any number of rows: the kernels predicate the rows past an
 * expert's end, no padding copies. w is the experts' weights stacked
 * [experts * n, k] (expert e's W at rows e*n ...), dw likewise. y, dy
 * [m_total, n], dx [m_total, k]. Unpermuting (and the top-k weights) is
 * the caller's. Where the recipe scales in blocks along the tokens (the
 * blockwise and MX wgrads: xᵀ and dYᵀ in 1x128 or 1x32 blocks), every
 * non-empty expert must start on a block (token_align): pad each expert's
 * rows up to it, as DeepGEMM's contiguous layout does.
 *
 * offsets live where the backend's buffers do (device memory on cuda,
 * 16-byte aligned). cpu checks them before running anything (count,
 * sign, order, m_total, token_align) and refuses bad ones with the
 * reason. cuda never reads them on the host in a call (no sync, so a step
 * stays capturable): the kernels clamp them (a bad offset gives wrong
 * rows, never an access out of bounds), and precc_rt_grouped_check says
 * afterwards whether any call had bad ones.
 *
 * Group g's step is also layer precc_rt_layer_count(rt) + g of the
 * layer-indexed queries (precc_rt_buffer_info, precc_rt_step_info,
 * precc_rt_buffer_place, precc_rt_layer_sizes); precc_rt_forward and
 * precc_rt_backward refuse it (they have no offsets). */
int precc_rt_group_count(const precc_rt *rt);
const char *precc_rt_group_name(const precc_rt *rt, int group);
int precc_rt_group_find(const precc_rt *rt, const char *name);
typedef struct precc_group_info {
	const char *name;       /* the fused parameter's key:
	                           "model.layers.3.mlp.experts.gate_proj" */
	int experts;
	int grouped[3];         /* fprop, dgrad, wgrad: run grouped */
	long n, k;              /* each expert's W [n, k] */
	int layer;              /* the group's step as a layer index
	                           (precc_rt_layer_count + group) */
	long token_align;       /* forward and backward: every non-empty
	                           expert starts at a multiple of this (1: any) */
	long token_align_fwd;   /* the forward's alone */
} precc_group_info;
int precc_rt_group_info(const precc_rt *rt, int group, precc_group_info *info);
/* Expert e's own layer (its per-expert plan: what the group leaves to
 * it, the GEMMs not grouped), or -1. */
int precc_rt_group_expert_layer(const precc_rt *rt, int group, int expert);

/* The group's regions at m_total (precc_layer_sizes; k, n per expert). */
int precc_rt_group_sizes(const precc_rt *rt, int group, long m_total,
                         precc_layer_sizes *s);

/* The group's forward: x, w -> y for every expert at once, filling saved
 * (what its backward needs), as precc_rt_forward. noffsets must be the
 * group's experts. y must be NULL when the group's fprop is not grouped
 * (grouped[0] 0; refused otherwise). 0 or -1. */
int precc_rt_forward_grouped(precc_rt *rt, int group, long m_total,
                             const int32_t *offsets, int noffsets,
                             const void *x, const void *w, void *y,
                             void *saved, void *state, void *workspace,
                             uint64_t seed, void *stream);

/* The group's backward: dy and saved -> dx [m_total, k] (each row's
 * expert's dX; 0 on the rows of no expert) and dw [experts * n, k] (each
 * expert's dW; 0 for an expert without rows), as precc_rt_backward, on
 * the same offsets as its forward; dx or dw NULL: that GEMM is not run.
 * A GEMM the group does not run grouped (precc_rt_group_info.grouped[1]
 * for dgrad, [2] for wgrad, 0) leaves its output to each expert's own
 * layer (precc_rt_group_expert_layer): a non-NULL dx, or dw / main_grad,
 * is then refused, on both backends, rather than run per expert behind
 * the caller's back (cuda would need the offsets on the host). 0 or -1. */
int precc_rt_backward_grouped(precc_rt *rt, int group, long m_total,
                              const int32_t *offsets, int noffsets,
                              const void *x, const void *w, const void *dy,
                              void *dx, void *dw, float *main_grad,
                              void *saved, void *state, void *workspace,
                              uint64_t seed, void *stream);

/* Bad offsets of the grouped calls since the last check: 0 when none, -1
 * with the error (the group, the call, which offset and why) when some
 * call had them. cpu refuses them in the call itself, so this is 0 there.
 * cuda: each grouped call enqueues an asynchronous copy of its offsets
 * into pinned host memory on the call's stream; this reads those copies,
 * so call it after synchronizing the streams (precc_rt_sync). Up to
 * PRECC_GROUPED_CHECKS calls between checks are kept; older ones are not
 * checked (the count says so in the error). */
#define PRECC_GROUPED_CHECKS 64
int precc_rt_grouped_check(precc_rt *rt);

/* ---- data-parallel amax reduction (runtime/reduce.c) -------------------
 *
 * With data parallelism every rank must commit the same scales: before
 * precc_rt_commit, the step's amaxes (the saved f32 buffers the layers'
 * commit steps read: x.amax, w.amax, dy.amax under delayed scaling) are
 * reduced with max across ranks, as Transformer Engine's reduce_amax does.
 * One call gathers every amax of the given layers into buf (contiguous,
 * the caller's, backend memory: device memory on cuda), reduces it once,
 * and scatters it back into the saved regions; on cuda all copies are
 * asynchronous on stream. */

/* The callback: reduce n floats of buf in place with max across ranks
 * (buf is device memory on cuda, host memory on cpu). 0 on success. */
typedef int (*precc_amax_reduce_fn)(float *buf, size_t n, void *stream,
                                    void *ctx);

/* The floats buf needs for these layers (layers NULL: 0 .. nlayers-1);
 * 0 when they have none (or on error). */
size_t precc_rt_amax_count(const precc_rt *rt, int nlayers, const int *layers);

/* saved[i] is the saved region of layers[i]'s forward at M. 0 or -1. */
int precc_rt_amax_reduce(precc_rt *rt, int nlayers, const int *layers, long m,
                         void *const *saved, float *buf, size_t nbuf,
                         precc_amax_reduce_fn reduce, void *ctx, void *stream);

/* The same through NCCL: libnccl.so.2 is dlopen'ed (never linked) and one
 * ncclAllReduce(buf, buf, n, ncclFloat32, ncclMax, comm, stream) reduces
 * the buffer; comm is the caller's ncclComm_t. cuda backend only. 0 or -1
 * ("nccl: cannot load libnccl.so.2: ...", NCCL's error string). */
int precc_rt_amax_reduce_nccl(precc_rt *rt, int nlayers, const int *layers,
                              long m, void *const *saved, float *buf,
                              size_t nbuf, void *comm, void *stream);

/* ---- the training policy: loss scaling, clipping, AdamW --------------
 *
 * What a recipe's `training = { ... }` says, from the manifest, and the
 * host code that carries it out (runtime/train.c). These run on the CPU
 * over host memory, on either backend: no generated kernels for them yet
 * (on cuda a trainer downloads gradients or runs its own optimizer). */

typedef enum precc_loss_scaling {
	PRECC_LOSS_NONE, PRECC_LOSS_STATIC, PRECC_LOSS_DYNAMIC,
} precc_loss_scaling;

typedef struct precc_training_policy {
	precc_loss_scaling loss_scale;
	float loss_scale_init;      /* static scale, or dynamic's initial one */
	float growth_factor, backoff_factor;
	int growth_interval;
	int master_weights;         /* precc_format: fp32, bf16 or fp16 */
	int optimizer_state;        /* precc_format of AdamW's moments */
	int stochastic_rounding;    /* of the update into low-precision masters */
	int from_manifest;          /* 0: the manifest had no "training" key */
} precc_training_policy;

/* The defaults of docs/recipes.md: no loss scaling (dynamic's numbers:
 * 65536, 2, 0.5, 2000), fp32 masters and state, no stochastic rounding. */
void precc_training_policy_default(precc_training_policy *p);
/* The loaded manifest's policy (the defaults when it has none). */
void precc_rt_training_policy(const precc_rt *rt, precc_training_policy *p);

/* Loss scaling, torch.amp.GradScaler's rule (docs/runtime.md cites it). */
typedef struct precc_loss_scaler {
	precc_loss_scaling kind;
	float scale;                /* multiply the loss by this; 1 for none */
	int32_t growth_tracker;     /* consecutive unskipped steps */
	float growth_factor, backoff_factor;
	int growth_interval;
	long steps, skipped;        /* updates seen, and those that skipped */
} precc_loss_scaler;

void precc_loss_scaler_init(precc_loss_scaler *s, const precc_training_policy *p);

/* One pass over every gradient tensor (the multi-tensor unscale): for
 * tensor t of n[t] elements of format fmt[t] (fp32, bf16, fp16),
 * out[t][i] = g * inv_scale in fp32 (g itself when inv_scale is 1), and
 * the result is 1 when any g is inf or NaN, else 0. out[t] may be
 * grads[t] when fmt[t] is fp32 (in place). */
int precc_unscale_check(int ntensors, const void *const *grads,
                        const int *fmt, const long *n, float inv_scale,
                        float *const *out);

/* The scale update after a step's check: found_inf -> scale *= backoff,
 * tracker 0; else tracker + 1, and at growth_interval scale *= growth
 * (kept only when finite), tracker 0. Static and none never change.
 * Returns 1 when the optimizer step must be skipped (found_inf), else 0. */
int precc_loss_scaler_update(precc_loss_scaler *s, int found_inf);

/* Gradient clipping by global norm, after unscaling (torch.nn.utils.
 * clip_grad_norm_ with norm 2): total = sqrt(sum of squares over every
 * tensor, in double); when max_norm > 0, every element times
 * min(1, max_norm / (total + 1e-6)) in fp32. Returns total. */
double precc_clip_grad_norm(int ntensors, float *const *grads, const long *n,
                            double max_norm);

/* AdamW (torch.optim.AdamW: decoupled weight decay, bias correction).
 * Doubles, as torch's Python-side hyperparameters are: 1 - beta1 is
 * computed in double and only then rounded to fp32. */
typedef struct precc_adamw {
	double lr, beta1, beta2, eps, weight_decay;
} precc_adamw;

/* One parameter tensor's optimizer view, all host memory. */
typedef struct precc_param {
	long n;                     /* elements */
	int master_format;          /* fp32, bf16, fp16 */
	void *master;               /* n elements: the authoritative weights */
	int state_format;           /* fp32, bf16, fp16: m and v */
	void *m, *v;                /* n elements each, zero at the start */
	int working_format;         /* what the kernels read: fp32, bf16, fp16 */
	void *working;              /* n elements, or NULL: written from master */
	uint32_t stream;            /* Philox stream of this tensor (distinct
	                               per tensor) for stochastic rounding */
} precc_param;

/* Step t (1, 2, ...) of AdamW on p with the fp32 gradient grad:
 *   w = w * (1 - lr * wd);  m = m + (1 - b1)(g - m);
 *   v = b2 v + (1 - b2) g^2;  w = w - lr / (1 - b1^t) * m / (sqrt(v) /
 *   sqrt(1 - b2^t) + eps)
 * in fp32 on the decoded values; m and v stored back in state_format
 * (round to nearest), w in master_format: round to nearest, or with
 * stochastic set, stochastically with the bits precc_sr_bits(seed,
 * p->stream, i) (interp.h's Philox stream; a fresh seed per step). Then
 * working = master in working_format (round to nearest). 0, or -1 on a
 * bad format or t < 1. */
int precc_adamw_step(const precc_adamw *h, long t, precc_param *p,
                     const float *grad, int stochastic, uint64_t seed);

/* ---- scaling state ---------------------------------------------------
 *
 * Per tensor: a ring of the last history_len amax values, the position of
 * the next slot to write, the scale and its inverse. The state belongs to
 * one recipe and one model, named by 64-bit identity hashes the caller
 * supplies (precc_rt_state_new: from the manifest); a state file only loads into a
 * state with the same identities and the same tensor list (names and
 * history lengths, in order). A new state has zero histories, pos 0 and
 * scale = scale_inv = 1. Lives in host memory. */

typedef struct precc_state precc_state;

/* The longest tensor name the state file can hold, in bytes. */
#define PRECC_STATE_NAME_MAX 4096

/* Creates a state for n tensors; names[i] is copied, history_len[i] >= 1.
 * Names must be non-empty, at most PRECC_STATE_NAME_MAX bytes, and
 * distinct. Returns NULL (with an error) on bad input or out of memory. */
precc_state *precc_state_new(uint64_t recipe_hash, uint64_t model_hash,
                             size_t n, const char *const *names,
                             const uint32_t *history_len);

/* NULL is allowed. */
void precc_state_free(precc_state *st);

/* The number of tensors. */
size_t precc_state_count(const precc_state *st);

/* The index of the tensor named name, or -1. */
long precc_state_find(const precc_state *st, const char *name);

/* A view of one tensor's state; the pointers stay valid until
 * precc_state_free and may be written through. */
typedef struct precc_state_tensor {
	const char *name;
	uint32_t history_len;
	uint32_t *pos;          /* next slot of amax_history to write */
	float *amax_history;    /* history_len values */
	float *scale;           /* multiply to quantize */
	float *scale_inv;       /* multiply to dequantize */
} precc_state_tensor;

/* Fills *t for tensor i. Returns 0, or -1 when i is out of range. */
int precc_state_tensor_at(precc_state *st, size_t i, precc_state_tensor *t);

/* The caller's stochastic-rounding counter: how many seeds it has drawn
 * (precc.torch derives each call's seed from it), saved in the state file
 * so that a resumed run draws the same seeds and rounds bit for bit as
 * one that never stopped. 0 in a new state, and after loading a file of
 * format version 1, which has none. */
uint64_t precc_state_sr_counter(const precc_state *st);
void precc_state_set_sr_counter(precc_state *st, uint64_t n);

/* Writes the state to path: to a temporary file in the same directory,
 * flushed and synced, then renamed over path, so path holds either the old
 * or the new state, never a part. Returns 0 or -1. */
int precc_state_save(const precc_state *st, const char *path);

/* Reads path into st. The whole file is checked first — magic, format
 * version, size, checksum, then recipe, model and tensor list against st —
 * and st is only written when everything matched; on any error it is left
 * as it was. The error names the file and what was wrong: "bad magic",
 * "truncated", "checksum mismatch", "format version N is newer ...",
 * "recipe mismatch", "model mismatch", "tensor list mismatch". Returns 0
 * or -1. */
int precc_state_load(precc_state *st, const char *path);

/* ---- scaling state of a loaded artifact -------------------------------
 *
 * A state for every buffer of role "state" of every layer, under the
 * manifest's recipe and model hashes, so a state file written for another
 * recipe or model is refused by precc_state_load. Each buffer is one
 * state tensor named "FQN:BUFFER" whose amax_history holds the buffer's
 * bytes (history_len = ceil(bytes / 4) at M = 1: state buffers never
 * depend on M); pos, scale and scale_inv are unused (0, 1, 1). */
precc_state *precc_rt_state_new(const precc_rt *rt);

/* Copies layer's state buffers (buffers[] as for precc_rt_run_layer)
 * into st (pull: after steps, to save) or st into them (push: after a
 * load, before steps). Synchronous. 0 or -1 (st not from this runtime's
 * manifest, or a copy failed). */
int precc_rt_state_pull(precc_rt *rt, precc_state *st, int layer,
                        void *const *buffers);
int precc_rt_state_push(precc_rt *rt, precc_state *st, int layer,
                        void *const *buffers);

#ifdef __cplusplus
}
#endif

#endif
