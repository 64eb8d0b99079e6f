/*
 * k_rowcol.c — quant_rowcol: x quantized in 1xB blocks along its rows and,
 * from the same read, transpose(x) in 1xB' blocks (B' rows of one column
 * of x), as DeepSeek's 1x128 activations and gradients, MX's 1x32 and
 * 32x1, and rowwise's transposed copy need for fprop and wgrad. TE's
 * quantize_transpose_vector_blockwise and torchao's dim0/dim1 MX kernel
 * read the source once the same way: a CTA stages a TR x TC tile of x in
 * shared memory once, quantizes its rows from registers on the way in,
 * then its columns from the tile.
 *
 *   rows:    thread t holds 16 consecutive elements of row 32i + t/8 of
 *            the tile (i = 0..3; 8 threads a row, TC = 128): two 16-byte
 *            loads, B/16 lanes reduce a block's amax with shfl.sync.bfly,
 *            one 16-byte store of its codes; the raw 16-bit values go to
 *            the tile, lanes with bit 2 set storing their upper half
 *            first, so that each quarter-warp's 16-byte stores hit 8
 *            different bank groups.
 *   columns: thread t holds the column pair 2(t % 64), +1 and rows
 *            32(t / 64) .. +31: 4-byte shared loads (a warp reads 128
 *            contiguous bytes of one row: no bank conflicts), a block of
 *            B' > 32 rows combined over B'/32 threads through shared
 *            memory, then 16 codes at a time stored as 16 contiguous
 *            bytes of a row of the transpose.
 *
 * Only 16-bit sources (bf16, f16): the tile holds their bits (32 KiB); f32
 * sources, and stochastic rounding (but with the transform below), keep the
 * two-phase kernel. NVFP4's 1x16 blocks of x and of the random Hadamard
 * transform of xᵀ come out of the same tile (cols_rht). Rows past M and columns past K are
 * predicated off; blocks are whole (M % B' and K % B, as the plan and
 * m_multiple ensure).
 */
#include <stdlib.h>
#include <string.h>
#include "emit.h"

enum { TR = 128, TC = 128, THREADS = 256, TPITCH = TC * 2, RT = TR / 4 /* rows a column thread */ };

/* Whether phase k computes an amax (else its scales come from params). */
static int
has_amax(const Kern *k)
{
	for (int i = 0; i < k->f->nins; i++)
		if (kin(k, i) && k->f->ins[i].op == OP_amax)
			return 1;
	return 0;
}

int
rowcol_takes(const Kern *rowk, const Kern *colk)
{
	precc_format f = rowk->f->val[rowk->x].type.fmt;
	long B = rowk->bc, Bc = colk->bc;
	/* rowwise scaling with a transposed copy: both scales from the amax
	 * kernel's params (amax_rowcol), so any tile holds whole blocks */
	int rowparam = B == 0 && !has_amax(rowk), colparam = colk->colwise && !has_amax(colk);

	/* stochastic rounding keeps the two phases, but for the transform's
	 * columns (NVFP4's dY: one column's block at a time, 16-bit draws):
	 * its Philox next to a column pair's 32 values spilled on sm_89 */
	for (int i = 0; i < rowk->f->nins; i++)
		if (rowk->f->ins[i].op == OP_quantize && rowk->f->ins[i].round == PRECC_SR
		    && colk->had < 0)
			return 0;
	return rowk->shape == CG_QUANT_ROWBLOCK && colk->shape == CG_QUANT_COLBLOCK
	       && rowk->x == colk->x && (f == PRECC_BF16 || f == PRECC_FP16)
	       && rowk->gridamax < 0 && colk->gridamax < 0
	       && (rowparam || (!rowk->rowcta && (B == 16 || B == 32 || B == 64 || B == 128)))
	       && (colparam || (!colk->colwise && (colk->had < 0 || Bc == 16)
	                        && (Bc == 16 || Bc == 32 || Bc == 64 || Bc == 128)))
	       && rowk->cols >= 0 && rowk->cols % 16 == 0;
}

/* A new block's scalars (scale, scale_inv, stored where cond): the
 * scalars of the block before are forgotten. */
static LLVMValueRef
new_block(E *e, const Ins *q, LLVMValueRef mbits, LLVMValueRef bidx, LLVMValueRef cond)
{
	memset(e->sc, 0, ((size_t)e->k->f->nval + 1) * sizeof *e->sc);
	return block_scalars(e, q, mbits, bidx, cond);
}

/* x's codes under mult, stored at idx where ok. */
static void
put_codes(E *e, const Ins *q, LLVMValueRef mult, LLVMValueRef x[VEC], LLVMValueRef idx,
          LLVMValueRef ok)
{
	LLVMValueRef code[VEC];

	quantize_vec(e, q, mult, x, idx, code);
	LLVMBasicBlockRef cont = begin_if(e, ok);
	store_codes(e, q->res, idx, code);
	end_if(e, cont);
}

/* The rows of the tile: quantize each row's blocks, and stage the raw
 * 16-bit values in the tile. */
static int
rows_part(E *e, LLVMValueRef tile, LLVMValueRef m0, LLVMValueRef k0, LLVMValueRef R,
          LLVMValueRef C)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	LLVMTypeRef v4i = LLVMVectorType(e->g->i32, 4);
	LLVMValueRef t = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef v = LLVMBuildURem(b, t, c64(e, TC / VEC), "");      /* vector in the row */
	LLVMValueRef rp = LLVMBuildUDiv(b, t, c64(e, TC / VEC), "");     /* row in a pass */
	LLVMValueRef col = add64(e, k0, mul64(e, v, VEC));
	LLVMValueRef colok = ult(e, col, C);
	LLVMValueRef up = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, t, c64(e, 4), ""), c64(e, 0), "");
	/* a row's scale from a param (rowwise): its first lane stores it */
	int lanes = k->bc ? (int)(k->bc / VEC) : TC / VEC;
	LLVMValueRef leader = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, v, c64(e, (uint64_t)lanes), ""),
	                                    c64(e, 0), "");

	if (check_amax_ops(e, 0) || check_scalar_ops(e) || check_quantize(e, q))
		return -1;
	for (int pass = 0; pass < TR / (THREADS / (TC / VEC)); pass++) {
		LLVMValueRef r = add64(e, rp, c64(e, (uint64_t)pass * (THREADS / (TC / VEC))));
		LLVMValueRef row = add64(e, m0, r);
		LLVMValueRef ok = LLVMBuildAnd(b, colok, ult(e, row, R), "");
		LLVMValueRef idx = LLVMBuildSelect(b, ok, add64(e, LLVMBuildMul(b, row, C, ""), col), c64(e, 0), "");
		LLVMValueRef w[VEC / 8], x[VEC];
		for (int j = 0; j < VEC / 8; j++) {
			LLVMValueRef off = mul64(e, add64(e, idx, c64(e, 8 * j)), 2);
			w[j] = load_al(e, v4i, gep(e, e->ptr[k->x], off), 16);
			w[j] = LLVMBuildSelect(b, ok, w[j], LLVMConstNull(v4i), "");
		}
		/* the tile: row r, bytes 32v..32v+31, the upper half first where bit 2 */
		LLVMValueRef soff = add64(e, mul64(e, r, TPITCH), mul64(e, v, 2 * VEC));
		for (int h = 0; h < 2; h++) {
			LLVMValueRef hh = LLVMBuildSelect(b, up, c64(e, (uint64_t)(1 - h)), c64(e, (uint64_t)h), "");
			LLVMValueRef o = add64(e, soff, mul64(e, hh, 16));
			LLVMValueRef val = LLVMBuildSelect(b, up, w[1 - h], w[h], "");
			store_al(e, val, LLVMBuildGEP2(b, e->g->i8, tile, &o, 1, ""), 16);
		}
		unpack16(e, e->k->f->val[k->x].type.fmt, w, x);
		LLVMValueRef mbits = group_max(e, vec_amax_bits(e, x, VEC), lanes);
		LLVMValueRef bidx = LLVMBuildUDiv(b, idx, k->bc ? c64(e, (uint64_t)k->bc) : C, "");
		LLVMValueRef mult = new_block(e, q, mbits, bidx, LLVMBuildAnd(b, ok, leader, ""));
		if (is_out(e, q->res))
			put_codes(e, q, mult, x, idx, ok);
	}
	return 0;
}

/* Rows r .. r+15 of the tile's column pair p (4-byte shared loads) ->
 * x[0][i] (column 2p) and x[1][i] (2p + 1) as floats. */
static void
pair_rows(E *e, LLVMValueRef tile, precc_format f, LLVMValueRef r, LLVMValueRef p,
          LLVMValueRef x[2][VEC])
{
	LLVMBuilderRef b = e->b;

	for (int i = 0; i < VEC; i++) {
		LLVMValueRef o = add64(e, mul64(e, add64(e, r, c64(e, (uint64_t)i)), TPITCH), mul64(e, p, 4));
		LLVMValueRef u = load_al(e, e->g->i32, LLVMBuildGEP2(b, e->g->i8, tile, &o, 1, ""), 4);
		LLVMValueRef h2[2] = {LLVMBuildTrunc(b, u, e->g->i16, ""),
		                      LLVMBuildTrunc(b, LLVMBuildLShr(b, u, c32(e, 16), ""), e->g->i16, "")};
		for (int c = 0; c < 2; c++)
			x[c][i] = f == PRECC_BF16
			          ? LLVMBuildBitCast(b, LLVMBuildShl(b, LLVMBuildZExt(b, h2[c], e->g->i32, ""),
			                                             c32(e, 16), ""), e->g->f32, "")
			          : LLVMBuildFPExt(b, LLVMBuildBitCast(b, h2[c], e->g->f16, ""), e->g->f32, "");
	}
}

/* The columns of the tile through NVFP4's random Hadamard transform
 * (hadamard(transpose(x)) in 1x16 blocks, B' = 16): each 16-row block of a
 * column transformed and rounded as the hadamard's result (rht_block),
 * then its amax, scales and codes from those registers, as
 * quant_colblock's RHT path does; the transformed copy is never written. */
static int
cols_rht(E *e, LLVMValueRef tile, LLVMValueRef m0, LLVMValueRef k0, LLVMValueRef R,
         LLVMValueRef C, LLVMValueRef p, LLVMValueRef g)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	precc_format f = k->f->val[k->x].type.fmt;
	LLVMValueRef nrb = LLVMBuildUDiv(b, R, c64(e, 16), ""), xv[2][VEC], y[VEC];

	for (int i = 0; i < RT; i += 16) {
		LLVMValueRef r0 = add64(e, m0, add64(e, mul64(e, g, RT), c64(e, (uint64_t)i)));
		pair_rows(e, tile, f, add64(e, mul64(e, g, RT), c64(e, (uint64_t)i)), p, xv);
		for (int c = 0; c < 2; c++) {
			LLVMValueRef col = add64(e, k0, add64(e, mul64(e, p, 2), c64(e, (uint64_t)c)));
			LLVMValueRef ok = LLVMBuildAnd(b, ult(e, col, C), ult(e, r0, R), "");
			LLVMValueRef bidx = sel(e, ok, add64(e, LLVMBuildMul(b, col, nrb, ""),
			                                     LLVMBuildUDiv(b, r0, c64(e, 16), "")), c64(e, 0));
			rht_block(e, &k->f->ins[k->had], xv[c], y);
			LLVMValueRef mult = new_block(e, q, vec_amax_bits(e, y, VEC), bidx, ok);
			if (is_out(e, q->res))
				put_codes(e, q, mult, y,
				          sel(e, ok, add64(e, LLVMBuildMul(b, col, R, ""), r0), c64(e, 0)), ok);
		}
	}
	return 0;
}

/* The columns of the tile, rowwise over transpose(x): one scale per
 * column of x from the amax kernel's param (amax_rowcol), so nothing is
 * reduced here; row group 0 stores the column's scalars (every tile of a
 * column stores the same values). */
static int
cols_colwise(E *e, LLVMValueRef tile, LLVMValueRef m0, LLVMValueRef k0, LLVMValueRef R,
             LLVMValueRef C, LLVMValueRef p, LLVMValueRef g)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	precc_format f = k->f->val[k->x].type.fmt;
	LLVMValueRef xv[2][VEC], mult[2], col[2];
	LLVMValueRef g0 = LLVMBuildICmp(b, LLVMIntEQ, g, c64(e, 0), "");

	for (int c = 0; c < 2; c++) {
		col[c] = add64(e, k0, add64(e, mul64(e, p, 2), c64(e, (uint64_t)c)));
		LLVMValueRef ok = ult(e, col[c], C);
		mult[c] = new_block(e, q, c32(e, 0), sel(e, ok, col[c], c64(e, 0)),   /* a column */
		                    LLVMBuildAnd(b, ok, g0, ""));
	}
	if (!is_out(e, q->res))
		return 0;
	for (int i = 0; i < RT; i += VEC) {
		LLVMValueRef rj = add64(e, m0, add64(e, mul64(e, g, RT), c64(e, (uint64_t)i)));
		pair_rows(e, tile, f, add64(e, mul64(e, g, RT), c64(e, (uint64_t)i)), p, xv);
		for (int c = 0; c < 2; c++) {
			LLVMValueRef ok = LLVMBuildAnd(b, ult(e, col[c], C), ult(e, rj, R), "");
			put_codes(e, q, mult[c], xv[c],
			          sel(e, ok, add64(e, LLVMBuildMul(b, col[c], R, ""), rj), c64(e, 0)), ok);
		}
	}
	return 0;
}

/* The columns of the tile: quantize transpose(x)'s 1xB' blocks. */
static int
cols_part(E *e, LLVMValueRef tile, LLVMValueRef part, LLVMValueRef m0, LLVMValueRef k0,
          LLVMValueRef R, LLVMValueRef C)
{
	Kern *k = e->k;
	const Ins *q = &k->f->ins[k->q];
	LLVMBuilderRef b = e->b;
	long Bc = k->bc;
	precc_format f = k->f->val[k->x].type.fmt;
	LLVMValueRef t = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef p = LLVMBuildURem(b, t, c64(e, TC / 2), "");     /* column pair */
	LLVMValueRef g = LLVMBuildUDiv(b, t, c64(e, TC / 2), "");      /* rows 32g.. */

	if (check_amax_ops(e, 1) || check_scalar_ops(e) || check_quantize(e, q))
		return -1;
	if (k->had >= 0)
		return cols_rht(e, tile, m0, k0, R, C, p, g);
	if (k->colwise)
		return cols_colwise(e, tile, m0, k0, R, C, p, g);
	/* pass 1 the amax bits, per column, per block of min(B', RT) rows of
	 * this thread (rows past M are zeros in the tile: rows_part loaded
	 * none); pass 2 reads the tile again, 16 rows at a time, to quantize:
	 * 32 values live at most, not 64 */
	int sub = Bc < RT ? (int)(RT / Bc) : 1, span = Bc < RT ? (int)Bc : RT;
	LLVMValueRef mb[2][RT / 16], xv[2][VEC];
	for (int s = 0; s < sub; s++) {
		mb[0][s] = mb[1][s] = c32(e, 0);
		for (int i = 0; i < span; i += VEC) {
			pair_rows(e, tile, f, add64(e, mul64(e, g, RT), c64(e, (uint64_t)(s * span + i))), p, xv);
			for (int c = 0; c < 2; c++)
				mb[c][s] = umax(e, mb[c][s], vec_amax_bits(e, xv[c], VEC));
		}
	}
	if (Bc > RT) {
		/* B'/RT threads (rows groups g) hold one block: through shared memory */
		LLVMTypeRef pt = LLVMArrayType2(e->g->i32, 4 * TC);
		/* part[c][g][p]: a warp's 32 lanes store 32 consecutive words */
		for (int c = 0; c < 2; c++) {
			LLVMValueRef ix[2] = {c32(e, 0), LLVMBuildTrunc(b, add64(e, mul64(e, add64(e, g, c64(e, 4 * (uint64_t)c)),
			                      TC / 2), p), e->g->i32, "")};
			store_al(e, mb[c][0], LLVMBuildGEP2(b, pt, part, ix, 2, ""), 4);
		}
		barrier(e);
		int ng = (int)(Bc / RT);
		LLVMValueRef g0 = mul64(e, LLVMBuildUDiv(b, g, c64(e, (uint64_t)ng), ""), (uint64_t)ng);
		for (int c = 0; c < 2; c++) {
			LLVMValueRef m = c32(e, 0);
			for (int j = 0; j < ng; j++) {
				LLVMValueRef gj = add64(e, g0, c64(e, (uint64_t)j + 4 * (uint64_t)c));
				LLVMValueRef ix[2] = {c32(e, 0), LLVMBuildTrunc(b, add64(e, mul64(e, gj, TC / 2), p),
				                      e->g->i32, "")};
				m = umax(e, m, load_al(e, e->g->i32, LLVMBuildGEP2(b, pt, part, ix, 2, ""), 4));
			}
			mb[c][0] = m;
		}
	}
	LLVMValueRef nrb = LLVMBuildUDiv(b, R, c64(e, (uint64_t)Bc), "");
	LLVMValueRef leader = Bc > RT
	                      ? LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, g, c64(e, (uint64_t)(Bc / RT)), ""),
	                                      c64(e, 0), "")
	                      : LLVMConstInt(e->g->i1, 1, 0);
	LLVMValueRef mult[2][RT / 16], ok[2][RT / 16], col[2];
	for (int c = 0; c < 2; c++) {
		col[c] = add64(e, k0, add64(e, mul64(e, p, 2), c64(e, (uint64_t)c)));
		for (int s = 0; s < sub; s++) {
			LLVMValueRef r0 = add64(e, m0, add64(e, mul64(e, g, RT), c64(e, (uint64_t)s * (uint64_t)span)));
			ok[c][s] = LLVMBuildAnd(b, ult(e, col[c], C), ult(e, r0, R), "");
			LLVMValueRef rb = LLVMBuildUDiv(b, r0, c64(e, (uint64_t)Bc), "");
			LLVMValueRef bidx = LLVMBuildSelect(b, ok[c][s], add64(e, LLVMBuildMul(b, col[c], nrb, ""), rb),
			                                    c64(e, 0), "");
			mult[c][s] = new_block(e, q, mb[c][s], bidx, LLVMBuildAnd(b, ok[c][s], leader, ""));
		}
	}
	if (!is_out(e, q->res))
		return 0;
	for (int i = 0; i < RT; i += VEC) {      /* 16 rows of both columns a step */
		int s = i / span;
		LLVMValueRef rj = add64(e, m0, add64(e, mul64(e, g, RT), c64(e, (uint64_t)i)));
		pair_rows(e, tile, f, add64(e, mul64(e, g, RT), c64(e, (uint64_t)i)), p, xv);
		for (int c = 0; c < 2; c++) {
			put_codes(e, q, mult[c][s], xv[c],
			          sel(e, ok[c][s], add64(e, LLVMBuildMul(b, col[c], R, ""), rj), c64(e, 0)),
			          ok[c][s]);
		}
	}
	return 0;
}

int
emit_rowcol(E *base)
{
	Kern *top = base->k;
	LLVMBuilderRef b = base->b;
	LLVMValueRef tile = shared_array(base, "tile", 1, LLVMArrayType2(base->g->i8, TR * TPITCH), 16);
	LLVMValueRef part = shared_array(base, "colmax", 2, LLVMArrayType2(base->g->i32, 4 * TC), 4);
	LLVMValueRef k0 = mul64(base, LLVMBuildZExt(b, sreg(base, "ctaid.x"), base->g->i64, ""), TC);
	LLVMValueRef m0 = mul64(base, LLVMBuildZExt(b, sreg(base, "ctaid.y"), base->g->i64, ""), TR);
	int rc;

	if (top->threads != THREADS)
		return kfail(top, "quant_rowcol is generated for %d threads", THREADS);
	for (int p = 0; p < 2; p++) {
		E e = *base;
		e.k = &top->phase[p];
		e.sc = calloc((size_t)e.k->f->nval + 1, sizeof *e.sc);
		if (!e.sc)
			return kfail(top, "out of memory");
		LLVMValueRef R = dimv(&e, e.k->rows), C = top->has_cols ? e.cols : dimv(&e, e.k->cols);
		if (p == 0)
			rc = rows_part(&e, tile, m0, k0, R, C);
		else {
			barrier(&e);      /* the whole tile is in */
			rc = cols_part(&e, tile, part, m0, k0, R, C);
		}
		free(e.sc);
		if (rc)
			return rc;
	}
	return 0;
}

/* amax_rowcol: the rows' amax ({1x*}) and the columns' ({*x1}) of x from
 * one read, so that rowwise scaling's quantize kernel has both scales and
 * reads x once more, not twice (fuse.c). A CTA of 256 threads per 128x128
 * tile reads it as rows_part does (thread t: 16 elements of row 32i + t/8):
 * a row's 8 lanes reduce its tile max by shuffles and its first lane takes
 * one atomic max into the row's amax; each thread keeps its 16 columns'
 * max over its 4 rows, the 4 lanes of a warp holding the same columns (l,
 * l ^ 8, l ^ 16, l ^ 24) combine them by shuffles, lane l keeps columns
 * 4(l / 8) .. +3 of its 16 and stores them as words [warp][j][l] (32
 * consecutive words a store: no bank conflicts), and 128 threads, (j, l)
 * each, reduce the 8 warps' words and take one atomic max each into the
 * columns' amax. Both outputs are zeroed before the launch (atomic). */
int
emit_amax_rowcol(E *e)
{
	Kern *k = e->k;
	LLVMBuilderRef b = e->b;
	LLVMValueRef R = dimv(e, k->rows), C = dimv(e, k->cols);
	LLVMValueRef t = LLVMBuildZExt(b, sreg(e, "tid.x"), e->g->i64, "");
	LLVMValueRef k0 = mul64(e, LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, ""), TC);
	LLVMValueRef m0 = mul64(e, LLVMBuildZExt(b, sreg(e, "ctaid.y"), e->g->i64, ""), TR);
	LLVMValueRef v = LLVMBuildURem(b, t, c64(e, TC / VEC), ""), rp = LLVMBuildUDiv(b, t, c64(e, TC / VEC), "");
	LLVMValueRef col = add64(e, k0, mul64(e, v, VEC)), colok = ult(e, col, C);
	LLVMValueRef lead = LLVMBuildICmp(b, LLVMIntEQ, v, c64(e, 0), "");
	LLVMValueRef cm[VEC], x[VEC];
	int rowout = -1, colout = -1;

	if (check_amax_ops(e, 1))
		return -1;
	for (int i = 0; i < k->nout; i++) {
		const Type *ty = &k->f->val[k->out[i]].type;
		if (ir_def_ins(k->f, k->out[i])->op != OP_amax)
			return kfail(k, "%%%s: amax_rowcol returns amaxes only", k->f->val[k->out[i]].name);
		if (ty->block[0] == 1 && ty->block[1] == 0)
			rowout = k->out[i];
		else
			colout = k->out[i];
	}
	if (k->threads != THREADS || rowout < 0 || colout < 0)
		return kfail(k, "amax_rowcol: 256 threads, one rows' and one columns' amax");
	for (int i = 0; i < VEC; i++)
		cm[i] = c32(e, 0);
	for (int pass = 0; pass < TR / (THREADS / (TC / VEC)); pass++) {
		LLVMValueRef row = add64(e, m0, add64(e, rp, c64(e, (uint64_t)pass * (THREADS / (TC / VEC)))));
		LLVMValueRef ok = LLVMBuildAnd(b, colok, ult(e, row, R), "");
		LLVMValueRef idx = sel(e, ok, add64(e, LLVMBuildMul(b, row, C, ""), col), c64(e, 0));
		load_vec(e, k->x, idx, x);
		LLVMValueRef rm = c32(e, 0);
		for (int i = 0; i < VEC; i++) {
			x[i] = sel(e, ok, x[i], cf(e, 0));
			LLVMValueRef bits = vec_amax_bits(e, &x[i], 1);
			cm[i] = umax(e, cm[i], bits);
			rm = umax(e, rm, bits);
		}
		rm = group_max(e, rm, TC / VEC);
		LLVMBasicBlockRef cont = begin_if(e, LLVMBuildAnd(b, lead, ult(e, row, R), ""));
		LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpUMax, gep(e, e->ptr[rowout], mul64(e, row, 4)), rm,
		                   LLVMAtomicOrderingMonotonic, 0);
		end_if(e, cont);
	}
	/* the warp's 4 lanes of the same columns, then 4 of the 16 columns a lane */
	for (int i = 0; i < VEC; i++)
		for (int o = TC / VEC; o < 32; o <<= 1)
			cm[i] = umax(e, cm[i], shfl_xor(e, cm[i], o));
	LLVMValueRef lane = LLVMBuildURem(b, t, c64(e, 32), ""), w = LLVMBuildUDiv(b, t, c64(e, 32), "");
	LLVMValueRef gq = LLVMBuildUDiv(b, lane, c64(e, TC / VEC), "");
	LLVMTypeRef pt = LLVMArrayType2(e->g->i32, (THREADS / 32) * 4 * 32);
	LLVMValueRef part = shared_array(e, "colmax", 1, pt, 16);
	for (int j = 0; j < 4; j++) {
		LLVMValueRef val = cm[j];
		for (int g = 1; g < 4; g++)
			val = sel(e, LLVMBuildICmp(b, LLVMIntEQ, gq, c64(e, (uint64_t)g), ""), cm[4 * g + j], val);
		LLVMValueRef ix[2] = {c32(e, 0), LLVMBuildTrunc(b, add64(e, mul64(e, w, 128),
		                      add64(e, c64(e, 32 * (uint64_t)j), lane)), e->g->i32, "")};
		store_al(e, val, LLVMBuildGEP2(b, pt, part, ix, 2, ""), 4);
	}
	barrier(e);
	LLVMBasicBlockRef cont = begin_if(e, ult(e, t, c64(e, 128)));
	LLVMValueRef j = LLVMBuildUDiv(b, t, c64(e, 32), ""), m = c32(e, 0);
	for (int ww = 0; ww < THREADS / 32; ww++) {
		LLVMValueRef ix[2] = {c32(e, 0), LLVMBuildTrunc(b, add64(e, c64(e, 128 * (uint64_t)ww), t),
		                      e->g->i32, "")};
		m = umax(e, m, load_al(e, e->g->i32, LLVMBuildGEP2(b, pt, part, ix, 2, ""), 4));
	}
	/* word (j, l) holds column 16 (l % 8) + 4 (l / 8) + j of the tile */
	LLVMValueRef l = LLVMBuildURem(b, t, c64(e, 32), "");
	LLVMValueRef c = add64(e, k0, add64(e, mul64(e, LLVMBuildURem(b, l, c64(e, TC / VEC), ""), VEC),
	                       add64(e, mul64(e, LLVMBuildUDiv(b, l, c64(e, TC / VEC), ""), 4), j)));
	LLVMBasicBlockRef in = begin_if(e, ult(e, c, C));
	LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpUMax, gep(e, e->ptr[colout], mul64(e, c, 4)), m,
	                   LLVMAtomicOrderingMonotonic, 0);
	end_if(e, in);
	end_if(e, cont);
	return 0;
}
