/*
 * stats.c — `precc build --stats`: static traffic and occupancy figures of
 * every kernel at one M (docs/artifacts.md, "stats"). Everything here is
 * read back from the manifest just made (types, grid, phases, ptxas's
 * registers) and the PTX files in the output directory (static .shared),
 * so a whole-build cache hit prints the same table. Nothing is measured:
 * bytes are the types' extents, the read count of a source is what the
 * manifest says codegen does (one read per phase that tiles it), else 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "build.h"
#include "ir.h"

/* H100 / H200 (compute capability 9.0): CUDA C Programming Guide,
 * "Compute Capabilities", table "Technical Specifications per Compute
 * Capability", and the allocation rules of the toolkit's
 * include/cuda_occupancy.h (cudaOccMaxBlocksPerSMRegsLimit,
 * cudaOccMaxBlocksPerSMSmemLimit, cudaOccSMemAllocationGranularity). */
enum {
	SM90_SMS = 132,
	SM90_REGS = 65536,            /* per SM, and per CTA at most */
	SM90_REG_UNIT = 256,          /* registers are allocated per warp, in 256s */
	SM90_SUBPART = 4,             /* register file split over 4 sub-partitions */
	SM90_MAX_REGS_THREAD = 255,
	SM90_SMEM = 228 * 1024,       /* per SM (the largest carveout) */
	SM90_SMEM_CTA = 227 * 1024,   /* per CTA, opt-in maximum */
	SM90_SMEM_RESERVED = 1024,    /* reservedSharedMemPerBlock: the driver's, per CTA */
	SM90_SMEM_UNIT = 128,
	SM90_CTAS = 32,
	SM90_THREADS = 2048,
};

static long
round_up(long v, long u)
{
	return (v + u - 1) / u * u;
}

/* Bytes of a manifest type "bf16[M,4096]", "f32[1,1]{*x*}" at M: one byte
 * per element for 8- and 6-bit formats, half a byte for e2m1 (two codes a
 * byte: the buffer layout, codegen.h); a dim is a number, M or M/B; -1 if
 * the type does not parse. */
static long
type_bytes(const char *t, long m)
{
	char fmt[16];
	const char *br = strchr(t, '[');
	if (!br || br - t >= (long)sizeof fmt)
		return -1;
	memcpy(fmt, t, (size_t)(br - t));
	fmt[br - t] = 0;
	int f = strcmp(fmt, "i32") ? ir_fmt_by_name(fmt) : PRECC_FP32;   /* offsets: 4 bytes */
	if (f < 0)
		return -1;
	long n = f == PRECC_FP32 || f == PRECC_TF32 ? 4 : f == PRECC_FP16 || f == PRECC_BF16 ? 2 : 1;
	const char *p = br + 1;
	for (;;) {
		char *end;
		long d;
		if (*p == 'M') {       /* M, or M/B: the blocks of a scale (ceil) */
			d = m;
			end = (char *)p + 1;
			if (*end == '/') {
				long b = strtol(end + 1, &end, 10);
				if (b < 1)
					return -1;
				d = (m + b - 1) / b;
			}
		} else {
			d = strtol(p, &end, 10);
			if (end == p || d < 0)
				return -1;
		}
		n *= d;
		if (*end == ']')
			return f == PRECC_E2M1 ? n / 2 : n;
		if (*end != ',')
			return -1;
		p = end + 1;
	}
}

/* Static shared memory of a PTX file: the sum of its `.shared` declarations
 * (`.shared .align 16 .b8 tile[5120];`); -1 if it cannot be read. The
 * dynamic shared memory a kernel takes (the sm_90a GEMM's ring, the
 * manifest's "smem"; `.extern .shared` in the PTX) is added by the caller. */
static long
ptx_smem(const char *dir, const char *file)
{
	char path[4096], line[1024];
	long sum = 0;

	if (!*file || strchr(file, '/'))
		return -1;
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, ".shared ", 8))
			continue;
		long w = 1, cnt = 1;
		char *ty = strstr(p, " .b");
		if (!ty) ty = strstr(p, " .u");
		if (!ty) ty = strstr(p, " .s");
		if (!ty) ty = strstr(p, " .f");
		if (ty)
			w = strtol(ty + 3, NULL, 10) / 8;
		char *lb = strchr(p, '[');
		if (lb)
			cnt = strtol(lb + 1, NULL, 10);
		sum += (w > 0 ? w : 1) * cnt;
	}
	fclose(f);
	return sum;
}

/* Resident CTAs per SM of compute capability 9.0: the minimum of the
 * limits by CTAs, threads (warps), registers and shared memory, as
 * cuda_occupancy.h computes them; regs < 0 (no ptxas) leaves the register
 * limit out. *why names the binding limit. */
static long
ctas_per_sm(int threads, long regs, long smem, const char **why)
{
	long warps = (threads + 31) / 32, best = SM90_CTAS;
	*why = "ctas";
	if (warps < 1)
		warps = 1;
	long lt = SM90_THREADS / 32 / warps;
	if (lt < best)
		best = lt, *why = "threads";
	if (regs >= 0) {
		long per_warp = round_up(regs * 32, SM90_REG_UNIT), lr;
		if (regs > SM90_MAX_REGS_THREAD || per_warp * round_up(warps, SM90_SUBPART) > SM90_REGS)
			lr = 0;
		else
			lr = per_warp ? SM90_REGS / SM90_SUBPART / per_warp * SM90_SUBPART / warps : SM90_CTAS;
		if (lr < best)
			best = lr, *why = "regs";
	}
	long alloc = round_up(smem + SM90_SMEM_RESERVED, SM90_SMEM_UNIT);
	long ls = alloc > SM90_SMEM_CTA + SM90_SMEM_RESERVED ? 0 : SM90_SMEM / alloc;
	if (ls < best)
		best = ls, *why = "smem";
	return best;
}

static double
ratio3(double num, double den)
{
	return den > 0 ? round(num / den * 1000) / 1000 : 0;
}

static long
num(const cJSON *o, const char *k, long dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? (long)v->valuedouble : dflt;
}

static const char *
str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static void
add_totals(cJSON *o, long m, double rd, double wr, double mn)
{
	cJSON_AddNumberToObject(o, "m", (double)m);
	cJSON_AddNumberToObject(o, "read_bytes", rd);
	cJSON_AddNumberToObject(o, "write_bytes", wr);
	cJSON_AddNumberToObject(o, "min_bytes", mn);
	cJSON_AddNumberToObject(o, "ratio", ratio3(rd + wr, mn));
}

/* The bytes kernel k moves: its params' extents, its inputs at m_in rows
 * and its outputs at m_out (the same but in a grouped GEMM, which reads
 * the experts' rows alone and writes every row: group_traffic), each
 * input read once per phase that tiles it. 0, or -1 when a type does not
 * size. */
static int
kernel_traffic(const cJSON *k, long m_in, long m_out, double *rd, double *wr, double *mn)
{
	const cJSON *ps = cJSON_GetObjectItemCaseSensitive(k, "params");
	const cJSON *phases = cJSON_GetObjectItemCaseSensitive(k, "phases"), *p;
	int by_phase = cJSON_IsArray(phases) && cJSON_GetArraySize(phases) > 1;

	*rd = *wr = *mn = 0;
	cJSON_ArrayForEach(p, ps) {
		int out = !strcmp(str(p, "dir"), "out");
		long n = type_bytes(str(p, "type"), out ? m_out : m_in);
		if (n < 0) {
			fprintf(stderr, "precc build: error: --stats: %s: cannot size type '%s'\n",
			        str(k, "name"), str(p, "type"));
			return -1;
		}
		if (out) {
			*wr += (double)n;
			*mn += (double)n;
			continue;
		}
		long reads = 1;
		if (by_phase) {   /* each phase tiles its own data param */
			const cJSON *ph;
			long c = 0;
			cJSON_ArrayForEach(ph, phases)
				c += !strcmp(str(ph, "data"), str(p, "name"));
			if (c > 1)
				reads = c;
		}
		*rd += (double)n * (double)reads;
		*mn += (double)n;
	}
	return 0;
}

/* One kernel's "stats" (replaced if there); prints its table row. */
static int
kernel_stats(cJSON *k, const char *dir, long m, FILE *out)
{
	double rd, wr, mn;

	if (kernel_traffic(k, m, m, &rd, &wr, &mn))
		return -1;
	const cJSON *phases = cJSON_GetObjectItemCaseSensitive(k, "phases");
	int by_phase = cJSON_IsArray(phases) && cJSON_GetArraySize(phases) > 1;
	const char *tg = str(k, "target");
	const cJSON *fl = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(k, "files"), tg);
	long regs = num(fl, "regs", -1), spill = num(fl, "spill_bytes", -1);
	long smem = ptx_smem(dir, str(fl, "ptx"));
	if (smem >= 0)
		smem += num(k, "smem", 0);
	int threads = (int)num(k, "threads", 0);
	int sm90 = !strncmp(tg, "sm_90", 5);
	const char *why = "";
	long ctas = sm90 && smem >= 0 ? ctas_per_sm(threads, regs, smem, &why) : -1;

	cJSON_DeleteItemFromObjectCaseSensitive(k, "stats");
	cJSON *s = cJSON_AddObjectToObject(k, "stats");
	add_totals(s, m, rd, wr, mn);
	cJSON_AddStringToObject(s, "reads", by_phase ? "phases" : "types");
	if (regs >= 0)
		cJSON_AddNumberToObject(s, "regs", (double)regs);
	if (spill >= 0)
		cJSON_AddNumberToObject(s, "spill_bytes", (double)spill);
	if (smem >= 0)
		cJSON_AddNumberToObject(s, "smem_bytes", (double)smem);
	if (ctas >= 0) {
		cJSON_AddNumberToObject(s, "ctas_per_sm", (double)ctas);
		cJSON_AddStringToObject(s, "ctas_limit", why);
	}
	char r[32] = "-", c[40] = "-";
	if (regs >= 0)
		snprintf(r, sizeof r, "%ld%s", regs, spill > 0 ? "+sp" : "");
	if (ctas >= 0)
		snprintf(c, sizeof c, "%ld (%s)", ctas, why);
	fprintf(out, "%-18s %-16s %6ld %10.3f %10.3f %10.3f %6.3f %6s %6ld %s\n", str(k, "name"),
	        str(k, "shape"), m, rd / 1e6, wr / 1e6, mn / 1e6, ratio3(rd + wr, mn), r, smem, c);
	if (*str(k, "schedule"))     /* the sm_90a GEMM's shape and why (passes/schedule.c) */
		fprintf(out, "  schedule: %s\n", str(k, "schedule"));
	return 0;
}

static cJSON *
find_kernel(cJSON *ks, const char *name)
{
	cJSON *k;
	cJSON_ArrayForEach(k, ks)
		if (!strcmp(str(k, "name"), name))
			return k;
	return NULL;
}

/* ---- a training step against its minimum --------------------------------
 * Per kernel the minimum is its own params once; per step it is stricter:
 * each tensor read once and written once by the quantize side of the step
 * (every non-GEMM kernel), however many of its kernels touch it, and a
 * tensor that several linears read (q/k/v's X, the manifest's
 * shares_input) once for all of them. A GEMM's operands and result count
 * as the GEMM moves them (each GEMM must read its own): what the step
 * figure judges is the traffic around the GEMMs. */

typedef struct Buf {
	const char *name;
	double bytes;
	int rd, wr;             /* read / written by a non-GEMM step */
} Buf;

typedef struct Body {
	const cJSON *cls;       /* layer_classes[i] */
	Buf *b; int nb;
	double rd, wr;          /* every step: what it moves */
	double gemm;            /* GEMM steps: their params once */
	double local;           /* the layer's own minimum */
} Body;

static int
buf_at(const Body *y, const char *name)
{
	for (int i = 0; i < y->nb; i++)
		if (!strcmp(y->b[i].name, name))
			return i;
	return -1;
}

static const cJSON *
param_at(const cJSON *k, int i)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(k, "params"), i);
}

static int
is_gemm(const cJSON *k)
{
	return !strcmp(str(k, "shape"), "gemm");
}

/* The class's buffers and totals, and its "stats". */
static int
body_stats(Body *y, cJSON *cls, cJSON *ks, long m)
{
	const cJSON *b, *st;

	y->cls = cls;
	y->nb = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cls, "buffers"));
	y->b = calloc((size_t)y->nb + 1, sizeof *y->b);
	if (!y->b)
		return -1;
	int n = 0;
	cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(cls, "buffers")) {
		long sz = type_bytes(str(b, "type"), m);
		if (sz < 0)
			return -1;
		y->b[n].name = str(b, "name");
		y->b[n++].bytes = (double)sz;
	}
	cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(cls, "steps")) {
		cJSON *k = find_kernel(ks, str(st, "kernel"));
		const cJSON *s = k ? cJSON_GetObjectItemCaseSensitive(k, "stats") : NULL;
		y->rd += (double)num(s, "read_bytes", 0);
		y->wr += (double)num(s, "write_bytes", 0);
		if (k && is_gemm(k)) {
			y->gemm += (double)num(s, "min_bytes", 0);
			continue;
		}
		const cJSON *a;
		int i = 0;
		cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(st, "args")) {
			int bi = cJSON_IsString(a) ? buf_at(y, a->valuestring) : -1;
			if (bi >= 0 && k) {
				if (!strcmp(str(param_at(k, i), "dir"), "out"))
					y->b[bi].wr = 1;
				else
					y->b[bi].rd = 1;
			}
			i++;
		}
	}
	y->local = y->gemm;
	for (int i = 0; i < y->nb; i++)
		y->local += y->b[i].bytes * (y->b[i].rd + y->b[i].wr);
	cJSON_DeleteItemFromObjectCaseSensitive(cls, "stats");
	add_totals(cJSON_AddObjectToObject(cls, "stats"), m, y->rd, y->wr, y->local);
	return 0;
}

/* What a layer of body l that reads the input of a layer of body r need
 * not move itself: the input, and what its non-GEMM steps make from
 * shared tensors alone, where r runs the same kernel on the same tensors
 * (then they are the same bytes). */
static double
shared_credit(const Body *l, const Body *r, cJSON *ks, double skipped[3])
{
	const char **map = calloc((size_t)l->nb + 1, sizeof *map);   /* l's buffer -> r's */
	double credit = 0;
	const cJSON *b, *rb, *st, *rst, *a;
	int i = 0;

	if (!map)
		return 0;
	/* the input, and its delayed-scaling state ("x.scale", "x.amax_history"):
	 * one tensor has one history, whoever reads it */
	const char *x = NULL;
	cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(l->cls, "buffers"))
		if (!strcmp(str(b, "role"), "input"))
			x = str(b, "name");
	size_t nx = x ? strlen(x) : 0;
	cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(l->cls, "buffers")) {
		const char *nm = str(b, "name"), *role = str(b, "role");
		int mine = x && (!strcmp(role, "input") || (!strcmp(role, "state") && !strncmp(nm, x, nx)
		                                           && nm[nx] == '.'));
		if (mine)
			cJSON_ArrayForEach(rb, cJSON_GetObjectItemCaseSensitive(r->cls, "buffers"))
				if (!strcmp(str(rb, "role"), role) && !strcmp(str(rb, "type"), str(b, "type"))
				    && (!strcmp(role, "input") || !strcmp(str(rb, "name"), nm)))
					map[i] = str(rb, "name");
		i++;
	}
	cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(l->cls, "steps")) {
		const cJSON *k = find_kernel(ks, str(st, "kernel"));
		const cJSON *args = cJSON_GetObjectItemCaseSensitive(st, "args");
		int n = cJSON_GetArraySize(args), ok = k && !is_gemm(k) && n <= 64;
		const char *want[64];
		for (i = 0; ok && i < n; i++) {
			a = cJSON_GetArrayItem(args, i);
			int bi = cJSON_IsString(a) ? buf_at(l, a->valuestring) : -1;
			int in = strcmp(str(param_at(k, i), "dir"), "out") != 0;
			want[i] = bi >= 0 && in ? map[bi] : NULL;
			ok = bi >= 0 && (!in || want[i]);
		}
		if (!ok)
			continue;
		cJSON_ArrayForEach(rst, cJSON_GetObjectItemCaseSensitive(r->cls, "steps")) {
			const cJSON *ra = cJSON_GetObjectItemCaseSensitive(rst, "args");
			int same = !strcmp(str(rst, "kernel"), str(st, "kernel")) && cJSON_GetArraySize(ra) == n;
			for (i = 0; same && i < n; i++) {
				const cJSON *x = cJSON_GetArrayItem(ra, i);
				same = cJSON_IsString(x) && (!want[i] || !strcmp(want[i], x->valuestring));
			}
			if (!same)
				continue;
			for (i = 0; i < n; i++)   /* its outputs are r's */
				if (!want[i])
					map[buf_at(l, cJSON_GetArrayItem(args, i)->valuestring)] =
						cJSON_GetArrayItem(ra, i)->valuestring;
			/* and precc_rt_forward_shared does not run it (runtime/share.c) */
			const cJSON *ksx = cJSON_GetObjectItemCaseSensitive(k, "stats");
			skipped[0] += (double)num(ksx, "read_bytes", 0);
			skipped[1] += (double)num(ksx, "write_bytes", 0);
			skipped[2] += (double)num(ksx, "min_bytes", 0);
			break;
		}
	}
	for (i = 0; i < l->nb; i++)
		if (map[i])
			credit += l->b[i].bytes * (l->b[i].rd + l->b[i].wr);
	free(map);
	return credit;
}

typedef struct Pair { int l, r; double credit, skipped[3]; } Pair;

/* The step's totals over `layers` (with their classes' bodies), the
 * credit of the layers that share an input with an earlier one. */
static void
step_totals(const cJSON *layers, Body *body, int nbody, cJSON *ks, double tot[8])
{
	const cJSON *l;
	NameTab at;
	Pair *pr = NULL;
	int npr = 0, n = 0;

	ir_names_init(&at, (size_t)cJSON_GetArraySize(layers));
	cJSON_ArrayForEach(l, layers)
		ir_names_put(&at, str(l, "fqn"), (int)num(l, "class", -1)), n++;
	cJSON_ArrayForEach(l, layers) {
		int c = (int)num(l, "class", -1);
		if (c < 0 || c >= nbody)
			continue;
		tot[0] += body[c].rd;
		tot[1] += body[c].wr;
		tot[2] += body[c].local;
		tot[4] += body[c].gemm;
		const char *sh = str(l, "shares_input");
		int rc = *sh ? ir_names_get(&at, sh) : -1;
		if (rc < 0 || rc >= nbody)
			continue;
		int p = 0;
		while (p < npr && (pr[p].l != c || pr[p].r != rc))
			p++;
		if (p == npr) {   /* a few distinct pairs, however many layers */
			Pair *q = realloc(pr, (size_t)(npr + 1) * sizeof *pr);
			if (!q)
				continue;
			pr = q;
			Pair np = {c, rc, 0, {0, 0, 0}};
			np.credit = shared_credit(&body[c], &body[rc], ks, np.skipped);
			pr[npr++] = np;
		}
		tot[3] += pr[p].credit;
		for (int j = 0; j < 3; j++)
			tot[5 + j] += pr[p].skipped[j];
	}
	free(pr);
	ir_names_free(&at);
}

/* ---- the expert groups' traffic ------------------------------------------
 * One training step of each group (forward, backward) at M routed rows
 * (tokens x top-k) spread evenly over its experts, two ways: its grouped
 * plan as GroupedExperts runs it (python/precc/torch/_experts.py,
 * _grouped_path: each expert's rows padded to the group's token_align,
 * every kernel sized by the static bound m_total = M + experts x
 * (token_align - 1) up to the plan's m_multiple), and the experts' own
 * layers as the per-expert path runs them (each expert's rows padded to
 * its layer's m_multiple). Per kernel the bytes are kernel_traffic's, but
 * a grouped GEMM (a step that reads the offsets) reads the rows of the
 * experts' windows alone and writes all m_total rows (codegen/
 * k_gemm_grouped.c: rows of no expert are zeros, tiles map to experts).
 * The minimum: each expert's x, w, dy (and state) read once, y, dx, dw
 * (and state) written once, at its unpadded rows. */

static long
lcm(long a, long b)
{
	long x = a, y = b;
	while (y) {
		long t = x % y;
		x = y;
		y = t;
	}
	return x ? a / x * b : 1;
}

/* The lcm of a class's kernels' block sizes along M (runtime/artifact.c's
 * layer m_multiple: a call's M is a multiple of it). */
static long
class_m_multiple(const cJSON *cls, cJSON *ks)
{
	const cJSON *st;
	long mm = 1;
	cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(cls, "steps")) {
		const cJSON *k = find_kernel(ks, str(st, "kernel"));
		long km = num(cJSON_GetObjectItemCaseSensitive(k, "grid"), "m_multiple", 1);
		mm = lcm(mm, km > 0 ? km : 1);
	}
	return mm;
}

static const char *
buf_type(const cJSON *cls, const char *name)
{
	const cJSON *b;
	cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(cls, "buffers"))
		if (!strcmp(str(b, "name"), name))
			return str(b, "type");
	return "";
}

/* Does step st read the group's offsets buffer offs? */
static int
reads_offsets(const cJSON *st, const char *offs)
{
	const cJSON *a;
	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(st, "args"))
		if (cJSON_IsString(a) && !strcmp(a->valuestring, offs))
			return 1;
	return 0;
}

/* The group's token_align (runtime/grouped.c's): the lcm of the blocks B
 * of the "M/B" dims of what its grouped GEMMs read and write. */
static long
class_token_align(const cJSON *cls, const char *offs)
{
	const cJSON *st, *a;
	long al = 1;
	cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(cls, "steps")) {
		if (!reads_offsets(st, offs))
			continue;
		cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(st, "args")) {
			const char *t = cJSON_IsString(a) ? buf_type(cls, a->valuestring) : "";
			for (const char *p = strstr(t, "M/"); p; p = strstr(p + 2, "M/")) {
				long b = strtol(p + 2, NULL, 10);
				if (b > 1)
					al = lcm(al, b);
			}
		}
	}
	return al;
}

typedef struct Traffic {
	int cls, groups;          /* the groups' class, how many groups have it */
	const char *name;         /* the first such group */
	int experts;
	long n, k, align, mm, m_total, gemm_rows, emm, expert_rows;
	double grouped, per, min; /* bytes, per group */
	long gl, pl;              /* launches, per group */
} Traffic;

/* Group g's figures at M rows into *t (its first group's). 0 or -1. */
static int
group_traffic(const cJSON *g, const cJSON *cls, cJSON *ks, const cJSON *const *byi,
              NameTab *at, long m, Traffic *t)
{
	static const char *const g3[] = {"fprop", "dgrad", "wgrad"};
	const cJSON *gc = cJSON_GetArrayItem(cls, (int)num(g, "class", -1)), *st, *b, *x;
	const char *offs = "";
	int ne = (int)num(g, "experts", 0), grouped[3] = {0}, e = 0;
	double rd, wr, mn;

	cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(gc, "buffers"))
		if (!strcmp(str(b, "role"), "offsets"))
			offs = str(b, "name");
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(g, "gemms"))
		for (int i = 0; i < 3; i++)
			grouped[i] |= cJSON_IsString(x) && !strcmp(x->valuestring, g3[i]);
	if (ne < 1 || !*offs)
		return -1;
	t->experts = ne;
	t->n = num(g, "n", 0), t->k = num(g, "k", 0);
	t->align = class_token_align(gc, offs);
	t->mm = class_m_multiple(gc, ks);
	t->m_total = round_up(m + (long)ne * (t->align - 1), t->mm);
	t->gemm_rows = t->expert_rows = t->emm = 0;
	t->grouped = t->per = t->min = 0;
	t->gl = t->pl = 0;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(g, "expert_layers")) {
		long rows = m / ne + (e < m % ne);   /* even routing */
		int i = cJSON_IsString(x) ? ir_names_get(at, x->valuestring) : -1;
		e++;
		if (i < 0)
			return -1;
		const cJSON *ec = cJSON_GetArrayItem(cls, (int)num(byi[i], "class", -1));
		cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(ec, "buffers")) {
			const char *role = str(b, "role");
			int times = !strcmp(role, "state") || !strcmp(role, "main_grad") ? 2
			            : !strcmp(role, "input") || !strcmp(role, "weight")
			              || !strcmp(role, "grad_output") || !strcmp(role, "output");
			long sz = times ? type_bytes(str(b, "type"), rows) : 0;
			if (sz < 0)
				return -1;
			t->min += (double)sz * times;
		}
		if (!rows)          /* no tokens: no launch, on either path */
			continue;
		t->gemm_rows += round_up(rows, t->align);
		long emm = class_m_multiple(ec, ks), mp = round_up(rows, emm);
		if (emm > t->emm)
			t->emm = emm;
		t->expert_rows += mp;
		cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(ec, "steps")) {
			const cJSON *k = find_kernel(ks, str(st, "kernel"));
			if (!k || kernel_traffic(k, mp, mp, &rd, &wr, &mn))
				return -1;
			t->per += rd + wr;
			t->pl++;
			for (int j = 0; j < 3; j++)   /* what the grouped plan leaves to it */
				if (!grouped[j] && !strcmp(str(st, "gemm"), g3[j])) {
					t->grouped += rd + wr;
					t->gl++;
				}
		}
	}
	cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(gc, "steps")) {
		const cJSON *k = find_kernel(ks, str(st, "kernel"));
		if (!k || kernel_traffic(k, reads_offsets(st, offs) ? t->gemm_rows : t->m_total,
		                         t->m_total, &rd, &wr, &mn))
			return -1;
		t->grouped += rd + wr;
		t->gl++;
	}
	return 0;
}

static double
pct(long v, long base)
{
	return base > 0 ? 100.0 * (double)(v - base) / (double)base : 0;
}

/* Every group's traffic at M, one line per group class and a total, into
 * o (stats.groups). */
static void
groups_traffic(cJSON *root, cJSON *o, long m, FILE *out)
{
	const cJSON *gs = cJSON_GetObjectItemCaseSensitive(root, "groups"), *g, *l;
	const cJSON *cls = cJSON_GetObjectItemCaseSensitive(root, "layer_classes");
	cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "kernels");
	const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
	int nl = cJSON_GetArraySize(layers), li = 0, nt = 0, bad = 0;
	const cJSON **byi = calloc((size_t)nl + 1, sizeof *byi);
	Traffic *tr = calloc((size_t)cJSON_GetArraySize(gs) + 1, sizeof *tr);
	double tot[3] = {0};
	long launches[2] = {0};
	NameTab at;

	if (!byi || !tr) {
		free(byi);
		free(tr);
		return;
	}
	ir_names_init(&at, (size_t)nl);
	cJSON_ArrayForEach(l, layers) {
		byi[li] = l;
		ir_names_put(&at, str(l, "fqn"), li++);
	}
	cJSON_ArrayForEach(g, gs) {
		int c = (int)num(g, "class", -1), i = 0;
		while (i < nt && tr[i].cls != c)
			i++;
		if (i == nt) {    /* one class: the same kernels at the same shapes */
			tr[i].cls = c;
			tr[i].name = str(g, "name");
			if (group_traffic(g, cls, ks, byi, &at, m, &tr[i])) {
				bad = 1;
				break;
			}
			nt++;
		}
		tr[i].groups++;
		tot[0] += tr[i].grouped, tot[1] += tr[i].per, tot[2] += tr[i].min;
		launches[0] += tr[i].gl, launches[1] += tr[i].pl;
	}
	ir_names_free(&at);
	free(byi);
	if (bad) {
		fprintf(out, "stats: the expert groups' traffic: cannot size a group's layers\n");
		free(tr);
		return;
	}
	fprintf(out, "stats: expert traffic per training step and group at M=%ld routed rows "
	        "(tokens x top-k, spread evenly): the grouped plan (rows padded to token_align, "
	        "quantizes on m_total) and the experts' own layers (rows padded to their "
	        "m_multiple) against the minimum:\n", m);
	for (int i = 0; i < nt; i++) {
		const Traffic *t = &tr[i];
		fprintf(out, "stats:   %s (x%d; %d experts, N %ld, K %ld): grouped %ld launches %.3f MB, "
		        "m_total %ld rows (+%.1f%%; token_align %ld), GEMMs on %ld; per expert %ld "
		        "launches %.3f MB, %ld rows (+%.1f%%; m_multiple %ld); minimum %.3f MB; "
		        "ratio %.3f grouped, %.3f per expert\n", t->name, t->groups, t->experts, t->n, t->k, t->gl,
		        t->grouped / 1e6, t->m_total, pct(t->m_total, m), t->align, t->gemm_rows,
		        t->pl, t->per / 1e6, t->expert_rows, pct(t->expert_rows, m), t->emm,
		        t->min / 1e6, ratio3(t->grouped, t->min), ratio3(t->per, t->min));
	}
	fprintf(out, "stats: expert groups at M=%ld: grouped %.3f MB in %ld launches, per expert "
	        "%.3f MB in %ld launches, minimum %.3f MB: ratio %.3f grouped, %.3f per expert\n",
	        m, tot[0] / 1e6, launches[0], tot[1] / 1e6, launches[1], tot[2] / 1e6,
	        ratio3(tot[0], tot[2]), ratio3(tot[1], tot[2]));
	cJSON *j = cJSON_AddObjectToObject(o, "traffic");
	cJSON_AddNumberToObject(j, "m", (double)m);
	cJSON_AddNumberToObject(j, "grouped_bytes", tot[0]);
	cJSON_AddNumberToObject(j, "grouped_launches", (double)launches[0]);
	cJSON_AddNumberToObject(j, "per_expert_bytes", tot[1]);
	cJSON_AddNumberToObject(j, "per_expert_launches", (double)launches[1]);
	cJSON_AddNumberToObject(j, "min_bytes", tot[2]);
	cJSON *a = cJSON_AddArrayToObject(j, "classes");
	for (int i = 0; i < nt; i++) {
		const Traffic *t = &tr[i];
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "group", t->name);
		cJSON_AddNumberToObject(c, "groups", t->groups);
		cJSON_AddNumberToObject(c, "token_align", (double)t->align);
		cJSON_AddNumberToObject(c, "m_total", (double)t->m_total);
		cJSON_AddNumberToObject(c, "gemm_rows", (double)t->gemm_rows);
		cJSON_AddNumberToObject(c, "expert_m_multiple", (double)t->emm);
		cJSON_AddNumberToObject(c, "expert_rows", (double)t->expert_rows);
		cJSON_AddNumberToObject(c, "grouped_bytes", t->grouped);
		cJSON_AddNumberToObject(c, "grouped_launches", (double)t->gl);
		cJSON_AddNumberToObject(c, "per_expert_bytes", t->per);
		cJSON_AddNumberToObject(c, "per_expert_launches", (double)t->pl);
		cJSON_AddNumberToObject(c, "min_bytes", t->min);
		cJSON_AddItemToArray(a, c);
	}
	free(tr);
}

/* The expert groups (manifest "groups", driver/grouped.c): launches per
 * training step of their grouped plans against their experts' own
 * layers, into stats.groups and one line on out. */
static void
group_stats(cJSON *root, cJSON *s, long m, FILE *out)
{
	static const char *const g3[] = {"fprop", "dgrad", "wgrad"};
	const cJSON *gs = cJSON_GetObjectItemCaseSensitive(root, "groups"), *g, *e;
	const cJSON *cls = cJSON_GetObjectItemCaseSensitive(root, "layer_classes");
	const cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "kernels");
	const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers"), *l;
	long ngroup = 0, experts = 0, launches = 0, gemms = 0, quant = 0, per = 0, ungrouped = 0;
	int same_e = 1, e0 = -1, left[3] = {0};   /* a GEMM some group leaves per expert */

	if (!cJSON_IsArray(gs) || !cJSON_GetArraySize(gs))
		return;
	/* DeepSeek-V3: 45,091 layers, 174 groups of 256 experts */
	int nl = cJSON_GetArraySize(layers), li = 0;
	const cJSON **byi = calloc((size_t)nl + 1, sizeof *byi);
	NameTab at;
	ir_names_init(&at, (size_t)nl);
	cJSON_ArrayForEach(l, layers) {
		byi[li] = l;
		ir_names_put(&at, str(l, "fqn"), li++);
	}
	cJSON_ArrayForEach(g, gs) {
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetArrayItem(cls, (int)num(g, "class", -1)), "steps"), *x;
		int ne = (int)num(g, "experts", 0), grouped[3] = {0};
		ngroup++;
		experts += ne;
		same_e &= e0 < 0 || e0 == ne;
		e0 = ne;
		cJSON_ArrayForEach(x, st) {
			cJSON *kk = find_kernel((cJSON *)ks, str(x, "kernel"));
			launches++;
			if (strstr(str(kk, "ir"), "= gemm_grouped "))
				gemms++;
			else
				quant++;
		}
		const cJSON *gl = cJSON_GetObjectItemCaseSensitive(g, "gemms");
		cJSON_ArrayForEach(x, gl)
			for (int k = 0; k < 3; k++)
				grouped[k] |= cJSON_IsString(x) && !strcmp(x->valuestring, g3[k]);
		for (int k = 0; k < 3; k++)
			left[k] |= !grouped[k];
		/* the experts' own layers: every step of theirs, and those the
		 * grouped plan leaves to them (the steps labelled with a GEMM the
		 * group does not run grouped) */
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(g, "expert_layers")) {
			int i = cJSON_IsString(e) && byi ? ir_names_get(&at, e->valuestring) : -1;
			if (i < 0)
				continue;
			const cJSON *es = cJSON_GetObjectItemCaseSensitive(
				cJSON_GetArrayItem(cls, (int)num(byi[i], "class", -1)), "steps");
			cJSON_ArrayForEach(x, es) {
				per++;
				for (int k = 0; k < 3; k++)
					ungrouped += !grouped[k] && !strcmp(str(x, "gemm"), g3[k]);
			}
		}
	}
	ir_names_free(&at);
	free(byi);
	cJSON *o = cJSON_AddObjectToObject(s, "groups");
	cJSON_AddNumberToObject(o, "groups", (double)ngroup);
	cJSON_AddNumberToObject(o, "experts", (double)experts);
	cJSON_AddNumberToObject(o, "grouped_launches", (double)launches);
	cJSON_AddNumberToObject(o, "grouped_gemms", (double)gemms);
	cJSON_AddNumberToObject(o, "grouped_quantizes", (double)quant);
	cJSON_AddNumberToObject(o, "expert_launches", (double)per);
	cJSON_AddNumberToObject(o, "per_expert_launches", (double)ungrouped);
	char each[48] = "", which[32] = "";
	if (same_e)
		snprintf(each, sizeof each, ", %d experts each", e0);
	for (int k = 0, n = 0; k < 3; k++)
		if (left[k])
			snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s",
			         n++ ? " and " : "", g3[k]);
	fprintf(out, "stats: %ld expert group%s%s: %ld grouped kernel launches per training "
	        "step (%ld grouped GEMMs, %ld grouped quantizes) instead of the experts' %ld "
	        "launches%s%s%s\n", ngroup, ngroup == 1 ? "" : "s", each, launches, gemms, quant,
	        per, ungrouped ? "; their " : "", ungrouped ? which : "",
	        !ungrouped ? "" : strchr(which, ' ') ? " stay per expert" : " stays per expert");
	if (ungrouped)
		fprintf(out, "stats: per step with the groups: %ld launches (%ld grouped + %ld "
		        "per-expert %s launches, counted by the layers' steps so labelled)\n",
		        launches + ungrouped, launches, ungrouped, which);
	groups_traffic(root, o, m, out);
}

char *
stats_manifest(const char *text, const char *dir, long m, FILE *out)
{
	cJSON *root = cJSON_Parse(text), *k;
	if (!root) {
		fprintf(stderr, "precc build: error: --stats: cannot parse %s/manifest.json\n", dir);
		return NULL;
	}
	cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "kernels");
	fprintf(out, "%-18s %-16s %6s %10s %10s %10s %6s %6s %6s %s\n", "kernel", "shape", "M",
	        "read MB", "write MB", "min MB", "ratio", "regs", "smem", "CTAs/SM (limit)");
	cJSON_ArrayForEach(k, ks)
		if (kernel_stats(k, dir, m, out)) {
			cJSON_Delete(root);
			return NULL;
		}
	cJSON *cls = cJSON_GetObjectItemCaseSensitive(root, "layer_classes"), *c;
	int nbody = cJSON_GetArraySize(cls), i = 0, bad = 0;
	Body *body = calloc((size_t)nbody + 1, sizeof *body);
	/* read, write, the layers' own minimum, shared inputs, GEMMs, and what
	 * shared forwards do not run: read, write, their kernels' minimum */
	double tot[8] = {0}, kmin = 0;
	cJSON_ArrayForEach(c, cls)
		bad |= !body || body_stats(&body[i++], c, ks, m);
	const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers"), *l;
	if (!bad)
		step_totals(layers, body, nbody, ks, tot);
	cJSON_ArrayForEach(l, layers) {
		int ci = (int)num(l, "class", -1);
		const cJSON *st = ci >= 0 && ci < nbody ? cJSON_GetObjectItemCaseSensitive(body[ci].cls, "steps") : NULL, *x;
		cJSON_ArrayForEach(x, st) {
			const cJSON *kk = find_kernel(ks, str(x, "kernel"));
			kmin += (double)num(kk ? cJSON_GetObjectItemCaseSensitive(kk, "stats") : NULL, "min_bytes", 0);
		}
	}
	for (i = 0; body && i < nbody; i++)
		free(body[i].b);
	free(body);
	if (bad) {
		fprintf(stderr, "precc build: error: --stats: cannot size the layers' buffers\n");
		cJSON_Delete(root);
		return NULL;
	}
	/* as a trainer runs the step that passes each shared layer its root's
	 * saved region (precc_rt_forward_shared) */
	double rd = tot[0] - tot[5], wr = tot[1] - tot[6], mv = rd + wr, mn = tot[2] - tot[3], g = tot[4];
	double unshared = tot[0] + tot[1];
	cJSON_DeleteItemFromObjectCaseSensitive(root, "stats");
	cJSON *s = cJSON_AddObjectToObject(root, "stats");
	add_totals(s, m, rd, wr, mn);
	cJSON_AddNumberToObject(s, "kernel_min_bytes", kmin);
	cJSON_AddNumberToObject(s, "shared_input_bytes", tot[3]);
	cJSON_AddNumberToObject(s, "unshared_bytes", unshared);
	cJSON_AddNumberToObject(s, "gemm_bytes", g);
	double qr = mn - g > 0 ? ratio3(mv - g, mn - g) : 1;   /* bf16: nothing to quantize */
	cJSON_AddNumberToObject(s, "quantize_ratio", qr);
	const cJSON *tg = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "targets"), 0);
	fprintf(out, "stats: %s on %s, %s, M=%ld: %.3f MB per training step (read %.3f + write %.3f) "
	        "vs minimum %.3f MB, ratio %.3f\n",
	        str(cJSON_GetObjectItemCaseSensitive(root, "recipe"), "name"),
	        str(cJSON_GetObjectItemCaseSensitive(root, "model"), "name"),
	        cJSON_IsString(tg) ? tg->valuestring : "?", m, mv / 1e6, rd / 1e6,
	        wr / 1e6, mn / 1e6, ratio3(mv, mn));
	fprintf(out, "stats: without the GEMMs (%.3f MB, at their minimum): %.3f MB vs %.3f MB, "
	        "ratio %.3f\n", g / 1e6, (mv - g) / 1e6, (mn - g) / 1e6, qr);
	fprintf(out, "stats: linears that share an input quantize it once (precc_rt_forward_shared): "
	        "%.3f MB not moved; without that %.3f MB, ratio %.3f\n", (unshared - mv) / 1e6,
	        unshared / 1e6, ratio3(unshared, mn));
	fprintf(out, "stats: above the minimum: %.3f MB inside kernels (a fused kernel's phases "
	        "each reading their source), %.3f MB across kernels (a tensor read by several)\n",
	        (mv - (kmin - tot[7])) / 1e6, (kmin - tot[7] - mn) / 1e6);
	group_stats(root, s, m, out);
	char *res = cJSON_PrintBuffered(root, 1 << 20, 1);
	cJSON_Delete(root);
	if (res) {
		size_t n = strlen(res);
		char *r2 = realloc(res, n + 2);
		if (r2) {
			res = r2;
			res[n++] = '\n';
			res[n] = 0;
		}
	}
	return res;
}
