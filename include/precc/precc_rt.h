/*
 * precc/precc_rt.h — the precc runtime: what a host trainer links.
 *
 * libprecc_rt depends on precc_ir, libc and libdl only. The CUDA driver is
 * never linked: libcuda.so.1 is dlopen'ed when the cuda backend is opened,
 * so the same binary runs (on the cpu backend) where no driver exists.
 *
 * Conventions: functions that can fail return NULL or -1 and leave a
 * message in precc_rt_last_error(); they never abort and never print.
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

/* ---- artifacts and plans (later) -------------------------------------
 * precc_rt_load(rt, DIR) will read DIR/manifest.json and its kernels;
 * precc_rt_run_layer(...) will run one layer's quantize plan on the
 * caller's stream, checking shapes, alignment, null pointers and pointer
 * kind against the backend before any launch. Their shape waits for the
 * artifact format; nothing is declared here until it exists. */

/* ---- scaling state ---------------------------------------------------
 *
 * Per tensor: a ring of the last history_len amax values, the position of
 * the next slot to write, the scale and its inverse. The state belongs to
 * one recipe and one model, named by 64-bit identity hashes the caller
 * supplies (later: from the manifest); a state file only loads into a
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

#ifdef __cplusplus
}
#endif

#endif
