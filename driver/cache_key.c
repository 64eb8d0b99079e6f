/*
 * cache_key.c — the secret that seals kernel cache entries (cache.h), and
 * the seal itself: HMAC-SHA256 (RFC 2104, FIPS 180-4) from OpenSSL's
 * libcrypto, keyed by the bytes of one key file.
 *
 * The key file is $PRECC_CACHE_KEY, else $XDG_CONFIG_HOME/precc/cache.key,
 * else ~/.config/precc/cache.key. When it does not exist it is made: 32
 * bytes from getrandom(2), written to a mkstemp file (mode 0600) in the
 * same directory and hard-linked into place, so two builds that race to
 * make it agree on one key. A key file is refused (and the cache is off,
 * with one warning) when it is a symlink (O_NOFOLLOW), not a regular file,
 * writable by group or others, readable by others, or shorter than
 * CACHE_KEY_MIN / longer than CACHE_KEY_MAX bytes (docs/artifacts.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include "cache.h"
#include "recipe.h"

enum { NEW_KEY_BYTES = 32 };

/* mkdir -p with mode for the directories it makes. */
static int
mkdir_mode(char *path, mode_t mode)
{
	for (char *p = path + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			int r = mkdir(path, mode);
			*p = '/';
			if (r && errno != EEXIST)
				return -1;
		}
	return mkdir(path, mode) && errno != EEXIST ? -1 : 0;
}

const char *
cache_key_path(char *buf, size_t n)
{
	const char *env = getenv("PRECC_CACHE_KEY"), *xdg = getenv("XDG_CONFIG_HOME"),
	           *home = getenv("HOME");

	if (env && *env)
		snprintf(buf, n, "%s", env);
	else if (xdg && *xdg)
		snprintf(buf, n, "%s/precc/cache.key", xdg);
	else if (home && *home)
		snprintf(buf, n, "%s/.config/precc/cache.key", home);
	else
		return NULL;
	return buf;
}

/* Makes the key file at path (a new random key), unless another process
 * made it first; 0, or -1 with why. */
static int
make_key(const char *path, char *why, size_t whysz)
{
	unsigned char key[NEW_KEY_BYTES];
	char dir[4096], tmp[4200];
	size_t got = 0;

	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir_mode(dir, 0700)) {
			snprintf(why, whysz, "cannot create its directory: %s", strerror(errno));
			return -1;
		}
	}
	while (got < sizeof key) {
		ssize_t k = getrandom(key + got, sizeof key - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			snprintf(why, whysz, "getrandom: %s", strerror(errno));
			return -1;
		}
		got += (size_t)k;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);      /* 0600 */
	if (fd < 0) {
		snprintf(why, whysz, "cannot create it: %s", strerror(errno));
		OPENSSL_cleanse(key, sizeof key);
		return -1;
	}
	int bad = cache_write_all(fd, key, sizeof key) || fchmod(fd, 0600) || fsync(fd);
	OPENSSL_cleanse(key, sizeof key);
	if (close(fd) || bad) {
		snprintf(why, whysz, "cannot write it: %s", strerror(errno));
		unlink(tmp);
		return -1;
	}
	/* link, not rename: the first of two racing builds wins, the second
	 * reads the winner's key */
	if (link(tmp, path) && errno != EEXIST) {
		snprintf(why, whysz, "cannot create it: %s", strerror(errno));
		unlink(tmp);
		return -1;
	}
	unlink(tmp);
	return 0;
}

int
cache_key_load(const char *path, unsigned char *key, size_t *len, char *why, size_t whysz)
{
	struct stat st;
	int fd;

	for (int tries = 0;; tries++) {
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0 || errno != ENOENT || tries)
			break;
		if (make_key(path, why, whysz))
			return -1;
	}
	if (fd < 0) {
		snprintf(why, whysz, errno == ELOOP ? "is a symlink" : "cannot open it: %s",
		         strerror(errno));
		return -1;
	}
	const char *bad = NULL;
	if (fstat(fd, &st))
		bad = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		bad = "not a regular file";
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		bad = "writable by group or others (chmod go-w)";
	else if (st.st_mode & S_IROTH)
		bad = "readable by others: anyone could forge entries (chmod o-r)";
	else if (st.st_size < CACHE_KEY_MIN)
		bad = "shorter than 16 bytes";
	else if (st.st_size > CACHE_KEY_MAX)
		bad = "longer than 4096 bytes";
	size_t n = bad ? 0 : (size_t)st.st_size, got = 0;
	while (!bad && got < n) {
		ssize_t k = read(fd, key + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			bad = k ? strerror(errno) : "shorter than its size (changed while read)";
		else
			got += (size_t)k;
	}
	close(fd);
	if (bad) {
		snprintf(why, whysz, "%s", bad);
		OPENSSL_cleanse(key, CACHE_KEY_MAX);
		return -1;
	}
	*len = n;
	return 0;
}

int
cache_mac(const unsigned char *key, size_t keylen, const void *a, size_t alen,
          const void *b, size_t blen, unsigned char out[CACHE_MAC_BYTES])
{
	char digest[] = "SHA256";
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
		OSSL_PARAM_construct_end(),
	};
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
	size_t outlen = 0;
	int ok = ctx && EVP_MAC_init(ctx, key, keylen, params)
	         && EVP_MAC_update(ctx, a, alen) && EVP_MAC_update(ctx, b, blen)
	         && EVP_MAC_final(ctx, out, &outlen, CACHE_MAC_BYTES)
	         && outlen == CACHE_MAC_BYTES;

	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	return ok ? 0 : -1;
}

int
cache_mac_equal(const unsigned char *x, const unsigned char *y)
{
	return CRYPTO_memcmp(x, y, CACHE_MAC_BYTES) == 0;
}
