/*
 * ir.h — the map of precc's IR: every structure, then the functions each
 * file of ir/ exports, grouped by file (QBE's all.h is the model).
 *
 * A Module holds Funcs; a Func is one GEMM of one layer (fprop, dgrad or
 * wgrad) as a straight-line list of SSA instructions over typed tensors.
 * After the passes, a func is a layer's whole step (passes/merge.c) that
 * calls kernels (Func.kernel) and runs GEMMs; pass attributes (PassAttr)
 * record the passes' decisions.
 * Types carry format and shape; dims are static, or the dynamic token count
 * M (optionally divided by a block: M/128). Scale tensors also carry their
 * granularity: the tile of data elements each scale element covers.
 * Semantics of every op, the text grammar and the verifier rules are in
 * docs/ir.md.
 *
 * Depends on libc, libm and precc/numerics.h only (precc_ir layer).
 */
#ifndef PRECC_IR_H
#define PRECC_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "precc/numerics.h"

enum {
	A_PARAM     = 1 << 0,  /* param kind: in, weight, grad, state, bias */
	A_FMT       = 1 << 1,  /* the quantized format a scale is computed for */
	A_BLOCKFMT  = 1 << 2,  /* two-level scaling: format of the block scales */
	A_MARGIN    = 1 << 3,  /* scale /= 2^margin */
	A_POW2      = 1 << 4,  /* round the scale down to a power of two */
	A_EPS       = 1 << 5,  /* amax lower clamp */
	A_NONFINITE = 1 << 6,  /* inf/NaN amax: keep | skip | error */
	A_ALGO      = 1 << 7,  /* history reduce: max | most_recent */
	A_ROUND     = 1 << 8,  /* rne | rz | sr */
	A_SAT       = 1 << 9,  /* satfinite */
	A_STREAM    = 1 << 10, /* SR random stream id (per tensor) */
	A_ACCUM     = 1 << 11, /* fp32 | promote:N | fast:B */
	A_MXMODE    = 1 << 12, /* MX shared exponent: rceil | floor */
	/* the reference knobs (docs/recipes.md "Reference knobs") */
	A_NAN       = 1 << 13, /* nan=propagate | ignore (fmaxf, TE) */
	A_ZERO      = 1 << 14, /* zero=one | keep: a zero amax keeps the state */
	A_FORM      = 1 << 15, /* form=fmax_over_amax | amax_over_fmax */
	A_DIV       = 1 << 16, /* quantize divides by its scale operand */
	A_NVFP4     = 1 << 17, /* nvfp4=precc | te2.14+ | te2.8-2.13 | torchao */
	A_SIGNS     = 1 << 18, /* hadamard: sign mask (bit i flips row i) */
	A_GROUP     = 1 << 19, /* gemm_grouped: group=m (rows) | k (reduction) */
};

typedef enum Op {
#define OP(name, min, max, res, attrs) OP_##name,
#include "ops.def"
#undef OP
	NOP
} Op;

/* the GEMM ops: one GEMM, or an expert group's (gemm_grouped) */
static inline int ir_op_gemm(int op) { return op == OP_gemm || op == OP_gemm_grouped; }

typedef struct OpInfo {
	const char *name;
	int minargs, maxargs;     /* maxargs -1: any number */
	bool result;              /* defines a value */
	unsigned attrs;
} OpInfo;
extern const OpInfo opinfo[NOP];

/* A dim: >= 0 static extent; < 0 is ceil(M / -d), so DIM_M == -1 is M
 * and -128 is M/128. */
#define DIM_M (-1L)
#define MAXRANK 2

typedef struct Type {
	precc_format fmt;
	int rank;                 /* 1 or 2 */
	long dim[MAXRANK];
	bool is_scale;            /* carries a granularity */
	bool index;               /* i32 (gemm_grouped's offsets); fmt is f32,
	                             the storage width */
	long block[MAXRANK];      /* scale tensors: data tile per element,
	                             0 = the whole extent ({1x128}, {*x*}),
	                             BLOCK_GROUP a group's rows ({gx*}) */
} Type;

/* A scale block that is one group's rows (or token columns) of the
 * %offs its op reads: an expert's tensorwise scale of the routed
 * activations, f32[G,1]{gx*} (docs/ir.md, "amax"). */
#define BLOCK_GROUP (-1L)

/* PARAM_BUF: a kernel's operand computed by another kernel or a GEMM. */
typedef enum ParamKind { PARAM_IN, PARAM_WEIGHT, PARAM_GRAD, PARAM_STATE,
                         PARAM_BIAS, PARAM_BUF, PARAM_MAIN_GRAD, NPARAMKIND } ParamKind;
typedef enum AccumKind { ACC_FP32, ACC_PROMOTE, ACC_FAST, NACCKIND } AccumKind;
typedef enum HistAlgo { HIST_MAX, HIST_MOST_RECENT, NHISTALGO } HistAlgo;
/* one: scale 1 (TE current scaling); ieee: the formula with no special
 * case (torchao, DeepGEMM: fmax/inf = 0, NaN stays NaN) */
typedef enum Nonfinite { NF_KEEP, NF_SKIP, NF_ERROR, NF_ONE, NF_IEEE, NNONFINITE_IR } Nonfinite;
/* NVFP4 block-scale formula and multiplier: precc's; Transformer Engine's
 * quantize_transpose kernel since 2.14 and in 2.8-2.13
 * (cast/nvfp4/core_nvfp4.cuh); torchao's nvfp4_quantize, whose global
 * scale operand is the decode scale amax / 2688 */
typedef enum Nvfp4Rule { NV_PRECC, NV_TE214, NV_TE28, NV_TORCHAO, NNVFP4RULE } Nvfp4Rule;
/* rceil: ceil(log2(amax / fmax)), inf/NaN -> 0xff; floor: OCP MX v1.0;
 * rceil_te: TE's float_to_e8m0(amax * (1/fmax)), inf -> 0xfe (satfinite) */
typedef enum MxMode { MX_RCEIL, MX_FLOOR, MX_RCEIL_TE, NMXMODE } MxMode;

/*
 * Pass attributes: key=value words that the passes attach to instructions
 * and to function headers to record their decisions (docs/ir.md, "Pass
 * attributes"). They do not change what an instruction computes; they are
 * printed after the typed attributes, in this order, and round-trip.
 */
typedef enum PassAttr {
	PA_TARGET, PA_CVT, PA_MMA, PA_UPCAST, PA_VEC, PA_MALIGN, PA_FUSE, PA_AMAX_SCHEME,
	PA_PROLOGUE, PA_EPILOGUE, PA_HASH, PA_CALLS, PA_THREADS, PA_ELEMS, PA_TILE, PA_GRID,
	PA_SMEM, PA_LAUNCH, PA_M_VARIANT, NPASSATTR
} PassAttr;

typedef struct Ins {
	Op op;
	int res;                  /* value number (index into Func.val), -1;
	                             a call's first result */
	int *more; int nmore;     /* call only: the results after res */
	char *callee;             /* call only: the kernel's name */
	char *pattr[NPASSATTR];   /* pass attributes (malloc'ed) or NULL */
	int *arg; int narg;       /* value numbers */
	Type type;                /* result type (ops with a result) */
	/* attributes; opinfo[op].attrs says which are meaningful */
	ParamKind param;
	precc_format fmt;
	bool has_blockfmt; precc_format blockfmt;
	int margin;
	bool pow2;
	float eps;
	Nonfinite nonfinite;
	HistAlgo algo;
	precc_round round;        /* PRECC_RNE, PRECC_RZ or PRECC_SR */
	bool sat;
	int stream;
	AccumKind accum; int accum_n;   /* promote:N or fast:B */
	MxMode mxmode;
	bool nan_ignore;          /* amax, history_reduce: nan=ignore */
	bool zero_keep;           /* scale: a zero amax gives prev; history_push:
	                             a zero amax leaves the history as it is */
	bool inv;                 /* scale form=amax_over_fmax: the result is
	                             sf = max(amax, eps) / fmax (a decode scale) */
	bool pow2_log2;           /* scale pow2=log2: exp2f(floorf(log2f(s))) */
	bool divide;              /* quantize div: x / s instead of x * s */
	Nvfp4Rule nvfp4;          /* block_scale, two-level quantize */
	unsigned signs;           /* hadamard: 16-bit sign mask */
	bool group_k;             /* gemm_grouped: group=k (else group=m) */
	int line, col;            /* source position when parsed, else 0 */
	char *comment;            /* lines printed before it ("# ...", and
	                             blank lines at module level), or NULL */
} Ins;

typedef struct Value {
	char *name;               /* without the '%' */
	Type type;                /* type of the defining instruction */
	int def;                  /* first defining Ins in Func.ins, -1 none */
} Value;

typedef struct Func {
	char *name;               /* "model.layers.0.mlp.up_proj.fprop" */
	bool kernel;              /* 'kernel @name': called from funcs by call */
	char *pattr[NPASSATTR];   /* header attributes (malloc'ed) or NULL */
	Ins *ins; int nins, cins;
	Value *val; int nval, cval;
	int line, col;            /* of 'func' when parsed */
	char *comment;            /* '#' lines before 'func', or NULL */
	char *endcomment;         /* '#' lines before the closing '}' */
} Func;

typedef struct Module {
	char *name;               /* source name for messages, or NULL */
	Func **fn; int nfn, cfn;
	char *endcomment;         /* '#' lines after the last func */
} Module;

/* Elsewhere in precc_ir: numerics.c exports include/precc/numerics.h (formats,
 * encode/decode, scales); the interpreter's buffer kernels (interp_*.c,
 * philox.c) export include/precc/interp.h. */

/* ---- ir.c: construction, types, names ----------------------------------- */
Module *ir_module_new(void);
void ir_module_free(Module *);
Func *ir_func_new(Module *, const char *name);
int ir_value(Func *, const char *name, Type);      /* new value, no def */
int ir_find_value(const Func *, const char *name); /* -1 if none */
/* Append an instruction; res >= 0 becomes defined by it (its type is set
 * on both). Attributes start at their defaults (docs/ir.md). */
Ins *ir_emit(Func *, Op, int res, const int *args, int nargs);
/* Convenience: new value named `name` with type t, defined by op(args). */
int ir_def(Func *, const char *name, Type t, Op, const int *args, int nargs);
Ins *ir_def_ins(const Func *, int value);          /* defining Ins or NULL */
/* Rewriting, for passes. Instruction indices shift; Value.def follows. */
Ins *ir_insert(Func *, int pos, Op, int res, const int *args, int nargs);
void ir_delete(Func *, int pos);                   /* its value: no def */
void ir_replace_uses(Func *, int from, int to);    /* operands only */
/* A kernel at another column count (codegen's has_cols kernels: one PTX
 * for every K): a shallow copy of f (its own val and ins arrays, the
 * rest shared: free it with ir_func_recols_free, never ir_func_free)
 * whose static dims equal to from become to, and a scale's dim d of
 * block b with d * b == from becomes to / b (f32[M,512]{1x16} at 8192 ->
 * 1024: [M,64]). to 0 masks the columns (a hash of the shape-free
 * kernel, driver/build.c). */
Func *ir_func_recols(const Func *f, long from, long to);
void ir_func_recols_free(Func *);
int ir_use_count(const Func *, int value);
void ir_recompute_defs(Func *);                    /* first def of each */
/* Copy instruction i of src to the end of dst. map[v] is the dst value of
 * src value v; results (and operands) still -1 get a new dst value of the
 * same name and type. Attributes, pass attributes and comments are copied. */
Ins *ir_copy_ins(Func *dst, const Func *src, const Ins *i, int *map);
int ir_nres(const Ins *);                          /* values it defines */
int ir_res(const Ins *, int k);                    /* k-th of them */
Func *ir_find_func(const Module *, const char *name);
/* A name -> index table (open addressing on FNV-1a) so passes and the
 * verifier look names up in O(1), not by scanning every func: builds stay
 * linear in the number of layers. Keys are borrowed, not copied. */
typedef struct NameTab { const char **key; int *idx; size_t cap, n; } NameTab;
void ir_names_init(NameTab *, size_t hint);
int ir_names_get(const NameTab *, const char *);    /* -1 if absent */
/* Insert name -> idx unless present; returns the index already there,
 * or -1 when it inserted. */
int ir_names_put(NameTab *, const char *, int idx);
void ir_names_set(NameTab *, const char *, int idx); /* insert or replace */
void ir_names_free(NameTab *);
/* Free and drop the funcs whose drop[k] is set, keeping the others' order
 * (one pass, where ir_func_remove per func would be quadratic). */
void ir_func_compact(Module *, const bool *drop);
void ir_func_remove(Module *, int k);              /* frees fn[k] */
/* Set (or with fmt NULL clear) a pass attribute: pattr is Ins.pattr or
 * Func.pattr. */
void ir_set_attr(char **pattr, PassAttr, const char *fmt, ...);
const char *pass_attr_name(PassAttr);
int pass_attr_by_name(const char *);               /* -1 if unknown */
/* Append the line "# <fmt...>" to a comment slot (Ins/Func.comment). */
void ir_comment(char **slot, const char *fmt, ...);
Type ir_tensor(precc_format, long d0, long d1);    /* rank 2 data */
Type ir_vector(precc_format, long d0);             /* rank 1 */
Type ir_index_vector(long d0);                     /* i32[d0] */
Type ir_scale_type(precc_format, long d0, long d1, long b0, long b1);
/* Scale type of granularity b0 x b1 (0 = whole) over data type d. */
Type ir_scale_of(precc_format, const Type *d, long b0, long b1);
/* The extent a scale dim must have over data dim d with block b. */
long ir_scaled_dim(long d, long b);
bool ir_type_eq(const Type *, const Type *);
bool ir_fmt_quantized(precc_format);   /* e4m3 e5m2 e2m1 e3m2 e2m3 */
bool ir_fmt_high(precc_format);        /* f32 tf32 f16 bf16 */
const char *ir_fmt_name(precc_format); /* IR spelling: f32, bf16, e4m3 */
int ir_fmt_by_name(const char *);      /* -1 if unknown */
float ir_fmt_max(precc_format);        /* largest finite value */
const char *param_kind_name(ParamKind);
const char *accum_kind_name(AccumKind);
const char *hist_algo_name(HistAlgo);
const char *nonfinite_name(Nonfinite);
const char *mx_mode_name(MxMode);
const char *nvfp4_rule_name(Nvfp4Rule);

/* ---- print.c: text form ------------------------------------------------- */
void ir_print_dim(FILE *, long);
void ir_print_type(FILE *, const Type *);
void ir_print_ins(FILE *, const Func *, const Ins *);
void ir_print_func(FILE *, const Func *);
void ir_print_module(FILE *, const Module *);
char *ir_module_to_string(const Module *);         /* malloc'ed */
/* The canonical text of a function for content hashing: no name, no
 * comments, no param kinds, no fuse attributes, of the header's attributes
 * only amax_scheme, values numbered %0, %1, ... in order of first
 * appearance. */
void ir_print_func_canon(FILE *, const Func *);

/* ---- hash.c: content hashes (stable across runs and machines) ---------- */
#define IR_HASH_INIT 0xcbf29ce484222325ULL        /* FNV-1a 64 offset basis */
uint64_t ir_hash_bytes(uint64_t h, const void *, size_t);   /* FNV-1a 64 */
uint64_t ir_hash_str(uint64_t h, const char *);             /* with its NUL */
/* Hash of a kernel: canonical text (ir_print_func_canon) + target + the
 * compiler version (PRECC_VERSION). */
uint64_t ir_func_hash(const Func *, const char *target);

/* ---- parse.c: text form back to IR (print(parse(t)) == t) --------------- */
/* Returns NULL and writes "name:line:col: error: ..." into err on failure. */
Module *ir_parse(const char *text, const char *name, char *err, size_t errsz);

/* ---- verify.c ----------------------------------------------------------- */
/* Returns the number of errors. Each is one line in err:
 *   [name:line:col: ]error: @func: %v = op: message
 * (no "%v = " for update/ret; position only for parsed IR). */
int ir_verify(const Module *, char *err, size_t errsz);

/* ---- interp.c: run a Func on host buffers (docs/sim.md) ------------------
 * One IrInterp per Func and M: new sizes every value at M and checks the
 * total against available memory before allocating; bind gives each param
 * its caller-owned buffer (in, weight, grad, bias: read only; state: read,
 * and written by commit); run executes the Func; commit applies its update
 * ops (none after a step marked skipped by nonfinite=skip); a `call` runs
 * its kernel (from opts.module) on the caller's buffers, as a GPU launch
 * would. Errors read
 * "@func: %v = op: message" (ir_interp_error, or err for new). Results are
 * bit-identical for any thread count. */
typedef struct IrInterpOpts {
	long m;                   /* the token count M (> 0 when a dim uses it) */
	int threads;              /* 0 = all online cores */
	uint64_t seed;            /* stochastic rounding (Philox key) */
	int promote_bits;         /* accum=promote:N: mantissa bits kept inside a
	                             chunk, the tensor core's sum (14); 0 = fp32 */
	bool fp32_accum;          /* every gemm sums in fp32, fast:B's and
	                             promote's bits ignored (the chunks and scale
	                             promotions stay): the reference of the
	                             emulated tensor core, and |A||B| for bounds */
	size_t mem_limit;         /* bytes; 0 = MemAvailable (physical memory) */
	bool stats;               /* count saturated/flushed per quantize/cast */
	const struct Module *module;  /* resolves `call`: the kernels a step
	                             func runs (NULL: a call fails) */
} IrInterpOpts;
typedef struct IrQuantStats {
	long n;                   /* elements cast */
	long saturated;           /* |x * scale| >= fmax + ulp(fmax)/2, x finite */
	long flushed;             /* x != 0 that became 0 */
	long nonfinite;           /* x inf or NaN */
} IrQuantStats;
typedef struct Interp IrInterp;
void ir_interp_opts_init(IrInterpOpts *);          /* zeros, promote_bits 14 */
size_t ir_interp_mem_available(void);
IrInterp *ir_interp_new(const Func *, const IrInterpOpts *, char *err, size_t errsz);
void ir_interp_free(IrInterp *);
int ir_interp_bind(IrInterp *, const char *name, void *data, size_t bytes);
int ir_interp_run(IrInterp *);                     /* 0 or -1 */
int ir_interp_commit(IrInterp *);
const char *ir_interp_error(const IrInterp *);
/* Size at M of value v (rows x cols; rank 1 is 1 x n), its data after run. */
size_t ir_interp_value_bytes(const IrInterp *, int v, long *rows, long *cols);
const void *ir_interp_value(const IrInterp *, int v);
int ir_interp_nresults(const IrInterp *);
int ir_interp_result(const IrInterp *, int k);     /* value of ret operand k */
/* Counts of instruction ins (a quantize or cast; NULL otherwise, or
 * without opts.stats). */
const IrQuantStats *ir_interp_quant_stats(const IrInterp *, int ins);
bool ir_interp_skipped(const IrInterp *);          /* nonfinite=skip fired */
long ir_interp_nonfinite(const IrInterp *);        /* inf/NaN amax values */

#endif
