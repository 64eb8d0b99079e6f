/*
 * test_plan.c — the manifest reader and plan execution (runtime/artifact.c,
 * runtime/plan.c) against hand-written manifests in tests/runtime/Inputs/.
 *
 *   test_plan cpu INPUTS         cpu backend == each step's IR run directly
 *                                through ir_interp; argument checks; state
 *   test_plan manifest INPUTS    validation errors (missing key, versions)
 *   test_plan fake INPUTS LIB    the cuda path against the fake driver:
 *                                grids, zero_outputs, updates, pointer kinds,
 *                                a PTX JIT failure with its log
 */
#include <dlfcn.h>
#include <stdint.h>
#include <unistd.h>

#include "rtcheck.h"
#include "rt.h"
#include "precc/interp.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	long n;
	char *s;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	s = malloc((size_t)n + 1);
	if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
		free(s);
		s = NULL;
	}
	if (s)
		s[n] = 0;
	fclose(f);
	return s;
}

static void spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* text with the first `from` replaced by `to` (malloc'ed). */
static char *replace(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
	char *s;

	if (!at)
		return NULL;
	s = malloc(n);
	memcpy(s, text, (size_t)(at - text));
	strcpy(s + (at - text), to);
	strcat(s, at + strlen(from));
	return s;
}

static uint64_t rng = 0x1234;
static uint32_t next(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng >> 33);
}

/* Host buffers for a layer at m: inputs and state random, outputs zero. */
static void **make_bufs(precc_rt *rt, int layer, long m)
{
	int n = precc_rt_buffer_count(rt, layer);
	void **b = calloc((size_t)n + 1, sizeof *b);

	for (int i = 0; i < n; i++) {
		precc_buffer_info bi;
		precc_rt_buffer_info(rt, layer, i, m, &bi);
		b[i] = precc_rt_malloc(rt, bi.bytes);
		memset(b[i], 0, bi.bytes);
		if (!bi.written || strcmp(bi.role, "state") == 0) {
			/* element by element: e2m1 holds two codes a byte */
			for (size_t e = 0; e < (size_t)bi.rows * (size_t)bi.cols; e++) {
				float x = strcmp(bi.role, "state") == 0
				          ? 0.5f + (float)(next() % 1000) / 100.0f
				          : ((float)(next() % 20001) - 10000.0f) / 997.0f;
				uint32_t c = precc_encode((precc_format)bi.format_id, x,
				                          PRECC_RNE, true, 0);
				precc_interp_set_code(b[i], (precc_format)bi.format_id, e, c);
			}
		}
	}
	return b;
}

static void free_bufs(precc_rt *rt, int layer, void **b)
{
	for (int i = 0; b && i < precc_rt_buffer_count(rt, layer); i++)
		precc_rt_free(rt, b[i]);
	free(b);
}

static void **copy_bufs(precc_rt *rt, int layer, long m, void **src)
{
	int n = precc_rt_buffer_count(rt, layer);
	void **b = calloc((size_t)n + 1, sizeof *b);

	for (int i = 0; i < n; i++) {
		precc_buffer_info bi;
		precc_rt_buffer_info(rt, layer, i, m, &bi);
		b[i] = malloc(bi.bytes);
		memcpy(b[i], src[i], bi.bytes);
	}
	return b;
}

static int buf_index(const json *bufs, const char *name)
{
	for (size_t q = 0; q < bufs->n; q++)
		if (strcmp(json_get(bufs->item[q], "name")->str, name) == 0)
			return (int)q;
	return -1;
}

/* Runs layer's steps straight from the manifest's JSON: each kernel's IR
 * parsed here and run through ir_interp, buffers bound by the IR's param
 * names, outputs copied back by ret order, then the layer's updates. */
static int run_direct(const json *man, const char *fqn, long m, void **buf,
                      uint64_t seed)
{
	const json *layers = json_get(man, "layers"), *kernels = json_get(man, "kernels");
	const json *l = NULL;

	for (size_t i = 0; i < layers->n; i++)
		if (strcmp(json_get(layers->item[i], "fqn")->str, fqn) == 0)
			l = layers->item[i];
	if (!l)
		return -1;
	if (json_get(l, "class"))
		l = json_get(man, "layer_classes")->item[(size_t)json_get(l, "class")->num];
	const json *bufs = json_get(l, "buffers"), *steps = json_get(l, "steps");
#define BUF(name) buf_index(bufs, name)
	for (size_t s = 0; s < steps->n; s++) {
		const json *st = steps->item[s], *k = NULL, *args = json_get(st, "args");
		char err[512];
		for (size_t i = 0; i < kernels->n; i++)
			if (strcmp(json_get(kernels->item[i], "name")->str,
			           json_get(st, "kernel")->str) == 0)
				k = kernels->item[i];
		Module *mod = ir_parse(json_get(k, "ir")->str, "direct", err, sizeof err);
		if (!mod) {
			fprintf(stderr, "%s\n", err);
			return -1;
		}
		const Func *f = mod->fn[0];
		IrInterpOpts o;
		ir_interp_opts_init(&o);
		o.m = m;
		o.seed = seed;
		IrInterp *ip = ir_interp_new(f, &o, err, sizeof err);
		int a = 0;
		for (int i = 0; i < f->nins; i++)
			if (f->ins[i].op == OP_param) {
				int b = BUF(args->item[a]->str);
				ir_interp_bind(ip, f->val[f->ins[i].res].name, buf[b],
				               ir_interp_value_bytes(ip, f->ins[i].res, NULL, NULL));
				a++;
			}
		if (ir_interp_run(ip)) {
			fprintf(stderr, "direct: %s\n", ir_interp_error(ip));
			return -1;
		}
		for (int r = 0; r < ir_interp_nresults(ip); r++, a++) {
			int v = ir_interp_result(ip, r), b = BUF(args->item[a]->str);
			memcpy(buf[b], ir_interp_value(ip, v), ir_interp_value_bytes(ip, v, NULL, NULL));
		}
		ir_interp_free(ip);
		ir_module_free(mod);
	}
	const json *ups = json_get(l, "updates");
	for (size_t u = 0; ups && u < ups->n; u++) {
		int sb = BUF(json_get(ups->item[u], "state")->str);
		int nb = BUF(json_get(ups->item[u], "next")->str);
		rt_type t;
		rt_type_parse(json_get(bufs->item[sb], "type")->str, &t);
		memcpy(buf[sb], buf[nb], rt_type_bytes(&t, m, NULL, NULL));
	}
	return 0;
#undef BUF
}

static int contains(const char *s, const char *sub)
{
	if (strstr(s, sub))
		return 1;
	fprintf(stderr, "  error: %s\n  lacks: %s\n", s, sub);
	return 0;
}

static void test_cpu(const char *inputs)
{
	char dir[4096], why[4200], err[512];
	precc_rt *rt;
	json *man;
	char *text;

	snprintf(dir, sizeof dir, "%s/plan", inputs);
	rt = precc_rt_open(dir, PRECC_BACKEND_CPU, why, sizeof why);
	CHECK(rt != NULL);
	if (!rt) {
		fprintf(stderr, "%s\n", why);
		return;
	}
	snprintf(why, sizeof why, "%s/manifest.json", dir);
	text = slurp(why);
	man = json_parse(text, strlen(text), "manifest.json", err, sizeof err);
	free(text);
	CHECK(precc_rt_layer_count(rt) == 3);
	CHECK_STR(precc_rt_layer_name(rt, 1), "model.layers.0.mlp.up_proj");
	CHECK(precc_rt_layer_find(rt, "model.layers.0.mlp.down_proj") == 2);
	CHECK(precc_rt_layer_find(rt, "nope") == -1);
	CHECK(precc_rt_layer_m_multiple(rt, 1) == 32);
	CHECK(precc_rt_layer_m_multiple(rt, 0) == 1);
	{
		precc_buffer_info bi;
		CHECK(precc_rt_buffer_info(rt, 1, 4, 64, &bi) == 0);
		CHECK_STR(bi.name, "x.t.scale_inv");
		CHECK_STR(bi.format, "e8m0");
		CHECK(bi.rows == 256 && bi.cols == 2 && bi.bytes == 512 && bi.written);
		CHECK(precc_rt_buffer_info(rt, 1, 5, 64, &bi) == -1);
	}
	/* every layer, twice (the delayed layer's state carries over), at two
	 * Ms: the runtime's cpu backend == the IR run directly */
	for (int l = 0; l < precc_rt_layer_count(rt); l++)
		for (long m = 32; m <= 96; m += 64) {
			void **a = make_bufs(rt, l, m), **b = copy_bufs(rt, l, m, a);
			for (int rep = 0; rep < 2; rep++) {
				CHECK(precc_rt_run_layer(rt, l, m, a, 7 + (uint64_t)rep, NULL) == 0);
				CHECK(run_direct(man, precc_rt_layer_name(rt, l), m, b,
				                 7 + (uint64_t)rep) == 0);
			}
			for (int i = 0; i < precc_rt_buffer_count(rt, l); i++) {
				precc_buffer_info bi;
				precc_rt_buffer_info(rt, l, i, m, &bi);
				if (memcmp(a[i], b[i], bi.bytes)) {
					fprintf(stderr, "layer %d M=%ld buffer %s differs\n", l, m,
					        bi.name);
					failures++;
				}
			}
			for (int i = 0; i < precc_rt_buffer_count(rt, l); i++)
				free(b[i]);
			free(b);
			free_bufs(rt, l, a);
		}
	{
		precc_kernel_info ki;
		CHECK(precc_rt_kernel_count(rt) == 7);
		CHECK(precc_rt_kernel_info(rt, 0, &ki) == 0);
		CHECK_STR(ki.name, "k_00000000000000a1");
		CHECK(ki.launches == 8);    /* 2 per run of q_proj, 4 runs */
		CHECK_STR(ki.loaded, "ir");
	}
	/* argument checks, before any launch */
	{
		void **a = make_bufs(rt, 1, 64);
		void *keep = a[2];
		CHECK(precc_rt_run_layer(rt, 1, 64, NULL, 0, NULL) == -1);
		CHECK(contains(precc_rt_last_error(), "buffers is NULL (it needs 5)"));
		CHECK(precc_rt_run_layer(rt, 1, 48, a, 0, NULL) == -1);
		CHECK(contains(precc_rt_last_error(), "M = 48 is not a multiple of 32"));
		CHECK(precc_rt_run_layer(rt, 1, 0, a, 0, NULL) == -1);
		CHECK(contains(precc_rt_last_error(), "M = 0, the token count must be positive"));
		CHECK(precc_rt_run_layer(rt, 9, 64, a, 0, NULL) == -1);
		CHECK(contains(precc_rt_last_error(), "layer 9 is out of range (the manifest has 3)"));
		a[2] = NULL;
		CHECK(precc_rt_run_layer(rt, 1, 64, a, 0, NULL) == -1);
		CHECK(contains(precc_rt_last_error(), "layer 'model.layers.0.mlp.up_proj' buffer 2 'x.scale_inv' is NULL"));
		a[2] = (char *)keep + 4;
		CHECK(precc_rt_run_layer(rt, 1, 64, a, 0, NULL) == -1);
		CHECK(contains(precc_rt_last_error(), "is not 16-byte aligned"));
		a[2] = (char *)keep + 8;     /* 8-byte aligned is not enough either */
		CHECK(precc_rt_run_layer(rt, 1, 64, a, 0, NULL) == -1);
		CHECK(contains(precc_rt_last_error(), "is not 16-byte aligned"));
		a[2] = keep;
		{
			size_t sz[5] = {64 * 256 * 2, 64 * 256, 64 * 2 * 4, 256 * 64, 256 * 2};
			CHECK(precc_rt_run_layer_sized(rt, 1, 64, a, sz, 0, NULL) == 0);
			sz[3]--;
			CHECK(precc_rt_run_layer_sized(rt, 1, 64, a, sz, 0, NULL) == -1);
			CHECK_STR(precc_rt_last_error(), "plan: layer 'model.layers.0.mlp.up_proj' buffer 3 "
			          "'x.t.q' has 16383 bytes; e4m3[256,M] at M=64 needs 16384");
		}
		free_bufs(rt, 1, a);
	}
	/* scaling state: pull, save, load, push; another model is refused */
	{
		void **a = make_bufs(rt, 2, 32);
		precc_state *st = precc_rt_state_new(rt), *st2;
		char path[] = "/tmp/precc_test_plan_XXXXXX";
		int fd = mkstemp(path);
		float s0, s1;
		CHECK(st && precc_state_count(st) == 2);
		CHECK(st && precc_state_find(st, "model.layers.0.mlp.down_proj:x.scale") == 0);
		CHECK(precc_rt_run_layer(rt, 2, 32, a, 0, NULL) == 0);
		memcpy(&s0, a[1], 4);
		CHECK(precc_rt_state_pull(rt, st, 2, a) == 0);
		CHECK(precc_state_save(st, path) == 0);
		CHECK(precc_rt_run_layer(rt, 2, 32, a, 0, NULL) == 0);
		st2 = precc_rt_state_new(rt);
		CHECK(precc_state_load(st2, path) == 0);
		CHECK(precc_rt_state_push(rt, st2, 2, a) == 0);
		memcpy(&s1, a[1], 4);
		CHECK(s0 == s1);
		precc_state_free(st2);
		/* the same file under another model's manifest */
		{
			char d2[] = "/tmp/precc_test_plan_dXXXXXX", f2[4200];
			char *t = slurp(why), *t2;
			precc_rt *rt2;
			CHECK(mkdtemp(d2) != NULL);
			t2 = replace(t, "\"fedcba9876543210\"", "\"fedcba9876543211\"");
			snprintf(f2, sizeof f2, "%s/manifest.json", d2);
			spit(f2, t2);
			rt2 = precc_rt_open(d2, PRECC_BACKEND_CPU, NULL, 0);
			CHECK(rt2 != NULL);
			st2 = precc_rt_state_new(rt2);
			CHECK(precc_state_load(st2, path) == -1);
			CHECK(contains(precc_rt_last_error(), "model mismatch"));
			CHECK(precc_rt_state_push(rt2, st, 2, a) == -1);
			CHECK(contains(precc_rt_last_error(), "this state is for recipe 0123456789abcdef model fedcba9876543210"));
			precc_state_free(st2);
			precc_rt_close(rt2);
			unlink(f2);
			rmdir(d2);
			free(t);
			free(t2);
		}
		if (fd >= 0)
			close(fd);
		unlink(path);
		precc_state_free(st);
		free_bufs(rt, 2, a);
	}
	json_free(man);
	precc_rt_close(rt);
}

/* Writes the plan manifest with one edit into a temp dir and loads it;
 * returns the error ("" when it loaded). */
static const char *load_edited(const char *inputs, const char *from,
                               const char *to)
{
	static char err[8192];
	char src[4096], d[] = "/tmp/precc_test_plan_mXXXXXX", f[4200];
	char *t, *t2;
	precc_rt *rt;

	snprintf(src, sizeof src, "%s/plan/manifest.json", inputs);
	t = slurp(src);
	t2 = replace(t, from, to);
	if (!t2) {
		free(t);
		snprintf(err, sizeof err, "(test bug: no '%s' in the manifest)", from);
		return err;
	}
	mkdtemp(d);
	snprintf(f, sizeof f, "%s/manifest.json", d);
	spit(f, t2);
	rt = precc_rt_open(d, PRECC_BACKEND_CPU, NULL, 0);
	snprintf(err, sizeof err, "%s", rt ? "" : precc_rt_last_error());
	/* messages name the temp dir: drop it */
	if (strncmp(err, d, strlen(d)) == 0)
		memmove(err, err + strlen(d), strlen(err + strlen(d)) + 1);
	precc_rt_close(rt);
	unlink(f);
	rmdir(d);
	free(t);
	free(t2);
	return err;
}

static void test_manifest(const char *inputs)
{
	precc_rt *rt = precc_rt_open_backend(PRECC_BACKEND_CPU, NULL, 0);

	CHECK_STR(load_edited(inputs, "\"precc_manifest\": 2", "\"precc_manifest\": 2"), "");
	CHECK_STR(load_edited(inputs, "\"precc_version\": \"0.1.0\"", "\"precc_version\": \"0.2.0\""),
	          "/manifest.json:3:20: error: written by precc 0.2.0 (manifest format 2); "
	          "this precc_rt is precc 0.1.0 (manifest format 2): rebuild the artifacts with precc 0.1.0");
	CHECK_STR(load_edited(inputs, "\"precc_manifest\": 2", "\"precc_manifest\": 1"),
	          "/manifest.json:2:21: error: written by precc 0.1.0 (manifest format 1); "
	          "this precc_rt is precc 0.1.0 (manifest format 2): rebuild the artifacts with precc 0.1.0");
	/* a layer's body in layer_classes (what precc build writes): the class
	 * must exist */
	CHECK_STR(load_edited(inputs, "\"fqn\": \"model.layers.0.mlp.up_proj\",",
	                      "\"fqn\": \"model.layers.0.mlp.up_proj\", \"class\": 0,"),
	          "/manifest.json:436:5: error: layers[1] 'model.layers.0.mlp.up_proj': 'class' given, "
	          "but the manifest has no 'layer_classes'");
	CHECK_STR(load_edited(inputs, "\"layers\": [",
	                      "\"layer_classes\": [{\"buffers\": [], \"steps\": []}],\n  \"layers\": ["
	                      "{\"fqn\": \"a\", \"class\": 0}, {\"fqn\": \"b\", \"class\": 1},"),
	          "/manifest.json:347:62: error: layers[1] 'b': 'class' is 1, expected an integer in [0, 0]");
	CHECK_STR(load_edited(inputs, "\"threads\": 256,", ""),
	          "/manifest.json:17:5: error: kernels[0] 'k_00000000000000a1': missing key 'threads'");
	CHECK_STR(load_edited(inputs, "\"llvm_version\"", "\"llvm\""),
	          "/manifest.json:1:1: error: missing key 'llvm_version'");
	CHECK_STR(load_edited(inputs, "\"hash\": \"0123456789abcdef\"", "\"hash\": \"0123\""),
	          "/manifest.json:7:13: error: recipe: 'hash' is \"0123\", expected 16 lowercase hex digits");
	CHECK(contains(load_edited(inputs, "\"type\": \"bf16[M,256]\"", "\"type\": \"bf17[M,256]\""),
	               "kernels[0] 'k_00000000000000a1' params[0]: type \"bf17[M,256]\" is not FORMAT[DIM,DIM]{GRAN}"));
	CHECK(contains(load_edited(inputs, "\"args\": [\n            \"x\",\n            \"x.amax\"\n",
	                           "\"args\": [\n            \"x\",\n            \"y.amax\"\n"),
	               "layers[0] 'model.layers.0.self_attn.q_proj' steps[0]: args[1] 'y.amax' is not one of the layer's buffers"));
	CHECK(contains(load_edited(inputs, "\"threads\": 256", "\"threads\": 256.5"),
	               "'threads' is 256.5, expected an integer in [1, 1024]"));
	CHECK(contains(load_edited(inputs, "%x.amax = amax %x", "%x.amax = amux %x"),
	               "its ir does not parse"));
	CHECK(contains(load_edited(inputs, "\"dir\": \"out\"", "\"dir\": \"in\""),
	               "zero_outputs[0] is not the name of an out param"));
	CHECK(contains(load_edited(inputs, "\"dir\": \"in\"", "\"dir\": \"out\""),
	               "kernel 'k_00000000000000a1': param 0 'x' is dir \"out\", the IR makes it an input"));
	CHECK(contains(load_edited(inputs, "\"kernel\": \"k_00000000000000a1\"", "\"kernel\": \"k_0\""),
	               "kernel 'k_0' is not in 'kernels'"));
	/* tensor maps over M (a wgrad's K = M): x[M, 256] mapped as its
	 * transpose's K (rows -1, MN-major) loads; M columns need has_m and an
	 * m_multiple that keeps 16-byte rows (1-byte elements: 16) */
	{
		static const char a1[] = "\"threads\": 256,\n      \"grid\": {\n        \"tiled\": false,\n"
		                         "        \"data\": \"x\",\n        \"elems_per_cta\": 4096,\n"
		                         "        \"tile_rows\": 0,\n        \"tile_cols\": 0,\n"
		                         "        \"m_multiple\": 1";
		char to[1024];
#define TMAPS(rows, cols, eb, mm) (snprintf(to, sizeof to, "\"threads\": 256, \"tmaps\": [{\"param\": 0, " \
		"\"elem_bytes\": %d, \"rows\": %d, \"cols\": %d, \"box_rows\": 64, \"box_cols\": 64, " \
		"\"swizzle\": 128}],\n      \"grid\": {\"tiled\": false, \"data\": \"x\", " \
		"\"elems_per_cta\": 4096, \"tile_rows\": 0, \"tile_cols\": 0, \"m_multiple\": %d", \
		eb, rows, cols, mm), to)
		CHECK_STR(load_edited(inputs, a1, TMAPS(-1, 256, 2, 1)), "");
		CHECK_STR(load_edited(inputs, a1, TMAPS(256, -1, 1, 16)), "");
		CHECK(contains(load_edited(inputs, a1, TMAPS(256, -1, 1, 8)),
		               "kernels[0] 'k_00000000000000a1': tmaps[0] has M columns of 1-byte elements but "
		               "m_multiple 8: rows would not be 16-byte multiples"));
		CHECK(contains(load_edited(inputs, a1, TMAPS(256, 0, 1, 16)), "tmaps[0]: not a tensor map"));
		CHECK(contains(load_edited(inputs, a1, TMAPS(256, -2, 1, 16)),
		               "tmaps[0]: 'cols' is -2, expected an integer in [-1, "));
#undef TMAPS
	}
	CHECK(contains(load_edited(inputs, "{\n  \"precc_manifest\"", "{,\n  \"precc_manifest\""),
	               "/manifest.json:1:2: error: expected a key string, found ','"));
	CHECK(precc_rt_load(rt, "/nonexistent/dir") == -1);
	CHECK_STR(precc_rt_last_error(), "/nonexistent/dir/manifest.json: error: cannot read: No such file or directory");
	CHECK(precc_rt_run_layer(rt, 0, 1, NULL, 0, NULL) == -1);
	CHECK_STR(precc_rt_last_error(), "plan: no artifact directory is loaded (precc_rt_load)");
	precc_rt_close(rt);
}

#ifdef PRECC_HAVE_CUDA_H
static long fake_launches(void *h)
{
	long (*n)(void) = h ? (long (*)(void))dlsym(h, "fake_cuda_launches") : NULL;
	return n ? n() : -1;
}

static long fake_violations(void *h)
{
	long (*n)(void) = h ? (long (*)(void))dlsym(h, "fake_cuda_violations") : NULL;
	return n ? n() : -1;
}

static void test_fake(const char *inputs, const char *lib)
{
	char dir[4096], why[512];
	precc_rt *rt, *cpu;
	const unsigned *(*last)(void);
	void *h;

	setenv("PRECC_LIBCUDA", lib, 1);
	snprintf(dir, sizeof dir, "%s/plan", inputs);
	/* the fake checks every launch against the manifest loaded */
	setenv("FAKE_CUDA_MANIFEST", dir, 1);
	rt = precc_rt_open(dir, PRECC_BACKEND_CUDA, why, sizeof why);
	CHECK(rt != NULL);
	if (!rt) {
		fprintf(stderr, "%s\n", why);
		return;
	}
	h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	last = h ? (const unsigned *(*)(void))dlsym(h, "fake_cuda_last_launch") : NULL;
	CHECK(last != NULL);
	{
		precc_kernel_info ki;
		precc_rt_kernel_info(rt, 1, &ki);
		CHECK_STR(ki.loaded, "k_00000000000000a2.sm_90a.ptx");
		CHECK(ki.num_regs == 32);
	}
	/* q_proj at M=128: the tiled quantize's grid is 256/64 x 128/64 */
	{
		int l = 0;
		int n = precc_rt_buffer_count(rt, l);
		void **d = calloc((size_t)n, sizeof *d), **hst = calloc((size_t)n, sizeof *hst);
		for (int i = 0; i < n; i++) {
			precc_buffer_info bi;
			precc_rt_buffer_info(rt, l, i, 128, &bi);
			d[i] = precc_rt_malloc(rt, bi.bytes);
			hst[i] = malloc(bi.bytes);
			memset(hst[i], 0xff, bi.bytes);
			precc_rt_upload(rt, d[i], hst[i], bi.bytes);
		}
		void (*record)(int) = h ? (void (*)(int))dlsym(h, "fake_cuda_record_params") : NULL;
		const uint64_t *(*params)(void) = h ? (const uint64_t *(*)(void))dlsym(h, "fake_cuda_last_params") : NULL;
		CHECK(record && params);
		CHECK(precc_rt_run_layer(rt, l, 128, d, 42, NULL) == 0);
		if (last) {
			const unsigned *g = last();   /* the last step: k_d1, flat */
			CHECK(g[0] == 128 * 256 / 4096 && g[1] == 1 && g[3] == 256);
		}
		if (record && params) {
			record(6);
			CHECK(precc_rt_run_step(rt, l, 3, 128, d, 42, NULL) == 0);
			/* k_d1(g, g.amax, g.q, g.scale_inv, i64 m, i64 seed): buffers 5..8 */
			const uint64_t *p = params();
			for (int i = 0; i < 4; i++)
				CHECK(p[i] == (uint64_t)(uintptr_t)d[5 + i]);
			CHECK(p[4] == 128 && p[5] == 42);
			record(0);
		}
		/* the tiled step alone: grid (256/64, 128/64) */
		CHECK(precc_rt_run_step(rt, l, 1, 128, d, 0, NULL) == 0);
		if (last) {
			const unsigned *g = last();
			CHECK(g[0] == 4 && g[1] == 2 && g[2] == 1);
		}
		/* at M that no tile divides, the last tile row is partial and
		 * still launched: (256/64, ceil(96/64)); the whole layer at 96
		 * and 32 passes the fake's own grid check, which a grid rounded
		 * down fails (tests/mutants.sh grid_tiled_rows) */
		CHECK(precc_rt_run_step(rt, l, 1, 96, d, 0, NULL) == 0);
		if (last) {
			const unsigned *g = last();
			CHECK(g[0] == 4 && g[1] == 2 && g[2] == 1);
		}
		CHECK(precc_rt_run_layer(rt, l, 96, d, 0, NULL) == 0);
		CHECK(precc_rt_run_layer(rt, l, 32, d, 0, NULL) == 0);
		/* the fake's launch check itself, on k_a2 (tiled 64x64 over
		 * x bf16[M,256]): a grid short of the data, a pointer short of the
		 * buffer at M and another block are refused, naming what they miss */
		{
			typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned,
			                              unsigned, unsigned, unsigned, CUstream, void **,
			                              void **);
			launch_fn launch = h ? (launch_fn)dlsym(h, "cuLaunchKernel") : NULL;
			const char *(*violation)(void) = h ? (const char *(*)(void))dlsym(h, "fake_cuda_last_violation") : NULL;
			long (*nviol)(void) = h ? (long (*)(void))dlsym(h, "fake_cuda_violations") : NULL;
			CUresult (*push)(CUcontext) = h ? (CUresult (*)(CUcontext))dlsym(h, "cuCtxPushCurrent_v2") : NULL;
			CUresult (*pop)(CUcontext *) = h ? (CUresult (*)(CUcontext *))dlsym(h, "cuCtxPopCurrent_v2") : NULL;
			CHECK(launch && violation && nviol && push && pop);
			if (launch && violation && nviol && push && pop) {
				const rt_step *st = &rt->art->layer[l].step[1];
				CUfunction fn = rt_cuda_kdesc_kernel(&rt->art->kern[st->kernel])->fn;
				CUdeviceptr ptr[5];
				int64_t m = 96;
				void *pp[6];
				CUcontext c;
				long before = nviol();
				for (int p = 0; p < 5; p++) {
					ptr[p] = (CUdeviceptr)(uintptr_t)d[st->arg[p]];
					pp[p] = &ptr[p];
				}
				pp[5] = &m;
				push(rt->ctx);
				CHECK(launch(fn, 4, 2, 1, 256, 1, 1, 0, NULL, pp, NULL) == 0);
				CHECK(launch(fn, 4, 1, 1, 256, 1, 1, 0, NULL, pp, NULL) == CUDA_ERROR_LAUNCH_FAILED);
				CHECK(contains(violation(), "kernel 'k_00000000000000a2' (precc_quant_tensor): grid (4, 1, 1) at M=96, its data needs (4, 2, 1)"));
				m = 160;   /* the buffers are M=128's */
				CHECK(launch(fn, 4, 3, 1, 256, 1, 1, 0, NULL, pp, NULL) == CUDA_ERROR_LAUNCH_FAILED);
				CHECK(contains(violation(), "has 65536 bytes of device memory left, its buffer at M=160 needs 81920"));
				m = 96;
				CHECK(launch(fn, 4, 2, 1, 128, 1, 1, 0, NULL, pp, NULL) == CUDA_ERROR_LAUNCH_FAILED);
				CHECK(contains(violation(), "block (128, 1, 1), the kernel has 256 threads"));
				CHECK(nviol() == before + 3);
				pop(&c);
			}
		}
		/* zero_outputs: x.amax was 0xff.., the fake computes nothing */
		{
			float a;
			precc_rt_download(rt, &a, d[1], 4);
			CHECK(a == 0.0f);
		}
		/* a host pointer, and a device pointer on the cpu backend */
		void *keep = d[3];
		d[3] = hst[3];
		CHECK(precc_rt_run_layer(rt, l, 128, d, 0, NULL) == -1);
		CHECK(contains(precc_rt_last_error(), "cuda: layer 'model.layers.0.self_attn.q_proj' buffer 3 'x.q.t' is a host pointer"));
		d[3] = keep;
		/* bad input (issue 31): memory of another device, and a stream of
		 * another context, refused before any launch; the same runs pass
		 * with the runtime's own memory and a stream of its context */
		{
			CUcontext (*other)(void) = h ? (CUcontext (*)(void))dlsym(h, "fake_cuda_other_ctx") : NULL;
			CUstream (*mkstream)(CUcontext) = h ? (CUstream (*)(CUcontext))dlsym(h, "fake_cuda_stream") : NULL;
			CUresult (*push)(CUcontext) = h ? (CUresult (*)(CUcontext))dlsym(h, "cuCtxPushCurrent_v2") : NULL;
			CUresult (*pop)(CUcontext *) = h ? (CUresult (*)(CUcontext *))dlsym(h, "cuCtxPopCurrent_v2") : NULL;
			CUresult (*alloc)(CUdeviceptr *, size_t) = h ? (CUresult (*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2") : NULL;
			CUresult (*dfree)(CUdeviceptr) = h ? (CUresult (*)(CUdeviceptr))dlsym(h, "cuMemFree_v2") : NULL;
			CHECK(other && mkstream && push && pop && alloc && dfree);
			if (other && mkstream && push && pop && alloc && dfree) {
				precc_buffer_info bi;
				CUdeviceptr far = 0;
				CUcontext c;
				long before = fake_launches(h);
				precc_rt_buffer_info(rt, l, 3, 128, &bi);
				CHECK(push(other()) == 0 && alloc(&far, bi.bytes) == 0 && pop(&c) == 0);
				d[3] = (void *)(uintptr_t)far;
				CHECK(precc_rt_run_layer(rt, l, 128, d, 0, NULL) == -1);
				CHECK(contains(precc_rt_last_error(), "cuda: layer 'model.layers.0.self_attn.q_proj' buffer 3 'x.q.t' ("));
				CHECK(contains(precc_rt_last_error(), ") is memory of device 1; this runtime's context is on device 0"));
				d[3] = keep;
				CHECK(push(other()) == 0 && dfree(far) == 0 && pop(&c) == 0);
				CUstream theirs = mkstream(other());
				CHECK(precc_rt_run_layer(rt, l, 128, d, 0, theirs) == -1);
				CHECK(contains(precc_rt_last_error(), "cuda: stream "));
				CHECK(contains(precc_rt_last_error(), " belongs to another context ("));
				CHECK(contains(precc_rt_last_error(), "than this runtime's ("));
				CHECK(precc_rt_run_step(rt, l, 0, 128, d, 0, theirs) == -1);
				CHECK(contains(precc_rt_last_error(), " belongs to another context ("));
				CHECK(fake_launches(h) == before);   /* refused before any launch */
				CHECK(precc_rt_run_layer(rt, l, 128, d, 0, mkstream(rt->ctx)) == 0);
				CHECK(fake_launches(h) > before);
			}
		}
		cpu = precc_rt_open(dir, PRECC_BACKEND_CPU, NULL, 0);
		CHECK(cpu && precc_rt_run_layer(cpu, l, 128, d, 0, NULL) == -1);
		CHECK(contains(precc_rt_last_error(), "buffer 0 'x' ("));
		CHECK(contains(precc_rt_last_error(), ") is device memory; the cpu backend needs host memory"));
		CHECK(cpu && precc_rt_run_layer(cpu, l, 128, hst, 0, NULL) == 0);
		precc_rt_close(cpu);
		for (int i = 0; i < n; i++) {
			precc_rt_free(rt, d[i]);
			free(hst[i]);
		}
		free(d);
		free(hst);
	}
	/* down_proj: the updates copy next over the state on the stream */
	{
		int l = 2, n = precc_rt_buffer_count(rt, l);
		void **d = calloc((size_t)n, sizeof *d);
		float v = 3.5f, got = 0;
		for (int i = 0; i < n; i++) {
			precc_buffer_info bi;
			precc_rt_buffer_info(rt, l, i, 64, &bi);
			d[i] = precc_rt_malloc(rt, bi.bytes);
		}
		precc_rt_upload(rt, d[6], &v, 4);    /* x.scale.next */
		CHECK(precc_rt_run_layer(rt, l, 64, d, 0, NULL) == 0);
		precc_rt_download(rt, &got, d[1], 4);    /* x.scale */
		CHECK(got == 3.5f);
		for (int i = 0; i < n; i++)
			precc_rt_free(rt, d[i]);
		free(d);
	}
	precc_rt_close(rt);
	/* target choice (Inputs/targets: sm_90a in 'layers', sm_89 in
	 * 'target_layers'): the device's own target's cubin, else the newest
	 * older target's PTX; cpu runs 'layers' */
	{
		static const struct { const char *sm, *loaded; } want[] = {
			{"90", "k_00000000000090a0.sm_90a.cubin"},
			{"89", "k_0000000000008900.sm_89.cubin"},
			{"100", "k_0000000000008900.sm_89.ptx"},
		};
		char tdir[4096];
		snprintf(tdir, sizeof tdir, "%s/targets", inputs);
		setenv("FAKE_CUDA_MANIFEST", tdir, 1);
		for (int i = 0; i < 3; i++) {
			precc_kernel_info ki;
			precc_step_info si;
			setenv("FAKE_CUDA_SM", want[i].sm, 1);
			rt = precc_rt_open(tdir, PRECC_BACKEND_CUDA, why, sizeof why);
			CHECK(rt != NULL);
			if (!rt) {
				fprintf(stderr, "%s\n", why);
				continue;
			}
			CHECK(precc_rt_step_info(rt, 0, 0, &si) == 0);
			CHECK(precc_rt_kernel_info(rt, si.kernel, &ki) == 0);
			CHECK_STR(ki.loaded, want[i].loaded);
			precc_rt_close(rt);
		}
		setenv("FAKE_CUDA_SM", "80", 1);
		CHECK(precc_rt_open(tdir, PRECC_BACKEND_CUDA, why, sizeof why) == NULL);
		CHECK(contains(why, "no target for this device (sm_80): the artifacts are for sm_90a, sm_89, and precc's oldest target is sm_89 (fp8 needs it)"));
		unsetenv("FAKE_CUDA_SM");
		cpu = precc_rt_open(tdir, PRECC_BACKEND_CPU, NULL, 0);
		{
			precc_step_info si;
			precc_kernel_info ki;
			CHECK(cpu && precc_rt_step_info(cpu, 0, 0, &si) == 0);
			CHECK(cpu && precc_rt_kernel_info(cpu, si.kernel, &ki) == 0);
			CHECK_STR(ki.name, "k_00000000000090a0");
		}
		precc_rt_close(cpu);
		cpu = precc_rt_open_backend(PRECC_BACKEND_CPU, NULL, 0);
		CHECK(precc_rt_load_target(cpu, tdir, "sm_89") == 0);
		{
			precc_step_info si;
			precc_kernel_info ki;
			precc_artifact_info ai;
			precc_rt_artifact_info(cpu, &ai);
			CHECK_STR(ai.target, "sm_89");
			CHECK(precc_rt_step_info(cpu, 0, 0, &si) == 0);
			CHECK(precc_rt_kernel_info(cpu, si.kernel, &ki) == 0);
			CHECK_STR(ki.name, "k_0000000000008900");
		}
		precc_rt_close(cpu);
		cpu = precc_rt_open_backend(PRECC_BACKEND_CPU, NULL, 0);
		CHECK(precc_rt_load_target(cpu, tdir, "sm_75") == -1);
		CHECK(contains(precc_rt_last_error(), "error: target sm_75 is not one of the manifest's targets"));
		precc_rt_close(cpu);
		setenv("FAKE_CUDA_SM", "90", 1);
		rt = precc_rt_open_backend(PRECC_BACKEND_CUDA, NULL, 0);
		CHECK(precc_rt_load_target(rt, tdir, "sm_89") == -1);
		CHECK(contains(precc_rt_last_error(), "target sm_89 requested, but this device runs sm_90a"));
		precc_rt_close(rt);
		unsetenv("FAKE_CUDA_SM");
	}
	/* a fused kernel (Inputs/fused): grid = the sum of its phases' grids,
	 * a cooperative launch, a zeroed sync scratch before m; the cpu
	 * backend runs its IR and ignores all three */
	{
		char fdir[4096];
		int (*coop)(void) = h ? (int (*)(void))dlsym(h, "fake_cuda_cooperative_launches") : NULL;
		void (*record)(int) = h ? (void (*)(int))dlsym(h, "fake_cuda_record_params") : NULL;
		const uint64_t *(*params)(void) = h ? (const uint64_t *(*)(void))dlsym(h, "fake_cuda_last_params") : NULL;
		snprintf(fdir, sizeof fdir, "%s/fused", inputs);
		setenv("FAKE_CUDA_MANIFEST", fdir, 1);
		rt = precc_rt_open(fdir, PRECC_BACKEND_CUDA, why, sizeof why);
		CHECK(rt != NULL && coop && record && params);
		if (rt && coop && record && params) {
			void *d[5];
			int before = coop();
			for (int i = 0; i < 5; i++) {
				precc_buffer_info bi;
				precc_rt_buffer_info(rt, 0, i, 256, &bi);
				d[i] = precc_rt_malloc(rt, bi.bytes);
			}
			record(6);
			CHECK(precc_rt_run_layer(rt, 0, 256, d, 0, NULL) == 0);
			record(0);
			CHECK(coop() == before + 1);
			if (last) {
				const unsigned *g = last();
				CHECK(g[0] == 256 * 256 / 4096 + 256 * 256 / 32768 && g[1] == 1);
			}
			{
				const uint64_t *p = params();
				for (int i = 0; i < 5; i++)
					CHECK(p[i] == (uint64_t)(uintptr_t)d[i]);
				CHECK(p[5] != 0);   /* the sync scratch, then (unrecorded) m */
			}
			for (int i = 0; i < 5; i++)
				precc_rt_free(rt, d[i]);
		} else if (!rt)
			fprintf(stderr, "%s\n", why);
		precc_rt_close(rt);
		cpu = precc_rt_open(fdir, PRECC_BACKEND_CPU, NULL, 0);
		CHECK(cpu != NULL);
		precc_rt_close(cpu);
	}
	/* residency (issue 7): a cooperative kernel is launched on at most the
	 * CTAs the device holds at once (here 18 tiles at M=256 on one SM that
	 * holds one CTA of 256 threads at 255 registers: one CTA, which loops
	 * over the tiles); a kernel of which not one CTA fits is refused at
	 * load; and the fake driver itself refuses a cooperative grid over
	 * what is resident */
	{
		char fdir[4096];
		snprintf(fdir, sizeof fdir, "%s/fused", inputs);
		setenv("FAKE_CUDA_MANIFEST", fdir, 1);
		setenv("FAKE_CUDA_SMS", "1", 1);
		setenv("FAKE_CUDA_REGS", "255", 1);
		rt = precc_rt_open(fdir, PRECC_BACKEND_CUDA, why, sizeof why);
		CHECK(rt != NULL);
		if (rt) {
			void *d[5];
			int before = last ? (int)last()[0] : 0;
			for (int i = 0; i < 5; i++) {
				precc_buffer_info bi;
				precc_rt_buffer_info(rt, 0, i, 256, &bi);
				d[i] = precc_rt_malloc(rt, bi.bytes);
			}
			CHECK(precc_rt_run_layer(rt, 0, 256, d, 0, NULL) == 0);
			/* the 18 tiles on the one CTA that fits: it loops over them */
			CHECK(!last || (last()[0] == 1 && last()[1] == 1));
			(void)before;
			for (int i = 0; i < 5; i++)
				precc_rt_free(rt, d[i]);
		} else
			fprintf(stderr, "%s\n", why);
		precc_rt_close(rt);
		setenv("FAKE_CUDA_REGS", "300", 1);
		CHECK(precc_rt_open(fdir, PRECC_BACKEND_CUDA, why, sizeof why) == NULL);
		CHECK(contains(why, "kernel 'k_00000000000000e1' cannot run on precc fake device: not one "
		               "CTA of 256 threads at 300 registers"));
		{
			/* the driver's own types: clang's -fsanitize=function checks a
			 * call through a pointer against the callee's type */
			typedef CUresult (*coop_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned,
			                            unsigned, unsigned, unsigned, CUstream, void **);
			coop_fn launch = h ? (coop_fn)dlsym(h, "cuLaunchCooperativeKernel") : NULL;
			CUresult (*push)(CUcontext) = h ? (CUresult (*)(CUcontext))dlsym(h, "cuCtxPushCurrent_v2") : NULL;
			CUresult (*pop)(CUcontext *) = h ? (CUresult (*)(CUcontext *))dlsym(h, "cuCtxPopCurrent_v2") : NULL;
			CUcontext (*user)(void) = h ? (CUcontext (*)(void))dlsym(h, "fake_cuda_user_ctx") : NULL;
			CHECK(launch && push && pop && user);
			if (launch && push && pop && user) {
				CUcontext c;
				push(user());
				setenv("FAKE_CUDA_REGS", "255", 1);
				CHECK(launch(NULL, 2, 1, 1, 256, 1, 1, 0, NULL, NULL) == 720);  /* COOPERATIVE_LAUNCH_TOO_LARGE */
				setenv("FAKE_CUDA_REGS", "300", 1);
				CHECK(launch(NULL, 1, 1, 1, 256, 1, 1, 0, NULL, NULL) == 720);
				setenv("FAKE_CUDA_REGS", "64", 1);
				setenv("FAKE_CUDA_SMS", "132", 1);
				/* 4 CTAs of 256 at 64 registers per SM: 528 fit, 529 do not */
				CHECK(launch(NULL, 528, 1, 1, 256, 1, 1, 0, NULL, NULL) == 0);
				CHECK(launch(NULL, 529, 1, 1, 256, 1, 1, 0, NULL, NULL) == 720);
				CHECK(launch(NULL, 1, 1, 1, 256, 1, 1, 49153, NULL, NULL) == 1);  /* INVALID_VALUE */
				pop(&c);
			}
		}
		unsetenv("FAKE_CUDA_SMS");
		unsetenv("FAKE_CUDA_REGS");
	}
	/* a persistent kernel (the sm_90a GEMM's "launch": "persistent", here
	 * on Inputs/fused's kernel): cuLaunchKernel, not the cooperative one,
	 * on a 1-D grid of min(tiles, resident CTAs x SMs): its 18 tiles at
	 * M=256 on the one CTA that one SM at 255 registers holds, and all 18
	 * on the default 132 SMs */
	{
		char d2[] = "/tmp/precc_test_plan_pXXXXXX", src[4200], dst[4200];
		const char *names[] = {"manifest.json", "k_00000000000000e1.sm_90a.ptx"};
		int (*coop)(void) = h ? (int (*)(void))dlsym(h, "fake_cuda_cooperative_launches") : NULL;
		mkdtemp(d2);
		setenv("FAKE_CUDA_MANIFEST", d2, 1);
		for (int i = 0; i < 2; i++) {
			snprintf(src, sizeof src, "%s/fused/%s", inputs, names[i]);
			snprintf(dst, sizeof dst, "%s/%s", d2, names[i]);
			char *t = slurp(src), *t2 = i ? NULL : replace(t, "\"launch\": \"cooperative\"",
			                                               "\"launch\": \"persistent\"");
			CHECK(i || (t2 && strcmp(t, t2)));
			spit(dst, t2 ? t2 : t);
			free(t);
			free(t2);
		}
		for (int run = 0; run < 2 && coop && last; run++) {
			if (run == 0) {
				setenv("FAKE_CUDA_SMS", "1", 1);
				setenv("FAKE_CUDA_REGS", "255", 1);
			}
			rt = precc_rt_open(d2, PRECC_BACKEND_CUDA, why, sizeof why);
			CHECK(rt != NULL);
			if (rt) {
				void *d[5];
				int before = coop();
				for (int i = 0; i < 5; i++) {
					precc_buffer_info bi;
					precc_rt_buffer_info(rt, 0, i, 256, &bi);
					d[i] = precc_rt_malloc(rt, bi.bytes);
				}
				CHECK(precc_rt_run_layer(rt, 0, 256, d, 0, NULL) == 0);
				CHECK(coop() == before);
				CHECK(last()[0] == (run ? 18u : 1u) && last()[1] == 1 && last()[2] == 1);
				for (int i = 0; i < 5; i++)
					precc_rt_free(rt, d[i]);
			} else
				fprintf(stderr, "%s\n", why);
			precc_rt_close(rt);
			unsetenv("FAKE_CUDA_SMS");
			unsetenv("FAKE_CUDA_REGS");
		}
		CHECK(coop && last);
		for (int i = 0; i < 2; i++) {
			snprintf(dst, sizeof dst, "%s/%s", d2, names[i]);
			unlink(dst);
		}
		rmdir(d2);
	}
	/* a persistent kernel in clusters of 2 (the sm_90a GEMM's
	 * tile=BMxBN:2x1; Inputs/fused's kernel on one tiled 128x256 grid of
	 * x, bf16[M,256]): cuLaunchKernelEx with the cluster dimension (2, 1,
	 * 1), on 2 x min(column tiles x ceil(row tiles / 2), clusters) CTAs.
	 * At M=640, 5 row tiles: 3 cluster tiles, 6 CTAs on 132 SMs (not the
	 * 5 of one CTA a tile, which no cluster of 2 divides); on 6 SMs in 2
	 * GPCs of 3 at one CTA an SM, cuOccupancyMaxActiveClusters' 2 clusters
	 * (not 6 SMs / 2 = 3), 4 CTAs.
	 * A driver without cuLaunchKernelEx (the fake built FAKE_NO_CLUSTER)
	 * refuses it at load, naming the kernel; the manifest's refusals; and
	 * the fake driver's own cluster checks */
	{
		char d2[] = "/tmp/precc_test_plan_cXXXXXX", src[4200], dst[4200];
		const char *names[] = {"manifest.json", "k_00000000000000e1.sm_90a.ptx"};
		const unsigned *(*lastc)(void) =
			h ? (const unsigned *(*)(void))dlsym(h, "fake_cuda_last_cluster") : NULL;
		int has_ex = h && dlsym(h, "cuLaunchKernelEx") != NULL;
		char *text, *t1, *t2, *t3;
		mkdtemp(d2);
		setenv("FAKE_CUDA_MANIFEST", d2, 1);
		snprintf(src, sizeof src, "%s/fused/%s", inputs, names[0]);
		text = slurp(src);
		/* one tiled grid: the phases cut out */
		t1 = replace(text, "\"tiled\": false,\n        \"data\": \"x\",\n        \"elems_per_cta\": 0,\n"
		             "        \"tile_rows\": 0,\n        \"tile_cols\": 0,",
		             "\"tiled\": true,\n        \"data\": \"x\",\n        \"elems_per_cta\": 0,\n"
		             "        \"tile_rows\": 128,\n        \"tile_cols\": 256,");
		CHECK(t1 != NULL);
		char *ph = t1 ? strstr(t1, "\"phases\": [") : NULL, *pe = ph ? strstr(ph, "],") : NULL;
		CHECK(ph && pe);
		if (ph && pe)
			memmove(ph, pe + 2, strlen(pe + 2) + 1);
		t2 = t1 ? replace(t1, "\"launch\": \"cooperative\"",
		                  "\"launch\": \"persistent\",\n      \"cluster\": 2") : NULL;
		CHECK(t2 != NULL);
		snprintf(dst, sizeof dst, "%s/%s", d2, names[1]);
		snprintf(src, sizeof src, "%s/fused/%s", inputs, names[1]);
		t3 = slurp(src);
		spit(dst, t3);
		free(t3);
		snprintf(dst, sizeof dst, "%s/%s", d2, names[0]);
		spit(dst, t2 ? t2 : "");
		for (int run = 0; run < 2 && t2 && lastc && last; run++) {
			if (run == 1) {
				setenv("FAKE_CUDA_SMS", "6", 1);
				setenv("FAKE_CUDA_GPCS", "2", 1);
				setenv("FAKE_CUDA_REGS", "255", 1);
			}
			rt = precc_rt_open(d2, PRECC_BACKEND_CUDA, why, sizeof why);
			CHECK(has_ex == (rt != NULL));
			if (!has_ex)
				CHECK(contains(why, "cuda: kernel 'k_00000000000000e1' runs in clusters of 2 "
				               "CTAs, which needs cuLaunchKernelEx (CUDA 12.0); this driver has none"));
			if (rt) {
				void *d[5];
				long v0 = fake_violations(h);
				for (int i = 0; i < 5; i++) {
					precc_buffer_info bi;
					precc_rt_buffer_info(rt, 0, i, 640, &bi);
					d[i] = precc_rt_malloc(rt, bi.bytes);
				}
				CHECK(precc_rt_run_layer(rt, 0, 640, d, 0, NULL) == 0);
				CHECK(fake_violations(h) == v0);
				CHECK(lastc()[0] == 2 && lastc()[1] == 1 && lastc()[2] == 1);
				CHECK(last()[0] == (run ? 4u : 6u) && last()[1] == 1 && last()[2] == 1);
				CHECK(last()[0] % lastc()[0] == 0);
				for (int i = 0; i < 5; i++)
					precc_rt_free(rt, d[i]);
			} else if (has_ex)
				fprintf(stderr, "%s\n", why);
			precc_rt_close(rt);
			unsetenv("FAKE_CUDA_SMS");
			unsetenv("FAKE_CUDA_GPCS");
			unsetenv("FAKE_CUDA_REGS");
		}
		CHECK(lastc && last);
		/* the manifest's refusals: a cluster the family does not emit, and
		 * one whose grid the runtime does not size (not persistent) */
		static const char *const bad_cluster[][2] = {
			{"\"cluster\": 2", "\"cluster\": 3"},
			{"\"launch\": \"persistent\"", "\"launch\": \"normal\""},
		};
		static const char *const bad_why[] = {
			"kernels[0] 'k_00000000000000e1': 'cluster' is 3, expected an integer in [1, 2]",
			"kernels[0] 'k_00000000000000e1': 'cluster' 2 needs \"launch\": \"persistent\" and one "
			"tiled grid",
		};
		for (int i = 0; i < 2 && t2; i++) {
			char *t4 = replace(t2, bad_cluster[i][0], bad_cluster[i][1]);
			CHECK(t4 != NULL);
			spit(dst, t4 ? t4 : "");
			free(t4);
			CHECK(precc_rt_open(d2, PRECC_BACKEND_CUDA, why, sizeof why) == NULL);
			CHECK(contains(why, bad_why[i]));
			if (!contains(why, bad_why[i]))
				fprintf(stderr, "%s\n", why);
		}
		/* and on the phases' grid (the fused kernel as it was) */
		{
			char *t4 = replace(text, "\"launch\": \"cooperative\"",
			                   "\"launch\": \"persistent\",\n      \"cluster\": 2");
			spit(dst, t4 ? t4 : "");
			free(t4);
			CHECK(precc_rt_open(d2, PRECC_BACKEND_CUDA, why, sizeof why) == NULL);
			CHECK(contains(why, bad_why[1]));
		}
		free(text);
		free(t1);
		free(t2);
		for (int i = 0; i < 2; i++) {
			snprintf(dst, sizeof dst, "%s/%s", d2, names[i]);
			unlink(dst);
		}
		rmdir(d2);
		/* the fake's own checks, as sm_90 refuses: a grid not a multiple of
		 * the cluster, more than 8 CTAs a cluster (16: non-portable) */
		typedef CUresult (*ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
		ex_fn ex = has_ex ? (ex_fn)dlsym(h, "cuLaunchKernelEx") : NULL;
		CUresult (*push)(CUcontext) = h ? (CUresult (*)(CUcontext))dlsym(h, "cuCtxPushCurrent_v2") : NULL;
		CUresult (*pop)(CUcontext *) = h ? (CUresult (*)(CUcontext *))dlsym(h, "cuCtxPopCurrent_v2") : NULL;
		CUcontext (*user)(void) = h ? (CUcontext (*)(void))dlsym(h, "fake_cuda_user_ctx") : NULL;
		if (ex && push && pop && user) {
			CUcontext c;
			CUlaunchAttribute at;
			memset(&at, 0, sizeof at);
			at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
			at.value.clusterDim.x = 2, at.value.clusterDim.y = 1, at.value.clusterDim.z = 1;
			CUlaunchConfig cfg = {4, 1, 1, 128, 1, 1, 0, NULL, &at, 1};
			push(user());
			CHECK(ex(&cfg, NULL, NULL, NULL) == 0);
			CHECK(lastc()[0] == 2 && last()[0] == 4);
			cfg.gridDimX = 5;
			CHECK(ex(&cfg, NULL, NULL, NULL) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
			cfg.gridDimX = 16, at.value.clusterDim.x = 8;
			CHECK(ex(&cfg, NULL, NULL, NULL) == 0);
			at.value.clusterDim.x = 16;
			CHECK(ex(&cfg, NULL, NULL, NULL) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
			cfg.numAttrs = 0;
			CHECK(ex(&cfg, NULL, NULL, NULL) == 0);
			CHECK(lastc()[0] == 1);
			pop(&c);
		}
		CHECK(!has_ex || (ex && push && pop && user));
	}
	/* a PTX that fails to JIT: the error carries the driver's log */
	{
		char d2[] = "/tmp/precc_test_plan_fXXXXXX", src[4200], dst[4200];
		const char *names[] = {"manifest.json", "k_00000000000000a1.sm_90a.ptx",
		                       "k_00000000000000a2.sm_90a.ptx", "k_00000000000000b1.sm_90a.ptx",
		                       "k_00000000000000b2.sm_90a.ptx", "k_00000000000000c1.sm_90a.ptx",
		                       "k_00000000000000c2.sm_90a.ptx", "k_00000000000000d1.sm_90a.ptx"};
		mkdtemp(d2);
		setenv("FAKE_CUDA_MANIFEST", d2, 1);
		for (int i = 0; i < 8; i++) {
			char *t;
			snprintf(src, sizeof src, "%s/%s", dir, names[i]);
			snprintf(dst, sizeof dst, "%s/%s", d2, names[i]);
			t = slurp(src);
			spit(dst, i == 3 ? "a bad kernel" : t);
			free(t);
		}
		CHECK(precc_rt_open(d2, PRECC_BACKEND_CUDA, why, sizeof why) == NULL);
		CHECK(contains(why, "cuda: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed) while loading kernel 'k_00000000000000b1' from '"));
		CHECK(contains(why, "\nptxas application ptx input, line 3; error   : fake syntax error"));
		/* and a device this manifest has no target for */
		snprintf(dst, sizeof dst, "%s/manifest.json", d2);
		{
			char *t = slurp(dst), *t2 = replace(t, "\"targets\": [\n    \"sm_90a\"", "\"targets\": [\n    \"sm_100a\"");
			spit(dst, t2);
			free(t);
			free(t2);
		}
		CHECK(precc_rt_open(d2, PRECC_BACKEND_CUDA, why, sizeof why) == NULL);
		CHECK(contains(why, "error: no target for this device (sm_90): the artifacts are for sm_100a; rebuild with --target sm_90a"));
		for (int i = 0; i < 8; i++) {
			snprintf(dst, sizeof dst, "%s/%s", d2, names[i]);
			unlink(dst);
		}
		rmdir(d2);
	}
	/* the library checks each file it loads against the size and FNV-1a 64
	 * the manifest records (issue 30): Inputs/targets' sm_90a cubin with
	 * its record loads; one bit flipped, the load fails naming the file;
	 * a record of another size likewise */
	{
		char d2[] = "/tmp/precc_test_plan_hXXXXXX", src[4200], dst[4200], rec[300];
		const char *names[] = {"manifest.json", "k_00000000000090a0.sm_90a.ptx",
		                       "k_00000000000090a0.sm_90a.cubin", "k_0000000000008900.sm_89.ptx",
		                       "k_0000000000008900.sm_89.cubin"};
		mkdtemp(d2);
		setenv("FAKE_CUDA_MANIFEST", d2, 1);
		for (int i = 0; i < 5; i++) {
			snprintf(src, sizeof src, "%s/targets/%s", inputs, names[i]);
			snprintf(dst, sizeof dst, "%s/%s", d2, names[i]);
			char *t = slurp(src);
			if (i == 0) {
				char cub[4200];
				snprintf(cub, sizeof cub, "%s/targets/%s", inputs, names[2]);
				char *c = slurp(cub);
				snprintf(rec, sizeof rec, "\"cubin\": \"%s\", \"cubin_bytes\": %zu, "
				         "\"cubin_fnv1a64\": \"%016llx\"", names[2], strlen(c),
				         (unsigned long long)ir_hash_bytes(0xcbf29ce484222325ULL, c, strlen(c)));
				char *t2 = replace(t, "\"cubin\": \"k_00000000000090a0.sm_90a.cubin\"", rec);
				CHECK(t2 != NULL);
				free(t);
				free(c);
				t = t2;
			}
			spit(dst, t);
			free(t);
		}
		precc_rt *ok = precc_rt_open(d2, PRECC_BACKEND_CUDA, why, sizeof why);
		CHECK(ok != NULL);
		if (ok) {
			precc_kernel_info ki;
			precc_rt_kernel_info(ok, 0, &ki);
			CHECK_STR(ki.loaded, "k_00000000000090a0.sm_90a.cubin");
		} else
			fprintf(stderr, "%s\n", why);
		precc_rt_close(ok);
		snprintf(dst, sizeof dst, "%s/%s", d2, names[2]);
		{
			char *c = slurp(dst);
			c[5] ^= 0x10;
			spit(dst, c);
			free(c);
		}
		CHECK(precc_rt_open(d2, PRECC_BACKEND_CUDA, why, sizeof why) == NULL);
		CHECK(contains(why, "kernel 'k_00000000000090a0': '"));
		CHECK(contains(why, "/k_00000000000090a0.sm_90a.cubin' is not the file precc build wrote: "));
		CHECK(contains(why, "(truncated or changed since precc build)"));
		for (int i = 0; i < 5; i++) {
			snprintf(dst, sizeof dst, "%s/%s", d2, names[i]);
			unlink(dst);
		}
		rmdir(d2);
	}
	/* every launch above was checked against its manifest (but the
	 * direct ones of a NULL function); only the three refused on purpose
	 * failed */
	{
		long (*nviol)(void) = h ? (long (*)(void))dlsym(h, "fake_cuda_violations") : NULL;
		long (*nlaunch)(void) = h ? (long (*)(void))dlsym(h, "fake_cuda_launches") : NULL;
		long (*nchecked)(void) = h ? (long (*)(void))dlsym(h, "fake_cuda_checked") : NULL;
		CHECK(nviol && nlaunch && nchecked);
		if (nviol && nlaunch && nchecked) {
			printf("fake: %ld launches, %ld checked against the manifest, %ld refused\n",
			       nlaunch(), nchecked(), nviol());
			CHECK(nviol() == 3 && nchecked() >= 20);
		}
	}
	unsetenv("FAKE_CUDA_MANIFEST");
}
#endif

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: test_plan cpu|manifest|fake INPUTS [LIB]\n");
		return 2;
	}
	if (strcmp(argv[1], "cpu") == 0)
		test_cpu(argv[2]);
	else if (strcmp(argv[1], "manifest") == 0)
		test_manifest(argv[2]);
#ifdef PRECC_HAVE_CUDA_H
	else if (strcmp(argv[1], "fake") == 0 && argc > 3)
		test_fake(argv[2], argv[3]);
#endif
	else {
		fprintf(stderr, "test_plan: unknown mode '%s'\n", argv[1]);
		return 2;
	}
	return finish(argv[1]);
}
