/*
 * state.c — the scaling state (amax history rings, scales) and its file.
 *
 * The file is little-endian, laid out in docs/runtime.md: a fixed header
 * (magic, format version, total size, precc version, recipe and model
 * identity hashes, tensor count), the tensor table (history length and
 * name of each), the data (pos, scale, scale_inv, history of each), the
 * caller's stochastic-rounding counter (format 2; format 1 files, which
 * lack it, still load, as counter 0), and a 64-bit FNV-1a of everything
 * before it. FNV-1a's steps are bijections of
 * its state, so any change of a single byte always changes the checksum.
 *
 * Saving writes a temporary file beside the target and renames it into
 * place. Loading checks the whole file before writing the state.
 *
 * Floor 4 (rt.h) of the runtime; base.h lists the floors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "precc/version.h"
#include "rt.h"

#define MAGIC "PRECCSST"          /* precc scaling state */
#define FORMAT_VERSION 2u        /* 2: the SR counter before the checksum */
#define VERSION_BYTES 16
#define HEADER_BYTES 56           /* up to the tensor table */
#define SUM_BYTES 8
#define COUNTER_BYTES(fmt) ((fmt) >= 2 ? 8u : 0u)

typedef struct Tensor {
	char *name;
	uint32_t len;             /* history length */
	uint32_t pos;
	float scale, scale_inv;
	float *hist;              /* into precc_state.hist */
} Tensor;

struct precc_state {
	uint64_t recipe, model;
	uint64_t sr_counter;      /* precc_state_set_sr_counter's */
	size_t n;
	Tensor *t;
	float *hist;              /* all histories, contiguous */
};

static uint64_t fnv1a64(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325u;

	while (n--)
		h = (h ^ *p++) * 0x100000001b3u;
	return h;
}

/* ---- the state ------------------------------------------------------- */

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Distinct names, found by sorting a copy of the pointers. */
static int check_distinct(size_t n, const char *const *names)
{
	const char **sorted;
	int rc = 0;

	if (n < 2)
		return 0;
	sorted = malloc(n * sizeof *sorted);
	if (!sorted) {
		rt_error("state: out of memory");
		return -1;
	}
	memcpy(sorted, names, n * sizeof *sorted);
	qsort(sorted, n, sizeof *sorted, cmp_names);
	for (size_t i = 1; i < n; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0) {
			rt_error("state: tensor '%s' is listed twice", sorted[i]);
			rc = -1;
			break;
		}
	free(sorted);
	return rc;
}

precc_state *precc_state_new(uint64_t recipe_hash, uint64_t model_hash,
                             size_t n, const char *const *names,
                             const uint32_t *history_len)
{
	precc_state *st;
	size_t total = 0;

	if (n && (!names || !history_len)) {
		rt_error("state: %zu tensors but no names or history lengths", n);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = names[i] ? strlen(names[i]) : 0;
		if (len == 0 || len > PRECC_STATE_NAME_MAX) {
			rt_error("state: tensor %zu: the name must be 1 to %d bytes "
			         "(it is %zu)", i, PRECC_STATE_NAME_MAX, len);
			return NULL;
		}
		if (history_len[i] == 0) {
			rt_error("state: tensor '%s': history length 0 (it must be at "
			         "least 1)", names[i]);
			return NULL;
		}
		if (history_len[i] > RT_MAX_STATE_ELEMS) {
			rt_error("state: tensor '%s': history length %u is more than "
			         "%ld", names[i], history_len[i], RT_MAX_STATE_ELEMS);
			return NULL;
		}
		if (total + history_len[i] > (size_t)RT_MAX_STATE_TOTAL) {
			rt_error("state: the histories hold more than %ld words",
			         RT_MAX_STATE_TOTAL);
			return NULL;
		}
		total += history_len[i];
	}
	if (check_distinct(n, names))
		return NULL;
	st = calloc(1, sizeof *st);
	if (!st)
		goto oom;
	st->recipe = recipe_hash;
	st->model = model_hash;
	st->t = calloc(n ? n : 1, sizeof *st->t);
	st->hist = calloc(total ? total : 1, sizeof *st->hist);
	if (!st->t || !st->hist)
		goto oom;
	for (size_t i = 0, off = 0; i < n; i++) {
		Tensor *t = &st->t[i];
		st->n = i + 1;
		t->name = malloc(strlen(names[i]) + 1);
		if (!t->name)
			goto oom;
		strcpy(t->name, names[i]);
		t->len = history_len[i];
		t->scale = t->scale_inv = 1.0f;
		t->hist = st->hist + off;
		off += t->len;
	}
	st->n = n;
	return st;
oom:
	precc_state_free(st);
	rt_error("state: out of memory for %zu tensors", n);
	return NULL;
}

void precc_state_free(precc_state *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n; i++)
		free(st->t[i].name);
	free(st->t);
	free(st->hist);
	free(st);
}

size_t precc_state_count(const precc_state *st) { return st->n; }

uint64_t precc_state_sr_counter(const precc_state *st) { return st->sr_counter; }

void precc_state_set_sr_counter(precc_state *st, uint64_t n) { st->sr_counter = n; }

long precc_state_find(const precc_state *st, const char *name)
{
	for (size_t i = 0; i < st->n; i++)
		if (strcmp(st->t[i].name, name) == 0)
			return (long)i;
	return -1;
}

int precc_state_tensor_at(precc_state *st, size_t i, precc_state_tensor *out)
{
	Tensor *t;

	if (i >= st->n) {
		rt_error("state: tensor %zu is out of range (the state has %zu)", i,
		         st->n);
		return -1;
	}
	t = &st->t[i];
	out->name = t->name;
	out->history_len = t->len;
	out->pos = &t->pos;
	out->amax_history = t->hist;
	out->scale = &t->scale;
	out->scale_inv = &t->scale_inv;
	return 0;
}

/* ---- encoding -------------------------------------------------------- */

static unsigned char *put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		*p++ = (unsigned char)(v >> 8 * i);
	return p;
}

static unsigned char *put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		*p++ = (unsigned char)(v >> 8 * i);
	return p;
}

static unsigned char *putf(unsigned char *p, float f)
{
	uint32_t v;

	memcpy(&v, &f, 4);
	return put32(p, v);
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static float getf(const unsigned char *p)
{
	uint32_t v = get32(p);
	float f;

	memcpy(&f, &v, 4);
	return f;
}

static size_t file_bytes(const precc_state *st)
{
	size_t n = HEADER_BYTES + COUNTER_BYTES(FORMAT_VERSION) + SUM_BYTES;

	for (size_t i = 0; i < st->n; i++)
		n += 6 + strlen(st->t[i].name) + 12 + 4 * (size_t)st->t[i].len;
	return n;
}

static void encode(const precc_state *st, unsigned char *buf, size_t size)
{
	unsigned char *p = buf;
	char version[VERSION_BYTES] = {0};

	strncpy(version, PRECC_VERSION, VERSION_BYTES - 1);
	memcpy(p, MAGIC, 8), p += 8;
	p = put32(p, FORMAT_VERSION);
	p = put64(p, size);
	memcpy(p, version, VERSION_BYTES), p += VERSION_BYTES;
	p = put64(p, st->recipe);
	p = put64(p, st->model);
	p = put32(p, (uint32_t)st->n);
	for (size_t i = 0; i < st->n; i++) {
		size_t len = strlen(st->t[i].name);
		p = put32(p, st->t[i].len);
		*p++ = (unsigned char)len, *p++ = (unsigned char)(len >> 8);
		memcpy(p, st->t[i].name, len), p += len;
	}
	for (size_t i = 0; i < st->n; i++) {
		const Tensor *t = &st->t[i];
		p = put32(p, t->pos);
		p = putf(p, t->scale);
		p = putf(p, t->scale_inv);
		for (uint32_t j = 0; j < t->len; j++)
			p = putf(p, t->hist[j]);
	}
	p = put64(p, st->sr_counter);
	put64(p, fnv1a64(buf, size - SUM_BYTES));
}

/* ---- save ------------------------------------------------------------ */

int precc_state_save(const precc_state *st, const char *path)
{
	size_t size, pathlen = strlen(path);
	unsigned char *buf;
	char *tmp;
	int fd, rc = -1;

	if (st->n > UINT32_MAX) {
		rt_error("state: '%s': %zu tensors do not fit the format", path,
		         st->n);
		return -1;
	}
	size = file_bytes(st);
	buf = malloc(size);
	tmp = malloc(pathlen + sizeof ".tmp.XXXXXX");
	if (!buf || !tmp) {
		rt_error("state: '%s': out of memory for %zu bytes", path, size);
		goto out;
	}
	encode(st, buf, size);
	memcpy(tmp, path, pathlen);
	memcpy(tmp + pathlen, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
	fd = mkstemp(tmp);
	if (fd < 0) {
		rt_error("state: '%s': cannot create the temporary file '%s': %s",
		         path, tmp, strerror(errno));
		goto out;
	}
	fchmod(fd, 0644);
	for (size_t done = 0; done < size;) {
		ssize_t w = write(fd, buf + done, size - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rt_error("state: '%s': writing '%s': %s", path, tmp,
			         w < 0 ? strerror(errno) : "no progress");
			close(fd);
			unlink(tmp);
			goto out;
		}
		done += (size_t)w;
	}
	if (fsync(fd) != 0 || close(fd) != 0) {
		rt_error("state: '%s': flushing '%s': %s", path, tmp, strerror(errno));
		unlink(tmp);
		goto out;
	}
	if (rename(tmp, path) != 0) {
		rt_error("state: '%s': renaming '%s' into place: %s", path, tmp,
		         strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	free(buf);
	free(tmp);
	return rc;
}

/* ---- load ------------------------------------------------------------ */

/* The file, if it is a regular one no larger than st's own file plus a
 * little: nothing is allocated from a size the file alone chose. */
static unsigned char *read_all(const precc_state *st, const char *path, size_t *size)
{
	char why[256];
	unsigned char *buf = (unsigned char *)rt_read_file(path,
		(long)file_bytes(st) + RT_MAX_STATE_SLACK, size, why, sizeof why);

	if (!buf)
		rt_error("state: '%s': cannot open: %s", path, why);
	return buf;
}

/* Checks buf against st; writes nothing. */
static int check(const precc_state *st, const char *path,
                 const unsigned char *buf, size_t size)
{
	const unsigned char *p, *end;
	char version[VERSION_BYTES];
	uint64_t declared, stored, computed, recipe, model;
	uint32_t fmt, n;

	if (memcmp(buf, MAGIC, size < 8 ? size : 8) != 0) {
		rt_error("state: '%s': not a precc scaling-state file (bad magic)",
		         path);
		return -1;
	}
	if (size < 12)
		goto short_file;
	fmt = get32(buf + 8);
	if (fmt > FORMAT_VERSION) {
		rt_error("state: '%s': format version %u is newer than this precc "
		         "(%s) reads (up to %u)", path, fmt, PRECC_VERSION,
		         FORMAT_VERSION);
		return -1;
	}
	if (fmt == 0) {
		rt_error("state: '%s': format version 0 is not valid (corrupt "
		         "header)", path);
		return -1;
	}
	if (size < HEADER_BYTES + SUM_BYTES)
		goto short_file;
	declared = get64(buf + 12);
	end = buf + size - SUM_BYTES;
	if (declared != size) {
		if (declared > size)
			rt_error("state: '%s': truncated (%zu bytes, the header says "
			         "%llu)", path, size, (unsigned long long)declared);
		else
			rt_error("state: '%s': %zu bytes, the header says %llu "
			         "(trailing data or a corrupt header)", path, size,
			         (unsigned long long)declared);
		return -1;
	}
	stored = get64(buf + size - SUM_BYTES);
	computed = fnv1a64(buf, size - SUM_BYTES);
	if (stored != computed) {
		rt_error("state: '%s': checksum mismatch (stored %016llx, computed "
		         "%016llx): the file is corrupt", path,
		         (unsigned long long)stored, (unsigned long long)computed);
		return -1;
	}
	memcpy(version, buf + 20, VERSION_BYTES);
	version[VERSION_BYTES - 1] = 0;
	recipe = get64(buf + 36);
	model = get64(buf + 44);
	n = get32(buf + 52);
	if (recipe != st->recipe) {
		rt_error("state: '%s': recipe mismatch: the file is for recipe "
		         "%016llx (written by precc %s), this state for %016llx",
		         path, (unsigned long long)recipe, version,
		         (unsigned long long)st->recipe);
		return -1;
	}
	if (model != st->model) {
		rt_error("state: '%s': model mismatch: the file is for model "
		         "%016llx (written by precc %s), this state for %016llx",
		         path, (unsigned long long)model, version,
		         (unsigned long long)st->model);
		return -1;
	}
	if (n != st->n) {
		rt_error("state: '%s': tensor list mismatch: the file has %u "
		         "tensors, this state %zu", path, n, st->n);
		return -1;
	}
	if ((size_t)(end - buf) < HEADER_BYTES + COUNTER_BYTES(fmt))
		goto corrupt;
	end -= COUNTER_BYTES(fmt);
	p = buf + HEADER_BYTES;
	for (uint32_t i = 0; i < n; i++) {
		const Tensor *t = &st->t[i];
		uint32_t len;
		size_t namelen;

		if (end - p < 6)
			goto corrupt;
		len = get32(p);
		namelen = (size_t)p[4] | (size_t)p[5] << 8;
		p += 6;
		if ((size_t)(end - p) < namelen)
			goto corrupt;
		if (namelen != strlen(t->name) || memcmp(p, t->name, namelen) != 0 ||
		    len != t->len) {
			rt_error("state: '%s': tensor list mismatch: tensor %u is "
			         "'%.*s' (history %u) in the file, '%s' (history %u) in "
			         "this state", path, i, (int)namelen, (const char *)p,
			         len, t->name, t->len);
			return -1;
		}
		p += namelen;
	}
	for (uint32_t i = 0; i < n; i++) {
		const Tensor *t = &st->t[i];
		if ((size_t)(end - p) < 12 + 4 * (size_t)t->len)
			goto corrupt;
		if (get32(p) >= t->len) {
			rt_error("state: '%s': corrupt: tensor '%s' is at position %u of "
			         "a history of %u", path, t->name, get32(p), t->len);
			return -1;
		}
		p += 12 + 4 * (size_t)t->len;
	}
	if (p != end)
		goto corrupt;
	return 0;
corrupt:
	rt_error("state: '%s': corrupt: the tensor table does not match the "
	         "file size", path);
	return -1;
short_file:
	rt_error("state: '%s': truncated (%zu bytes; the smallest state file "
	         "is %d)", path, size, HEADER_BYTES + SUM_BYTES);
	return -1;
}

int precc_state_load(precc_state *st, const char *path)
{
	const unsigned char *p;
	unsigned char *buf;
	size_t size;

	buf = read_all(st, path, &size);
	if (!buf)
		return -1;
	if (check(st, path, buf, size) != 0) {
		free(buf);
		return -1;
	}
	p = buf + HEADER_BYTES;
	for (size_t i = 0; i < st->n; i++)
		p += 6 + strlen(st->t[i].name);
	for (size_t i = 0; i < st->n; i++) {
		Tensor *t = &st->t[i];
		t->pos = get32(p);
		t->scale = getf(p + 4);
		t->scale_inv = getf(p + 8);
		p += 12;
		for (uint32_t j = 0; j < t->len; j++, p += 4)
			t->hist[j] = getf(p);
	}
	st->sr_counter = get32(buf + 8) >= 2 ? get64(p) : 0;
	free(buf);
	return 0;
}

void rt_state_ids(const precc_state *st, uint64_t *recipe, uint64_t *model)
{
	*recipe = st->recipe;
	*model = st->model;
}
