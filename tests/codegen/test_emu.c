/*
 * test_emu — every kernel of kernels/NAME.ir run on the host CPU and
 * compared bit for bit with the IR interpreter. The kernel is the LLVM
 * function codegen builds for the GPU, with the NVVM intrinsics (thread
 * and block ids, shfl.sync.bfly, bar.sync) and the inline PTX cvts turned
 * into calls to the precc_emu_* functions below (codegen's host mode),
 * JIT-compiled with MCJIT and run as one pthread per GPU thread, one CTA
 * at a time. This checks the kernels' index arithmetic, reductions,
 * atomics, shared-memory transposes, SR indexing and launch geometry on
 * edge-value inputs; what it cannot check is the hardware itself (the cvt
 * forms are emulated with precc_encode, which numerics.cuda_ref checks
 * against CUDA's own code) and NVPTX/ptxas code generation.
 *
 * Weights are shrunk from 4096x4096 to 512x512 so that the run stays
 * short; M = 128 unless the file says otherwise. GEMM kernels run their
 * mma.sync through precc_emu_mma (the warp's fragments gathered with
 * codegen/mma_frag.h's maps, tests/codegen/test_mma_frag.c checks those
 * against CuTe's) and compare bit for bit with accum=fp32 or promote:N
 * (promote_bits 0): the emulated tensor core sums exactly in fp32.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Target.h>
#include "cg.h"
#include "mma_frag.h"
#include "precc/interp.h"
#include "recipe.h"

/* M of the run: 128, or what a file's "# emu: m=N" line says (a GEMM's
 * partial tiles along M) */
static long M = 128;
/* "# emu: finite": no NaN or inf inputs at all (an amax output would
 * otherwise be NaN and prove nothing) */
static int finite_only;
/* Ms that divide no tile and no 1x128 block: each kernel with a dim M also
 * runs at one of these that is a multiple of its m_multiple */
static const long extra_m[3] = {16, 80, 144};
static int extra_run;

/* ---- the emulated GPU: one pthread per thread of a CTA ----------------- */
static int nthreads;
static unsigned cur_cx, cur_cy;
static int quit;
static void (*entry)(void **);
static void **entry_args;
static pthread_barrier_t start_bar, end_bar, cta_bar, warp_bar[32];
static uint32_t slot[1024];
static __thread unsigned my_tid;
static int emu_break;     /* self-test: corrupt one fp8 cvt, expect a FAIL */

/* cooperative launches run every CTA at once: per-CTA state */
enum { MAXCOOP = 64 };
static int coop;
static __thread unsigned my_cta, my_cx, my_cy;
static pthread_barrier_t coop_cta_bar[MAXCOOP], coop_warp_bar[MAXCOOP][32];
static uint32_t coop_slot[MAXCOOP][1024];

uint32_t
precc_emu_sreg(uint32_t which)
{
	if (coop)
		return which == 0 ? my_tid : which == 1 ? my_cx : my_cy;
	return which == 0 ? my_tid : which == 1 ? cur_cx : cur_cy;
}

static void
emu_abort(const char *what)
{
	fprintf(stderr, "test_emu: thread %u of CTA (%u,%u): %s\n", my_tid,
	        coop ? my_cx : cur_cx, coop ? my_cy : cur_cy, what);
	fflush(stdout);
	abort();
}

/* shfl.sync.bfly.b32 d, a, b, c, membermask as the PTX ISA defines it
 * ("Data Movement: shfl.sync"): j = lane ^ b, valid when j <= maxLane with
 * maxLane = (lane & segmask) | (c[4:0] & ~segmask), segmask = c[12:8];
 * an invalid j reads the thread's own a. Every thread of a shuffle must
 * be in membermask, and so must the lane it reads; the warp-wide
 * rendezvous below needs the whole warp, so a partial mask is refused. */
uint32_t
precc_emu_shfl_bfly(uint32_t member, uint32_t v, uint32_t b, uint32_t c)
{
	unsigned w = my_tid / 32, base = w * 32, lane = my_tid % 32;
	uint32_t *sl = coop ? coop_slot[my_cta] : slot;
	pthread_barrier_t *wb = coop ? &coop_warp_bar[my_cta][w] : &warp_bar[w];
	unsigned seg = c >> 8 & 31, maxl = (lane & seg) | (c & 31 & ~seg);
	unsigned j = lane ^ (b & 31);

	if (member != 0xffffffffu)
		emu_abort("shfl.sync with a partial membermask (not emulated)");
	if (j > maxl)
		j = lane;
	sl[my_tid] = v;
	pthread_barrier_wait(wb);
	uint32_t r = sl[base + j];
	pthread_barrier_wait(wb);
	return r;
}

void
precc_emu_barrier(void)
{
	pthread_barrier_wait(coop ? &coop_cta_bar[my_cta] : &cta_bar);
}

/* shared memory: one copy per CTA (cooperative) or one for the CTA that
 * runs (sequential) */
static uint8_t smem[MAXCOOP + 1][3][32768] __attribute__((aligned(16)));

void *
precc_emu_shared(uint32_t id, uint64_t bytes)
{
	if (id >= 3 || bytes > sizeof smem[0][0])
		abort();
	return smem[coop ? my_cta : MAXCOOP][id];
}

void
precc_emu_yield(void)
{
	sched_yield();
}

typedef struct CoopArg {
	unsigned tid, cta, cx, cy;
} CoopArg;

static void *
coop_worker(void *arg)
{
	const CoopArg *a = arg;
	my_tid = a->tid;
	my_cta = a->cta;
	my_cx = a->cx;
	my_cy = a->cy;
	entry(entry_args);
	return NULL;
}

/* every CTA resident at once, as cuLaunchCooperativeKernel guarantees */
static int
launch_coop(int threads, unsigned gx, unsigned gy)
{
	unsigned n = gx * gy, total = n * (unsigned)threads;
	pthread_t *th = calloc(total, sizeof *th);
	CoopArg *ca = calloc(total, sizeof *ca);
	pthread_attr_t at;

	if (n > MAXCOOP || !th || !ca) {
		free(th);
		free(ca);
		return -1;
	}
	coop = 1;
	for (unsigned c = 0; c < n; c++) {
		pthread_barrier_init(&coop_cta_bar[c], NULL, (unsigned)threads);
		for (int w = 0; w < threads / 32; w++)
			pthread_barrier_init(&coop_warp_bar[c][w], NULL, 32);
	}
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024);
	for (unsigned i = 0; i < total; i++) {
		unsigned c = i / (unsigned)threads;
		ca[i] = (CoopArg){i % (unsigned)threads, c, c % gx, c / gx};
		pthread_create(&th[i], &at, coop_worker, &ca[i]);
	}
	for (unsigned i = 0; i < total; i++)
		pthread_join(th[i], NULL);
	pthread_attr_destroy(&at);
	for (unsigned c = 0; c < n; c++) {
		pthread_barrier_destroy(&coop_cta_bar[c]);
		for (int w = 0; w < threads / 32; w++)
			pthread_barrier_destroy(&coop_warp_bar[c][w]);
	}
	coop = 0;
	free(th);
	free(ca);
	return 0;
}

/* The cvt rows of codegen/ptx_asm.c's asm_table, read from the PTX text
 * itself: "cvt.RND[.satfinite].DSTx2.SRC $0, $A, $B;" packs operand A in
 * the upper half and B in the lower one (PTX ISA, cvt: "d = {a, b}" with a
 * in the upper bits). The emulator takes formats, saturation and operand
 * order from the string, so a changed string changes what runs. */
typedef struct Cvt {
	int ok;
	precc_format dst, src;
	int sat, hi_arg, lo_arg;   /* operand numbers: $1 and $2 are the call's */
} Cvt;
static Cvt cvt_row[64];

static int
fmt_name(const char *s, size_t n, precc_format *f)
{
	static const struct { const char *n; precc_format f; } t[] = {
		{"e4m3", PRECC_E4M3}, {"e5m2", PRECC_E5M2}, {"bf16", PRECC_BF16},
		{"f16", PRECC_FP16}, {"f32", PRECC_FP32},
	};
	for (size_t i = 0; i < sizeof t / sizeof *t; i++)
		if (strlen(t[i].n) == n && !strncmp(s, t[i].n, n)) {
			*f = t[i].f;
			return 0;
		}
	return -1;
}

static void
parse_cvts(void)
{
	for (int r = 0; r < asm_table_len && r < 64; r++) {
		const char *p = asm_table[r].ptx, *sp = strchr(p, ' ');
		char mn[96];
		Cvt c = {0};
		if (strncmp(p, "cvt.", 4) || !sp || (size_t)(sp - p) >= sizeof mn)
			continue;
		memcpy(mn, p, (size_t)(sp - p));
		mn[sp - p] = 0;
		/* fields: cvt rnd [satfinite] dst src */
		char *f[6];
		int nf = 0;
		for (char *t = strtok(mn, "."); t && nf < 6; t = strtok(NULL, "."))
			f[nf++] = t;
		int i = 2;
		if (nf < 4 || strcmp(f[1], "rn"))
			continue;
		if (i < nf && !strcmp(f[i], "satfinite"))
			c.sat = 1, i++;
		if (nf - i != 2)
			continue;
		size_t ld = strlen(f[i]), ls = strlen(f[i + 1]);
		int dx2 = ld > 2 && !strcmp(f[i] + ld - 2, "x2"), sx2 = ls > 2 && !strcmp(f[i + 1] + ls - 2, "x2");
		if (!dx2 || fmt_name(f[i], ld - 2, &c.dst)
		    || fmt_name(f[i + 1], sx2 ? ls - 2 : ls, &c.src))
			continue;
		int a = -1, b = -1;
		if (sx2 ? sscanf(sp, " $0, $%d;", &a) != 1 : sscanf(sp, " $0, $%d, $%d;", &a, &b) != 2)
			continue;
		c.hi_arg = a, c.lo_arg = b;
		c.ok = 1;
		cvt_row[r] = c;
	}
}

static const Cvt *
cvt_of(uint32_t row, int nargs)
{
	const Cvt *c = row < 64 ? &cvt_row[row] : NULL;
	int two = nargs == 2;
	if (!c || !c->ok || (c->src == PRECC_FP32) != two
	    || (two && !((c->hi_arg == 1 && c->lo_arg == 2) || (c->hi_arg == 2 && c->lo_arg == 1)))
	    || (!two && c->hi_arg != 1))
		emu_abort("an asm_table row the emulator cannot read as a cvt");
	return c;
}

/* two floats -> a packed pair (fp8x2 in 16 bits, 16-bit x2 in 32) */
static uint32_t
cvt_pack(uint32_t row, float x1, float x2)
{
	const Cvt *c = cvt_of(row, 2);
	float hi = c->hi_arg == 1 ? x1 : x2, lo = c->hi_arg == 1 ? x2 : x1;
	unsigned bits = precc_interp_elem_bytes(c->dst) * 8;
	return precc_encode(c->dst, hi, PRECC_RNE, c->sat, 0) << bits
	       | precc_encode(c->dst, lo, PRECC_RNE, c->sat, 0);
}

uint16_t
precc_emu_asm2_16(uint32_t row, float x1, float x2)
{
	if (emu_break == 1 && my_tid == 7 && cur_cx == 1)
		return 0x5555;
	if (precc_interp_elem_bytes(cvt_of(row, 2)->dst) != 1)
		emu_abort("a 16-bit result from a cvt that packs 32");
	return (uint16_t)cvt_pack(row, x1, x2);
}

uint32_t
precc_emu_asm2_32(uint32_t row, float x1, float x2)
{
	if (precc_interp_elem_bytes(cvt_of(row, 2)->dst) != 2)
		emu_abort("a 32-bit result from a cvt that packs 16");
	return cvt_pack(row, x1, x2);
}

/* fp8x2 -> f16x2: the code in the low byte to the low half */
uint32_t
precc_emu_asm1_32(uint32_t row, uint16_t codes)
{
	const Cvt *c = cvt_of(row, 1);
	if (c->dst != PRECC_FP16 || precc_interp_elem_bytes(c->src) != 1)
		emu_abort("an fp8 decode row that is not f16x2 from fp8x2");
	uint32_t lo = precc_encode(PRECC_FP16, precc_decode(c->src, codes & 0xff), PRECC_RNE, false, 0);
	uint32_t hi = precc_encode(PRECC_FP16, precc_decode(c->src, codes >> 8), PRECC_RNE, false, 0);
	return hi << 16 | lo;
}

/* mma.sync (asm_table rows 7..12): every lane posts its fragments, then
 * computes its own four results from the whole warp's, each a dot
 * product in ascending k with one fp32 multiply and one fp32 add per
 * term (never FMA; -std=c17 keeps contraction off). */
static uint32_t mma_slot[MAXCOOP + 1][32][32][10];

static float
mma_elem(precc_format f, uint32_t word, int pos)
{
	if (f == PRECC_E4M3 || f == PRECC_E5M2)
		return precc_decode(f, word >> (8 * pos) & 0xff);
	return precc_decode(f, word >> (16 * pos) & 0xffff);
}

void
precc_emu_mma(uint32_t row, uint32_t *r)
{
	static const precc_format fa[] = {PRECC_E4M3, PRECC_E4M3, PRECC_E5M2, PRECC_E5M2, PRECC_BF16, PRECC_FP16};
	static const precc_format fb[] = {PRECC_E4M3, PRECC_E5M2, PRECC_E4M3, PRECC_E5M2, PRECC_BF16, PRECC_FP16};
	unsigned w = my_tid / 32, lane = my_tid % 32, c = coop ? my_cta : MAXCOOP;
	pthread_barrier_t *wb = coop ? &coop_warp_bar[my_cta][w] : &warp_bar[w];
	uint32_t (*sl)[10] = mma_slot[c][w];
	int x = (int)row - 7, e = x < 4 ? 4 : 2;
	float d[4];

	if (x < 0 || x > 5)
		abort();
	memcpy(sl[lane], r, sizeof sl[lane]);
	pthread_barrier_wait(wb);
	for (int v = 0; v < 4; v++) {
		int i = (int)(lane / 4) + 8 * (v >> 1), j = (int)(lane % 4) * 2 + (v & 1);
		int l, rg, ps;
		float acc;
		memcpy(&acc, &sl[lane][6 + v], 4);
		for (int k = 0; k < 8 * e; k++) {
			mma_frag_a(e, i, k, &l, &rg, &ps);
			float a = mma_elem(fa[x], sl[l][rg], ps);
			mma_frag_b(e, j, k, &l, &rg, &ps);
			float bv = mma_elem(fb[x], sl[l][4 + rg], ps);
			float p = a * bv;
			if (emu_break == 2 && k == 8 * e - 1)
				p = 0;     /* self-test: one product lost */
			acc = acc + p;
		}
		d[v] = acc;
	}
	pthread_barrier_wait(wb);
	memcpy(&r[6], d, sizeof d);
}

static void *
worker(void *arg)
{
	my_tid = (unsigned)(uintptr_t)arg;
	for (;;) {
		pthread_barrier_wait(&start_bar);
		if (quit)
			return NULL;
		entry(entry_args);
		pthread_barrier_wait(&end_bar);
	}
}

static void
launch(int threads, unsigned gx, unsigned gy)
{
	pthread_t th[1024];

	nthreads = threads;
	quit = 0;
	pthread_barrier_init(&start_bar, NULL, (unsigned)threads + 1);
	pthread_barrier_init(&end_bar, NULL, (unsigned)threads + 1);
	pthread_barrier_init(&cta_bar, NULL, (unsigned)threads);
	for (int w = 0; w < threads / 32; w++)
		pthread_barrier_init(&warp_bar[w], NULL, 32);
	for (int i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
	for (cur_cy = 0; cur_cy < gy; cur_cy++)
		for (cur_cx = 0; cur_cx < gx; cur_cx++) {
			pthread_barrier_wait(&start_bar);
			pthread_barrier_wait(&end_bar);
		}
	quit = 1;
	pthread_barrier_wait(&start_bar);
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start_bar);
	pthread_barrier_destroy(&end_bar);
	pthread_barrier_destroy(&cta_bar);
	for (int w = 0; w < threads / 32; w++)
		pthread_barrier_destroy(&warp_bar[w]);
}

/* ---- inputs --------------------------------------------------------- */
static uint64_t rng = 0x2545f4914f6cdd1dULL;

static uint32_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* The blocks of a param that an in-kernel amax reduces (1xB, BxB,
 * rowwise, columnwise, over x or over transpose(x)), in x's coordinates:
 * every 16 blocks, blocks 1..4 are all zero, all below eps, all NaN and
 * all at the format's max, so that the scale of each kind of block is
 * checked (eps clamp, amax 0, NaN, fmax / amax at the top of the range).
 * Tensorwise amaxes and params no amax reads get none. */
typedef struct Blocks { long br, bc, cols; } Blocks;

static Blocks
blocks_of(const Func *f, int v, long rows, long cols)
{
	Blocks b = {0, 0, cols};
	for (int i = 0; i < f->nins && !b.br; i++) {
		const Ins *in = &f->ins[i];
		if (in->op != OP_amax || in->narg < 1)
			continue;
		const Ins *src = ir_def_ins(f, in->arg[0]);
		int t = src && src->op == OP_transpose && src->arg[0] == v;
		if (in->arg[0] != v && !t)
			continue;
		long b0 = in->type.block[0], b1 = in->type.rank > 1 ? in->type.block[1] : 0;
		b.br = t ? (b1 ? b1 : rows) : (b0 ? b0 : rows);
		b.bc = t ? (b0 ? b0 : cols) : (b1 ? b1 : cols);
		if (b.br >= rows && b.bc >= cols)
			b.br = b.bc = 0;    /* one block: tensorwise */
	}
	return b;
}

enum { K_NONE, K_ZERO, K_TINY, K_NAN, K_MAX };

static int
block_kind(const Blocks *b, long r, long c)
{
	if (!b || !b->br || finite_only)
		return K_NONE;
	long nbc = (b->cols + b->bc - 1) / b->bc, k = ((r / b->br) * nbc + c / b->bc) % 16;
	return k >= 1 && k <= 4 ? (int)k : K_NONE;
}

/* A value of every kind: mostly moderate magnitudes, a few rows with
 * specials (NaN and inf only in rows 5 and 9: one block each), and the
 * special blocks above (below eps: |x| < 2^-40 < 1e-12). */
static float
sample(long r, long i, int kind, float fmax)
{
	uint32_t k = next() % 64;
	switch (kind) {
	case K_ZERO: return k & 1 ? -0.0f : 0.0f;
	case K_TINY: return (k & 1 ? -1 : 1) * ldexpf(1.0f + (float)(next() % 1024) / 1024.0f, -50 + (int)(k % 8));
	case K_NAN: return NAN;
	case K_MAX: return k & 1 ? -fmax : fmax;
	}
	if (finite_only)
		r = 0;
	if (r == 5 && i % 97 == 3)
		return NAN;
	if (r == 9 && i % 89 == 1)
		return (i & 1) ? INFINITY : -INFINITY;
	if (k == 0)
		return 0.0f;
	if (k == 1)
		return -0.0f;
	if (k == 2)
		return ldexpf(1.0f, -130) * (float)(next() % 7);   /* subnormal */
	if (k == 3)
		return (next() & 1 ? 1 : -1) * 1e30f;
	float mag = ldexpf(1.0f + (float)(next() % 1024) / 1024.0f, (int)(next() % 24) - 12);
	return next() & 1 ? -mag : mag;
}

static void
fill(void *buf, precc_format f, long rows, long cols, int is_state, const Blocks *bl)
{
	long n = rows * cols;
	/* the format's largest finite value (bf16 0x7f7f, fp16 65504, FLT_MAX) */
	float fmax = f == PRECC_BF16 ? precc_decode(f, 0x7f7f) : f == PRECC_FP16 ? 65504.0f : FLT_MAX;
	for (long i = 0; i < n; i++) {
		float v;
		if (is_state)
			v = ldexpf(1.0f + (float)(next() % 256) / 256.0f, (int)(next() % 16) - 8);
		else
			v = sample(i / cols, i, block_kind(bl, i / cols, i % cols), fmax);
		switch (precc_interp_elem_bytes(f)) {
		case 4: ((float *)buf)[i] = v; break;
		case 2: {
			uint32_t c = precc_encode(f, v, PRECC_RNE, false, 0);
			/* fp16 overflows where bf16 does not: inf only in rows 5, 9 */
			if (isfinite(v) && !isfinite(precc_decode(f, c)))
				c = precc_encode(f, ldexpf(v, -100), PRECC_RNE, false, 0);
			((uint16_t *)buf)[i] = (uint16_t)c;
			break;
		}
		default: {
			/* codes; e2m1 holds one 4-bit code per byte. NaN and inf
			 * codes only in rows 5 and 9, as sample() does: a GEMM's dot
			 * products then mostly hold none */
			uint32_t c = next() & (f == PRECC_E2M1 ? 0x0f : 0xff);
			long r = finite_only ? 0 : i / cols;
			if (is_state)   /* 8-bit scales: moderate values */
				c = precc_encode(f, v, PRECC_RNE, true, 0);
			while (r != 5 && r != 9 && !is_state && !isfinite(precc_decode(f, c)))
				c = next() & 0xff;
			((uint8_t *)buf)[i] = (uint8_t)c;
			break;
		}
		}
	}
}


/* the whole file, NUL-terminated (frontend/diag.c) */
static char *
slurp(const char *path)
{
	return read_file(path, 0, NULL, NULL);
}

/* in-place textual substitution (same or shorter replacement) */
static void
subst(char *s, const char *from, const char *to)
{
	size_t lf = strlen(from), lt = strlen(to);
	char *p;

	while ((p = strstr(s, from))) {
		memmove(p + lt, p + lf, strlen(p + lf) + 1);
		memcpy(p, to, lt);
	}
}

static const char *emu_fns[] = {
	"precc_emu_sreg", "precc_emu_shfl_bfly", "precc_emu_barrier", "precc_emu_asm2_16",
	"precc_emu_asm2_32", "precc_emu_asm1_32", "precc_emu_yield", "precc_emu_shared",
	"precc_emu_mma",
};
static void *emu_addr[] = {
	(void *)precc_emu_sreg, (void *)precc_emu_shfl_bfly, (void *)precc_emu_barrier,
	(void *)precc_emu_asm2_16, (void *)precc_emu_asm2_32, (void *)precc_emu_asm1_32,
	(void *)precc_emu_yield, (void *)precc_emu_shared, (void *)precc_emu_mma,
};

static long
extent(long d)
{
	return d >= 0 ? d : (M + (-d) - 1) / (-d);
}

/* Run one kernel on the host and against the interpreter; 0 if equal. */
static int
check_kernel(const Func *f, const char *file)
{
	Cg g;
	CodegenTarget t = {CG_SM90, 0};
	CodegenKernel info;
	char err[1024], *msg = NULL;
	int rc = -1;
	LLVMExecutionEngineRef ee = NULL;
	void *buf[64] = {0};
	void *args[64];
	IrInterp *ip = NULL;

	cg_init(&g, CG_SM90, f->name);
	cg_set_host(&g);
	if (cg_kernel_module(&g, f, &t, &info, err, sizeof err)) {
		printf("FAIL %s: %s\n", file, err);
		cg_dispose(&g);
		return -1;
	}
	if ((extra_run && !info.has_m) || (info.has_m && M % info.m_multiple)) {
		cg_dispose(&g);
		return 1;     /* this M is not one the kernel takes */
	}
	/* void precc_emu_entry(ptr args): loads each parameter, calls */
	LLVMValueRef kfn = g.fn;
	LLVMTypeRef kty = LLVMGlobalGetValueType(kfn);
	LLVMTypeRef pt = LLVMPointerTypeInContext(g.ctx, 0);
	LLVMValueRef wrap = LLVMAddFunction(g.mod, "precc_emu_entry", LLVMFunctionType(g.vd, &pt, 1, 0));
	LLVMPositionBuilderAtEnd(g.b, LLVMAppendBasicBlockInContext(g.ctx, wrap, "entry"));
	unsigned np = LLVMCountParams(kfn);
	LLVMValueRef kargs[64];
	for (unsigned i = 0; i < np; i++) {
		LLVMValueRef ix = LLVMConstInt(g.i64, i, 0);
		LLVMValueRef slotp = LLVMBuildGEP2(g.b, pt, LLVMGetParam(wrap, 0), &ix, 1, "");
		LLVMTypeRef ty = LLVMTypeOf(LLVMGetParam(kfn, i));
		LLVMValueRef v = LLVMBuildLoad2(g.b, pt, slotp, "");
		kargs[i] = ty == pt ? v : LLVMBuildLoad2(g.b, ty, v, "");
	}
	LLVMBuildCall2(g.b, kty, kfn, kargs, np, "");
	LLVMBuildRetVoid(g.b);
	/* every external the kernel calls must be an emulated one: an
	 * intrinsic or special register without a host model aborts here */
	for (LLVMValueRef fn = LLVMGetFirstFunction(g.mod); fn; fn = LLVMGetNextFunction(fn)) {
		size_t nl;
		const char *nm = LLVMGetValueName2(fn, &nl);
		int known = !LLVMIsDeclaration(fn) || (!strncmp(nm, "llvm.", 5) && strncmp(nm, "llvm.nvvm.", 10));
		for (size_t i = 0; !known && i < sizeof emu_fns / sizeof *emu_fns; i++)
			known = !strcmp(nm, emu_fns[i]);
		if (!known) {
			printf("FAIL %s: the emulator has no model of %s\n", file,
			       strncmp(nm, "precc_emu_unknown:", 18) ? nm : nm + 18);
			cg_dispose(&g);
			return -1;
		}
	}
	char *triple = LLVMGetDefaultTargetTriple();
	LLVMSetTarget(g.mod, triple);
	LLVMDisposeMessage(triple);
	LLVMSetDataLayout(g.mod, "");
	if (LLVMVerifyModule(g.mod, LLVMReturnStatusAction, &msg)) {
		printf("FAIL %s: verifier: %s\n", file, msg);
		LLVMDisposeMessage(msg);
		cg_dispose(&g);
		return -1;
	}
	LLVMDisposeMessage(msg);
	LLVMModuleRef mod = g.mod;
	struct LLVMMCJITCompilerOptions o;
	LLVMInitializeMCJITCompilerOptions(&o, sizeof o);
	o.OptLevel = 2;
	if (LLVMCreateMCJITCompilerForModule(&ee, mod, &o, sizeof o, &msg)) {
		printf("FAIL %s: MCJIT: %s\n", file, msg);
		LLVMDisposeMessage(msg);
		cg_dispose(&g);
		return -1;
	}
	g.mod = NULL;
	for (size_t i = 0; i < sizeof emu_fns / sizeof *emu_fns; i++) {
		LLVMValueRef fn = LLVMGetNamedFunction(mod, emu_fns[i]);
		if (fn)
			LLVMAddGlobalMapping(ee, fn, emu_addr[i]);
	}
	entry = (void (*)(void **))(uintptr_t)LLVMGetFunctionAddress(ee, "precc_emu_entry");

	/* buffers: params filled, outputs poisoned; the interpreter gets the params */
	IrInterpOpts io;
	ir_interp_opts_init(&io);
	io.m = M;
	io.promote_bits = 0;   /* promote:N exactly, as precc_emu_mma sums */
	io.threads = 2;
	io.seed = 0x0123456789abcdefULL;
	ip = ir_interp_new(f, &io, err, sizeof err);
	if (!ip) {
		printf("FAIL %s: interpreter: %s\n", file, err);
		goto done;
	}
	for (int i = 0; i < info.nparams; i++) {
		int v = info.param_value[i];
		const Type *ty = &f->val[v].type;
		long rows = ty->rank == 2 ? extent(ty->dim[0]) : 1, cols = extent(ty->dim[ty->rank - 1]);
		size_t bytes = (size_t)(rows * cols) * precc_interp_elem_bytes(ty->fmt);
		buf[i] = malloc(bytes ? bytes : 1);
		args[i] = buf[i];
		/* the runtime's contract: outputs start poisoned (precc-run's
		 * 0xa5), only those the code updates atomically (the manifest's
		 * zero_outputs) are zeroed */
		memset(buf[i], info.atomic_params >> i & 1 ? 0 : 0xa5, bytes);
		const Ins *d = ir_def_ins(f, v);
		if (d && d->op == OP_param) {
			Blocks bl = blocks_of(f, v, rows, cols);
			fill(buf[i], ty->fmt, rows, cols, d->param == PARAM_STATE || ty->is_scale, &bl);
			if (ir_interp_bind(ip, f->val[v].name, buf[i], bytes)) {
				printf("FAIL %s: bind %s: %s\n", file, f->val[v].name, ir_interp_error(ip));
				goto done;
			}
		}
	}
	int64_t m = M, seed = (int64_t)io.seed;
	int na = info.nparams;
	uint32_t *sync = NULL;
	if (info.cooperative) {
		sync = calloc((size_t)info.sync_words, 4);
		args[na++] = sync;
	}
	if (info.has_m)
		args[na++] = &m;
	if (info.has_seed)
		args[na++] = &seed;
	entry_args = args;
	unsigned gx = 1, gy = 1;
	if (info.nphases > 1) {
		gx = 0;
		for (int p = 0; p < info.nphases; p++) {
			const CodegenPhase *ph = &info.phase[p];
			const Type *dt = &f->val[ph->data].type;
			long rows = extent(dt->dim[0]), cols = extent(dt->dim[1]);
			if (ph->tiled)
				gx += (unsigned)(((cols + ph->tile_cols - 1) / ph->tile_cols)
				                 * ((rows + ph->tile_rows - 1) / ph->tile_rows));
			else
				gx += (unsigned)((rows * cols + ph->elems_per_cta - 1) / ph->elems_per_cta);
		}
	} else if (info.shape == CG_DELAYED_UPDATE) {
		gx = 1;
	} else if (info.tiled) {
		const Type *dt = &f->val[info.data].type;
		long rows = extent(dt->dim[0]), cols = extent(dt->dim[1]);
		gx = (unsigned)((cols + info.tile_cols - 1) / info.tile_cols);
		gy = (unsigned)((rows + info.tile_rows - 1) / info.tile_rows);
	} else {
		const Type *dt = &f->val[info.data].type;
		long rows = extent(dt->dim[0]), cols = extent(dt->dim[1]);
		gx = (unsigned)((rows * cols + info.elems_per_cta - 1) / info.elems_per_cta);
	}
	if (info.cooperative) {
		if (launch_coop(info.threads, gx, gy)) {
			printf("FAIL %s: a cooperative grid of %ux%u is too big to emulate\n", file, gx, gy);
			free(sync);
			goto done;
		}
	} else {
		launch(info.threads, gx, gy);
	}
	free(sync);
	if (ir_interp_run(ip)) {
		printf("FAIL %s: interpreter: %s\n", file, ir_interp_error(ip));
		goto done;
	}
	rc = 0;
	int nout = 0;
	for (int i = 0; i < info.nparams; i++)
		nout += ir_def_ins(f, info.param_value[i])->op != OP_param;
	if (nout == 0) {
		printf("FAIL %s: the kernel has no outputs to compare\n", file);
		rc = -1;
	}
	for (int i = 0; i < info.nparams; i++) {
		int v = info.param_value[i];
		if (ir_def_ins(f, v)->op == OP_param)
			continue;
		long r, c;
		size_t bytes = ir_interp_value_bytes(ip, v, &r, &c);
		const uint8_t *want = ir_interp_value(ip, v), *got = buf[i];
		if (info.shape == CG_GEMM && !f->val[v].type.is_scale) {
			/* equal NaNs or zeros prove little: most results must be
			 * finite and nonzero */
			size_t es = precc_interp_elem_bytes(f->val[v].type.fmt), live = 0;
			for (size_t k = 0; k < bytes; k += es) {
				uint32_t bits = 0;
				memcpy(&bits, want + k, es);
				float x = precc_decode(f->val[v].type.fmt, bits);
				live += isfinite(x) && x != 0;
			}
			if (live * 10 < (bytes / es) * 8) {
				printf("FAIL %s: %%%s: only %zu of %zu results finite and nonzero\n", file,
				       f->val[v].name, live, bytes / es);
				rc = -1;
			}
		}
		if (!memcmp(want, got, bytes))
			continue;
		size_t es = precc_interp_elem_bytes(f->val[v].type.fmt), k = 0, bad = 0;
		for (k = 0; k < bytes; k += es)
			if (memcmp(want + k, got + k, es))
				bad++;
		for (k = 0; k < bytes && !memcmp(want + k, got + k, es); k += es)
			;
		uint32_t wv = 0, gv = 0;
		memcpy(&wv, want + k, es);
		memcpy(&gv, got + k, es);
		printf("FAIL %s: %%%s: %zu of %zu elements differ; first at %zu: kernel 0x%x, "
		       "interpreter 0x%x\n", file, f->val[v].name, bad, bytes / es, k / es, gv, wv);
		rc = -1;
	}
	if (emu_break)
		goto done;
	printf("%s %-18s %-16s M=%-4ld %d threads, grid %ux%u, %d outputs equal\n",
	       rc ? "FAIL" : "ok  ", file, info.nphases > 1 ? "fused" : codegen_shape_name(info.shape),
	       info.has_m ? M : 0, info.threads, gx, gy, nout);
done:
	for (int i = 0; i < 64; i++)
		free(buf[i]);
	ir_interp_free(ip);
	if (ee)
		LLVMDisposeExecutionEngine(ee);
	cg_dispose(&g);
	return rc;
}

static int
cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run file's first kernel with emu_break = brk at M = m: 1 (a failure) if
 * the comparison does not notice. */
static int
self_test(const char *dir, const char *file, int brk, long m, const char *what)
{
	char path[1024], err[1024];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	char *text = slurp(path);
	Module *mod = text ? ir_parse(text, file, err, sizeof err) : NULL;
	int missed;

	free(text);
	emu_break = brk;
	M = m;
	printf("self-test, %s:\n", what);
	missed = !mod || check_kernel(mod->fn[0], file) == 0;
	if (missed)
		printf("FAIL: %s went unnoticed\n", what);
	ir_module_free(mod);
	return missed;
}

int
main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "kernels";
	char *names[256], err[1024];
	int n = 0, fails = 0;

	parse_cvts();
	LLVMLinkInMCJIT();
	if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
		printf("skipped: this LLVM has no native target to JIT for\n");
		return 77;
	}
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "test_emu: cannot open %s\n", dir);
		return 1;
	}
	for (struct dirent *de; (de = readdir(d)) && n < 256;) {
		size_t l = strlen(de->d_name);
		if (l > 3 && !strcmp(de->d_name + l - 3, ".ir"))
			names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof *names, cmp);
	for (int i = 0; i < n; i++) {
		char path[1024];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		char *text = slurp(path);
		if (text) {
			subst(text, "[4096,4096]", "[512,512]");
			subst(text, "[32,32]{128x128}", "[4,4]{128x128}");
			subst(text, "[256,256]{16x16}", "[32,32]{16x16}");
		}
		const char *em = text ? strstr(text, "# emu: m=") : NULL;
		M = em ? atol(em + 9) : 128;
		finite_only = text && strstr(text, "# emu: finite") != NULL;
		Module *m = text ? ir_parse(text, names[i], err, sizeof err) : NULL;
		free(text);
		if (!m || ir_verify(m, err, sizeof err)) {
			printf("FAIL %s: %s\n", names[i], err);
			fails++;
		} else {
			for (int k = 0; k < m->nfn; k++) {
				long m0 = M;
				fails += check_kernel(m->fn[k], names[i]) < 0;
				/* and at an M that divides no tile (partial tiles, rows
				 * and blocks past the last full one), one per file in turn */
				extra_run = 1;
				for (int t = 0; t < 3 && !strstr(names[i], "gemm"); t++) {
					M = extra_m[(i + t) % 3];
					int rc = check_kernel(m->fn[k], names[i]);
					if (rc <= 0) {
						fails += rc < 0;
						break;
					}
				}
				M = m0;
				extra_run = 0;
			}
		}
		ir_module_free(m);
		free(names[i]);
	}
	/* the check can fail: a corrupted cvt, a lost mma product must be caught */
	fails += self_test(dir, "quant_tensor.ir", 1, 128, "one cvt corrupted");
	fails += self_test(dir, "gemm_e4m3_tensor.ir", 2, 100, "one mma product lost");
	printf("%d kernel files, %d failures\n", n, fails);
	return fails ? 1 : 0;
}
