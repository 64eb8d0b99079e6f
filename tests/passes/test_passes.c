/*
 * test_passes.c — the passes' unit tests: hash stability (known FNV-1a 64
 * vectors, a pinned kernel hash, invariance under value names and
 * comments), the text round-trip and the parse/verify errors of kernels,
 * calls and pass attributes, and the partition invariant on every shipped
 * recipe: each non-GEMM op lands in exactly one kernel (or folds into a
 * GEMM), and step funcs call only kernels.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"
#include "passes.h"
#include "recipe.h"

static int fails, checks;

#define CHECK(c, ...) do { checks++; if (!(c)) { fails++; \
	fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static const char kernel_text[] =
	"# a kernel and its caller\n"
	"kernel @x.quantize target=sm_90a amax_scheme=grid threads=256 grid=M/64x4 {\n"
	"  %x = param in : bf16[M,256]\n"
	"  # the global amax first\n"
	"  %x.amax = amax %x amax_scheme=grid : f32[1,1]{*x*}\n"
	"  %x.scale = scale %x.amax fmt=e4m3 eps=1e-12 : f32[1,1]{*x*}\n"
	"  %x.q = quantize %x, %x.scale sat cvt=hw : e4m3[M,256]\n"
	"  %x.scale_inv = recip %x.scale : f32[1,1]{*x*}\n"
	"  %x.q.t = transpose %x.q : e4m3[256,M]\n"
	"  ret %x.q, %x.scale_inv, %x.q.t\n"
	"}\n"
	"\n"
	"func @layer target=sm_90a m_align=16 {\n"
	"  %x = param in : bf16[M,256]\n"
	"  %x.q, %x.scale_inv, %x.q.t = call @x.quantize(%x) : e4m3[M,256], f32[1,1]{*x*}, e4m3[256,M]\n"
	"  %acc = gemm %x.q, %x.q, %x.scale_inv, %x.scale_inv accum=fp32 mma=mma_sync epilogue=descale+cast : f32[M,M]\n"
	"  %y = cast %acc epilogue=acc : bf16[M,M]\n"
	"  ret %y, %x.q.t\n"
	"}\n";

/* The same kernel, other value names and comments. */
static const char renamed_text[] =
	"kernel @other {\n"
	"  %a = param grad : bf16[M,256]\n"
	"  %b = amax %a amax_scheme=grid : f32[1,1]{*x*}\n"
	"  %c = scale %b fmt=e4m3 eps=1e-12 : f32[1,1]{*x*}\n"
	"  # comment\n"
	"  %d = quantize %a, %c sat cvt=hw : e4m3[M,256]\n"
	"  %e = recip %c : f32[1,1]{*x*}\n"
	"  %f = transpose %d : e4m3[256,M]\n"
	"  ret %d, %e, %f\n"
	"}\n";

static Module *
parse(const char *t, char *err, size_t n)
{
	return ir_parse(t, "p.ir", err, n);
}

static void
test_fnv(void)
{
	/* FNV-1a 64 reference vectors (Fowler/Noll/Vo) */
	CHECK(ir_hash_bytes(IR_HASH_INIT, "", 0) == 0xcbf29ce484222325ULL, "empty");
	CHECK(ir_hash_bytes(IR_HASH_INIT, "a", 1) == 0xaf63dc4c8601ec8cULL, "a");
	CHECK(ir_hash_bytes(IR_HASH_INIT, "foobar", 6) == 0x85944171f73967e8ULL, "foobar");
	CHECK(ir_hash_str(IR_HASH_INIT, "a") == ir_hash_bytes(IR_HASH_INIT, "a", 2), "with NUL");
}

static void
test_roundtrip_and_hash(void)
{
	char err[512];
	Module *m = parse(kernel_text, err, sizeof err), *r;
	char *s;

	CHECK(m, "parse: %s", err);
	if (!m)
		return;
	s = ir_module_to_string(m);
	CHECK(!strcmp(s, kernel_text), "round-trip:\n%s", s);
	CHECK(ir_verify(m, err, sizeof err) == 0, "verify: %s", err);
	CHECK(m->fn[0]->kernel && !m->fn[1]->kernel, "kernel flag");
	CHECK(m->fn[1]->ins[1].op == OP_call && m->fn[1]->ins[1].nmore == 2, "call results");
	CHECK(!strcmp(m->fn[0]->pattr[PA_GRID], "M/64x4"), "header attr");
	free(s);

	r = parse(renamed_text, err, sizeof err);
	CHECK(r, "parse renamed: %s", err);
	if (r) {
		uint64_t a = ir_func_hash(m->fn[0], "sm_90a"), b = ir_func_hash(r->fn[0], "sm_90a");
		/* header attributes differ (target, threads, grid): drop them */
		for (int k = 0; k < NPASSATTR; k++)
			if (k != PA_AMAX_SCHEME)
				ir_set_attr(m->fn[0]->pattr, (PassAttr)k, NULL);
		ir_set_attr(r->fn[0]->pattr, PA_AMAX_SCHEME, "grid");
		a = ir_func_hash(m->fn[0], "sm_90a");
		b = ir_func_hash(r->fn[0], "sm_90a");
		CHECK(a == b, "names, kinds and comments do not change the hash: %016" PRIx64
		      " vs %016" PRIx64, a, b);
		CHECK(a != ir_func_hash(m->fn[0], "sm_89"), "the target changes the hash");
		/* pinned: the hash must not drift between builds or machines
		 * (it names cached kernels); change it only with the format */
		CHECK(a == 0xb50ab9a1ddb42b6cULL || getenv("PRECC_PRINT_HASH"),
		      "pinned hash changed: %016" PRIx64, a);
		if (getenv("PRECC_PRINT_HASH"))
			printf("%016" PRIx64 "\n", a);
		r->fn[0]->ins[3].sat = false;
		CHECK(b != ir_func_hash(r->fn[0], "sm_90a"), "a body change changes the hash");
		ir_module_free(r);
	}
	ir_module_free(m);
}

static void
expect_parse_error(const char *t, const char *want)
{
	char err[512];
	Module *m = parse(t, err, sizeof err);

	CHECK(!m && strstr(err, want), "want '%s', got '%s'", want, m ? "(parsed)" : err);
	ir_module_free(m);
}

static void
expect_verify_error(const char *t, const char *want)
{
	char err[1024];
	Module *m = parse(t, err, sizeof err);

	CHECK(m, "parse: %s", err);
	if (!m)
		return;
	CHECK(ir_verify(m, err, sizeof err) > 0 && strstr(err, want), "want '%s', got '%s'",
	      want, err);
	ir_module_free(m);
}

#define K "kernel @k {\n  %a = param in : bf16[M,16]\n  %b = amax %a : f32[1,1]{*x*}\n  ret %b, %a\n}\n"

static void
test_errors(void)
{
	expect_parse_error("func @f {\n  %a, %b = amax %x : f32[1,1]{*x*}\n}\n",
	                   "p.ir:2:7: error: only call defines more than one value");
	expect_parse_error("func @f {\n  %a = call k(%x) : f32[1,1]{*x*}\n}\n",
	                   "expected '@' and the kernel's name after call");
	expect_parse_error("func @f {\n  %a = call @k %x : f32[1,1]{*x*}\n}\n", "expected '(' after @k");
	expect_parse_error("func @f {\n  %a, %b = call @k(%x) : f32[1,1]{*x*}\n}\n",
	                   "expected ',' and the type of %b");
	expect_parse_error("func @f bogus=1 {\n}\n", "p.ir:1:9: error: unknown attribute 'bogus'");
	expect_parse_error("func @f grid=1 grid=2 {\n}\n", "attribute 'grid' given twice");
	expect_parse_error("func @f {\n  %a = param in fuse= : bf16[4,4]\n}\n", "expected a value after 'fuse='");
	expect_verify_error("func @f {\n  %x = param in : bf16[M,16]\n  %a = call @nope(%x) : f32[1,1]{*x*}\n  ret %a\n}\n",
	                    "error: @f: %a = call: no kernel @nope");
	expect_verify_error(K "func @f {\n  %x = param in : bf16[M,32]\n  %a, %c = call @k(%x) : f32[1,1]{*x*}, bf16[M,16]\n  ret %a\n}\n",
	                    "operand 1 %x is bf16[M,32] but @k's param %a is bf16[M,16]");
	expect_verify_error(K "func @f {\n  %x = param in : bf16[M,16]\n  %a = call @k(%x) : f32[1,1]{*x*}\n  ret %a\n}\n",
	                    "@k returns 2 values, the call defines 1");
	expect_verify_error(K "func @f {\n  %x = param in : bf16[M,16]\n  %a, %c = call @k(%x) : f32[1,1]{*x*}, bf16[M,8]\n  ret %a\n}\n",
	                    "result %c is bf16[M,8] but @k returns bf16[M,16]");
	expect_verify_error("func @f {\n  %x = param buf : bf16[M,16]\n  ret %x\n}\n", "buf params are for kernels");
	expect_verify_error("kernel @k {\n  %s = param state : f32[1,1]{*x*}\n  %t = recip %s : f32[1,1]{*x*}\n  update %s, %t\n  ret %t\n}\n",
	                    "a kernel returns what it writes");
	expect_verify_error("func @f {\n  %x = param in : bf16[M,16]\n  %a = call @f(%x) : f32[1,1]{*x*}\n  ret %a\n}\n",
	                    "@f is a func, not a kernel");
}

static const char *const recipes[] = {
	"bf16", "fp16_dynamic_loss_scale", "te_delayed_hybrid", "current_tensorwise", "rowwise",
	"rowwise_gw_hp", "deepseek_v3", "mxfp8", "nvfp4",
};
/* recipes/NAME.lua x recipes/models/tiny.lua, resolved. */
static Plan *
plan_of(const char *name, Recipe **rc, Model **md)
{
	char path[1024];

	snprintf(path, sizeof path, "%s/%s.lua", PRECC_RECIPES, name);
	*rc = recipe_load(path);
	snprintf(path, sizeof path, "%s/models/tiny.lua", PRECC_RECIPES);
	*md = model_load(path);
	return plan_resolve(*rc, *md);
}

/* Compute ops (gemm included): what must land in a kernel exactly once. */
static int
compute_ops(const Module *m, bool kernels, bool steps)
{
	int n = 0;

	for (int k = 0; k < m->nfn; k++) {
		const Func *f = m->fn[k];
		if (f->kernel ? !kernels : !steps)
			continue;
		for (int j = 0; j < f->nins; j++) {
			Op o = f->ins[j].op;
			n += o != OP_param && o != OP_ret && o != OP_update && o != OP_call;
		}
	}
	return n;
}

static int
count_op(const Func *f, Op op)
{
	int n = 0;

	for (int j = 0; j < f->nins; j++)
		n += f->ins[j].op == op;
	return n;
}

static void
test_partition(void)
{
	for (size_t r = 0; r < sizeof recipes / sizeof recipes[0]; r++) {
		Recipe *rc;
		Model *md;
		Plan *p = plan_of(recipes[r], &rc, &md);
		Module *m = lower_plan(p, NULL);
		PassOptions o = {.target = target_by_name("sm_90a"), .stop_after = "fuse"};

		passes_run(m, &o);
		int before = compute_ops(m, true, true);
		partition(m, o.target);
		int in_kernels = compute_ops(m, true, false), bad = 0, gemm_kernels = 0, gemms = 0;
		for (int k = 0; k < m->nfn; k++) {
			const Func *f = m->fn[k];
			for (int j = 0; j < f->nins; j++) {
				const Ins *i = &f->ins[j];
				if (f->kernel)
					bad += i->op == OP_call || i->op == OP_update;
				else
					bad += i->op != OP_param && i->op != OP_ret && i->op != OP_update
					       && i->op != OP_call;
			}
			if (f->kernel && count_op(f, OP_gemm)) {
				gemm_kernels++;
				gemms += count_op(f, OP_gemm);
			}
		}
		CHECK(before == in_kernels, "%s: %d ops before partition, %d in kernels after",
		      recipes[r], before, in_kernels);
		CHECK(!bad, "%s: %d ops outside any kernel", recipes[r], bad);
		/* tiny has 15 linears, 3 GEMMs each, and one GEMM per GEMM kernel */
		CHECK(gemm_kernels == 45 && gemms == 45, "%s: %d GEMM kernels holding %d gemms, want 45",
		      recipes[r], gemm_kernels, gemms);
		char err[2048];
		CHECK(ir_verify(m, err, sizeof err) == 0, "%s: %s", recipes[r], err);
		ir_module_free(m);
		plan_free(p);
		model_free(md);
		recipe_free(rc);
	}
}

/* Bind every param of f by name from a pool of deterministic buffers (the
 * same name gets the same bytes in every func), run, return the results'
 * bytes concatenated in ret order. */
typedef struct Pool { char name[64][64]; void *buf[64]; size_t n[64]; int count; } Pool;

static void *
pool_get(Pool *p, const Func *f, int v, size_t bytes)
{
	const char *name = f->val[v].name;
	const Type *t = &f->val[v].type;

	for (int k = 0; k < p->count; k++)
		if (!strcmp(p->name[k], name))
			return p->buf[k];
	int k = p->count++;
	snprintf(p->name[k], sizeof p->name[k], "%s", name);
	p->buf[k] = calloc(1, bytes + 1);
	p->n[k] = bytes;
	if (t->fmt == PRECC_BF16) {
		uint16_t *b = p->buf[k];
		uint32_t x = 12345u + (uint32_t)k * 7919u;
		for (size_t i = 0; i < bytes / 2; i++) {
			x = x * 1664525u + 1013904223u;
			b[i] = (uint16_t)precc_encode(PRECC_BF16, ((float)(x >> 8) / 16777216.0f - 0.5f) * 8,
			                              PRECC_RNE, false, 0);
		}
	} else if (t->fmt == PRECC_FP32 && t->is_scale) {
		float *b = p->buf[k];
		for (size_t i = 0; i < bytes / 4; i++)
			b[i] = 1.0f;
	}
	return p->buf[k];
}

/* Runs f (binding its params from pool), keeps the interpreter for a
 * later commit; appends the results' bytes to *out. */
static IrInterp *
start_func(const Func *f, const IrInterpOpts *o, Pool *p, unsigned char **out, size_t *nout)
{
	char err[768];
	IrInterp *ip;

	if (!(ip = ir_interp_new(f, o, err, sizeof err))) {
		fprintf(stderr, "%s\n", err);
		return NULL;
	}
	for (int j = 0; j < f->nins; j++)
		if (f->ins[j].op == OP_param) {
			long r, c;
			size_t b = ir_interp_value_bytes(ip, f->ins[j].res, &r, &c);
			ir_interp_bind(ip, f->val[f->ins[j].res].name, pool_get(p, f, f->ins[j].res, b), b);
		}
	if (ir_interp_run(ip)) {
		fprintf(stderr, "@%s: %s\n", f->name, ir_interp_error(ip));
		ir_interp_free(ip);
		return NULL;
	}
	for (int k = 0; k < ir_interp_nresults(ip); k++) {
		long r, c;
		int v = ir_interp_result(ip, k);
		size_t b = ir_interp_value_bytes(ip, v, &r, &c);
		*out = realloc(*out, *nout + b + 1);
		memcpy(*out + *nout, ir_interp_value(ip, v), b);
		*nout += b;
	}
	return ip;
}

static int
run_func(const Func *f, Pool *p, unsigned char **out, size_t *nout)
{
	IrInterpOpts o;
	IrInterp *ip;

	ir_interp_opts_init(&o);
	o.m = 256, o.threads = 1;
	if (!(ip = start_func(f, &o, p, out, nout)))
		return -1;
	ir_interp_free(ip);
	return 0;
}

/* A step func computes what its three funcs computed, bit for bit. */
static void
test_merge_means_the_same(void)
{
	static const char *const rs[] = {"te_delayed_hybrid", "current_tensorwise", "rowwise_gw_hp",
	                                 "deepseek_v3", "nvfp4"};
	for (size_t r = 0; r < sizeof rs / sizeof rs[0]; r++) {
		Recipe *rc;
		Model *md;
		Plan *p = plan_of(rs[r], &rc, &md);
		Module *three = lower_plan(p, "model.layers.0.self_attn.q_proj");
		Module *one = lower_plan(p, "model.layers.0.self_attn.q_proj");
		PassOptions o = {.target = target_by_name("sm_90a"), .stop_after = "merge"};
		Pool pool = {0};
		unsigned char *a = NULL, *b = NULL;
		size_t na = 0, nb = 0;
		int bad = 0;

		passes_run(one, &o);
		CHECK(one->nfn == 1 && three->nfn == 3, "%s: %d step funcs", rs[r], one->nfn);
		for (int k = 0; k < three->nfn; k++)
			bad |= run_func(three->fn[k], &pool, &a, &na);
		bad |= run_func(one->fn[0], &pool, &b, &nb);
		CHECK(!bad && na == nb && na && !memcmp(a, b, na), "%s: the step func's results "
		      "differ from its funcs' (%zu vs %zu bytes)", rs[r], nb, na);
		free(a), free(b);
		for (int k = 0; k < pool.count; k++)
			free(pool.buf[k]);
		ir_module_free(one), ir_module_free(three);
		plan_free(p), model_free(md), recipe_free(rc);
	}
}

/* The whole pipeline keeps the meaning: for every recipe and every layer
 * of tiny, the step func after all passes (params, calls of the kernels
 * partition made and dedupe shared, updates) computes what the three
 * lowered funcs compute, bit for bit: every result, and every state
 * buffer after the commit. The interpreter runs each call's kernel on
 * the caller's buffers, so this checks partition's cut (what crosses a
 * kernel boundary, in which order) and dedupe's sharing, not only merge. */
static void
test_passes_mean_the_same(void)
{
	int layers = 0, calls = 0;

	for (size_t r = 0; r < sizeof recipes / sizeof recipes[0]; r++) {
		Recipe *rc;
		Model *md;
		Plan *p = plan_of(recipes[r], &rc, &md);
		Module *low = lower_plan(p, NULL), *m = lower_plan(p, NULL);
		PassOptions o = {.target = target_by_name("sm_90a")};
		IrInterpOpts lo, po;

		passes_run(m, &o);
		ir_interp_opts_init(&lo);
		lo.m = 128, lo.threads = 2, lo.seed = 42, lo.module = low;
		po = lo, po.module = m;
		for (int k = 0; k < m->nfn; k++) {
			const Func *step = m->fn[k];
			if (step->kernel)
				continue;
			Pool pa = {0}, pb = {0};
			unsigned char *a = NULL, *b = NULL;
			size_t na = 0, nb = 0;
			IrInterp *three[3] = {NULL, NULL, NULL}, *one;
			static const char *const g[3] = {"fprop", "dgrad", "wgrad"};
			int bad = 0;
			for (int j = 0; j < 3; j++) {
				char name[512];
				snprintf(name, sizeof name, "%s.%s", step->name, g[j]);
				const Func *f = ir_find_func(low, name);
				bad |= !f || !(three[j] = start_func(f, &lo, &pa, &a, &na));
			}
			one = start_func(step, &po, &pb, &b, &nb);
			for (int j = 0; j < step->nins; j++)
				calls += step->ins[j].op == OP_call;
			bad |= !one;
			CHECK(!bad && na == nb && na && !memcmp(a, b, na), "%s: @%s after the passes: "
			      "results differ from its lowered funcs' (%zu vs %zu bytes)", recipes[r],
			      step->name, nb, na);
			/* state: every func of a step reads the state as it began */
			for (int j = 0; j < 3 && !bad; j++)
				bad |= ir_interp_commit(three[j]) != 0;
			bad |= !one || ir_interp_commit(one) != 0;
			bool same = !bad && pa.count == pb.count;
			for (int q = 0; same && q < pa.count; q++) {
				int w = -1;
				for (int t = 0; t < pb.count; t++)
					if (!strcmp(pa.name[q], pb.name[t]))
						w = t;
				same = w >= 0 && pa.n[q] == pb.n[w] && !memcmp(pa.buf[q], pb.buf[w], pa.n[q]);
			}
			CHECK(same, "%s: @%s after the passes: params or committed state differ",
			      recipes[r], step->name);
			for (int j = 0; j < 3; j++)
				ir_interp_free(three[j]);
			ir_interp_free(one);
			free(a), free(b);
			for (int q = 0; q < pa.count; q++)
				free(pa.buf[q]);
			for (int q = 0; q < pb.count; q++)
				free(pb.buf[q]);
			layers++;
		}
		ir_module_free(m), ir_module_free(low);
		plan_free(p), model_free(md), recipe_free(rc);
	}
	/* 9 recipes x 15 layers of tiny, each with its GEMM kernels at least */
	CHECK(layers == 9 * 15 && calls >= 3 * layers, "%d step funcs, %d calls", layers, calls);
}

int
main(void)
{
	test_fnv();
	test_roundtrip_and_hash();
	test_errors();
	test_partition();
	test_merge_means_the_same();
	test_passes_mean_the_same();
	printf("%d/%d pass checks passed\n", checks - fails, checks);
	return fails != 0;
}
