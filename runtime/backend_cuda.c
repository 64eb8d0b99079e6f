/*
 * backend_cuda.c — floor 3 (backend.h): the cuda backend's table over the
 * driver layer (cuda.c). Load: each kernel a step of the chosen layers
 * uses, from the cubin of the device's own target when the manifest lists
 * one, else the PTX, checked against the size and FNV-1a 64 the manifest
 * records (rt_kernel_file), then its entry points, registers, residency
 * and sync scratch. Run: zero the zero_outputs and the scratch, launch
 * with the plan's grid on the caller's stream. Memory: the driver's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precc/grid.h"
#include "backend.h"

#ifndef PRECC_HAVE_CUDA_H

int rt_cuda_backend_open(precc_rt *rt) { return rt_cuda_open(rt); }

#else

/* What the backend keeps per kernel (rt_kdesc.bk). */
typedef struct cuda_kern {
	CUmodule mod;
	rt_kernel k;
	rt_kernel kbulk;        /* bulk_entry's function, when the kernel has one */
	CUdeviceptr sync;       /* sync_words u32 of device memory */
} cuda_kern;

const rt_kernel *rt_cuda_kdesc_kernel(const rt_kdesc *k)
{
	const cuda_kern *ck = k->bk;
	return ck ? &ck->k : NULL;
}

static CUdeviceptr dptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

/* Whether the device can run k at all, checked when the plan is loaded:
 * one CTA must fit on an SM (threads x registers, shared memory; a
 * cooperative kernel then loops over its tiles on the CTAs that fit). */
static int launchable(precc_rt *rt, const rt_kdesc *k, rt_kernel *kn)
{
	if (rt_cuda_kernel_resident(rt, kn, k->threads, k->smem))
		return -1;
	if (kn->resident < 1) {
		rt_error("cuda: kernel '%s' cannot run on %s: not one CTA of %d "
		         "threads at %d registers and %u bytes of shared memory "
		         "fits on an SM", k->name, rt->dev_name, k->threads,
		         kn->num_regs, k->smem);
		return -1;
	}
	return 0;
}

/* Loads kernel k's file for target tg: the cubin when tg is the
 * device's own (cubin_ok) and the manifest has one, else the PTX. */
static int load_kernel(precc_rt *rt, const char *file, rt_artifact *a,
                       const json *jk, rt_kdesc *k, const char *tg, int cubin_ok)
{
	const json *files = json_get(jk, "files"), *pick;
	cuda_kern *ck;
	char why[4600], what[4400];
	char *image = NULL;
	size_t len;
	int rc;

	if (!files || files->kind != JSON_OBJ)
		return rt_manifest_error(file, jk, "kernel '%s': missing key 'files' (the cuda "
		           "backend needs its PTX or cubin)", k->name);
	if (!(pick = json_get(files, tg)) || pick->kind != JSON_OBJ)
		return rt_manifest_error(file, files, "kernel '%s': no files for %s", k->name, tg);
	/* the cubin, else the PTX; an unreadable cubin falls back to the PTX,
	 * one that is not the file precc build wrote does not */
	for (int pass = cubin_ok ? 0 : 1; pass < 2 && !image; pass++) {
		const char *kind = pass == 0 ? "cubin" : "ptx";
		const json *f = json_get(pick, kind);
		if (!f && pass == 0)
			continue;
		if (!f)
			return rt_manifest_error(file, pick, "kernel '%s': no 'ptx' for %s", k->name, tg);
		rc = rt_kernel_file(a->dir, pick, kind, &image, &len, why, sizeof why);
		if (rc == -2 || (rc == -1 && pass == 1))
			return rt_manifest_error(file, f ? f : pick, "kernel '%s': %s", k->name, why);
		if (image)
			snprintf(k->loaded, sizeof k->loaded, "%s", f->str);
	}
	snprintf(what, sizeof what, "kernel '%s' from '%s/%s'", k->name, a->dir, k->loaded);
	if (!(ck = calloc(1, sizeof *ck))) {
		free(image);
		rt_error("out of memory");
		return -1;
	}
	k->bk = ck;
	rc = rt_cuda_module_load(rt, image, what, &ck->mod);
	free(image);
	if (rc)
		return -1;
	if (k->bulk_entry && rt_cuda_kernel(rt, ck->mod, k->bulk_entry, &ck->kbulk))
		return -1;
	if (rt_cuda_kernel(rt, ck->mod, k->entry, &ck->k) ||
	    (k->smem && rt_cuda_kernel_reserve_smem(rt, &ck->k, k->smem)) ||
	    launchable(rt, k, &ck->k) ||
	    rt_cuda_kernel_cluster(rt, &ck->k, k->name, k->cluster, k->threads, k->smem))
		return -1;
	if (k->sync_words &&
	    rt_cuda_alloc(rt, (size_t)k->sync_words * 4, &ck->sync))
		return -1;
	k->num_regs = ck->k.num_regs;
	k->spill_bytes = ck->k.local_bytes;
	return 0;
}

static int cuda_load(precc_rt *rt, rt_artifact *a, const json *m, const char *file)
{
	const json *ks = json_get(m, "kernels");

	for (int i = 0; i < a->nkern; i++) {
		if (!a->kern[i].used) {
			snprintf(a->kern[i].loaded, sizeof a->kern[i].loaded, "-");
			continue;
		}
		if (load_kernel(rt, file, a, ks->item[i], &a->kern[i], a->layers_of,
		                a->own_target))
			return -1;
	}
	return 0;
}

static void cuda_unload(precc_rt *rt, rt_artifact *a)
{
	for (int i = 0; a && i < a->nkern; i++) {
		cuda_kern *ck = a->kern[i].bk;
		if (!ck)
			continue;
		if (ck->sync)
			rt_cuda_free(rt, ck->sync);
		if (ck->mod)
			rt_cuda_module_unload(rt, ck->mod);
		free(ck);
		a->kern[i].bk = NULL;
	}
}

static int cuda_mem_ok(precc_rt *rt, const void *p, uintptr_t range[2])
{
	return rt_cuda_device_ptr_ok(rt, p, range);
}

static int cuda_check_mem(precc_rt *rt, const void *p, const char *what)
{
	return rt_cuda_check_device_ptr(rt, p, what);
}

static int cuda_check_stream(precc_rt *rt, void *stream)
{
	return rt_cuda_check_stream(rt, (CUstream)stream);
}

/* A kernel that loops over its tiles runs on a 1-D grid of min(its tiles,
 * CTAs per SM x SMs) (precc/grid.h): a cooperative one because its CTAs
 * must all be resident at once (codegen/kemit.c), a persistent one (the
 * sm_90a GEMM, tile += nctaid.x) so that each SM keeps its CTAs and their
 * pipelines for the whole GEMM. Any device that holds one CTA runs it. */
static void loop_grid(const precc_rt *rt, const cuda_kern *ck, unsigned grid[3])
{
	precc_grid_loop(grid, (int64_t)ck->k.resident * rt->sm_count);
}

/* A persistent kernel in clusters: cluster x min(cluster tiles, clusters
 * resident), the latter cuOccupancyMaxActiveClusters' (clusters stay in
 * one GPC, so it can be below SMs / cluster), else CTAs per SM x SMs
 * rounded down to whole clusters (at least one). */
static void cluster_grid(const precc_rt *rt, const cuda_kern *ck, unsigned grid[3])
{
	int64_t c = ck->k.cluster, n = ck->k.clusters;
	if (n < 1)
		n = (int64_t)ck->k.resident * rt->sm_count / c;
	precc_grid_cluster(grid, n > 0 ? n : 1, (unsigned)c);
}

static int cuda_run(precc_rt *rt, const rt_layer *l, const rt_step *st,
                    rt_kdesc *k, long m, void *const *buffers, uint64_t seed,
                    void *stream_, int *skipped)
{
	CUstream stream = (CUstream)stream_;
	cuda_kern *ck = k->bk;
	CUdeviceptr ptr[32];
	void *params[41];   /* 32 pointers, sync, m, cols, seed, 4 tensor maps */
	int64_t m64 = m, cols64 = k->cols;
	uint64_t seed64 = seed;
	unsigned grid[3] = {1, 1, 1}, block[3] = {(unsigned)k->threads, 1, 1};
	int n = 0;

	if (rt_kernel_grid(k, l, st, m, grid)) {
		rt_error("cuda: layer '%s' kernel '%s': its grid at M=%ld is larger "
		         "than CUDA allows", l->fqn, k->name, m);
		return -1;
	}
	if (k->cluster > 1)
		cluster_grid(rt, ck, grid);
	else if (k->cooperative || k->persistent)
		loop_grid(rt, ck, grid);
	if (k->sync_words &&
	    rt_cuda_memset8_async(rt, ck->sync, 0, (size_t)k->sync_words * 4, stream))
		return -1;
	for (int z = 0; z < k->nzero; z++) {
		int b = st->arg[k->zero[z]];
		if (rt_cuda_memset8_async(rt, (CUdeviceptr)(uintptr_t)buffers[b], 0,
		                          rt_buffer_extent(l, b, m)->bytes,
		                          stream))
			return -1;
	}
	for (int p = 0; p < k->nparam; p++) {
		ptr[p] = (CUdeviceptr)(uintptr_t)buffers[st->arg[p]];
		params[n++] = &ptr[p];
	}
	if (k->sync_words)
		params[n++] = &ck->sync;
	if (k->has_m)
		params[n++] = &m64;
	if (k->cols)    /* the columns of a has_cols kernel's data (manifest cols) */
		params[n++] = &cols64;
	if (k->has_seed)
		params[n++] = &seed64;
	/* tensor maps last, 128 bytes each (kernelParams points at the bytes
	 * of a byval param; docs/codegen.md, the param order) */
	CUtensorMap tm[RT_MAXTMAP];
	for (int i = 0; i < k->ntmap; i++) {
		if (rt_cuda_tmap_encode(rt, &k->tmap[i], ptr[k->tmap[i].param], m, &tm[i]))
			return -1;
		params[n++] = &tm[i];
	}
	return (k->cooperative ? rt_cuda_launch_cooperative : rt_cuda_launch)
	       (rt, &ck->k, grid, block, k->smem, stream, params);
}

static int cuda_bulk(precc_rt *rt, const rt_kdesc *k, void *table, long rows,
                     void *stream)
{
	const cuda_kern *ck = k->bk;
	CUdeviceptr t = dptr(table);
	int64_t r = rows;
	void *params[2] = {&t, &r};
	/* a CTA per row, as TE's bulk kernel; the kernel also loops, so a grid
	 * capped below the rows stays correct */
	unsigned grid[3] = {(unsigned)(rows < 0x7fffffff ? rows : 0x7fffffff), 1, 1};
	unsigned block[3] = {(unsigned)k->threads, 1, 1};

	return rt_cuda_launch(rt, &ck->kbulk, grid, block, 0, (CUstream)stream, params);
}

static void *cuda_alloc(precc_rt *rt, size_t bytes)
{
	CUdeviceptr d;

	if (rt_cuda_alloc(rt, bytes ? bytes : 1, &d))
		return NULL;
	return (void *)(uintptr_t)d;
}

static void cuda_free(precc_rt *rt, void *p) { rt_cuda_free(rt, dptr(p)); }

static int cuda_upload(precc_rt *rt, void *dst, const void *src, size_t bytes)
{
	return rt_cuda_htod(rt, dptr(dst), src, bytes);
}

static int cuda_download(precc_rt *rt, void *dst, const void *src, size_t bytes)
{
	return rt_cuda_dtoh(rt, dst, dptr(src), bytes);
}

static int cuda_copy(precc_rt *rt, void *dst, const void *src, size_t bytes, void *stream)
{
	return rt_cuda_dtod_async(rt, dptr(dst), dptr(src), bytes, (CUstream)stream);
}

static int cuda_sync(precc_rt *rt, void *stream) { return rt_cuda_sync(rt, (CUstream)stream); }

static void *cuda_host_alloc(precc_rt *rt, size_t bytes)
{
	void *p = NULL;
	return rt_cuda_host_alloc(rt, bytes, &p) ? NULL : p;
}

static void cuda_host_free(precc_rt *rt, void *p)
{
	if (p)
		rt_cuda_host_free(rt, p);
}

static int cuda_download_async(precc_rt *rt, void *host, const void *src, size_t bytes,
                               void *stream)
{
	return rt_cuda_dtoh_async(rt, host, (CUdeviceptr)(uintptr_t)src, bytes, (CUstream)stream);
}

static const rt_ops cuda_ops = {
	.load = cuda_load, .unload = cuda_unload,
	.mem_ok = cuda_mem_ok, .check_mem = cuda_check_mem,
	.check_stream = cuda_check_stream,
	.run = cuda_run, .bulk = cuda_bulk,
	.alloc = cuda_alloc, .free = cuda_free,
	.upload = cuda_upload, .download = cuda_download, .copy = cuda_copy,
	.sync = cuda_sync, .close = rt_cuda_close,
	.host_alloc = cuda_host_alloc, .host_free = cuda_host_free,
	.download_async = cuda_download_async,
};

int rt_cuda_backend_open(precc_rt *rt)
{
	if (rt_cuda_open(rt))
		return -1;
	rt->ops = &cuda_ops;
	rt->device_sm = rt->sm_major * 10 + rt->sm_minor;
	return 0;
}

#endif
