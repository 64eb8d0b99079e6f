/*
 * hash.c — content hashes: FNV-1a 64 over bytes, and the hash of a kernel
 * (its canonical text, the target and the compiler version). The value is
 * a pure function of those bytes, the same on every machine and run, so
 * the runtime and a cache may store it; it never includes a path.
 */
#include <stdlib.h>
#include <string.h>
#include "ir.h"
#include "precc/version.h"

uint64_t
ir_hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	for (size_t k = 0; k < n; k++) {
		h ^= s[k];
		h *= 0x100000001b3ULL;        /* FNV-1a 64 prime */
	}
	return h;
}

uint64_t
ir_hash_str(uint64_t h, const char *s)
{
	return ir_hash_bytes(h, s, strlen(s) + 1);
}

uint64_t
ir_func_hash(const Func *fn, const char *target)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);
	uint64_t h;

	if (!f)
		abort();
	ir_print_func_canon(f, fn);
	fclose(f);
	h = ir_hash_str(IR_HASH_INIT, "precc kernel v1");
	h = ir_hash_str(h, text);
	h = ir_hash_str(h, target ? target : "");
	h = ir_hash_str(h, PRECC_VERSION);
	free(text);
	return h;
}
