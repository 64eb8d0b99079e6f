/*
 * fake_launch.c — what the fake driver (fake_cuda.c) checks of a launch,
 * from the manifests of $FAKE_CUDA_MANIFEST (artifact directories,
 * DIR[:DIR...]): a GPU punishes a grid that misses part of the data
 * (silently), too little shared memory or a pointer short of the buffer (a
 * fault), and a param list of other sizes (garbage), so the fake refuses
 * each of them.
 *
 * A module is matched to the manifest's kernels whose PTX or cubin file has
 * its bytes; a launch of one of their entries must then have:
 *  - block (threads, 1, 1) and the kernel's `smem` as dynamic shared memory;
 *  - the params the manifest gives, in the runtime's order (docs/artifacts.md
 *    "params"): one pointer per param into a fake allocation with the
 *    param's bytes at M left, 16-byte aligned; the sync scratch (sync_words
 *    x 4 bytes); i64 m, a positive multiple of m_multiple; i64 cols (a
 *    kernel with "cols": the columns of its data param's own type); i64
 *    seed; each tensor map as the fake encoded it;
 *  - the grid of precc/grid.h at that M, restated here with its own ceiling
 *    divisions so that a mutant of grid.h or of the runtime cannot also
 *    change what it is checked against: tiled (ceil(cols / tile_cols),
 *    ceil(rows / tile_rows), 1), flat (ceil(rows x cols / elems_per_cta),
 *    1, 1), phases summed on x; a cooperative or persistent kernel on
 *    min(tiles, resident CTAs) along x, launched cooperatively iff
 *    "cooperative"; one with "cluster" c (the persistent GEMM in clusters
 *    along its row tiles) launched with the cluster dimension (c, 1, 1) on
 *    c x min(column tiles x ceil(row tiles / c), resident clusters) CTAs,
 *    and any other kernel with no cluster.
 * Kernels whose files are equal (placeholders) are all candidates: the
 * launch must fit one of them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* libc's headers above, before hidden visibility applies to declarations */
#pragma GCC visibility push(hidden)
#include "../../runtime/json.c"

#define FK_MAXPARAM 32
#define FK_MAXPHASE 8
#define FK_MAXFILE 8

typedef struct FkType { int fmt_bytes, packed; int rank; long dim[2]; } FkType;
typedef struct FkGeom { int tiled, data; long epc, tile_rows, tile_cols; } FkGeom;

struct fake_kern {
	char name[64], entry[128], bulk[128];
	int threads, has_m, has_seed, has_cols, ntmap, nparam, nphase, cooperative, persistent;
	long smem, sync_words, m_multiple, cluster;
	FkType param[FK_MAXPARAM];
	FkGeom phase[FK_MAXPHASE];
	char *file[FK_MAXFILE];
	size_t flen[FK_MAXFILE];
	int nfile;
};

typedef struct FkManifest {
	char dir[4096];
	struct stat st;
	struct fake_kern *k;
	int n;
} FkManifest;

/* every manifest read stays: modules matched against it may outlive it */
static FkManifest **manifests;
static int nmanifest;

long fake_alloc_room(uint64_t ptr);   /* fake_cuda.c: bytes from ptr to its allocation's end */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (s = malloc((size_t)n + 1)) && fread(s, 1, (size_t)n, f) == (size_t)n) {
		s[n] = 0;
		*len = (size_t)n;
	} else {
		free(s);
		s = NULL;
	}
	fclose(f);
	return s;
}

/* "bf16[M,256]{..}", "e8m0[4096,M/32]": the element bytes (e2m1 two a
 * byte along the last dim) and dims, M as -1, M/k as -k */
static int parse_type(const char *s, FkType *t)
{
	static const struct { const char *name; int bytes, packed; } fmts[] = {
		{"f32", 4, 0}, {"tf32", 4, 0}, {"f16", 2, 0}, {"bf16", 2, 0}, {"e4m3", 1, 0},
		{"e5m2", 1, 0}, {"e8m0", 1, 0}, {"e3m2", 1, 0}, {"e2m3", 1, 0}, {"e2m1", 1, 1},
		{"i32", 4, 0},   /* gemm_grouped's offsets */
	};
	const char *p = strchr(s, '[');
	size_t n = p ? (size_t)(p - s) : 0;

	memset(t, 0, sizeof *t);
	for (size_t i = 0; p && i < sizeof fmts / sizeof *fmts; i++)
		if (strlen(fmts[i].name) == n && !strncmp(s, fmts[i].name, n))
			t->fmt_bytes = fmts[i].bytes, t->packed = fmts[i].packed;
	if (!t->fmt_bytes)
		return -1;
	for (p++;; p++) {
		char *end;
		if (t->rank == 2)
			return -1;
		if (*p == 'M' && p[1] == '/') {
			t->dim[t->rank++] = -strtol(p + 2, &end, 10);
			p = end;
		} else if (*p == 'M') {
			t->dim[t->rank++] = -1;
			p++;
		} else {
			t->dim[t->rank++] = strtol(p, &end, 10);
			p = end;
		}
		if (*p != ',')
			break;
	}
	return *p == ']' ? 0 : -1;
}

static long extent(long d, long m) { return d >= 0 ? d : (m + -d - 1) / -d; }

static void rows_cols(const FkType *t, long m, long *rows, long *cols)
{
	*rows = t->rank == 2 ? extent(t->dim[0], m) : 1;
	*cols = extent(t->dim[t->rank - 1], m);
}

static long type_bytes(const FkType *t, long m)
{
	long r, c;
	rows_cols(t, m, &r, &c);
	return r * (t->packed ? (c + 1) / 2 : c * t->fmt_bytes);
}

static long num(const json *o, const char *key, long dflt)
{
	const json *v = json_get(o, key);
	return v && v->kind == JSON_NUM ? (long)v->num : dflt;
}

static int flag(const json *o, const char *key)
{
	const json *v = json_get(o, key);
	return v && v->kind == JSON_BOOL && v->b;
}

static const char *str(const json *o, const char *key)
{
	const json *v = json_get(o, key);
	return v && v->kind == JSON_STR ? v->str : "";
}

static void read_geom(const json *g, FkGeom *out)
{
	out->tiled = flag(g, "tiled");
	out->epc = num(g, "elems_per_cta", 0);
	out->tile_rows = num(g, "tile_rows", 0);
	out->tile_cols = num(g, "tile_cols", 0);
	out->data = -1;
}

static int read_kernel(const char *dir, const json *j, const json *params, struct fake_kern *k)
{
	const json *g = json_get(j, "grid"), *ph = json_get(j, "phases"), *fs = json_get(j, "files");

	snprintf(k->name, sizeof k->name, "%s", str(j, "name"));
	snprintf(k->entry, sizeof k->entry, "%s", str(j, "entry"));
	snprintf(k->bulk, sizeof k->bulk, "%s", str(j, "bulk_entry"));
	k->threads = (int)num(j, "threads", 0);
	k->has_m = flag(j, "has_m");
	k->has_seed = flag(j, "has_seed");
	k->has_cols = num(j, "cols", 0) > 0;
	k->cooperative = !strcmp(str(j, "launch"), "cooperative");
	k->persistent = !strcmp(str(j, "launch"), "persistent");
	k->smem = num(j, "smem", 0);
	k->cluster = num(j, "cluster", 1);
	k->sync_words = num(j, "sync_words", 0);
	k->m_multiple = g ? num(g, "m_multiple", 1) : 1;
	const json *tm = json_get(j, "tmaps");
	k->ntmap = tm && tm->kind == JSON_ARR ? (int)tm->n : 0;
	if (!params || params->kind != JSON_ARR || params->n > FK_MAXPARAM || !g)
		return -1;
	k->nparam = (int)params->n;
	for (int i = 0; i < k->nparam; i++)
		if (parse_type(str(params->item[i], "type"), &k->param[i]))
			return -1;
	/* one geometry, or a fused kernel's phases */
	for (int p = 0; p < (ph ? (int)ph->n : 1) && p < FK_MAXPHASE; p++) {
		const json *e = ph ? ph->item[p] : g;
		const char *data = str(e, "data");
		read_geom(e, &k->phase[p]);
		for (int i = 0; i < k->nparam; i++)
			if (!strcmp(str(params->item[i], "name"), data))
				k->phase[p].data = i;
		if (k->phase[p].data < 0)
			return -1;
		k->nphase = p + 1;
	}
	for (size_t t = 0; fs && fs->kind == JSON_OBJ && t < fs->n; t++)
		for (int w = 0; w < 2 && k->nfile < FK_MAXFILE; w++) {
			const char *f = str(fs->item[t], w ? "cubin" : "ptx");
			char path[8192];
			if (!*f)
				continue;
			snprintf(path, sizeof path, "%s/%s", dir, f);
			if ((k->file[k->nfile] = slurp(path, &k->flen[k->nfile])))
				k->nfile++;
		}
	return 0;
}

/* The manifest in dir, read again when it changed. */
static FkManifest *manifest(const char *dir)
{
	char path[4200];
	struct stat st;
	FkManifest *m;
	char *text, err[512];
	size_t len;
	json *root;
	const json *ks;

	snprintf(path, sizeof path, "%s/manifest.json", dir);
	if (stat(path, &st) != 0)
		return NULL;
	for (int i = nmanifest - 1; i >= 0; i--) {
		m = manifests[i];
		if (strcmp(m->dir, dir))
			continue;
		if (m->st.st_ino == st.st_ino && m->st.st_size == st.st_size &&
		    m->st.st_mtim.tv_sec == st.st_mtim.tv_sec &&
		    m->st.st_mtim.tv_nsec == st.st_mtim.tv_nsec)
			return m;
		break;
	}
	if (!(text = slurp(path, &len)))
		return NULL;
	root = json_parse(text, len, path, err, sizeof err);
	free(text);
	ks = json_get(root, "kernels");
	m = calloc(1, sizeof *m);
	if (!root || !ks || ks->kind != JSON_ARR || !m ||
	    !(m->k = calloc(ks->n + 1, sizeof *m->k))) {
		fprintf(stderr, "fake_cuda: FAKE_CUDA_MANIFEST: %s: %s\n", path,
		        root ? "no 'kernels'" : err);
		json_free(root);
		free(m);
		return NULL;
	}
	snprintf(m->dir, sizeof m->dir, "%s", dir);
	m->st = st;
	for (size_t i = 0; i < ks->n; i++)
		if (read_kernel(dir, ks->item[i], json_get(ks->item[i], "params"), &m->k[m->n]) == 0)
			m->n++;
	json_free(root);
	manifests = realloc(manifests, (size_t)(nmanifest + 1) * sizeof *manifests);
	manifests[nmanifest++] = m;
	return m;
}

/* An image's bytes, as a driver sizes it: a 64-bit ELF (cubin) ends with
 * its section or program headers (ptxas writes the program headers
 * last), PTX (and the tests' placeholders) at its NUL. */
static size_t image_bytes(const char *image)
{
	if (!memcmp(image, "\177ELF\2", 5)) {
		uint64_t phoff, shoff;
		uint16_t phentsize, phnum, shentsize, shnum;
		memcpy(&phoff, image + 0x20, 8);
		memcpy(&shoff, image + 0x28, 8);
		memcpy(&phentsize, image + 0x36, 2);
		memcpy(&phnum, image + 0x38, 2);
		memcpy(&shentsize, image + 0x3a, 2);
		memcpy(&shnum, image + 0x3c, 2);
		uint64_t ph = phoff + (uint64_t)phentsize * phnum, sh = shoff + (uint64_t)shentsize * shnum;
		return (size_t)(ph > sh ? ph : sh);
	}
	return strlen(image);
}

/* The kernels whose file is image (at most max) in the manifests of
 * $FAKE_CUDA_MANIFEST (DIR[:DIR...]), or -1 when it is not set. */
int fake_launch_match(const char *image, const struct fake_kern **out, int max)
{
	const char *env = getenv("FAKE_CUDA_MANIFEST");
	size_t len;
	int n = 0;

	if (!env || !*env)
		return -1;
	len = image_bytes(image);
	while (*env) {
		char dir[4096];
		size_t k = strcspn(env, ":");
		FkManifest *m;
		snprintf(dir, sizeof dir, "%.*s", (int)k, env);
		env += k + (env[k] == ':');
		if (!(m = manifest(dir)))
			continue;
		for (int i = 0; i < m->n; i++)
			for (int f = 0; f < m->k[i].nfile && n < max; f++)
				if (len == m->k[i].flen[f] && !memcmp(image, m->k[i].file[f], len)) {
					out[n++] = &m->k[i];
					break;
				}
	}
	return n;
}

static int say(char *why, size_t whysz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int say(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return -1;
}

static int check_one(const struct fake_kern *k, const unsigned g[3], const unsigned b[3],
                     unsigned smem, int coop, const unsigned cl[3], void **params,
                     long resident, long clusters, char *why, size_t whysz)
{
	int n = 0;
	int64_t m = 1;
	long tiles = 0, want[3] = {1, 1, 1};

	if (b[0] != (unsigned)k->threads || b[1] != 1 || b[2] != 1)
		return say(why, whysz, "block (%u, %u, %u), the kernel has %d threads", b[0], b[1],
		           b[2], k->threads);
	if ((long)smem != k->smem)
		return say(why, whysz, "%u bytes of dynamic shared memory, the kernel needs %ld",
		           smem, k->smem);
	if (coop != k->cooperative)
		return say(why, whysz, "launched %scooperatively, the manifest says \"%s\"",
		           coop ? "" : "not ", k->cooperative ? "cooperative" : "normal");
	/* a kernel in clusters launched without the attribute hangs on a GPU
	 * (its CTAs wait for peers); one launched in clusters it was not
	 * built for reads a peer's shared memory that is not its */
	if (cl[0] != (unsigned)k->cluster || cl[1] != 1 || cl[2] != 1)
		return say(why, whysz, "launched in clusters of %ux%ux%u, the kernel's are %ldx1x1%s",
		           cl[0], cl[1], cl[2], k->cluster,
		           k->cluster > 1 && cl[0] == 1 ? " (no CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)" : "");
	/* i64 m first: the pointers' sizes depend on it */
	if (k->has_m) {
		memcpy(&m, params[k->nparam + (k->sync_words > 0)], 8);
		if (m < 1 || m % k->m_multiple)
			return say(why, whysz, "m = %lld, not a positive multiple of %ld", (long long)m,
			           k->m_multiple);
	}
	for (; n < k->nparam; n++) {
		uint64_t p;
		long need = type_bytes(&k->param[n], m), room;
		memcpy(&p, params[n], 8);
		if (p % 16)
			return say(why, whysz, "param %d = 0x%llx is not 16-byte aligned", n,
			           (unsigned long long)p);
		if ((room = fake_alloc_room(p)) < need)
			return say(why, whysz, "param %d = 0x%llx has %ld bytes of device memory "
			           "left, its buffer at M=%lld needs %ld", n, (unsigned long long)p,
			           room, (long long)m, need);
	}
	if (k->sync_words) {
		uint64_t p;
		memcpy(&p, params[n++], 8);
		if (fake_alloc_room(p) < k->sync_words * 4)
			return say(why, whysz, "the sync scratch 0x%llx is not %ld bytes of device "
			           "memory", (unsigned long long)p, k->sync_words * 4);
	}
	n += k->has_m;
	if (k->has_cols) {
		/* what the code takes for its data's columns: the data's own,
		 * from its type (not the manifest's "cols", which the runtime
		 * reads too) */
		int64_t c;
		long rows, cols;
		memcpy(&c, params[n++], 8);
		rows_cols(&k->param[k->phase[0].data], m, &rows, &cols);
		if (c != cols)
			return say(why, whysz, "cols = %lld, its data has %ld columns", (long long)c, cols);
	}
	n += k->has_seed;
	for (int t = 0; t < k->ntmap; t++, n++)
		for (int i = 0; i < 128; i++)
			if (((const unsigned char *)params[n])[i] != 0x5a)
				return say(why, whysz, "param %d is not a tensor map the driver encoded", n);
	/* the grid at M */
	for (int p = 0; p < k->nphase; p++) {
		const FkGeom *e = &k->phase[p];
		long rows, cols, gx, gy;
		rows_cols(&k->param[e->data], m, &rows, &cols);
		if (e->tiled) {
			gx = (cols + e->tile_cols - 1) / e->tile_cols;
			gy = (rows + e->tile_rows - 1) / e->tile_rows;
		} else {
			gx = (rows * cols + e->epc - 1) / e->epc;
			gy = 1;
		}
		tiles += gx * gy;
		want[0] = k->nphase > 1 ? tiles : gx;
		want[1] = k->nphase > 1 ? 1 : gy;
	}
	if (k->cluster > 1) {
		/* one tiled phase: want = (column tiles, row tiles) */
		long n = want[0] * ((want[1] + k->cluster - 1) / k->cluster);
		want[0] = k->cluster * (clusters >= 1 && clusters < n ? clusters : n);
		want[1] = 1;
	} else if (k->cooperative || k->persistent) {
		want[0] = resident >= 1 && resident < tiles ? resident : tiles;
		want[1] = 1;
	}
	if (g[0] != want[0] || g[1] != want[1] || g[2] != want[2])
		return say(why, whysz, "grid (%u, %u, %u) at M=%lld, its data needs (%ld, %ld, 1)%s",
		           g[0], g[1], g[2], (long long)m, want[0], want[1],
		           k->cluster > 1 ? " (cluster x min(cluster tiles, resident clusters))"
		           : k->cooperative || k->persistent ? " (min(tiles, resident CTAs))" : "");
	return 0;
}

/* 0: the launch of entry fits one of the n candidate kernels (or entry is
 * a bulk_entry, whose table the manifest does not describe); -1 with why. */
int fake_launch_check(const struct fake_kern *const *k, int n, const char *entry,
                      const unsigned g[3], const unsigned b[3], unsigned smem, int coop,
                      const unsigned cl[3], void **params, long resident, long clusters,
                      char *why, size_t whysz)
{
	int tried = 0;

	if (n == 0)
		return say(why, whysz, "'%s' is of a module whose bytes are no kernel file of "
		           "FAKE_CUDA_MANIFEST's manifest", entry);
	for (int i = 0; i < n; i++) {
		char one[512];
		if (!strcmp(k[i]->bulk, entry))
			return 0;
		if (strcmp(k[i]->entry, entry))
			continue;
		if (check_one(k[i], g, b, smem, coop, cl, params, resident, clusters, one, sizeof one) == 0)
			return 0;
		if (!tried++)
			snprintf(why, whysz, "kernel '%s' (%s): %s", k[i]->name, entry, one);
	}
	if (!tried)
		return say(why, whysz, "'%s' is no entry of kernel '%s'", entry, k[0]->name);
	return -1;
}
#pragma GCC visibility pop
