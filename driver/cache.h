/*
 * cache.h — precc build's content-hashed kernel cache (cache.c).
 *
 * One file per key under $PRECC_CACHE_DIR (else $XDG_CACHE_HOME/precc,
 * else ~/.cache/precc): kernels/<16 hex>.pkc, a 64-byte header (magic
 * "PRECCKC1", format version 3, key, payload length, HMAC-SHA256 of the
 * rest of the header and the payload) and the payload (launch info,
 * registers, PTX, cubin). The MAC's key is the secret in the key file
 * (cache_key.c: $PRECC_CACHE_KEY, else ~/.config/precc/cache.key, made on
 * first use). Entries are written to a mkstemp file in the same directory
 * and renamed into place, so a reader sees a whole entry or none; a
 * reader that finds a bad one (not a regular file, truncated, wrong key,
 * MAC mismatch, launch info out of range) warns, naming the file, and
 * reports a miss so the kernel is rebuilt and rewritten. Whoever holds
 * the key file can still seal any entry, so the payload is checked as
 * untrusted input as well (docs/artifacts.md, "What the cache trusts").
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
	CACHE_KEY_MIN = 16,              /* bytes of the key file */
	CACHE_KEY_MAX = 4096,
	CACHE_MAC_BYTES = 32,            /* HMAC-SHA256 */
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

/* NULL if cubin[0..n) is a whole CUDA ELF (64-bit little-endian ELF,
 * e_machine EM_CUDA, the section and program header tables and every
 * section and segment inside the n bytes), else why not. ptxas on a full
 * disk exits 0 and leaves a truncated cubin; nothing that fails this is
 * written to -o or sealed into the cache. */
const char *cache_cubin_check(const unsigned char *cubin, size_t n);

/* cache_key.c: the key file's path ($PRECC_CACHE_KEY, else
 * $XDG_CONFIG_HOME/precc/cache.key, else ~/.config/precc/cache.key) in
 * buf, or NULL when none of them is set. */
const char *cache_key_path(char *buf, size_t n);
/* Reads the key file at path into key[CACHE_KEY_MAX], making it (32
 * random bytes, mode 0600) if it does not exist; 0, or -1 with why when
 * the file is refused (symlink, not regular, writable by group/others,
 * readable by others, size outside CACHE_KEY_MIN..MAX). */
int cache_key_load(const char *path, unsigned char *key, size_t *len, char *why, size_t whysz);
/* out = HMAC-SHA256(key, a || b); 0, or -1 if libcrypto fails. */
int cache_mac(const unsigned char *key, size_t keylen, const void *a, size_t alen,
              const void *b, size_t blen, unsigned char out[CACHE_MAC_BYTES]);
/* write(2) all n bytes of p, through EINTR and short writes; 0 or -1. */
int cache_write_all(int fd, const void *p, size_t n);
/* Constant-time comparison of two MACs; 1 if equal. */
int cache_mac_equal(const unsigned char *, const unsigned char *);

#endif
