/*
 * recipe_parse.c — walk the tables a recipe built into Settings, Rules and
 * the TrainingPolicy: every key known, every value of the right type and
 * range, every error at the line where the key or value is written.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>
#include "recipe.h"
#include "sandbox.h"
#include "recipe_lua.h"

/* ---- value checks -------------------------------------------------------- */

static const char *
typename_of(lua_State *L, int v)
{
	return rc_is_obj(L, v, "scaling") ? "scaling" : rc_is_obj(L, v, "accum") ? "accumulation"
	     : rc_is_obj(L, v, "loss") ? "loss scaling" : luaL_typename(L, v);
}

/* ' ("long")' for strings, ' (3.5)' for numbers, "" otherwise. */
static const char *
shown(lua_State *L, int v)
{
	if (lua_type(L, v) == LUA_TSTRING)
		return lua_pushfstring(L, " (\"%s\")", lua_tostring(L, v));
	if (lua_type(L, v) == LUA_TNUMBER)
		return lua_pushfstring(L, " (%s)", luaL_tolstring(L, v, NULL));
	return "";
}

static int
choose(Loader *ld, int line, const char *what, const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (names[i] && !strcmp(s, names[i]))
			return i;
	const char *near = suggest(s, names, n), *fam = format_family_hint(s);
	if (fam && !strcmp(what, "format"))
		return fail(ld, line, "unknown format '%s': precc names formats by their bits, "
		            "write %s", s, fam);
	luaL_Buffer b;
	luaL_buffinit(ld->sb->L, &b);
	for (int i = 0, first = 1; i < n; i++)
		if (names[i]) {
			if (!first)
				luaL_addstring(&b, ", ");
			luaL_addstring(&b, names[i]);
			first = 0;
		}
	luaL_pushresult(&b);
	if (near)
		return fail(ld, line, "unknown %s '%s' (did you mean '%s'?)", what, s, near);
	return fail(ld, line, "unknown %s '%s' (expected one of: %s)", what, s, lua_tostring(ld->sb->L, -1));
}

static int
want_enum(Loader *ld, int v, const char *key, int line, const char *what,
          const char *const *names, int n)
{
	lua_State *L = ld->sb->L;

	if (lua_type(L, v) != LUA_TSTRING)
		return fail(ld, line, "'%s' must be a string naming a %s, not a %s", key, what, typename_of(L, v));
	return choose(ld, line, what, lua_tostring(L, v), names, n);
}

/* A format name; HYBRID when allowed and written. */
static int
want_format(Loader *ld, int v, const char *key, int line, bool hybrid_ok)
{
	lua_State *L = ld->sb->L;
	const char *names[PRECC_NFORMAT + 1];

	if (lua_type(L, v) != LUA_TSTRING)
		return fail(ld, line, "'%s' must be a format name such as e4m3 or bf16, not a %s",
		            key, typename_of(L, v));
	const char *s = lua_tostring(L, v);
	if (!strcmp(s, "hybrid")) {
		if (!hybrid_ok)
			return fail(ld, line, "'hybrid' (e4m3 forward, e5m2 for grad_output) is a format for "
			            "a whole recipe or rule; here write e4m3 or e5m2");
		return HYBRID;
	}
	for (int f = 0; f < PRECC_NFORMAT; f++)
		names[f] = rc_format_names[f];
	names[PRECC_NFORMAT] = hybrid_ok ? "hybrid" : NULL;
	return choose(ld, line, "format", s, names, PRECC_NFORMAT + 1);
}

static int
operand_format(Loader *ld, int v, const char *key, int line, bool hybrid_ok)
{
	int f = want_format(ld, v, key, line, hybrid_ok);

	if (f == PRECC_E8M0)
		return fail(ld, line, "e8m0 is a scale format, not an operand format "
		            "(MX uses e8m0 scales: write scaling = mx)");
	return f;
}

static bool
want_bool(Loader *ld, int v, const char *key, int line)
{
	lua_State *L = ld->sb->L;

	if (lua_type(L, v) != LUA_TBOOLEAN)
		return fail(ld, line, "'%s' must be true or false, not a %s%s", key,
		            typename_of(L, v), shown(L, v));
	return lua_toboolean(L, v);
}

static long long
want_int(Loader *ld, int v, const char *key, int line, long long lo, long long hi)
{
	lua_State *L = ld->sb->L;
	int isint = 0;

	if (lua_type(L, v) != LUA_TNUMBER)
		return fail(ld, line, "'%s' must be an integer, not a %s%s", key, typename_of(L, v), shown(L, v));
	lua_Integer i = lua_tointegerx(L, v, &isint);
	if (!isint)
		return fail(ld, line, "'%s' must be an integer, not %s", key, luaL_tolstring(L, v, NULL));
	if (i < lo || i > hi)
		return fail(ld, line, "'%s' must be between %I and %I, not %I", key, (lua_Integer)lo,
		            (lua_Integer)hi, i);
	return i;
}

/* A number in [lo, hi] (open at lo when lo_open). */
static double
want_num(Loader *ld, int v, const char *key, int line, double lo, bool lo_open, double hi)
{
	lua_State *L = ld->sb->L;

	if (lua_type(L, v) != LUA_TNUMBER)
		return fail(ld, line, "'%s' must be a number, not a %s%s", key, typename_of(L, v), shown(L, v));
	double x = lua_tonumber(L, v);
	if (!isfinite(x) || x < lo || (lo_open && x == lo) || x > hi) {
		char range[96];
		if (isinf(hi))
			snprintf(range, sizeof range, "%s %g", lo_open ? "above" : "at least", lo);
		else
			snprintf(range, sizeof range, "%s %g and at most %g", lo_open ? "above" : "at least", lo, hi);
		return fail(ld, line, "'%s' must be %s, not %s", key, range, luaL_tolstring(L, v, NULL));
	}
	return x;
}

static void
unknown_key(Loader *ld, int line, const char *k, const char *what, const char *const *keys, int n)
{
	const char *near = suggest(k, keys, n);

	if (near)
		fail(ld, line, "unknown key '%s' in %s (did you mean '%s'?)", k, what, near);
	fail(ld, line, "unknown key '%s' in %s", k, what);
}

static const char *
key_of(Loader *ld, const Tab *t)
{
	lua_State *L = ld->sb->L;

	if (lua_type(L, -2) == LUA_TSTRING)
		return lua_tostring(L, -2);
	fail(ld, t->line, "unexpected positional value in %s: write key = value", t->what);
	return NULL;
}

/* A value that must be a plain table: returns its Tab. */
static Tab
sub_table(Loader *ld, const Tab *t, const char *key, int v, const char *what)
{
	int kt = src_find_key(&ld->src, t->open, key);
	Tab s = {v, src_value_table(&ld->src, kt), src_line(&ld->src, kt, t->line), what};

	if (lua_type(ld->sb->L, v) != LUA_TTABLE || rc_is_obj(ld->sb->L, v, "scaling") ||
	    rc_is_obj(ld->sb->L, v, "rule"))
		fail(ld, s.line, "'%s' must be a table { ... }, not a %s", key, typename_of(ld->sb->L, v));
	return s;
}

/* An object's options as a Tab (idx 0 when it has none). */
Tab
rc_obj_tab(Loader *ld, int v, int line, const char *what)
{
	lua_State *L = ld->sb->L;
	Tab t = {0, rc_obj_int(L, v, "open"), rc_obj_int(L, v, "line"), what};

	if (!t.line)
		t.line = line;
	lua_getfield(L, v, "opts");
	if (lua_isnil(L, -1))
		lua_pop(L, 1);     /* leaves the stack as it was */
	else
		t.idx = lua_gettop(L);   /* caller pops with the object */
	return t;
}

/* ---- settings ------------------------------------------------------------ */

#define PUT(cs, BIT, field, val, ln) \
	((cs)->set |= (BIT), (cs)->v.field = (val), (cs)->line[rc_bit(BIT)] = (ln))
#define PUTG(set, lines, g, BIT, field, val, ln) \
	(*(set) |= (BIT), (g)->field = (val), (lines)[rc_bit(BIT)] = (ln))

static const char *const cast_keys[] = {
	"format", "scaling", "margin", "pow2", "amax_eps", "round", "saturate",
	"nonfinite", "history", "algo", "scale_format",
	/* recipe_sem.c's knob_keys */
	"amax_nan", "zero_amax", "nonfinite_scale", "scale_form", "quantize",
	"mx_round", "nvfp4_scale", "pow2_round",
};
static const char *const round_names[] = {"rne", "rz", NULL, "sr"};
static const char *const nonfinite_names[NNONFINITE] = {"keep_scale", "skip_step", "error"};
static const char *const algo_names[] = {"max", "most_recent"};

static void scaling_value(Loader *, const Tab *, int v, int line, CastSpec *);

/* One cast field; false if k is not one. Settings `top` allows hybrid. */
static bool
cast_key(Loader *ld, const Tab *t, const char *k, int v, CastSpec *cs, Settings *top)
{
	int line = rc_keyline(ld, t, k);

	if (!strcmp(k, "format")) {
		int f = operand_format(ld, v, k, line, top != NULL);
		if (f == HYBRID) {
			top->hybrid = true;
			cs->line[rc_bit(SET_FORMAT)] = line;
		} else {
			PUT(cs, SET_FORMAT, format, f, line);
		}
	} else if (!strcmp(k, "scaling")) {
		scaling_value(ld, t, v, line, cs);
	} else if (!strcmp(k, "margin")) {
		PUT(cs, SET_MARGIN, margin, want_int(ld, v, k, line, 0, 32), line);
	} else if (!strcmp(k, "pow2")) {
		PUT(cs, SET_POW2, pow2_scale, want_bool(ld, v, k, line), line);
	} else if (!strcmp(k, "amax_eps")) {
		PUT(cs, SET_EPS, amax_eps, want_num(ld, v, k, line, 0, false, 1), line);
	} else if (!strcmp(k, "round")) {
		PUT(cs, SET_ROUND, round, want_enum(ld, v, k, line, "rounding", round_names, 4), line);
	} else if (!strcmp(k, "saturate")) {
		PUT(cs, SET_SATURATE, saturate, want_bool(ld, v, k, line), line);
	} else if (!strcmp(k, "nonfinite")) {
		PUT(cs, SET_NONFINITE, nonfinite,
		    want_enum(ld, v, k, line, "nonfinite policy", nonfinite_names, NNONFINITE), line);
	} else if (!strcmp(k, "history")) {
		PUT(cs, SET_HISTORY, history, want_int(ld, v, k, line, 1, 1 << 20), line);
	} else if (!strcmp(k, "algo")) {
		PUT(cs, SET_AMAX_ALGO, amax_algo, want_enum(ld, v, k, line, "amax algorithm", algo_names, 2), line);
	} else if (!strcmp(k, "scale_format")) {
		int f = want_format(ld, v, k, line, false);
		if (f != PRECC_FP32 && f != PRECC_E8M0 && f != PRECC_E4M3)
			fail(ld, line, "'scale_format' must be fp32, e8m0 or e4m3, not %s", rc_fmtname(f));
		PUT(cs, SET_SCALE_FORMAT, scale_format, f, line);
	} else if (!rc_knob_key(ld, k, v, line, &cs->v.knobs)) {
		return false;
	}
	return true;
}

/* Which option keys each scaling takes (besides positional block dims). */
static const char *const opt_keys[NSCALING][7] = {
	[SCALING_NONE] = {0},
	[SCALING_CURRENT] = {"margin", "pow2", "amax_eps", "scale_format"},
	[SCALING_DELAYED] = {"history", "algo", "margin", "pow2", "amax_eps", "scale_format"},
	[SCALING_ROWWISE] = {"margin", "pow2", "amax_eps", "scale_format"},
	[SCALING_BLOCK] = {"margin", "pow2", "amax_eps", "scale_format"},
	[SCALING_MX] = {"scale_format"},
	[SCALING_NVFP4] = {"amax_eps", "scale_format"},
};

static bool
takes(ScalingKind s, const char *k)
{
	for (int i = 0; i < 7 && opt_keys[s][i]; i++)
		if (!strcmp(opt_keys[s][i], k))
			return true;
	return false;
}

/* blockwise{1, 128} / nvfp4{16, 16}: two positive dims. */
static void
block_dims(Loader *ld, const Tab *o, const char *name, int dims[2])
{
	lua_State *L = ld->sb->L;

	for (int i = 0; i < 2; i++) {
		lua_rawgeti(L, o->idx, i + 1);
		int line = src_line(&ld->src, src_find_item(&ld->src, o->open, i), o->line);
		if (lua_isnil(L, -1))
			fail(ld, o->line, "%s needs tile dims rows x cols, e.g. %s{1, 128}", name, name);
		dims[i] = (int)want_int(ld, lua_gettop(L), i ? "block cols" : "block rows", line, INT32_MIN, INT32_MAX);
		if (dims[i] <= 0)
			fail(ld, line, "%s block %s must be positive, not %d", name, i ? "cols" : "rows", dims[i]);
		lua_pop(L, 1);
	}
	lua_rawgeti(L, o->idx, 3);
	if (!lua_isnil(L, -1))
		fail(ld, o->line, "%s takes two dims (rows, cols), not more", name);
	lua_pop(L, 1);
}

static void
scaling_value(Loader *ld, const Tab *t, int v, int line, CastSpec *cs)
{
	lua_State *L = ld->sb->L;
	static const char *const names[] = {
		"none", "current", "tensorwise", "delayed", "rowwise", "axiswise", "blockwise", "mx", "nvfp4",
	};
	static const ScalingKind kinds[] = {
		SCALING_NONE, SCALING_CURRENT, SCALING_CURRENT, SCALING_DELAYED, SCALING_ROWWISE,
		SCALING_ROWWISE, SCALING_BLOCK, SCALING_MX, SCALING_NVFP4,
	};
	int top = lua_gettop(L);
	ScalingKind s;
	const char *name;
	Tab o = {0, -1, line, NULL};
	luaL_checkstack(L, 16, NULL);

	if (lua_type(L, v) == LUA_TSTRING) {
		name = lua_tostring(L, v);
		s = kinds[choose(ld, line, "scaling", name, names, COUNT(names))];
	} else if (rc_is_obj(L, v, "scaling")) {
		name = rc_obj_str(L, v, "name");
		s = kinds[choose(ld, line, "scaling", rc_obj_str(L, v, "kind"), names, COUNT(names))];
		o = rc_obj_tab(ld, v, line, lua_pushfstring(L, "%s{...}", name));
	} else {
		fail(ld, line, "'scaling' must be one of current, delayed{...}, rowwise, blockwise{rows, cols}, "
		     "mx or nvfp4, not a %s%s", typename_of(L, v), shown(L, v));
		return;
	}
	static const int implied[NSCALING][2] = {
		[SCALING_ROWWISE] = {1, 0}, [SCALING_MX] = {1, 32}, [SCALING_NVFP4] = {1, 16},
	};
	PUT(cs, SET_SCALING, scaling, s, line);
	if (s != SCALING_BLOCK) {
		cs->set |= SET_BLOCK;
		memcpy(cs->v.block, implied[s], sizeof cs->v.block);
		cs->line[rc_bit(SET_BLOCK)] = line;
	}
	PUT(cs, SET_SCALE_FORMAT, scale_format,
	    s == SCALING_MX ? PRECC_E8M0 : s == SCALING_NVFP4 ? PRECC_E4M3 : PRECC_FP32, line);
	if (!o.idx) {
		lua_settop(L, top);
		return;
	}
	if (s == SCALING_BLOCK || s == SCALING_NVFP4) {
		lua_rawgeti(L, o.idx, 1);
		bool has = !lua_isnil(L, -1);
		lua_pop(L, 1);
		if (has) {
			int d[2];
			block_dims(ld, &o, name, d);
			if (s == SCALING_NVFP4 && !(d[1] == 16 && (d[0] == 1 || d[0] == 16)))
				fail(ld, o.line, "nvfp4 blocks are 1x16 (or 16x16 for weights), not %dx%d", d[0], d[1]);
			cs->set |= SET_BLOCK;
			memcpy(cs->v.block, d, sizeof d);
			cs->line[rc_bit(SET_BLOCK)] = o.line;
		}
	}
	lua_pushnil(L);
	while (lua_next(L, o.idx)) {
		if (lua_type(L, -2) == LUA_TNUMBER && (s == SCALING_BLOCK || s == SCALING_NVFP4)) {
			lua_pop(L, 1);
			continue;
		}
		if (lua_type(L, -2) != LUA_TSTRING)
			fail(ld, o.line, "%s takes no positional values", name);
		const char *k = lua_tostring(L, -2);
		int kl = rc_keyline(ld, &o, k);
		if (takes(s, k)) {
			cast_key(ld, &o, k, lua_gettop(L), cs, NULL);
		} else {
			for (int other = 0; other < NSCALING; other++)
				if (takes(other, k))
					fail(ld, kl, "'%s' does not apply to %s scaling%s", k, rc_scaling_names[s],
					     !strcmp(k, "history") || !strcmp(k, "algo")
					         ? " (only delayed scaling keeps an amax history)" : "");
			unknown_key(ld, kl, k, o.what, opt_keys[s], 7);
		}
		lua_pop(L, 1);
	}
	lua_settop(L, top);
}

static const char *const gemm_keys[] = {"accumulate", "promote_every", "accum_bits", "output"};

static bool
gemm_key(Loader *ld, const Tab *t, const char *k, int v, unsigned *set, GemmPolicy *g, int *lines)
{
	lua_State *L = ld->sb->L;
	int line = rc_keyline(ld, t, k);
	luaL_checkstack(L, 16, NULL);

	if (!strcmp(k, "accumulate")) {
		static const char *const names[] = {"fp32", "split", "fast", "promote"};
		static const Accum kinds[] = {ACCUM_FP32, ACCUM_FP32, ACCUM_FAST, ACCUM_PROMOTE};
		if (lua_type(L, v) == LUA_TSTRING) {
			PUTG(set, lines, g, SET_ACCUM, accum, kinds[choose(ld, line, "accumulation",
			     lua_tostring(L, v), names, 4)], line);
		} else if (rc_is_obj(L, v, "accum")) {
			int top = lua_gettop(L);
			bool fast = !strcmp(rc_obj_str(L, v, "kind"), "fast");
			const char *key = fast ? "bits" : "every";
			Tab o = rc_obj_tab(ld, v, line, fast ? "fast{...}" : "promote{...}");
			PUTG(set, lines, g, SET_ACCUM, accum, fast ? ACCUM_FAST : ACCUM_PROMOTE, line);
			if (o.idx) {
				lua_pushnil(L);
				while (lua_next(L, o.idx)) {
					bool pos = lua_type(L, -2) == LUA_TNUMBER && lua_tointeger(L, -2) == 1;
					const char *kk = pos ? key : lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
					int kl = pos ? o.line : rc_keyline(ld, &o, kk);
					if (strcmp(kk, key))
						unknown_key(ld, kl, kk, o.what, &key, 1);
					if (fast)
						PUTG(set, lines, g, SET_ACCUM_BITS, accum_bits,
						     want_int(ld, lua_gettop(L), "bits", kl, 1, 23), kl);
					else
						PUTG(set, lines, g, SET_PROMOTE, promote_every,
						     want_int(ld, lua_gettop(L), "every", kl, 1, 1 << 20), kl);
					lua_pop(L, 1);
				}
			}
			lua_settop(L, top);
		} else {
			fail(ld, line, "'accumulate' must be fp32, \"split\", \"fast\", fast{bits = N} or "
			     "promote{every = N}, not a %s%s", typename_of(L, v), shown(L, v));
		}
	} else if (!strcmp(k, "promote_every")) {
		PUTG(set, lines, g, SET_PROMOTE, promote_every, want_int(ld, v, k, line, 1, 1 << 20), line);
	} else if (!strcmp(k, "accum_bits")) {
		PUTG(set, lines, g, SET_ACCUM_BITS, accum_bits, want_int(ld, v, k, line, 1, 23), line);
	} else if (!strcmp(k, "output")) {
		if (lua_type(L, v) == LUA_TSTRING) {
			PUTG(set, lines, g, SET_OUT_FORMAT, out_format, operand_format(ld, v, k, line, false), line);
			return true;
		}
		static const char *const keys[] = {"format", "bias", "amax", "accumulate"};
		Tab o = sub_table(ld, t, k, v, "output");
		lua_pushnil(L);
		while (lua_next(L, o.idx)) {
			const char *kk = key_of(ld, &o);
			int kl = rc_keyline(ld, &o, kk), vi = lua_gettop(L);
			if (!strcmp(kk, "format"))
				PUTG(set, lines, g, SET_OUT_FORMAT, out_format, operand_format(ld, vi, kk, kl, false), kl);
			else if (!strcmp(kk, "bias"))
				PUTG(set, lines, g, SET_BIAS, bias, want_bool(ld, vi, kk, kl), kl);
			else if (!strcmp(kk, "amax") && lua_type(L, vi) == LUA_TTABLE) {
				/* amax = {1, 128}: per block of the output */
				Tab bt = sub_table(ld, &o, kk, vi, "amax");
				int dims[2];
				block_dims(ld, &bt, "amax", dims);
				PUTG(set, lines, g, SET_OUT_AMAX, out_amax, true, kl);
				g->out_amax_block[0] = dims[0];
				g->out_amax_block[1] = dims[1];
			} else if (!strcmp(kk, "amax")) {
				PUTG(set, lines, g, SET_OUT_AMAX, out_amax, want_bool(ld, vi, kk, kl), kl);
				g->out_amax_block[0] = g->out_amax_block[1] = 0;
			} else if (!strcmp(kk, "accumulate"))
				PUTG(set, lines, g, SET_OUT_ACCUMULATE, out_accumulate, want_bool(ld, vi, kk, kl), kl);
			else
				unknown_key(ld, kl, kk, "output", keys, COUNT(keys));
			lua_pop(L, 1);
		}
	} else {
		return false;
	}
	return true;
}

/* A role table, or a format shorthand: weight = bf16. */
static void
role_table(Loader *ld, const Tab *t, const char *key, int v, CastSpec *cs, const char *what)
{
	lua_State *L = ld->sb->L;
	luaL_checkstack(L, 16, NULL);

	if (lua_type(L, v) == LUA_TSTRING) {
		int line = rc_keyline(ld, t, key);
		PUT(cs, SET_FORMAT, format, operand_format(ld, v, key, line, false), line);
		return;
	}
	Tab s = sub_table(ld, t, key, v, what);
	lua_pushnil(L);
	while (lua_next(L, s.idx)) {
		const char *k = key_of(ld, &s);
		if (!cast_key(ld, &s, k, lua_gettop(L), cs, NULL))
			unknown_key(ld, rc_keyline(ld, &s, k), k, what, cast_keys, COUNT(cast_keys));
		lua_pop(L, 1);
	}
}

static int
index_of(const char *k, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(k, names[i]))
			return i;
	return -1;
}

static void
gemm_table(Loader *ld, const Tab *t, Gemm g, int v, GemmSpec *gs)
{
	lua_State *L = ld->sb->L;
	const char *keys[COUNT(cast_keys) + COUNT(gemm_keys) + 2];
	int nk = 0;
	luaL_checkstack(L, 16, NULL);

	if (lua_type(L, v) == LUA_TSTRING) {
		role_table(ld, t, rc_gemm_names[g], v, &gs->all, rc_gemm_names[g]);
		return;
	}
	for (int i = 0; i < COUNT(cast_keys); i++)
		keys[nk++] = cast_keys[i];
	for (int i = 0; i < COUNT(gemm_keys); i++)
		keys[nk++] = gemm_keys[i];
	keys[nk++] = rc_role_names[rc_gemm_roles[g][0]];
	keys[nk++] = rc_role_names[rc_gemm_roles[g][1]];
	Tab s = sub_table(ld, t, rc_gemm_names[g], v, rc_gemm_names[g]);
	lua_pushnil(L);
	while (lua_next(L, s.idx)) {
		const char *k = key_of(ld, &s);
		int vi = lua_gettop(L), r = index_of(k, rc_role_names, NROLE);
		if (r >= 0) {
			if (r != (int)rc_gemm_roles[g][0] && r != (int)rc_gemm_roles[g][1])
				fail(ld, rc_keyline(ld, &s, k), "%s has no %s operand (%s: %s)", rc_gemm_names[g], k,
				     rc_gemm_names[g], rc_gemm_formula[g]);
			role_table(ld, &s, k, vi, &gs->role[r], lua_pushfstring(L, "%s.%s", rc_gemm_names[g], k));
		} else if (!cast_key(ld, &s, k, vi, &gs->all, NULL) &&
		           !gemm_key(ld, &s, k, vi, &gs->set, &gs->v, gs->line)) {
			unknown_key(ld, rc_keyline(ld, &s, k), k, rc_gemm_names[g], keys, nk);
		}
		lua_settop(L, vi - 1);
	}
}

static void
fallback_value(Loader *ld, const Tab *t, int v, Settings *s)
{
	lua_State *L = ld->sb->L;
	int line = rc_keyline(ld, t, "fallback");

	if (lua_type(L, v) != LUA_TSTRING)
		fail(ld, line, "'fallback' must be a high-precision format (bf16, fp16, tf32, fp32), "
		     "\"pad\" or \"error\", not a %s", typename_of(L, v));
	const char *w = lua_tostring(L, v);
	s->has_fallback = true;
	s->fallback_loc = (SrcLoc){ld->r->path, line};
	s->fallback_format = PRECC_BF16;
	if (!strcmp(w, "pad")) {
		s->fallback = FALLBACK_PAD;
	} else if (!strcmp(w, "error")) {
		s->fallback = FALLBACK_ERROR;
	} else {
		const char *names[] = {"fp32", "tf32", "fp16", "bf16", "pad", "error"};
		int f = precc_format_by_name(w);
		if (f < 0)
			choose(ld, line, "fallback", w, names, COUNT(names));
		if (f > PRECC_BF16)
			fail(ld, line, "fallback format %s is not high precision: fall back to bf16, fp16, "
			     "tf32 or fp32, or write \"pad\" or \"error\"", w);
		s->fallback = FALLBACK_HIGH;
		s->fallback_format = f;
	}
}

static void training_table(Loader *, const Tab *, int v, TrainingPolicy *);
static void rules_list(Loader *, const Tab *, int v);

/* The keys of a recipe's top level (and, without the last four, a rule's). */
static const char *const level_keys[] = {
	"format", "scaling", "margin", "pow2", "amax_eps", "round", "saturate",
	"nonfinite", "history", "algo", "scale_format",
	"accumulate", "promote_every", "accum_bits", "output",
	"input", "weight", "grad_output", "fprop", "dgrad", "wgrad", "fallback",
	"reason", "name", "description", "rules", "training",
};

/* A recipe's top level (rec != NULL) or a rule's table (label != NULL). */
void
rc_settings_table(Loader *ld, const Tab *t, Settings *s, Recipe *rec, char **label)
{
	lua_State *L = ld->sb->L;
	const char *keys[COUNT(level_keys)];
	int nk = 0;
	luaL_checkstack(L, 16, NULL);

	for (int i = 0; i < COUNT(level_keys); i++)
		if (rec ? strcmp(level_keys[i], "reason") : i < COUNT(level_keys) - 4)
			keys[nk++] = level_keys[i];
	s->line = t->line;
	lua_pushnil(L);
	while (lua_next(L, t->idx)) {
		const char *k = key_of(ld, t);
		int vi = lua_gettop(L), line = rc_keyline(ld, t, k), r, g;
		if (cast_key(ld, t, k, vi, &s->all, s) ||
		    gemm_key(ld, t, k, vi, &s->gemm_set, &s->gemm_all, s->gemm_line)) {
		} else if ((r = index_of(k, rc_role_names, NROLE)) >= 0) {
			role_table(ld, t, k, vi, &s->role[r], k);
		} else if ((g = index_of(k, rc_gemm_names, NGEMM)) >= 0) {
			gemm_table(ld, t, g, vi, &s->gemm[g]);
		} else if (!strcmp(k, "fallback")) {
			fallback_value(ld, t, vi, s);
		} else if (label && !strcmp(k, "reason")) {
			if (lua_type(L, vi) != LUA_TSTRING)
				fail(ld, line, "'reason' must be a string, not a %s", typename_of(L, vi));
			free(*label);
			*label = xstrdup(rc_text(ld, line, "'reason'", vi, false));
		} else if (rec && (!strcmp(k, "name") || !strcmp(k, "description"))) {
			if (lua_type(L, vi) != LUA_TSTRING)
				fail(ld, line, "'%s' must be a string, not a %s", k, typename_of(L, vi));
			char **p = !strcmp(k, "name") ? &rec->name : &rec->description;
			free(*p);
			/* a description may have lines */
			*p = xstrdup(rc_text(ld, line, *k == 'd' ? "'description'" : "'name'", vi, *k == 'd'));
		} else if (rec && !strcmp(k, "rules")) {
			rules_list(ld, t, vi);
		} else if (rec && !strcmp(k, "training")) {
			training_table(ld, t, vi, &rec->training);
		} else if (!rec && (!strcmp(k, "rules") || !strcmp(k, "training") ||
		                    !strcmp(k, "name") || !strcmp(k, "description"))) {
			fail(ld, line, "'%s' belongs at the top of the recipe, not inside a rule", k);
		} else {
			unknown_key(ld, line, k, rec ? "recipe" : "rule", keys, nk);
		}
		lua_settop(L, vi - 1);
	}
}

/* ---- rules ----------------------------------------------------------------- */

static Rule *
new_rule(Recipe *r, int line)
{
	r->rules = xrealloc(r->rules, (r->nrules + 1) * sizeof *r->rules);
	Rule *u = &r->rules[r->nrules++];
	memset(u, 0, sizeof *u);
	u->predicate_ref = LUA_NOREF;
	u->loc = (SrcLoc){r->path, line};
	return u;
}

/* Names, descriptions, reasons and patterns reach manifest.json, --json
 * and generated C: refuse what is not plain text where it is written. */
const char *
rc_text(Loader *ld, int line, const char *what, int v, bool lines)
{
	size_t n;
	const char *s = lua_tolstring(ld->sb->L, v, &n);
	char why[64];

	if (text_fault(s, n, lines, why, sizeof why))
		fail(ld, line, "%s: %s", what, why);
	return s;
}

static void
check_pattern(Loader *ld, const char *pat, int line)
{
	lua_State *L = ld->sb->L;

	lua_getfield(L, LUA_REGISTRYINDEX, REG_FIND);
	lua_pushliteral(L, "");
	lua_pushstring(L, pat);
	if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
		const char *m = lua_tostring(L, -1);
		fail(ld, line, "bad rule pattern \"%s\": %s", pat, m ? m : "invalid");
	}
}

static void
rules_list(Loader *ld, const Tab *t, int v)
{
	lua_State *L = ld->sb->L;
	Recipe *r = ld->r;
	int kt = src_find_key(&ld->src, t->open, "rules");
	Tab lt = {v, src_value_table(&ld->src, kt), src_line(&ld->src, kt, t->line), "rules"};
	luaL_checkstack(L, 16, NULL);

	if (lua_type(L, v) != LUA_TTABLE || rc_is_obj(L, v, "rule"))
		fail(ld, lt.line, "'rules' must be a list { rule \"pattern\" { ... }, ... }, not a %s",
		     typename_of(L, v));
	lua_Integer n = luaL_len(L, v);
	lua_pushnil(L);
	while (lua_next(L, v)) {
		if (lua_type(L, -2) != LUA_TNUMBER)
			fail(ld, lt.line, "'rules' is a list of rule \"pattern\" { ... }; '%s' is not one",
			     luaL_tolstring(L, -2, NULL));
		lua_pop(L, 1);
	}
	for (lua_Integer i = 1; i <= n; i++) {
		int top = lua_gettop(L);
		lua_rawgeti(L, v, i);
		int o = lua_gettop(L);
		int item = src_line(&ld->src, src_find_item(&ld->src, lt.open, (int)i - 1), lt.line);
		if (!rc_is_obj(L, o, "rule"))
			fail(ld, item, "rules[%d] must be made with rule \"pattern\" { ... }, not a %s",
			     (int)i, lua_type(L, o) == LUA_TFUNCTION ? "function (is its { ... } missing?)"
			     : typename_of(L, o));
		Tab st = rc_obj_tab(ld, o, item, "rule");
		int line = st.line;
		lua_getfield(L, o, "match");
		int m = lua_gettop(L);
		if (lua_isnil(L, m)) {           /* rule { match = ..., ... } */
			lua_getfield(L, st.idx, "match");
			lua_replace(L, m);
			if (lua_isnil(L, m))
				fail(ld, line, "rule needs a match: rule \"pattern\" { ... } or rule(function(layer) ... end) { ... }");
			lua_pushnil(L);
			lua_setfield(L, st.idx, "match");
		}
		/* The rule is in the recipe before its table is read, so the
		 * recipe owns its label ('reason') if anything below fails. */
		int first = r->nrules;
		new_rule(r, line);
		rc_settings_table(ld, &st, &r->rules[first].settings, NULL, &r->rules[first].label);
		Rule *u = &r->rules[first];
		char *reason = u->label;
		if (lua_type(L, m) == LUA_TFUNCTION) {
			if (!reason)
				u->label = xstrdup(lua_pushfstring(L, "rule at line %d", line));
			lua_pushvalue(L, m);
			u->predicate_ref = luaL_ref(L, LUA_REGISTRYINDEX);
		} else if (lua_type(L, m) == LUA_TSTRING || rc_is_pattern_list(L, m)) {
			int np = lua_type(L, m) == LUA_TSTRING ? 1 : (int)luaL_len(L, m);
			for (int j = 1; j <= np; j++) {
				if (np > 1 || lua_type(L, m) == LUA_TTABLE)
					lua_rawgeti(L, m, j);
				else
					lua_pushvalue(L, m);
				const char *pat = rc_text(ld, line, "rule pattern", -1, false);
				check_pattern(ld, pat, line);
				if (j > 1) {
					u = new_rule(r, line);
					u->settings = r->rules[first].settings;
				} else {
					u = &r->rules[first];
				}
				u->pattern = xstrdup(pat);
				if (j > 1 || !reason)
					u->label = xstrdup(reason ? reason : pat);
				lua_pop(L, 1);
			}
		} else {
			fail(ld, line, "a rule matches a Lua pattern string, a list of them, or a function(layer), "
			     "not a %s", typename_of(L, m));
		}
		lua_settop(L, top);
	}
}

/* ---- training ---------------------------------------------------------------- */

static void
loss_value(Loader *ld, const Tab *t, int v, TrainingPolicy *tp)
{
	lua_State *L = ld->sb->L;
	int line = rc_keyline(ld, t, "loss_scale"), top = lua_gettop(L);
	luaL_checkstack(L, 16, NULL);

	if (lua_type(L, v) == LUA_TNUMBER) {
		tp->loss_scale = LOSS_STATIC;
		tp->loss_scale_init = want_num(ld, v, "loss_scale", line, 0, true, HUGE_VAL);
		return;
	}
	if (lua_type(L, v) == LUA_TSTRING) {
		static const char *const names[] = {"none", "static", "dynamic"};
		int k = choose(ld, line, "loss scaling", lua_tostring(L, v), names, 3);
		if (k == LOSS_STATIC)
			fail(ld, line, "static loss scaling needs its scale: loss_scale = static(1024)");
		tp->loss_scale = k;
		return;
	}
	if (!rc_is_obj(L, v, "loss"))
		fail(ld, line, "'loss_scale' must be none, a number, static(S) or dynamic{...}, not a %s",
		     typename_of(L, v));
	bool dyn = !strcmp(rc_obj_str(L, v, "kind"), "dynamic");
	Tab o = rc_obj_tab(ld, v, line, dyn ? "dynamic{...}" : "static(...)");
	tp->loss_scale = dyn ? LOSS_DYNAMIC : LOSS_STATIC;
	if (!o.idx) {
		if (!dyn)
			fail(ld, line, "static loss scaling needs its scale: loss_scale = static(1024)");
		lua_settop(L, top);
		return;
	}
	static const char *const dkeys[] = {"init", "growth", "backoff", "interval"};
	static const char *const skeys[] = {"scale"};
	bool seen = false;
	lua_pushnil(L);
	while (lua_next(L, o.idx)) {
		int vi = lua_gettop(L);
		bool pos = lua_type(L, -2) == LUA_TNUMBER && lua_tointeger(L, -2) == 1;
		const char *k = pos ? (dyn ? "init" : "scale") : lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
		int kl = pos ? o.line : rc_keyline(ld, &o, k);
		if (!strcmp(k, dyn ? "init" : "scale")) {
			tp->loss_scale_init = want_num(ld, vi, k, kl, 0, true, HUGE_VAL);
			seen = true;
		} else if (dyn && !strcmp(k, "growth")) {
			tp->growth_factor = want_num(ld, vi, k, kl, 1, true, HUGE_VAL);
		} else if (dyn && !strcmp(k, "backoff")) {
			tp->backoff_factor = want_num(ld, vi, k, kl, 0, true, 1);
			if (tp->backoff_factor >= 1)
				fail(ld, kl, "'backoff' must be below 1, not %s", luaL_tolstring(L, vi, NULL));
		} else if (dyn && !strcmp(k, "interval")) {
			tp->growth_interval = want_int(ld, vi, k, kl, 1, INT32_MAX);
		} else if (!dyn && index_of(k, dkeys, 4) >= 0) {
			fail(ld, kl, "'%s' applies to dynamic loss scaling, not static", k);
		} else {
			unknown_key(ld, kl, k, o.what, dyn ? dkeys : skeys, dyn ? 4 : 1);
		}
		lua_settop(L, vi - 1);
	}
	if (!dyn && !seen)
		fail(ld, o.line, "static loss scaling needs its scale: loss_scale = static(1024)");
	lua_settop(L, top);
}

static void
training_table(Loader *ld, const Tab *t, int v, TrainingPolicy *tp)
{
	lua_State *L = ld->sb->L;
	static const char *const keys[] = {"loss_scale", "master_weights", "optimizer_state", "stochastic_rounding"};
	Tab s = sub_table(ld, t, "training", v, "training");
	luaL_checkstack(L, 16, NULL);

	lua_pushnil(L);
	while (lua_next(L, s.idx)) {
		const char *k = key_of(ld, &s);
		int vi = lua_gettop(L), line = rc_keyline(ld, &s, k);
		if (!strcmp(k, "loss_scale")) {
			loss_value(ld, &s, vi, tp);
		} else if (!strcmp(k, "master_weights") || !strcmp(k, "optimizer_state")) {
			int f = want_format(ld, vi, k, line, false);
			bool master = k[0] == 'm';
			if (f == PRECC_TF32 || f == PRECC_E8M0 || (master && rc_lowp(f)) ||
			    (!master && f != PRECC_E4M3 && f != PRECC_E5M2 && rc_lowp(f)))
				fail(ld, line, "'%s' must be fp32, bf16 or fp16%s, not %s", k,
				     master ? "" : " (or e4m3/e5m2 for 8-bit optimizer states)", rc_fmtname(f));
			if (master)
				tp->master_weights = f;
			else
				tp->optimizer_state = f;
		} else if (!strcmp(k, "stochastic_rounding")) {
			tp->stochastic_round_updates = want_bool(ld, vi, k, line);
		} else {
			unknown_key(ld, line, k, "training", keys, COUNT(keys));
		}
		lua_settop(L, vi - 1);
	}
}
