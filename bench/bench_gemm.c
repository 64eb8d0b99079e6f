/*
 * bench_gemm.c — the interpreter's GEMM against OpenBLAS cblas_sgemm, side
 * by side in one run, same thread count; plus the fp8 blockwise GEMM
 * (1x128 activations x 128x128 weights, promotion every 128) and quantize
 * throughput. Usage: bench_gemm [threads] [sizes...]   (default: all cores,
 * 1024 2048). precc and OpenBLAS runs alternate; each figure is the best
 * of its runs. Results go in bench/RESULTS.md.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "precc/interp.h"
#include "precc/numerics.h"

extern void openblas_set_num_threads(int);
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);

/* OpenBLAS picks its kernels by the CPU it detects, and Debian's 0.3.21
 * has detected AVX-512 Xeons as "Prescott" (SSE3 kernels), which made an
 * easy baseline; so unless OPENBLAS_CORETYPE is set, the bench re-executes
 * itself with the widest core type the CPU runs, before OpenBLAS's
 * constructor has run in the new image. A core type set from outside that
 * the CPU cannot run (SkylakeX on an AVX2-only machine: SIGILL in the first
 * sgemm) is dropped the same way, and the bench says so. */
static const struct {
	const char *core;
	int avx512, avx2, bf16;    /* what its kernels execute */
} cores[] = {
	{ "SkylakeX", 1, 1, 0 }, { "Cooperlake", 1, 1, 1 },
	{ "SapphireRapids", 1, 1, 1 }, { "Haswell", 0, 1, 0 }, { "Zen", 0, 1, 0 },
};

static int
cpu_runs(const char *core)
{
	int avx512 = __builtin_cpu_supports("avx512f")
	             && __builtin_cpu_supports("avx512bw")
	             && __builtin_cpu_supports("avx512vl")
	             && __builtin_cpu_supports("avx512dq");
	int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	int bf16 = __builtin_cpu_supports("avx512bf16");

	for (size_t i = 0; i < sizeof cores / sizeof *cores; i++)
		if (!strcasecmp(core, cores[i].core))
			return (!cores[i].avx512 || avx512) && (!cores[i].avx2 || avx2)
			       && (!cores[i].bf16 || bf16);
	return 1;                  /* older cores (Sandybridge, Nehalem, ...) */
}

static void
pin_openblas_core(char **argv)
{
	const char *set = getenv("OPENBLAS_CORETYPE");
	const char *want = __builtin_cpu_supports("avx512f") && cpu_runs("SkylakeX")
	                   ? "SkylakeX" : cpu_runs("Haswell") ? "Haswell" : NULL;

	if (getenv("BENCH_GEMM_CORE_NOTE"))
		return;                /* the re-executed image */
	if (set && cpu_runs(set))
		return;
	if (set) {
		char note[160];
		snprintf(note, sizeof note, "OPENBLAS_CORETYPE=%s dropped: this CPU "
		         "lacks its instructions; %s%s", set,
		         want ? "pinned to " : "OpenBLAS detects its own core",
		         want ? want : "");
		setenv("BENCH_GEMM_CORE_NOTE", note, 1);
		unsetenv("OPENBLAS_CORETYPE");
	} else if (want) {
		setenv("BENCH_GEMM_CORE_NOTE", "OPENBLAS_CORETYPE unset: pinned to "
		       "the widest core this CPU runs", 1);
	} else {
		return;
	}
	if (want)
		setenv("OPENBLAS_CORETYPE", want, 1);
	execv("/proc/self/exe", argv);
	perror("bench_gemm: re-exec with OPENBLAS_CORETYPE");
	if (set && !cpu_runs(set)) {
		fprintf(stderr, "bench_gemm: OpenBLAS was loaded with core %s, which "
		        "this CPU cannot run; refusing\n", set);
		exit(1);
	}
}

/* Wall time; with one thread, the process's CPU time (BENCH_GEMM_CLOCK=wall
 * to keep wall time): on a shared machine a one-thread run's CPU time is
 * its work, the wall time mostly the other tenants'. */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double
now(void)
{
	struct timespec t;
	clock_gettime(clock_id, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static unsigned long long rng = 0x9e3779b97f4a7c15ull;

static float
frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* One timed job: a GEMM or a quantize, dispatched by kind. */
typedef struct Job {
	int kind;                 /* 0 precc_gemm, 1 cblas_sgemm, 2 quantize */
	precc_gemm_desc *d;
	const float *a, *b;
	float *c;
	long n;
	const precc_quant_opts *qo;
	uint8_t *q;
} Job;

static void
run(const Job *j)
{
	int n = (int)j->n;

	if (j->kind == 0)
		precc_gemm(j->d);
	else if (j->kind == 1)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f,
		            j->a, n, j->b, n, 0.0f, j->c, n);
	else
		precc_quantize(j->a, PRECC_FP32, j->n, j->n, j->qo, j->q);
}

/* Best of reps runs, in seconds. */
static double
best(int reps, const Job *j)
{
	double b = 1e30;

	for (int r = 0; r < reps; r++) {
		double t0 = now();
		run(j);
		double t = now() - t0;
		b = t < b ? t : b;
	}
	return b;
}

static void
die(const char *what)
{
	fprintf(stderr, "bench_gemm: %s: %s\n", what, precc_interp_error());
	exit(1);
}

int
main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 0;
	long sizes[8] = { 1024, 2048 };
	int nsizes = 2;

	if (argc > 2) {
		nsizes = 0;
		for (int i = 2; i < argc && nsizes < 8; i++)
			sizes[nsizes++] = atol(argv[i]);
	}
	pin_openblas_core(argv);
	threads = precc_interp_threads(threads);
	openblas_set_num_threads(threads);
	if (threads == 1 && !(getenv("BENCH_GEMM_CLOCK")
	                      && !strcmp(getenv("BENCH_GEMM_CLOCK"), "wall")))
		clock_id = CLOCK_PROCESS_CPUTIME_ID;
	printf("threads: %d (interpreter and OpenBLAS); clock: %s\n", threads,
	       clock_id == CLOCK_MONOTONIC ? "wall" : "process CPU time");
	printf("openblas: core %s (OPENBLAS_CORETYPE=%s), %s\n",
	       openblas_get_corename(), getenv("OPENBLAS_CORETYPE"),
	       openblas_get_config());
	if (getenv("BENCH_GEMM_CORE_NOTE"))
		printf("openblas: %s\n", getenv("BENCH_GEMM_CORE_NOTE"));
	printf("cpu: cpuid has%s%s%s%s%s%s\n",
	       __builtin_cpu_supports("sse4.2") ? " sse4.2" : "",
	       __builtin_cpu_supports("avx2") ? " avx2" : "",
	       __builtin_cpu_supports("fma") ? " fma" : "",
	       __builtin_cpu_supports("avx512f") ? " avx512f" : "",
	       __builtin_cpu_supports("avx512bw") ? " avx512bw" : "",
	       __builtin_cpu_supports("avx512vl") ? " avx512vl" : "");
	printf("interpreter: ISA copy %s (precc_isa_level %d; "
	       "PRECC_INTERP_ISA=%s)%s\n", precc_convert_isa(), precc_isa_level(),
	       getenv("PRECC_INTERP_ISA") ? getenv("PRECC_INTERP_ISA")
	       : "unset: the widest the CPU has",
	       getenv("PRECC_INTERP_NOFMA") ? ", PRECC_INTERP_NOFMA" : "");
	printf("ratio: OpenBLAS sgemm time / precc time, same size, the two "
	       "alternating (each row its own OpenBLAS runs)\n\n");
	printf("%-28s %6s %10s %10s %8s\n", "kernel", "size", "precc", "openblas",
	       "ratio");
	for (int s = 0; s < nsizes; s++) {
		long n = sizes[s];
		size_t nn = (size_t)n * (size_t)n;
		float *a = malloc(nn * 4), *b = malloc(nn * 4), *c = malloc(nn * 4);
		float *c2 = malloc(nn * 4);
		uint8_t *qa = malloc(nn), *qb = malloc(nn);
		if (!a || !b || !c || !c2 || !qa || !qb)
			die("malloc");
		for (size_t i = 0; i < nn; i++) {
			a[i] = frand();
			b[i] = frand();
		}
		double flop = 2.0 * (double)n * (double)n * (double)n;
		int reps = n <= 1024 ? 5 : 3;

		precc_gemm_desc d;
		precc_gemm_desc_init(&d);
		d.m = d.n = d.k = n;
		d.a.data = a;
		d.b.data = b;
		d.c = c;
		d.threads = threads;
		if (precc_gemm(&d) != 0)
			die("gemm");
		/* alternate the two, so background load hits both alike */
		double tp = 1e30, tb = 1e30;
		for (int r = 0; r < 2 * reps; r++) {
			double t = best(1, &(Job){ .kind = 0, .d = &d });
			double u = best(1, &(Job){ .kind = 1, .a = a, .b = b, .c = c2,
			                           .n = n });
			tp = t < tp ? t : tp;
			tb = u < tb ? u : tb;
		}
		double maxd = 0;
		for (size_t i = 0; i < nn; i++)
			maxd = fmax(maxd, fabs((double)c[i] - c2[i]));
		printf("%-28s %6ld %8.1f GF %8.1f GF %7.2fx   (max |diff| %.2g)\n",
		       "sgemm exact-fp32 (TN)", n, flop / tp * 1e-9,
		       flop / tb * 1e-9, tb / tp, maxd);

		/* fp8 blockwise: A e4m3 1x128 scales, B e4m3 128x128 scales */
		long kb = (n + 127) / 128;
		size_t na = (size_t)n * kb * 4, nb = (size_t)kb * kb * 4;
		float *amax_a = malloc(na), *sa = malloc(na), *sia = malloc(na);
		float *amax_b = malloc(nb), *sbq = malloc(nb), *sib = malloc(nb);
		precc_scale_params sp = { .fmax = 448.0f, .eps = 1e-12f };
		precc_block t1 = { 1, 128 }, t128 = { 128, 128 };
		if (precc_amax(a, PRECC_FP32, n, n, t1, amax_a, NULL)
		    || precc_amax(b, PRECC_FP32, n, n, t128, amax_b, NULL)
		    || precc_scales(amax_a, n * kb, &sp, PRECC_NF_PROPAGATE, NULL,
		                    sa, sia, NULL)
		    || precc_scales(amax_b, kb * kb, &sp, PRECC_NF_PROPAGATE, NULL,
		                    sbq, sib, NULL))
			die("scales");
		precc_quant_opts qo = { .qf = PRECC_E4M3, .round = PRECC_RNE,
		                        .saturate = true, .blk = t1, .scale = sa,
		                        .threads = threads };
		double tq = best(reps, &(Job){ .kind = 2, .a = a, .n = n, .qo = &qo,
		                               .q = qa });
		qo.round = PRECC_SR;
		double tsr = best(1, &(Job){ .kind = 2, .a = a, .n = n, .qo = &qo,
		                             .q = qa });
		qo.round = PRECC_RNE;
		precc_quantize(a, PRECC_FP32, n, n, &qo, qa);
		qo.blk = t128;
		qo.scale = sbq;
		precc_quantize(b, PRECC_FP32, n, n, &qo, qb);
		d.a = (precc_gemm_operand){ qa, PRECC_E4M3, sia, t1 };
		d.b = (precc_gemm_operand){ qb, PRECC_E4M3, sib, t128 };
		d.promote_every = 128;
		/* each fp8 model alternates with OpenBLAS too: its ratio is against
		 * the OpenBLAS runs of its own rounds */
		double t8 = 1e30, tb8 = 1e30, t14 = 1e30, tb14 = 1e30;
		for (int r = 0; r < 2 * reps; r++) {
			d.acc_mbits = 0;
			double t = best(1, &(Job){ .kind = 0, .d = &d });
			double u = best(1, &(Job){ .kind = 1, .a = a, .b = b, .c = c2,
			                           .n = n });
			d.acc_mbits = 14;
			double t2 = best(1, &(Job){ .kind = 0, .d = &d });
			double u2 = best(1, &(Job){ .kind = 1, .a = a, .b = b, .c = c2,
			                            .n = n });
			t8 = t < t8 ? t : t8;
			tb8 = u < tb8 ? u : tb8;
			t14 = t2 < t14 ? t2 : t14;
			tb14 = u2 < tb14 ? u2 : tb14;
		}
		printf("%-28s %6ld %8.1f GF %8.1f GF %7.2fx\n",
		       "fp8 e4m3 blockwise, P=128", n, flop / t8 * 1e-9, flop / tb8 * 1e-9,
		       tb8 / t8);
		printf("%-28s %6ld %8.1f GF %8.1f GF %7.2fx\n",
		       "fp8 blockwise, P=128, 14-bit", n, flop / t14 * 1e-9,
		       flop / tb14 * 1e-9, tb14 / t14);

		/* fast:14 (current_tensorwise's model): tensorwise scales, one
		 * chunk of K, the 14-bit inner accumulator */
		float one_a = sia[0], one_b = sib[0];
		d.a = (precc_gemm_operand){ qa, PRECC_E4M3, &one_a, { 0, 0 } };
		d.b = (precc_gemm_operand){ qb, PRECC_E4M3, &one_b, { 0, 0 } };
		d.promote_every = 0;
		d.acc_mbits = 14;
		double tf = 1e30, tbf = 1e30;
		for (int r = 0; r < 2 * reps; r++) {
			double t = best(1, &(Job){ .kind = 0, .d = &d });
			double u = best(1, &(Job){ .kind = 1, .a = a, .b = b, .c = c2,
			                           .n = n });
			tf = t < tf ? t : tf;
			tbf = u < tbf ? u : tbf;
		}
		printf("%-28s %6ld %8.1f GF %8.1f GF %7.2fx\n",
		       "fp8 tensorwise, fast:14", n, flop / tf * 1e-9,
		       flop / tbf * 1e-9, tbf / tf);
		printf("%-28s %6ld %8.1f Melem/s (1x128 scales)\n",
		       "quantize fp32->e4m3 RNE", n, (double)nn / tq * 1e-6);
		printf("%-28s %6ld %8.1f Melem/s (Philox bits)\n",
		       "quantize fp32->e4m3 SR", n, (double)nn / tsr * 1e-6);
		free(a); free(b); free(c); free(c2); free(qa); free(qb);
		free(amax_a); free(sa); free(sia); free(amax_b); free(sbq); free(sib);
	}
	return 0;
}
