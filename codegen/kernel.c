/*
 * kernel.c — from a kernel Func to a CodegenKernel: which shape it is,
 * its parameter ABI (codegen.h), its launch geometry; then kemit.c builds
 * the LLVM function and target.c turns it into PTX. Anything outside the
 * shapes below is an error naming the op that does not fit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kern.h"

static const char *const shape_names[NCGSHAPE] = {
	[CG_AMAX_TENSOR] = "amax_tensor", [CG_AMAX_COLS] = "amax_cols", [CG_QUANT_TENSOR] = "quant_tensor",
	[CG_QUANT_ROWBLOCK] = "quant_rowblock", [CG_QUANT_TILE] = "quant_tile",
	[CG_QUANT_COLBLOCK] = "quant_colblock",
	[CG_DELAYED_UPDATE] = "delayed_update", [CG_DEQUANT] = "dequant", [CG_GEMM] = "gemm",
	[CG_HADAMARD] = "hadamard", [CG_QUANT_ROWCOL] = "quant_rowcol", [CG_AMAX_ROWCOL] = "amax_rowcol",
	[CG_CAST] = "cast",
};

const char *
codegen_shape_name(CgShape s)
{
	return (unsigned)s < NCGSHAPE ? shape_names[s] : "?";
}

int
kfail(Kern *k, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(k->err, k->errsz, "codegen: @%s: ", k->f->name ? k->f->name : "?");

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < k->errsz)
		vsnprintf(k->err + n, k->errsz - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int
is_tensorwise(const Type *t)
{
	return t->is_scale && t->block[0] == 0 && t->block[1] == 0;
}

static int
add_out(Kern *k, int v)
{
	for (int i = 0; i < k->nout; i++)
		if (k->out[i] == v)
			return 0;
	if (k->nout >= KMAXP)
		return kfail(k, "too many outputs");
	k->out[k->nout++] = v;
	return 0;
}

/* The shape, from the ops present and the granularity of the quantize's
 * (or amax's) scale. */
static int
classify(Kern *k)
{
	const Func *f = k->f;
	int nq = 0, nhist = 0, ndeq = 0, namax = 0, ntr = 0, nhad = 0, ncast = 0;

	k->x = -1;
	k->q = -1;
	k->goffs = -1;
	for (int i = 0; i < f->nins; i++)
		if (f->ins[i].op == OP_gemm_grouped) {
			const char *mma = f->ins[i].pattr[PA_MMA];
			if (mma && !strcmp(mma, "wgmma")) {
				if (k->sm != CG_SM90A)
					return kfail(k, "mma=wgmma on %s: wgmma needs sm_90a", codegen_sm_name(k->sm));
				return gemm_grouped_sm90_classify(k);
			}
			return gemm_grouped_classify(k);
		}
		else if (f->ins[i].op == OP_gemm) {
			const char *mma = f->ins[i].pattr[PA_MMA];
			if (mma && !strcmp(mma, "wgmma")) {
				if (k->sm != CG_SM90A)
					return kfail(k, "mma=wgmma on %s: wgmma needs sm_90a", codegen_sm_name(k->sm));
				return gemm_sm90_classify(k);
			}
			return gemm_classify(k);
		}
	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (!kin(k, i))
			continue;
		switch (in->op) {
		case OP_param:
			if (k->nin >= KMAXP)
				return kfail(k, "too many params");
			k->in[k->nin++] = in->res;
			if (k->x < 0 && in->param != PARAM_STATE && in->type.rank == 2 && !in->type.is_scale)
				k->x = in->res;
			break;
		case OP_amax: namax++; break;
		case OP_scale: case OP_mx_scale: case OP_block_scale: case OP_recip: break;
		case OP_history_push: case OP_history_reduce: nhist++; break;
		case OP_quantize:
			if (nq++)
				return kfail(k, "%%%s = quantize: one quantize per kernel",
				             f->val[in->res].name);
			k->q = i;
			break;
		case OP_dequantize: ndeq++; k->q = i; break;
		case OP_cast: ncast++; k->q = i; break;
		case OP_hadamard: nhad++; k->had = i; break;
		case OP_transpose: ntr++; break;
		case OP_update:
			if (add_out(k, in->arg[1]))
				return -1;
			break;
		case OP_ret:
			for (int j = 0; j < in->narg; j++)
				if (add_out(k, in->arg[j]))
					return -1;
			break;
		default:
			return kfail(k, "%s is not a kernel op",
			             opinfo[in->op].name);
		}
	}
	for (int i = 0; i < k->nout; i++) {
		const Ins *d = ir_def_ins(f, k->out[i]);
		if (!d || d->op == OP_param)
			return kfail(k, "output %%%s is a param: nothing to compute",
			             f->val[k->out[i]].name);
	}
	if (nhist) {
		if (nq || ndeq || namax || ntr)
			return kfail(k, "history ops share a kernel only with scale and recip");
		k->shape = CG_DELAYED_UPDATE;
		return 0;
	}
	if (nhad) {
		/* NVFP4's RHT: of the data param or of its transpose (the wgrad
		 * copy). Alone, written in the transform's layout; with tensorwise
		 * amaxes of its result, their kernel (k_hadamard.c, nothing
		 * written); with the quantize of its result, quant_colblock
		 * transforms each block it reads (below). */
		const Ins *h = &f->ins[k->had], *d = ir_def_ins(f, h->arg[0]);
		if (nhad > 1 || ndeq)
			return kfail(k, "%%%s = hadamard: one per kernel, without dequantize",
			             f->val[h->res].name);
		if (k->x < 0 || (h->arg[0] != k->x && !(d && d->op == OP_transpose && d->arg[0] == k->x)))
			return kfail(k, "%%%s = hadamard: of the data param or its transpose",
			             f->val[h->res].name);
		if (h->type.fmt != PRECC_BF16 && h->type.fmt != PRECC_FP16 && h->type.fmt != PRECC_FP32)
			return kfail(k, "%%%s = hadamard: bf16, f16 or f32 results", f->val[h->res].name);
		if (!nq) {
			int amaxes = namax > 0;
			for (int i = 0; i < f->nins; i++)
				if (kin(k, i) && f->ins[i].op == OP_amax
				    && ((f->ins[i].arg[0] != h->res && f->ins[i].arg[0] != k->x)
				        || !is_tensorwise(&f->ins[i].type)))
					return kfail(k, "%%%s = amax: a hadamard kernel takes tensorwise amaxes "
					             "of the transform's result (and of the data param, from the "
					             "same read)", f->val[f->ins[i].res].name);
			if (ntr > 1 || (!amaxes && (k->nout != 1 || k->out[0] != h->res)))
				return kfail(k, "a hadamard kernel holds one hadamard (and the transpose it "
				             "reads) and returns its result or its amaxes");
			for (int i = 0; amaxes && i < k->nout; i++)
				if (ir_def_ins(f, k->out[i])->op != OP_amax)
					return kfail(k, "%%%s: a hadamard kernel with amaxes returns only them",
					             f->val[k->out[i]].name);
			k->q = k->had;
			k->qsrc = h->arg[0];
			k->shape = CG_HADAMARD;
			return 0;
		}
	}
	if (ncast) {
		if (nq || namax || ntr || ndeq || nhad || ncast > 1)
			return kfail(k, "cast kernels hold one cast only");
		k->shape = CG_CAST;
		return 0;
	}
	if (ndeq) {
		if (nq || namax || ntr || ndeq > 1)
			return kfail(k, "dequantize kernels hold one dequantize only");
		k->shape = CG_DEQUANT;
		k->x = f->ins[k->q].arg[0];
		return 0;
	}
	if (k->x < 0)
		return kfail(k, "no data param (rank-2 in/weight/grad)");
	if (ntr && !nq)
		return kfail(k, "transpose without quantize");
	if (!nq) {
		if (!namax)
			return kfail(k, "nothing to compute");
		int ntw = 0, ncol = 0, nrow = 0, nseg = 0, ngrp = 0;
		for (int i = 0; i < f->nins; i++) {
			const Type *t = &f->ins[i].type;
			if (!kin(k, i) || f->ins[i].op != OP_amax)
				continue;
			if (f->ins[i].narg == 2) {     /* {gx*}: per group of %offs rows */
				if (f->ins[i].arg[0] != k->x || (k->goffs >= 0 && k->goffs != f->ins[i].arg[1]))
					return kfail(k, "%%%s = amax: per group of rows of the data param, "
					             "one %%offs a kernel", f->val[f->ins[i].res].name);
				ngrp++, k->goffs = f->ins[i].arg[1];
			} else if (is_tensorwise(t))
				ntw++;
			else if (t->block[0] > 1 && t->block[1] == 0 && f->ins[i].arg[0] == k->x
			         && (!k->seg || k->seg == t->block[0]))
				nseg++, k->seg = t->block[0];   /* {N x *}: per expert */
			else if (t->block[0] == 0 && t->block[1] == 1)
				ncol++;
			else if (t->block[0] == 1 && t->block[1] == 0 && f->ins[i].arg[0] == k->x)
				nrow++;
			else
				return kfail(k, "amax-only kernels are tensorwise, columnwise or rows and "
				             "columns (blockwise amax goes with its quantize)");
		}
		if (ntw && (ncol || nrow))
			return kfail(k, "tensorwise and columnwise amax in one kernel");
		if (nseg && (ntw || ncol || nrow))
			return kfail(k, "an {%ld x *} amax (a tensorwise scale per expert) with others "
			             "in one kernel", k->seg);
		if (ngrp && (ntw || ncol || nrow || nseg))
			return kfail(k, "an amax per group of rows ({gx*}) with others in one kernel");
		if (nrow && !ncol)
			return kfail(k, "a rowwise amax without its columns' goes with its quantize");
		for (int i = 0; nrow && i < f->nins; i++)
			if (kin(k, i) && f->ins[i].op == OP_amax && f->ins[i].arg[0] != k->x)
				return kfail(k, "%%%s = amax: rows and columns amaxes of the data param only",
				             f->val[f->ins[i].res].name);
		k->shape = nrow ? CG_AMAX_ROWCOL : ncol ? CG_AMAX_COLS : CG_AMAX_TENSOR;
		return 0;
	}
	const Ins *q = &f->ins[k->q];
	const Ins *src = ir_def_ins(f, q->arg[0]);
	if (nhad) {
		if (q->arg[0] != f->ins[k->had].res || src->arg[0] == k->x)
			return kfail(k, "%%%s = quantize: a hadamard fuses with the quantize of its "
			             "result, of a transposed source", f->val[q->res].name);
		src = ir_def_ins(f, src->arg[0]);
	}
	int colsrc = src && src->op == OP_transpose && src->arg[0] == k->x;
	k->qsrc = q->arg[0];
	if (q->arg[0] != k->x && !colsrc)
		return kfail(k, "%%%s = quantize: its operand must be the data param %%%s or its "
		             "transpose", f->val[q->res].name, f->val[k->x].name);
	for (int i = 0; i < f->nins; i++)
		if (kin(k, i) && f->ins[i].op == OP_transpose && f->ins[i].arg[0] == q->res)
			k->tr = i;
	if (colsrc)
		ntr--;
	int nscale_tr = 0;
	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		const Ins *d = in->op == OP_transpose && kin(k, i) ? ir_def_ins(f, in->arg[0]) : NULL;
		if (d && d->op != OP_param && d->op != OP_quantize && f->val[in->arg[0]].type.is_scale)
			nscale_tr++;
		else if (d && d->op == OP_param && (in->type.dim[0] == 1 || in->type.dim[1] == 1))
			ntr--;     /* [1,N] <-> [N,1]: the same buffer */
	}
	if (ntr > (k->tr >= 0) + nscale_tr)
		return kfail(k, "transposes other than the source's, the quantized data's and its "
		             "scales'");
	k->nscale_tr = nscale_tr;
	const Type *st = &f->val[q->arg[1]].type;
	k->br = st->block[0];
	k->bc = st->block[1];
	if (q->narg == 3 && f->val[q->arg[2]].type.index) {
		/* {gx*}: each row its group's scale; the amax of a group spans
		 * many CTAs, so it is the previous kernel's. A fused transpose
		 * of the codes (a grouped wgrad's K-major copy) takes its
		 * scale's transpose [1,G]{*xg}, the same vector (k_transpose.c) */
		k->goffs = q->arg[2];
		k->br = k->bc = 0;
		if (colsrc || nhad)
			return kfail(k, "%%%s = quantize: a scale per group of rows is generated without "
			             "a transposed source or hadamard", f->val[q->res].name);
		if (nscale_tr && k->tr < 0)
			return kfail(k, "%%%s = quantize: a scale per group of rows transposed without "
			             "its codes (not generated)", f->val[q->res].name);
		for (int i = 0; i < f->nins; i++)
			if (kin(k, i) && f->ins[i].op == OP_amax)
				return kfail(k, "%%%s = amax: an amax per group of rows spans many CTAs: its "
				             "quantize runs in the next kernel", f->val[f->ins[i].res].name);
		k->shape = CG_QUANT_TENSOR;
		return 0;
	}
	if (colsrc) {
		long xrows = f->val[k->x].type.dim[0];
		int has_amax = 0;
		for (int i = 0; i < f->nins; i++)
			has_amax |= kin(k, i) && f->ins[i].op == OP_amax;
		if (k->br == 1 && k->bc == 0) {
			/* rowwise over x^T: one scale per column of x; a thread walks
			 * all of a column for its amax (static rows), else a chunk of
			 * rows that divides them: 128 for M, the largest multiple of
			 * 16 up to 128 for static rows (DeepSeek-V3's kv_a_proj W has
			 * 576: 96) */
			k->colwise = 1;
			k->bc = has_amax ? (xrows > 0 ? xrows : 0) : 128;
			if (!has_amax && xrows > 0 && xrows % 16 == 0)
				while (xrows % k->bc)
					k->bc -= 16;
		}
		if (k->br != 1 || k->bc < 16 || k->bc % 16)
			return kfail(k, "%%%s = quantize: a transposed source takes 1xB blocks, B a "
			             "multiple of 16, or rowwise over static rows (got %ldx%ld)",
			             f->val[q->res].name, k->br, k->bc);
		if (k->tr >= 0)
			return kfail(k, "a fused transpose needs tensorwise scales");
		if (nhad && (k->colwise || k->bc != 16))
			return kfail(k, "%%%s = quantize: a fused hadamard takes 1x16 blocks, its own "
			             "(got %ldx%ld)", f->val[q->res].name, k->br, k->bc);
		k->shape = CG_QUANT_COLBLOCK;
		return 0;
	}
	if (is_tensorwise(st))
		k->shape = CG_QUANT_TENSOR;
	else if (k->br > 1 && k->bc == 0)
		k->shape = CG_QUANT_TENSOR, k->seg = k->br;   /* {N x *}: per expert */
	else if (k->br == 1 && (k->bc == 0 || (k->bc >= 16 && k->bc <= 512 && !(k->bc & (k->bc - 1)))))
		k->shape = CG_QUANT_ROWBLOCK;
	else if ((k->br == 128 && k->bc == 128) || (k->br == 16 && k->bc == 16))
		k->shape = CG_QUANT_TILE;
	else
		return kfail(k, "%%%s = quantize: scale granularity %ldx%ld is not generated yet "
		             "(tensorwise, rowwise, 1xB for B = 16..512, 16x16 and 128x128 are)",
		             f->val[q->res].name, k->br, k->bc);
	if (k->tr >= 0 && k->shape != CG_QUANT_TENSOR && k->shape != CG_QUANT_TILE)
		return kfail(k, "a fused transpose needs tensorwise or square-block scales");
	/* {N x *}'s [G,1] transposed is [1,G]{* x N}: the same vector */
	if (k->nscale_tr && k->shape != CG_QUANT_TILE && !(k->seg && st->dim[1] == 1))
		return kfail(k, "transposed scales are generated for square blocks only");
	if (k->seg && k->nscale_tr && k->tr < 0)
		return kfail(k, "an {%ld x *} scale transposed without its data (not generated)",
		             k->seg);
	return 0;
}

/* Static columns of the data and the M-multiple the layout needs. */
static int
geometry(Kern *k, const CodegenTarget *t)
{
	const Type *xt = &k->f->val[k->x].type;
	long cols = xt->dim[1], rows = xt->dim[0];
	long need = 16;

	if (xt->rank != 2)
		return kfail(k, "%%%s: rank-2 data only", k->f->val[k->x].name);
	if (rows < 0 && rows != DIM_M)
		return kfail(k, "%%%s: rows M/B", k->f->val[k->x].name);
	/* the target's override, else the schedule pass's threads=N, else 256 */
	const char *pa = k->f->pattr[PA_THREADS];
	k->threads = t->threads > 0 ? t->threads : pa ? atoi(pa) : 256;
	if (k->threads % 32 || k->threads > 1024)
		return kfail(k, "threads %d: a multiple of 32 up to 1024", k->threads);
	k->rows = rows;
	k->cols = cols;
	if (k->shape == CG_QUANT_ROWBLOCK) {
		k->blen = need = k->bc;
		if (k->bc == 0) {
			/* rowwise: one block per row, B/16 lanes: a power of two up to a
			 * warp, or whole warps (then the CTA is one row) */
			long lanes = cols / 16, th = (lanes + 31) / 32 * 32;
			if (cols < 0 || cols % 16)
				return kfail(k, "%%%s: rowwise scales need static columns, a multiple of 16",
				             k->f->val[k->x].name);
			k->nchunk = 1;
			k->blen = need = cols;
			if (lanes > 32 || (lanes & (lanes - 1))) {
				/* one row per CTA, lanes active of th threads; a row wider
				 * than the CTA (over 1024 x 16 columns, or a fused kernel's
				 * fixed block size) gives each thread nchunk vectors and is
				 * read twice: once for the amax, once to quantize */
				/* stochastic rounding's Philox beside the row's chunks
				 * spills at 1024 threads' 64 registers: 512 (128) */
				long cap = k->q >= 0 && k->f->ins[k->q].round == PRECC_SR ? 512 : 1024;
				if (th > cap)
					th = cap;
				k->threads = t->threads > 0 ? t->threads : (int)th;
				k->nchunk = (int)((lanes + k->threads - 1) / k->threads);
				k->rowcta = 1;
			}
		}
	}
	if (k->shape == CG_QUANT_TENSOR && k->tr >= 0 && k->threads != 256)
		return kfail(k, "fused transpose kernels are generated for 256 threads");
	if (k->shape == CG_QUANT_TILE) {
		need = 16;       /* partial edge tiles are guarded */
		if (k->br == 128 && k->threads != 256)
			return kfail(k, "128x128 tiles are generated for 256 threads");
	}
	if (k->tr >= 0 && rows >= 0 && rows % 16)
		return kfail(k, "%%%s: %ld rows, not a multiple of 16 (a fused transpose stores 16 "
		             "rows at a time)", k->f->val[k->x].name, rows);
	if (k->shape == CG_AMAX_COLS) {
		if (cols < 0)
			return kfail(k, "%%%s: columns M", k->f->val[k->x].name);
		k->tiled = 0;
		k->elems_per_cta = (long)k->threads * 128;
		k->m_multiple = 1;
		return 0;
	}
	if (k->shape == CG_AMAX_ROWCOL) {
		/* 128x128 tiles of x (k_rowcol.c): 16-element vectors along the rows */
		if (cols < 0 || cols % 16)
			return kfail(k, "%%%s: rows and columns amax of static columns, a multiple of 16",
			             k->f->val[k->x].name);
		if (k->threads != 256)
			return kfail(k, "amax_rowcol is generated for 256 threads");
		k->tiled = 1;
		k->tile_rows = k->tile_cols = 128;
		k->elems_per_cta = 128 * 128;
		k->m_multiple = 1;
		return 0;
	}
	if (k->shape == CG_HADAMARD) {
		/* a thread per block of 16: down a column of x (transposed), or
		 * along a row */
		int colsrc = k->qsrc != k->x;
		k->tiled = 0;
		k->elems_per_cta = (long)k->threads * 16;
		k->m_multiple = 1;
		if (cols < 0)
			return kfail(k, "%%%s: columns M", k->f->val[k->x].name);
		if (colsrc && rows == DIM_M)
			k->m_multiple = 16;
		if ((colsrc ? rows : cols) >= 0 && (colsrc ? rows : cols) % 16)
			return kfail(k, "%%%s: blocks of 16 along the transform", k->f->val[k->x].name);
		return 0;
	}
	if (k->shape == CG_QUANT_COLBLOCK) {
		/* blocks run down the rows of x: rows % B, any columns */
		k->m_multiple = 1;
		if (rows >= 0 && rows % k->bc)
			return kfail(k, "%%%s: %ld rows, not a multiple of %ld", k->f->val[k->x].name,
			             rows, k->bc);
		if (rows == DIM_M)
			k->m_multiple = k->bc;
		if (cols < 0)
			return kfail(k, "%%%s: columns M", k->f->val[k->x].name);
		k->tiled = 0;
		k->elems_per_cta = (long)k->threads * k->bc;
		return 0;
	}
	if (cols >= 0 && cols % need)
		return kfail(k, "%%%s: %ld columns, not a multiple of %ld", k->f->val[k->x].name,
		             cols, need);
	if (k->goffs >= 0 && cols < 0)
		return kfail(k, "%%%s: a scale per group of rows needs static columns",
		             k->f->val[k->x].name);
	if (k->seg && (rows < 0 || cols < 0 || rows % k->seg))
		return kfail(k, "%%%s: an {%ld x *} scale needs static rows, a multiple of %ld, and "
		             "static columns", k->f->val[k->x].name, k->seg, k->seg);
	k->tiled = 0;
	k->elems_per_cta = k->rowcta ? cols : (long)k->threads * VEC;
	if (k->shape == CG_QUANT_TENSOR && k->tr >= 0) {
		k->tiled = 1;
		k->tile_rows = k->tile_cols = 64;
	} else if (k->shape == CG_QUANT_TILE) {
		k->tiled = 1;
		k->tile_rows = k->br;
		k->tile_cols = k->br == 128 ? 128 : k->threads;
	}
	k->m_multiple = 1;
	if (cols == DIM_M)
		k->m_multiple = need;
	else if (cols < 0)
		return kfail(k, "%%%s: columns M/B", k->f->val[k->x].name);
	if (k->tr >= 0 && rows == DIM_M && k->m_multiple < 16)
		k->m_multiple = 16;
	return 0;
}

static int
uses_m(const Func *f)
{
	for (int v = 0; v < f->nval; v++)
		for (int d = 0; d < f->val[v].type.rank; d++)
			if (f->val[v].type.dim[d] < 0)
				return 1;
	return 0;
}

static void
fill_info(const Kern *k, CodegenKernel *info)
{
	memset(info, 0, sizeof *info);
	info->shape = k->shape;
	snprintf(info->name, sizeof info->name, "%s", k->name);
	info->threads = k->threads;
	info->data = k->x;
	info->tiled = k->tiled;
	info->elems_per_cta = k->elems_per_cta;
	info->tile_rows = k->tile_rows;
	info->tile_cols = k->tile_cols;
	info->m_multiple = k->m_multiple;
	/* e2m1 buffers hold two codes a byte along the last dim: an M there
	 * must be even */
	for (int i = 0; i < k->nin + k->nout; i++) {
		const Type *t = &k->f->val[i < k->nin ? k->in[i] : k->out[i - k->nin]].type;
		if (t->fmt == PRECC_E2M1 && t->dim[t->rank - 1] == DIM_M && info->m_multiple % 2)
			info->m_multiple *= 2;
	}
	info->nparams = k->nin + k->nout;
	for (int i = 0; i < k->nin; i++)
		info->param_value[i] = k->in[i];
	for (int i = 0; i < k->nout; i++)
		info->param_value[k->nin + i] = k->out[i];
	info->has_m = k->has_m;
	info->has_seed = k->has_seed;
	info->has_cols = k->has_cols;
	info->cols_align = k->cols_align;
	info->cooperative = k->has_sync;
	info->persistent = k->persistent;
	info->cluster = k->cluster;
	int multi = k->nphase && k->shape != CG_QUANT_ROWCOL;   /* one grid: a launch of phases */
	info->sync_words = k->has_sync ? 2 * (k->nphase ? k->nphase : 1) : 0;
	info->nphases = multi ? k->nphase : 1;
	info->smem = k->smem;
	info->bulk = k->shape == CG_DELAYED_UPDATE && !k->nphase;
	info->ntmap = k->ntmap;
	for (int i = 0; i < k->ntmap; i++)
		info->tmap[i] = k->tmap[i];
	for (int p = 0; p < info->nphases && p < CG_MAXPHASE; p++) {
		const Kern *ph = multi ? &k->phase[p] : k;
		info->phase[p].shape = ph->shape;
		info->phase[p].data = ph->x;
		info->phase[p].tiled = ph->tiled;
		info->phase[p].elems_per_cta = ph->elems_per_cta;
		info->phase[p].tile_rows = ph->tile_rows;
		info->phase[p].tile_cols = ph->tile_cols;
	}
}

/* Mark in mask every instruction that quantize q needs (its operands'
 * definitions, transitively). */
static void
mark_back(const Func *f, int i, unsigned char *mask)
{
	if (mask[i])
		return;
	mask[i] = 1;
	for (int a = 0; a < f->ins[i].narg; a++) {
		const Ins *d = ir_def_ins(f, f->ins[i].arg[a]);
		if (d)
			mark_back(f, (int)(d - f->ins), mask);
	}
}

/* x and transpose(x) in blocks along their rows, from one read of x:
 * quant_rowcol (k_rowcol.c) instead of two phases that each read x. */
static int
rowcol(Kern *top)
{
	if (top->nphase != 2)
		return 0;
	if (top->phase[0].shape == CG_QUANT_COLBLOCK) {
		Kern t = top->phase[0];
		top->phase[0] = top->phase[1];
		top->phase[1] = t;
	}
	const Func *f = top->f;
	for (int i = 0; i < f->nins; i++)      /* a tensorwise amax: a CTA reduction */
		if (f->ins[i].op == OP_amax && is_tensorwise(&f->ins[i].type))
			return 0;
	if (!rowcol_takes(&top->phase[0], &top->phase[1]))
		return 0;
	top->shape = CG_QUANT_ROWCOL;
	top->x = top->phase[0].x;
	if (top->phase[1].colwise) {
		/* a column's scale from a param: rows are predicated, only the
		 * transposed copy's 16-byte stores ask anything of M */
		long mm = top->phase[0].m_multiple;
		top->m_multiple = mm > 16 ? mm : 16;
	}
	top->rows = top->phase[0].rows;
	top->cols = top->phase[0].cols;
	/* the columns at run time: the tile loop predicates every column
	 * against them and no index folds them in, so one PTX serves every K
	 * (a wide layer's and a narrow one's) as long as a row's blocks are
	 * whole and its 16-element vectors aligned (rowcol_takes: 16 | K) */
	top->has_cols = 1;
	top->cols_align = top->phase[0].bc > 16 ? top->phase[0].bc : 16;
	top->threads = 256;
	top->tiled = 1;
	top->tile_rows = top->tile_cols = 128;
	top->elems_per_cta = 128 * 128;
	return 0;
}

/* Several quantizes: one phase per quantize, holding what it needs and
 * what only it feeds (recips, transposes of its codes and scales). */
static int
split_phases(Kern *top, const CodegenTarget *t)
{
	const Func *f = top->f;
	int qs[8], nq = 0;

	for (int i = 0; i < f->nins; i++)
		if (f->ins[i].op == OP_quantize) {
			if (nq == 8)
				return kfail(top, "more than 8 quantizes in one kernel");
			qs[nq++] = i;
		}
	if (nq < 2)
		return 0;
	unsigned char *masks = calloc((size_t)nq, (size_t)f->nins);
	Kern *ph = calloc((size_t)nq, sizeof *ph);
	if (!masks || !ph) {
		free(masks);
		free(ph);
		return kfail(top, "out of memory");
	}
	top->phase = ph;
	top->nphase = nq;
	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (in->op == OP_update && add_out(top, in->arg[1]))
			return -1;
		for (int j = 0; in->op == OP_ret && j < in->narg; j++)
			if (add_out(top, in->arg[j]))
				return -1;
	}
	for (int p = 0; p < nq; p++)
		mark_back(f, qs[p], masks + (size_t)p * (size_t)f->nins);
	for (int changed = 1; changed;) {
		changed = 0;
		for (int i = 0; i < f->nins; i++) {
			const Ins *in = &f->ins[i];
			int owned = 0;
			if (in->op == OP_param || in->op == OP_ret || in->op == OP_update)
				continue;
			for (int p = 0; p < nq; p++)
				owned |= masks[(size_t)p * (size_t)f->nins + (size_t)i];
			if (owned)
				continue;
			for (int p = 0; p < nq && !owned; p++)
				for (int a = 0; a < in->narg; a++) {
					const Ins *d = ir_def_ins(f, in->arg[a]);
					if (d && masks[(size_t)p * (size_t)f->nins + (size_t)(d - f->ins)]
					    && d->op != OP_param) {
						mark_back(f, i, masks + (size_t)p * (size_t)f->nins);
						owned = changed = 1;
						break;
					}
				}
		}
	}
	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		int owned = in->op == OP_param || in->op == OP_ret || in->op == OP_update;
		for (int p = 0; p < nq; p++)
			owned |= masks[(size_t)p * (size_t)f->nins + (size_t)i];
		if (!owned)
			return kfail(top, "%%%s = %s: serves none of the kernel's quantizes",
			             in->res >= 0 ? f->val[in->res].name : "?", opinfo[in->op].name);
	}
	for (int p = 0; p < nq; p++) {
		Kern *k = &ph[p];
		*k = *top;
		k->phase = NULL;
		k->nphase = 0;
		k->mask = masks + (size_t)p * (size_t)f->nins;
		k->nin = k->nout = 0;
		k->tr = -1;
		k->qsrc = -1;
		k->had = -1;
		k->gridamax = -1;
		for (int j = 0; j < top->nout; j++) {
			const Ins *d = ir_def_ins(f, top->out[j]);
			if (d && k->mask[d - f->ins])
				k->out[k->nout++] = top->out[j];
		}
		if (classify(k) || geometry(k, t))
			return -1;
	}
	/* one block size for the launch: the largest any phase asks for */
	/* one block size for the launch: the largest any phase asks for, or
	 * else 256, which every shape takes (transposes and 128x128 tiles need
	 * it; wide rows then loop) */
	int T = 0;
	for (int p = 0; p < nq; p++)
		T = ph[p].threads > T ? ph[p].threads : T;
	for (int tries = 0;; tries++) {
		int p = 0;
		for (; p < nq; p++) {
			CodegenTarget t2 = *t;
			t2.threads = T;
			if (ph[p].threads != T && geometry(&ph[p], &t2))
				break;
			if (ph[p].threads != T)
				break;
		}
		if (p == nq)
			break;
		if (tries || T == 256) {
			if (ph[p].threads != T)
				return kfail(top, "its quantizes need %d and %d threads per CTA", T,
				             ph[p].threads);
			return -1;
		}
		T = 256;
	}
	for (int p = 0; p < nq; p++)
		if (ph[p].m_multiple > top->m_multiple)
			top->m_multiple = ph[p].m_multiple;
	top->threads = ph[0].threads;
	top->shape = ph[0].shape;
	top->x = ph[0].x;
	return rowcol(top);
}

/* The pointer param an address comes from (through GEPs, casts, selects
 * and phis), -1 if none or several. */
static int
base_param(LLVMValueRef fn, LLVMValueRef p, int depth)
{
	if (LLVMIsAArgument(p)) {
		for (unsigned i = 0; i < LLVMCountParams(fn); i++)
			if (LLVMGetParam(fn, i) == p)
				return (int)i;
		return -1;
	}
	if (depth > 32 || !LLVMIsAInstruction(p))
		return -1;
	LLVMOpcode op = LLVMGetInstructionOpcode(p);
	int n = op == LLVMGetElementPtr || op == LLVMBitCast || op == LLVMAddrSpaceCast ? 1
	        : op == LLVMSelect ? 3 : op == LLVMPHI ? LLVMGetNumOperands(p) : 0;
	int r = -1;
	for (int i = op == LLVMSelect ? 1 : 0; i < n; i++) {
		int q = base_param(fn, LLVMGetOperand(p, (unsigned)i), depth + 1);
		if (q >= 0 && r >= 0 && q != r)
			return -1;
		if (q >= 0)
			r = q;
	}
	return r;
}

/* Which outputs the emitted code updates atomically: the launcher zeroes
 * exactly these (the manifest's zero_outputs), so the list is read off
 * the code and cannot drift from it. An atomic whose address is not one
 * output param is a bug. */
static int
atomic_outputs(Cg *g, const Kern *k, unsigned *mask)
{
	*mask = 0;
	for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(g->fn); bb; bb = LLVMGetNextBasicBlock(bb))
		for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
			LLVMOpcode op = LLVMGetInstructionOpcode(in);
			if (op != LLVMAtomicRMW && op != LLVMAtomicCmpXchg)
				continue;
			int p = base_param(g->fn, LLVMGetOperand(in, 0), 0);
			if (p == k->nin + k->nout && k->has_sync)
				continue;     /* the grid barrier's scratch: zeroed anyway */
			if (p < k->nin || p >= k->nin + k->nout || p >= 32)
				return kfail((Kern *)k, "an atomic outside the kernel's outputs (param %d)", p);
			*mask |= 1u << p;
		}
	return 0;
}

/* k's phases, shape, geometry and ABI (recognise). */
static int
recognise_phases(Kern *k, const CodegenTarget *t)
{
	const Func *f = k->f;
	int rc = split_phases(k, t);
	if (rc == 0 && k->nphase == 0) {
		/* one chain: the kernel is its own only phase */
		if (classify(k))
			rc = -1;
		else if (k->shape == CG_DELAYED_UPDATE) {
			k->threads = 32;
			k->elems_per_cta = 0;
		} else if (k->shape != CG_GEMM && geometry(k, t))
			rc = -1;
	} else if (rc == 0) {
		/* the ABI: every param and output of the whole kernel */
		k->nin = 0;
		for (int i = 0; i < f->nins; i++)
			if (f->ins[i].op == OP_param)
				k->in[k->nin++] = f->ins[i].res;
	}
	if (rc == 0) {
		k->has_m = uses_m(f);
		for (int i = 0; i < f->nins; i++) {
			const Ins *in = &f->ins[i];
			if (in->op == OP_quantize && in->round == PRECC_SR)
				k->has_seed = 1;
			if (in->op == OP_amax && in->pattr[PA_AMAX_SCHEME] && is_tensorwise(&in->type)
			    && !strcmp(in->pattr[PA_AMAX_SCHEME], "grid") && ir_use_count(f, in->res) > 0)
				k->has_sync = 1;
		}
		for (int p = 0; p < k->nphase; p++)
			k->phase[p].has_sync = k->has_sync;
		snprintf(k->name, sizeof k->name, "precc_%s", k->nphase && k->shape != CG_QUANT_ROWCOL ? "fused"
		         : codegen_shape_name(k->shape));
	}
	return rc;
}

/* Recognise f into k: its shape, phases, geometry and ABI (no LLVM). */
static int
recognise(Kern *k, const Func *f, const CodegenTarget *t, char *err, size_t errsz)
{
	memset(k, 0, sizeof *k);
	k->f = f;
	k->err = err;
	k->errsz = errsz;
	k->tr = -1;
	k->qsrc = -1;
	k->had = -1;
	k->gridamax = -1;
	k->goffs = -1;   /* a fused kernel's top is not classified: no group */
	if (!t || (unsigned)t->sm >= NCGSM)
		return kfail(k, "unknown target");
	k->m_multiple = 1;
	k->sm = t->sm;
	return recognise_phases(k, t);
}

static void
kern_free(Kern *k)
{
	if (k->phase)
		free((void *)k->phase[0].mask);
	free(k->phase);
}

int
codegen_kernel_cols(const Func *f, const CodegenTarget *t, long *cols)
{
	Kern k;
	char err[256];
	int takes = recognise(&k, f, t, err, sizeof err) == 0 && k.has_cols && k.cols > 0;

	if (takes)
		*cols = k.cols;
	kern_free(&k);
	return takes;
}

/* Recognise f and emit its kernel function into g (already cg_init'ed). */
int
cg_kernel_module(Cg *g, const Func *f, const CodegenTarget *t, CodegenKernel *info,
                 char *err, size_t errsz)
{
	Kern k;
	int rc = recognise(&k, f, t, err, errsz);

	if (rc == 0)
		rc = kemit(g, &k, err, errsz);
	unsigned atomics = 0;
	if (rc == 0)
		rc = atomic_outputs(g, &k, &atomics);
	if (rc == 0 && info) {
		fill_info(&k, info);
		info->atomic_params = atomics;
	}
	kern_free(&k);
	return rc;
}

static int
build(const Func *f, const CodegenTarget *t, int ptx, char **out, CodegenKernel *info,
      char *err, size_t errsz)
{
	CodegenKernel ki;
	Cg g;
	int rc;
	struct timespec t0, t1;

	*out = NULL;
	err[0] = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cg_init(&g, t ? t->sm : CG_SM90, f->name ? f->name : "kernel");
	rc = cg_kernel_module(&g, f, t, &ki, err, errsz);
	if (rc == 0)
		rc = cg_finish(&g, ptx, out, err, errsz);
	cg_dispose(&g);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc) {
		if (strncmp(err, "codegen:", 8)) {
			char tmp[512];
			snprintf(tmp, sizeof tmp, "%s", err);
			snprintf(err, errsz, "codegen: @%s: %s", f->name, tmp);
		}
		return -1;
	}
	if (info) {
		*info = ki;
		info->llvm_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3
		                + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	}
	return 0;
}

int
codegen_kernel_ptx(const Func *f, const CodegenTarget *t, char **ptx, CodegenKernel *info,
                   char *err, size_t errsz)
{
	return build(f, t, 1, ptx, info, err, errsz);
}

int
codegen_kernel_llvm(const Func *f, const CodegenTarget *t, char **ll, CodegenKernel *info,
                    char *err, size_t errsz)
{
	return build(f, t, 0, ll, info, err, errsz);
}
