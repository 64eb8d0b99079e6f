/*
 * test_json.c — runtime/json.c, the manifest's JSON reader: valid input,
 * escapes and surrogates, and every error with its line:col.
 */
#include "rtcheck.h"
#include "rt.h"

static json *parse(const char *s, char *err, size_t n)
{
	return json_parse(s, strlen(s), "m.json", err, n);
}

/* The error for s, or "(parsed)". */
static const char *error_of(const char *s)
{
	static char err[512];
	json *j = parse(s, err, sizeof err);

	if (j) {
		json_free(j);
		return "(parsed)";
	}
	return err;
}

int main(void)
{
	char err[512];
	json *j;

	j = parse(" {\"a\": [1, -2.5e3, true, false, null, \"x\\ty\"],\n"
	          "  \"b\": {\"c\": \"\\u00e9\\ud83d\\ude00\\/\\\"\"}, \"d\": 0} ",
	          err, sizeof err);
	CHECK(j != NULL);
	if (j) {
		const json *a = json_get(j, "a"), *b = json_get(j, "b");
		CHECK(j->kind == JSON_OBJ && j->n == 3);
		CHECK(a && a->kind == JSON_ARR && a->n == 6);
		CHECK(a && a->item[0]->num == 1 && a->item[1]->num == -2500);
		CHECK(a && a->item[2]->kind == JSON_BOOL && a->item[2]->b == 1);
		CHECK(a && a->item[3]->kind == JSON_BOOL && a->item[3]->b == 0);
		CHECK(a && a->item[4]->kind == JSON_NULL);
		CHECK_STR(a ? a->item[5]->str : NULL, "x\ty");
		CHECK_STR(json_get(b, "c") ? json_get(b, "c")->str : NULL,
		          "\xc3\xa9\xf0\x9f\x98\x80/\"");
		CHECK(json_get(b, "c") && json_get(b, "c")->line == 2 &&
		      json_get(b, "c")->col == 14);
		CHECK(json_get(j, "zz") == NULL);
		CHECK(json_get(a, "a") == NULL);   /* not an object */
		json_free(j);
	}
	CHECK_STR(error_of("[]"), "(parsed)");
	CHECK_STR(error_of("\"\""), "(parsed)");
	CHECK_STR(error_of(""), "m.json:1:1: error: expected a value, found end of input");
	CHECK_STR(error_of("{\"a\": 1,}"), "m.json:1:9: error: trailing ',' before '}'");
	CHECK_STR(error_of("[1 2]"), "m.json:1:4: error: expected ',' or ']', found '2'");
	CHECK_STR(error_of("{\n  \"a\": 1,\n  \"a\": 2}"),
	          "m.json:3:3: error: duplicate key 'a'");
	CHECK_STR(error_of("{\"a\" 1}"), "m.json:1:6: error: expected ':' after key 'a', found '1'");
	CHECK_STR(error_of("{1: 2}"), "m.json:1:2: error: expected a key string, found '1'");
	CHECK_STR(error_of("[01]"), "m.json:1:3: error: expected ',' or ']', found '1'");
	CHECK_STR(error_of("[1.]"), "m.json:1:4: error: bad number: expected a digit after '.'");
	CHECK_STR(error_of("[1e]"), "m.json:1:4: error: bad number: expected a digit in the exponent");
	CHECK_STR(error_of("[-]"), "m.json:1:2: error: bad number: expected a digit");
	CHECK_STR(error_of("[1e999]"), "m.json:1:2: error: number 1e999 is out of range");
	CHECK_STR(error_of("[tru]"), "m.json:1:2: error: expected a value, found 't'");
	CHECK_STR(error_of("\"abc"), "m.json:1:1: error: unterminated string");
	CHECK_STR(error_of("\"a\nb\""), "m.json:1:3: error: control character 0x0a in a string (escape it)");
	CHECK_STR(error_of("\"\\x\""), "m.json:1:2: error: unknown escape '\\x'");
	CHECK_STR(error_of("\"\\u12\""), "m.json:1:2: error: \\u needs four hex digits");
	CHECK_STR(error_of("\"\\ud800x\""), "m.json:1:2: error: high surrogate \\ud800 without a low one");
	CHECK_STR(error_of("\"\\udc00\""), "m.json:1:2: error: lone low surrogate \\udc00");
	CHECK_STR(error_of("\"\\u0000\""), "m.json:1:2: error: \\u0000 in a string (names are C strings)");
	CHECK_STR(error_of("{} x"), "m.json:1:4: error: unexpected 'x' after the value");
	CHECK_STR(error_of("[1] \x01"), "m.json:1:5: error: unexpected byte 0x01 after the value");
	CHECK_STR(error_of("// c\n{}"), "m.json:1:1: error: expected a value, found '/'");
	{
		char deep[2 * JSON_MAX_DEPTH + 8];
		int n = 0;
		for (int i = 0; i <= JSON_MAX_DEPTH; i++)
			deep[n++] = '[';
		for (int i = 0; i <= JSON_MAX_DEPTH; i++)
			deep[n++] = ']';
		deep[n] = 0;
		CHECK_STR(error_of(deep), "m.json:1:65: error: nesting deeper than 64 levels");
		deep[JSON_MAX_DEPTH] = ' ';          /* 64 levels: fine */
		deep[JSON_MAX_DEPTH + 1] = ' ';
		CHECK_STR(error_of(deep + 0), "(parsed)");
	}
	CHECK(json_parse("{}", (size_t)JSON_MAX_BYTES + 1, "big.json", err,
	                 sizeof err) == NULL);
	CHECK(strstr(err, "big.json: error: ") == err);
	/* JSON_MAX_VALUES, counted before anything is parsed: exactly the
	 * limit gets to the parser (which stops at the 'x'), one more is
	 * refused; keys count; commas and colons inside strings do not, nor
	 * an empty container's inside */
	{
		size_t cap = (size_t)JSON_MAX_VALUES, n = 0;
		char *t = malloc(cap * 4 + 64);
		n += (size_t)sprintf(t, "[x,");          /* 2 values: the array, x */
		for (size_t i = 2; i < cap - 1; i++)
			n += (size_t)sprintf(t + n, "0,");
		strcpy(t + n, "0]");                      /* cap values */
		CHECK_STR(error_of(t), "m.json:1:2: error: expected a value, found 'x'");
		memcpy(t + n, "0,0]", 5);                 /* cap + 1 */
		snprintf(err, sizeof err, "m.json: error: %zu values (keys included) is more "
		         "than the %ld a manifest may have", cap + 1, JSON_MAX_VALUES);
		CHECK_STR(error_of(t), err);
		n = (size_t)sprintf(t, "{\"a\":x");       /* 3: the object, a key, x */
		for (size_t v = 3; v + 2 <= cap; v += 2)
			n += (size_t)sprintf(t + n, ",\"\":0");
		strcpy(t + n, "}");                       /* cap - 1 */
		CHECK_STR(error_of(t), "m.json:1:6: error: expected a value, found 'x'");
		strcpy(t + n, ",\"\":0}");                /* + a key and a value */
		CHECK(strstr(error_of(t), "values (keys included) is more than") != NULL);
		n = (size_t)sprintf(t, "[x, [ ], {}, \"\\\"");
		for (size_t i = 0; i < cap; i++)
			t[n++] = i & 1 ? ',' : ':';
		strcpy(t + n, "\"]");
		CHECK_STR(error_of(t), "m.json:1:2: error: expected a value, found 'x'");
		free(t);
	}
	return finish("runtime.json");
}
