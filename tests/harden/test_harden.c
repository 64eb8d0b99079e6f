/*
 * test_harden.c — unit tests for issue 14's readers, through their own
 * entry points: the verifier's message with a long module name, the JSON
 * reader's UTF-8 and duplicate-key paths (and that a 1 MB object is not
 * quadratic), the IR parser on a 2 MB function, the state file's open and
 * size checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ir.h"
#include "rt.h"

static int fails, checks;

#define EXPECT(c, ...) do { checks++; if (!(c)) { fails++; \
	fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static double
secs(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* ---- verifier: a module name over 1 KiB ------------------------------- */

static void
test_verify_long_name(void)
{
	const char *text = "func @f {\n  %x = param in : bf16[M,256]\n"
	                   "  %y = cast %x : bf16[M,128]\n  ret %y\n}\n";
	char name[3000], err[4096];

	memset(name, 'n', sizeof name - 1);
	name[sizeof name - 1] = 0;
	Module *m = ir_parse(text, name, err, sizeof err);
	EXPECT(m, "parse: %s", err);
	if (!m)
		return;
	EXPECT(ir_verify(m, err, sizeof err) > 0, "verifier found nothing");
	EXPECT(strstr(err, "nnnn:3:3: ") && strstr(err, "result must be"), "message: %.200s", err);
	ir_module_free(m);
}

/* ---- JSON ------------------------------------------------------------ */

static int
json_ok(const char *text, char *err, size_t errsz)
{
	json *j = json_parse(text, strlen(text), "t.json", err, errsz);
	json_free(j);
	return j != NULL;
}

static void
test_json_utf8(void)
{
	static const char *const good[] = {
		"{\"a\": \"\xc3\xa9\"}",                 /* U+00E9 */
		"{\"a\": \"\xe2\x82\xac\"}",             /* U+20AC */
		"{\"a\": \"\xef\xbf\xbf\"}",             /* U+FFFF */
		"{\"a\": \"\xf0\x9f\x98\x80\"}",         /* U+1F600 */
		"{\"a\": \"\xf4\x8f\xbf\xbf\"}",         /* U+10FFFF */
	};
	static const struct { const char *text, *msg; } bad[] = {
		{"{\"a\": \"\xc0\x80\"}", "t.json:1:8: error: invalid UTF-8 (byte 0xc0) in a string"},
		{"{\"a\": \"\xc1\xbf\"}", "invalid UTF-8 (byte 0xc1)"},
		{"{\"a\": \"\xe0\x80\x80\"}", "invalid UTF-8 (byte 0xe0)"},    /* overlong NUL */
		{"{\"a\": \"\xf0\x80\x80\x80\"}", "invalid UTF-8 (byte 0xf0)"},
		{"{\"a\": \"\xed\xa0\x80\"}", "invalid UTF-8 (byte 0xed)"},    /* surrogate */
		{"{\"a\": \"\xf4\x90\x80\x80\"}", "invalid UTF-8 (byte 0xf4)"}, /* > U+10FFFF */
		{"{\"a\": \"\xf5\x80\x80\x80\"}", "invalid UTF-8 (byte 0xf5)"},
		{"{\"a\": \"\x80\"}", "invalid UTF-8 (byte 0x80)"},
		{"{\"a\": \"\xe2\x82\"}", "invalid UTF-8 (byte 0xe2)"},        /* cut short */
		{"{\"\xc0\x80\": 1}", "invalid UTF-8 (byte 0xc0)"},            /* in a key */
	};
	char err[512];

	for (size_t i = 0; i < sizeof good / sizeof *good; i++)
		EXPECT(json_ok(good[i], err, sizeof err), "good[%zu] refused: %s", i, err);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err[0] = 0;
		EXPECT(!json_ok(bad[i].text, err, sizeof err) && strstr(err, bad[i].msg),
		       "bad[%zu]: got '%s', want '%s'", i, err, bad[i].msg);
	}
}

static void
test_json_keys(void)
{
	enum { N = 80000 };            /* ~1 MB: 27 s with the old linear check */
	size_t cap = (size_t)N * 16 + 16, n = 0;
	char *t = malloc(cap), err[512];

	n += (size_t)sprintf(t + n, "{");
	for (int i = 0; i < N; i++)
		n += (size_t)sprintf(t + n, "%s\"k%d\":%d", i ? "," : "", i, i);
	sprintf(t + n, "}");
	double t0 = secs();
	json *j = json_parse(t, strlen(t), "big.json", err, sizeof err);
	double dt = secs() - t0;
	EXPECT(j && j->n == N, "1 MB object: %s", j ? "wrong count" : err);
	EXPECT(dt < 5.0, "1 MB object took %.1f s", dt);
	printf("json: %zu-byte object of %d keys parsed in %.3f s\n", n, N, dt);
	json_free(j);
	/* a duplicate far apart is still found, at the second key */
	sprintf(t + n - 0, ",\n  \"k7\":1}");
	j = json_parse(t, strlen(t), "big.json", err, sizeof err);
	EXPECT(!j && strstr(err, "big.json:2:3: error: duplicate key 'k7'"), "dup: %s", err);
	json_free(j);
	free(t);
}

/* ---- IR parser: a 2 MB function ---------------------------------------- */

static void
test_ir_big(void)
{
	enum { N = 60000 };
	size_t cap = (size_t)N * 80 + 256, n = 0;
	char *t = malloc(cap), err[512];

	n += (size_t)sprintf(t + n, "func @f {\n");
	for (int i = 0; i < N; i++)
		n += (size_t)sprintf(t + n, "  %%value_number_%d = param in : bf16[M,256]\n", i);
	n += (size_t)sprintf(t + n, "  %%y = cast %%value_number_%d : bf16[M,256]\n  ret %%y\n}\n", N / 2);
	double t0 = secs();
	Module *m = ir_parse(t, "big.ir", err, sizeof err);
	double dt = secs() - t0;
	EXPECT(m, "big.ir: %s", err);
	EXPECT(dt < 5.0, "a %zu-byte .ir took %.1f s to parse", n, dt);
	printf("ir: %zu-byte function of %d values parsed in %.3f s\n", n, N, dt);
	if (m) {
		const Func *f = m->fn[0];
		const Ins *c = &f->ins[f->nins - 2];
		EXPECT(!strcmp(f->val[c->arg[0]].name, "value_number_30000"), "operand resolved to %s",
		       f->val[c->arg[0]].name);
		ir_module_free(m);
	}
	free(t);
}

/* ---- the state file ---------------------------------------------------- */

static void
test_state_files(void)
{
	char dir[] = "/tmp/precc_harden_XXXXXX", p[256], q[256];
	const char *names[] = {"a"};
	uint32_t len[] = {4};

	if (!mkdtemp(dir)) {
		EXPECT(0, "mkdtemp");
		return;
	}
	precc_state *st = precc_state_new(1, 2, 1, names, len);
	EXPECT(st, "state_new: %s", precc_rt_last_error());
	if (!st)
		return;
	snprintf(p, sizeof p, "%s/fifo.pst", dir);
	EXPECT(mkfifo(p, 0600) == 0, "mkfifo");
	EXPECT(precc_state_load(st, p) == -1 && strstr(precc_rt_last_error(), "not a regular file"),
	       "fifo: %s", precc_rt_last_error());
	unlink(p);
	snprintf(p, sizeof p, "%s/real.pst", dir);
	snprintf(q, sizeof q, "%s/link.pst", dir);
	EXPECT(precc_state_save(st, p) == 0, "save: %s", precc_rt_last_error());
	EXPECT(precc_state_load(st, p) == 0, "load: %s", precc_rt_last_error());
	EXPECT(symlink(p, q) == 0, "symlink");
	EXPECT(precc_state_load(st, q) == -1 && strstr(precc_rt_last_error(), "symbolic link"),
	       "link: %s", precc_rt_last_error());
	unlink(q);
	/* a file far larger than the state it is loaded into is not read */
	FILE *f = fopen(p, "ab");
	EXPECT(f && ftruncate(fileno(f), 64 << 20) == 0, "grow");
	if (f)
		fclose(f);
	EXPECT(precc_state_load(st, p) == -1 && strstr(precc_rt_last_error(), "bytes is more than"),
	       "big: %s", precc_rt_last_error());
	unlink(p);
	rmdir(dir);
	precc_state_free(st);
	/* histories past the cap are refused before any allocation */
	uint32_t huge[] = {1u << 28};
	EXPECT(!precc_state_new(1, 2, 1, names, huge) &&
	       strstr(precc_rt_last_error(), "history length 268435456 is more than 16777216"),
	       "huge: %s", precc_rt_last_error());
}

int
main(void)
{
	test_verify_long_name();
	test_json_utf8();
	test_json_keys();
	test_ir_big();
	test_state_files();
	printf("test_harden: %d checks, %d failed\n", checks, fails);
	return fails != 0;
}
