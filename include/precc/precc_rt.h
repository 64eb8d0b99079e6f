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
	size_t bytes;           /* rows x cols x element storage (interp.h) */
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
 * (those belong to the whole layer). For benchmarks and bisecting. */
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
