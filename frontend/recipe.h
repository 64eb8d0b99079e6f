/*
 * recipe.h — what a precision recipe says, as C structs, and the per-layer
 * plan the frontend resolves from a recipe and a model.
 *
 * recipe.c (Lua side) fills Recipe; model.c fills Model; plan.c resolves
 * both into Plan (rules, overrides, fallbacks with reasons). Lowering to IR
 * (ir/lower.c is not here: frontend/lower.c) reads Plan only.
 */
#ifndef PRECC_RECIPE_H
#define PRECC_RECIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "precc/numerics.h"

/* ---- vocabulary -------------------------------------------------------- */

typedef enum Role { ROLE_INPUT, ROLE_WEIGHT, ROLE_GRAD_OUTPUT, NROLE } Role;
/* fprop: Y = X·Wᵀ (input, weight); dgrad: dX = dY·W (grad_output, weight);
 * wgrad: dW = dYᵀ·X (grad_output, input). */
typedef enum Gemm { GEMM_FPROP, GEMM_DGRAD, GEMM_WGRAD, NGEMM } Gemm;

typedef enum ScalingKind {
	SCALING_NONE,     /* high-precision operand: no scale */
	SCALING_CURRENT,  /* tensorwise, just-in-time amax of this tensor */
	SCALING_DELAYED,  /* tensorwise, scale from amax history */
	SCALING_ROWWISE,  /* one scale per row along the GEMM's K (axiswise) */
	SCALING_BLOCK,    /* block tiles, e.g. 1x128 activations, 128x128 weights */
	SCALING_MX,       /* OCP MX: 1x32 blocks, e8m0 scale */
	SCALING_NVFP4,    /* 1x16 blocks, e4m3 scale, fp32 global scale */
	NSCALING
} ScalingKind;

typedef enum AmaxAlgo { AMAX_MAX, AMAX_MOST_RECENT } AmaxAlgo;

/* What happens when an operand's amax is inf or NaN. */
typedef enum NonfinitePolicy {
	NONFINITE_KEEP_SCALE, /* TE: keep the previous scale, propagate values */
	NONFINITE_SKIP_STEP,  /* report overflow to the loss scaler, skip update */
	NONFINITE_ERROR,      /* stop training with an error */
	NNONFINITE
} NonfinitePolicy;

typedef enum Accum {
	ACCUM_FP32,     /* exact fp32 accumulation ("split" in torchao terms) */
	ACCUM_FAST,     /* hardware fast accumulation (reduced-precision sum) */
	ACCUM_PROMOTE,  /* fp32 promotion every promote_every K-elements */
	NACCUM
} Accum;

typedef enum Fallback {
	FALLBACK_HIGH,   /* use fallback_format for the whole GEMM */
	FALLBACK_PAD,    /* pad the misaligned dims up to the multiple */
	FALLBACK_ERROR,  /* refuse: precc check reports an error */
	NFALLBACK
} Fallback;

typedef enum LossScale { LOSS_NONE, LOSS_STATIC, LOSS_DYNAMIC, NLOSS } LossScale;

/* Reference knobs (recipe_sem.c, docs/recipes.md "Reference knobs"):
 * each is a choice the published recipes make differently, under the name
 * the recipe writes; value 0 is precc's rule before the knob existed.
 * set/line say which were written and where, for layering and messages. */
typedef enum Knob {
	KNOB_AMAX_NAN,        /* propagate | ignore (fmaxf, TE) */
	KNOB_ZERO_AMAX,       /* one | keep (TE delayed: previous scale, no roll) */
	KNOB_NONFINITE_SCALE, /* keep | one (TE current) | ieee (torchao, DeepGEMM) */
	KNOB_SCALE_FORM,      /* fmax_over_amax | amax_over_fmax (DeepSeek sf) */
	KNOB_QUANTIZE,        /* multiply (x * scale) | divide (x / sf, DeepSeek-V3) */
	KNOB_MX_ROUND,        /* rceil_div | rceil (TE) | floor (OCP MX v1.0) */
	KNOB_NVFP4_SCALE,     /* precc | te2.14+ | te2.8-2.13 | torchao */
	KNOB_POW2_ROUND,      /* mask (TE) | log2 (torchao exp2(floor(log2))) */
	KNOB_RHT,             /* none | wgrad (NVFP4: TE's random Hadamard
	                         transform on the wgrad operands) */
	NKNOB
} Knob;
typedef struct Knobs { unsigned set; unsigned char v[NKNOB]; int line[NKNOB]; } Knobs;

/* How one operand of one GEMM is cast. */
typedef struct Cast {
	precc_format format;
	ScalingKind scaling;
	int block[2];             /* tile rows x cols in the operand's own
	                             layout (0 = whole extent); set for BLOCK,
	                             MX (1x32), NVFP4 (1x16), ROWWISE (1x0) */
	precc_format scale_format;/* fp32, e8m0 (MX), e4m3 (NVFP4) */
	int history;              /* DELAYED: amax history length */
	AmaxAlgo amax_algo;       /* DELAYED: max or most_recent */
	int margin;
	bool pow2_scale;
	float amax_eps;
	precc_round round;        /* RNE, RZ or SR */
	bool saturate;
	NonfinitePolicy nonfinite;
	Knobs knobs;              /* layered knob by knob (knobs_layer) */
} Cast;

typedef struct GemmPolicy {
	Cast operand[2];          /* [0] = A (left), [1] = B (right) */
	Role role[2];             /* which role each operand is */
	Accum accum;
	int promote_every;        /* ACCUM_PROMOTE: K-elements (DeepSeek: 128) */
	int accum_bits;           /* ACCUM_FAST: mantissa bits kept (14) */
	precc_format out_format;  /* Y / dX / dW */
	bool bias;                /* fprop only */
	bool out_amax;            /* emit amax of the output for the next layer */
	int out_amax_block[2];    /* its block over the output (rows, cols), from
	                             amax = {1, 128}; 0, 0: tensorwise */
	bool out_accumulate;      /* wgrad only: dW = fl(main_grad + acc), f32, in
	                             the GEMM's epilogue (TE fuse_wgrad_accumulation) */
} GemmPolicy;

typedef struct TrainingPolicy {
	LossScale loss_scale;
	float loss_scale_init;    /* static value or dynamic initial (2^16) */
	float growth_factor;      /* 2.0 */
	float backoff_factor;     /* 0.5 */
	int growth_interval;      /* 2000 steps */
	precc_format master_weights;   /* fp32 */
	precc_format optimizer_state;  /* fp32 */
	bool stochastic_round_updates;
} TrainingPolicy;

/*
 * Defaults — what a field is when no level wrote it. recipe.c documents
 * these in docs/recipes.md and plan.c applies them; keep the three equal:
 *   format bf16, scaling none, accumulate fp32, output bf16, bias false,
 *   out_amax false, round rne, saturate true for fp8/fp6/fp4 (false for
 *   fp16/bf16: overflow goes to inf, as cvt.rn), margin 0, pow2 false,
 *   amax_eps 0, history 1 with algo max, nonfinite keep_scale,
 *   fallback bf16 (FALLBACK_HIGH), loss scale none (dynamic: init 65536,
 *   growth 2, backoff 0.5, interval 2000), master weights fp32,
 *   optimizer state fp32, stochastic_round_updates false.
 * Implied by a scaling (recipe.c sets SET_BLOCK/SET_SCALE_FORMAT with
 * them whenever a scaling is written, unless the recipe gave its own):
 *   current/delayed block 0x0 scale fp32; rowwise 1x0 fp32; mx 1x32 e8m0;
 *   nvfp4 1x16 e4m3 (+ fp32 global); blockwise fp32, and its dims only
 *   when written (blockwise{1,128}); bare `blockwise` leaves SET_BLOCK
 *   clear, so plan.c's role default applies (128x128 weights, else 1x128).
 * Implied by accumulate: promote -> promote_every 128 unless written,
 *   fast -> accum_bits 14 unless written (plan.c derives both).
 * A high-precision operand (fp32/tf32/fp16/bf16) carries no scale: a
 * scaling inherited from a less specific level does not apply to it
 * (recipe.c rejects one written at the same or a more specific level).
 * recipe.c has validated every combination before plan.c sees it:
 * MX needs an fp8/fp6/fp4 element format and e8m0 scales, NVFP4 e2m1 with
 * e4m3 scales, history/algo only with delayed, promote_every only with
 * promote, accum_bits only with fast, and both operands of a GEMM are
 * low precision or neither.
 */

/* A user's settings table, partially specified: `set` bits say which
 * fields the user wrote, so layering (defaults < recipe < role < gemm <
 * gemm.role, and rule tables on top) only overrides what was said. */
enum {
	SET_FORMAT = 1 << 0, SET_SCALING = 1 << 1, SET_BLOCK = 1 << 2,
	SET_SCALE_FORMAT = 1 << 3, SET_HISTORY = 1 << 4, SET_AMAX_ALGO = 1 << 5,
	SET_MARGIN = 1 << 6, SET_POW2 = 1 << 7, SET_EPS = 1 << 8,
	SET_ROUND = 1 << 9, SET_SATURATE = 1 << 10, SET_NONFINITE = 1 << 11,
};
enum {
	SET_ACCUM = 1 << 0, SET_PROMOTE = 1 << 1, SET_ACCUM_BITS = 1 << 2,
	SET_OUT_FORMAT = 1 << 3, SET_BIAS = 1 << 4, SET_OUT_AMAX = 1 << 5,
	SET_OUT_ACCUMULATE = 1 << 6,
};
enum { NSET_CAST = 12, NSET_GEMM = 7 };  /* number of SET_ bits above */
/* line[i]: the source line where the field of bit 1<<i was written (0 when
 * not written or not known), for messages that point at a setting. */
typedef struct CastSpec { unsigned set; Cast v; int line[NSET_CAST]; } CastSpec;
typedef struct GemmSpec {
	unsigned set; GemmPolicy v;       /* accum/out fields only */
	CastSpec all;                     /* gemm-wide cast settings */
	CastSpec role[NROLE];             /* gemm.role overrides */
	int line[NSET_GEMM];              /* as CastSpec.line, for v */
} GemmSpec;

/* Where something was written, for file:line messages. */
typedef struct SrcLoc { const char *file; int line; } SrcLoc;

/* One settings level: a recipe's top level, or one rule's table. */
typedef struct Settings {
	CastSpec all;                     /* top-level format/scaling/... */
	CastSpec role[NROLE];             /* input = {...}, weight = {...} */
	GemmSpec gemm[NGEMM];             /* fprop = {...}, ... */
	unsigned gemm_set; GemmPolicy gemm_all; /* top-level accum/output */
	bool has_fallback; Fallback fallback; precc_format fallback_format;
	SrcLoc fallback_loc;              /* where fallback = ... was written
	                                     (line 0: unknown; plan.c then
	                                     points at the rule or recipe) */
	bool hybrid;                      /* format = "hybrid" was written at
	                                     this level's top: e4m3 for input and
	                                     weight, e5m2 for grad_output, applied
	                                     right after `all` (all.format is not
	                                     set by it; all.line[0] is the line
	                                     of the format = hybrid) */
	int gemm_line[NSET_GEMM];         /* as CastSpec.line, for gemm_all */
	int line;                         /* line of the recipe / rule table */
} Settings;

typedef struct Rule {
	char *pattern;            /* Lua pattern on the FQN, or NULL */
	int predicate_ref;        /* luaL_ref of a Lua predicate, or LUA_NOREF */
	char *label;              /* what `precc check` shows as the reason:
	                             the rule's `reason`, else its pattern,
	                             else "rule at line N" */
	Settings settings;
	SrcLoc loc;
} Rule;

typedef struct Recipe {
	char *name;
	char *description;
	char *path;
	Settings base;
	Rule *rules; int nrules;  /* first match wins */
	TrainingPolicy training;
	SrcLoc loc;
	void *lua;                /* the live Sandbox (sandbox.h) that runs
	                             predicates and patterns; frontend only */
} Recipe;

/* ---- model -------------------------------------------------------------- */

typedef struct Linear {
	char *fqn;                /* model.layers.0.self_attn.q_proj */
	long in_features;         /* K of fprop */
	long out_features;        /* N of fprop */
	bool tied;                /* weight tied to an embedding (lm_head) */
	bool bias;                /* the module has a bias vector (Qwen2 q/k/v) */
	/* From the name (model_classify), for rule predicates: */
	int block;                /* N of "layers.N." (or h./blocks.), -1 none */
	int expert;               /* N of "experts.N.", -1 none */
	int nblocks;              /* the model's Model.nblocks, for predicates */
	const char *kind;         /* attn.q attn.kv attn.qkv attn.o mlp.up mlp.down
	                             mlp.gate_up expert.up expert.down
	                             shared_expert.up shared_expert.down router
	                             lm_head other (static strings) */
	int shares_input;         /* 1 + the index of the first linear that reads
	                             the same input tensor (q for k and v, gate for
	                             up), 0 none (so zero-initialised is none) */
	/* An expert's slice of a fused 3-D parameter (transformers 5's
	 * experts.gate_up_proj, not an nn.Linear): the parameter's state_dict
	 * key is the FQN without its ".E" (model_fused_param), and it holds
	 * `group` experts, stored [E, in, out] (x @ W[e]: gpt-oss, Llama-4)
	 * when param_in_out, else [E, out, in]. group 0: an nn.Linear. */
	int group;
	bool param_in_out;
} Linear;

typedef struct Model {
	char *name;
	char *path;
	Linear *linears; int nlinears;
	int nblocks;              /* 1 + the largest Linear.block, 0 none */
	bool synthetic;           /* precc sim's one made-up layer: plan.c skips
	                             the rule diagnostics (sim reports its own) */
} Model;

/* Limits on what a model file may declare (both forms). */
enum {
	MODEL_MAX_FEATURES = 1 << 24,   /* 16M: larger than any real hidden/vocab */
	MODEL_MAX_LAYERS = 4096,
	MODEL_MAX_LINEARS = 1 << 17,    /* 131,072: DeepSeek-V3 has 45,091 */
};

/* ---- resolved plan ------------------------------------------------------ */

typedef struct LayerPlan {
	const Linear *linear;
	GemmPolicy gemm[NGEMM];
	const char *rule;         /* label of the matched rule, or NULL */
	char *reason[NGEMM];      /* fallback reason per GEMM, or NULL:
	                             "out_features 50257 % 16 != 0 → bf16" */
	long pad[2];              /* FALLBACK_PAD: padded in/out features */
} LayerPlan;

typedef struct Plan {
	const Recipe *recipe;
	const Model *model;
	LayerPlan *layers; int nlayers;
} Plan;

/* ---- entry points, grouped by file ------------------------------------- */

/* diag.c — the one user-error path: "file:line: error: msg", exit 1 */
_Noreturn void errorf(const char *file, int line, const char *fmt, ...);
void warnf(const char *file, int line, const char *fmt, ...);
extern bool diag_werror;     /* --Werror: warnings are errors */
extern int diag_nwarn;       /* warnings so far */
void diag_werror_exit(void); /* exit 1 if --Werror and any warning */
_Noreturn void die_(const char *file, int line, const char *fmt, ...);
#define die(...) die_(__FILE__, __LINE__, __VA_ARGS__)
const char *suggest(const char *word, const char *const *cands, int n);
const char *format_family_hint(const char *word); /* "fp8" -> "e4m3 or e5m2 ..." */
char *read_file(const char *path, size_t max, size_t *len, bool *opened);
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t sz);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* plain text for names: NULL, or why not (in buf) */
const char *text_fault(const char *s, size_t n, bool lines, char *buf, size_t bufsz);
char *text_lossy(const char *s);   /* invalid UTF-8 bytes -> U+FFFD */

/* recipe.c — sandboxed Lua 5.4, recipe language */
Recipe *recipe_load(const char *path);
void recipe_free(Recipe *);
/* Run a rule's predicate on an FQN (for rules written as functions). */
bool recipe_rule_matches(const Recipe *, const Rule *, const Linear *);
const char *role_name(Role);
const char *gemm_name(Gemm);
const char *scaling_name(ScalingKind);
const char *accum_name(Accum);

/* recipe_sem.c — the reference knobs */
extern const char *const knob_keys[NKNOB];
const char *knob_value_name(Knob, int v);
void knobs_layer(Knobs *dst, const Knobs *src);   /* what src wrote wins */

/* model.c — Lua model files and HuggingFace config.json */
Model *model_load(const char *path);   /* by extension: .lua or .json */
void model_free(Model *);
void model_add_linear(Model *, const char *fqn, long in, long out, bool tied, bool bias);
/* Linear `later` reads the same input tensor as linear `first` (an earlier
 * one; its own root if it shares too). */
void model_share_input(Model *, int later, int first);
/* Marks linear i an expert's slice of a fused parameter of `group` experts
 * (Linear.group); model_fused_param writes the parameter's key. */
void model_fuse(Model *, int i, int group, bool in_out);
void model_fused_param(const Linear *, char *out, size_t cap);
/* The index of the first linear reading linear i's input, or -1 (none). */
int model_input_root(const Model *, int i);
_Noreturn void model_fail(Model *, const char *file, int line, const char *fmt, ...);
void model_classify(Model *);          /* block, expert, kind of each linear */

/* hf_arch.c — a HuggingFace config.json through the table of architectures
 * (docs/models.md); takes text (malloc'ed). PRECC_MODEL_TYPE=llama reads
 * an unknown model_type as Llama. */
void hf_load(Model *, char *text);
extern const char *const hf_known_types; /* "llama, mistral, ..." */

/* recipe_check.c (rule diagnostics) — warn at a rule's line when it matches
 * no layer of the model, or only layers earlier rules took. */
void recipe_check_rules(const Recipe *, const Model *);

/* plan.c — resolve recipe x model into per-layer policies */
Plan *plan_resolve(const Recipe *, const Model *);
void plan_free(Plan *);
void plan_print_table(const Plan *, FILE *);      /* plan_print.c: grouped */
void plan_print_table_flat(const Plan *, FILE *); /* one row per layer */
void plan_print_json(const Plan *, FILE *);

/* lower.c — Plan to IR (ir/ir.h): one Func per layer x GEMM, for layers
 * whose FQN matches layer_pattern (a glob when it has * ? or [, else a
 * substring; NULL: all). Free with ir_module_free. */
struct Module *lower_plan(const Plan *, const char *layer_pattern);
/* The expert groups of the plan's MoE blocks (the experts 0..E-1 of one
 * block and module, one policy): for each, its fprop and wgrad as one
 * gemm_grouped func named after the group (the fused parameter's key, or
 * the FQN without the expert index: BLOCK.experts.w1.fprop) whose weight
 * is the experts' stacked [E*N, K] and whose %offs are the groups' end
 * offsets; what gemm_grouped cannot express per expert (dgrad, padding,
 * bias, tensorwise activation, delayed and NVFP4 scales) is left out: the
 * per-expert funcs of lower_plan compute it. */
struct Module *lower_grouped(const Plan *, const char *layer_pattern);
/* Whether to print progress for `work` layers: PRECC_PROGRESS=1/0 forces
 * it on/off, else on a tty from LOWER_PROGRESS_MIN layers. */
enum { LOWER_PROGRESS_MIN = 2000 };
bool lower_progress_wanted(long work);
/* Whether the IR of an operand of GEMM g cast as c uses knob k
 * (LOWER_AMAX_EPS: amax_eps); precc check --json shows only those. */
enum { LOWER_AMAX_EPS = -1 };
bool lower_cast_uses(const Cast *c, Gemm g, int k);

#endif
