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
	int f = ir_fmt_by_name(fmt);
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

/* One kernel's "stats" (replaced if there); prints its table row. */
static int
kernel_stats(cJSON *k, const char *dir, long m, FILE *out)
{
	double rd = 0, wr = 0, mn = 0;
	const cJSON *ps = cJSON_GetObjectItemCaseSensitive(k, "params");
	const cJSON *phases = cJSON_GetObjectItemCaseSensitive(k, "phases"), *p;
	int by_phase = cJSON_IsArray(phases) && cJSON_GetArraySize(phases) > 1;

	cJSON_ArrayForEach(p, ps) {
		long n = type_bytes(str(p, "type"), m);
		if (n < 0) {
			fprintf(stderr, "precc build: error: --stats: %s: cannot size type '%s'\n",
			        str(k, "name"), str(p, "type"));
			return -1;
		}
		if (!strcmp(str(p, "dir"), "out")) {
			wr += (double)n;
			mn += (double)n;
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
		rd += (double)n * (double)reads;
		mn += (double)n;
	}
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

/* Each layer class's "stats": the sum over its steps' kernels. */
static void
class_stats(cJSON *classes, cJSON *ks, long m)
{
	cJSON *l;
	cJSON_ArrayForEach(l, classes) {
		double t[3] = {0, 0, 0};
		const cJSON *st;
		cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(l, "steps")) {
			cJSON *ks_ = find_kernel(ks, str(st, "kernel"));
			const cJSON *s = ks_ ? cJSON_GetObjectItemCaseSensitive(ks_, "stats") : NULL;
			t[0] += (double)num(s, "read_bytes", 0);
			t[1] += (double)num(s, "write_bytes", 0);
			t[2] += (double)num(s, "min_bytes", 0);
		}
		cJSON_DeleteItemFromObjectCaseSensitive(l, "stats");
		add_totals(cJSON_AddObjectToObject(l, "stats"), m, t[0], t[1], t[2]);
	}
}

/* The step's totals: the layers' classes' stats, summed. */
static void
layer_totals(const cJSON *layers, cJSON *classes, double tot[3])
{
	const cJSON *l;
	cJSON_ArrayForEach(l, layers) {
		const cJSON *c = cJSON_GetArrayItem(classes, (int)num(l, "class", -1));
		const cJSON *s = c ? cJSON_GetObjectItemCaseSensitive(c, "stats") : NULL;
		tot[0] += (double)num(s, "read_bytes", 0);
		tot[1] += (double)num(s, "write_bytes", 0);
		tot[2] += (double)num(s, "min_bytes", 0);
	}
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
	double tot[3] = {0, 0, 0};
	cJSON *cls = cJSON_GetObjectItemCaseSensitive(root, "layer_classes");
	class_stats(cls, ks, m);
	layer_totals(cJSON_GetObjectItemCaseSensitive(root, "layers"), cls, tot);
	cJSON_DeleteItemFromObjectCaseSensitive(root, "stats");
	cJSON *s = cJSON_AddObjectToObject(root, "stats");
	add_totals(s, m, tot[0], tot[1], tot[2]);
	const cJSON *tg = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "targets"), 0);
	fprintf(out, "stats: %s on %s, %s, M=%ld: %.3f MB per training step (read %.3f + write %.3f) "
	        "vs minimum %.3f MB, ratio %.3f\n",
	        str(cJSON_GetObjectItemCaseSensitive(root, "recipe"), "name"),
	        str(cJSON_GetObjectItemCaseSensitive(root, "model"), "name"),
	        cJSON_IsString(tg) ? tg->valuestring : "?", m, (tot[0] + tot[1]) / 1e6, tot[0] / 1e6,
	        tot[1] / 1e6, tot[2] / 1e6, ratio3(tot[0] + tot[1], tot[2]));
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
