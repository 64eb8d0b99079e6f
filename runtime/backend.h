/*
 * backend.h — floor 3 of the runtime (base.h lists the floors): the
 * backends behind one table of functions, rt_ops. The floors above never
 * ask which backend they are on to move memory or run a step: they call
 * rt->ops. cpu (backend_cpu.c) runs a step's IR through the interpreter on
 * host buffers; cuda (backend_cuda.c over the driver layer cuda.c) loads
 * modules and launches on the caller's stream. Tests put a fake driver
 * under cuda (tests/runtime/fake_cuda.c, through $PRECC_LIBCUDA).
 *
 * Everything CUDA-typed is behind PRECC_HAVE_CUDA_H: without cuda.h the
 * runtime builds with the cpu backend only, and opening cuda says why.
 */
#ifndef PRECC_RT_BACKEND_H
#define PRECC_RT_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include "plan.h"

#ifdef PRECC_HAVE_CUDA_H
#include <cuda.h>
#endif

#define RT_JIT_LOG 8192    /* bytes of each JIT log buffer */

typedef struct rt_ops rt_ops;

struct precc_rt {
	precc_backend backend;
	const rt_ops *ops;         /* the backend's table */
	rt_artifact *art;          /* precc_rt_load, or NULL */
	int timing;                /* precc_rt_set_timing */
	int device_sm;             /* compute capability (90), 0: no device (cpu) */
	struct rt_gcheck *gcheck;  /* grouped.c: the offsets of grouped calls,
	                              checked later (cuda) */
#ifdef PRECC_HAVE_CUDA_H
	CUdevice dev;
	CUcontext ctx;
	bool primary;          /* we retained dev's primary context */
	int sm_major, sm_minor, sm_count;
	int smem_optin;        /* most dynamic shared memory a block may opt into */
	char dev_name[256];
	char jit_info[RT_JIT_LOG];  /* info log of the last module load */
	CUstream stream_ok;    /* the last stream found to be of ctx */
	bool stream_ok_set;
#endif
};

/* What a backend does. Each returns 0 or -1 with the error set, unless
 * said otherwise; a stream is the caller's (cuda: a CUstream, NULL the
 * legacy default stream; cpu: ignored). */
struct rt_ops {
	/* the kernels of a's layers (m: the parsed manifest, file its name for
	 * errors): cuda loads each used kernel's cubin or PTX; cpu runs the IR
	 * and loads nothing. Sets every kernel's loaded, num_regs, spills. */
	int (*load)(precc_rt *, rt_artifact *a, const json *m, const char *file);
	void (*unload)(precc_rt *, rt_artifact *a);
	/* 1 when p is the backend's kind of memory (and device); quiet. It
	 * sets range to [lo, hi), what it learnt holds p and is of that kind
	 * too (cuda: p's whole allocation; at least [p, p + 1)), so that a
	 * call checks each allocation once (rt_seen) */
	int (*mem_ok)(precc_rt *, const void *p, uintptr_t range[2]);
	/* the same with the message: what names p ("layer 'L' buffer 2 'x'") */
	int (*check_mem)(precc_rt *, const void *p, const char *what);
	/* 0 when stream can carry this runtime's work (cuda: it belongs to the
	 * runtime's context) */
	int (*check_stream)(precc_rt *, void *stream);
	/* step st of layer l with kernel k (the one launched at M) on buffers;
	 * cpu ORs a nonfinite=skip into *skipped */
	int (*run)(precc_rt *, const rt_layer *l, const rt_step *st, rt_kdesc *k,
	           long m, void *const *buffers, uint64_t seed, void *stream,
	           int *skipped);
	/* one launch of k's bulk_entry over a table of rows (commit_bulk.c);
	 * NULL: none, the layers are committed one by one */
	int (*bulk)(precc_rt *, const rt_kdesc *k, void *table, long rows,
	            void *stream);
	void *(*alloc)(precc_rt *, size_t bytes);
	void (*free)(precc_rt *, void *p);
	int (*upload)(precc_rt *, void *dst, const void *src, size_t bytes);
	int (*download)(precc_rt *, void *dst, const void *src, size_t bytes);
	/* backend memory to backend memory, in stream order (cpu: memmove) */
	int (*copy)(precc_rt *, void *dst, const void *src, size_t bytes,
	            void *stream);
	int (*sync)(precc_rt *, void *stream);
	void (*close)(precc_rt *);
	/* host memory the backend's copies may target asynchronously (cuda:
	 * pinned), and a copy of backend memory into it in stream order; NULL
	 * on cpu (its memory is the host's) */
	void *(*host_alloc)(precc_rt *, size_t bytes);
	void (*host_free)(precc_rt *, void *p);
	int (*download_async)(precc_rt *, void *host, const void *src, size_t bytes,
	                      void *stream);
};

/* backend_cpu.c */
extern const rt_ops rt_cpu_ops;

/* backend_cuda.c: opens the driver (rt_cuda_open) and sets rt->ops; -1
 * with the reason as the error. */
int rt_cuda_backend_open(precc_rt *rt);

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
	int cluster;             /* CTAs per cluster along x; <= 1: none */
	int clusters;            /* clusters the device holds at once
	                            (cuOccupancyMaxActiveClusters), 0: unknown */
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

/* k runs in clusters of `cluster` CTAs along x (manifest "cluster"; 1:
 * none): needs cuLaunchKernelEx (else -1, naming the manifest kernel
 * `name`), allows a non-portable size over 8, and sets k->clusters from
 * cuOccupancyMaxActiveClusters when the driver has it (0 of them: -1). */
int rt_cuda_kernel_cluster(precc_rt *rt, rt_kernel *k, const char *name, int cluster,
                           int threads, unsigned smem);

/* out (a CUtensorMap) := cuTensorMapEncodeTiled of t over the buffer at
 * base, at M = m. */
int rt_cuda_tmap_encode(precc_rt *rt, const rt_tmap *t, CUdeviceptr base, long m, void *out);
/* Launches k on the caller's stream (NULL: the legacy default stream); a
 * kernel in clusters (k->cluster > 1) by cuLaunchKernelEx with the cluster
 * dimension, its grid x a multiple of the cluster. */
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
/* pinned host memory, and a copy into it in stream order */
int rt_cuda_host_alloc(precc_rt *rt, size_t bytes, void **p);
int rt_cuda_host_free(precc_rt *rt, void *p);
int rt_cuda_dtoh_async(precc_rt *rt, void *dst, CUdeviceptr src, size_t bytes,
                       CUstream stream);
int rt_cuda_dtod_async(precc_rt *rt, CUdeviceptr dst, CUdeviceptr src,
                       size_t bytes, CUstream stream);

/* backend_cuda.c: the loaded function of manifest kernel k (NULL before
 * the cuda backend loaded it), for tests that launch it by hand. */
const rt_kernel *rt_cuda_kdesc_kernel(const rt_kdesc *k);

/* 0 when stream belongs to rt's context (NULL, the legacy default stream,
 * always does); -1 with "cuda: stream S belongs to another context" or the
 * driver's error otherwise. The last stream that passed is remembered. */
int rt_cuda_check_stream(precc_rt *rt, CUstream stream);

/* 0 when p is device (or managed) memory of the driver; -1 with "what is a
 * host pointer, the cuda backend needs device memory" otherwise. */
int rt_cuda_check_device_ptr(precc_rt *rt, const void *p, const char *what);
/* The same check, quiet: 1 when rt_cuda_check_device_ptr would pass p
 * (the per-call fast path; it formats no message). */
int rt_cuda_device_ptr_ok(precc_rt *rt, const void *p, uintptr_t range[2]);
#endif
/* 1 when the driver is loaded in this process and says p is device (or
 * managed) memory; 0 otherwise (no driver, host memory, or unknown). For
 * the cpu backend's check against device pointers. */
int rt_cuda_is_device_ptr(const void *p);

#endif
