/*
 * artifact.c — floor 1 (manifest.h): read and validate an artifact
 * directory's manifest.json (docs/artifacts.md), parse each kernel's IR
 * with precc_ir (the cpu backend runs it; both backends take the kernel
 * ABI from it), and pick the target whose layers a device runs. Loading
 * the kernels is the backend's (backend_cuda.c, one floor up).
 *
 * Every manifest error names the file, the line:col of the value and the
 * path of the key: "DIR/manifest.json:14:7: error: kernels[0]: missing key
 * 'threads'". Nothing is half-loaded: a failure frees all of it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precc/interp.h"
#include "manifest.h"
#include "precc/version.h"

#define MANIFEST_FORMAT 2   /* 2: layers name their layer_classes entry */

typedef struct Ctx {
	const char *file;         /* "DIR/manifest.json" */
	int failed;
	int device_sm;            /* the device's compute capability, 0: none */
	const char *want;         /* precc_rt_load_target's target, or NULL */
} Ctx;

static int bad(Ctx *c, const json *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int vbad(const char *file, const json *at, const char *fmt, va_list ap)
{
	char msg[2048];

	vsnprintf(msg, sizeof msg, fmt, ap);
	if (at)
		rt_error("%s:%d:%d: error: %s", file, at->line, at->col, msg);
	else
		rt_error("%s: error: %s", file, msg);
	return -1;
}

static int bad(Ctx *c, const json *at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vbad(c->file, at, fmt, ap);
	va_end(ap);
	c->failed = 1;
	return -1;
}

int rt_manifest_error(const char *file, const json *at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vbad(file, at, fmt, ap);
	va_end(ap);
	return -1;
}

/* The value of key in obj, of kind k; an error naming path and key when
 * it is missing or of another kind. */
static const json *need(Ctx *c, const json *obj, const char *path,
                        const char *key, json_kind k)
{
	const json *v = json_get(obj, key);

	if (!v) {
		bad(c, obj, "%s%smissing key '%s'", path, *path ? ": " : "", key);
		return NULL;
	}
	if (v->kind != k) {
		bad(c, v, "%s%s'%s' is %s, expected %s", path, *path ? ": " : "",
		    key, json_kind_name(v->kind), json_kind_name(k));
		return NULL;
	}
	return v;
}

static char *dup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);

	if (d)
		memcpy(d, s, n);
	return d;
}

static char *need_str(Ctx *c, const json *obj, const char *path,
                      const char *key)
{
	const json *v = need(c, obj, path, key, JSON_STR);
	char *s;

	if (!v)
		return NULL;
	if (!(s = dup(v->str)))
		bad(c, v, "out of memory");
	return s;
}

/* An integer in [lo, hi]. */
static int need_long(Ctx *c, const json *obj, const char *path,
                     const char *key, long lo, long hi, long *out)
{
	const json *v = need(c, obj, path, key, JSON_NUM);

	if (!v)
		return -1;
	/* the range first: converting 1e300 to long is undefined */
	if (!(v->num >= (double)lo && v->num <= (double)hi) ||
	    v->num != (double)(long)v->num)
		return bad(c, v, "%s: '%s' is %g, expected an integer in [%ld, %ld]",
		           path, key, v->num, lo, hi);
	*out = (long)v->num;
	return 0;
}

static int need_bool(Ctx *c, const json *obj, const char *path,
                     const char *key, int *out)
{
	const json *v = need(c, obj, path, key, JSON_BOOL);

	if (!v)
		return -1;
	*out = v->b;
	return 0;
}

static int parse_hash(Ctx *c, const json *obj, const char *path, uint64_t *h)
{
	const json *v = need(c, obj, path, "hash", JSON_STR);
	uint64_t x = 0;

	if (!v)
		return -1;
	if (v->len != 16)
		goto no;
	for (int i = 0; i < 16; i++) {
		char ch = v->str[i];
		x <<= 4;
		if (ch >= '0' && ch <= '9') x |= (uint64_t)(ch - '0');
		else if (ch >= 'a' && ch <= 'f') x |= (uint64_t)(ch - 'a' + 10);
		else goto no;
	}
	*h = x;
	return 0;
no:
	return bad(c, v, "%s: 'hash' is \"%s\", expected 16 lowercase hex digits",
	           path, v->str);
}

/* ---- types ------------------------------------------------------------ */

int rt_type_parse(const char *s, rt_type *t)
{
	char fmt[16];
	const char *p = strchr(s, '['), *q;
	size_t n;
	int f;

	memset(t, 0, sizeof *t);
	if (!p || (n = (size_t)(p - s)) == 0 || n >= sizeof fmt)
		return -1;
	memcpy(fmt, s, n);
	fmt[n] = 0;
	if (!strcmp(fmt, "i32"))
		t->index = 1, f = PRECC_FP32;   /* ir.h's index type */
	else if ((f = ir_fmt_by_name(fmt)) < 0)
		return -1;
	t->fmt = (precc_format)f;
	p++;
	for (;;) {
		long d;
		char *end;
		if (t->rank == MAXRANK)
			return -1;
		if (*p == 'M') {
			p++;
			d = DIM_M;
			if (*p == '/') {
				p++;
				if (*p < '1' || *p > '9')
					return -1;
				errno = 0;
				d = -strtol(p, &end, 10);
				if (errno || d < -RT_MAX_DIM)
					return -1;
				p = end;
			}
		} else {
			if (*p < '0' || *p > '9')
				return -1;
			errno = 0;
			d = strtol(p, &end, 10);
			if (errno || d <= 0 || d > RT_MAX_DIM)
				return -1;
			p = end;
		}
		t->dim[t->rank++] = d;
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p++ != ']')
			return -1;
		break;
	}
	if (*p == '{') {
		q = strchr(p, '}');
		if (!q || q[1])
			return -1;
	} else if (*p)
		return -1;
	return 0;
}

static long extent(long d, long m) { return d >= 0 ? d : m / -d + (m % -d != 0); }

size_t rt_type_bytes(const rt_type *t, long m, long *rows, long *cols)
{
	long r = 1, c;
	size_t n;

	if (t->rank == 2)
		r = extent(t->dim[0], m), c = extent(t->dim[1], m);
	else
		c = extent(t->dim[0], m);
	if (rows)
		*rows = r;
	if (cols)
		*cols = c;
	/* e2m1: two codes a byte, an odd last dim (an odd M) has no layout */
	if (r <= 0 || c <= 0 || !(n = precc_interp_tensor_bytes(t->fmt, r, c)))
		return 0;
	return n;
}

const rt_extent *rt_buffer_extent(const rt_layer *l, int b, long m)
{
	rt_extents *x = l->ext;

	if (x->m != m || m <= 0) {
		for (int i = 0; i < l->nbuf; i++) {
			rt_extent *e = &x->buf[i];
			e->bytes = rt_type_bytes(&l->buf[i].type, m, &e->rows, &e->cols);
		}
		x->m = m;
	}
	return &x->buf[b];
}

static int type_eq(const rt_type *a, const rt_type *b)
{
	if (a->fmt != b->fmt || a->rank != b->rank || a->index != b->index)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != b->dim[i])
			return 0;
	return 1;
}

static int need_type(Ctx *c, const json *obj, const char *path, char **str,
                     rt_type *t)
{
	const json *v = need(c, obj, path, "type", JSON_STR);

	if (!v)
		return -1;
	if (rt_type_parse(v->str, t))
		return bad(c, v, "%s: type \"%s\" is not FORMAT[DIM,DIM]{GRAN} "
		           "(DIM: N, M or M/N)", path, v->str);
	if (!(*str = dup(v->str)))
		return bad(c, v, "out of memory");
	return 0;
}

/* ---- kernels ------------------------------------------------------------ */

static int find_param(const rt_kdesc *k, const char *name)
{
	for (int i = 0; i < k->nparam; i++)
		if (strcmp(k->param[i].name, name) == 0)
			return i;
	return -1;
}

/* The kernel ABI of codegen/codegen.h from the IR: every param op, then
 * every ret operand. State updates are the layer's ("updates"), never a
 * kernel's: the verifier refuses update in a kernel. */
static int kernel_abi(Ctx *c, const json *at, rt_kdesc *k)
{
	const Func *f = k->fn;
	int *v = calloc((size_t)f->nins * 2 + 1, sizeof *v), n = 0, nin = 0;

	if (!v)
		return bad(c, at, "out of memory");
	k->abi_value = v;
	for (int i = 0; i < f->nins; i++)
		if (f->ins[i].op == OP_param)
			v[n++] = f->ins[i].res;
	nin = n;
	for (int i = 0; i < f->nins; i++) {
		if (f->ins[i].op == OP_ret)
			for (int a = 0; a < f->ins[i].narg; a++)
				v[n++] = f->ins[i].arg[a];
		if (f->ins[i].op == OP_update)
			return bad(c, at, "kernel '%s': its ir has an update; state "
			           "updates belong to the layer ('updates')", k->name);
	}
	if (n != k->nparam)
		return bad(c, at, "kernel '%s': 'params' lists %d pointers, its IR "
		           "has %d (%d params, %d outputs)", k->name, k->nparam, n,
		           nin, n - nin);
	for (int i = 0; i < n; i++) {
		const Type *t = &f->val[v[i]].type;
		rt_type it = {t->fmt, t->rank, {t->dim[0], t->rank > 1 ? t->dim[1] : 0}, t->index};
		if (k->param[i].out != (i >= nin))
			return bad(c, at, "kernel '%s': param %d '%s' is dir \"%s\", the "
			           "IR makes it an %s", k->name, i, k->param[i].name,
			           k->param[i].out ? "out" : "in",
			           i >= nin ? "output" : "input");
		if (!type_eq(&it, &k->param[i].type))
			return bad(c, at, "kernel '%s': param %d '%s' is %s in 'params' "
			           "but %%%s in the IR has another format or shape",
			           k->name, i, k->param[i].name, k->param[i].type_str,
			           f->val[v[i]].name);
	}
	return 0;
}

/* "tmaps": [{param, elem_bytes, rows, cols, box_rows, box_cols, swizzle}]
 * with cuTensorMapEncodeTiled's rules (CUDA Driver API, "Tensor Map Object
 * Management"): 16-byte row strides, boxes of 1..256 per side whose inner
 * bytes are a multiple of 16 and, swizzled, within the swizzle span. rows
 * or cols -1 is the launch's M; an M of columns keeps 16-byte rows by the
 * kernel's m_multiple, checked with the param once the grid is read. */
static int read_tmaps(Ctx *c, const json *a, const char *path, rt_kdesc *k)
{
	static const char *const key[] = {"param", "elem_bytes", "rows", "cols", "box_rows",
	                                  "box_cols", "swizzle"};
	if (a->kind != JSON_ARR || a->n < 1 || a->n > RT_MAXTMAP)
		return bad(c, a, "%s: 'tmaps' is not an array of 1 to %d tensor maps", path, RT_MAXTMAP);
	for (size_t i = 0; i < a->n; i++) {
		const json *o = a->item[i];
		char p2[300];
		long x[7];
		static const long lo[] = {0, 1, -1, -1, 1, 1, 0}, hi[] = {31, 4, 1L << 40, 1L << 40, 256, 256, 128};
		snprintf(p2, sizeof p2, "%s tmaps[%zu]", path, i);
		if (o->kind != JSON_OBJ)
			return bad(c, o, "%s is not an object", p2);
		for (int f = 0; f < 7; f++)
			if (need_long(c, o, p2, key[f], lo[f], hi[f], &x[f]))
				return -1;
		rt_tmap *t = &k->tmap[i];
		*t = (rt_tmap){(int)x[0], (int)x[1], x[2], x[3], (int)x[4], (int)x[5], (int)x[6]};
		if ((t->elem_bytes != 1 && t->elem_bytes != 2 && t->elem_bytes != 4) || t->rows == 0 ||
		    t->cols == 0 || (t->swizzle && t->swizzle != 32 && t->swizzle != 64 && t->swizzle != 128) ||
		    (t->cols > 0 && t->cols * t->elem_bytes % 16) || t->box_cols * t->elem_bytes % 16 ||
		    (t->swizzle && t->box_cols * t->elem_bytes > t->swizzle))
			return bad(c, o, "%s: not a tensor map cuTensorMapEncodeTiled takes (elements of 1, 2 "
			           "or 4 bytes, rows and cols -1 or positive, 16-byte row strides and box rows, "
			           "swizzle 0/32/64/128 at least the box's inner bytes)", p2);
	}
	k->ntmap = (int)a->n;
	return 0;
}

static int read_kernel(Ctx *c, const json *j, int idx, rt_kdesc *k)
{
	char path[256], err[1024];
	const json *grid, *params, *zero, *v, *ph;
	long x;

	snprintf(path, sizeof path, "kernels[%d]", idx);
	if (j->kind != JSON_OBJ)
		return bad(c, j, "%s is %s, expected an object", path,
		           json_kind_name(j->kind));
	if (!(k->name = need_str(c, j, path, "name")))
		return -1;
	snprintf(path, sizeof path, "kernels[%d] '%s'", idx, k->name);
	if (!(k->shape = need_str(c, j, path, "shape")) ||
	    !(k->entry = need_str(c, j, path, "entry")) ||
	    !(k->ir = need_str(c, j, path, "ir")) ||
	    need_long(c, j, path, "threads", 1, RT_MAX_THREADS, &x))
		return -1;
	k->threads = (int)x;
	if (json_get(j, "bulk_entry") && !(k->bulk_entry = need_str(c, j, path, "bulk_entry")))
		return -1;
	if (need_bool(c, j, path, "has_m", &k->has_m) ||
	    need_bool(c, j, path, "has_seed", &k->has_seed))
		return -1;
	if ((v = json_get(j, "launch"))) {
		if (v->kind != JSON_STR || (strcmp(v->str, "cooperative") &&
		                            strcmp(v->str, "persistent") &&
		                            strcmp(v->str, "normal")))
			return bad(c, v, "%s: 'launch' is not \"normal\", \"cooperative\" "
			           "or \"persistent\"", path);
		k->cooperative = strcmp(v->str, "cooperative") == 0;
		k->persistent = strcmp(v->str, "persistent") == 0;
	}
	if (json_get(j, "sync_words") &&
	    need_long(c, j, path, "sync_words", 0, RT_MAX_SYNC_WORDS, &k->sync_words))
		return -1;
	if ((json_get(j, "cols") || json_get(j, "cols_align")) &&
	    (need_long(c, j, path, "cols", 1, RT_MAX_DIM, &k->cols) ||
	     need_long(c, j, path, "cols_align", 1, RT_MAX_DIM, &k->cols_align)))
		return -1;
	if (k->cols % (k->cols_align ? k->cols_align : 1))
		return bad(c, json_get(j, "cols"), "%s: cols %ld is not a multiple of its cols_align %ld: "
		           "the kernel's code takes whole blocks and 16-byte rows only", path, k->cols,
		           k->cols_align);
	if ((v = json_get(j, "smem"))) {
		if (need_long(c, j, path, "smem", 0, RT_MAX_SMEM, &x))
			return -1;
		k->smem = (unsigned)x;
	}
	if ((v = json_get(j, "tmaps")) && read_tmaps(c, v, path, k))
		return -1;
	if (json_get(j, "target") && !(k->target = need_str(c, j, path, "target")))
		return -1;
	k->var = -1;
	if ((v = json_get(j, "m_variant"))) {
		char vp[300];
		snprintf(vp, sizeof vp, "%s m_variant", path);
		if (v->kind != JSON_OBJ)
			return bad(c, v, "%s is %s, expected an object", vp, json_kind_name(v->kind));
		if (need_long(c, v, vp, "m_min", 1, RT_MAX_DIM, &k->var_m_min) ||
		    !(k->var_name = need_str(c, v, vp, "kernel")))
			return -1;
	}
	if (!(params = need(c, j, path, "params", JSON_ARR)))
		return -1;
	if (params->n == 0 || params->n > 32)
		return bad(c, params, "%s: %zu params, expected 1 to 32", path,
		           params->n);
	if (!(k->param = calloc(params->n, sizeof *k->param)))
		return bad(c, params, "out of memory");
	for (size_t i = 0; i < params->n; i++) {
		const json *p = params->item[i];
		rt_param *kp = &k->param[k->nparam];
		char pp[300];
		char *dir;
		snprintf(pp, sizeof pp, "%s params[%zu]", path, i);
		if (p->kind != JSON_OBJ)
			return bad(c, p, "%s is %s, expected an object", pp,
			           json_kind_name(p->kind));
		k->nparam++;
		if (!(kp->name = need_str(c, p, pp, "name")) ||
		    need_type(c, p, pp, &kp->type_str, &kp->type) ||
		    !(dir = need_str(c, p, pp, "dir")))
			return -1;
		kp->out = strcmp(dir, "out") == 0;
		if (!kp->out && strcmp(dir, "in") != 0) {
			free(dir);
			return bad(c, json_get(p, "dir"), "%s: dir is \"%s\", expected "
			           "\"in\" or \"out\"", pp, json_get(p, "dir")->str);
		}
		free(dir);
		if (find_param(k, kp->name) != k->nparam - 1)
			return bad(c, p, "%s: a second param named '%s'", pp, kp->name);
	}
	for (int i = 0; i < k->ntmap; i++)
		if (k->tmap[i].param >= k->nparam)
			return bad(c, json_get(j, "tmaps"), "%s: tmaps[%d] maps param %d of %d", path, i,
			           k->tmap[i].param, k->nparam);
	if (!(grid = need(c, j, path, "grid", JSON_OBJ)))
		return -1;
	{
		char gp[300];
		const json *d;
		snprintf(gp, sizeof gp, "%s grid", path);
		if (need_bool(c, grid, gp, "tiled", &k->tiled) ||
		    !(d = need(c, grid, gp, "data", JSON_STR)) ||
		    need_long(c, grid, gp, "elems_per_cta", 0, RT_MAX_ELEMS_PER_CTA,
		              &k->elems_per_cta) ||
		    need_long(c, grid, gp, "tile_rows", 0, RT_MAX_TILE, &k->tile_rows) ||
		    need_long(c, grid, gp, "tile_cols", 0, RT_MAX_TILE, &k->tile_cols) ||
		    need_long(c, grid, gp, "m_multiple", 1, RT_MAX_M_MULTIPLE, &k->m_multiple))
			return -1;
		if ((k->data = find_param(k, d->str)) < 0)
			return bad(c, d, "%s: data '%s' is not one of the params", gp,
			           d->str);
		if ((ph = json_get(j, "phases"))) {
			if (ph->kind != JSON_ARR || ph->n < 1 || ph->n > RT_MAXPHASE)
				return bad(c, ph, "%s: 'phases' is not an array of 1 to %d "
				           "phases", path, RT_MAXPHASE);
			for (size_t p = 0; p < ph->n; p++) {
				const json *e = ph->item[p], *pd;
				rt_geom *g = &k->phase[k->nphase++];
				char pp[320];
				snprintf(pp, sizeof pp, "%s phases[%zu]", path, p);
				if (e->kind != JSON_OBJ)
					return bad(c, e, "%s is %s, expected an object", pp,
					           json_kind_name(e->kind));
				if (need_bool(c, e, pp, "tiled", &g->tiled) ||
				    !(pd = need(c, e, pp, "data", JSON_STR)) ||
				    need_long(c, e, pp, "elems_per_cta", 0, RT_MAX_ELEMS_PER_CTA,
				              &g->elems_per_cta) ||
				    need_long(c, e, pp, "tile_rows", 0, RT_MAX_TILE, &g->tile_rows) ||
				    need_long(c, e, pp, "tile_cols", 0, RT_MAX_TILE, &g->tile_cols))
					return -1;
				if ((g->data = find_param(k, pd->str)) < 0)
					return bad(c, pd, "%s: data '%s' is not one of the params",
					           pp, pd->str);
				if (c->device_sm && (g->tiled ? g->tile_rows < 1 || g->tile_cols < 1
				                         : g->elems_per_cta < 1))
					return bad(c, e, "%s: a %s grid needs %s >= 1", pp,
					           g->tiled ? "tiled" : "flat",
					           g->tiled ? "tile_rows and tile_cols"
					                    : "elems_per_cta");
			}
		} else if (c->device_sm && (k->tiled ? k->tile_rows < 1 || k->tile_cols < 1
		                                : k->elems_per_cta < 1))
			/* only a launch needs the grid: the cpu backend runs the IR */
			return bad(c, grid, "%s: a %s grid needs %s >= 1", gp,
			           k->tiled ? "tiled" : "flat",
			           k->tiled ? "tile_rows and tile_cols" : "elems_per_cta");
	}
	/* thread-block clusters (the sm_90a GEMM's tile=BMxBN:2x1): the CTAs
	 * of a cluster take consecutive row tiles, and the runtime sizes the
	 * persistent grid to a multiple of the cluster; a grid by the data
	 * would not divide at every M */
	k->cluster = 1;
	if ((v = json_get(j, "cluster"))) {
		if (need_long(c, j, path, "cluster", 1, 2, &x))
			return -1;
		k->cluster = (int)x;
		if (k->cluster > 1 && (!k->persistent || k->nphase || !k->tiled))
			return bad(c, v, "%s: 'cluster' %d needs \"launch\": \"persistent\" and one tiled "
			           "grid (its CTAs take consecutive row tiles; a grid by the data is not a "
			           "multiple of the cluster at every M)", path, k->cluster);
	}
	if (!(zero = need(c, j, path, "zero_outputs", JSON_ARR)))
		return -1;
	if (!(k->zero = calloc(zero->n + 1, sizeof *k->zero)))
		return bad(c, zero, "out of memory");
	for (size_t i = 0; i < zero->n; i++) {
		const json *z = zero->item[i];
		int p;
		if (z->kind != JSON_STR || (p = find_param(k, z->str)) < 0 ||
		    !k->param[p].out)
			return bad(c, z, "%s: zero_outputs[%zu] is not the name of an "
			           "out param", path, i);
		k->zero[k->nzero++] = p;
	}
	/* the columns the code is told are those of its data */
	if (k->cols && (k->param[k->data].type.rank != 2 || k->param[k->data].type.dim[1] != k->cols))
		return bad(c, json_get(j, "cols"), "%s: cols %ld but its data '%s' is %s", path, k->cols,
		           k->param[k->data].name, k->param[k->data].type_str);
	/* a map over M: the kernel takes m, and M columns keep TMA's 16-byte
	 * row stride at every M the launch allows */
	for (int i = 0; i < k->ntmap; i++) {
		const rt_tmap *t = &k->tmap[i];
		if ((t->rows < 0 || t->cols < 0) && !k->has_m)
			return bad(c, json_get(j, "tmaps"), "%s: tmaps[%d] spans M but the kernel has no m",
			           path, i);
		if (t->cols < 0 && k->m_multiple * t->elem_bytes % 16)
			return bad(c, json_get(j, "tmaps"), "%s: tmaps[%d] has M columns of %d-byte elements "
			           "but m_multiple %ld: rows would not be 16-byte multiples", path, i,
			           t->elem_bytes, k->m_multiple);
	}
	/* the IR: the cpu backend runs it, both take the ABI from it */
	if (!(k->mod = ir_parse(k->ir, k->name, err, sizeof err)))
		return bad(c, json_get(j, "ir"), "%s: its ir does not parse: %s",
		           path, err);
	for (int i = 0; i < k->mod->nfn && !k->fn; i++)
		if (k->mod->nfn == 1 || strcmp(k->mod->fn[i]->name, k->name) == 0)
			k->fn = k->mod->fn[i];
	if (!k->fn)
		return bad(c, json_get(j, "ir"), "%s: its ir has no function @%s",
		           path, k->name);
	if (ir_verify(k->mod, err, sizeof err))
		return bad(c, json_get(j, "ir"), "%s: its ir does not verify: %s",
		           path, err);
	return kernel_abi(c, j, k);
}

/* ---- layers ------------------------------------------------------------ */

static int find_kernel(const rt_artifact *a, const char *name)
{
	for (int i = 0; i < a->nkern; i++)
		if (strcmp(a->kern[i].name, name) == 0)
			return i;
	return -1;
}

/* kernel i's m_variant: another kernel of the manifest with no variant of
 * its own that takes the same arguments (names, types, scalars) */
static int resolve_variant(Ctx *c, rt_artifact *a, const json *j, int i)
{
	rt_kdesc *k = &a->kern[i], *v;
	const json *at = json_get(j, "m_variant");
	int x;

	if (!k->var_name)
		return 0;
	if ((x = find_kernel(a, k->var_name)) < 0)
		return bad(c, at, "kernels[%d] '%s' m_variant: kernel '%s' is not in 'kernels'", i,
		           k->name, k->var_name);
	v = &a->kern[x];
	if (x == i || v->var_name)
		return bad(c, at, "kernels[%d] '%s' m_variant: kernel '%s' %s", i, k->name,
		           k->var_name, x == i ? "is the kernel itself" : "has a variant of its own");
	if (!k->has_m || strcmp(k->shape, "gemm") || strcmp(v->shape, "gemm"))
		return bad(c, at, "kernels[%d] '%s' m_variant: only a GEMM that takes M has one", i,
		           k->name);
	if ((k->target || v->target) && !(k->target && v->target && !strcmp(k->target, v->target)))
		return bad(c, at, "kernels[%d] '%s' m_variant: kernel '%s' is for %s, not %s", i,
		           k->name, k->var_name, v->target ? v->target : "no target",
		           k->target ? k->target : "no target");
	int same = v->nparam == k->nparam && v->has_m == k->has_m && v->has_seed == k->has_seed &&
	           v->sync_words == k->sync_words && v->ntmap == k->ntmap;
	for (int p = 0; same && p < k->nparam; p++)
		same = !strcmp(v->param[p].name, k->param[p].name) &&
		       !strcmp(v->param[p].type_str, k->param[p].type_str) &&
		       v->param[p].out == k->param[p].out;
	if (!same)
		return bad(c, at, "kernels[%d] '%s' m_variant: kernel '%s' takes other arguments", i,
		           k->name, k->var_name);
	k->var = x;
	return 0;
}

static int find_buffer(const rt_layer *l, const char *name)
{
	for (int i = 0; i < l->nbuf; i++)
		if (strcmp(l->buf[i].name, name) == 0)
			return i;
	return -1;
}

static long gcd(long a, long b) { while (b) { long t = a % b; a = b; b = t; } return a; }

/* A layer: its FQN, and its body (buffers, steps, updates) inline or in
 * layer_classes[class], which layers that lower alike share. */
static int read_layer(Ctx *c, rt_artifact *a, const json *j, const char *what, int idx,
                      const json *classes, rt_layer *l)
{
	char path[600];
	const json *bufs, *steps, *ups;
	int group = !strcmp(what, "groups");

	snprintf(path, sizeof path, "%s[%d]", what, idx);
	if (j->kind != JSON_OBJ)
		return bad(c, j, "%s is %s, expected an object", path,
		           json_kind_name(j->kind));
	if (!(l->fqn = need_str(c, j, path, group ? "name" : "fqn")))
		return -1;
	snprintf(path, sizeof path, "%s[%d] '%.400s'", what, idx, l->fqn);
	l->root = -1;
	if (json_get(j, "shares_input") && !(l->shares_input = need_str(c, j, path, "shares_input")))
		return -1;
	if (json_get(j, "class")) {
		long ci;
		if (!classes)
			return bad(c, j, "%s: 'class' given, but the manifest has no "
			           "'layer_classes'", path);
		if (need_long(c, j, path, "class", 0, (long)classes->n - 1, &ci))
			return -1;
		j = classes->item[ci];
		snprintf(path, sizeof path, "%s[%d] '%.400s' (layer_classes[%ld])",
		         what, idx, l->fqn, ci);
		if (j->kind != JSON_OBJ)
			return bad(c, j, "%s is %s, expected an object", path,
			           json_kind_name(j->kind));
	}
	if (!(bufs = need(c, j, path, "buffers", JSON_ARR)) ||
	    !(steps = need(c, j, path, "steps", JSON_ARR)))
		return -1;
	if (!(l->ext = calloc(1, sizeof *l->ext + (bufs->n + 1) * sizeof *l->ext->buf)) ||
	    !(l->buf = calloc(bufs->n + 1, sizeof *l->buf)) ||
	    !(l->step = calloc(steps->n + 1, sizeof *l->step)))
		return bad(c, j, "out of memory");
	for (size_t i = 0; i < bufs->n; i++) {
		const json *b = bufs->item[i];
		rt_buffer *lb = &l->buf[l->nbuf];
		char bp[700];
		snprintf(bp, sizeof bp, "%s buffers[%zu]", path, i);
		if (b->kind != JSON_OBJ)
			return bad(c, b, "%s is %s, expected an object", bp,
			           json_kind_name(b->kind));
		l->nbuf++;
		if (!(lb->name = need_str(c, b, bp, "name")) ||
		    need_type(c, b, bp, &lb->type_str, &lb->type) ||
		    !(lb->role = need_str(c, b, bp, "role")))
			return -1;
		if (find_buffer(l, lb->name) != l->nbuf - 1)
			return bad(c, b, "%s: a second buffer named '%s'", bp, lb->name);
		size_t sbytes = rt_type_bytes(&lb->type, 1, NULL, NULL);   /* 0: overflow */
		if (!strcmp(lb->role, "state") &&
		    (sbytes == 0 || sbytes > (size_t)RT_MAX_STATE_ELEMS * 4))
			return bad(c, b, "%s: state buffer '%s' is %s, more than %ld f32 "
			           "words", bp, lb->name, lb->type_str, RT_MAX_STATE_ELEMS);
	}
	l->m_multiple = 1;
	for (size_t i = 0; i < steps->n; i++) {
		const json *s = steps->item[i], *kn, *args, *g;
		rt_step *st = &l->step[l->nstep];
		const rt_kdesc *k;
		char sp[700];
		snprintf(sp, sizeof sp, "%s steps[%zu]", path, i);
		if (s->kind != JSON_OBJ)
			return bad(c, s, "%s is %s, expected an object", sp,
			           json_kind_name(s->kind));
		l->nstep++;
		if (!(kn = need(c, s, sp, "kernel", JSON_STR)) ||
		    !(args = need(c, s, sp, "args", JSON_ARR)))
			return -1;
		if ((st->kernel = find_kernel(a, kn->str)) < 0)
			return bad(c, kn, "%s: kernel '%s' is not in 'kernels'", sp,
			           kn->str);
		if ((g = json_get(s, "gemm")) && g->kind == JSON_STR &&
		    !(st->gemm = dup(g->str)))
			return bad(c, g, "out of memory");
		k = &a->kern[st->kernel];
		if ((int)args->n != k->nparam)
			return bad(c, args, "%s: %zu args for kernel '%s', which takes %d",
			           sp, args->n, k->name, k->nparam);
		if (!(st->arg = calloc(args->n + 1, sizeof *st->arg)))
			return bad(c, args, "out of memory");
		for (size_t p = 0; p < args->n; p++) {
			const json *an = args->item[p];
			int b;
			if (an->kind != JSON_STR)
				return bad(c, an, "%s: args[%zu] is %s, expected a buffer "
				           "name", sp, p, json_kind_name(an->kind));
			if ((b = find_buffer(l, an->str)) < 0)
				return bad(c, an, "%s: args[%zu] '%s' is not one of the "
				           "layer's buffers", sp, p, an->str);
			if (!type_eq(&l->buf[b].type, &k->param[p].type))
				return bad(c, an, "%s: buffer '%s' is %s, kernel '%s' param "
				           "'%s' is %s", sp, an->str, l->buf[b].type_str,
				           k->name, k->param[p].name, k->param[p].type_str);
			st->arg[p] = b;
			if (k->param[p].out)
				l->buf[b].written = 1;
		}
		long lcm, f = l->m_multiple / gcd(l->m_multiple, k->m_multiple);
		if (__builtin_mul_overflow(f, k->m_multiple, &lcm) || lcm > RT_MAX_LAYER_M_MULTIPLE)
			return bad(c, s, "%s: the layer's M multiple (the lcm of its steps' "
			           "m_multiple) exceeds %ld", sp, RT_MAX_LAYER_M_MULTIPLE);
		l->m_multiple = lcm;
	}
	/* e2m1 is two codes a byte along the last dim: an M there must be even */
	for (int b = 0; b < l->nbuf; b++) {
		const rt_type *t = &l->buf[b].type;
		if (t->fmt == PRECC_E2M1 && t->dim[t->rank - 1] == -1 && l->m_multiple % 2)
			l->m_multiple *= 2;
	}
	if ((ups = json_get(j, "updates"))) {
		if (ups->kind != JSON_ARR)
			return bad(c, ups, "%s: 'updates' is %s, expected an array", path,
			           json_kind_name(ups->kind));
		if (!(l->update = calloc(ups->n + 1, sizeof *l->update)))
			return bad(c, ups, "out of memory");
		for (size_t i = 0; i < ups->n; i++) {
			const json *u = ups->item[i], *sn, *nn;
			char up[700];
			int sb, nb;
			snprintf(up, sizeof up, "%s updates[%zu]", path, i);
			if (u->kind != JSON_OBJ)
				return bad(c, u, "%s is %s, expected an object", up,
				           json_kind_name(u->kind));
			if (!(sn = need(c, u, up, "state", JSON_STR)) ||
			    !(nn = need(c, u, up, "next", JSON_STR)))
				return -1;
			if ((sb = find_buffer(l, sn->str)) < 0 ||
			    (nb = find_buffer(l, nn->str)) < 0)
				return bad(c, sb < 0 ? sn : nn, "%s: '%s' is not one of the "
				           "layer's buffers", up, sb < 0 ? sn->str : nn->str);
			if (sb == nb)
				return bad(c, u, "%s: state and next are both '%s'", up,
				           sn->str);
			if (!type_eq(&l->buf[sb].type, &l->buf[nb].type))
				return bad(c, u, "%s: state '%s' is %s, next '%s' is %s", up,
				           sn->str, l->buf[sb].type_str, nn->str,
				           l->buf[nb].type_str);
			l->update[l->nupdate][0] = sb;
			l->update[l->nupdate][1] = nb;
			l->nupdate++;
			l->buf[sb].written = 1;
		}
	}
	return 0;
}

/* ---- files ------------------------------------------------------------- */

/* A file name from the manifest: one plain name inside DIR. */
static int plain_name(const char *s)
{
	return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/* The one check of a kernel file against the manifest (the cuda loader
 * and precc-run): a bit flipped in a cubin would otherwise load and run. */
int rt_kernel_file(const char *dir, const json *tf, const char *what,
                   char **image, size_t *len, char *why, size_t whysz)
{
	const json *f = json_get(tf, what), *sz, *hx;
	char path[4096], key[32], err[256], hex[17];

	*image = NULL;
	if (!f) {
		snprintf(why, whysz, "no '%s' file", what);
		return -1;
	}
	if (f->kind != JSON_STR || !plain_name(f->str)) {
		snprintf(why, whysz, "%s \"%s\" is not a plain file name inside the "
		         "artifact directory", what, f->kind == JSON_STR ? f->str : "?");
		return -2;
	}
	snprintf(path, sizeof path, "%s/%s", dir, f->str);
	snprintf(key, sizeof key, "%s_bytes", what);
	sz = json_get(tf, key);
	snprintf(key, sizeof key, "%s_fnv1a64", what);
	hx = json_get(tf, key);
	if ((sz || hx) && !(sz && hx && sz->kind == JSON_NUM && hx->kind == JSON_STR &&
	                    hx->len == 16)) {
		snprintf(why, whysz, "'%s': manifest.json's %s_bytes and %s_fnv1a64 are not "
		         "a number and 16 hex digits", path, what, what);
		return -2;
	}
	if (!(*image = rt_read_file(path, RT_MAX_KERNEL_BYTES, len, err, sizeof err))) {
		snprintf(why, whysz, "cannot read '%s': %s", path, err);
		return -1;
	}
	if (!sz)
		return 0;
	snprintf(hex, sizeof hex, "%016llx",
	         (unsigned long long)ir_hash_bytes(0xcbf29ce484222325ULL, *image, *len));
	if ((double)*len != sz->num || strcmp(hex, hx->str)) {
		snprintf(why, whysz, "'%s' is not the file precc build wrote: %zu bytes, "
		         "FNV-1a 64 %s; manifest.json records %.0f bytes, %s (truncated or "
		         "changed since precc build)", path, *len, hex, sz->num, hx->str);
		free(*image);
		*image = NULL;
		return -2;
	}
	return 1;
}

/* ---- the manifest --------------------------------------------------------- */

/* The policy of a manifest without "training" (docs/artifacts.md): here,
 * on the manifest's floor, because reading "training" starts from it. */
void precc_training_policy_default(precc_training_policy *p)
{
	memset(p, 0, sizeof *p);
	p->loss_scale = PRECC_LOSS_NONE;
	p->loss_scale_init = 65536.0f;
	p->growth_factor = 2.0f;
	p->backoff_factor = 0.5f;
	p->growth_interval = 2000;
	p->master_weights = PRECC_FP32;
	p->optimizer_state = PRECC_FP32;
}

/* A number in [lo, hi]. */
static int need_num(Ctx *c, const json *obj, const char *path, const char *key,
                    double lo, double hi, float *out)
{
	const json *v = need(c, obj, path, key, JSON_NUM);

	if (!v)
		return -1;
	if (!(v->num >= lo && v->num <= hi))
		return bad(c, v, "%s: '%s' is %g, expected a number in [%g, %g]", path,
		           key, v->num, lo, hi);
	*out = (float)v->num;
	return 0;
}

/* The optional "training": the recipe's training policy. */
static int read_training(Ctx *c, const json *m, precc_training_policy *tp)
{
	static const char *const loss[] = {"none", "static", "dynamic"};
	const json *t = json_get(m, "training"), *v;
	long interval;
	int sr;

	precc_training_policy_default(tp);
	if (!t)
		return 0;
	if (t->kind != JSON_OBJ)
		return bad(c, t, "'training' is %s, expected an object",
		           json_kind_name(t->kind));
	if (!(v = need(c, t, "training", "loss_scale", JSON_STR)))
		return -1;
	for (tp->loss_scale = 0; tp->loss_scale < 3; tp->loss_scale++)
		if (strcmp(v->str, loss[tp->loss_scale]) == 0)
			break;
	if (tp->loss_scale == 3)
		return bad(c, v, "training: 'loss_scale' is \"%s\", expected none, "
		           "static or dynamic", v->str);
	if (need_num(c, t, "training", "loss_scale_init", 0, 3.4e38, &tp->loss_scale_init) ||
	    need_num(c, t, "training", "growth_factor", 1, 3.4e38, &tp->growth_factor) ||
	    need_num(c, t, "training", "backoff_factor", 0, 1, &tp->backoff_factor) ||
	    need_long(c, t, "training", "growth_interval", 1, INT32_MAX, &interval) ||
	    need_bool(c, t, "training", "stochastic_rounding", &sr))
		return -1;
	tp->growth_interval = (int)interval;
	tp->stochastic_rounding = sr;
	for (int k = 0; k < 2; k++) {
		const char *key = k ? "optimizer_state" : "master_weights";
		int f;
		if (!(v = need(c, t, "training", key, JSON_STR)))
			return -1;
		/* any format precc knows: precc_adamw_step says which it keeps */
		if ((f = precc_format_by_name(v->str)) < 0)
			return bad(c, v, "training: '%s' is \"%s\", not a format", key,
			           v->str);
		*(k ? &tp->optimizer_state : &tp->master_weights) = f;
	}
	tp->from_manifest = 1;
	return 0;
}

/* groups[i]: its step (a layer after the manifest's, read_layer) and what
 * the group says of itself, checked against that step's buffers. */
static int read_group(Ctx *c, rt_artifact *a, const json *j, int i, const json *cls,
                      NameTab *fqns)
{
	static const char *const g3[] = {"fprop", "dgrad", "wgrad"};
	rt_layer *l = &a->layer[a->nlayer + i];
	rt_group *g = &a->group[i];
	const json *gl, *el;
	long v;
	char path[600];

	a->ngroup++;
	if (read_layer(c, a, j, "groups", i, cls, l))
		return -1;
	l->root = -1;
	snprintf(path, sizeof path, "groups[%d] '%.400s'", i, l->fqn);
	for (int k = 0; k < i; k++)
		if (!strcmp(a->group[k].name, l->fqn))
			return bad(c, j, "%s: a second group of that name", path);
	if (ir_names_get(fqns, l->fqn) >= 0)
		return bad(c, j, "%s: a layer has the group's name", path);
	g->name = l->fqn;   /* the layer's; freed with it */
	if (need_long(c, j, path, "experts", 1, RT_MAX_DIM, &v))
		return -1;
	g->experts = (int)v;
	if (need_long(c, j, path, "n", 1, RT_MAX_DIM, &g->n) ||
	    need_long(c, j, path, "k", 1, RT_MAX_DIM, &g->k) ||
	    !(gl = need(c, j, path, "gemms", JSON_ARR)) ||
	    !(el = need(c, j, path, "expert_layers", JSON_ARR)))
		return -1;
	for (size_t q = 0; q < gl->n; q++) {
		int k = 0;
		while (k < 3 && !(gl->item[q]->kind == JSON_STR && !strcmp(gl->item[q]->str, g3[k])))
			k++;
		if (k == 3)
			return bad(c, gl->item[q], "%s: gemms[%zu] is not \"fprop\", \"dgrad\" or "
			           "\"wgrad\"", path, q);
		g->gemm[k] = 1;
	}
	if ((long)el->n != g->experts)
		return bad(c, el, "%s: %zu expert_layers for %d experts", path, el->n, g->experts);
	if (!(g->expert = calloc(el->n + 1, sizeof *g->expert)))
		return bad(c, el, "out of memory");
	for (size_t e = 0; e < el->n; e++) {
		int li = el->item[e]->kind == JSON_STR ? ir_names_get(fqns, el->item[e]->str) : -1;
		if (li < 0)
			return bad(c, el->item[e], "%s: expert_layers[%zu] is not one of the layers",
			           path, e);
		g->expert[e] = li;
	}
	/* its step: x [M, k], w [experts * n, k], offs i32[experts] */
	g->offs = -1;
	for (int b = 0; b < l->nbuf; b++) {
		const rt_buffer *bf = &l->buf[b];
		if (!strcmp(bf->role, "offsets")) {
			if (g->offs >= 0 || !bf->type.index || bf->type.rank != 1 ||
			    bf->type.dim[0] != g->experts)
				return bad(c, j, "%s: buffer '%s' (%s): one offsets buffer, i32[%d]", path,
				           bf->name, bf->type_str, g->experts);
			g->offs = b;
		} else if (bf->type.index)
			return bad(c, j, "%s: buffer '%s' is %s but not the offsets", path, bf->name,
			           bf->type_str);
		else if ((!strcmp(bf->role, "weight") && (bf->type.rank != 2 ||
		          bf->type.dim[0] != g->experts * g->n || bf->type.dim[1] != g->k)) ||
		         (!strcmp(bf->role, "input") && (bf->type.rank != 2 || bf->type.dim[0] >= 0 ||
		          bf->type.dim[1] != g->k)))
			return bad(c, j, "%s: buffer '%s' is %s, not the group's (%d experts of "
			           "[%ld, %ld])", path, bf->name, bf->type_str, g->experts, g->n, g->k);
	}
	if (g->offs < 0)
		return bad(c, j, "%s: its step has no offsets buffer", path);
	for (int s = 0; s < l->nstep; s++) {
		rt_kdesc *k = &a->kern[l->step[s].kernel];
		k->used = 1;
		if (k->var >= 0)
			a->kern[k->var].used = 1;
	}
	return 0;
}

static int read_manifest(Ctx *c, rt_artifact *a, const json *m)
{
	const json *v, *r, *md, *tg, *ks, *ls;
	int tgi, cubin_ok = 0;
	long fmt;

	if (m->kind != JSON_OBJ)
		return bad(c, m, "the manifest is %s, expected an object",
		           json_kind_name(m->kind));
	/* versions first: another precc's manifest may differ in everything */
	if (need_long(c, m, "", "precc_manifest", 0, 1L << 30, &fmt) ||
	    !(a->precc_version = need_str(c, m, "", "precc_version")))
		return -1;
	if (fmt != MANIFEST_FORMAT || strcmp(a->precc_version, PRECC_VERSION))
		return bad(c, json_get(m, fmt != MANIFEST_FORMAT ? "precc_manifest"
		                                                 : "precc_version"),
		           "written by precc %s (manifest format %ld); this precc_rt "
		           "is precc %s (manifest format %d): rebuild the artifacts "
		           "with precc %s", a->precc_version, fmt, PRECC_VERSION,
		           MANIFEST_FORMAT, PRECC_VERSION);
	if (!(a->llvm_version = need_str(c, m, "", "llvm_version")) ||
	    !(r = need(c, m, "", "recipe", JSON_OBJ)) ||
	    !(a->recipe_name = need_str(c, r, "recipe", "name")) ||
	    parse_hash(c, r, "recipe", &a->recipe_hash) ||
	    !(md = need(c, m, "", "model", JSON_OBJ)) ||
	    !(a->model_name = need_str(c, md, "model", "name")) ||
	    parse_hash(c, md, "model", &a->model_hash) ||
	    !(tg = need(c, m, "", "targets", JSON_ARR)) ||
	    !(ks = need(c, m, "", "kernels", JSON_ARR)) ||
	    !(ls = need(c, m, "", "layers", JSON_ARR)) ||
	    read_training(c, m, &a->training))
		return -1;
	if (!(a->target = calloc(tg->n + 1, sizeof *a->target)) ||
	    !(a->kern = calloc(ks->n + 1, sizeof *a->kern)) ||
	    !(a->layer = calloc(ls->n + 1, sizeof *a->layer)))
		return bad(c, m, "out of memory");
	for (size_t i = 0; i < tg->n; i++) {
		if ((v = tg->item[i])->kind != JSON_STR)
			return bad(c, v, "targets[%zu] is %s, expected a string", i,
			           json_kind_name(v->kind));
		if (!(a->target[a->ntarget++] = dup(v->str)))
			return bad(c, v, "out of memory");
	}
	for (size_t i = 0; i < ks->n; i++) {
		a->nkern++;
		if (read_kernel(c, ks->item[i], (int)i, &a->kern[i]))
			return -1;
		if (find_kernel(a, a->kern[i].name) != (int)i)
			return bad(c, ks->item[i], "kernels[%zu]: a second kernel named "
			           "'%s'", i, a->kern[i].name);
	}
	for (size_t i = 0; i < ks->n; i++)
		if (resolve_variant(c, a, ks->item[i], (int)i))
			return -1;
	/* the target: cpu reads the first target's layers; cuda the device's
	 * own (sm_XYa, then sm_XY), else the newest older one's PTX */
	tgi = 0;
	if (a->ntarget == 0)
		return bad(c, tg, "'targets' is empty");
	if (c->device_sm) {
		int dev = c->device_sm, best = -1, besti = -1;
		char want[2][16];
		snprintf(want[0], sizeof want[0], "sm_%da", dev);
		snprintf(want[1], sizeof want[1], "sm_%d", dev);
		tgi = -1;
		for (int w = 0; w < 2 && tgi < 0; w++)
			for (int t = 0; t < a->ntarget; t++)
				if (strcmp(a->target[t], want[w]) == 0)
					tgi = t, cubin_ok = 1;
		for (int t = 0; t < a->ntarget && tgi < 0; t++) {
			int sm;
			char tail;
			if (sscanf(a->target[t], "sm_%d%c", &sm, &tail) == 1 && sm < dev &&
			    sm > best)
				best = sm, besti = t;
		}
		if (tgi < 0)
			tgi = besti;   /* PTX only: a cubin is for its own sm */
		if (tgi < 0) {
			char list[512] = "";
			for (int t = 0; t < a->ntarget; t++)
				snprintf(list + strlen(list), sizeof list - strlen(list),
				         "%s%s", t ? ", " : "", a->target[t]);
			if (dev < 89)
				return bad(c, tg, "no target for this device (sm_%d): the "
				           "artifacts are for %s, and precc's oldest target "
				           "is sm_89 (fp8 needs it)", dev, list);
			return bad(c, tg, "no target for this device (sm_%d): the "
			           "artifacts are for %s; rebuild with --target %s", dev,
			           list, dev == 89 ? "sm_89" : dev == 90 ? "sm_90a"
			           : "sm_90 (PTX the driver JITs for newer devices)");
		}
	}
	if (c->want) {
		int w = -1;
		for (int t = 0; t < a->ntarget; t++)
			if (strcmp(a->target[t], c->want) == 0)
				w = t;
		if (w < 0)
			return bad(c, tg, "target %s is not one of the manifest's "
			           "targets", c->want);
		if (c->device_sm && w != tgi)
			return bad(c, tg, "target %s requested, but this device runs "
			           "%s", c->want, a->target[tgi]);
		tgi = w;
	}
	a->layers_of = a->target[tgi];
	a->own_target = cubin_ok;
	const json *gs = json_get(m, "groups");
	if (tgi > 0) {
		const json *tl = json_get(m, "target_layers");
		if (!(ls = tl ? json_get(tl, a->target[tgi]) : NULL))
			return bad(c, tl ? tl : m, "missing key 'target_layers.%s' (the "
			           "layers of target %s)", a->target[tgi], a->target[tgi]);
		if (ls->kind != JSON_ARR)
			return bad(c, ls, "'target_layers.%s' is %s, expected an array",
			           a->target[tgi], json_kind_name(ls->kind));
		const json *tgr = json_get(m, "target_groups");
		if (gs && !(gs = tgr ? json_get(tgr, a->target[tgi]) : NULL))
			return bad(c, tgr ? tgr : m, "missing key 'target_groups.%s' (the "
			           "expert groups of target %s)", a->target[tgi], a->target[tgi]);
	}
	if (gs && gs->kind != JSON_ARR)
		return bad(c, gs, "'groups' is %s, expected an array", json_kind_name(gs->kind));
	free(a->layer);
	if (!(a->layer = calloc(ls->n + (gs ? gs->n : 0) + 1, sizeof *a->layer)) ||
	    (gs && !(a->group = calloc(gs->n + 1, sizeof *a->group))))
		return bad(c, ls, "out of memory");
	const json *cls = json_get(m, "layer_classes");
	if (cls && cls->kind != JSON_ARR)
		return bad(c, cls, "'layer_classes' is %s, expected an array",
		           json_kind_name(cls->kind));
	NameTab fqns;            /* a hash: DeepSeek-V3 has 45,091 layers */
	ir_names_init(&fqns, ls->n);
	for (size_t i = 0; i < ls->n; i++) {
		a->nlayer++;
		if (read_layer(c, a, ls->item[i], "layers", (int)i, cls, &a->layer[i]) ||
		    (ir_names_put(&fqns, a->layer[i].fqn, (int)i) >= 0 &&
		     bad(c, ls->item[i], "layers[%zu]: a second layer named '%s'", i,
		         a->layer[i].fqn))) {
			ir_names_free(&fqns);
			return -1;
		}
		for (int s = 0; s < a->layer[i].nstep; s++) {
			rt_kdesc *k = &a->kern[a->layer[i].step[s].kernel];
			k->used = 1;
			if (k->var >= 0)
				a->kern[k->var].used = 1;
		}
	}
	/* shares_input: an earlier layer that shares no input itself (the
	 * first of those that read the tensor) */
	for (int i = 0; i < a->nlayer; i++) {
		rt_layer *l = &a->layer[i];
		int r = l->shares_input ? ir_names_get(&fqns, l->shares_input) : -1;
		if (l->shares_input && (r < 0 || r >= i || a->layer[r].shares_input)) {
			bad(c, ls->item[i], "layers[%d] '%.400s': shares_input '%.400s' %s", i, l->fqn,
			    l->shares_input, r < 0 ? "names no layer" : r >= i ? "is not an earlier layer"
			    : "shares an input itself (name the first layer that reads it)");
			ir_names_free(&fqns);
			return -1;
		}
		l->root = r;
	}
	for (size_t i = 0; gs && i < gs->n; i++)
		if (read_group(c, a, gs->item[i], (int)i, cls, &fqns)) {
			ir_names_free(&fqns);
			return -1;
		}
	ir_names_free(&fqns);
	return 0;
}

void rt_artifact_free(rt_artifact *a)
{
	if (!a)
		return;
	for (int i = 0; i < a->nkern; i++) {
		rt_kdesc *k = &a->kern[i];
		for (int p = 0; p < k->nparam; p++) {
			free(k->param[p].name);
			free(k->param[p].type_str);
		}
		free(k->param);
		free(k->name);
		free(k->shape);
		free(k->entry);
		free(k->bulk_entry);
		free(k->var_name);
		free(k->target);
		free(k->ir);
		free(k->zero);
		free(k->abi_value);
		ir_module_free(k->mod);
	}
	for (int i = 0; i < a->ngroup; i++)
		free(a->group[i].expert);
	free(a->group);
	for (int i = 0; i < a->nlayer + a->ngroup; i++) {
		rt_layer *l = &a->layer[i];
		for (int b = 0; b < l->nbuf; b++) {
			free(l->buf[b].name);
			free(l->buf[b].type_str);
			free(l->buf[b].role);
		}
		for (int s = 0; s < l->nstep; s++) {
			free(l->step[s].gemm);
			free(l->step[s].arg);
		}
		free(l->buf);
		free(l->ext);
		free(l->step);
		free(l->update);
		free(l->fqn);
		free(l->shares_input);
	}
	for (int i = 0; i < a->ntarget; i++)
		free(a->target[i]);
	free(a->target);
	free(a->kern);
	free(a->layer);
	free(a->dir);
	free(a->precc_version);
	free(a->llvm_version);
	free(a->recipe_name);
	free(a->model_name);
	free(a);
}

rt_artifact *rt_manifest_read(const char *dir, int device_sm, const char *want,
                              json **json_out, char *file, size_t filesz)
{
	char why[256], err[1024];
	rt_artifact *a;
	json *m;
	size_t len;
	char *text;
	Ctx c = {file, 0, device_sm, want};

	snprintf(file, filesz, "%s/manifest.json", dir);
	if (!(text = rt_read_file(file, RT_MAX_MANIFEST_BYTES, &len, why, sizeof why))) {
		rt_error("%s: error: cannot read: %s", file, why);
		return NULL;
	}
	m = json_parse(text, len, file, err, sizeof err);
	free(text);
	if (!m) {
		rt_error("%s", err);
		return NULL;
	}
	if (!(a = calloc(1, sizeof *a)) || !(a->dir = dup(dir))) {
		free(a);
		json_free(m);
		rt_error("out of memory reading %s", file);
		return NULL;
	}
	if (read_manifest(&c, a, m)) {
		rt_artifact_free(a);
		json_free(m);
		return NULL;
	}
	*json_out = m;
	return a;
}
