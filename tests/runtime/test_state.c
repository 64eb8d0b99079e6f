/*
 * test_state.c — the scaling-state file: a bit-exact round trip, then
 * every way a file can be wrong (each byte flipped, truncation at several
 * points, bad magic, a newer format, another recipe, model or tensor
 * list), each with its exact message and the state left untouched.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "precc/precc_rt.h"
#include "rtcheck.h"
#include "precc/version.h"

#define RECIPE 0x1122334455667788u
#define MODEL 0x99aabbccddeeff00u

static const char *names[] = {"layers.0.attn.qkv.input",
                              "layers.0.attn.qkv.weight", "lm_head.grad_output"};
static const uint32_t lens[] = {16, 16, 1};
static char dir[] = "/tmp/precc_state_XXXXXX";

static uint64_t fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325u;
	while (n--)
		h = (h ^ *p++) * 0x100000001b3u;
	return h;
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> 8 * i);
}

static void reseal(unsigned char *buf, size_t n)
{
	put64(buf + n - 8, fnv(buf, n - 8));
}

static precc_state *fresh(uint64_t recipe, uint64_t model, size_t n,
                          const char *const *nm, const uint32_t *ln)
{
	precc_state *st = precc_state_new(recipe, model, n, nm, ln);
	if (!st) {
		fprintf(stderr, "precc_state_new: %s\n", precc_rt_last_error());
		exit(1);
	}
	return st;
}

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

/* Fills every value of st from seed, with edge values mixed in. */
static void fill(precc_state *st, unsigned seed)
{
	static const float edge[] = {0.0f, -0.0f, INFINITY, 448.0f, 1e-40f,
	                             57344.0f, 3.0e38f};
	precc_state_tensor t;

	for (size_t i = 0; i < precc_state_count(st); i++) {
		precc_state_tensor_at(st, i, &t);
		for (uint32_t j = 0; j < t.history_len; j++)
			t.amax_history[j] = (j % 3 == 0) ? edge[(j + seed) % 7]
			                                 : (float)(seed * 31 + j) / 7.0f;
		*t.pos = (seed + (uint32_t)i) % t.history_len;
		*t.scale = 448.0f / (float)(seed + i + 1);
		*t.scale_inv = 1.0f / *t.scale;
	}
	precc_state_tensor_at(st, 0, &t);
	t.amax_history[1] = NAN;
}

/* 1 when a and b hold the same values, bit for bit. */
static int same(precc_state *a, precc_state *b)
{
	precc_state_tensor x, y;

	if (precc_state_sr_counter(a) != precc_state_sr_counter(b))
		return 0;
	for (size_t i = 0; i < precc_state_count(a); i++) {
		precc_state_tensor_at(a, i, &x);
		precc_state_tensor_at(b, i, &y);
		if (*x.pos != *y.pos || bits(*x.scale) != bits(*y.scale) ||
		    bits(*x.scale_inv) != bits(*y.scale_inv))
			return 0;
		for (uint32_t j = 0; j < x.history_len; j++)
			if (bits(x.amax_history[j]) != bits(y.amax_history[j]))
				return 0;
	}
	return 1;
}

static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *b;
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	rewind(f);
	b = malloc(*n);
	if (fread(b, 1, *n, f) != *n)
		abort();
	fclose(f);
	return b;
}

static void spit(const char *path, const unsigned char *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (n && fwrite(b, 1, n, f) != n)
		abort();
	fclose(f);
}

/* Loading path into a state filled with seed 7 must fail with want and
 * leave the state as it was. */
static void expect_fail(const char *path, const char *want, int line)
{
	precc_state *st = fresh(RECIPE, MODEL, 3, names, lens);
	precc_state *ref = fresh(RECIPE, MODEL, 3, names, lens);
	fill(st, 7);
	fill(ref, 7);
	if (precc_state_load(st, path) == 0) {
		fprintf(stderr, "line %d: loading '%s' succeeded\n", line, path);
		failures++;
	} else if (strcmp(precc_rt_last_error(), want) != 0) {
		fprintf(stderr, "line %d: wrong message\n  got:  %s\n  want: %s\n",
		        line, precc_rt_last_error(), want);
		failures++;
	}
	if (!same(st, ref)) {
		fprintf(stderr, "line %d: a failed load changed the state\n", line);
		failures++;
	}
	precc_state_free(st);
	precc_state_free(ref);
}

static char *msg(const char *fmt, const char *path)
{
	static char b[4096];
	snprintf(b, sizeof b, fmt, path);
	return b;
}

int main(void)
{
	char path[256], bad[256], want[1024];
	unsigned char *file, *copy;
	size_t size;
	precc_state *a, *b;
	precc_state_tensor t;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof path, "%s/scaling.pst", dir);
	snprintf(bad, sizeof bad, "%s/bad.pst", dir);

	/* creation */
	a = fresh(RECIPE, MODEL, 3, names, lens);
	CHECK(precc_state_count(a) == 3);
	CHECK(precc_state_find(a, "lm_head.grad_output") == 2);
	CHECK(precc_state_find(a, "nope") == -1);
	CHECK(precc_state_tensor_at(a, 1, &t) == 0);
	CHECK_STR(t.name, "layers.0.attn.qkv.weight");
	CHECK(t.history_len == 16 && *t.pos == 0 && *t.scale == 1.0f &&
	      *t.scale_inv == 1.0f && t.amax_history[15] == 0.0f);
	CHECK(precc_state_tensor_at(a, 3, &t) == -1);
	CHECK_STR(precc_rt_last_error(),
	          "state: tensor 3 is out of range (the state has 3)");
	{
		const char *dup[] = {"x", "y", "x"};
		const uint32_t l3[] = {1, 1, 1}, l0[] = {1, 0, 1};
		const char *empty[] = {"x", "", "z"};
		CHECK(!precc_state_new(1, 2, 3, dup, l3));
		CHECK_STR(precc_rt_last_error(), "state: tensor 'x' is listed twice");
		CHECK(!precc_state_new(1, 2, 3, names, l0));
		CHECK_STR(precc_rt_last_error(), "state: tensor "
		          "'layers.0.attn.qkv.weight': history length 0 (it must be "
		          "at least 1)");
		CHECK(!precc_state_new(1, 2, 3, empty, l3));
		CHECK_STR(precc_rt_last_error(), "state: tensor 1: the name must be "
		          "1 to 4096 bytes (it is 0)");
	}

	/* round trip, bit for bit, through a temp file renamed into place;
	 * the SR counter too (a new state's is 0) */
	fill(a, 3);
	CHECK(precc_state_sr_counter(a) == 0);
	precc_state_set_sr_counter(a, 0x8000000000000123u);
	CHECK(precc_state_save(a, path) == 0);
	b = fresh(RECIPE, MODEL, 3, names, lens);
	CHECK(precc_state_load(b, path) == 0);
	CHECK(precc_state_sr_counter(b) == 0x8000000000000123u);
	CHECK(same(a, b));
	precc_state_free(b);
	{
		DIR *d = opendir(dir);
		struct dirent *e;
		int n = 0;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.') {
				n++;
				CHECK(strcmp(e->d_name, "scaling.pst") == 0);
			}
		closedir(d);
		CHECK(n == 1);
	}
	fill(a, 5);   /* saving over an existing file replaces it */
	CHECK(precc_state_save(a, path) == 0);
	b = fresh(RECIPE, MODEL, 3, names, lens);
	CHECK(precc_state_load(b, path) == 0 && same(a, b));
	precc_state_free(b);
	{
		precc_state *z = fresh(RECIPE, MODEL, 0, NULL, NULL);
		char zp[300];
		snprintf(zp, sizeof zp, "%s/empty.pst", dir);
		CHECK(precc_state_save(z, zp) == 0);
		CHECK(precc_state_load(z, zp) == 0);
		unlink(zp);
		precc_state_free(z);
	}

	file = slurp(path, &size);
	/* header 56 + table (6+23, 6+24, 6+19) + data (12+64, 12+64, 12+4)
	 * + SR counter 8 + checksum 8 */
	CHECK(size == 56 + 84 + 168 + 8 + 8);
	CHECK(memcmp(file, "PRECCSST", 8) == 0);
	copy = malloc(size);

	/* a format 1 file (no SR counter: the data, then the checksum) still
	 * loads, with counter 0 */
	{
		unsigned char *v1 = malloc(size - 8);
		char v1p[300];
		precc_state *c = fresh(RECIPE, MODEL, 3, names, lens);
		memcpy(v1, file, size - 16);
		v1[8] = 1;
		put64(v1 + 12, size - 8);
		reseal(v1, size - 8);
		snprintf(v1p, sizeof v1p, "%s/v1.pst", dir);
		spit(v1p, v1, size - 8);
		precc_state_set_sr_counter(c, 7);
		CHECK(precc_state_load(c, v1p) == 0);
		CHECK(precc_state_sr_counter(c) == 0);
		precc_state_set_sr_counter(c, precc_state_sr_counter(a));
		CHECK(same(a, c));
		/* and a format 2 header on format 1 bytes is corrupt */
		v1[8] = 2;
		reseal(v1, size - 8);
		spit(v1p, v1, size - 8);
		CHECK(precc_state_load(c, v1p) == -1);
		CHECK(strstr(precc_rt_last_error(), "corrupt: the tensor table does not match the file size") != NULL);
		unlink(v1p);
		precc_state_free(c);
		free(v1);
	}

	/* every byte flipped: each region's own error, never a load */
	for (size_t i = 0; i < size; i++) {
		memcpy(copy, file, size);
		copy[i] ^= 0x01;
		spit(bad, copy, size);
		if (i < 8)
			snprintf(want, sizeof want, "state: '%s': not a precc "
			         "scaling-state file (bad magic)", bad);
		else if (i < 12)
			snprintf(want, sizeof want, "state: '%s': format version %u is "
			         "newer than this precc (%s) reads (up to 2)", bad,
			         2u ^ 1u << 8 * (i - 8), PRECC_VERSION);
		else if (i < 20) {
			uint64_t declared = size ^ (uint64_t)1 << 8 * (i - 12);
			if (declared > size)
				snprintf(want, sizeof want, "state: '%s': truncated (%zu "
				         "bytes, the header says %llu)", bad, size,
				         (unsigned long long)declared);
			else
				snprintf(want, sizeof want, "state: '%s': %zu bytes, the "
				         "header says %llu (trailing data or a corrupt "
				         "header)", bad, size, (unsigned long long)declared);
		} else {
			uint64_t stored = 0;
			for (int k = 0; k < 8; k++)
				stored |= (uint64_t)copy[size - 8 + k] << 8 * k;
			snprintf(want, sizeof want, "state: '%s': checksum mismatch "
			         "(stored %016llx, computed %016llx): the file is corrupt",
			         bad, (unsigned long long)stored,
			         (unsigned long long)fnv(copy, size - 8));
		}
		expect_fail(bad, want, __LINE__);
	}

	/* truncated at several points */
	{
		size_t cut[] = {0, 5, 8, 11, 12, 40, 63, 64, 100, size - 8, size - 1};
		for (size_t k = 0; k < sizeof cut / sizeof *cut; k++) {
			spit(bad, file, cut[k]);
			if (cut[k] < 64)
				snprintf(want, sizeof want, "state: '%s': truncated (%zu "
				         "bytes; the smallest state file is 64)", bad, cut[k]);
			else
				snprintf(want, sizeof want, "state: '%s': truncated (%zu "
				         "bytes, the header says %zu)", bad, cut[k], size);
			expect_fail(bad, want, __LINE__);
		}
	}

	/* wrong magic: another format, and a short text file */
	memcpy(copy, file, size);
	memcpy(copy, "GGUF\3\0\0\0", 8);
	spit(bad, copy, size);
	expect_fail(bad, msg("state: '%s': not a precc scaling-state file (bad "
	                     "magic)", bad), __LINE__);
	spit(bad, (const unsigned char *)"hello", 5);
	expect_fail(bad, msg("state: '%s': not a precc scaling-state file (bad "
	                     "magic)", bad), __LINE__);

	/* a newer format version, even with a valid checksum */
	memcpy(copy, file, size);
	copy[8] = 3;
	reseal(copy, size);
	spit(bad, copy, size);
	snprintf(want, sizeof want, "state: '%s': format version 3 is newer than "
	         "this precc (%s) reads (up to 2)", bad, PRECC_VERSION);
	expect_fail(bad, want, __LINE__);
	/* version 0, with a valid checksum */
	memcpy(copy, file, size);
	copy[8] = 0;
	reseal(copy, size);
	spit(bad, copy, size);
	snprintf(want, sizeof want, "state: '%s': format version 0 is not valid "
	         "(corrupt header)", bad);
	expect_fail(bad, want, __LINE__);

	/* a consistent file with an impossible position */
	memcpy(copy, file, size);
	copy[56 + 84] = 16;          /* tensor 0's pos, history 16 */
	copy[56 + 84 + 1] = 0;
	reseal(copy, size);
	spit(bad, copy, size);
	expect_fail(bad, msg("state: '%s': corrupt: tensor "
	                     "'layers.0.attn.qkv.input' is at position 16 of a "
	                     "history of 16", bad), __LINE__);

	/* missing file */
	snprintf(want, sizeof want, "state: '%s/none.pst': cannot open: No such "
	         "file or directory", dir);
	{
		char none[300];
		snprintf(none, sizeof none, "%s/none.pst", dir);
		expect_fail(none, want, __LINE__);
	}

	/* mismatches: other recipe, other model, other tensor lists */
	{
		precc_state *o = fresh(RECIPE + 1, MODEL, 3, names, lens);
		CHECK(precc_state_load(o, path) == -1);
		snprintf(want, sizeof want, "state: '%s': recipe mismatch: the file "
		         "is for recipe 1122334455667788 (written by precc %s), this "
		         "state for 1122334455667789", path, PRECC_VERSION);
		CHECK_STR(precc_rt_last_error(), want);
		precc_state_free(o);

		o = fresh(RECIPE, 42, 3, names, lens);
		CHECK(precc_state_load(o, path) == -1);
		snprintf(want, sizeof want, "state: '%s': model mismatch: the file "
		         "is for model 99aabbccddeeff00 (written by precc %s), this "
		         "state for 000000000000002a", path, PRECC_VERSION);
		CHECK_STR(precc_rt_last_error(), want);
		precc_state_free(o);

		o = fresh(RECIPE, MODEL, 2, names, lens);
		CHECK(precc_state_load(o, path) == -1);
		snprintf(want, sizeof want, "state: '%s': tensor list mismatch: the "
		         "file has 3 tensors, this state 2", path);
		CHECK_STR(precc_rt_last_error(), want);
		precc_state_free(o);

		const char *renamed[] = {names[0], "layers.0.attn.proj.weight",
		                         names[2]};
		o = fresh(RECIPE, MODEL, 3, renamed, lens);
		CHECK(precc_state_load(o, path) == -1);
		snprintf(want, sizeof want, "state: '%s': tensor list mismatch: "
		         "tensor 1 is 'layers.0.attn.qkv.weight' (history 16) in the "
		         "file, 'layers.0.attn.proj.weight' (history 16) in this "
		         "state", path);
		CHECK_STR(precc_rt_last_error(), want);
		precc_state_free(o);

		const uint32_t longer[] = {16, 16, 4};
		o = fresh(RECIPE, MODEL, 3, names, longer);
		CHECK(precc_state_load(o, path) == -1);
		snprintf(want, sizeof want, "state: '%s': tensor list mismatch: "
		         "tensor 2 is 'lm_head.grad_output' (history 1) in the file, "
		         "'lm_head.grad_output' (history 4) in this state", path);
		CHECK_STR(precc_rt_last_error(), want);
		precc_state_free(o);

		const char *swapped[] = {names[1], names[0], names[2]};
		o = fresh(RECIPE, MODEL, 3, swapped, lens);
		CHECK(precc_state_load(o, path) == -1);
		snprintf(want, sizeof want, "state: '%s': tensor list mismatch: "
		         "tensor 0 is 'layers.0.attn.qkv.input' (history 16) in the "
		         "file, 'layers.0.attn.qkv.weight' (history 16) in this "
		         "state", path);
		CHECK_STR(precc_rt_last_error(), want);
		precc_state_free(o);
	}

	/* an unwritable place leaves nothing behind */
	CHECK(precc_state_save(a, "/nonexistent-dir/s.pst") == -1);
	CHECK(strncmp(precc_rt_last_error(), "state: '/nonexistent-dir/s.pst': "
	              "cannot create the temporary file '/nonexistent-dir/s.pst"
	              ".tmp.", 68) == 0);
	CHECK(strstr(precc_rt_last_error(), "': No such file or directory"));

	free(file);
	free(copy);
	precc_state_free(a);
	unlink(bad);
	unlink(path);
	rmdir(dir);
	return finish("test_state");
}
