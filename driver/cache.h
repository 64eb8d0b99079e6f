/*
 * cache.h — precc build's content-hashed kernel cache (cache.c).
 *
 * One file per key under $PRECC_CACHE_DIR (else $XDG_CACHE_HOME/precc,
 * else ~/.cache/precc): kernels/<16 hex>.pkc, a 40-byte header (magic
 * "PRECCKC1", format version, key, payload length, FNV-1a 64 of the
 * payload) and the payload (launch info, registers, PTX, cubin). Entries
 * are written to a mkstemp file in the same directory and renamed into
 * place, so a reader sees a whole entry or none; a reader that finds a
 * bad one (not a regular file, truncated, wrong key, payload hash
 * mismatch, launch info out of range) warns, naming the file, and reports
 * a miss so the kernel is rebuilt and rewritten. The seal has no key: an
 * entry is untrusted input (docs/artifacts.md, "What the cache trusts").
 */
#ifndef PRECC_CACHE_H
#define PRECC_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "codegen.h"

/* What an entry may say (cache.c checks each before use; docs/artifacts.md). */
enum {
	CACHE_MAX_ENTRY = 256 << 20,     /* bytes of one entry file */
	CACHE_MAX_THREADS = 1024,        /* threads per CTA */
	CACHE_MAX_SYNC_WORDS = 1 << 20,
	CACHE_MAX_M_MULTIPLE = 1 << 20,
	CACHE_MAX_JOBS = 1 << 16,        /* kernels in a build entry */
	CACHE_MAX_TEXT = 64 << 20,       /* bytes of a generated file in a build entry */
};

typedef struct CacheEntry {
	CodegenKernel info;       /* llvm_ms is 0 in entries read back */
	int regs, spill_bytes;    /* from ptxas -v; -1 when not known */
	char *ptx; size_t ptx_len;
	unsigned char *cubin; size_t cubin_len;   /* NULL, 0: none */
} CacheEntry;

typedef struct Cache Cache;

/* The cache directory in use, or NULL when the cache is off (disabled, or
 * the directory cannot be made: then one warning says why). */
Cache *cache_open(int disabled);
const char *cache_dir(const Cache *);
void cache_close(Cache *);
/* 1 and *e filled (free with cache_entry_free) on a hit; 0 on a miss. */
int cache_get(Cache *, uint64_t key, CacheEntry *e);
/* Stores e under key; a failure only warns (the build goes on). */
void cache_put(Cache *, uint64_t key, const CacheEntry *e);
void cache_entry_free(CacheEntry *);
/* 1 if every value index e's launch info names is below nval (the kernel
 * it is for); a 0 is a corrupt entry (warn with cache_warn, rebuild). */
int cache_entry_fits(const CacheEntry *, int nval);
/* The one warning for a bad entry found by a caller's own checks. */
void cache_warn(const Cache *, uint64_t key, const char *why);
/* The same for a raw payload (build.c's whole-build entries): a malloc'ed
 * copy of the verified payload, or NULL on a miss. */
unsigned char *cache_get_blob(Cache *, uint64_t key, size_t *len);
void cache_put_blob(Cache *, uint64_t key, const void *payload, size_t len);

#endif
