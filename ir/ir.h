/*
 * ir.h — the map of precc's IR: every structure, then the functions each
 * file of ir/ exports, grouped by file (QBE's all.h is the model).
 *
 * A Module holds Funcs; a Func is one GEMM of one layer (fprop, dgrad or
 * wgrad) as a straight-line list of SSA instructions over typed tensors.
 * Types carry format and shape; dims are static, or the dynamic token count
 * M (optionally divided by a block: M/128). Scale tensors also carry their
 * granularity: the tile of data elements each scale element covers.
 *
 * Depends on libc, libm and precc/numerics.h only (precc_ir layer).
 */
#ifndef PRECC_IR_H
#define PRECC_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "precc/numerics.h"

enum {
	A_PARAM  = 1 << 0,  /* param kind: in, weight, grad, state, bias */
	A_FMT    = 1 << 1,  /* target format of a scale computation */
	A_MARGIN = 1 << 2,
	A_POW2   = 1 << 3,
	A_EPS    = 1 << 4,
	A_ALGO   = 1 << 5,  /* history reduce: max | most_recent */
	A_ROUND  = 1 << 6,  /* rne | rz | sr */
	A_SAT    = 1 << 7,  /* satfinite */
	A_STREAM = 1 << 8,  /* SR random stream id (per tensor) */
	A_ACCUM  = 1 << 9,  /* fp32 | promote:N | fast:B */
};

typedef enum Op {
#define OP(name, nargs, attrs) OP_##name,
#include "ops.def"
#undef OP
	NOP
} Op;

typedef struct OpInfo { const char *name; int nargs; unsigned attrs; } OpInfo;
extern const OpInfo opinfo[NOP];

/* A dim: >= 0 static extent; < 0 is ceil(M / -d), so DIM_M == -1 is M. */
#define DIM_M (-1L)
#define MAXRANK 2

typedef struct Type {
	precc_format fmt;
	int rank;                 /* 0 (scalar) .. 2 */
	long dim[MAXRANK];
	long block[MAXRANK];      /* scale tensors: data tile per element,
	                             0 = whole extent; both 0 for plain data
	                             (printed as {1x128}, {*x*}, {1x*}) */
	bool is_scale;            /* carries a granularity */
} Type;

typedef enum ParamKind { PARAM_IN, PARAM_WEIGHT, PARAM_GRAD, PARAM_STATE,
                         PARAM_BIAS, NPARAMKIND } ParamKind;
typedef enum AccumKind { ACC_FP32, ACC_PROMOTE, ACC_FAST, NACCKIND } AccumKind;

typedef struct Ins {
	Op op;
	int res;                  /* value number (index into Func.val), -1 */
	int *arg; int narg;       /* value numbers */
	Type type;                /* result type */
	/* attributes; opinfo[op].attrs says which are meaningful */
	ParamKind param;
	precc_format fmt;
	int margin;
	bool pow2;
	float eps;
	int algo;                 /* 0 max, 1 most_recent */
	precc_round round;
	bool sat;
	int stream;
	AccumKind accum; int accum_n;   /* promote:N or fast:B */
	int line;                 /* source line when parsed, else 0 */
} Ins;

typedef struct Value {
	char *name;               /* without the '%' */
	Type type;
	int def;                  /* index of defining Ins in Func.ins */
} Value;

typedef struct Func {
	char *name;               /* "model.layers.0.mlp.up_proj.fprop" */
	Ins *ins; int nins, cins;
	Value *val; int nval, cval;
} Func;

typedef struct Module {
	Func **fn; int nfn, cfn;
} Module;

/* ---- ir.c: construction ------------------------------------------------ */
Module *ir_module_new(void);
void ir_module_free(Module *);
Func *ir_func_new(Module *, const char *name);
int ir_value(Func *, const char *name, Type);         /* new value */
Ins *ir_emit(Func *, Op, int res, const int *args, int nargs);
Type ir_tensor(precc_format, long d0, long d1);
Type ir_scale_type(precc_format, long d0, long d1, long b0, long b1);
bool ir_type_eq(const Type *, const Type *);
const char *param_kind_name(ParamKind);

/* ---- print.c: text form ------------------------------------------------- */
void ir_print_type(FILE *, const Type *);
void ir_print_func(FILE *, const Func *);
void ir_print_module(FILE *, const Module *);
char *ir_module_to_string(const Module *);            /* malloc'ed */

/* ---- parse.c: text form back to IR (print(parse(t)) == t) --------------- */
/* Returns NULL and writes "name:line:col: error: ..." into err on failure. */
Module *ir_parse(const char *text, const char *name, char *err, size_t errsz);

/* ---- verify.c ----------------------------------------------------------- */
/* Returns the number of errors; each is "func: %v: message" into err. */
int ir_verify(const Module *, char *err, size_t errsz);

#endif
