/* fuzz_ir.c — the IR text parser and the verifier (precc ir FILE.ir; the
 * cpu backend parses every kernel's "ir" the same way). A parsed module is
 * printed and parsed again: print(parse(t)) must parse. */
#include "fuzz.h"
#include "ir.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[4096], *text = malloc(size + 1);
	Module *m;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	/* a long name too: the verifier's prefix must hold it */
	m = ir_parse(text, size & 1 ? "fuzz.ir" : "fuzz/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.ir",
	             err, sizeof err);
	if (m) {
		ir_verify(m, err, sizeof err);
		char *again = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&again, &n);
		if (f) {
			ir_print_module(f, m);
			fclose(f);
		}
		if (again) {
			Module *m2 = ir_parse(again, "again.ir", err, sizeof err);
			if (!m2) {
				fprintf(stderr, "print(parse(t)) does not parse: %s\n", err);
				abort();
			}
			ir_module_free(m2);
			free(again);
		}
		ir_module_free(m);
	}
	free(text);
	return 0;
}
