/*
 * test_resume.c — a resumed run is the uninterrupted one, bit for bit
 * (issue 31, §5): DIR holds `precc build` of a recipe with stochastic
 * rounding (nvfp4: SR gradients), and the trainer draws each call's seed
 * from a counter, as precc.torch does (seed = base · φ + calls).
 *
 *   runtime_test_resume DIR
 *
 * Run A: steps 0..5 of forward + backward + commit on the model's first
 * layer. Run B: steps 0..2, then the state file (precc_rt_state_pull of
 * the state region, precc_state_set_sr_counter, precc_state_save); a new
 * runtime loads it (precc_state_load, _push, precc_state_sr_counter) and
 * runs steps 3..5. y, dX, dW and the state of steps 3..5 must equal A's.
 * Run C resumes as a format 1 file did (the counter lost: 0) and must
 * differ, or the check above would hold without the counter.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "precc/interp.h"
#include "precc/numerics.h"
#include "precc/precc_rt.h"
#include "rtcheck.h"

enum { STEPS = 6, CUT = 3, M = 64 };
#define PHI 0x9E3779B97F4A7C15u

typedef struct Run {
	precc_rt *rt;
	precc_layer_sizes sz;
	void *x, *w, *dy, *y, *dx, *dw, *state, *saved, *work;
	size_t xb, wb, yb;
	uint64_t calls;           /* the SR counter */
	unsigned char *out;       /* y, dx, dw and state of each step >= CUT */
	size_t outb;
} Run;

static size_t tensor_bytes(int fmt, long rows, long cols)
{
	return precc_interp_tensor_bytes((precc_format)fmt, rows, cols);
}

/* Step s's inputs, the same in every run: |v| < 2, from s and i. */
static void inputs(void *p, int fmt, long n, unsigned s, unsigned salt)
{
	for (long i = 0; i < n; i++) {
		uint64_t h = ((uint64_t)s << 40 ^ (uint64_t)salt << 32 ^ (uint64_t)i) * PHI;
		float v = (float)((double)(h >> 40) / (double)(1u << 24) * 4.0 - 2.0);
		precc_interp_set_code(p, (precc_format)fmt, (size_t)i,
		                      precc_encode((precc_format)fmt, v, PRECC_RNE, true, 0));
	}
}

static void *zalloc(size_t n) { return calloc(1, n ? n : 1); }

static int open_run(Run *r, const char *dir)
{
	char why[512];
	precc_layer_sizes *z = &r->sz;

	memset(r, 0, sizeof *r);
	if (!(r->rt = precc_rt_open(dir, PRECC_BACKEND_CPU, why, sizeof why))) {
		fprintf(stderr, "test_resume: %s\n", why);
		return -1;
	}
	if (precc_rt_layer_sizes(r->rt, 0, M, z)) {
		fprintf(stderr, "test_resume: %s\n", precc_rt_last_error());
		return -1;
	}
	r->xb = tensor_bytes(z->x_format, M, z->k);
	r->wb = tensor_bytes(z->w_format, z->n, z->k);
	r->yb = tensor_bytes(z->y_format, M, z->n);
	r->x = zalloc(r->xb);
	r->w = zalloc(r->wb);
	r->dy = zalloc(tensor_bytes(z->dy_format, M, z->n));
	r->y = zalloc(r->yb);
	r->dx = zalloc(tensor_bytes(z->dx_format, M, z->k));
	r->dw = zalloc(tensor_bytes(z->dw_format, z->n, z->k));
	r->state = zalloc(z->state_bytes);
	r->saved = zalloc(z->saved_bytes);
	r->work = zalloc(z->workspace_bytes);
	r->outb = r->yb + tensor_bytes(z->dx_format, M, z->k) +
	          tensor_bytes(z->dw_format, z->n, z->k) + z->state_bytes;
	r->out = zalloc(r->outb * STEPS);
	return precc_rt_layer_state_init(r->rt, 0, r->state);
}

static void close_run(Run *r)
{
	precc_rt_close(r->rt);
	free(r->x), free(r->w), free(r->dy), free(r->y), free(r->dx), free(r->dw);
	free(r->state), free(r->saved), free(r->work), free(r->out);
}

static int step(Run *r, unsigned s)
{
	precc_layer_sizes *z = &r->sz;
	unsigned char *o = r->out + r->outb * s;
	size_t dxb = tensor_bytes(z->dx_format, M, z->k), dwb = tensor_bytes(z->dw_format, z->n, z->k);

	inputs(r->x, z->x_format, M * z->k, s, 1);
	inputs(r->w, z->w_format, z->n * z->k, s, 2);
	inputs(r->dy, z->dy_format, M * z->n, s, 3);
	if (precc_rt_forward(r->rt, 0, M, r->x, r->w, NULL, r->y, r->saved, r->state,
	                     r->work, 7 * PHI + ++r->calls, NULL) ||
	    precc_rt_backward(r->rt, 0, M, r->x, r->w, r->dy, r->dx, r->dw, NULL,
	                      r->saved, r->state, r->work, 7 * PHI + ++r->calls, NULL) ||
	    precc_rt_commit(r->rt, 0, M, r->saved, r->state, NULL) < 0) {
		fprintf(stderr, "test_resume: step %u: %s\n", s, precc_rt_last_error());
		return -1;
	}
	memcpy(o, r->y, r->yb), o += r->yb;
	memcpy(o, r->dx, dxb), o += dxb;
	memcpy(o, r->dw, dwb), o += dwb;
	memcpy(o, r->state, z->state_bytes);
	return 0;
}

static void *bind(Run *r, void **buffers)
{
	precc_layer_ptrs p = {0};

	p.state = r->state;
	return precc_rt_layer_bind(r->rt, 0, M, &p, buffers) ? NULL : buffers;
}

/* Steps [CUT, STEPS) of a run resumed from path; counter: restore it. */
static int resume(Run *r, const char *dir, const char *path, int counter)
{
	void *buffers[256];
	precc_state *st;

	if (open_run(r, dir) || precc_rt_buffer_count(r->rt, 0) > 256 || !bind(r, buffers) ||
	    !(st = precc_rt_state_new(r->rt)))
		return -1;
	if (precc_state_load(st, path) || precc_rt_state_push(r->rt, st, 0, buffers)) {
		fprintf(stderr, "test_resume: %s\n", precc_rt_last_error());
		precc_state_free(st);
		return -1;
	}
	r->calls = counter ? precc_state_sr_counter(st) : 0;
	precc_state_free(st);
	for (unsigned s = CUT; s < STEPS; s++)
		if (step(r, s))
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	Run a, b, c;
	char path[] = "/tmp/precc_resume_XXXXXX";
	void *buffers[256];
	precc_state *st;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: runtime_test_resume DIR\n");
		return 2;
	}
	if ((fd = mkstemp(path)) < 0)
		return 1;
	close(fd);
	/* A: uninterrupted */
	CHECK(open_run(&a, argv[1]) == 0);
	for (unsigned s = 0; s < STEPS && failures == 0; s++)
		CHECK(step(&a, s) == 0);
	/* B: CUT steps, the state file, a new runtime, the rest */
	CHECK(open_run(&b, argv[1]) == 0);
	for (unsigned s = 0; s < CUT && failures == 0; s++)
		CHECK(step(&b, s) == 0);
	CHECK(bind(&b, buffers) != NULL);
	CHECK((st = precc_rt_state_new(b.rt)) != NULL);
	if (failures) {
		fprintf(stderr, "test_resume: %s\n", precc_rt_last_error());
		return 1;
	}
	CHECK(precc_rt_state_pull(b.rt, st, 0, buffers) == 0);
	precc_state_set_sr_counter(st, b.calls);
	CHECK(precc_state_save(st, path) == 0);
	precc_state_free(st);
	uint64_t saved_calls = b.calls;
	close_run(&b);
	CHECK(resume(&b, argv[1], path, 1) == 0);
	CHECK(saved_calls == 2 * CUT);
	CHECK(b.calls == a.calls);
	CHECK(memcmp(a.out + a.outb * CUT, b.out + b.outb * CUT, a.outb * (STEPS - CUT)) == 0);
	/* C: the counter lost, as a format 1 file or the old state_dict lost it */
	CHECK(resume(&c, argv[1], path, 0) == 0);
	CHECK(memcmp(a.out + a.outb * CUT, c.out + c.outb * CUT, a.outb * (STEPS - CUT)) != 0);
	printf("resume: %d steps, cut after %d, %zu bytes a step: resumed == uninterrupted%s\n",
	       STEPS, CUT, a.outb, failures ? " FAILED" : "; without the counter they differ");
	close_run(&a);
	close_run(&b);
	close_run(&c);
	unlink(path);
	return failures ? 1 : 0;
}
