/*
 * json.c — a strict recursive-descent JSON reader for manifest.json.
 *
 * Why not cJSON: precc_rt must build on a GPU machine that has nothing but
 * a C compiler and cuda.h (DESIGN.md, "Layering"), so the runtime cannot
 * depend on any library the compiler uses. The manifest needs a small
 * subset of one standard, which this file reads exactly (RFC 8259):
 * objects, arrays, strings with every escape (\uXXXX with surrogate pairs,
 * to UTF-8), numbers, true, false, null. It is strict: no comments, no
 * trailing commas, no duplicate keys, no control characters in strings,
 * no \u0000 (names are C strings), only valid shortest-form UTF-8, nothing
 * after the value; duplicate keys are found through a hash set. Errors read
 * "NAME:LINE:COL: error: message". Limits: JSON_MAX_DEPTH nesting levels,
 * JSON_MAX_BYTES of text, JSON_MAX_VALUES values (runtime/limits.h).
 *
 * Floor 1 (manifest.h) of the runtime; base.h lists the floors.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

typedef struct Reader {
	const char *s, *end, *name;
	const char *p;
	int line;
	const char *bol;          /* beginning of the current line */
	int depth;
	char *err;
	size_t errsz;
	int failed;
} Reader;

static int col(const Reader *r, const char *at) { return (int)(at - r->bol) + 1; }

static json *bad(Reader *r, const char *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static json *bad(Reader *r, const char *at, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (r->failed)
		return NULL;
	r->failed = 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(r->err, r->errsz, "%s:%d:%d: error: %s", r->name, r->line,
	         col(r, at), msg);
	return NULL;
}

static void skip_ws(Reader *r)
{
	while (r->p < r->end) {
		char c = *r->p;
		if (c == '\n') {
			r->line++;
			r->bol = r->p + 1;
		} else if (c != ' ' && c != '\t' && c != '\r')
			return;
		r->p++;
	}
}

static json *node(Reader *r, json_kind k, const char *at)
{
	json *j = calloc(1, sizeof *j);

	if (!j)
		return bad(r, at, "out of memory");
	j->kind = k;
	j->line = r->line;
	j->col = col(r, at);
	return j;
}

void json_free(json *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->n; i++) {
		json_free(j->item[i]);
		if (j->key)
			free(j->key[i]);
	}
	free(j->item);
	free(j->key);
	free(j->str);
	free(j);
}

static const char *describe(const Reader *r)
{
	static _Thread_local char buf[32];
	unsigned char c;

	if (r->p >= r->end)
		return "end of input";
	c = (unsigned char)*r->p;
	if (c >= 0x20 && c < 0x7f)
		snprintf(buf, sizeof buf, "'%c'", c);
	else
		snprintf(buf, sizeof buf, "byte 0x%02x", c);
	return buf;
}

static int hex4(const char *p, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		*v <<= 4;
		if (c >= '0' && c <= '9') *v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f') *v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F') *v |= (unsigned)(c - 'A' + 10);
		else return -1;
	}
	return 0;
}

/* Reads a string at r->p (a '"') into a malloc'ed, NUL-terminated buffer. */
static char *read_string(Reader *r, size_t *len)
{
	const char *start = r->p++;
	size_t cap = 16, n = 0;
	char *out = malloc(cap);

	if (!out) {
		bad(r, start, "out of memory");
		return NULL;
	}
	for (;;) {
		unsigned char c;
		char enc[4];
		size_t k = 0;

		if (r->p >= r->end) {
			bad(r, start, "unterminated string");
			goto fail;
		}
		c = (unsigned char)*r->p;
		if (c == '"') {
			r->p++;
			break;
		}
		if (c < 0x20) {
			bad(r, r->p, "control character 0x%02x in a string (escape it)", c);
			goto fail;
		}
		if (c >= 0x80) {
			/* one whole, shortest-form UTF-8 sequence (RFC 3629): no
			 * overlong forms (0xc0 0x80 is a NUL), no surrogates, <= U+10FFFF */
			const unsigned char *q = (const unsigned char *)r->p;
			size_t need = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 :
			              c >= 0xf0 && c <= 0xf4 ? 4 : 0;
			unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
			unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
			int ok = need && (size_t)(r->end - r->p) >= need && q[1] >= lo && q[1] <= hi;
			for (size_t i = 2; ok && i < need; i++)
				ok = q[i] >= 0x80 && q[i] <= 0xbf;
			if (!ok) {
				bad(r, r->p, "invalid UTF-8 (byte 0x%02x) in a string", c);
				goto fail;
			}
			memcpy(enc, q, need);
			k = need;
			r->p += need;
		} else if (c != '\\') {
			enc[k++] = (char)c;
			r->p++;
		} else {
			const char *esc = r->p;
			unsigned u, lo;
			if (r->p + 1 >= r->end) {
				bad(r, start, "unterminated string");
				goto fail;
			}
			switch (r->p[1]) {
			case '"': enc[k++] = '"'; break;
			case '\\': enc[k++] = '\\'; break;
			case '/': enc[k++] = '/'; break;
			case 'b': enc[k++] = '\b'; break;
			case 'f': enc[k++] = '\f'; break;
			case 'n': enc[k++] = '\n'; break;
			case 'r': enc[k++] = '\r'; break;
			case 't': enc[k++] = '\t'; break;
			case 'u':
				if (r->end - r->p < 6 || hex4(r->p + 2, &u)) {
					bad(r, esc, "\\u needs four hex digits");
					goto fail;
				}
				r->p += 4;
				if (u >= 0xdc00 && u <= 0xdfff) {
					bad(r, esc, "lone low surrogate \\u%04x", u);
					goto fail;
				}
				if (u >= 0xd800 && u <= 0xdbff) {
					if (r->end - r->p < 8 || r->p[2] != '\\' || r->p[3] != 'u' ||
					    hex4(r->p + 4, &lo) || lo < 0xdc00 || lo > 0xdfff) {
						bad(r, esc, "high surrogate \\u%04x without a low one", u);
						goto fail;
					}
					r->p += 6;
					u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
				}
				if (u == 0) {
					bad(r, esc, "\\u0000 in a string (names are C strings)");
					goto fail;
				}
				if (u < 0x80)
					enc[k++] = (char)u;
				else if (u < 0x800) {
					enc[k++] = (char)(0xc0 | u >> 6);
					enc[k++] = (char)(0x80 | (u & 0x3f));
				} else if (u < 0x10000) {
					enc[k++] = (char)(0xe0 | u >> 12);
					enc[k++] = (char)(0x80 | (u >> 6 & 0x3f));
					enc[k++] = (char)(0x80 | (u & 0x3f));
				} else {
					enc[k++] = (char)(0xf0 | u >> 18);
					enc[k++] = (char)(0x80 | (u >> 12 & 0x3f));
					enc[k++] = (char)(0x80 | (u >> 6 & 0x3f));
					enc[k++] = (char)(0x80 | (u & 0x3f));
				}
				break;
			default:
				bad(r, esc, "unknown escape '\\%c'", r->p[1]);
				goto fail;
			}
			r->p += 2;
		}
		if (n + k + 1 > cap) {
			char *grown;
			cap = cap * 2 + k;
			if (!(grown = realloc(out, cap))) {
				bad(r, start, "out of memory");
				goto fail;
			}
			out = grown;
		}
		memcpy(out + n, enc, k);
		n += k;
	}
	out[n] = 0;
	*len = n;
	return out;
fail:
	free(out);
	return NULL;
}

static json *read_number(Reader *r)
{
	const char *start = r->p, *q = r->p;
	char buf[64];
	json *j;

	if (q < r->end && *q == '-')
		q++;
	if (q < r->end && *q == '0')
		q++;
	else if (q < r->end && *q >= '1' && *q <= '9')
		while (q < r->end && *q >= '0' && *q <= '9')
			q++;
	else
		return bad(r, start, "bad number: expected a digit");
	if (q < r->end && *q == '.') {
		if (++q >= r->end || *q < '0' || *q > '9')
			return bad(r, q, "bad number: expected a digit after '.'");
		while (q < r->end && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < r->end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < r->end && (*q == '+' || *q == '-'))
			q++;
		if (q >= r->end || *q < '0' || *q > '9')
			return bad(r, q, "bad number: expected a digit in the exponent");
		while (q < r->end && *q >= '0' && *q <= '9')
			q++;
	}
	if ((size_t)(q - start) >= sizeof buf)
		return bad(r, start, "number of %d characters is too long",
		           (int)(q - start));
	memcpy(buf, start, (size_t)(q - start));
	buf[q - start] = 0;
	if (!(j = node(r, JSON_NUM, start)))
		return NULL;
	errno = 0;
	j->num = strtod(buf, NULL);
	if (errno == ERANGE && (j->num > 1 || j->num < -1)) {
		json_free(j);
		return bad(r, start, "number %s is out of range", buf);
	}
	r->p = q;
	return j;
}

static int push(Reader *r, json *j, json *item, char *key, const char *at)
{
	if (j->n == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 4;
		json **items = realloc(j->item, cap * sizeof *items);
		char **keys;
		if (!items)
			goto oom;
		j->item = items;
		if (j->kind == JSON_OBJ) {
			if (!(keys = realloc(j->key, cap * sizeof *keys)))
				goto oom;
			j->key = keys;
		}
		j->cap = cap;
	}
	j->item[j->n] = item;
	if (j->kind == JSON_OBJ)
		j->key[j->n] = key;
	j->n++;
	return 0;
oom:
	json_free(item);
	free(key);
	bad(r, at, "out of memory");
	return -1;
}

static json *read_value(Reader *r);

/* An object's keys seen so far, for the duplicate check: open addressing
 * on FNV-1a, slots hold key index + 1, kept at most half full. Linear
 * scans made a 1 MB manifest of one object take 27 s. */
typedef struct Keyset { size_t *slot, cap; } Keyset;

static size_t key_hash(const char *k)
{
	uint64_t h = 0xcbf29ce484222325ull;
	while (*k)
		h = (h ^ (unsigned char)*k++) * 0x100000001b3ull;
	return (size_t)h;
}

/* 1: key is new and now in the set (as index i of j); 0: a duplicate;
 * -1: out of memory. */
static int keyset_add(Keyset *ks, const json *j, const char *key, size_t i)
{
	if (2 * (i + 1) > ks->cap) {
		size_t cap = ks->cap ? ks->cap * 2 : 16, *slot = calloc(cap, sizeof *slot);
		if (!slot)
			return -1;
		for (size_t k = 0; k < i; k++) {
			size_t h = key_hash(j->key[k]) & (cap - 1);
			while (slot[h])
				h = (h + 1) & (cap - 1);
			slot[h] = k + 1;
		}
		free(ks->slot);
		ks->slot = slot;
		ks->cap = cap;
	}
	size_t h = key_hash(key) & (ks->cap - 1);
	for (; ks->slot[h]; h = (h + 1) & (ks->cap - 1))
		if (strcmp(j->key[ks->slot[h] - 1], key) == 0)
			return 0;
	ks->slot[h] = i + 1;
	return 1;
}

static json *read_container(Reader *r, int obj)
{
	const char *open = r->p;
	Keyset ks = {NULL, 0};
	json *j;

	if (++r->depth > JSON_MAX_DEPTH)
		return bad(r, open, "nesting deeper than %d levels", JSON_MAX_DEPTH);
	if (!(j = node(r, obj ? JSON_OBJ : JSON_ARR, open)))
		return NULL;
	r->p++;
	skip_ws(r);
	if (r->p < r->end && *r->p == (obj ? '}' : ']')) {
		r->p++;
		r->depth--;
		return j;
	}
	for (;;) {
		char *key = NULL;
		const char *at;
		json *item;
		size_t len;

		skip_ws(r);
		at = r->p;
		if (obj) {
			if (r->p >= r->end || *r->p != '"') {
				bad(r, r->p, "expected a key string, found %s", describe(r));
				goto fail;
			}
			if (!(key = read_string(r, &len)))
				goto fail;
			int added = keyset_add(&ks, j, key, j->n);
			if (added <= 0) {
				if (added == 0)
					bad(r, at, "duplicate key '%s'", key);
				else
					bad(r, at, "out of memory");
				free(key);
				goto fail;
			}
			skip_ws(r);
			if (r->p >= r->end || *r->p != ':') {
				bad(r, r->p, "expected ':' after key '%s', found %s", key,
				    describe(r));
				free(key);
				goto fail;
			}
			r->p++;
			skip_ws(r);
		}
		if (!(item = read_value(r))) {
			free(key);
			goto fail;
		}
		if (push(r, j, item, key, at))
			goto fail;
		skip_ws(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			skip_ws(r);
			if (r->p < r->end && *r->p == (obj ? '}' : ']')) {
				bad(r, r->p, "trailing ',' before '%c'", *r->p);
				goto fail;
			}
			continue;
		}
		if (r->p < r->end && *r->p == (obj ? '}' : ']')) {
			r->p++;
			break;
		}
		bad(r, r->p, "expected ',' or '%c', found %s", obj ? '}' : ']',
		    describe(r));
		goto fail;
	}
	r->depth--;
	free(ks.slot);
	return j;
fail:
	free(ks.slot);
	json_free(j);
	return NULL;
}

static int word(const Reader *r, const char *w)
{
	size_t n = strlen(w);
	return (size_t)(r->end - r->p) >= n && memcmp(r->p, w, n) == 0;
}

static json *read_value(Reader *r)
{
	const char *at = r->p;
	json *j;

	if (r->p >= r->end)
		return bad(r, at, "expected a value, found end of input");
	switch (*r->p) {
	case '{': return read_container(r, 1);
	case '[': return read_container(r, 0);
	case '"':
		if (!(j = node(r, JSON_STR, at)))
			return NULL;
		if (!(j->str = read_string(r, &j->len))) {
			json_free(j);
			return NULL;
		}
		return j;
	case 't': case 'f': case 'n':
		if (word(r, "true") || word(r, "false") || word(r, "null")) {
			json_kind k = *r->p == 'n' ? JSON_NULL : JSON_BOOL;
			if (!(j = node(r, k, at)))
				return NULL;
			j->b = *r->p == 't';
			r->p += *r->p == 'f' ? 5 : 4;
			return j;
		}
		break;
	default:
		if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9'))
			return read_number(r);
	}
	return bad(r, at, "expected a value, found %s", describe(r));
}

/* The values in text, an object's keys counted as values too: the
 * top-level value, the first of each non-empty container, one after each
 * comma and each colon outside strings; exact for valid JSON. One pass,
 * nothing allocated: a parsed value costs ~100 bytes (node, pointers,
 * key), so 96 MB of "0," took 4.2 GB and 20 s to parse before this
 * refused it. */
static size_t count_values(const char *p, const char *end)
{
	size_t n = 1;

	for (; p < end; p++)
		if (*p == '"') {
			for (p++; p < end && *p != '"'; p++)
				if (*p == '\\')
					p++;
		} else if (*p == ',' || *p == ':')
			n++;
		else if (*p == '[' || *p == '{') {
			const char *q = p + 1;
			while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
				q++;
			n += q < end && *q != ']' && *q != '}';
		}
	return n;
}

json *json_parse(const char *text, size_t len, const char *name, char *err,
                 size_t errsz)
{
	Reader r = {text, text + len, name, text, 1, text, 0, err, errsz, 0};
	json *j;
	size_t values;

	if (len > JSON_MAX_BYTES) {
		snprintf(err, errsz, "%s: error: %zu bytes is more than the %ld a "
		         "manifest may have", name, len, JSON_MAX_BYTES);
		return NULL;
	}
	if ((values = count_values(text, text + len)) > JSON_MAX_VALUES) {
		snprintf(err, errsz, "%s: error: %zu values (keys included) is more than "
		         "the %ld a manifest may have", name, values, JSON_MAX_VALUES);
		return NULL;
	}
	skip_ws(&r);
	if (!(j = read_value(&r)))
		return NULL;
	skip_ws(&r);
	if (r.p < r.end) {
		bad(&r, r.p, "unexpected %s after the value", describe(&r));
		json_free(j);
		return NULL;
	}
	return j;
}

const json *json_get(const json *obj, const char *key)
{
	if (!obj || obj->kind != JSON_OBJ)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (strcmp(obj->key[i], key) == 0)
			return obj->item[i];
	return NULL;
}

const char *json_kind_name(json_kind k)
{
	static const char *const names[] = {"null", "a boolean", "a number",
	                                    "a string", "an array", "an object"};
	return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}
