/*
 * backend_cpu.c — floor 3 (backend.h): the cpu backend. A step runs its
 * kernel's IR through precc_ir's interpreter on host buffers; memory is
 * host memory (64-byte aligned), copies are memcpy, nothing is queued so
 * sync is a no-op. Device memory given to it is refused, when a driver is
 * loaded in the process to tell (cuda.c's rt_cuda_is_device_ptr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precc/interp.h"
#include "backend.h"

static int cpu_load(precc_rt *rt, rt_artifact *a, const json *m, const char *file)
{
	for (int i = 0; i < a->nkern; i++)
		snprintf(a->kern[i].loaded, sizeof a->kern[i].loaded, "ir");
	return 0;
}

static void cpu_unload(precc_rt *rt, rt_artifact *a) {}

static int cpu_mem_ok(precc_rt *rt, const void *p, uintptr_t range[2])
{
	range[0] = (uintptr_t)p;
	range[1] = (uintptr_t)p + 1;
	return !rt_cuda_is_device_ptr(p);
}

static int cpu_check_mem(precc_rt *rt, const void *p, const char *what)
{
	if (!rt_cuda_is_device_ptr(p))
		return 0;
	rt_error("plan: %s (%p) is device memory; the cpu backend needs host "
	         "memory", what, p);
	return -1;
}

static int cpu_check_stream(precc_rt *rt, void *stream) { return 0; }

static int cpu_run(precc_rt *rt, const rt_layer *l, const rt_step *st,
                   rt_kdesc *k, long m, void *const *buffers, uint64_t seed,
                   void *stream, int *skipped)
{
	IrInterpOpts o;
	IrInterp *ip;
	char err[1024];
	int rc = -1;

	ir_interp_opts_init(&o);
	o.m = m;
	o.seed = seed;
	if (!(ip = ir_interp_new(k->fn, &o, err, sizeof err))) {
		rt_error("cpu: layer '%s' kernel '%s': %s", l->fqn, k->name, err);
		return -1;
	}
	for (int p = 0; p < k->nparam; p++) {
		size_t bytes = rt_buffer_extent(l, st->arg[p], m)->bytes;
		if (k->param[p].out)
			continue;
		if (ir_interp_bind(ip, k->fn->val[k->abi_value[p]].name,
		                   buffers[st->arg[p]], bytes))
			goto out;
	}
	if (ir_interp_run(ip))
		goto out;
	for (int p = 0; p < k->nparam; p++) {
		const rt_buffer *b = &l->buf[st->arg[p]];
		size_t bytes = rt_buffer_extent(l, st->arg[p], m)->bytes;
		const void *v = ir_interp_value(ip, k->abi_value[p]);
		if (!k->param[p].out)
			continue;
		if (!v || ir_interp_value_bytes(ip, k->abi_value[p], NULL, NULL) != bytes) {
			rt_error("cpu: layer '%s' kernel '%s': output '%s' has no value "
			         "of %zu bytes", l->fqn, k->name, b->name, bytes);
			ir_interp_free(ip);
			return -1;
		}
		memcpy(buffers[st->arg[p]], v, bytes);
	}
	*skipped |= ir_interp_skipped(ip);
	rc = 0;
out:
	if (rc)
		rt_error("cpu: layer '%s' kernel '%s': %s", l->fqn, k->name,
		         ir_interp_error(ip));
	ir_interp_free(ip);
	return rc;
}

static void *cpu_alloc(precc_rt *rt, size_t bytes)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, bytes ? bytes : 1)) {
		rt_error("out of memory (%zu bytes)", bytes);
		return NULL;
	}
	return p;
}

static void cpu_free(precc_rt *rt, void *p) { free(p); }

static int cpu_copy(precc_rt *rt, void *dst, const void *src, size_t bytes, void *stream)
{
	memmove(dst, src, bytes);
	return 0;
}

static int cpu_upload(precc_rt *rt, void *dst, const void *src, size_t bytes)
{
	return cpu_copy(rt, dst, src, bytes, NULL);
}

static int cpu_sync(precc_rt *rt, void *stream) { return 0; }

static void cpu_close(precc_rt *rt) {}

const rt_ops rt_cpu_ops = {
	.load = cpu_load, .unload = cpu_unload,
	.mem_ok = cpu_mem_ok, .check_mem = cpu_check_mem,
	.check_stream = cpu_check_stream,
	.run = cpu_run, .bulk = NULL,   /* commit_bulk.c commits layer by layer */
	.alloc = cpu_alloc, .free = cpu_free,
	.upload = cpu_upload, .download = cpu_upload, .copy = cpu_copy,
	.sync = cpu_sync, .close = cpu_close,
};
