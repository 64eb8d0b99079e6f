/*
 * test_manifest_format FILE — FILE must be byte for byte what cJSON
 * prints for it: cJSON_Parse, cJSON_Print (formatted) and a newline. The
 * driver writes the layers of a manifest without cJSON (a 45,091-layer
 * tree cost seconds), promising cJSON's layout; this holds it to that.
 * Exit 0 same, 1 different (the first differing line is printed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

int
main(int argc, char **argv)
{
	FILE *f = argc == 2 ? fopen(argv[1], "rb") : NULL;
	if (!f) {
		fprintf(stderr, "usage: test_manifest_format MANIFEST (cannot open it)\n");
		return 2;
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *text = malloc((size_t)n + 1);
	if (!text || fread(text, 1, (size_t)n, f) != (size_t)n)
		return 2;
	text[n] = 0;
	fclose(f);
	cJSON *root = cJSON_Parse(text);
	if (!root) {
		fprintf(stderr, "%s: cJSON cannot parse it\n", argv[1]);
		free(text);
		return 1;
	}
	char *again = cJSON_Print(root);
	cJSON_Delete(root);
	size_t m = again ? strlen(again) : 0;
	int same = again && m + 1 == (size_t)n && memcmp(again, text, m) == 0 && text[m] == '\n';
	long line = 1, i = 0;
	while (!same && i < n && (size_t)i < m && text[i] == again[i])
		line += text[i++] == '\n';
	if (same)
		printf("%s: %ld bytes, as cJSON prints them\n", argv[1], n);
	else
		fprintf(stderr, "%s:%ld: differs from cJSON's printing at byte %ld\n", argv[1], line, i);
	cJSON_free(again);
	free(text);
	return !same;
}
