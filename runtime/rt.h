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
#include "precc/precc_rt.h"

#ifdef PRECC_HAVE_CUDA_H
#include <cuda.h>
#endif

#define RT_ERR_MAX 16384   /* room for a message plus a JIT log */
#define RT_JIT_LOG 8192    /* bytes of each JIT log buffer */

struct precc_rt {
	precc_backend backend;
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

/* Launches k on the caller's stream (NULL: the legacy default stream). */
int rt_cuda_launch(precc_rt *rt, const rt_kernel *k, const unsigned grid[3],
                   const unsigned block[3], unsigned smem, CUstream stream,
                   void **params);

int rt_cuda_alloc(precc_rt *rt, size_t bytes, CUdeviceptr *p);
int rt_cuda_free(precc_rt *rt, CUdeviceptr p);
int rt_cuda_htod(precc_rt *rt, CUdeviceptr dst, const void *src, size_t bytes);
int rt_cuda_dtoh(precc_rt *rt, void *dst, CUdeviceptr src, size_t bytes);
int rt_cuda_memset8(precc_rt *rt, CUdeviceptr dst, unsigned char v, size_t n);
int rt_cuda_sync(precc_rt *rt, CUstream stream);

/* 0 when p is device (or managed) memory of the driver; -1 with "what is a
 * host pointer, the cuda backend needs device memory" otherwise. */
int rt_cuda_check_device_ptr(precc_rt *rt, const void *p, const char *what);
#endif

#endif
