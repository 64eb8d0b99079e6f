/*
 * emit.h — the state of one kernel being emitted (E) and the functions the
 * emitter's files share: the toolkit (emit.c), per-block scalars
 * (emit_scale.c), quantize (emit_quant.c) and one entry per kernel family
 * (k_*.c). Private to codegen/.
 */
#ifndef PRECC_EMIT_H
#define PRECC_EMIT_H

#include "kern.h"

typedef struct E {
	Cg *g;
	Kern *k;
	LLVMBuilderRef b;
	LLVMValueRef *ptr;        /* value -> pointer param */
	LLVMValueRef *sc;         /* value -> per-block scalar (f32, or i32 code) */
	LLVMValueRef m, seed, cols;   /* cols: the kernel's has_cols param */
	LLVMValueRef red;         /* shared i32[32] */
	LLVMValueRef vcx, vcy;    /* a phase's own CTA ids (i32), or NULL */
	LLVMValueRef sync;        /* grid-sync scratch (u32 pairs), or NULL */
	LLVMValueRef ncta;        /* CTAs of this phase (i64) */
	int slot;                 /* this phase's pair in sync */
	/* cooperative kernels looping over their tiles (kemit.c): 0 one tile
	 * per CTA, the grid-wide barrier in grid_amax; 1 the first pass (amax
	 * only: grid_amax adds the CTA's max and leaves the body for
	 * pass_exit); 2 the second pass (grid_amax reads the final amax) */
	int coop_pass;
	LLVMBasicBlockRef pass_exit;
	int bulk;                 /* the delayed update's bulk entry: thread 0
	                             of every CTA runs the update (k_delayed.c) */
	LLVMValueRef grp;         /* a grouped GEMM's tile: its group (i64), the
	                             slot of a {gx*} or {*xg} scale */
} E;

static inline LLVMValueRef c32(E *e, uint64_t v) { return LLVMConstInt(e->g->i32, v, 0); }
static inline LLVMValueRef c64(E *e, uint64_t v) { return LLVMConstInt(e->g->i64, v, 0); }
static inline LLVMValueRef cf(E *e, double v) { return LLVMConstReal(e->g->f32, v); }
/* i64 index arithmetic the kernel families share */
static inline LLVMValueRef add64(E *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(e->b, a, b, ""); }
static inline LLVMValueRef mul64(E *e, LLVMValueRef a, uint64_t c) { return LLVMBuildMul(e->b, a, c64(e, c), ""); }
static inline LLVMValueRef ult(E *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(e->b, LLVMIntULT, a, b, ""); }
static inline LLVMValueRef sel(E *e, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(e->b, c, a, b, ""); }

/* A counted loop i = lo .. hi-1 (i64); body emitted by the caller between
 * loop_begin and loop_end. */
typedef struct Loop {
	LLVMBasicBlockRef head, body, exit, pre;
	LLVMValueRef i, hi;
	LLVMValueRef latch;   /* the back edge, after loop_end */
} Loop;


/* ---- emit.c ------------------------------------------------------------ */
LLVMValueRef cfbits(E *e, uint32_t bits);
LLVMValueRef intrin(E *e, const char *name, LLVMTypeRef *tys, int ntys, LLVMValueRef *args, int nargs);
LLVMValueRef sreg(E *e, const char *name);
void barrier(E *e);
LLVMValueRef umax(E *e, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef gep(E *e, LLVMValueRef p, LLVMValueRef byteoff);
LLVMValueRef dimv(E *e, long d);
LLVMBasicBlockRef begin_if(E *e, LLVMValueRef cond);
void end_if(E *e, LLVMBasicBlockRef cont);
LLVMValueRef shared_array(E *e, const char *name, int id, LLVMTypeRef at, unsigned align);
LLVMValueRef load_al(E *e, LLVMTypeRef t, LLVMValueRef p, unsigned align);
void store_al(E *e, LLVMValueRef v, LLVMValueRef p, unsigned align);
void load_vec(E *e, int v, LLVMValueRef idx, LLVMValueRef out[VEC]);
void store_vec(E *e, int v, LLVMValueRef idx, const LLVMValueRef x[VEC]);
void unpack16(E *e, precc_format f, LLVMValueRef w[VEC / 8], LLVMValueRef out[VEC]);
LLVMValueRef pack_codes(E *e, LLVMValueRef code[VEC]);
void store_codes(E *e, int v, LLVMValueRef idx, LLVMValueRef code[VEC]);
LLVMValueRef load_elem(E *e, int v, LLVMValueRef idx);
LLVMValueRef fptr(E *e, int v, LLVMValueRef i);
LLVMValueRef vec_amax_bits(E *e, LLVMValueRef *x, int n);
LLVMValueRef shfl_xor(E *e, LLVMValueRef v, int lanemask);   /* shfl.sync.bfly, all lanes */
LLVMValueRef group_max(E *e, LLVMValueRef m, int lanes);
LLVMValueRef cta_max(E *e, LLVMValueRef m);
LLVMValueRef gid64(E *e);
LLVMValueRef loop_begin(E *e, Loop *l, LLVMValueRef lo, LLVMValueRef hi);
void loop_end(E *e, Loop *l);
void loop_nounroll(E *e, const Loop *l);   /* keep the loop rolled (after loop_end) */
LLVMValueRef fabs_(E *e, LLVMValueRef x);
LLVMValueRef is_finite(E *e, LLVMValueRef x);

/* ---- emit_scale.c ------------------------------------------------------ */
LLVMValueRef decode8(E *e, precc_format f, LLVMValueRef code);
LLVMValueRef scalar(E *e, int v, LLVMValueRef bidx);
int check_scalar_ops(E *e);
int is_tensorwise_t(const Type *t);
int is_out(E *e, int v);
void store_scalars(E *e, LLVMValueRef cond, LLVMValueRef bidx, LLVMValueRef tbidx);
LLVMValueRef block_scalars(E *e, const Ins *q, LLVMValueRef m, LLVMValueRef bidx, LLVMValueRef cond);

/* ---- emit_quant.c ------------------------------------------------------ */
int check_quantize(E *e, const Ins *q);
LLVMValueRef quant_multiplier(E *e, const Ins *q, LLVMValueRef bidx);
void quantize_vec(E *e, const Ins *q, LLVMValueRef m, LLVMValueRef x[VEC], LLVMValueRef idx, LLVMValueRef code[VEC]);
void tensor_amax_out(E *e, LLVMValueRef mbits);
void seg_amax_out(E *e, LLVMValueRef mbits, LLVMValueRef idx);
/* {gx*}: the group of row r (k->goffs; G for a row past the last offset),
 * the atomic max of each group's rows, each group's scalars */
LLVMValueRef group_of(E *e, LLVMValueRef r);
void group_amax_out(E *e, LLVMValueRef mbits, LLVMValueRef grp, LLVMValueRef valid);
void group_scalars_out(E *e);
int check_amax_ops(E *e, int no_tensorwise);
LLVMValueRef grid_amax(E *e, LLVMValueRef mbits);
void grid_sync(E *e, LLVMValueRef cnt, LLVMValueRef n);

/* ---- k_flat.c ---------------------------------------------------------- */
int emit_flat(E *e);

/* ---- k_transpose.c ----------------------------------------------------- */
int emit_transpose(E *e);

/* ---- k_tile.c ---------------------------------------------------------- */
int emit_tile(E *e);

/* ---- k_colblock.c ------------------------------------------------------ */
int emit_colblock(E *e);
int emit_amax_cols(E *e);

/* ---- k_rowcol.c -------------------------------------------------------- */
int emit_rowcol(E *e);
int emit_amax_rowcol(E *e);

/* ---- k_dequant.c ------------------------------------------------------- */
int emit_dequant(E *e);

/* ---- k_cast.c ---------------------------------------------------------- */
int emit_cast(E *e);

/* ---- k_gemm.c ---------------------------------------------------------- */
int emit_gemm(E *e);

/* ---- k_gemm_grouped.c -------------------------------------------------- */
int emit_gemm_grouped(E *e);

/* ---- k_gemm_sm90.c ----------------------------------------------------- */
int emit_gemm_sm90(E *e);
/* k_gemm_grouped_sm90.c: a gemm_grouped on wgmma (sm_90a) */
int emit_gemm_grouped_sm90(E *e);

/* ---- k_delayed.c ------------------------------------------------------- */
int emit_delayed(E *e);
/* The second entry of a delayed-update module (CG_BULK_ENTRY): the update
 * of many layers, a row of pointers per layer; g->fn is left as it was. */
int emit_delayed_bulk(Cg *g, Kern *k);

/* k_hadamard.c */
int emit_hadamard(E *e);
void rht_block(E *e, const Ins *h, LLVMValueRef x[16], LLVMValueRef y[16]);

#endif
