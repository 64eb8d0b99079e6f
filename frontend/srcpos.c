/*
 * srcpos.c — a token index of a recipe's source text, so a value found
 * while walking Lua tables (which keep no positions) can be reported at
 * the line where its key or literal is written.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "recipe.h"
#include "sandbox.h"

static void
push(Src *s, int *cap, int kind, int line, const char *p, int len)
{
	if (s->ntok == *cap) {
		*cap = *cap ? 2 * *cap : 256;
		s->tok = xrealloc(s->tok, *cap * sizeof *s->tok);
	}
	s->tok[s->ntok++] = (SrcTok){kind, line, p, len};
}

/* Length of a long bracket opener "[==[" at p, with its level, or 0. */
static int
long_open(const char *p, const char *end, int *level)
{
	const char *q = p + 1;

	if (*p != '[')
		return 0;
	while (q < end && *q == '=')
		q++;
	if (q < end && *q == '[') {
		*level = q - p - 1;
		return q - p + 1;
	}
	return 0;
}

/* Skip to the end of a long bracket of `level`, counting lines. */
static const char *
long_close(const char *p, const char *end, int level, int *line)
{
	for (; p < end; p++) {
		if (*p == '\n')
			(*line)++;
		else if (*p == ']') {
			const char *q = p + 1;
			while (q < end && *q == '=')
				q++;
			if (q < end && *q == ']' && q - p - 1 == level)
				return q + 1;
		}
	}
	return end;
}

void
src_index(Src *s, const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	int line = 1, cap = 0, level, n;

	s->tok = NULL;
	s->ntok = 0;
	if (p + 1 < end && p[0] == '#')           /* shebang line */
		while (p < end && *p != '\n')
			p++;
	while (p < end) {
		const char *b = p;
		int l0 = line;

		if (*p == '\n') {
			line++;
			p++;
		} else if (isspace((unsigned char)*p)) {
			p++;
		} else if (p[0] == '-' && p + 1 < end && p[1] == '-') {
			p += 2;
			if ((n = long_open(p, end, &level)))
				p = long_close(p + n, end, level, &line);
			else
				while (p < end && *p != '\n')
					p++;
		} else if (isalpha((unsigned char)*p) || *p == '_') {
			while (p < end && (isalnum((unsigned char)*p) || *p == '_'))
				p++;
			push(s, &cap, TOK_NAME, l0, b, p - b);
		} else if (isdigit((unsigned char)*p) || (*p == '.' && p + 1 < end && isdigit((unsigned char)p[1]))) {
			while (p < end && (isalnum((unsigned char)*p) || *p == '.' || *p == '_' ||
			                   ((*p == '+' || *p == '-') && strchr("eEpP", p[-1]))))
				p++;
			push(s, &cap, TOK_NUMBER, l0, b, p - b);
		} else if (*p == '"' || *p == '\'') {
			char q = *p++;
			while (p < end && *p != q && *p != '\n') {
				if (*p == '\\' && p + 1 < end) {
					if (p[1] == '\n')
						line++;
					p++;
				}
				p++;
			}
			push(s, &cap, TOK_STRING, l0, b + 1, p - b - 1);
			if (p < end && *p == q)
				p++;
		} else if ((n = long_open(p, end, &level))) {
			const char *e = long_close(p + n, end, level, &line);
			push(s, &cap, TOK_STRING, l0, p + n, (e - p - n) - (level + 2));
			p = e;
		} else {
			static const char *const two[] = {"==", "~=", "<=", ">=", "//", "::", "<<", ">>", ".."};
			int w = 1;
			for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
				if (p + 1 < end && p[0] == two[i][0] && p[1] == two[i][1])
					w = 2;
			if (w == 2 && p + 2 < end && p[0] == '.' && p[1] == '.' && p[2] == '.')
				w = 3;
			push(s, &cap, TOK_PUNCT, l0, p, w);
			p += w;
		}
	}
	push(s, &cap, TOK_EOF, line, end, 0);
}

void
src_free(Src *s)
{
	free(s->tok);
	s->tok = NULL;
	s->ntok = 0;
}

static bool
is(const Src *s, int i, int kind, const char *text)
{
	if (i < 0 || i >= s->ntok || s->tok[i].kind != kind)
		return false;
	return !text || ((int)strlen(text) == s->tok[i].len && !memcmp(s->tok[i].s, text, s->tok[i].len));
}

static bool
opens(const Src *s, int i)
{
	return is(s, i, TOK_PUNCT, "{") || is(s, i, TOK_PUNCT, "(") || is(s, i, TOK_PUNCT, "[");
}

static bool
closes(const Src *s, int i)
{
	return is(s, i, TOK_PUNCT, "}") || is(s, i, TOK_PUNCT, ")") || is(s, i, TOK_PUNCT, "]");
}

/* The token after the bracket group opened at i. */
static int
skip_group(const Src *s, int i)
{
	int depth = 0;

	for (; i < s->ntok && s->tok[i].kind != TOK_EOF; i++) {
		if (opens(s, i))
			depth++;
		else if (closes(s, i) && --depth == 0)
			return i + 1;
	}
	return s->ntok - 1;
}

int
src_call_table(const Src *s, int line, const char *name, int nth)
{
	for (int i = 0; i < s->ntok; i++) {
		if (s->tok[i].line < line || !is(s, i, TOK_NAME, name))
			continue;
		if (s->tok[i].line > line)
			return -1;
		if (nth-- > 0)
			continue;
		int j = i + 1;
		for (int steps = 0; steps < 2; steps++) {
			if (is(s, j, TOK_PUNCT, "{"))
				return j;
			if (is(s, j, TOK_STRING, NULL)) {
				j++;
			} else if (is(s, j, TOK_PUNCT, "(")) {
				int e = skip_group(s, j), depth = 0;
				for (int k = j; k < e; k++) {
					if (depth == 1 && is(s, k, TOK_PUNCT, "{"))
						return k;
					if (opens(s, k))
						depth++;
					else if (closes(s, k))
						depth--;
				}
				j = e;
			} else {
				return -1;
			}
		}
		return is(s, j, TOK_PUNCT, "{") ? j : -1;
	}
	return -1;
}

/* Walk the top level of the table at `open`, calling back on each field's
 * first token with its key token (-1 for positional items). */
static int
walk(const Src *s, int open, const char *key, int nth)
{
	int depth = 0, item = 0, start = open + 1;

	if (!is(s, open, TOK_PUNCT, "{"))
		return -1;
	for (int i = open; i < s->ntok && s->tok[i].kind != TOK_EOF; i++) {
		if (depth == 1 && i == start) {
			bool named = is(s, i, TOK_NAME, NULL) && is(s, i + 1, TOK_PUNCT, "=");
			bool quoted = is(s, i, TOK_PUNCT, "[") && is(s, i + 1, TOK_STRING, NULL) &&
			              is(s, i + 2, TOK_PUNCT, "]") && is(s, i + 3, TOK_PUNCT, "=");
			if (key && named && is(s, i, TOK_NAME, key))
				return i;
			if (key && quoted && is(s, i + 1, TOK_STRING, key))
				return i + 1;
			if (!key && !named && !quoted && !closes(s, i) && item++ == nth)
				return i;
		}
		if (opens(s, i)) {
			depth++;
			continue;
		}
		if (closes(s, i)) {
			if (--depth == 0)
				break;
			continue;
		}
		if (depth == 1 && (is(s, i, TOK_PUNCT, ",") || is(s, i, TOK_PUNCT, ";")))
			start = i + 1;
	}
	return -1;
}

int
src_find_key(const Src *s, int open, const char *key)
{
	return walk(s, open, key, 0);
}

int
src_find_item(const Src *s, int open, int nth)
{
	return walk(s, open, NULL, nth);
}

int
src_value_table(const Src *s, int keytok)
{
	if (keytok < 0)
		return -1;
	int j = keytok + 1;
	if (is(s, j, TOK_PUNCT, "]"))
		j++;
	if (!is(s, j, TOK_PUNCT, "="))
		return -1;
	return is(s, j + 1, TOK_PUNCT, "{") ? j + 1 : -1;
}
