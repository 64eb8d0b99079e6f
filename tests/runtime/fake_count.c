/*
 * fake_count.c — fake_cuda.c with counters on the driver calls that
 * synchronize with the host or allocate, for the layer API's promise that
 * forward, backward and commit only enqueue work (test_layer fake). The
 * fake's own definitions are renamed on the way in and wrapped here. As a
 * real driver does, it also knows pointers inside an allocation (the
 * layer API's regions hold buffers at offsets).
 */
#define cuMemAlloc_v2 fake_real_cuMemAlloc_v2
#define cuMemFree_v2 fake_real_cuMemFree_v2
#define cuMemcpyHtoD_v2 fake_real_cuMemcpyHtoD_v2
#define cuMemcpyDtoH_v2 fake_real_cuMemcpyDtoH_v2
#define cuMemsetD8_v2 fake_real_cuMemsetD8_v2
#define cuStreamSynchronize fake_real_cuStreamSynchronize
#define cuLaunchKernel fake_real_cuLaunchKernel
#define cuPointerGetAttribute fake_real_cuPointerGetAttribute
#define cuPointerGetAttributes fake_real_cuPointerGetAttributes
#include "fake_cuda.c"
#undef cuMemAlloc_v2
#undef cuMemFree_v2
#undef cuMemcpyHtoD_v2
#undef cuMemcpyDtoH_v2
#undef cuMemsetD8_v2
#undef cuStreamSynchronize
#undef cuLaunchKernel
#undef cuPointerGetAttribute
#undef cuPointerGetAttributes

static long n_alloc, n_free, n_htod, n_dtoh, n_memset, n_sync, n_launch, n_query;

void fake_count_reset(void) { n_alloc = n_free = n_htod = n_dtoh = n_memset = n_sync = n_launch = n_query = 0; }
/* cuPointerGetAttributes calls: precc_rt's per-call memory checks */
long fake_count_pointer_queries(void) { return n_query; }
/* allocations + frees + synchronous copies and memsets + syncs */
long fake_count_blocking(void) { return n_alloc + n_free + n_htod + n_dtoh + n_memset + n_sync; }
long fake_count_launches(void) { return n_launch; }

static size_t sizes[64];   /* per allocs[] slot of fake_cuda.c */

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	CUresult r = fake_real_cuMemAlloc_v2(p, n);
	n_alloc++;
	for (int i = 0; r == 0 && i < 64; i++)
		if ((uintptr_t)allocs[i] == *p)
			sizes[i] = n;
	return r;
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p)
{
	for (int i = 0; i < 64; i++)
		if (allocs[i] && p >= (uintptr_t)allocs[i] && p < (uintptr_t)allocs[i] + sizes[i])
			return fake_real_cuPointerGetAttribute(data, a, (uintptr_t)allocs[i]);
	return fake_real_cuPointerGetAttribute(data, a, p);
}
CUresult CUDAAPI cuPointerGetAttributes(unsigned n, CUpointer_attribute *a, void **data,
                                        CUdeviceptr p)
{
	n_query++;
	for (int i = 0; i < 64; i++)
		if (allocs[i] && p >= (uintptr_t)allocs[i] && p < (uintptr_t)allocs[i] + sizes[i])
			return fake_real_cuPointerGetAttributes(n, a, data, (uintptr_t)allocs[i]);
	return fake_real_cuPointerGetAttributes(n, a, data, p);
}
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p) { n_free++; return fake_real_cuMemFree_v2(p); }
CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { n_htod++; return fake_real_cuMemcpyHtoD_v2(d, s, n); }
CUresult CUDAAPI cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { n_dtoh++; return fake_real_cuMemcpyDtoH_v2(d, s, n); }
CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { n_memset++; return fake_real_cuMemsetD8_v2(d, v, n); }
CUresult CUDAAPI cuStreamSynchronize(CUstream s) { n_sync++; return fake_real_cuStreamSynchronize(s); }
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                CUstream s, void **params, void **extra)
{
	n_launch++;
	return fake_real_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

/* Streams and graphs, enough for test_gpu_layer's code path on this fake:
 * work runs at once, so a "captured" step has already run when the
 * capture ends, and launching its graph does nothing more. */
static int fake_stream, fake_graph, fake_exec, capturing;
int fake_count_capturing(void) { return capturing; }
CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned flags) { *s = (CUstream)(void *)&fake_stream; return 0; }
CUresult CUDAAPI cuStreamDestroy_v2(CUstream s) { return 0; }
CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m) { capturing = 1; return 0; }
CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *g)
{
	*g = (CUgraph)(void *)&fake_graph;
	capturing = 0;
	/* a blocking call during the capture would have invalidated it */
	return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long f)
{
	*e = (CUgraphExec)(void *)&fake_exec;
	return 0;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s) { return 0; }
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) { return 0; }
CUresult CUDAAPI cuGraphDestroy(CUgraph g) { return 0; }
