/*
 * recipe_sem.c — the reference knobs: the choices Transformer Engine,
 * torchao, DeepGEMM/DeepSeek-V3 and the OCP MX spec make differently
 * (docs/recipes.md "Reference knobs"). Parsing of one knob key, layering,
 * and the table of references `precc check` compares a cast with.
 */
#include <stdio.h>
#include <string.h>
#include <lauxlib.h>
#include "recipe.h"
#include "sandbox.h"
#include "recipe_lua.h"

const char *const knob_keys[NKNOB] = {
	"amax_nan", "zero_amax", "nonfinite_scale", "scale_form", "quantize",
	"mx_round", "nvfp4_scale", "pow2_round", "rht",
};

enum { MAXV = 4 };
static const char *const knob_values[NKNOB][MAXV] = {
	[KNOB_AMAX_NAN] = {"propagate", "ignore"},
	[KNOB_ZERO_AMAX] = {"one", "keep"},
	[KNOB_NONFINITE_SCALE] = {"keep", "one", "ieee"},
	[KNOB_SCALE_FORM] = {"fmax_over_amax", "amax_over_fmax"},
	[KNOB_QUANTIZE] = {"multiply", "divide"},
	[KNOB_MX_ROUND] = {"rceil_div", "rceil", "floor"},
	/* named after the kernel each reproduces (docs/numerics.md "NVFP4") */
	[KNOB_NVFP4_SCALE] = {"precc", "te2.14+", "te2.8-2.13", "torchao"},
	[KNOB_POW2_ROUND] = {"mask", "log2"},
	[KNOB_RHT] = {"none", "wgrad"},
};

const char *
knob_value_name(Knob k, int v)
{
	return (unsigned)k < NKNOB && v >= 0 && v < MAXV && knob_values[k][v]
	       ? knob_values[k][v] : "?";
}

void
knobs_layer(Knobs *dst, const Knobs *src)
{
	for (int k = 0; k < NKNOB; k++)
		if (src->set & (1u << k)) {
			dst->v[k] = src->v[k];
			dst->line[k] = src->line[k];
			dst->set |= 1u << k;
		}
}

bool
rc_knob_key(Loader *ld, const char *key, int v, int line, Knobs *kn)
{
	lua_State *L = ld->sb->L;
	int k, n = 0;

	for (k = 0; k < NKNOB && strcmp(key, knob_keys[k]); k++)
		;
	if (k == NKNOB)
		return false;
	while (n < MAXV && knob_values[k][n])
		n++;
	if (lua_type(L, v) != LUA_TSTRING) {
		char list[128] = "";
		for (int i = 0; i < n; i++)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"",
			         i ? ", " : "", knob_values[k][i]);
		fail(ld, line, "'%s' must be one of %s, not a %s", key, list, luaL_typename(L, v));
	}
	const char *s = lua_tostring(L, v);
	/* nvfp4_scale's old names: "te2.15" was TE >= 2.14's formula under
	 * another name, so it keeps working; "te2.14" was TE 2.8-2.13's
	 * rowwise-only formula, which no TE training kernel runs, and its old
	 * name now reads as TE 2.14's: refused, so no recipe silently
	 * changes numbers */
	if (k == KNOB_NVFP4_SCALE && !strcmp(s, "te2.15")) {
		warnf(ld->r->path, line, "nvfp4_scale \"te2.15\" is deprecated: TE's kernels use "
		      "that formula since 2.14; write \"te2.14+\"");
		s = "te2.14+";
	}
	if (k == KNOB_NVFP4_SCALE && !strcmp(s, "te2.14"))
		fail(ld, line, "nvfp4_scale 'te2.14' is no more: it was TE 2.8-2.13's rowwise-only "
		     "formula, which TE's training does not run (did you mean 'te2.14+', TE >= 2.14's "
		     "quantize_transpose kernel, or 'te2.8-2.13', that kernel before 2.14?)");
	for (int i = 0; i < n; i++)
		if (!strcmp(s, knob_values[k][i])) {
			kn->v[k] = (unsigned char)i;
			kn->line[k] = line;
			kn->set |= 1u << k;
			return true;
		}
	char list[128] = "";
	for (int i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
		         knob_values[k][i]);
	fail(ld, line, "unknown %s '%s' (expected one of: %s)", key, s, list);
	return false;
}

/* ---- the references ----------------------------------------------------
 * What each published recipe does, knob by knob (-1: the reference has no
 * such choice for this scaling). eps < 0: any amax_eps. */
typedef struct Reference {
	const char *name, *file;
	ScalingKind scaling;
	double eps;
	signed char v[NKNOB];
} Reference;

#define ANY -1
static const Reference refs[] = {
	{"TE DelayedScaling", "transformer_engine/common/recipe/delayed_scaling.cu",
	 SCALING_DELAYED, 0, {1, 1, 0, 0, 0, ANY, ANY, ANY, ANY}},
	{"TE Float8CurrentScaling", "transformer_engine/common/recipe/recipe_common.cuh",
	 SCALING_CURRENT, -1, {1, 0, 1, 0, 0, ANY, ANY, ANY, ANY}},
	{"torchao tensorwise", "torchao/float8/float8_utils.py",
	 SCALING_CURRENT, 1e-12, {0, 0, 2, 0, 0, ANY, ANY, ANY, ANY}},
	{"torchao rowwise", "torchao/float8/float8_utils.py",
	 SCALING_ROWWISE, 1e-12, {0, 0, 2, 0, 0, ANY, ANY, 1, ANY}},
	{"DeepGEMM per_token/per_block_cast_to_fp8", "deep_gemm/utils/math.py",
	 SCALING_BLOCK, 1e-4, {0, ANY, 2, 1, 0, ANY, ANY, ANY, ANY}},
	{"DeepSeek-V3 act_quant", "inference/kernel.py",
	 SCALING_BLOCK, 1e-4, {0, ANY, 2, 1, 1, ANY, ANY, ANY, ANY}},
	/* torchao 0.18 blockwise_fp8_training/kernels.py:509-512: amax
	 * clamped at EPS = 1e-12 (:32), fp64 448 / amax; tl.max's NaN
	 * handling is Triton's to choose */
	{"torchao blockwise", "torchao/prototype/blockwise_fp8_training/kernels.py",
	 SCALING_BLOCK, 1e-12, {ANY, ANY, 2, 0, 0, ANY, ANY, ANY, ANY}},
	/* the multiplier exp2f_rcp with its 2^-127 and NaN cases came in 2.13 */
	{"TE MXFP8BlockScaling >= 2.13", "transformer_engine/common/util/ptx.cuh",
	 SCALING_MX, -1, {1, ANY, ANY, ANY, 0, 1, ANY, ANY, ANY}},
	{"OCP MX v1.0", "OCP Microscaling Formats (MX) v1.0, section 6.3",
	 SCALING_MX, -1, {ANY, ANY, ANY, ANY, 0, 2, ANY, ANY, ANY}},
	{"TE NVFP4BlockScaling >= 2.14",
	 "transformer_engine/common/cast/nvfp4/quantize_transpose_nvfp4.cuh",
	 SCALING_NVFP4, 0, {1, ANY, ANY, ANY, 0, ANY, 1, ANY, 1}},
	{"TE NVFP4BlockScaling 2.8-2.13",
	 "transformer_engine/common/cast/nvfp4/quantize_transpose_nvfp4.cuh",
	 SCALING_NVFP4, 0, {1, ANY, ANY, ANY, 0, ANY, 2, ANY, 1}},
	{"torchao NVFP4", "torchao/prototype/mx_formats/nvfp4_tensor.py",
	 SCALING_NVFP4, 0, {0, ANY, 2, ANY, 0, ANY, 3, ANY, 0}},
};

/* Knobs a reference fixes that c differs in; the first one in *first. */
static int
mismatches(const Reference *r, const Cast *c, int *first)
{
	int n = 0;

	*first = -1;
	if (r->eps >= 0 && c->amax_eps != (float)r->eps)
		n++;
	for (int k = 0; k < NKNOB; k++)
		if (r->v[k] != ANY && r->v[k] != c->knobs.v[k]) {
			if (*first < 0)
				*first = k;
			n++;
		}
	return n;
}

/* A cast whose recipe wrote a knob is meant to follow a reference: say so
 * when its knobs match none of the references for its scaling, naming the
 * nearest one and the first knob that departs from it. Warned once per
 * line. */
void
rc_check_reference(Loader *ld, const Cast *c, const char *where, int dflt)
{
	static struct { char path[256]; int line; } warned[64];
	static int nwarned;
	const Reference *best = NULL;
	int bestn = 1 << 20, bestk = -1;

	if (!c->knobs.set)
		return;
	/* knobs the lowering has nowhere to put: a scale_inv of the form
	 * amax/fmax and a division exist for one-scale-per-block casts */
	for (int k = KNOB_SCALE_FORM; k <= KNOB_QUANTIZE; k++)
		if (c->knobs.v[k] && (c->scaling == SCALING_DELAYED || c->scaling == SCALING_MX
		                      || c->scaling == SCALING_NVFP4))
			fail(ld, c->knobs.line[k] ? c->knobs.line[k] : dflt, "%s: %s = %s is for current, "
			     "rowwise and blockwise scaling, not %s", where, knob_keys[k],
			     knob_value_name(k, c->knobs.v[k]), rc_scaling_names[c->scaling]);
	if (c->knobs.v[KNOB_RHT] && c->scaling != SCALING_NVFP4)
		fail(ld, c->knobs.line[KNOB_RHT] ? c->knobs.line[KNOB_RHT] : dflt, "%s: rht = %s is "
		     "for nvfp4 scaling, not %s", where, knob_value_name(KNOB_RHT, c->knobs.v[KNOB_RHT]),
		     rc_scaling_names[c->scaling]);
	if (c->knobs.v[KNOB_SCALE_FORM] && (c->pow2_scale || c->margin))
		fail(ld, c->knobs.line[KNOB_SCALE_FORM] ? c->knobs.line[KNOB_SCALE_FORM] : dflt,
		     "%s: scale_form = amax_over_fmax takes no %s (DeepGEMM's sf has none)", where,
		     c->pow2_scale ? "pow2" : "margin");
	if (c->scaling == SCALING_NVFP4 && c->knobs.v[KNOB_NVFP4_SCALE] == 3 /* torchao */
	    && (c->pow2_scale || c->margin))
		fail(ld, c->knobs.line[KNOB_NVFP4_SCALE] ? c->knobs.line[KNOB_NVFP4_SCALE] : dflt,
		     "%s: nvfp4_scale = torchao takes no %s (torchao's per_tensor_scale has none)",
		     where, c->pow2_scale ? "pow2" : "margin");
	for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
		int k, n;
		if (refs[i].scaling != c->scaling)
			continue;
		n = mismatches(&refs[i], c, &k);
		if (n == 0)
			return;
		if (n < bestn)
			best = &refs[i], bestn = n, bestk = k;
	}
	if (!best)
		return;
	int line = bestk >= 0 && c->knobs.line[bestk] ? c->knobs.line[bestk] : dflt;
	for (int i = 0; i < nwarned; i++)
		if (warned[i].line == line && !strcmp(warned[i].path, ld->r->path))
			return;
	if (nwarned < 64) {
		snprintf(warned[nwarned].path, sizeof warned[nwarned].path, "%s", ld->r->path);
		warned[nwarned++].line = line;
	}
	if (bestk >= 0)
		warnf(ld->r->path, line, "%s: %s scaling with %s = %s matches no reference; nearest is %s "
		      "(%s), which uses %s = %s", where, rc_scaling_names[c->scaling], knob_keys[bestk],
		      knob_value_name(bestk, c->knobs.v[bestk]), best->name, best->file,
		      knob_keys[bestk], knob_value_name(bestk, best->v[bestk]));
	else
		warnf(ld->r->path, line, "%s: %s scaling with amax_eps = %g matches no reference; "
		      "nearest is %s (%s), which uses amax_eps = %g", where,
		      rc_scaling_names[c->scaling], (double)c->amax_eps, best->name, best->file,
		      best->eps);
}
