/*
 * reduce.c — data-parallel amax reduction: before the commit, the amaxes
 * of a step (the saved f32 buffers the layers' commit steps read) are
 * gathered into one contiguous buffer, reduced (max) across ranks in one
 * call — the caller's callback (torch.distributed, MPI, a pipe) or NCCL's
 * ncclAllReduce through a dlopen'ed libnccl.so.2 — and scattered back, so
 * every rank commits the same scales (TE's reduce_amax).
 *
 * NCCL's ABI values, from nccl.h / nccl/types.h (NCCL 2.x, e.g. as
 * vendored in aws/aws-ofi-nccl 3rd-party/nccl/cuda/include/nccl/types.h):
 * ncclSuccess 0, ncclFloat32 7, ncclMax 2; ncclAllReduce(sendbuff,
 * recvbuff, count, datatype, op, comm, stream).
 *
 * Floor 4 (rt.h) of the runtime; base.h lists the floors.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "rt.h"

#define MAX_AMAX 64   /* amax buffers of one layer */

/* Gathers (dir 0) or scatters (dir 1) every amax of the layers. */
static int move(precc_rt *rt, int nl, const int *layers, long m,
                void *const *saved, float *buf, size_t cap, int dir,
                void *stream, size_t *total)
{
	size_t at = 0;

	(void)stream;
	for (int i = 0; i < nl; i++) {
		size_t off[MAX_AMAX], nf[MAX_AMAX];
		int l = layers ? layers[i] : i;
		int n = rt_commit_amaxes(rt, l, m, off, nf, MAX_AMAX);
		if (n < 0)
			return -1;
		if (n > MAX_AMAX) {
			rt_error("amax: layer %d has %d amaxes (at most %d)", l, n, MAX_AMAX);
			return -1;
		}
		if (n && buf && (!saved || !saved[i])) {
			rt_error("amax: the saved region of layer %d is NULL", l);
			return -1;
		}
		for (int a = 0; a < n; a++) {
			char *p = buf ? (char *)saved[i] + off[a] : NULL;
			if (buf && at + nf[a] > cap) {
				rt_error("amax: the buffer has %zu floats, the layers need more",
				         cap);
				return -1;
			}
			if (buf) {
				if (rt->ops->copy(rt, dir ? (void *)p : (void *)(buf + at),
				                  dir ? (const void *)(buf + at) : (const void *)p,
				                  nf[a] * 4, stream))
					return -1;
			}
			at += nf[a];
		}
	}
	*total = at;
	return 0;
}

size_t precc_rt_amax_count(const precc_rt *rt, int nlayers, const int *layers)
{
	size_t n = 0;
	return move((precc_rt *)rt, nlayers, layers, 1, NULL, NULL, 0, 0, NULL, &n)
	       ? 0 : n;
}

int precc_rt_amax_reduce(precc_rt *rt, int nlayers, const int *layers, long m,
                         void *const *saved, float *buf, size_t nbuf,
                         precc_amax_reduce_fn reduce, void *ctx, void *stream)
{
	size_t n;
	int rc;

	if (!reduce || !buf) {
		rt_error("amax: precc_rt_amax_reduce needs a buffer and a reduce function");
		return -1;
	}
	if (rt->ops->check_stream(rt, stream))
		return -1;
	if (move(rt, nlayers, layers, m, saved, buf, nbuf, 0, stream, &n))
		return -1;
	if (n && (rc = reduce(buf, n, stream, ctx))) {
		rt_error("amax: the reduce callback failed (it returned %d)", rc);
		return -1;
	}
	return n ? move(rt, nlayers, layers, m, saved, buf, nbuf, 1, stream, &n) : 0;
}

/* ---- NCCL ------------------------------------------------------------------- */

typedef int (*nccl_allreduce_t)(const void *, void *, size_t, int, int, void *, void *);
typedef const char *(*nccl_error_t)(int);

static pthread_mutex_t nccl_mu = PTHREAD_MUTEX_INITIALIZER;
static nccl_allreduce_t nccl_allreduce;
static nccl_error_t nccl_error;

static int nccl_load(void)
{
	void *h;
	int rc = 0;

	pthread_mutex_lock(&nccl_mu);
	if (!nccl_allreduce) {
		if (!(h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL))) {
			rt_error("nccl: cannot load libnccl.so.2: %s", dlerror());
			rc = -1;
		} else if (!(nccl_allreduce = (nccl_allreduce_t)dlsym(h, "ncclAllReduce"))) {
			rt_error("nccl: libnccl.so.2 has no ncclAllReduce");
			rc = -1;
		} else
			nccl_error = (nccl_error_t)dlsym(h, "ncclGetErrorString");
	}
	pthread_mutex_unlock(&nccl_mu);
	return rc;
}

static int nccl_reduce(float *buf, size_t n, void *stream, void *comm)
{
	int r = nccl_allreduce(buf, buf, n, 7 /* ncclFloat32 */, 2 /* ncclMax */,
	                       comm, stream);
	if (r)
		rt_error("nccl: ncclAllReduce: %s (ncclResult %d)",
		         nccl_error ? nccl_error(r) : "?", r);
	return r;
}

int precc_rt_amax_reduce_nccl(precc_rt *rt, int nlayers, const int *layers,
                              long m, void *const *saved, float *buf,
                              size_t nbuf, void *comm, void *stream)
{
	char err[RT_ERR_MAX];

	if (nccl_load())
		return -1;
	if (rt->backend != PRECC_BACKEND_CUDA) {
		rt_error("nccl: NCCL reduces device memory and this runtime is on the "
		         "%s backend (use precc_rt_amax_reduce with a callback)",
		         precc_backend_name(rt->backend));
		return -1;
	}
	if (precc_rt_amax_reduce(rt, nlayers, layers, m, saved, buf, nbuf,
	                         nccl_reduce, comm, stream)) {
		/* keep NCCL's own message, not the callback wrapper's */
		snprintf(err, sizeof err, "%s", precc_rt_last_error());
		rt_error("%s", err);
		return -1;
	}
	return 0;
}
