/*
 * diag.c — the one path for user errors ("file:line: error: msg", exit 1),
 * one for internal bugs (die: abort with __FILE__:__LINE__), near-miss
 * suggestions, and checked allocation.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipe.h"

static void
vreport(const char *kind, const char *file, int line, const char *fmt, va_list ap)
{
	if (file && line > 0)
		fprintf(stderr, "%s:%d: %s: ", file, line, kind);
	else if (file)
		fprintf(stderr, "%s: %s: ", file, kind);
	else
		fprintf(stderr, "precc: %s: ", kind);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void
errorf(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("error", file, line, fmt, ap);
	va_end(ap);
	exit(1);
}

bool diag_werror;
int diag_nwarn;

/* A warning; with --Werror (diag_werror) it reads "error:" and counts,
 * and diag_werror_exit ends the run once a batch is out. */
void
warnf(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(diag_werror ? "error" : "warning", file, line, fmt, ap);
	va_end(ap);
	diag_nwarn++;
}

void
diag_werror_exit(void)
{
	if (diag_werror && diag_nwarn) {
		fprintf(stderr, "precc: error: %d warning%s treated as error%s (--Werror)\n", diag_nwarn,
		        diag_nwarn == 1 ? "" : "s", diag_nwarn == 1 ? "" : "s");
		exit(1);
	}
}

void
die_(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "precc: internal error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* Damerau-Levenshtein (optimal string alignment) distance. */
static int
distance(const char *a, const char *b)
{
	int la = strlen(a), lb = strlen(b);
	int d[64][64];

	if (la >= 63 || lb >= 63)
		return 99;
	for (int i = 0; i <= la; i++)
		d[i][0] = i;
	for (int j = 0; j <= lb; j++)
		d[0][j] = j;
	for (int i = 1; i <= la; i++)
		for (int j = 1; j <= lb; j++) {
			int c = a[i - 1] != b[j - 1];
			int m = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < m) m = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + c < m) m = d[i - 1][j - 1] + c;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]
			    && d[i - 2][j - 2] + 1 < m)
				m = d[i - 2][j - 2] + 1;
			d[i][j] = m;
		}
	return d[la][lb];
}

/* Names people use for a family of formats, which precc spells by bits:
 * what to write instead, or NULL ("fp8" is not one format). */
const char *
format_family_hint(const char *word)
{
	static const struct { const char *name, *hint; } fam[] = {
		{"fp8", "e4m3 or e5m2 (or hybrid: e4m3 forward, e5m2 for gradients)"},
		{"float8", "e4m3 or e5m2 (or hybrid: e4m3 forward, e5m2 for gradients)"},
		{"mxfp8", "format = e4m3 (or e5m2) with scaling = mx"},
		{"fp6", "e3m2 or e2m3"}, {"mxfp6", "format = e3m2 (or e2m3) with scaling = mx"},
		{"fp4", "e2m1 (with scaling = nvfp4 or mx)"}, {"float4", "e2m1 (with scaling = nvfp4 or mx)"},
		{"nvfp4", "format = e2m1 with scaling = nvfp4"}, {"mxfp4", "format = e2m1 with scaling = mx"},
		{"e8m0", "e8m0 is a scale format (scale_format = e8m0); data formats are e4m3, e5m2, "
		         "e2m1, e3m2, e2m3"},
	};
	char low[16];
	size_t n = strlen(word);

	if (n >= sizeof low)
		return NULL;
	for (size_t k = 0; k <= n; k++)
		low[k] = (char)(word[k] >= 'A' && word[k] <= 'Z' ? word[k] + 32 : word[k]);
	for (size_t k = 0; k < sizeof fam / sizeof fam[0]; k++)
		if (!strcmp(low, fam[k].name))
			return fam[k].hint;
	return NULL;
}

/* The closest candidate within a third of the word's length, or NULL. */
const char *
suggest(const char *word, const char *const *cands, int n)
{
	const char *best = NULL;
	int bestd = 99, limit = (int)strlen(word) / 3 + 1;

	for (int i = 0; i < n; i++) {
		if (!cands[i])
			continue;
		int d = distance(word, cands[i]);
		if (d < bestd) {
			bestd = d;
			best = cands[i];
		}
	}
	return bestd <= limit ? best : NULL;
}

/* The whole of a file ("-": standard input), NUL-terminated. On failure
 * NULL with errno set: by fopen or fread, or EFBIG past max bytes (0: no
 * limit); *opened says whether the open itself succeeded. */
char *
read_file(const char *path, size_t max, size_t *len, bool *opened)
{
	bool in = !strcmp(path, "-");
	FILE *f = in ? stdin : fopen(path, "rb");
	size_t n = 0, cap = 1 << 14;
	char *buf;

	if (opened)
		*opened = f != NULL;
	if (!f)
		return NULL;
	buf = xmalloc(cap);
	for (;;) {
		size_t got = fread(buf + n, 1, cap - 1 - n, f);
		n += got;
		if (got == 0)
			break;
		if (max && n > max)
			break;
		if (n + 1 == cap)
			buf = xrealloc(buf, cap *= 2);
	}
	int err = ferror(f) ? (errno ? errno : EIO) : max && n > max ? EFBIG : 0;
	if (!in)
		fclose(f);
	if (err) {
		free(buf);
		errno = err;
		return NULL;
	}
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

void *
xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);

	if (!p)
		die("out of memory (%zu x %zu bytes)", n, sz);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

char *
xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xmalloc(n), s, n);
}

/* Names (a recipe's, a model's) go into manifest.json, --json output and
 * comments of generated C, so they must be plain text: valid UTF-8 (no
 * overlong forms, surrogates or code points above U+10FFFF) without
 * control characters (C0, DEL, C1; newline and tab too unless `lines`).
 * NULL when s[0..n) is, else why not, in buf. */
const char *
text_fault(const char *s, size_t n, bool lines, char *buf, size_t bufsz)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < n;) {
		unsigned c = u[i], len = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2
		                         : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
		unsigned cp = len == 1 ? c : c & (0x7f >> len);
		for (unsigned k = 1; k < len; k++) {
			if (i + k >= n || (u[i + k] & 0xc0) != 0x80) {
				len = 0;
				break;
			}
			cp = cp << 6 | (u[i + k] & 0x3f);
		}
		if (len == 0 || (len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000)))
		    || (len == 4 && (cp < 0x10000 || cp > 0x10ffff))) {
			snprintf(buf, bufsz, "byte %zu (0x%02x) is not valid UTF-8", i + 1, c);
			return buf;
		}
		if ((cp < 0x20 && !(lines && (cp == '\n' || cp == '\t'))) || (cp >= 0x7f && cp < 0xa0)) {
			snprintf(buf, bufsz, "byte %zu is a control character (U+%04X)", i + 1, cp);
			return buf;
		}
		i += len;
	}
	return NULL;
}

/* A copy of s with each byte that is not valid UTF-8 replaced by U+FFFD:
 * for paths, which the user names and precc only echoes (--json). */
char *
text_lossy(const char *s)
{
	size_t n = strlen(s);
	char *d = xmalloc(3 * n + 1), *p = d, buf[64];

	for (size_t i = 0; i < n;) {
		size_t len = (unsigned char)s[i] < 0x80 ? 1 : (unsigned char)s[i] < 0xe0 ? 2
		             : (unsigned char)s[i] < 0xf0 ? 3 : 4;
		if (i + len <= n && !text_fault(s + i, len, true, buf, sizeof buf)) {
			memcpy(p, s + i, len);
			p += len, i += len;
		} else if ((unsigned char)s[i] < 0x80) {   /* a control byte: cJSON escapes it */
			*p++ = s[i++];
		} else {
			memcpy(p, "\xef\xbf\xbd", 3);
			p += 3, i++;
		}
	}
	*p = 0;
	return d;
}
