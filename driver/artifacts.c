/*
 * artifacts.c — the files precc build writes besides the kernels:
 * manifest.json (format 1, docs/artifacts.md: kernels with their params,
 * launch geometry and IR, every layer's steps, buffers and state updates)
 * and precc_kernels.h/.c, typed C launchers that reach the driver only
 * through a hook, so they compile without cuda.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "build.h"
#include "recipe.h"
#include "ir.h"
#include "precc/grid.h"
#include "precc/version.h"

/* f's text under name (if any), its m_variant naming the kernel var (if
 * any) as the manifest does */
static char *
func_text(const Func *f, const char *name, long m_min, const char *var)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&buf, &n);
	Func copy = *f;
	char mv[64];

	if (!m)
		die("open_memstream: %s", strerror(errno));
	if (name)
		copy.name = (char *)name;
	if (var) {
		snprintf(mv, sizeof mv, "%ld:@%s", m_min, var);
		copy.pattr[PA_M_VARIANT] = mv;
	}
	ir_print_func(m, &copy);
	fclose(m);
	return buf;
}

/* A type's IR spelling into buf (ir_print_type on a fixed buffer). */
static const char *
type_str(const Type *t, char *buf, size_t n)
{
	FILE *m = fmemopen(buf, n, "w");

	if (!m)
		die("fmemopen: %s", strerror(errno));
	ir_print_type(m, t);
	fputc(0, m);
	fclose(m);
	buf[n - 1] = 0;
	return buf;
}

static int
nparams_of(const Func *f)
{
	int n = 0;

	for (int i = 0; i < f->nins; i++)
		n += f->ins[i].op == OP_param;
	return n;
}

static const char *
param_role(ParamKind k)
{
	static const char *const names[NPARAMKIND] = {
		[PARAM_IN] = "input", [PARAM_WEIGHT] = "weight", [PARAM_GRAD] = "grad_output",
		[PARAM_STATE] = "state", [PARAM_BIAS] = "bias", [PARAM_BUF] = "buffer",
		[PARAM_MAIN_GRAD] = "main_grad"};
	return (unsigned)k < NPARAMKIND ? names[k] : "buffer";
}

/* Outputs the kernel's code updates atomically (codegen reads them off the
 * emitted function: tensorwise amaxes, amax_cols' column maxima, a GEMM's
 * output amax): the launcher zeroes exactly these. */
static int
zero_output(const CodegenKernel *in, int i)
{
	return i < 32 && (in->atomic_params >> i & 1);
}

/* One phase's grid as the manifest states it (phase -1: the kernel's own
 * grid fields): `data` is always a param (the reader sizes the grid from a
 * param's extent), and a one-CTA phase (codegen's delayed_update, flat
 * with elems_per_cta 0) is a flat grid whose elems_per_cta is the extent
 * of a static param, so the formula of docs/artifacts.md gives 1. */
typedef struct Grid { int data, tiled; long epc, tr, tc; } Grid;

static Grid
grid_of(const Job *j, int p)
{
	const CodegenKernel *in = &j->e.info;
	const Func *f = j->f;
	Grid g = {in->data, in->tiled, in->elems_per_cta, in->tile_rows, in->tile_cols};
	int d = -1;
	int one_cta = 0;

	if (p >= 0) {
		const CodegenPhase *ph = &in->phase[p];
		g = (Grid){ph->data, ph->tiled, ph->elems_per_cta, ph->tile_rows, ph->tile_cols};
		one_cta = ph->shape == CG_DELAYED_UPDATE;
	} else
		one_cta = in->shape == CG_DELAYED_UPDATE && in->nphases <= 1;
	for (int i = 0; i < in->nparams && d < 0; i++)
		if (in->param_value[i] == g.data)
			d = g.data;
	for (int i = 0; i < in->nparams && d < 0; i++)
		if (g.data >= 0 && g.data < f->nval
		    && ir_type_eq(&f->val[in->param_value[i]].type, &f->val[g.data].type))
			d = in->param_value[i];
	if (one_cta && !g.tiled && g.epc <= 0) {
		for (int i = 0; i < in->nparams; i++) {
			const Type *t = &f->val[in->param_value[i]].type;
			if (t->dim[0] >= 0 && (t->rank == 1 || t->dim[1] >= 0)) {
				d = in->param_value[i];
				g.epc = t->rank == 1 ? t->dim[0] : t->dim[0] * t->dim[1];
				break;
			}
		}
	}
	g.data = d >= 0 ? d : in->nparams ? in->param_value[0] : -1;
	return g;
}

static int
nphases(const Job *j)
{
	int n = j->e.info.nphases;

	return n < 1 ? 1 : n > CG_MAXPHASE ? CG_MAXPHASE : n;
}

static void
grid_json(cJSON *o, const Func *f, Grid g)
{
	cJSON_AddBoolToObject(o, "tiled", g.tiled);
	cJSON_AddStringToObject(o, "data", g.data >= 0 ? f->val[g.data].name : "");
	cJSON_AddNumberToObject(o, "elems_per_cta", (double)g.epc);
	cJSON_AddNumberToObject(o, "tile_rows", (double)g.tr);
	cJSON_AddNumberToObject(o, "tile_cols", (double)g.tc);
}


/* "<what>_bytes" and "<what>_fnv1a64" (FNV-1a 64 of the file's bytes), so
 * precc-run can say a file is the one precc build wrote (issue 13). */
static void
file_digest(cJSON *ft, const char *what, const void *p, size_t n)
{
	char key[32], hex[17];

	snprintf(key, sizeof key, "%s_bytes", what);
	cJSON_AddNumberToObject(ft, key, (double)n);
	snprintf(key, sizeof key, "%s_fnv1a64", what);
	snprintf(hex, sizeof hex, "%016llx", (unsigned long long)ir_hash_bytes(0xcbf29ce484222325ULL, p, n));
	cJSON_AddStringToObject(ft, key, hex);
}

/* The kernel's m_variant (passes/schedule.c: "N:@NAME", the same GEMM on
 * a larger tile for M >= N): its job and N, or NULL. */
static const Job *
m_variant(Build *b, const Job *j, long *m_min)
{
	const char *a = j->f->pattr[PA_M_VARIANT], *at;
	char *end;

	if (!a)
		return NULL;
	*m_min = strtol(a, &end, 10);
	if (end == a || *end != ':' || end[1] != '@' || *m_min < 1)
		die("kernel @%s: m_variant=%s is not N:@KERNEL", j->f->name, a);
	at = end + 2;
	const Job *v = build_find_job(b, j->t, at);
	if (!v)
		die("kernel @%s: m_variant names @%s, no kernel of the module", j->f->name, at);
	if (v->e.info.nparams != j->e.info.nparams || v->e.info.has_m != j->e.info.has_m
	    || v->e.info.has_seed != j->e.info.has_seed || v->e.info.sync_words != j->e.info.sync_words
	    || v->e.info.ntmap != j->e.info.ntmap)
		die("kernel @%s: its m_variant @%s takes other arguments", j->f->name, at);
	for (int i = 0; i < j->e.info.nparams; i++)
		if (!ir_type_eq(&j->f->val[j->e.info.param_value[i]].type,
		                &v->f->val[v->e.info.param_value[i]].type))
			die("kernel @%s: its m_variant @%s takes other arguments", j->f->name, at);
	return v;
}

static cJSON *
kernel_json(Build *b, Job *j)
{
	const Func *f = j->f;
	const CodegenKernel *in = &j->e.info;
	cJSON *k = cJSON_CreateObject(), *g, *ps, *zo, *files, *ft;
	int nin = nparams_of(f);

	cJSON_AddStringToObject(k, "name", j->name);
	cJSON_AddStringToObject(k, "shape", codegen_shape_name(in->shape));
	cJSON_AddStringToObject(k, "entry", in->name);
	if (in->bulk)         /* the update of many layers in one launch */
		cJSON_AddStringToObject(k, "bulk_entry", CG_BULK_ENTRY);
	cJSON_AddStringToObject(k, "target", b->tg[j->t]->name);
	cJSON_AddStringToObject(k, "func", f->name);
	cJSON_AddNumberToObject(k, "threads", in->threads);
	g = cJSON_AddObjectToObject(k, "grid");
	grid_json(g, f, grid_of(j, nphases(j) > 1 ? -1 : 0));
	cJSON_AddNumberToObject(g, "m_multiple", (double)(in->m_multiple > 0 ? in->m_multiple : 1));
	if (nphases(j) > 1) {
		cJSON *ps = cJSON_AddArrayToObject(k, "phases");
		for (int p = 0; p < nphases(j); p++) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "shape", codegen_shape_name(in->phase[p].shape));
			grid_json(o, f, grid_of(j, p));
			cJSON_AddItemToArray(ps, o);
		}
	}
	long m_min;
	const Job *var = m_variant(b, j, &m_min);
	if (var) {            /* at M >= m_min the runtime launches var instead */
		cJSON *o = cJSON_AddObjectToObject(k, "m_variant");
		cJSON_AddNumberToObject(o, "m_min", (double)m_min);
		cJSON_AddStringToObject(o, "kernel", var->name);
	}
	if (in->cooperative)
		cJSON_AddStringToObject(k, "launch", "cooperative");
	else if (in->persistent)
		cJSON_AddStringToObject(k, "launch", "persistent");
	if (in->sync_words > 0)
		cJSON_AddNumberToObject(k, "sync_words", in->sync_words);
	if (in->smem > 0)     /* dynamic shared bytes (the sm_90a GEMM's ring) */
		cJSON_AddNumberToObject(k, "smem", in->smem);
	if (in->cluster > 1)  /* CTAs a cluster along x (tile=BMxBN:2x1): the
	                         runtime launches it by cuLaunchKernelEx */
		cJSON_AddNumberToObject(k, "cluster", in->cluster);
	/* the sm_90a GEMM's shape and why (passes/schedule.c's last
	 * "# schedule: BMxBN tile, ..." line), for --stats */
	for (const char *c = f->comment, *e; in->persistent && in->shape == CG_GEMM && c && *c; c = *e ? e + 1 : e) {
		e = strchr(c, '\n');
		if (!e)
			e = c + strlen(c);
		if (!strncmp(c, "# schedule: ", 12) && (e - c) < 1000 && memchr(c, 'x', (size_t)(e - c))
		    && strstr(c, " tile, ") && strstr(c, " tile, ") < e) {
			char line[1000];
			snprintf(line, sizeof line, "%.*s", (int)(e - c - 12), c + 12);
			cJSON_DeleteItemFromObjectCaseSensitive(k, "schedule");
			cJSON_AddStringToObject(k, "schedule", line);
		}
	}
	if (in->ntmap > 0) {  /* TMA tensor maps, params after the scalars (docs/artifacts.md) */
		cJSON *tm = cJSON_AddArrayToObject(k, "tmaps");
		for (int i = 0; i < in->ntmap; i++) {
			const CodegenTmap *t = &in->tmap[i];
			cJSON *o = cJSON_CreateObject();
			cJSON_AddNumberToObject(o, "param", t->param);
			cJSON_AddNumberToObject(o, "elem_bytes", t->elem_bytes);
			cJSON_AddNumberToObject(o, "rows", (double)t->rows);
			cJSON_AddNumberToObject(o, "cols", (double)t->cols);
			cJSON_AddNumberToObject(o, "box_rows", t->box_rows);
			cJSON_AddNumberToObject(o, "box_cols", t->box_cols);
			cJSON_AddNumberToObject(o, "swizzle", t->swizzle);
			cJSON_AddItemToArray(tm, o);
		}
	}
	ps = cJSON_AddArrayToObject(k, "params");
	zo = cJSON_CreateArray();
	for (int i = 0; i < in->nparams; i++) {
		int v = in->param_value[i];
		cJSON *p = cJSON_CreateObject();
		char ty[128];
		cJSON_AddStringToObject(p, "name", f->val[v].name);
		cJSON_AddStringToObject(p, "dir", i < nin ? "in" : "out");
		cJSON_AddStringToObject(p, "type", type_str(&f->val[v].type, ty, sizeof ty));
		cJSON_AddItemToArray(ps, p);
		if (i >= nin && zero_output(in, i))
			cJSON_AddItemToArray(zo, cJSON_CreateString(f->val[v].name));
	}
	cJSON_AddBoolToObject(k, "has_m", in->has_m);
	cJSON_AddBoolToObject(k, "has_seed", in->has_seed);
	if (in->has_cols) {   /* the columns its code takes at run time (its PTX
	                         is that of every K: driver/build.c llvm_share) */
		cJSON_AddNumberToObject(k, "cols", (double)f->val[in->data].type.dim[1]);
		cJSON_AddNumberToObject(k, "cols_align", (double)in->cols_align);
	}
	cJSON_AddItemToObject(k, "zero_outputs", zo);
	char *ir = func_text(f, j->name, var ? m_min : 0, var ? var->name : NULL);
	cJSON_AddStringToObject(k, "ir", ir);
	free(ir);
	files = cJSON_AddObjectToObject(k, "files");
	ft = cJSON_AddObjectToObject(files, b->tg[j->t]->name);
	char fn[64];
	snprintf(fn, sizeof fn, "%s.%s.ptx", j->name, b->tg[j->t]->name);
	cJSON_AddStringToObject(ft, "ptx", fn);
	file_digest(ft, "ptx", j->e.ptx, j->e.ptx_len);
	if (j->e.cubin) {
		snprintf(fn, sizeof fn, "%s.%s.cubin", j->name, b->tg[j->t]->name);
		cJSON_AddStringToObject(ft, "cubin", fn);
		file_digest(ft, "cubin", j->e.cubin, j->e.cubin_len);
		cJSON_AddNumberToObject(ft, "regs", j->e.regs);
		cJSON_AddNumberToObject(ft, "spill_bytes", j->e.spill_bytes);
	}
	return k;
}

/* Whether the kernel a call runs holds a gemm (codegen's GEMM family). */
/* 1: in calls a kernel with a gemm; 2, 3: with a gemm_grouped, m- or
 * k-grouped (an expert group's fprop or wgrad); 0: neither. */
static int
calls_gemm(const Module *m, const Ins *in)
{
	const Func *kf = in->op == OP_call ? ir_find_func(m, in->callee) : NULL;

	for (int i = 0; kf && i < kf->nins; i++)
		if (kf->ins[i].op == OP_gemm)
			return 1;
		else if (kf->ins[i].op == OP_gemm_grouped)
			return kf->ins[i].group_k ? 3 : 2;
	return 0;
}

/* The GEMM calls of a step func by name: ret operand k is the result of
 * the k-th GEMM of the layer's merged fprop, dgrad, wgrad (merge.c). */
static void
gemm_names(const Module *m, const Func *f, const char **name)
{
	static const char *const g3[] = {"fprop", "dgrad", "wgrad"};
	int k = 0;

	/* a grouped GEMM says which it is (an expert group's step may lack
	 * dgrad, so ret's order does not): k-grouped is wgrad, m-grouped
	 * dgrad when it reads what dY makes, else fprop */
	char *grad = xcalloc((size_t)f->nval + 1, 1);
	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		int c = calls_gemm(m, in), g = in->op == OP_param && in->param == PARAM_GRAD;
		for (int a = 0; a < in->narg && !g; a++)
			g = in->arg[a] >= 0 && grad[in->arg[a]];
		for (int r = 0; r < ir_nres(in); r++)
			if (ir_res(in, r) >= 0)
				grad[ir_res(in, r)] = (char)g;
		if (c >= 2)
			name[i] = g3[c == 3 ? 2 : g ? 1 : 0];
	}
	free(grad);
	/* ret holds each GEMM's results in fprop, dgrad, wgrad order, an
	 * output amax before its GEMM's result: the n-th distinct dense GEMM
	 * call among ret's operands is g3[n] (by operand position, a dgrad
	 * with an output amax was labelled wgrad) */
	for (int i = 0, n = 0; i < f->nins; i++)
		if (f->ins[i].op == OP_ret)
			for (int a = 0; a < f->ins[i].narg && n < 3; a++) {
				const Ins *d = ir_def_ins(f, f->ins[i].arg[a]);
				if (d && calls_gemm(m, d) == 1 && !name[d - f->ins])
					name[d - f->ins] = g3[n++];
			}
	for (int i = 0; i < f->nins; i++)
		if (calls_gemm(m, &f->ins[i])) {
			if (!name[i])
				name[i] = g3[k < 3 ? k : 2];
			k++;
		}
}

static const char *
result_role(const Func *f, int v)
{
	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (in->op == OP_update && in->narg == 2 && in->arg[1] == v)
			return "next_state";
	}
	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (in->op == OP_ret)
			for (int a = 0; a < in->narg; a++)
				if (in->arg[a] == v)
					return "output";
	}
	return "scratch";
}

/* ---- the layers, streamed --------------------------------------------------
 * The layers are most of a manifest (45,091 of them, 112 MB, for DeepSeek-V3)
 * and a cJSON tree of them took 3.7 s to build, print and free. They are
 * written straight to a stream instead (one thread: stdio unlocked), in exactly cJSON's formatted
 * layout (cJSON.c print_object, print_array and print_string_ptr: a key
 * at depth d is d tabs, "key":, a tab and the value; an object's
 * members one per line, its '}' at depth d-1; array elements on one
 * line, ", "-separated; "[]" when empty), so the bytes do not change. */

static void
js_str(FILE *o, const char *s)
{
	putc_unlocked('"', o);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		switch (*p) {
		case '"': fputs_unlocked("\\\"", o); break;
		case '\\': fputs_unlocked("\\\\", o); break;
		case '\b': fputs_unlocked("\\b", o); break;
		case '\f': fputs_unlocked("\\f", o); break;
		case '\n': fputs_unlocked("\\n", o); break;
		case '\r': fputs_unlocked("\\r", o); break;
		case '\t': fputs_unlocked("\\t", o); break;
		default:
			if (*p < 32)
				fprintf(o, "\\u%04x", *p);
			else
				putc_unlocked(*p, o);
		}
	putc_unlocked('"', o);
}

static void
js_key(FILE *o, int depth, const char *key)
{
	for (int i = 0; i < depth; i++)
		putc_unlocked('\t', o);
	js_str(o, key);
	fputs_unlocked(":\t", o);
}

/* "}" closing an object whose keys are at depth d */
static void
js_close(FILE *o, int d)
{
	putc_unlocked('\n', o);
	for (int i = 0; i < d - 1; i++)
		putc_unlocked('\t', o);
	putc_unlocked('}', o);
}

/* {"k1": "v1", ...} of n string members, keys at depth d */
static void
js_strobj(FILE *o, int d, int n, const char *const *kv)
{
	fputs_unlocked("{\n", o);
	for (int i = 0; i < n; i++) {
		js_key(o, d, kv[2 * i]);
		js_str(o, kv[2 * i + 1]);
		if (i + 1 < n)
			putc_unlocked(',', o);
		if (i + 1 < n)
			putc_unlocked('\n', o);
	}
	js_close(o, d);
}

/* A layer's body, the members of its class object, keys at depth d:
 * buffers (each value once, in the order the steps first use them), steps
 * (kernel, gemm, args), updates (state, next). Everything but the FQN:
 * layers with equal bodies share one class. */
static void
layer_body(FILE *o, Build *b, int t, const Func *f, int d)
{
	const Module *m = b->mods[t];
	const char **gname = xcalloc((size_t)f->nins + 1, sizeof *gname);
	char *seen = xcalloc((size_t)f->nval + 1, 1);
	int *bufv = xcalloc((size_t)f->nval + 1, sizeof *bufv), nbuf = 0;
	/* per call step: its job and its args' values, laid out one after another */
	int nstep = 0, narg = 0, cap = 64;
	int *argv_ = xcalloc((size_t)cap, sizeof *argv_);
	Job **sjob = xcalloc((size_t)f->nins + 1, sizeof *sjob);
	int *sfirst = xcalloc((size_t)f->nins + 2, sizeof *sfirst);
	const char **sgemm = xcalloc((size_t)f->nins + 1, sizeof *sgemm);

	gemm_names(m, f, gname);
	for (int k = 0; k < f->nins; k++) {
		const Ins *in = &f->ins[k];
		if (in->op != OP_call)
			continue;
		Job *j = build_find_job(b, t, in->callee);
		if (!j)
			die("call of unknown kernel @%s in @%s", in->callee, f->name);
		/* a GEMM's own name, else the next GEMM's (whose operands
		 * this step makes), else the last one's */
		const char *gemm = gname[k];
		for (int q = k + 1; q < f->nins && !gemm; q++)
			gemm = gname[q];
		for (int q = k - 1; q >= 0 && !gemm; q--)
			gemm = gname[q];
		sjob[nstep] = j;
		sgemm[nstep] = gemm ? gemm : "none";
		sfirst[nstep] = narg;
		/* kernel params map to call operands, kernel ret operands to
		 * call results */
		const Func *kf = j->f;
		const Ins *ret = NULL;
		for (int q = 0; q < kf->nins; q++)
			if (kf->ins[q].op == OP_ret)
				ret = &kf->ins[q];
		for (int p = 0; p < j->e.info.nparams; p++) {
			int kv = j->e.info.param_value[p], cv = -1, pi = 0;
			for (int q = 0; q < kf->nins && cv < 0; q++)
				if (kf->ins[q].op == OP_param) {
					if (kf->ins[q].res == kv && pi < in->narg)
						cv = in->arg[pi];
					pi++;
				}
			for (int r = 0; ret && cv < 0 && r < ret->narg; r++)
				if (ret->arg[r] == kv && r < ir_nres(in))
					cv = ir_res(in, r);
			if (cv < 0)
				die("@%s: kernel value %%%s has no buffer at the call in @%s", kf->name,
				    kf->val[kv].name, f->name);
			if (!seen[cv]) {
				seen[cv] = 1;
				bufv[nbuf++] = cv;
			}
			if (narg == cap)
				argv_ = xrealloc(argv_, (size_t)(cap *= 2) * sizeof *argv_);
			argv_[narg++] = cv;
		}
		nstep++;
	}
	sfirst[nstep] = narg;

	js_key(o, d, "buffers");
	putc_unlocked('[', o);
	for (int i = 0; i < nbuf; i++) {
		int v = bufv[i];
		const Ins *def = ir_def_ins(f, v);
		char ty[128];
		const char *kv[6] = {"name", f->val[v].name, "type", type_str(&f->val[v].type, ty, sizeof ty),
		                     "role", def && def->op == OP_param
		                             ? (f->val[v].type.index ? "offsets" : param_role(def->param))
		                             : result_role(f, v)};
		if (i)
			fputs_unlocked(", ", o);
		js_strobj(o, d + 2, 3, kv);
	}
	fputs_unlocked("],\n", o);
	js_key(o, d, "steps");
	putc_unlocked('[', o);
	for (int s = 0; s < nstep; s++) {
		if (s)
			fputs_unlocked(", ", o);
		fputs_unlocked("{\n", o);
		js_key(o, d + 2, "kernel");
		js_str(o, sjob[s]->name);
		fputs_unlocked(",\n", o);
		js_key(o, d + 2, "gemm");
		js_str(o, sgemm[s]);
		fputs_unlocked(",\n", o);
		js_key(o, d + 2, "args");
		putc_unlocked('[', o);
		for (int a = sfirst[s]; a < sfirst[s + 1]; a++) {
			if (a > sfirst[s])
				fputs_unlocked(", ", o);
			js_str(o, f->val[argv_[a]].name);
		}
		putc_unlocked(']', o);
		js_close(o, d + 2);
	}
	fputs_unlocked("],\n", o);
	js_key(o, d, "updates");
	putc_unlocked('[', o);
	for (int k = 0, n = 0; k < f->nins; k++)
		if (f->ins[k].op == OP_update && f->ins[k].narg == 2) {
			const char *kv[4] = {"state", f->val[f->ins[k].arg[0]].name,
			                     "next", f->val[f->ins[k].arg[1]].name};
			if (n++)
				fputs_unlocked(", ", o);
			js_strobj(o, d + 2, 2, kv);
		}
	putc_unlocked(']', o);
	free(gname);
	free(seen);
	free(bufv);
	free(argv_);
	free(sjob);
	free(sfirst);
	free(sgemm);
}

/* The layer classes: every distinct layer body of every target, once.
 * DeepSeek-V3's 45,091 layers have 11 (driver/group.c): one copy each
 * instead of 45,091 made the manifest 112 MB. */
typedef struct Classes {
	NameTab tab;            /* body text -> class */
	char **text;            /* per class: its body, keys at depth CLASSD */
	int n, cap;
	int **of;               /* per target, per layer func: its class */
} Classes;

enum { CLASSD = 3 };            /* keys of layer_classes[i]: depth 3 */

static void
classes_make(Classes *c, Build *b)
{
	memset(c, 0, sizeof *c);
	ir_names_init(&c->tab, 64);
	c->of = xcalloc((size_t)b->ntg + 1, sizeof *c->of);
	for (int t = 0; t < b->ntg; t++) {
		const Module *m = b->mods[t];
		c->of[t] = xcalloc((size_t)m->nfn + 1, sizeof **c->of);
		const int *orig = b->origin[t];
		for (int i = 0; i < m->nfn; i++) {
			if (m->fn[i]->kernel)
				continue;
			/* a copy of an earlier layer (group_expand): its body, by
			 * construction; tests/lit/build/group.test compares the
			 * bytes with every layer's body written and compared */
			if (orig && orig[i] != i) {
				c->of[t][i] = c->of[t][orig[i]];
				continue;
			}
			char *s = NULL;
			size_t n = 0;
			FILE *o = open_memstream(&s, &n);
			if (!o)
				die("open_memstream: %s", strerror(errno));
			layer_body(o, b, t, m->fn[i], CLASSD);
			if (fclose(o))
				die("manifest: %s", strerror(errno));
			int k = ir_names_put(&c->tab, s, c->n);
			if (k >= 0) {
				free(s);
				c->of[t][i] = k;
				continue;
			}
			if (c->n == c->cap)
				c->text = xrealloc(c->text, (size_t)(c->cap = c->cap ? 2 * c->cap : 16) * sizeof *c->text);
			c->text[c->n] = s;
			c->of[t][i] = c->n++;
		}
	}
}

static void
classes_free(Classes *c, Build *b)
{
	for (int i = 0; i < c->n; i++)
		free(c->text[i]);
	free(c->text);
	for (int t = 0; t < b->ntg; t++)
		free(c->of[t]);
	free(c->of);
	ir_names_free(&c->tab);
}

/* The layer_classes array, the value of a key at depth 1. */
static void
classes_write(FILE *o, const Classes *c)
{
	putc_unlocked('[', o);
	for (int i = 0; i < c->n; i++) {
		if (i)
			fputs_unlocked(", ", o);
		fputs_unlocked("{\n", o);
		fputs_unlocked(c->text[i], o);
		js_close(o, CLASSD);
	}
	putc_unlocked(']', o);
}

/* The layers array of target t as the value of a key at depth kd: each
 * layer its FQN and its class. */
static void
layers_write(FILE *o, Build *b, const Classes *c, int t, int kd)
{
	const Module *m = b->mods[t];
	const Model *md = b->model;
	int n = 0, d = kd + 2;
	NameTab at, built;   /* fqn -> index of the model's linear; layers built */

	ir_names_init(&at, md ? (size_t)md->nlinears : 0);
	for (int i = 0; md && i < md->nlinears; i++)
		ir_names_put(&at, md->linears[i].fqn, i);
	ir_names_init(&built, (size_t)m->nfn);
	for (int i = 0; i < m->nfn; i++)
		if (!m->fn[i]->kernel)
			ir_names_put(&built, m->fn[i]->name, i);
	putc_unlocked('[', o);
	for (int i = 0; i < m->nfn; i++) {
		if (m->fn[i]->kernel || grouped_find(b, m->fn[i]->name) >= 0)
			continue;   /* expert groups: groups_write */
		if (n++)
			fputs_unlocked(", ", o);
		fputs_unlocked("{\n", o);
		js_key(o, d, "fqn");
		js_str(o, m->fn[i]->name);
		fputs_unlocked(",\n", o);
		js_key(o, d, "class");
		fprintf(o, "%d", c->of[t][i]);
		int li = md ? ir_names_get(&at, m->fn[i]->name) : -1;
		int root = li >= 0 ? model_input_root(md, li) : -1;
		if (root >= 0 && ir_names_get(&built, md->linears[root].fqn) >= 0) {
			/* the layer reads the input tensor of that one */
			fputs_unlocked(",\n", o);
			js_key(o, d, "shares_input");
			js_str(o, md->linears[root].fqn);
		}
		js_close(o, d);
	}
	putc_unlocked(']', o);
	ir_names_free(&at);
	ir_names_free(&built);
}

/* The groups array of target t (docs/artifacts.md, "Expert groups") as
 * the value of a key at depth kd: per expert group its name, its step's
 * class, the experts, the GEMMs grouped, each expert's W [n, k], and the
 * experts' own layers. */
static void
groups_write(FILE *o, Build *b, const Classes *c, int t, int kd)
{
	static const char *const g3[] = {"fprop", "dgrad", "wgrad"};
	const Module *m = b->mods[t];
	int n = 0, d = kd + 2;

	putc_unlocked('[', o);
	for (int i = 0; i < m->nfn; i++) {
		int gi = m->fn[i]->kernel ? -1 : grouped_find(b, m->fn[i]->name);
		if (gi < 0)
			continue;
		const BuildGroup *g = &b->groups[gi];
		if (n++)
			fputs_unlocked(", ", o);
		fputs_unlocked("{\n", o);
		js_key(o, d, "name");
		js_str(o, g->name);
		fputs_unlocked(",\n", o);
		js_key(o, d, "class");
		fprintf(o, "%d,\n", c->of[t][i]);
		js_key(o, d, "experts");
		fprintf(o, "%d,\n", g->experts);
		js_key(o, d, "gemms");
		putc_unlocked('[', o);
		for (int k = 0, w = 0; k < 3; k++)
			if (g->gemm[k]) {
				if (w++)
					fputs_unlocked(", ", o);
				js_str(o, g3[k]);
			}
		fputs_unlocked("],\n", o);
		js_key(o, d, "n");
		fprintf(o, "%ld,\n", g->n);
		js_key(o, d, "k");
		fprintf(o, "%ld,\n", g->k);
		js_key(o, d, "expert_layers");
		putc_unlocked('[', o);
		for (int e = 0; e < g->experts; e++) {
			if (e)
				fputs_unlocked(", ", o);
			js_str(o, g->expert[e]);
		}
		putc_unlocked(']', o);
		js_close(o, d);
	}
	putc_unlocked(']', o);
}

char *
artifacts_manifest(Build *b, const char *recipe_name, const char *model_name)
{
	cJSON *root = cJSON_CreateObject(), *o, *ts, *ks;
	char hex[24];

	cJSON_AddNumberToObject(root, "precc_manifest", 2);
	cJSON_AddStringToObject(root, "precc_version", PRECC_VERSION);
	cJSON_AddStringToObject(root, "llvm_version", codegen_llvm_version());
	o = cJSON_AddObjectToObject(root, "recipe");
	cJSON_AddStringToObject(o, "name", recipe_name);
	snprintf(hex, sizeof hex, "%016llx", (unsigned long long)b->recipe_hash);
	cJSON_AddStringToObject(o, "hash", hex);
	o = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(o, "name", model_name);
	snprintf(hex, sizeof hex, "%016llx", (unsigned long long)b->model_hash);
	cJSON_AddStringToObject(o, "hash", hex);
	if (b->training) {   /* the recipe's training policy, for precc_rt (docs/artifacts.md) */
		static const char *const loss[] = {"none", "static", "dynamic"};
		const TrainingPolicy *tp = b->training;
		o = cJSON_AddObjectToObject(root, "training");
		cJSON_AddStringToObject(o, "loss_scale", loss[tp->loss_scale]);
		cJSON_AddNumberToObject(o, "loss_scale_init", tp->loss_scale_init);
		cJSON_AddNumberToObject(o, "growth_factor", tp->growth_factor);
		cJSON_AddNumberToObject(o, "backoff_factor", tp->backoff_factor);
		cJSON_AddNumberToObject(o, "growth_interval", tp->growth_interval);
		cJSON_AddStringToObject(o, "master_weights", precc_format_get(tp->master_weights)->name);
		cJSON_AddStringToObject(o, "optimizer_state", precc_format_get(tp->optimizer_state)->name);
		cJSON_AddBoolToObject(o, "stochastic_rounding", tp->stochastic_round_updates);
	}
	ts = cJSON_AddArrayToObject(root, "targets");
	for (int t = 0; t < b->ntg; t++)
		cJSON_AddItemToArray(ts, cJSON_CreateString(b->tg[t]->name));
	ks = cJSON_AddArrayToObject(root, "kernels");
	for (int k = 0; k < b->njobs; k++)
		cJSON_AddItemToArray(ks, kernel_json(b, &b->jobs[k]));
	char *head = cJSON_PrintBuffered(root, 1 << 20, 1);
	cJSON_Delete(root);
	if (!head)
		die("cJSON_Print: out of memory");
	/* head ends "\n}": the layers (and target_layers) go before it */
	size_t hn = strlen(head);
	if (hn < 2 || strcmp(head + hn - 2, "\n}"))
		die("manifest: cJSON's object does not end in \"\\n}\"");
	char *text = NULL;
	size_t n = 0;
	FILE *w = open_memstream(&text, &n);
	if (!w)
		die("open_memstream: %s", strerror(errno));
	fwrite(head, 1, hn - 2, w);
	free(head);
	Classes cl;
	classes_make(&cl, b);
	fputs(",\n", w);
	js_key(w, 1, "layer_classes");
	classes_write(w, &cl);
	fputs(",\n", w);
	js_key(w, 1, "layers");
	layers_write(w, b, &cl, 0, 1);
	if (b->ngroups) {
		fputs(",\n", w);
		js_key(w, 1, "groups");
		groups_write(w, b, &cl, 0, 1);
	}
	if (b->ntg > 1) {
		fputs(",\n", w);
		js_key(w, 1, "target_layers");
		fputs("{\n", w);
		for (int t = 1; t < b->ntg; t++) {
			js_key(w, 2, b->tg[t]->name);
			layers_write(w, b, &cl, t, 2);
			if (t + 1 < b->ntg)
				fputs(",\n", w);
		}
		js_close(w, 2);
	}
	if (b->ntg > 1 && b->ngroups) {
		fputs(",\n", w);
		js_key(w, 1, "target_groups");
		fputs("{\n", w);
		for (int t = 1; t < b->ntg; t++) {
			js_key(w, 2, b->tg[t]->name);
			groups_write(w, b, &cl, t, 2);
			if (t + 1 < b->ntg)
				fputs(",\n", w);
		}
		js_close(w, 2);
	}
	classes_free(&cl, b);
	fputs("\n}\n", w);
	if (fclose(w))
		die("manifest: %s", strerror(errno));
	return text;
}

/* ---- generated C -------------------------------------------------------- */

/* A name the user chose (the recipe's, the model's; a func's, from layer
 * FQNs) inside a comment of generated C. Nothing in it may end the comment
 * or splice the line: "*" "/" and "/" "*", a backslash (also the trigraph
 * ??/), control bytes and non-ASCII are written as \xHH, as C would. */
static void
c_comment(FILE *o, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x20 || c >= 0x7f || c == '\\' || (c == '*' && s[1] == '/')
		    || (c == '/' && s[1] == '*') || (c == '?' && s[1] == '?'))
			fprintf(o, "\\x%02x", c);
		else
			fputc(c, o);
	}
}

static void
c_ident(char *dst, size_t n, const char *name)
{
	size_t k = 0;

	if (!((*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z') || *name == '_'))
		dst[k++] = 'p';
	for (; *name && k + 1 < n; name++)
		dst[k++] = (*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z')
		           || (*name >= '0' && *name <= '9') ? *name : '_';
	dst[k] = 0;
}

/* Bytes per element of the launchers' pointer types: e2m1 is uint8_t, a
 * byte of two codes (c_bytes sizes it). */
static long
elem_bytes(precc_format f)
{
	return f == PRECC_FP32 || f == PRECC_TF32 ? 4 : f == PRECC_FP16 || f == PRECC_BF16 ? 2 : 1;
}

/* A C expression for one dim at run time m. */
static void
c_dim(FILE *o, long d)
{
	if (d >= 0)
		fprintf(o, "(int64_t)%ld", d);
	else if (d == DIM_M)
		fprintf(o, "m");
	else
		fprintf(o, "((m + %ld) / %ld)", -d - 1, -d);
}

static void
c_extent(FILE *o, const char *indent, const Type *t, const char *rows, const char *cols)
{
	/* declares rows and cols unless indent is one tab (the grid's, declared
	 * once before the phases) */
	fprintf(o, "%s%s%s = ", indent, strcmp(indent, "\t") ? "int64_t " : "", rows);
	if (t->rank == 1)
		fprintf(o, "1");
	else
		c_dim(o, t->dim[0]);
	fprintf(o, ", %s = ", cols);
	c_dim(o, t->dim[t->rank == 1 ? 0 : 1]);
	fprintf(o, ";\n");
}

static void
c_signature(FILE *o, const Job *j)
{
	const Func *f = j->f;
	int nin = nparams_of(f);
	char id[128];

	fprintf(o, "int precc_%s(", j->name);
	for (int i = 0; i < j->e.info.nparams; i++) {
		int v = j->e.info.param_value[i];
		c_ident(id, sizeof id, f->val[v].name);
		if (f->val[v].type.index)   /* gemm_grouped's offsets */
			fprintf(o, "%sint32_t *%s, ", i < nin ? "const " : "", id);
		else
			fprintf(o, "%sprecc_%s *%s, ", i < nin ? "const " : "",
			        ir_fmt_name(f->val[v].type.fmt), id);
	}
	if (j->e.info.sync_words > 0)
		fprintf(o, "uint32_t *sync, ");
	if (j->e.info.has_m)
		fprintf(o, "int64_t m, ");
	if (j->e.info.has_seed)
		fprintf(o, "uint64_t seed, ");
	fprintf(o, "void *stream)");
}

void
artifacts_c(Build *b, const char *recipe_name, const char *model_name, char **hb, char **cb)
{
	size_t hn = 0, cn = 0;
	FILE *h = open_memstream(hb, &hn), *c = open_memstream(cb, &cn);

	if (!h || !c)
		die("open_memstream: %s", strerror(errno));
	fprintf(h, "/*\n * precc_kernels.h — typed launchers for the kernels of manifest.json.\n"
	           " * Generated by precc build (precc %s, LLVM %s) from recipe ", PRECC_VERSION,
	        codegen_llvm_version());
	c_comment(h, recipe_name);
	fprintf(h, " (%016llx)\n * and model ", (unsigned long long)b->recipe_hash);
	c_comment(h, model_name);
	fprintf(h, " (%016llx); do not edit.\n *\n"
	           " * Plain C, no CUDA header: each launcher computes its grid as the manifest\n"
	           " * says and calls the launch hook, which precc_rt (or the caller) installs\n"
	           " * with precc_kernels_set_hooks. Device pointers are typed by element\n"
	           " * format (one byte per element for 8- and 6-bit formats; precc_e2m1 is a\n"
	           " * byte of two e2m1 codes, element 2i in the low nibble). Each\n"
	           " * launcher returns 0, -1 when no hooks are set, -2 when m is not a multiple\n"
	           " * of the kernel's m_multiple (or negative), else the hook's nonzero result.\n */\n"
	           "#ifndef PRECC_KERNELS_H\n#define PRECC_KERNELS_H\n\n"
	           "#include <stddef.h>\n#include <stdint.h>\n\n"
	           "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
	           "#ifndef PRECC_ELEMENT_TYPES\n#define PRECC_ELEMENT_TYPES\n",
	        (unsigned long long)b->model_hash);
	for (int f = 0; f < PRECC_NFORMAT; f++)
		fprintf(h, "typedef %s precc_%s;\n",
		        elem_bytes(f) == 4 ? "float" : elem_bytes(f) == 2 ? "uint16_t" : "uint8_t",
		        ir_fmt_name(f));
	fprintf(h, "#endif\n\n"
	           "/* The 128 bytes of a TMA tensor map (a CUtensorMap), 64-byte aligned. */\n"
	           "#ifndef PRECC_TMAP_TYPE\n#define PRECC_TMAP_TYPE\n"
	           "#ifdef __cplusplus\n#define PRECC_ALIGN64 alignas(64)\n#else\n"
	           "#define PRECC_ALIGN64 _Alignas(64)\n#endif\n"
	           "typedef struct precc_tmap { PRECC_ALIGN64 unsigned char bytes[128]; } precc_tmap;\n"
	           "#endif\n\n"
	           "#define PRECC_KERNELS_RECIPE_HASH 0x%016llxull\n"
	           "#define PRECC_KERNELS_MODEL_HASH 0x%016llxull\n"
	           "#define PRECC_LAUNCH_COOPERATIVE 1u\n"
	           "#define PRECC_LAUNCH_PERSISTENT 2u\n"
	           "/* flags bits 8..15: the CTAs of a cluster along x (1: none) */\n"
	           "#define PRECC_LAUNCH_CLUSTER(n) ((unsigned)(n) << 8)\n"
	           "#define PRECC_LAUNCH_CLUSTER_OF(flags) ((((flags) >> 8) & 0xffu) ? (((flags) >> 8) & 0xffu) : 1u)\n\n"
	           "typedef struct precc_kernels_hooks {\n"
	           "\tvoid *ctx;\n"
	           "\t/* Launch kernel `name` (manifest \"name\"; `entry` is its PTX entry)\n"
	           "\t * on a grid[0] x grid[1] x grid[2] grid of `threads`-thread CTAs with\n"
	           "\t * `smem` bytes of dynamic shared memory (the manifest's \"smem\": the\n"
	           "\t * hook raises CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to it).\n"
	           "\t * args[i] points at kernel parameter i (cuLaunchKernel's kernelParams);\n"
	           "\t * stream is a CUstream. flags: PRECC_LAUNCH_COOPERATIVE\n"
	           "\t * (cuLaunchCooperativeKernel), PRECC_LAUNCH_PERSISTENT (cuLaunchKernel;\n"
	           "\t * the kernel loops over its tiles); with PRECC_LAUNCH_CLUSTER(n), n > 1,\n"
	           "\t * the kernel runs in clusters of n CTAs along x: cuLaunchKernelEx with\n"
	           "\t * CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (n, 1, 1) (without it its CTAs\n"
	           "\t * wait for peers that never come; grid[0] is a multiple of n). Returns\n"
	           "\t * 0 or an error. */\n"
	           "\tint (*launch)(void *ctx, const char *name, const char *entry,\n"
	           "\t              const unsigned grid[3], unsigned threads, unsigned smem,\n"
	           "\t              unsigned flags, void **args, void *stream);\n"
	           "\t/* Optional: how many `threads`-thread CTAs of kernel `name` the device\n"
	           "\t * holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor x SMs), for\n"
	           "\t * the grid of a kernel that loops over its tiles; absent or < 1: one CTA\n"
	           "\t * per tile. */\n"
	           "\tlong long (*resident)(void *ctx, const char *name, const char *entry,\n"
	           "\t                      unsigned threads);\n"
	           "\t/* Zero `bytes` bytes at device pointer ptr on stream (an atomic amax\n"
	           "\t * output, before its launch). Returns 0 or an error. */\n"
	           "\tint (*zero)(void *ctx, void *ptr, size_t bytes, void *stream);\n"
	           "\t/* Encode into *out the tensor map of a kernel that takes them (the\n"
	           "\t * manifest's \"tmaps\": the sm_90a GEMM) with cuTensorMapEncodeTiled:\n"
	           "\t * rank 2 over the row-major rows x cols matrix of elem_bytes-byte\n"
	           "\t * elements at device pointer base (dims {cols, rows}, row stride\n"
	           "\t * cols * elem_bytes), a box_rows x box_cols box, element strides 1,\n"
	           "\t * no interleave, `swizzle` bytes (0, 32, 64, 128), L2 promotion 256 B,\n"
	           "\t * out-of-bounds elements zero. Returns 0 or an error. */\n"
	           "\tint (*tmap)(void *ctx, precc_tmap *out, const void *base, unsigned elem_bytes,\n"
	           "\t            int64_t rows, int64_t cols, unsigned box_rows, unsigned box_cols,\n"
	           "\t            unsigned swizzle);\n"
	           "} precc_kernels_hooks;\n\n"
	           "/* Copies *hooks; NULL uninstalls. */\n"
	           "void precc_kernels_set_hooks(const precc_kernels_hooks *hooks);\n\n",
	        (unsigned long long)b->recipe_hash, (unsigned long long)b->model_hash);
	fprintf(c, "/* precc_kernels.c — generated by precc build (precc %s); do not edit. */\n"
	           "#include \"precc_kernels.h\"\n\n"
	           "static precc_kernels_hooks hooks;\n\n"
	           "void\nprecc_kernels_set_hooks(const precc_kernels_hooks *h)\n{\n"
	           "\tif (h)\n\t\thooks = *h;\n\telse\n\t\thooks.launch = 0, hooks.zero = 0, hooks.resident = 0, "
	           "hooks.tmap = 0, hooks.ctx = 0;\n}\n",
	        PRECC_VERSION);
	/* the runtime's and the emulator's grid function, verbatim (the file
	 * must compile without precc's headers) */
	fprintf(c, "\n/* precc/grid.h: a kernel's grid from its phases */\n%s\n%s\n%s\n",
	        PRECC_GRID_STR(PRECC_GRID_PHASE_TYPE), PRECC_GRID_STR(PRECC_GRID_FN(precc_kernels_grid)),
	        PRECC_GRID_STR(PRECC_GRID_LOOP_FN(precc_kernels_grid_loop)));
	for (int k = 0; k < b->njobs; k++)
		if (b->jobs[k].e.info.cluster > 1) {
			fprintf(c, "%s\n", PRECC_GRID_STR(PRECC_GRID_CLUSTER_FN(precc_kernels_grid_cluster)));
			break;
		}
	for (int k = 0; k < b->njobs; k++) {
		const Job *j = &b->jobs[k];
		const CodegenKernel *in = &j->e.info;
		const Func *f = j->f;
		int nin = nparams_of(f);
		char id[128];

		fprintf(h, "/* %s (", j->name);
		c_comment(h, f->name);
		fprintf(h, ", %s): %s, %d threads */\n", b->tg[j->t]->name,
		        codegen_shape_name(in->shape), in->threads);
		c_signature(h, j);
		fprintf(h, ";\n");
		fprintf(c, "\n");
		c_signature(c, j);
		fprintf(c, "\n{\n\tunsigned grid[3] = {1, 1, 1};\n");
		if (in->has_m)
			fprintf(c, "\tif (m < 0 || m %% %ld)\n\t\treturn -2;\n",
			        in->m_multiple > 0 ? in->m_multiple : 1);
		long m_min;
		const Job *var = m_variant(b, j, &m_min);
		if (var && in->has_m) {   /* the same GEMM on a larger tile (manifest m_variant) */
			fprintf(c, "\tif (m >= %ld)\n\t\treturn precc_%s(", m_min, var->name);
			for (int i = 0; i < in->nparams; i++) {
				c_ident(id, sizeof id, f->val[in->param_value[i]].name);
				fprintf(c, "%s, ", id);
			}
			fprintf(c, "%s%s%sstream);\n", in->sync_words > 0 ? "sync, " : "", "m, ",
			        in->has_seed ? "seed, " : "");
		}
		/* the grid by precc/grid.h's function, copied above */
		fprintf(c, "\tint64_t rows, cols;\n\tprecc_grid_phase ph[%d];\n", nphases(j));
		for (int p = 0; p < nphases(j); p++) {
			Grid g = grid_of(j, p);
			if (g.data < 0 || (g.tiled ? g.tr < 1 || g.tc < 1 : g.epc < 1)) {
				fprintf(c, "\tph[%d] = (precc_grid_phase){0, 1, 1, 1, 0, 0};\n", p);
				continue;
			}
			c_extent(c, "\t", &f->val[g.data].type, "rows", "cols");
			fprintf(c, "\tph[%d] = (precc_grid_phase){%d, rows, cols, %ld, %ld, %ld};\n", p,
			        g.tiled, g.tiled ? 0 : g.epc, g.tiled ? g.tr : 0, g.tiled ? g.tc : 0);
		}
		fprintf(c, "\t(void)rows, (void)cols;\n"
		           "\tif (precc_kernels_grid(ph, %d, grid))\n\t\treturn -2;\n", nphases(j));
		fprintf(c, "\tif (!hooks.launch)\n\t\treturn -1;\n");
		/* a kernel that loops over its tiles (cooperative, persistent) takes
		 * a 1-D grid of min(tiles, the CTAs the device holds), as the runtime */
		if (in->cluster > 1)   /* in clusters: whole clusters of the CTAs resident */
			fprintf(c, "\tprecc_kernels_grid_cluster(grid, hooks.resident ? hooks.resident(hooks.ctx, "
			           "\"%s\", \"%s\", %du) / %d : 0, %du);\n", j->name, in->name, in->threads,
			           in->cluster, in->cluster);
		else if (in->cooperative || in->persistent)
			fprintf(c, "\tprecc_kernels_grid_loop(grid, hooks.resident ? hooks.resident(hooks.ctx, "
			           "\"%s\", \"%s\", %du) : 0);\n", j->name, in->name, in->threads);
		for (int i = nin; i < in->nparams; i++) {
			int v = in->param_value[i];
			if (!zero_output(in, i))
				continue;
			const Type *t = &f->val[v].type;
			c_ident(id, sizeof id, f->val[v].name);
			fprintf(c, "\t{\n\t\tif (!hooks.zero)\n\t\t\treturn -1;\n");
			c_extent(c, "\t\t", t, "zr", "zc");
			fprintf(c, "\t\tint rc = hooks.zero(hooks.ctx, (void *)%s, "
			           "(size_t)(zr * zc * %ld%s), stream);\n\t\tif (rc)\n\t\t\treturn rc;\n\t}\n",
			        id, elem_bytes(t->fmt), t->fmt == PRECC_E2M1 ? " / 2" : "");
		}
		if (in->sync_words > 0)
			fprintf(c, "\t{\n\t\tif (!hooks.zero || !sync)\n\t\t\treturn -1;\n"
			           "\t\tint rc = hooks.zero(hooks.ctx, (void *)sync, %d * sizeof *sync, stream);\n"
			           "\t\tif (rc)\n\t\t\treturn rc;\n\t}\n", in->sync_words);
		/* the tensor maps, encoded at each launch: an extent of M is m */
		if (in->ntmap > 0) {
			fprintf(c, "\tprecc_tmap tm[%d];\n\tif (!hooks.tmap)\n\t\treturn -1;\n", in->ntmap);
			for (int i = 0; i < in->ntmap; i++) {
				const CodegenTmap *t = &in->tmap[i];
				c_ident(id, sizeof id, f->val[in->param_value[t->param]].name);
				fprintf(c, "\t{\n\t\tint rc = hooks.tmap(hooks.ctx, &tm[%d], (const void *)%s, %du, ", i,
				        id, t->elem_bytes);
				c_dim(c, t->rows < 0 ? DIM_M : t->rows);
				fprintf(c, ", ");
				c_dim(c, t->cols < 0 ? DIM_M : t->cols);
				fprintf(c, ", %du, %du, %du);\n\t\tif (rc)\n\t\t\treturn rc;\n\t}\n", t->box_rows,
				        t->box_cols, t->swizzle);
			}
		}
		if (in->has_cols)   /* the code's columns: this kernel's (manifest cols) */
			fprintf(c, "\tint64_t ncols = %ld;\n", f->val[in->data].type.dim[1]);
		fprintf(c, "\tvoid *args[] = {");
		const char *sep = "";
		for (int i = 0; i < in->nparams; i++, sep = ", ") {
			c_ident(id, sizeof id, f->val[in->param_value[i]].name);
			fprintf(c, "%s(void *)&%s", sep, id);
		}
		if (in->sync_words > 0)
			fprintf(c, "%s(void *)&sync", sep), sep = ", ";
		if (in->has_m)
			fprintf(c, "%s(void *)&m", sep), sep = ", ";
		if (in->has_cols)
			fprintf(c, "%s(void *)&ncols", sep), sep = ", ";
		if (in->has_seed)
			fprintf(c, "%s(void *)&seed", sep), sep = ", ";
		for (int i = 0; i < in->ntmap; i++)   /* by value: args points at the bytes */
			fprintf(c, "%s(void *)&tm[%d]", sep, i), sep = ", ";
		if (!*sep)
			fprintf(c, "0");
		char flags[80];
		snprintf(flags, sizeof flags, "%s", in->cooperative ? "PRECC_LAUNCH_COOPERATIVE"
		                                    : in->persistent ? "PRECC_LAUNCH_PERSISTENT" : "0u");
		if (in->cluster > 1)
			snprintf(flags + strlen(flags), sizeof flags - strlen(flags), " | PRECC_LAUNCH_CLUSTER(%d)",
			         in->cluster);
		fprintf(c, "};\n\treturn hooks.launch(hooks.ctx, \"%s\", \"%s\", grid, %du, %du, %s, args, "
		           "stream);\n}\n",
		        j->name, in->name, in->threads, in->smem > 0 ? in->smem : 0, flags);
	}
	fprintf(h, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
	fclose(h);
	fclose(c);
}
