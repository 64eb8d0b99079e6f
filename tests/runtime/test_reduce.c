/*
 * test_reduce.c — data-parallel amax reduction (runtime/reduce.c) with two
 * processes: the parent is rank 0, a forked child rank 1. Each runs the
 * forward and backward of a delayed-scaling layer on its own data (x's
 * largest magnitude 5 on rank 0, 7 on rank 1; dy's 0.01 and 0.03), then
 * precc_rt_amax_reduce with a callback that swaps the amax buffer with the
 * peer over pipes and keeps the elementwise max, then commits. Both ranks
 * must end with the same state bytes and x.scale = 448 / 7, dy.scale =
 * 57344 / 0.03 (e5m2); without the reduce each rank keeps its own.
 *
 *   test_reduce DIR    DIR: te_delayed_hybrid x tiny, from precc build
 */
#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rtcheck.h"
#include "precc/precc_rt.h"
#include "precc/numerics.h"
#include "precc/interp.h"

typedef struct Peer { int rd, wr; } Peer;

static int xfer(int fd, void *p, size_t n, int out)
{
	for (size_t d = 0; d < n;) {
		ssize_t k = out ? write(fd, (char *)p + d, n - d) : read(fd, (char *)p + d, n - d);
		if (k <= 0)
			return -1;
		d += (size_t)k;
	}
	return 0;
}

/* the all-reduce of two ranks: send ours, receive theirs, keep the max */
static int pipe_max(float *buf, size_t n, void *stream, void *ctx)
{
	Peer *p = ctx;
	float other[256];
	(void)stream;
	if (n > 256 || xfer(p->wr, buf, n * 4, 1) || xfer(p->rd, other, n * 4, 0))
		return 1;
	for (size_t i = 0; i < n; i++)
		buf[i] = fmaxf(buf[i], other[i]);
	return 0;
}

static void *fill(precc_format f, long n, float amax, uint64_t seed)
{
	size_t es = precc_interp_elem_bytes(f);
	char *p = calloc((size_t)n, es);
	for (long i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		float v = ((float)((seed >> 33) % 20001) - 10000.0f) / 10000.0f * amax * 0.9f;
		uint32_t c = precc_encode(f, i == n / 2 ? amax : v, PRECC_RNE, true, 0);
		memcpy(p + (size_t)i * es, &c, es);
	}
	return p;
}

static float state_f32(precc_rt *rt, int l, const char *name, const void *state)
{
	for (int i = 0; i < precc_rt_buffer_count(rt, l); i++) {
		precc_buffer_info bi;
		precc_place pl;
		size_t off;
		float v;
		if (precc_rt_buffer_info(rt, l, i, 64, &bi) == 0 && strcmp(bi.name, name) == 0 &&
		    precc_rt_buffer_place(rt, l, i, 64, &pl, &off) == 0 && pl == PRECC_PLACE_STATE) {
			memcpy(&v, (const char *)state + off, 4);
			return v;
		}
	}
	return NAN;
}

/* One rank's step; reduce: through the peer. Returns the state (malloc'ed). */
static void *rank_step(const char *dir, int rank, Peer *peer, int reduce,
                       size_t *state_bytes, float *xs, float *dys)
{
	char why[512];
	precc_rt *rt = precc_rt_open(dir, PRECC_BACKEND_CPU, why, sizeof why);
	precc_layer_sizes sz;
	long m = 64;
	int l;

	CHECK(rt != NULL);
	if (!rt)
		return NULL;
	l = precc_rt_layer_find(rt, "model.layers.0.self_attn.q_proj");
	CHECK(l >= 0 && precc_rt_layer_sizes(rt, l, m, &sz) == 0);
	void *x = fill(sz.x_format, m * sz.k, rank ? 7.0f : 5.0f, 11 + (uint64_t)rank);
	void *w = fill(sz.w_format, sz.n * sz.k, 0.25f, 5);
	void *dy = fill(sz.dy_format, m * sz.n, rank ? 0.03f : 0.01f, 21 + (uint64_t)rank);
	void *state = calloc(1, sz.state_bytes), *saved = NULL, *work = NULL;
	void *y = calloc((size_t)(m * sz.n), 4), *dx = calloc((size_t)(m * sz.k), 4);
	void *dw = calloc((size_t)(sz.n * sz.k), 4);
	if (posix_memalign(&saved, 64, sz.saved_bytes) || posix_memalign(&work, 64, sz.workspace_bytes))
		abort();
	CHECK(precc_rt_layer_state_init(rt, l, state) == 0);
	CHECK(precc_rt_forward(rt, l, m, x, w, NULL, y, saved, state, work, 1, NULL) == 0);
	CHECK(precc_rt_backward(rt, l, m, x, w, dy, dx, dw, NULL, saved, state, work, 1, NULL) == 0);
	size_t n = precc_rt_amax_count(rt, 1, &l);
	CHECK(n == 3);   /* x.amax, w.amax, dy.amax */
	if (reduce) {
		float buf[16];
		void *sv[1] = {saved};
		int rc = precc_rt_amax_reduce(rt, 1, &l, m, sv, buf, 16, pipe_max, peer, NULL);
		if (rc)
			fprintf(stderr, "rank %d: %s\n", rank, precc_rt_last_error());
		CHECK(rc == 0);
		/* the NCCL path: not on the cpu backend, or no libnccl here */
		CHECK(precc_rt_amax_reduce_nccl(rt, 1, &l, m, sv, buf, 16, NULL, NULL) == -1);
		CHECK(strstr(precc_rt_last_error(), "libnccl.so.2") ||
		      strstr(precc_rt_last_error(), "the cpu backend"));
	}
	CHECK(precc_rt_commit(rt, l, m, saved, state, NULL) == 0);
	*xs = state_f32(rt, l, "x.scale", state);
	*dys = state_f32(rt, l, "dy.scale", state);
	*state_bytes = sz.state_bytes;
	free(x); free(w); free(dy); free(saved); free(work); free(y); free(dx); free(dw);
	precc_rt_close(rt);
	return state;
}

int main(int argc, char **argv)
{
	int a[2], b[2];   /* a: rank 0 -> 1, b: rank 1 -> 0 */

	if (argc != 2) {
		fprintf(stderr, "usage: test_reduce DIR\n");
		return 2;
	}
	if (pipe(a) || pipe(b))
		return 1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	int rank = pid == 0;
	Peer peer = rank ? (Peer){a[0], b[1]} : (Peer){b[0], a[1]};
	size_t bytes = 0;
	float xs, dys, xs0, dys0;
	/* without the reduce: each rank's own scales */
	void *alone = rank_step(argv[1], rank, &peer, 0, &bytes, &xs0, &dys0);
	CHECK(xs0 == 448.0f / (rank ? 7.0f : 5.0f));
	void *st = rank_step(argv[1], rank, &peer, 1, &bytes, &xs, &dys);
	CHECK(xs == 448.0f / 7.0f);
	CHECK(dys == 57344.0f / precc_decode(PRECC_BF16, precc_encode(PRECC_BF16, 0.03f, PRECC_RNE, true, 0)));
	if (rank) {   /* send the state to rank 0, report by exit status */
		CHECK(xfer(b[1], st, bytes, 1) == 0);
		CHECK(xfer(b[1], alone, bytes, 1) == 0);
		_exit(failures ? 1 : 0);
	}
	void *other = malloc(bytes), *other_alone = malloc(bytes);
	CHECK(xfer(b[0], other, bytes, 0) == 0 && xfer(b[0], other_alone, bytes, 0) == 0);
	CHECK(memcmp(st, other, bytes) == 0);         /* the same scales everywhere */
	CHECK(memcmp(alone, other_alone, bytes) != 0);  /* and not by accident */
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("amax reduce over 2 processes: x.scale %g (448/7), dy.scale %g on both ranks, "
	       "state identical; alone: %g and 448/7\n", xs, dys, xs0);
	free(st); free(alone); free(other); free(other_alone);
	return finish("runtime.reduce");
}
