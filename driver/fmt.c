/*
 * fmt.c — `precc fmt`, a format calculator for people: encode values into
 * a format and show the code, the value it decodes to and the relative
 * error; or list every code of a format (--table).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "recipe.h"

static void
help(FILE *f)
{
	fprintf(f,
	    "usage: precc fmt FORMAT [OPTIONS] [VALUE...]\n"
	    "       precc fmt FORMAT --table\n\n"
	    "Encode each VALUE (or, when none is given, each whitespace-separated\n"
	    "value read from stdin) into FORMAT and print one line per value:\n\n"
	    "  CODE  DECODED  RELERR\n\n"
	    "CODE is the encoding in hex (0x7e); DECODED the value that code stands\n"
	    "for, printed with %%.9g so that it reads back exactly through strtof\n"
	    "(inf, -inf and nan for the special codes); RELERR the relative error\n"
	    "(DECODED - x) / x with %%.3e, where x is the value read as fp32: positive\n"
	    "when |DECODED| > |x| (0 when both are equal, inf when x is 0 and DECODED\n"
	    "is not, '-' when x or DECODED is inf or NaN and they differ).\n"
	    "VALUE is anything strtof reads: decimal, hex float (0x1p-9), inf, nan.\n\n"
	    "formats: fp32 tf32 fp16 bf16 e4m3 e5m2 e8m0 e2m1 e3m2 e2m3\n\n"
	    "options:\n"
	    "  --round MODE   rne (ties to even), rz (toward zero), ru (toward +inf),\n"
	    "                 rna (ties away), sr (stochastic); the default is what the\n"
	    "                 kernels use: rne, but rna for tf32 and ru for e8m0\n"
	    "  --seed N       sr only: the random bits for the i-th value (from 0) are\n"
	    "                 the low 32 bits of splitmix64(N + i); default N = 0\n"
	    "  --no-saturate  overflow to inf (NaN for e4m3, 0xff for e8m0) instead of\n"
	    "                 clamping to max; the default saturates for fp8/fp6/fp4\n"
	    "                 and e8m0 (cvt .satfinite), not for fp16/bf16/tf32\n"
	    "  --saturate     clamp overflow and inf to +-max (.satfinite) for any format\n"
	    "  --table        list every code of FORMAT (at most 16 bits) and its value\n"
	    "  --help         this text\n\n"
	    "exit status: 0 success, 1 bad value or unknown format, 2 bad usage\n");
}

static uint64_t
splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void
print_value(float v)
{
	if (isnan(v))
		printf("nan");
	else if (isinf(v))
		printf(v < 0 ? "-inf" : "inf");
	else
		printf("%.9g", v);
}

static void
print_code(const precc_format_info *fi, uint32_t code)
{
	printf("0x%0*x", (fi->bits + 3) / 4, (unsigned)code);
}

typedef struct Opts {
	precc_format f;
	precc_round round;
	bool saturate;
	uint64_t seed;
} Opts;

static void
show(const Opts *o, float x, uint64_t index)
{
	const precc_format_info *fi = precc_format_get(o->f);
	uint32_t rbits = (uint32_t)splitmix64(o->seed + index);
	uint32_t code = precc_encode(o->f, x, o->round, o->saturate, rbits);
	float q = precc_decode(o->f, code);

	print_code(fi, code);
	printf("  ");
	print_value(q);
	printf("  ");
	if ((isnan(x) && isnan(q)) || (double)q == (double)x)
		printf("0\n");
	else if (!isfinite(x) || !isfinite(q))
		printf("-\n");
	else if (x == 0)
		printf("inf\n");
	else
		printf("%.3e\n", ((double)q - (double)x) / (double)x);
}

/* One value token: 0 on success, 1 (after a message) if not a number. */
static int
value(const Opts *o, const char *tok, uint64_t index)
{
	char *end;

	errno = 0;
	float x = strtof(tok, &end);
	if (end == tok || *end) {
		fprintf(stderr, "precc fmt: error: invalid value '%s' (expected a number, e.g. 1.5, "
		                "-3e-4, 0x1p-9, inf, nan)\n", tok);
		return 1;
	}
	show(o, x, index);
	return 0;
}

static int
from_stdin(const Opts *o)
{
	char buf[256];
	int c, n = 0, bad = 0;
	uint64_t index = 0;

	do {
		c = getchar();
		if (c == EOF || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
			if (n) {
				buf[n < (int)sizeof buf ? n : (int)sizeof buf - 1] = 0;
				if (n >= (int)sizeof buf) {
					fprintf(stderr, "precc fmt: error: value '%.20s...' is too long\n", buf);
					bad = 1;
				} else
					bad |= value(o, buf, index);
				index++;
				n = 0;
			}
		} else {
			if (n < (int)sizeof buf)
				buf[n] = (char)c;
			n++;
		}
	} while (c != EOF);
	return bad;
}

static int
table(const Opts *o)
{
	const precc_format_info *fi = precc_format_get(o->f);

	for (uint32_t c = 0; c < (1u << fi->bits); c++) {
		print_code(fi, c);
		printf("  ");
		print_value(precc_decode(o->f, c));
		printf("\n");
	}
	return 0;
}

int
cmd_fmt(int argc, char **argv)
{
	const char *fname = NULL, *round = NULL;
	bool want_table = false, no_sat = false, sat = false, seeded = false;
	char **vals = xcalloc((size_t)argc, sizeof *vals);
	int nvals = 0, rc;
	Opts o = {0};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			while (++i < argc)
				vals[nvals++] = argv[i];
			break;
		}
		if (strncmp(a, "--", 2)) {
			if (!fname)
				fname = a;
			else
				vals[nvals++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--help")) {
			help(stdout);
			free(vals);
			return 0;
		} else if (!strcmp(a, "--table")) {
			want_table = true;
		} else if (!strcmp(a, "--no-saturate")) {
			no_sat = true;
		} else if (!strcmp(a, "--saturate")) {
			sat = true;
		} else if (!strcmp(a, "--round") || !strncmp(a, "--round=", 8)) {
			round = a[7] == '=' ? a + 8 : i + 1 < argc ? argv[++i] : NULL;
			if (!round) {
				free(vals);
				return usage_error("fmt", "--round needs a mode (rne, rz, ru, rna, sr)");
			}
		} else if (!strcmp(a, "--seed") || !strncmp(a, "--seed=", 7)) {
			const char *s = a[6] == '=' ? a + 7 : i + 1 < argc ? argv[++i] : NULL;
			char *end;
			if (!s) {
				free(vals);
				return usage_error("fmt", "--seed needs a number");
			}
			errno = 0;
			o.seed = strtoull(s, &end, 0);
			if (end == s || *end || errno) {
				free(vals);
				return usage_error("fmt", "invalid seed '%s' (expected an unsigned integer)", s);
			}
			seeded = true;
		} else {
			static const char *const opts[] = {"--round", "--seed", "--no-saturate",
			                                   "--saturate", "--table", "--help"};
			const char *s = suggest(a, opts, 6);
			free(vals);
			if (s)
				return usage_error("fmt", "unknown option '%s' (did you mean '%s'?)", a, s);
			return usage_error("fmt", "unknown option '%s'", a);
		}
	}
	if (!fname) {
		free(vals);
		return usage_error("fmt", "missing FORMAT (one of fp32 tf32 fp16 bf16 e4m3 e5m2 e8m0 e2m1 e3m2 e2m3)");
	}
	if (no_sat && sat) {
		free(vals);
		return usage_error("fmt", "--saturate and --no-saturate contradict each other");
	}
	int f = precc_format_by_name(fname);
	if (f < 0) {
		const char *names[PRECC_NFORMAT];
		for (int i = 0; i < PRECC_NFORMAT; i++)
			names[i] = precc_format_get(i)->name;
		const char *s = suggest(fname, names, PRECC_NFORMAT);
		if (s)
			fprintf(stderr, "precc fmt: error: unknown format '%s' (did you mean '%s'?)\n", fname, s);
		else
			fprintf(stderr, "precc fmt: error: unknown format '%s' (formats: fp32 tf32 fp16 bf16 "
			                "e4m3 e5m2 e8m0 e2m1 e3m2 e2m3)\n", fname);
		free(vals);
		return 1;
	}
	o.f = f;
	o.round = precc_default_round(f);
	o.saturate = sat || (!no_sat && precc_default_saturate(f));
	if (round) {
		int r = precc_round_by_name(round);
		if (r < 0) {
			static const char *const modes[] = {"rne", "rz", "ru", "sr", "rna"};
			const char *s = suggest(round, modes, 5);
			free(vals);
			if (s)
				return usage_error("fmt", "unknown rounding mode '%s' (did you mean '%s'?)", round, s);
			return usage_error("fmt", "unknown rounding mode '%s' (rne, rz, ru, rna, sr)", round);
		}
		o.round = r;
	}
	if (seeded && o.round != PRECC_SR) {
		free(vals);
		return usage_error("fmt", "--seed only applies to --round sr");
	}
	if (want_table) {
		if (nvals) {
			free(vals);
			return usage_error("fmt", "--table takes no values");
		}
		if (precc_format_get(o.f)->bits > 16) {
			free(vals);
			return usage_error("fmt", "--table lists formats of at most 16 bits, not %s", fname);
		}
		free(vals);
		return table(&o);
	}
	rc = 0;
	if (nvals)
		for (int i = 0; i < nvals; i++)
			rc |= value(&o, vals[i], (uint64_t)i);
	else
		rc = from_stdin(&o);
	free(vals);
	return rc;
}
