/*
 * fuse.c — which instructions share a kernel, decided per step func and
 * recorded in the IR: fuse=GROUP on each op of a kernel-to-be,
 * prologue=G / epilogue=G on ops folded into the GEMM defining %G (and
 * epilogue=descale+... on the GEMM), amax_scheme=... on global amaxes,
 * with a '#' line saying why. partition.c turns the groups into kernels.
 *
 *  - Epilogue: de-scaling (the GEMM's scale operands), bias (and its zero
 *    padding), the output amax, the output cast and the unpadding slice
 *    run in the GEMM's epilogue, on the accumulator tile in registers.
 *  - Prologue: a high-precision transpose or pad that only feeds one
 *    GEMM is the GEMM's operand layout (16-bit wgmma/mma.sync take either
 *    major-ness from shared memory; TMA zero-fills out of bounds). fp8
 *    operands must be K-major, so their transposes are materialised, by
 *    the quantize kernel (below). A format cast is its own kernel: the
 *    GEMMs load their operands as stored (codegen's k_cast.c).
 *  - One read per source: every op that derives from one source tensor
 *    (%x, %w, %dy) — transposes, amaxes, scales, quantizes, the quantized
 *    copy's transpose, scale_inv — is one kernel (GROUP = x.quantize):
 *    the tensor is read once, and both its row-major and its transposed
 *    quantized copies are written from that read. Blockwise, MX and NVFP4
 *    block amaxes and rowwise amaxes along the stored rows are local to a
 *    tile, so amax, scale and quantize of a block happen in one pass.
 *  - Delayed scaling: the quantize uses the state scale, so nothing waits
 *    for this step's amax: it is taken in the same read (amax_scheme=
 *    atomic), and the history push/reduce and next scale of all the
 *    layer's tensors are one small kernel per step (state.update).
 *  - A global amax consumed in the same step (current tensorwise scaling,
 *    NVFP4's global scale, a rowwise scale along M) must be complete
 *    before any element is quantized. Two ways: two kernels (an amax
 *    kernel with atomic max, then scale+quantize: the source is read
 *    twice), or one cooperative kernel that keeps its tile on chip across
 *    a grid-wide barrier (atomic amax, barrier, quantize from registers /
 *    shared memory: one read). The grid scheme needs every CTA resident
 *    and the whole tensor on chip, so it is chosen when the source's shape
 *    is static (weights) and fits Target.onchip; otherwise two kernels.
 *  - Output fp8 casts need the output's amax first: the amax is in the
 *    epilogue, scale+quantize a kernel after the GEMM (y.quantize).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "passes.h"

enum { K_NONE, K_PARAM, K_GEMM, K_PRO, K_EPI, K_STATE, K_GROUP, K_END };
enum { ROOT_NONE = -1, ROOT_MIXED = -2 };
#define ROOT_GEMM(v) (-10 - (v))     /* after the GEMM defining value v */
#define MAXGROUP 64

typedef struct Fuse {
	Func *f;
	const Target *t;
	int *kind, *root;           /* per instruction */
	int *owner;                 /* GEMM, PRO, EPI: the GEMM's result value;
	                               STATE, GROUP: the group */
	char name[MAXGROUP][64];
	int ngroup;
} Fuse;

static Ins *
def_of(Fuse *z, int v)
{
	return ir_def_ins(z->f, v);
}

static int
def_index(Fuse *z, int v)
{
	return z->f->val[v].def;
}

static bool
uses(const Ins *i, int v)
{
	for (int a = 0; a < i->narg; a++)
		if (i->arg[a] == v)
			return true;
	return false;
}

static int
group(Fuse *z, const char *name)
{
	for (int g = 0; g < z->ngroup; g++)
		if (!strcmp(z->name[g], name))
			return g;
	if (z->ngroup == MAXGROUP)
		abort();
	snprintf(z->name[z->ngroup], sizeof z->name[0], "%s", name);
	return z->ngroup++;
}

static const char *
vname(Fuse *z, int v)
{
	return z->f->val[v].name;
}

/* codegen's cooperative kernels: the fewest elements a CTA takes (256
 * threads x 16: flat and 64x64 transposes; 128x128 tiles take more) and
 * the CTAs of 256 threads at .maxnreg 64 an SM holds */
enum { GRID_ELEMS_PER_CTA = 4096, GRID_CTAS_PER_SM = 4 };

static int
ebytes_of(const Type *t)
{
	return t->fmt == PRECC_FP32 || t->fmt == PRECC_TF32 ? 4
	       : t->fmt == PRECC_BF16 || t->fmt == PRECC_FP16 ? 2 : 1;
}

static long
bytes_of(const Type *t)
{
	long n = 1;
	int eb = t->fmt == PRECC_FP32 || t->fmt == PRECC_TF32 ? 4
	       : t->fmt == PRECC_BF16 || t->fmt == PRECC_FP16 ? 2 : 1;

	for (int k = 0; k < t->rank; k++) {
		if (t->dim[k] < 0)
			return -1;
		n *= t->dim[k];
	}
	return n * eb;
}

/* Epilogue ops: fed by the GEMM's result or another epilogue op. */
static void
mark_epilogues(Fuse *z)
{
	Func *f = z->f;

	for (int k = 0; k < f->nins; k++) {
		Ins *i = &f->ins[k];
		if (ir_op_gemm(i->op)) {
			z->kind[k] = K_GEMM, z->owner[k] = i->res;
			continue;
		}
		if ((i->op == OP_bias || i->op == OP_cast || i->op == OP_amax || i->op == OP_slice
		     || i->op == OP_accumulate)
		    && i->narg >= 1 && def_index(z, i->arg[0]) >= 0) {
			int d = def_index(z, i->arg[0]);
			if (z->kind[d] == K_GEMM || z->kind[d] == K_EPI)
				z->kind[k] = K_EPI, z->owner[k] = z->owner[d];
			/* the bias's zero padding: read with a bound check instead */
			int b = i->op == OP_bias && z->kind[k] == K_EPI ? def_index(z, i->arg[1]) : -1;
			if (b >= 0 && f->ins[b].op == OP_pad && ir_use_count(f, f->ins[b].res) == 1)
				z->kind[b] = K_EPI, z->owner[b] = z->owner[k];
		}
	}
}

/* Prologue ops: high-precision layout/format changes whose every use is
 * one GEMM, directly or through other prologue ops. */
static void
mark_prologues(Fuse *z)
{
	Func *f = z->f;

	for (int k = f->nins - 1; k >= 0; k--) {
		Ins *i = &f->ins[k];
		int g = -1;
		bool ok = (i->op == OP_transpose || i->op == OP_pad)
		       && !i->type.is_scale && ir_fmt_high(i->type.fmt) && z->kind[k] == K_NONE;
		for (int j = k + 1; ok && j < f->nins; j++) {
			if (!uses(&f->ins[j], i->res))
				continue;
			int o = z->kind[j] == K_GEMM || z->kind[j] == K_PRO ? z->owner[j] : -1;
			if (o < 0 || (g >= 0 && o != g))
				ok = false;
			g = o;
		}
		if (ok && g >= 0)
			z->kind[k] = K_PRO, z->owner[k] = g;
	}
}

static void
mark_state(Fuse *z)
{
	Func *f = z->f;

	for (int k = 0; k < f->nins; k++) {
		Ins *i = &f->ins[k];
		if (z->kind[k] != K_NONE)
			continue;
		bool st = i->op == OP_history_push || i->op == OP_history_reduce;
		for (int a = 0; !st && a < i->narg; a++) {
			int d = def_index(z, i->arg[a]);
			st = d >= 0 && z->kind[d] == K_STATE;
		}
		if (st)
			z->kind[k] = K_STATE, z->owner[k] = group(z, "state.update");
	}
}

/* The hadamard at k reads the transpose of a data param, which nothing
 * else reads, and only amaxes and one quantize read its result. */
static bool
rht_folds(Fuse *z, int k)
{
	const Func *f = z->f;
	const Ins *h = &f->ins[k], *t = def_of(z, h->arg[0]);
	int nq = 0;

	if (!t || t->op != OP_transpose || ir_use_count(f, t->res) != 1 || !def_of(z, t->arg[0])
	    || def_of(z, t->arg[0])->op != OP_param)
		return false;
	for (int j = k + 1; j < f->nins; j++) {
		if (!uses(&f->ins[j], h->res))
			continue;
		if (f->ins[j].op == OP_quantize && f->ins[j].arg[0] == h->res && !nq++)
			continue;
		if (f->ins[j].op != OP_amax)
			return false;
	}
	return nq == 1;
}

static int
combine(int a, int b)
{
	if (a == ROOT_NONE)
		return b;
	if (b == ROOT_NONE || a == b)
		return a;
	return ROOT_MIXED;
}

/* The source each remaining op derives from: a data param (its value),
 * a GEMM's output (nval + the GEMM's index), ROOT_NONE (state only). */
static void
roots(Fuse *z)
{
	Func *f = z->f;

	for (int k = 0; k < f->nins; k++) {
		Ins *i = &f->ins[k];
		int r = ROOT_NONE;
		if (i->op == OP_param) {
			z->kind[k] = K_PARAM;
			/* %offs (i32) is read beside the data it groups, as state is */
			z->root[k] = i->param == PARAM_STATE || i->type.index ? ROOT_NONE : i->res;
			continue;
		}
		if (i->op == OP_update || i->op == OP_ret || i->op == OP_call) {
			z->kind[k] = K_END;    /* a call: already partitioned IR */
			z->root[k] = ROOT_MIXED;
			continue;
		}
		if (i->op == OP_hadamard) {
			/* NVFP4's RHT (and the transpose only it reads): what reads
			 * its result derives from it, as from a source. Of a data
			 * param's transpose read only by amaxes and a quantize (the
			 * wgrad copy), the transform runs in those kernels, on the
			 * 16 values a thread holds: the transformed copy is never
			 * written (split_global gives the amax kernel its own copy
			 * of the transform). Otherwise a kernel of its own. */
			char nm[128];
			int d = def_index(z, i->arg[0]);
			if (rht_folds(z, k)) {
				/* of the data param's source: its kernels read x once
				 * for both copies (row blocks of x, and of the
				 * transform of xᵀ), its amax kernel both global amaxes */
				z->root[d] = z->root[k] = z->root[def_index(z, f->ins[d].arg[0])];
				ir_comment(&i->comment, "fuse: %%%s is computed where it is read, in %s.amax "
				           "and %s.quantize, and never written: one read of %%%s per kernel",
				           vname(z, i->res), vname(z, i->res), vname(z, i->res),
				           vname(z, f->ins[d].arg[0]));
				continue;
			}
			snprintf(nm, sizeof nm, "%s.hadamard", vname(z, i->res));
			z->kind[k] = K_GROUP, z->owner[k] = group(z, nm), z->root[k] = i->res;
			if (d >= 0 && f->ins[d].op == OP_transpose && ir_use_count(f, f->ins[d].res) == 1)
				z->kind[d] = K_GROUP, z->owner[d] = z->owner[k];
			continue;
		}
		for (int a = 0; a < i->narg; a++) {
			int d = def_index(z, i->arg[a]);
			if (d < 0)
				continue;
			if (z->kind[d] == K_GEMM || z->kind[d] == K_EPI)
				r = combine(r, ROOT_GEMM(z->owner[d]));
			else if (z->kind[d] == K_END)
				r = combine(r, ROOT_MIXED);
			else if (z->kind[d] != K_STATE)
				r = combine(r, z->root[d]);
		}
		z->root[k] = r;
	}
}

/* A source group's name: the source, then what it makes. */
static void
source_group_name(Fuse *z, int root, char *buf, size_t n)
{
	Func *f = z->f;
	const char *w = NULL;

	for (int k = 0; k < f->nins; k++)
		if ((z->kind[k] == K_NONE || z->kind[k] == K_GROUP) && z->root[k] == root) {
			if (f->ins[k].op == OP_quantize) {
				w = "quantize";
				break;
			}
			if (!w || f->ins[k].op == OP_dequantize)
				w = opinfo[f->ins[k].op].name;
		}
	snprintf(buf, n, "%s.%s", f->val[root].name, w ? w : "ops");
}

static void
assign_groups(Fuse *z)
{
	Func *f = z->f;
	char buf[128];

	for (int k = 0; k < f->nins; k++) {
		Ins *i = &f->ins[k];
		int r = z->root[k];
		if (z->kind[k] != K_NONE)
			continue;
		if (r == ROOT_NONE) {
			/* reads state only (a delayed scale's scale_inv): with the
			 * first quantize that reads the same state */
			int g = -1;
			for (int j = 0; j < f->nins && g < 0; j++)
				if (j != k && f->ins[j].op == OP_quantize && i->narg && uses(&f->ins[j], i->arg[0]))
					g = j;
			if (g >= 0 && z->root[g] >= 0)
				r = z->root[k] = z->root[g];
			else {
				z->kind[k] = K_STATE, z->owner[k] = group(z, "state.update");
				continue;
			}
		}
		if (r >= 0) {
			source_group_name(z, r, buf, sizeof buf);
		} else if (r <= ROOT_GEMM(0)) {
			/* after a GEMM: named after its epilogue's output */
			int g = -10 - r;
			const char *n = vname(z, g);
			snprintf(buf, sizeof buf, "%.*s.quantize", (int)strcspn(n, "."), n);
			bool first = true;
			for (int x = 0; x < z->ngroup; x++)
				first &= strcmp(z->name[x], buf) != 0;
			if (first)
				ir_comment(&i->comment, "fuse: the output's current scale needs its global "
				           "amax: the amax in %%%s's epilogue, scale + quantize in %s after the "
				           "GEMM (which reads the f32 result)", n, buf);
		} else
			snprintf(buf, sizeof buf, "%s", vname(z, i->res));
		z->kind[k] = K_GROUP;
		z->owner[k] = group(z, buf);
	}
}

/* Does the amax at k reduce across more than one tile of its source (rows
 * of the stored layout that are dynamic or more than 128)? *tr: its
 * operand is the source transposed. */
static bool
global_amax(Fuse *z, int k, bool *tr)
{
	Func *f = z->f;
	const Ins *i = &f->ins[k], *d = def_of(z, i->arg[0]);
	const Type *ot = &f->val[i->arg[0]].type, *rt = &i->type;
	long rows;

	*tr = d && d->op == OP_transpose;
	if (!rt->block[0] && !rt->block[1])
		return true;        /* tensorwise: across every CTA */
	if (!*tr && (rt->block[0] > 1 || rt->block[0] == BLOCK_GROUP) && !rt->block[1])
		return true;        /* {N x *} or {gx*}, per expert: many CTAs */
	rows = *tr ? (rt->block[1] ? rt->block[1] : ot->dim[1])
	           : (rt->block[0] ? rt->block[0] : ot->dim[0]);
	return rows < 0 || rows > 128;
}

/* Room in the per-instruction arrays for the instruction ir_insert just
 * put at pos, which gets kind, owner and root. */
static void
made_room(Fuse *z, int pos, int kind, int owner, int root)
{
	int **a3[3] = {&z->kind, &z->owner, &z->root};

	for (int a = 0; a < 3; a++) {
		int *p = realloc(*a3[a], sizeof(int) * (size_t)(z->f->nins + 1));
		if (!p)
			abort();
		memmove(p + pos + 1, p + pos, sizeof(int) * (size_t)(z->f->nins - 1 - pos));
		*a3[a] = p;
	}
	z->kind[pos] = kind, z->owner[pos] = owner, z->root[pos] = root;
}

/* The global amax at *k of a folded RHT (rht_folds): its own transpose and
 * hadamard of the data param, right before it, in the amax kernel-to-be
 * (group ga), so that kernel reads the param too. */
static void
rht_amax_copy(Fuse *z, int *k, int ga)
{
	Func *f = z->f;
	const Ins *h = def_of(z, f->ins[*k].arg[0]), *t = def_of(z, h->arg[0]);
	int x = t->arg[0], tres = t->res, hres = h->res, root = z->root[*k];
	unsigned signs = h->signs;
	char nm[256];

	snprintf(nm, sizeof nm, "%s.amax_in", vname(z, tres));
	int tv = ir_value(f, nm, f->val[tres].type);
	snprintf(nm, sizeof nm, "%s.amax_in", vname(z, hres));
	int hv = ir_value(f, nm, f->val[hres].type);
	ir_insert(f, *k, OP_transpose, tv, &x, 1);
	made_room(z, *k, K_GROUP, ga, root);
	ir_insert(f, *k + 1, OP_hadamard, hv, &tv, 1)->signs = signs;
	made_room(z, *k + 1, K_GROUP, ga, root);
	*k += 2;
	f->ins[*k].arg[0] = hv;
	z->owner[*k] = ga;
	ir_recompute_defs(f);
}

static void
split_global(Fuse *z)
{
	Func *f = z->f;

	for (int k = 0; k < f->nins; k++) {
		Ins *i = &f->ins[k];
		bool tr, inside = false;
		int gq = z->owner[k], src = z->root[k];
		if (z->kind[k] != K_GROUP || i->op != OP_amax || src < 0 || !global_amax(z, k, &tr))
			continue;
		for (int j = k + 1; j < f->nins; j++)
			if (uses(&f->ins[j], i->res) && z->kind[j] == K_GROUP && z->owner[j] == gq)
				inside = true;
		if (!inside) {
			ir_set_attr(i->pattr, PA_AMAX_SCHEME, "atomic");
			ir_comment(&i->comment, "fuse: nothing in this step waits for %%%s (the scale "
			           "comes from the state): taken from the same read, atomic max",
			           vname(z, i->res));
			continue;
		}
		const Ins *hd = def_of(z, i->arg[0]);
		if (hd && hd->op == OP_hadamard && z->owner[def_index(z, i->arg[0])] == gq) {
			ir_comment(&i->comment, "fuse: %%%s is of the transformed values, needed before "
			           "any element is quantized: in %s.amax, which transforms its own copy of "
			           "what it reads, beside %%%s's own amax (one read for both)",
			           vname(z, i->res), vname(z, src), vname(z, src));
			char an[128];
			snprintf(an, sizeof an, "%s.amax", vname(z, src));
			rht_amax_copy(z, &k, group(z, an));
			i = &f->ins[k];
			ir_set_attr(i->pattr, PA_AMAX_SCHEME, "two_kernel");
			continue;
		}
		const Type *st = &f->val[src].type;
		long b = bytes_of(st);
		/* the grid scheme reads once only if every tile has a resident
		 * CTA: codegen's cooperative kernels take at least
		 * GRID_ELEMS_PER_CTA elements per CTA and hold GRID_CTAS_PER_SM
		 * CTAs per SM (.maxnreg 64 at 256 threads); with more tiles than
		 * that x the target's SMs they loop and read twice, so two kernels */
		long ctas = b < 0 ? -1 : (b / ebytes_of(st) + GRID_ELEMS_PER_CTA - 1) / GRID_ELEMS_PER_CTA;
		long resident = (long)GRID_CTAS_PER_SM * z->t->sms;
		if (i->type.block[0] == BLOCK_GROUP) {
			ir_comment(&i->comment, "fuse: %%%s, one amax per expert's routed rows, is "
			           "needed before any element is quantized: two kernels (codegen's "
			           "grid-wide amax is tensorwise only)", vname(z, i->res));
			ir_set_attr(i->pattr, PA_AMAX_SCHEME, "two_kernel");
			goto two_kernels;
		}
		if (i->type.block[0] > 1 && !i->type.block[1]) {
			ir_comment(&i->comment, "fuse: %%%s, one amax per expert's %ld rows, is needed "
			           "before any element is quantized: two kernels (codegen's grid-wide "
			           "amax is tensorwise only)", vname(z, i->res), i->type.block[0]);
			ir_set_attr(i->pattr, PA_AMAX_SCHEME, "two_kernel");
			goto two_kernels;
		}
		if (b >= 0 && b <= z->t->onchip && z->t->grid_barrier && ctas > resident) {
			ir_set_attr(i->pattr, PA_AMAX_SCHEME, "two_kernel");
			ir_comment(&i->comment, "fuse: %%%s is needed before any element is quantized; "
			           "%%%s fits on chip, but a grid-wide barrier over it needs %ld CTAs "
			           "resident at once, over the %ld of %s (%d per SM x %d SMs): two kernels",
			           vname(z, i->res), vname(z, src), ctas, resident, z->t->name,
			           GRID_CTAS_PER_SM, z->t->sms);
			goto two_kernels;
		}
		if (b >= 0 && b <= z->t->onchip && z->t->grid_barrier) {
			ir_set_attr(i->pattr, PA_AMAX_SCHEME, "grid");
			ir_comment(&i->comment, "fuse: %%%s is needed before any element is quantized; "
			           "%%%s is static (%ld KiB <= %ld KiB on chip on %s): one cooperative "
			           "kernel, atomic amax + grid-wide barrier, tile kept in registers/smem "
			           "(one read)", vname(z, i->res), vname(z, src), b >> 10,
			           z->t->onchip >> 10, z->t->name);
			continue;
		}
	two_kernels:;
		/* two kernels: the amax reads the source in its stored layout (a
		 * padded source: the pad moves into the amax kernel, which then
		 * writes the padded copy the quantize kernel reads) */
		char an[128];
		snprintf(an, sizeof an, "%s.amax", vname(z, src));
		const Ins *d = def_of(z, i->arg[0]);
		int pad = -1;
		if (d && d->op == OP_transpose && def_of(z, d->arg[0])
		    && def_of(z, d->arg[0])->op == OP_pad)
			pad = def_index(z, d->arg[0]);
		else if (d && d->op == OP_pad && (i->type.block[0] || i->type.block[1]))
			pad = def_index(z, i->arg[0]);
		else if (d && d->op == OP_pad)
			i->arg[0] = src;        /* zeros do not change a tensor's amax */
		if (pad >= 0)
			z->owner[pad] = group(z, an);
		if (tr) {
			/* amax %x.t {b0xb1} == transpose(amax %x {b1xb0}) */
			char nm[256];
			Type at = i->type;
			long x = at.dim[0];
			at.dim[0] = at.dim[1], at.dim[1] = x;
			x = at.block[0], at.block[0] = at.block[1], at.block[1] = x;
			snprintf(nm, sizeof nm, "%s.src", vname(z, i->res));
			int nv = ir_value(f, nm, at), old = i->res;
			i->res = nv, i->type = at, i->arg[0] = d->arg[0];
			ir_insert(f, k + 1, OP_transpose, old, &nv, 1);
			made_room(z, k + 1, K_GROUP, gq, src);
			i = &f->ins[k];
			/* rowwise with a transposed copy: the rows' amaxes (rowwise
			 * along the stored rows, over all of them: not a tile's)
			 * come from the same read, so that the quantize kernel has
			 * both scales and reads the source once more, not twice */
			for (int j = 0; j < f->nins; j++) {
				Ins *r = &f->ins[j];
				if (j != k && r->op == OP_amax && r->arg[0] == src && z->owner[j] == gq
				    && r->type.block[0] == 1 && r->type.block[1] == 0
				    && !r->pattr[PA_AMAX_SCHEME]) {
					z->owner[j] = group(z, an);
					ir_set_attr(r->pattr, PA_AMAX_SCHEME, "two_kernel");
					ir_comment(&r->comment, "fuse: the rows' amax of %%%s in %s, from the read "
					           "that takes its columns' (the quantize then has both scales)",
					           vname(z, src), an);
				}
			}
		}
		z->owner[k] = group(z, an);
		if (i->pattr[PA_AMAX_SCHEME])
			continue;     /* the residency reason above */
		ir_set_attr(i->pattr, PA_AMAX_SCHEME, "two_kernel");
		if (b >= 0 && b <= z->t->onchip)
			ir_comment(&i->comment, "fuse: %%%s is needed before any element is quantized; "
			           "%%%s would fit on chip, but grid-wide barriers are off: two kernels "
			           "(%s: atomic amax; then %s)", vname(z, i->res), vname(z, src), an,
			           z->name[gq]);
		else if (b < 0)
			ir_comment(&i->comment, "fuse: %%%s is needed before any element is quantized "
			           "and %%%s has M rows, known at run time: two kernels (%s: atomic "
			           "amax; then %s reads %%%s again); a grid-wide barrier would need all "
			           "of it on chip", vname(z, i->res), vname(z, src), an, z->name[gq],
			           vname(z, src));
		else
			ir_comment(&i->comment, "fuse: %%%s is needed before any element is quantized "
			           "and %%%s (%ld KiB) does not fit on chip (%ld KiB on %s): two kernels "
			           "(%s: atomic amax; then %s)", vname(z, i->res), vname(z, src), b >> 10,
			           z->t->onchip >> 10, z->t->name, an, z->name[gq]);
	}
}

static void
annotate(Fuse *z)
{
	Func *f = z->f;
	char list[1024] = "";

	for (int k = 0; k < f->nins; k++) {
		Ins *i = &f->ins[k];
		switch (z->kind[k]) {
		case K_PRO:
			ir_set_attr(i->pattr, PA_PROLOGUE, "%s", vname(z, z->owner[k]));
			break;
		case K_EPI:
			ir_set_attr(i->pattr, PA_EPILOGUE, "%s", vname(z, z->owner[k]));
			break;
		case K_STATE:
		case K_GROUP:
			ir_set_attr(i->pattr, PA_FUSE, "%s", z->name[z->owner[k]]);
			break;
		case K_GEMM: {
			char e[128] = "";
			if (i->narg > (i->op == OP_gemm_grouped ? 3 : 2))
				strcat(e, "+descale");
			for (int j = k + 1; j < f->nins; j++)
				if (z->kind[j] == K_EPI && z->owner[j] == i->res) {
					const char *n = opinfo[f->ins[j].op].name;
					if (!strstr(e, n) && strlen(e) + strlen(n) + 2 < sizeof e)
						strcat(e, "+"), strcat(e, n);
				}
			if (e[0])
				ir_set_attr(i->pattr, PA_EPILOGUE, "%s", e + 1);
			break;
		}
		default: break;
		}
	}
	for (int g = 0; g < z->ngroup; g++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", g ? ", " : "",
		         z->name[g]);
	ir_comment(&f->comment, "fuse: %d kernel%s%s%s", z->ngroup, z->ngroup == 1 ? "" : "s",
	           z->ngroup ? ": " : "", list);
}

static void
fuse_func(Func *f, const Target *t)
{
	Fuse z = {.f = f, .t = t};
	size_t n = sizeof(int) * (size_t)(f->nins + 1);

	if (f->kernel)
		return;
	z.kind = calloc(1, n), z.owner = calloc(1, n), z.root = calloc(1, n);
	if (!z.kind || !z.owner || !z.root)
		abort();
	mark_epilogues(&z);
	mark_prologues(&z);
	mark_state(&z);
	roots(&z);
	assign_groups(&z);
	split_global(&z);
	annotate(&z);
	free(z.kind), free(z.owner), free(z.root);
}

void
fuse(Module *m, const Target *t)
{
	for (int k = 0; k < m->nfn; k++)
		fuse_func(m->fn[k], t);
}
