/*
 * cache.c — the content-hashed kernel cache of precc build (cache.h).
 * Keys are computed by the caller (build.c: kernel IR + target + compiler
 * identity); this file only stores and verifies. Entry layout, all
 * integers little-endian as the host writes them (a cache is per machine):
 *
 * Kernel entries (cache_get/cache_put) and build entries (raw payloads,
 * cache_get_blob/cache_put_blob) share the header.
 *
 *	header   "PRECCKC1"  u32 version (3)  u32 0  u64 key  u64 payload length
 *	         HMAC-SHA256 (32 bytes) of the header's first 32 bytes and
 *	         the payload, keyed by the key file (cache_key.c)
 *	payload  u32 sizeof(CodegenKernel)  CodegenKernel  i32 regs  i32 spills
 *	         u64 ptx length  ptx bytes  u64 cubin length  cubin bytes
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "cache.h"
#include "recipe.h"

#define MAGIC "PRECCKC1"
#define VERSION 3u        /* 1: FNV-1a 64 seal, no key; 2: CodegenKernel without persistent */
#define MACAT 32          /* the MAC's offset in the header */
#define HDR (MACAT + CACHE_MAC_BYTES)

struct Cache {
	char *dir;        /* .../precc/kernels */
	unsigned char key[CACHE_KEY_MAX];
	size_t keylen;
	atomic_int warned;   /* one warning for failed writes, not one per entry (the
	                        build's threads write entries concurrently) */
};

static int
mkdir_p(char *path)
{
	for (char *p = path + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			int r = mkdir(path, 0777);
			*p = '/';
			if (r && errno != EEXIST)
				return -1;
		}
	return mkdir(path, 0777) && errno != EEXIST ? -1 : 0;
}

Cache *
cache_open(int disabled)
{
	const char *env = getenv("PRECC_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
	           *home = getenv("HOME");
	char buf[4096];

	if (disabled)
		return NULL;
	if (env && *env)
		snprintf(buf, sizeof buf, "%s/kernels", env);
	else if (xdg && *xdg)
		snprintf(buf, sizeof buf, "%s/precc/kernels", xdg);
	else if (home && *home)
		snprintf(buf, sizeof buf, "%s/.cache/precc/kernels", home);
	else {
		warnf(NULL, 0, "no cache: neither PRECC_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
		return NULL;
	}
	/* the key first: a refused key file makes no cache directory */
	char kpath[4096], why[256];
	Cache *c = xcalloc(1, sizeof *c);
	if (!cache_key_path(kpath, sizeof kpath)) {
		warnf(NULL, 0, "cache off: no key file: neither PRECC_CACHE_KEY, XDG_CONFIG_HOME nor HOME is set");
		free(c);
		return NULL;
	}
	if (cache_key_load(kpath, c->key, &c->keylen, why, sizeof why)) {
		warnf(kpath, 0, "cache off: key file refused: %s", why);
		free(c);
		return NULL;
	}
	if (mkdir_p(buf)) {
		warnf(buf, 0, "cache off: cannot create the cache directory: %s", strerror(errno));
		OPENSSL_cleanse(c->key, sizeof c->key);
		free(c);
		return NULL;
	}
	c->dir = xstrdup(buf);
	return c;
}

const char *
cache_dir(const Cache *c)
{
	return c ? c->dir : NULL;
}

void
cache_close(Cache *c)
{
	if (c) {
		free(c->dir);
		OPENSSL_cleanse(c->key, sizeof c->key);
		free(c);
	}
}

void
cache_entry_free(CacheEntry *e)
{
	free(e->ptx);
	free(e->cubin);
	e->ptx = NULL;
	e->cubin = NULL;
}

static void
entry_path(const Cache *c, uint64_t key, char *buf, size_t n)
{
	snprintf(buf, n, "%s/%016llx.pkc", c->dir, (unsigned long long)key);
}

/* ---- reading ---------------------------------------------------------- */

typedef struct Rd { const unsigned char *p; size_t n, at; int bad; } Rd;

static void
take(Rd *r, void *dst, size_t n)
{
	if (r->bad || r->n - r->at < n) {
		r->bad = 1;
		if (dst)
			memset(dst, 0, n);
		return;
	}
	if (dst)
		memcpy(dst, r->p + r->at, n);
	r->at += n;
}

static void *
take_blob(Rd *r, size_t *len, int nul)
{
	uint64_t n = 0;

	take(r, &n, 8);
	if (r->bad || n > r->n - r->at) {
		r->bad = 1;
		return NULL;
	}
	*len = n;
	if (n == 0 && !nul)
		return NULL;
	unsigned char *b = xmalloc(n + 1);
	take(r, b, n);
	b[n] = 0;
	return b;
}

/* The payload of the entry for key, verified; NULL on a miss (a bad entry
 * warns, naming the file). */
static unsigned char *
get_blob(Cache *c, uint64_t key, size_t *len, char *path, size_t pathsz)
{
	const char *why = NULL;
	unsigned char *buf = NULL;
	struct stat st;
	FILE *f;

	entry_path(c, key, path, pathsz);
	/* O_NOFOLLOW | O_NONBLOCK: a symlink or a FIFO planted in the cache is
	 * a bad entry, not a hang. */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return NULL;         /* a plain miss */
	if (fd < 0 || !(f = fdopen(fd, "rb"))) {
		if (fd >= 0)
			close(fd);
		warnf(path, 0, "corrupt cache entry (cannot open: %s): rebuilding it", strerror(errno));
		return NULL;
	}
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
		why = "not a regular file";
		goto bad;
	}
	if (st.st_size < HDR) {
		why = "truncated header";
		goto bad;
	}
	if (st.st_size > CACHE_MAX_ENTRY) {
		why = "larger than the entry size limit";
		goto bad;
	}
	buf = xmalloc((size_t)st.st_size);
	if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		why = "short read";
		goto bad;
	}
	uint32_t ver;
	uint64_t k, plen;
	unsigned char mac[CACHE_MAC_BYTES];
	memcpy(&ver, buf + 8, 4);
	memcpy(&k, buf + 16, 8);
	memcpy(&plen, buf + 24, 8);
	if (memcmp(buf, MAGIC, 8))
		why = "bad magic";
	else if (ver != VERSION)
		why = "other cache format version";
	else if (k != key)
		why = "key mismatch";
	else if (plen != (uint64_t)st.st_size - HDR)
		why = plen > (uint64_t)st.st_size - HDR ? "truncated payload" : "trailing bytes";
	else if (cache_mac(c->key, c->keylen, buf, MACAT, buf + HDR, plen, mac))
		why = "cannot compute its MAC";
	else if (!cache_mac_equal(mac, buf + MACAT))
		why = "MAC mismatch: not sealed with this cache key";
	if (why)
		goto bad;
	fclose(f);
	memmove(buf, buf + HDR, plen);
	*len = plen;
	return buf;
bad:
	warnf(path, 0, "corrupt cache entry (%s): rebuilding it", why);
	free(buf);
	fclose(f);
	return NULL;
}

unsigned char *
cache_get_blob(Cache *c, uint64_t key, size_t *len)
{
	char path[4200];

	return c ? get_blob(c, key, len, path, sizeof path) : NULL;
}

/* An entry's launch info is untrusted input (a shared cache directory is
 * written by others, and everyone who holds the key file can seal): every count is checked
 * against its array, every enum against its range, the entry name is a C
 * identifier. Value indices are checked against the kernel by the caller
 * (cache_entry_fits). NULL: fine; else why not. */
static const char *
check_info(const CodegenKernel *k)
{
	size_t n = strnlen(k->name, sizeof k->name);

	if (n == 0 || n == sizeof k->name)
		return "entry name not terminated";
	for (size_t i = 0; i < n; i++)
		if (!(k->name[i] == '_' || (k->name[i] >= 'a' && k->name[i] <= 'z')
		      || (k->name[i] >= 'A' && k->name[i] <= 'Z') || (i && k->name[i] >= '0' && k->name[i] <= '9')))
			return "entry name not an identifier";
	if ((unsigned)k->shape >= NCGSHAPE)
		return "shape out of range";
	if (k->nparams >= 0 && k->nparams < 32 && k->atomic_params >> k->nparams)
		return "atomic_params beyond the params";
	if (k->nparams < 0 || k->nparams > (int)(sizeof k->param_value / sizeof k->param_value[0]))
		return "nparams out of range";
	if (k->nphases < 0 || k->nphases > CG_MAXPHASE)
		return "nphases out of range";
	for (int p = 0; p < k->nphases; p++)
		if ((unsigned)k->phase[p].shape >= NCGSHAPE || k->phase[p].elems_per_cta < 0
		    || k->phase[p].tile_rows < 0 || k->phase[p].tile_cols < 0)
			return "phase out of range";
	if (k->threads < 1 || k->threads > CACHE_MAX_THREADS || k->sync_words < 0
	    || k->sync_words > CACHE_MAX_SYNC_WORDS || k->m_multiple < 1
	    || k->m_multiple > CACHE_MAX_M_MULTIPLE || k->elems_per_cta < 0
	    || k->tile_rows < 0 || k->tile_cols < 0)
		return "launch geometry out of range";
	return NULL;
}

#define EM_CUDA 190

static uint64_t
le(const unsigned char *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

/* a table of num entries of entsz bytes at off, inside n bytes */
static int
table_fits(uint64_t off, uint64_t num, uint64_t entsz, size_t n)
{
	return off <= n && entsz && num <= (n - off) / entsz;
}

const char *
cache_cubin_check(const unsigned char *p, size_t n)
{
	if (n < 64 || memcmp(p, "\177ELF", 4))
		return n < 64 ? "shorter than an ELF header" : "not an ELF file";
	if (p[4] != 2 || p[5] != 1)
		return "not a 64-bit little-endian ELF";
	if (le(p + 18, 2) != EM_CUDA)
		return "e_machine is not EM_CUDA";
	uint64_t phoff = le(p + 32, 8), shoff = le(p + 40, 8);
	uint64_t phent = le(p + 54, 2), phnum = le(p + 56, 2);
	uint64_t shent = le(p + 58, 2), shnum = le(p + 60, 2);
	if (shnum == 0 || shent < 64 || !table_fits(shoff, shnum, shent, n))
		return "section header table beyond the end of the file";
	if (phnum && (phent < 56 || !table_fits(phoff, phnum, phent, n)))
		return "program header table beyond the end of the file";
	for (uint64_t i = 0; i < shnum; i++) {
		const unsigned char *sh = p + shoff + i * shent;
		uint64_t off = le(sh + 24, 8), size = le(sh + 32, 8);
		if (le(sh + 4, 4) != 8 /* SHT_NOBITS */ && (off > n || size > n - off))
			return "a section beyond the end of the file";
	}
	for (uint64_t i = 0; i < phnum; i++) {
		const unsigned char *ph = p + phoff + i * phent;
		uint64_t off = le(ph + 8, 8), size = le(ph + 32, 8);
		if (off > n || size > n - off)
			return "a segment beyond the end of the file";
	}
	return NULL;
}

int
cache_entry_fits(const CacheEntry *e, int nval)
{
	const CodegenKernel *k = &e->info;

	if (k->data < -1 || k->data >= nval)
		return 0;
	for (int i = 0; i < k->nparams; i++)
		if (k->param_value[i] < 0 || k->param_value[i] >= nval)
			return 0;
	for (int p = 0; p < k->nphases; p++)
		if (k->phase[p].data < -1 || k->phase[p].data >= nval)
			return 0;
	return 1;
}

void
cache_warn(const Cache *c, uint64_t key, const char *why)
{
	char path[4200];

	entry_path(c, key, path, sizeof path);
	warnf(path, 0, "corrupt cache entry (%s): rebuilding it", why);
}

int
cache_get(Cache *c, uint64_t key, CacheEntry *e)
{
	char path[4200];
	size_t plen = 0;
	unsigned char *buf;

	memset(e, 0, sizeof *e);
	if (!c || !(buf = get_blob(c, key, &plen, path, sizeof path)))
		return 0;
	Rd r = {buf, plen, 0, 0};
	uint32_t isz = 0;
	int32_t regs = -1, spills = -1;
	take(&r, &isz, 4);
	if (isz != sizeof e->info) {
		warnf(path, 0, "corrupt cache entry (other compiler layout): rebuilding it");
		free(buf);
		return 0;
	}
	take(&r, &e->info, sizeof e->info);
	take(&r, &regs, 4);
	take(&r, &spills, 4);
	e->ptx = take_blob(&r, &e->ptx_len, 1);
	e->cubin = take_blob(&r, &e->cubin_len, 0);
	free(buf);
	const char *why = r.bad || r.at != r.n || !e->ptx || strlen(e->ptx) != e->ptx_len
	                  ? "malformed payload" : check_info(&e->info);
	if (!why && e->cubin && cache_cubin_check(e->cubin, e->cubin_len))
		why = "malformed cubin";
	if (why) {
		warnf(path, 0, "corrupt cache entry (%s): rebuilding it", why);
		cache_entry_free(e);
		memset(e, 0, sizeof *e);
		return 0;
	}
	e->regs = regs;
	e->spill_bytes = spills;
	e->info.llvm_ms = 0;
	return 1;
}

/* ---- writing ---------------------------------------------------------- */

typedef struct Wr { unsigned char *p; size_t n, cap; } Wr;

static void
put(Wr *w, const void *src, size_t n)
{
	if (w->n + n > w->cap) {
		while (w->n + n > w->cap)
			w->cap = w->cap ? w->cap * 2 : 4096;
		w->p = xrealloc(w->p, w->cap);
	}
	memcpy(w->p + w->n, src, n);
	w->n += n;
}

int
cache_write_all(int fd, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n) {
		ssize_t k = write(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

void
cache_put_blob(Cache *c, uint64_t key, const void *payload, size_t plen_)
{
	char path[4200], tmp[4300];
	unsigned char hdr[HDR] = {0};
	uint32_t ver = VERSION;
	uint64_t plen = plen_;
	int fd;

	if (!c)
		return;
	memcpy(hdr, MAGIC, 8);
	memcpy(hdr + 8, &ver, 4);
	memcpy(hdr + 16, &key, 8);
	memcpy(hdr + 24, &plen, 8);
	entry_path(c, key, path, sizeof path);
	if (cache_mac(c->key, c->keylen, hdr, MACAT, payload, plen_, hdr + MACAT)) {
		if (atomic_fetch_add(&c->warned, 1) == 0)
			warnf(path, 0, "cannot seal a cache entry (libcrypto's HMAC failed)");
		return;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
	if ((fd = mkstemp(tmp)) < 0) {
		if (atomic_fetch_add(&c->warned, 1) == 0)
			warnf(tmp, 0, "cannot write a cache entry: %s", strerror(errno));
		return;
	}
	if (cache_write_all(fd, hdr, HDR) || cache_write_all(fd, payload, plen_) || fchmod(fd, 0644)) {
		if (atomic_fetch_add(&c->warned, 1) == 0)
			warnf(tmp, 0, "cannot write a cache entry: %s", strerror(errno));
		close(fd);
		unlink(tmp);
	} else if (close(fd) || rename(tmp, path)) {
		if (atomic_fetch_add(&c->warned, 1) == 0)
			warnf(path, 0, "cannot store a cache entry: %s", strerror(errno));
		unlink(tmp);
	}
}

void
cache_put(Cache *c, uint64_t key, const CacheEntry *e)
{
	Wr w = {0};
	uint32_t isz = sizeof e->info;
	int32_t regs = e->regs, spills = e->spill_bytes;
	uint64_t n;

	if (!c || (e->cubin && cache_cubin_check(e->cubin, e->cubin_len)))
		return;              /* never seal a cubin that is not whole */
	put(&w, &isz, 4);
	put(&w, &e->info, sizeof e->info);
	put(&w, &regs, 4);
	put(&w, &spills, 4);
	n = e->ptx_len;
	put(&w, &n, 8);
	put(&w, e->ptx, e->ptx_len);
	n = e->cubin ? e->cubin_len : 0;
	put(&w, &n, 8);
	if (n)
		put(&w, e->cubin, n);
	cache_put_blob(c, key, w.p, w.n);
	free(w.p);
}
