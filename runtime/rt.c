/*
 * rt.c — floor 4 (rt.h): the precc_rt handle. Backend choice (auto → cuda
 * or cpu, with the reason), and loading an artifact directory, which calls
 * each floor in turn: the manifest read (artifact.c), the backend's load
 * of its kernels (rt->ops), the plan's cut of each layer (plan.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static void say(char *why, size_t whysize, const char *fmt, const char *a)
{
	if (why && whysize)
		snprintf(why, whysize, fmt, a);
}

#ifdef PRECC_HAVE_CUDA_H
static void say_cuda(const precc_rt *rt, char *why, size_t whysize)
{
	if (why && whysize)
		snprintf(why, whysize, "cuda: device %d '%s' (sm_%d%d, %d SMs), %s",
		         (int)rt->dev, rt->dev_name, rt->sm_major, rt->sm_minor,
		         rt->sm_count,
		         rt->primary ? "primary context retained"
		                     : "the caller's current context");
}
#endif

precc_rt *precc_rt_open_backend(precc_backend kind, char *why, size_t whysize)
{
	precc_rt *rt;

	if (kind != PRECC_BACKEND_AUTO && kind != PRECC_BACKEND_CUDA &&
	    kind != PRECC_BACKEND_CPU) {
		rt_error("unknown backend %d (choose auto, cuda or cpu)", (int)kind);
		say(why, whysize, "%s", precc_rt_last_error());
		return NULL;
	}
	rt = calloc(1, sizeof *rt);
	if (!rt) {
		rt_error("out of memory opening the %s backend",
		         precc_backend_name(kind));
		say(why, whysize, "%s", precc_rt_last_error());
		return NULL;
	}
	rt->ops = &rt_cpu_ops;
	if (kind == PRECC_BACKEND_CPU) {
		rt->backend = PRECC_BACKEND_CPU;
		say(why, whysize, "cpu: requested%s", "");
		return rt;
	}
	if (rt_cuda_backend_open(rt) == 0) {
		rt->backend = PRECC_BACKEND_CUDA;
#ifdef PRECC_HAVE_CUDA_H
		say_cuda(rt, why, whysize);
#endif
		return rt;
	}
	if (kind == PRECC_BACKEND_CUDA) {
		say(why, whysize, "%s", precc_rt_last_error());
		free(rt);
		return NULL;
	}
	/* auto: "cuda: X" becomes "cpu (cuda unavailable: X)" */
	rt->backend = PRECC_BACKEND_CPU;
	rt->ops = &rt_cpu_ops;
	say(why, whysize, "cpu (cuda unavailable: %s)",
	    strncmp(precc_rt_last_error(), "cuda: ", 6) == 0 ? precc_rt_last_error() + 6 : precc_rt_last_error());
	return rt;
}

precc_backend precc_rt_backend(const precc_rt *rt) { return rt->backend; }

static void unload(precc_rt *rt, rt_artifact *a)
{
	if (!a)
		return;
	rt_grouped_release(rt);
	rt->ops->unload(rt, a);
	rt_plan_free(a);
	rt_artifact_free(a);
}

void precc_rt_close(precc_rt *rt)
{
	if (!rt)
		return;
	unload(rt, rt->art);
	rt->ops->close(rt);
	free(rt);
}

int precc_rt_load(precc_rt *rt, const char *dir)
{
	return precc_rt_load_target(rt, dir, NULL);
}

int precc_rt_load_target(precc_rt *rt, const char *dir, const char *target)
{
	char file[4096];
	rt_artifact *a;
	json *m = NULL;

	if (!rt || !dir) {
		rt_error("manifest: precc_rt_load needs a runtime and a directory");
		return -1;
	}
	if (rt->art) {
		rt_error("manifest: this runtime already has '%s' loaded (open "
		         "another runtime for '%s')", rt->art->dir, dir);
		return -1;
	}
	if (!(a = rt_manifest_read(dir, rt->device_sm, target, &m, file, sizeof file)))
		return -1;
	if (rt->ops->load(rt, a, m, file) || rt_plan_artifact(a) || rt_grouped_prepare(rt, a)) {
		unload(rt, a);
		json_free(m);
		return -1;
	}
	json_free(m);
	rt->art = a;
	return 0;
}

precc_rt *precc_rt_open(const char *dir, precc_backend kind, char *why,
                        size_t whysize)
{
	precc_rt *rt = precc_rt_open_backend(kind, why, whysize);

	if (!rt)
		return NULL;
	if (precc_rt_load(rt, dir)) {
		char err[RT_ERR_MAX];
		snprintf(err, sizeof err, "%s", precc_rt_last_error());
		precc_rt_close(rt);
		rt_error("%s", err);
		if (why && whysize)
			snprintf(why, whysize, "%s", err);
		return NULL;
	}
	return rt;
}

