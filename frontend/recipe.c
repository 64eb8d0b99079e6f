/*
 * recipe.c — the recipe language. Defines the names a recipe sees
 * (formats, the scaling / accumulation / loss-scale constructors, recipe,
 * rule), runs the file in the sandbox, and walks the tables it built into
 * a Recipe, checking every value and every combination. Errors point at
 * the line where the offending key or value is written. docs/recipes.md
 * is the user's manual of what is accepted here.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>
#include "recipe.h"
#include "sandbox.h"

#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))
#define HYBRID (-2)

static const char *const role_names[NROLE] = {"input", "weight", "grad_output"};
static const char *const gemm_names[NGEMM] = {"fprop", "dgrad", "wgrad"};
static const char *const scaling_names[NSCALING] = {
	"none", "current", "delayed", "rowwise", "blockwise", "mx", "nvfp4",
};
static const char *const accum_names[NACCUM] = {"fp32", "fast", "promote"};
static const Role gemm_roles[NGEMM][2] = {
	[GEMM_FPROP] = {ROLE_INPUT, ROLE_WEIGHT},
	[GEMM_DGRAD] = {ROLE_GRAD_OUTPUT, ROLE_WEIGHT},
	[GEMM_WGRAD] = {ROLE_GRAD_OUTPUT, ROLE_INPUT},
};
static const char *const gemm_formula[NGEMM] = {
	"Y = X·Wᵀ takes input and weight",
	"dX = dY·W takes grad_output and weight",
	"dW = dYᵀ·X takes grad_output and input",
};

const char *role_name(Role r) { return r < NROLE ? role_names[r] : "?"; }
const char *gemm_name(Gemm g) { return g < NGEMM ? gemm_names[g] : "?"; }
const char *scaling_name(ScalingKind k) { return k < NSCALING ? scaling_names[k] : "?"; }
const char *accum_name(Accum a) { return a < NACCUM ? accum_names[a] : "?"; }

static const char *const format_names[PRECC_NFORMAT] = {
	"fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2", "e8m0", "e2m1", "e3m2", "e2m3",
};

static const char *
fmtname(precc_format f)
{
	return f < PRECC_NFORMAT ? format_names[f] : "?";
}

static bool
lowp(int f)
{
	return f == PRECC_E4M3 || f == PRECC_E5M2 || f == PRECC_E2M1 ||
	       f == PRECC_E3M2 || f == PRECC_E2M3;
}

static int
bit(unsigned b)
{
	int i = 0;

	while (b > 1) {
		b >>= 1;
		i++;
	}
	return i;
}

/* ---- loading state ------------------------------------------------------ */

typedef struct Call { char name[32]; int line, n; } Call;

typedef struct Loader {
	Sandbox *sb;
	Src src;                  /* tokens point into text */
	char *text;
	Recipe *r;
	Call calls[512];          /* constructor calls seen, per name and line */
	int ncalls;
} Loader;

/* Where a table was written: its '{' token (or -1) and a fallback line. */
typedef struct Tab { int idx, open, line; const char *what; } Tab;

static Loader *
loader(lua_State *L)
{
	return lua_touserdata(L, lua_upvalueindex(1));
}

/* The nth call to `name` on `line` seen so far (calls run in source order). */
static int
call_nth(Loader *ld, const char *name, int line)
{
	for (int i = 0; i < ld->ncalls; i++)
		if (ld->calls[i].line == line && !strcmp(ld->calls[i].name, name))
			return ld->calls[i].n++;
	if (ld->ncalls < COUNT(ld->calls)) {
		Call *c = &ld->calls[ld->ncalls++];
		snprintf(c->name, sizeof c->name, "%s", name);
		c->line = line;
		c->n = 1;
	}
	return 0;
}

#define fail(ld, line, ...) sandbox_raise((ld)->sb->L, (line), __VA_ARGS__)

static int
keyline(Loader *ld, const Tab *t, const char *key)
{
	return src_line(&ld->src, src_find_key(&ld->src, t->open, key), t->line);
}

/* ---- constructor objects -------------------------------------------------
 * `delayed{history = 1024}` makes an object table:
 *   {cat = "scaling", kind = "delayed", name = "delayed", opts = {...},
 *    line = call line, open = token of its '{'}
 * with the metatable REG_OBJ. The global `delayed` itself is such an
 * object with no opts, so both `delayed` and `delayed{...}` are values. */

#define REG_OBJ "precc.object"
#define REG_RECIPE "precc.recipe"
#define REG_FIND "precc.find"

static bool
is_obj(lua_State *L, int idx, const char *cat)
{
	bool ok = false;

	if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx))
		return false;
	luaL_getmetatable(L, REG_OBJ);
	ok = lua_rawequal(L, -1, -2);
	lua_pop(L, 2);
	if (!ok)
		return false;
	lua_getfield(L, idx, "cat");
	ok = lua_type(L, -1) == LUA_TSTRING && !strcmp(lua_tostring(L, -1), cat);
	lua_pop(L, 1);
	return ok;
}

static const char *
obj_str(lua_State *L, int idx, const char *field)
{
	lua_getfield(L, idx, field);
	const char *s = lua_tostring(L, -1);   /* anchored by the object */
	lua_pop(L, 1);
	return s ? s : "";
}

static int
obj_int(lua_State *L, int idx, const char *field)
{
	lua_getfield(L, idx, field);
	int v = (int)lua_tointeger(L, -1);
	lua_pop(L, 1);
	return v;
}

/* Push a new object; opts is the value at index `opts` (0: none). */
static void
new_obj(lua_State *L, const char *cat, const char *kind, const char *name,
        int opts, int line, int open)
{
	lua_newtable(L);
	lua_pushstring(L, cat);
	lua_setfield(L, -2, "cat");
	lua_pushstring(L, kind);
	lua_setfield(L, -2, "kind");
	lua_pushstring(L, name);
	lua_setfield(L, -2, "name");
	if (opts) {
		lua_pushvalue(L, opts);
		lua_setfield(L, -2, "opts");
	}
	lua_pushinteger(L, line);
	lua_setfield(L, -2, "line");
	lua_pushinteger(L, open);
	lua_setfield(L, -2, "open");
	luaL_setmetatable(L, REG_OBJ);
}

/* __call of a constructor: proto(args...) -> a new object of its kind. */
static int
obj_call(lua_State *L)
{
	Loader *ld = *(Loader **)lua_getextraspace(L);
	int n = lua_gettop(L) - 1;
	int line = sandbox_caller_line(L);
	const char *name = obj_str(L, 1, "name");

	if (!is_obj(L, 1, "scaling") && !is_obj(L, 1, "accum") && !is_obj(L, 1, "loss"))
		return luaL_error(L, "attempt to call a recipe value");
	if (obj_int(L, 1, "line") != 0)
		return luaL_error(L, "%s{...} is already built; write %s{...} once", name, name);
	int open = ld && line ? src_call_table(&ld->src, line, name, call_nth(ld, name, line)) : -1;
	if (n == 1 && lua_type(L, 2) == LUA_TTABLE && !is_obj(L, 2, "scaling")) {
		new_obj(L, obj_str(L, 1, "cat"), obj_str(L, 1, "kind"), name, 2, line, open);
		return 1;
	}
	lua_createtable(L, n, 0);
	for (int i = 1; i <= n; i++) {
		lua_pushvalue(L, i + 1);
		lua_rawseti(L, -2, i);
	}
	int t = lua_gettop(L);
	new_obj(L, obj_str(L, 1, "cat"), obj_str(L, 1, "kind"), name, t, line, -1);
	return 1;
}

static int
obj_tostring(lua_State *L)
{
	lua_pushfstring(L, "%s", obj_str(L, 1, "name"));
	return 1;
}

/* recipe "name" { ... } | recipe { ... } | recipe("name", { ... }) */
static int
recipe_with_name(lua_State *L);

static int
register_recipe(lua_State *L, Loader *ld, int name, int tbl)
{
	int line = sandbox_caller_line(L);

	if (lua_type(L, tbl) != LUA_TTABLE)
		return luaL_error(L, "recipe needs a table: recipe \"name\" { format = e4m3, ... }");
	lua_getfield(L, LUA_REGISTRYINDEX, REG_RECIPE);
	if (!lua_isnil(L, -1))
		return luaL_error(L, "a recipe file defines one recipe, and this one already did at line %d",
		                  obj_int(L, -1, "line"));
	lua_pop(L, 1);
	int open = line ? src_call_table(&ld->src, line, "recipe", call_nth(ld, "recipe", line)) : -1;
	new_obj(L, "recipe", "recipe", "recipe", tbl, line, open);
	if (name) {
		lua_pushvalue(L, name);
		lua_setfield(L, -2, "given_name");
	}
	lua_pushvalue(L, -1);
	lua_setfield(L, LUA_REGISTRYINDEX, REG_RECIPE);
	return 1;
}

static int
recipe_fn(lua_State *L)
{
	Loader *ld = loader(L);

	if (lua_type(L, 1) == LUA_TSTRING && lua_gettop(L) == 1) {
		lua_pushlightuserdata(L, ld);
		lua_pushvalue(L, 1);
		lua_pushcclosure(L, recipe_with_name, 2);
		return 1;
	}
	if (lua_type(L, 1) == LUA_TSTRING)
		return register_recipe(L, ld, 1, 2);
	return register_recipe(L, ld, 0, 1);
}

static int
recipe_with_name(lua_State *L)
{
	lua_pushvalue(L, lua_upvalueindex(2));
	lua_insert(L, 1);
	return register_recipe(L, loader(L), 1, 2);
}

/* rule "pattern" { ... } | rule {"p1", "p2"} { ... } | rule(fn) { ... }
 * | rule("pattern", { ... }) | rule { match = ..., ... } */
static int rule_with_match(lua_State *L);

static int
make_rule(lua_State *L, Loader *ld, int match, int tbl)
{
	int line = sandbox_caller_line(L);

	if (lua_type(L, tbl) != LUA_TTABLE)
		return luaL_error(L, "rule needs a settings table: rule \"lm_head\" { format = bf16 }");
	int open = line ? src_call_table(&ld->src, line, "rule", call_nth(ld, "rule", line)) : -1;
	new_obj(L, "rule", "rule", "rule", tbl, line, open);
	if (match) {
		lua_pushvalue(L, match);
		lua_setfield(L, -2, "match");
	}
	return 1;
}

static bool
is_pattern_list(lua_State *L, int idx)
{
	if (lua_type(L, idx) != LUA_TTABLE || is_obj(L, idx, "rule"))
		return false;
	lua_Integer n = luaL_len(L, idx);
	bool ok = n > 0;
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		if (lua_type(L, -2) != LUA_TNUMBER || lua_type(L, -1) != LUA_TSTRING)
			ok = false;
		lua_pop(L, 1);
	}
	return ok;
}

static int
rule_fn(lua_State *L)
{
	Loader *ld = loader(L);
	int t1 = lua_type(L, 1);

	if (lua_gettop(L) >= 2)
		return make_rule(L, ld, 1, 2);
	if (t1 == LUA_TSTRING || t1 == LUA_TFUNCTION || is_pattern_list(L, 1)) {
		lua_pushlightuserdata(L, ld);
		lua_pushvalue(L, 1);
		lua_pushcclosure(L, rule_with_match, 2);
		return 1;
	}
	return make_rule(L, ld, 0, 1);
}

static int
rule_with_match(lua_State *L)
{
	lua_pushvalue(L, lua_upvalueindex(2));
	lua_insert(L, 1);
	return make_rule(L, loader(L), 1, 2);
}

static void
define_globals(lua_State *L, Loader *ld)
{
	static const struct { const char *cat, *kind, *name; } protos[] = {
		{"scaling", "current", "current"}, {"scaling", "current", "tensorwise"},
		{"scaling", "delayed", "delayed"}, {"scaling", "rowwise", "rowwise"},
		{"scaling", "rowwise", "axiswise"}, {"scaling", "blockwise", "blockwise"},
		{"scaling", "mx", "mx"}, {"scaling", "nvfp4", "nvfp4"},
		{"accum", "fast", "fast"}, {"accum", "promote", "promote"},
		{"loss", "static", "static"}, {"loss", "dynamic", "dynamic"},
	};

	*(Loader **)lua_getextraspace(L) = ld;
	luaL_newmetatable(L, REG_OBJ);
	lua_pushcfunction(L, obj_call);
	lua_setfield(L, -2, "__call");
	lua_pushcfunction(L, obj_tostring);
	lua_setfield(L, -2, "__tostring");
	lua_pushboolean(L, 0);
	lua_setfield(L, -2, "__metatable");
	lua_pop(L, 1);

	lua_getglobal(L, "string");
	lua_getfield(L, -1, "find");
	lua_setfield(L, LUA_REGISTRYINDEX, REG_FIND);
	lua_pop(L, 1);

	lua_pushglobaltable(L);
	for (int f = 0; f < PRECC_NFORMAT; f++) {
		lua_pushstring(L, format_names[f]);
		lua_setfield(L, -2, format_names[f]);
	}
	static const char *const words[] = {"hybrid", "none", "split"};
	for (int i = 0; i < COUNT(words); i++) {
		lua_pushstring(L, words[i]);
		lua_setfield(L, -2, words[i]);
	}
	for (int i = 0; i < COUNT(protos); i++) {
		new_obj(L, protos[i].cat, protos[i].kind, protos[i].name, 0, 0, -1);
		lua_setfield(L, -2, protos[i].name);
	}
	lua_pushlightuserdata(L, ld);
	lua_pushcclosure(L, recipe_fn, 1);
	lua_setfield(L, -2, "recipe");
	lua_pushlightuserdata(L, ld);
	lua_pushcclosure(L, rule_fn, 1);
	lua_setfield(L, -2, "rule");
	lua_pop(L, 1);
}

/* ---- value checks -------------------------------------------------------- */

static const char *
typename_of(lua_State *L, int v)
{
	return is_obj(L, v, "scaling") ? "scaling" : is_obj(L, v, "accum") ? "accumulation"
	     : is_obj(L, v, "loss") ? "loss scaling" : luaL_typename(L, v);
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
	const char *near = suggest(s, names, n);
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
		names[f] = format_names[f];
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

	if (lua_type(ld->sb->L, v) != LUA_TTABLE || is_obj(ld->sb->L, v, "scaling") ||
	    is_obj(ld->sb->L, v, "rule"))
		fail(ld, s.line, "'%s' must be a table { ... }, not a %s", key, typename_of(ld->sb->L, v));
	return s;
}

/* An object's options as a Tab (idx 0 when it has none). */
static Tab
obj_tab(Loader *ld, int v, int line, const char *what)
{
	lua_State *L = ld->sb->L;
	Tab t = {0, obj_int(L, v, "open"), obj_int(L, v, "line"), what};

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
	((cs)->set |= (BIT), (cs)->v.field = (val), (cs)->line[bit(BIT)] = (ln))
#define PUTG(set, lines, g, BIT, field, val, ln) \
	(*(set) |= (BIT), (g)->field = (val), (lines)[bit(BIT)] = (ln))

static const char *const cast_keys[] = {
	"format", "scaling", "margin", "pow2", "amax_eps", "round", "saturate",
	"nonfinite", "history", "algo", "scale_format",
};
static const char *const round_names[] = {"rne", "rz", NULL, "sr"};
static const char *const nonfinite_names[NNONFINITE] = {"keep_scale", "skip_step", "error"};
static const char *const algo_names[] = {"max", "most_recent"};

static void scaling_value(Loader *, const Tab *, int v, int line, CastSpec *);

/* One cast field; false if k is not one. Settings `top` allows hybrid. */
static bool
cast_key(Loader *ld, const Tab *t, const char *k, int v, CastSpec *cs, Settings *top)
{
	int line = keyline(ld, t, k);

	if (!strcmp(k, "format")) {
		int f = operand_format(ld, v, k, line, top != NULL);
		if (f == HYBRID) {
			top->hybrid = true;
			cs->line[bit(SET_FORMAT)] = line;
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
			fail(ld, line, "'scale_format' must be fp32, e8m0 or e4m3, not %s", fmtname(f));
		PUT(cs, SET_SCALE_FORMAT, scale_format, f, line);
	} else {
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
	} else if (is_obj(L, v, "scaling")) {
		name = obj_str(L, v, "name");
		s = kinds[choose(ld, line, "scaling", obj_str(L, v, "kind"), names, COUNT(names))];
		o = obj_tab(ld, v, line, lua_pushfstring(L, "%s{...}", name));
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
		cs->line[bit(SET_BLOCK)] = line;
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
			cs->line[bit(SET_BLOCK)] = o.line;
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
		int kl = keyline(ld, &o, k);
		if (takes(s, k)) {
			cast_key(ld, &o, k, lua_gettop(L), cs, NULL);
		} else {
			for (int other = 0; other < NSCALING; other++)
				if (takes(other, k))
					fail(ld, kl, "'%s' does not apply to %s scaling%s", k, scaling_names[s],
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
	int line = keyline(ld, t, k);
	luaL_checkstack(L, 16, NULL);

	if (!strcmp(k, "accumulate")) {
		static const char *const names[] = {"fp32", "split", "fast", "promote"};
		static const Accum kinds[] = {ACCUM_FP32, ACCUM_FP32, ACCUM_FAST, ACCUM_PROMOTE};
		if (lua_type(L, v) == LUA_TSTRING) {
			PUTG(set, lines, g, SET_ACCUM, accum, kinds[choose(ld, line, "accumulation",
			     lua_tostring(L, v), names, 4)], line);
		} else if (is_obj(L, v, "accum")) {
			int top = lua_gettop(L);
			bool fast = !strcmp(obj_str(L, v, "kind"), "fast");
			const char *key = fast ? "bits" : "every";
			Tab o = obj_tab(ld, v, line, fast ? "fast{...}" : "promote{...}");
			PUTG(set, lines, g, SET_ACCUM, accum, fast ? ACCUM_FAST : ACCUM_PROMOTE, line);
			if (o.idx) {
				lua_pushnil(L);
				while (lua_next(L, o.idx)) {
					bool pos = lua_type(L, -2) == LUA_TNUMBER && lua_tointeger(L, -2) == 1;
					const char *kk = pos ? key : lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
					int kl = pos ? o.line : keyline(ld, &o, kk);
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
		static const char *const keys[] = {"format", "bias", "amax"};
		Tab o = sub_table(ld, t, k, v, "output");
		lua_pushnil(L);
		while (lua_next(L, o.idx)) {
			const char *kk = key_of(ld, &o);
			int kl = keyline(ld, &o, kk), vi = lua_gettop(L);
			if (!strcmp(kk, "format"))
				PUTG(set, lines, g, SET_OUT_FORMAT, out_format, operand_format(ld, vi, kk, kl, false), kl);
			else if (!strcmp(kk, "bias"))
				PUTG(set, lines, g, SET_BIAS, bias, want_bool(ld, vi, kk, kl), kl);
			else if (!strcmp(kk, "amax"))
				PUTG(set, lines, g, SET_OUT_AMAX, out_amax, want_bool(ld, vi, kk, kl), kl);
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
		int line = keyline(ld, t, key);
		PUT(cs, SET_FORMAT, format, operand_format(ld, v, key, line, false), line);
		return;
	}
	Tab s = sub_table(ld, t, key, v, what);
	lua_pushnil(L);
	while (lua_next(L, s.idx)) {
		const char *k = key_of(ld, &s);
		if (!cast_key(ld, &s, k, lua_gettop(L), cs, NULL))
			unknown_key(ld, keyline(ld, &s, k), k, what, cast_keys, COUNT(cast_keys));
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
		role_table(ld, t, gemm_names[g], v, &gs->all, gemm_names[g]);
		return;
	}
	for (int i = 0; i < COUNT(cast_keys); i++)
		keys[nk++] = cast_keys[i];
	for (int i = 0; i < COUNT(gemm_keys); i++)
		keys[nk++] = gemm_keys[i];
	keys[nk++] = role_names[gemm_roles[g][0]];
	keys[nk++] = role_names[gemm_roles[g][1]];
	Tab s = sub_table(ld, t, gemm_names[g], v, gemm_names[g]);
	lua_pushnil(L);
	while (lua_next(L, s.idx)) {
		const char *k = key_of(ld, &s);
		int vi = lua_gettop(L), r = index_of(k, role_names, NROLE);
		if (r >= 0) {
			if (r != (int)gemm_roles[g][0] && r != (int)gemm_roles[g][1])
				fail(ld, keyline(ld, &s, k), "%s has no %s operand (%s: %s)", gemm_names[g], k,
				     gemm_names[g], gemm_formula[g]);
			role_table(ld, &s, k, vi, &gs->role[r], lua_pushfstring(L, "%s.%s", gemm_names[g], k));
		} else if (!cast_key(ld, &s, k, vi, &gs->all, NULL) &&
		           !gemm_key(ld, &s, k, vi, &gs->set, &gs->v, gs->line)) {
			unknown_key(ld, keyline(ld, &s, k), k, gemm_names[g], keys, nk);
		}
		lua_settop(L, vi - 1);
	}
}

static void
fallback_value(Loader *ld, const Tab *t, int v, Settings *s)
{
	lua_State *L = ld->sb->L;
	int line = keyline(ld, t, "fallback");

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
static void
settings_table(Loader *ld, const Tab *t, Settings *s, Recipe *rec, char **label)
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
		int vi = lua_gettop(L), line = keyline(ld, t, k), r, g;
		if (cast_key(ld, t, k, vi, &s->all, s) ||
		    gemm_key(ld, t, k, vi, &s->gemm_set, &s->gemm_all, s->gemm_line)) {
		} else if ((r = index_of(k, role_names, NROLE)) >= 0) {
			role_table(ld, t, k, vi, &s->role[r], k);
		} else if ((g = index_of(k, gemm_names, NGEMM)) >= 0) {
			gemm_table(ld, t, g, vi, &s->gemm[g]);
		} else if (!strcmp(k, "fallback")) {
			fallback_value(ld, t, vi, s);
		} else if (label && !strcmp(k, "reason")) {
			if (lua_type(L, vi) != LUA_TSTRING)
				fail(ld, line, "'reason' must be a string, not a %s", typename_of(L, vi));
			free(*label);
			*label = xstrdup(lua_tostring(L, vi));
		} else if (rec && (!strcmp(k, "name") || !strcmp(k, "description"))) {
			if (lua_type(L, vi) != LUA_TSTRING)
				fail(ld, line, "'%s' must be a string, not a %s", k, typename_of(L, vi));
			char **p = !strcmp(k, "name") ? &rec->name : &rec->description;
			free(*p);
			*p = xstrdup(lua_tostring(L, vi));
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

	if (lua_type(L, v) != LUA_TTABLE || is_obj(L, v, "rule"))
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
		if (!is_obj(L, o, "rule"))
			fail(ld, item, "rules[%d] must be made with rule \"pattern\" { ... }, not a %s",
			     (int)i, lua_type(L, o) == LUA_TFUNCTION ? "function (is its { ... } missing?)"
			     : typename_of(L, o));
		Tab st = obj_tab(ld, o, item, "rule");
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
		Rule proto = {0};
		proto.predicate_ref = LUA_NOREF;
		char *label = NULL;
		settings_table(ld, &st, &proto.settings, NULL, &label);
		Rule *u;
		if (lua_type(L, m) == LUA_TFUNCTION) {
			u = new_rule(r, line);
			u->settings = proto.settings;
			u->label = label ? label : xstrdup(lua_pushfstring(L, "rule at line %d", line));
			lua_pushvalue(L, m);
			u->predicate_ref = luaL_ref(L, LUA_REGISTRYINDEX);
		} else if (lua_type(L, m) == LUA_TSTRING || is_pattern_list(L, m)) {
			int np = lua_type(L, m) == LUA_TSTRING ? 1 : (int)luaL_len(L, m);
			for (int j = 1; j <= np; j++) {
				if (np > 1 || lua_type(L, m) == LUA_TTABLE)
					lua_rawgeti(L, m, j);
				else
					lua_pushvalue(L, m);
				const char *pat = lua_tostring(L, -1);
				check_pattern(ld, pat, line);
				u = new_rule(r, line);
				u->settings = proto.settings;
				u->pattern = xstrdup(pat);
				u->label = xstrdup(label ? label : pat);
				lua_pop(L, 1);
			}
			free(label);
		} else {
			free(label);
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
	int line = keyline(ld, t, "loss_scale"), top = lua_gettop(L);
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
	if (!is_obj(L, v, "loss"))
		fail(ld, line, "'loss_scale' must be none, a number, static(S) or dynamic{...}, not a %s",
		     typename_of(L, v));
	bool dyn = !strcmp(obj_str(L, v, "kind"), "dynamic");
	Tab o = obj_tab(ld, v, line, dyn ? "dynamic{...}" : "static(...)");
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
		int kl = pos ? o.line : keyline(ld, &o, k);
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
		int vi = lua_gettop(L), line = keyline(ld, &s, k);
		if (!strcmp(k, "loss_scale")) {
			loss_value(ld, &s, vi, tp);
		} else if (!strcmp(k, "master_weights") || !strcmp(k, "optimizer_state")) {
			int f = want_format(ld, vi, k, line, false);
			bool master = k[0] == 'm';
			if (f == PRECC_TF32 || f == PRECC_E8M0 || (master && lowp(f)) ||
			    (!master && f != PRECC_E4M3 && f != PRECC_E5M2 && lowp(f)))
				fail(ld, line, "'%s' must be fp32, bf16 or fp16%s, not %s", k,
				     master ? "" : " (or e4m3/e5m2 for 8-bit optimizer states)", fmtname(f));
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

/* ---- combinations ------------------------------------------------------------
 * Layer the levels as plan.c does and check what they add up to; a
 * contradiction is reported at the more specific of the two settings. */

typedef struct Eff {
	Cast v;
	int rank[NSET_CAST], line[NSET_CAST];
} Eff;

static void
copy_field(Cast *d, const Cast *s, unsigned b)
{
	switch (b) {
	case SET_FORMAT: d->format = s->format; break;
	case SET_SCALING: d->scaling = s->scaling; break;
	case SET_BLOCK: memcpy(d->block, s->block, sizeof d->block); break;
	case SET_SCALE_FORMAT: d->scale_format = s->scale_format; break;
	case SET_HISTORY: d->history = s->history; break;
	case SET_AMAX_ALGO: d->amax_algo = s->amax_algo; break;
	case SET_MARGIN: d->margin = s->margin; break;
	case SET_POW2: d->pow2_scale = s->pow2_scale; break;
	case SET_EPS: d->amax_eps = s->amax_eps; break;
	case SET_ROUND: d->round = s->round; break;
	case SET_SATURATE: d->saturate = s->saturate; break;
	case SET_NONFINITE: d->nonfinite = s->nonfinite; break;
	}
}

static void
layer(Eff *e, const CastSpec *cs, int rank)
{
	for (int i = 0; i < NSET_CAST; i++)
		if (cs->set & (1u << i)) {
			copy_field(&e->v, &cs->v, 1u << i);
			e->rank[i] = rank;
			e->line[i] = cs->line[i];
		}
}

static void
layer_settings(Eff *e, const Settings *s, Gemm g, Role r, int base)
{
	layer(e, &s->all, base);
	if (s->hybrid) {
		e->v.format = r == ROLE_GRAD_OUTPUT ? PRECC_E5M2 : PRECC_E4M3;
		e->rank[bit(SET_FORMAT)] = base;
		e->line[bit(SET_FORMAT)] = s->all.line[bit(SET_FORMAT)];
	}
	layer(e, &s->role[r], base + 1);
	layer(e, &s->gemm[g].all, base + 2);
	layer(e, &s->gemm[g].role[r], base + 3);
}

static int
later(const Eff *e, unsigned a, unsigned b, int dflt)
{
	int i = bit(a), j = bit(b);
	int l = e->rank[i] >= e->rank[j] ? e->line[i] : e->line[j];
	return l ? l : dflt;
}

static void
check_cast(Loader *ld, const Eff *e, Gemm g, Role r, int dflt)
{
	const Cast *c = &e->v;
	char where[64];
	snprintf(where, sizeof where, "%s in %s", role_names[r], gemm_names[g]);
	int F = bit(SET_FORMAT), S = bit(SET_SCALING), H = bit(SET_HISTORY), A = bit(SET_AMAX_ALGO);

	if (c->scaling == SCALING_NONE)
		return;
	if (!lowp(c->format)) {
		if (e->rank[S] >= e->rank[F])
			fail(ld, e->line[S] ? e->line[S] : dflt, "%s scaling needs an fp8, fp6 or fp4 format, "
			     "but %s is %s%s", scaling_names[c->scaling], where, fmtname(c->format),
			     e->rank[F] < 0 ? " (the default)" : "");
		return;
	}
	int sfl = later(e, SET_SCALE_FORMAT, SET_SCALING, dflt);
	switch (c->scaling) {
	case SCALING_MX:
		if (c->scale_format != PRECC_E8M0)
			fail(ld, sfl, "mx scaling uses e8m0 scales (OCP MX), not %s", fmtname(c->scale_format));
		break;
	case SCALING_NVFP4:
		if (c->format != PRECC_E2M1)
			fail(ld, later(e, SET_FORMAT, SET_SCALING, dflt), "nvfp4 scaling needs format e2m1, "
			     "but %s is %s", where, fmtname(c->format));
		if (c->scale_format != PRECC_E4M3)
			fail(ld, sfl, "nvfp4 scaling uses e4m3 block scales, not %s", fmtname(c->scale_format));
		break;
	default:
		if (c->scale_format == PRECC_E4M3)
			fail(ld, sfl, "e4m3 scales are for nvfp4 scaling; %s scaling takes fp32 or e8m0 scales",
			     scaling_names[c->scaling]);
		break;
	}
	for (int k = H; k <= A; k++)
		if (e->rank[k] >= 0 && c->scaling != SCALING_DELAYED && e->rank[k] >= e->rank[S])
			fail(ld, e->line[k] ? e->line[k] : dflt, "'%s' applies only to delayed scaling, "
			     "but %s uses %s scaling", k == H ? "history" : "algo", where,
			     scaling_names[c->scaling]);
}

static void
check_level(Loader *ld, const Settings *base, const Settings *rule)
{
	int dflt = rule ? rule->line : base->line;

	for (int g = 0; g < NGEMM; g++) {
		Eff e[2];
		for (int i = 0; i < 2; i++) {
			Role r = gemm_roles[g][i];
			memset(&e[i], 0, sizeof e[i]);
			for (int k = 0; k < NSET_CAST; k++)
				e[i].rank[k] = -1;
			e[i].v.format = PRECC_BF16;
			e[i].v.scale_format = PRECC_FP32;
			layer_settings(&e[i], base, g, r, 0);
			if (rule)
				layer_settings(&e[i], rule, g, r, 4);
			check_cast(ld, &e[i], g, r, dflt);
		}
		int F = bit(SET_FORMAT);
		if (lowp(e[0].v.format) != lowp(e[1].v.format)) {
			int i = e[0].rank[F] >= e[1].rank[F] ? 0 : 1;
			fail(ld, e[i].line[F] ? e[i].line[F] : dflt, "%s mixes %s %s with %s %s: both operands "
			     "of a GEMM are fp8/fp6/fp4 or neither", gemm_names[g],
			     role_names[gemm_roles[g][0]], fmtname(e[0].v.format),
			     role_names[gemm_roles[g][1]], fmtname(e[1].v.format));
		}
		/* accumulation */
		const Settings *lv[4] = {base, base, rule, rule};
		Accum acc = ACCUM_FP32;
		int rank[NSET_GEMM], line[NSET_GEMM];
		for (int k = 0; k < NSET_GEMM; k++)
			rank[k] = -1, line[k] = 0;
		for (int l = 0; l < 4; l++) {
			if (!lv[l])
				continue;
			unsigned set = l % 2 ? lv[l]->gemm[g].set : lv[l]->gemm_set;
			const GemmPolicy *p = l % 2 ? &lv[l]->gemm[g].v : &lv[l]->gemm_all;
			const int *ln = l % 2 ? lv[l]->gemm[g].line : lv[l]->gemm_line;
			for (int k = 0; k < NSET_GEMM; k++)
				if (set & (1u << k)) {
					rank[k] = l;
					line[k] = ln[k];
					if (k == bit(SET_ACCUM))
						acc = p->accum;
				}
		}
		int A = bit(SET_ACCUM), P = bit(SET_PROMOTE), B = bit(SET_ACCUM_BITS);
		if (rank[P] >= 0 && acc != ACCUM_PROMOTE && rank[P] >= rank[A])
			fail(ld, line[P] ? line[P] : dflt, "'promote_every' applies to accumulate = promote, "
			     "but %s accumulates %s", gemm_names[g], acc == ACCUM_FAST ? "fast" : "in fp32");
		if (rank[B] >= 0 && acc != ACCUM_FAST && rank[B] >= rank[A])
			fail(ld, line[B] ? line[B] : dflt, "'accum_bits' applies to accumulate = \"fast\", "
			     "but %s accumulates %s", gemm_names[g], acc == ACCUM_PROMOTE ? "with promotion" : "in fp32");
	}
}

/* ---- entry points ------------------------------------------------------------ */

static int
parse_all(lua_State *L)
{
	Loader *ld = lua_touserdata(L, 1);
	Recipe *r = ld->r;

	lua_getfield(L, LUA_REGISTRYINDEX, REG_RECIPE);
	int o = lua_gettop(L);
	Tab t = obj_tab(ld, o, 1, "recipe");
	r->loc = (SrcLoc){r->path, t.line};
	lua_getfield(L, o, "given_name");
	if (lua_type(L, -1) == LUA_TSTRING)
		r->name = xstrdup(lua_tostring(L, -1));
	lua_pop(L, 1);
	settings_table(ld, &t, &r->base, r, NULL);
	check_level(ld, &r->base, NULL);
	for (int i = 0; i < r->nrules; i++)
		check_level(ld, &r->base, &r->rules[i].settings);
	return 0;
}

static char *
read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (n + 4096 > cap)
			buf = xrealloc(buf, cap = 2 * cap + 8192);
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	*len = n;
	return buf;
}

static _Noreturn void
give_up(Recipe *r, Loader *ld, const SandboxError *e)
{
	SandboxError copy = *e;

	src_free(&ld->src);
	free(ld->text);
	free(ld);
	recipe_free(r);
	errorf(copy.file, copy.line, "%s", copy.msg);
}

Recipe *
recipe_load(const char *path)
{
	size_t len;
	char *text = read_file(path, &len);
	SandboxError err;

	if (!text)
		errorf(path, 0, "cannot read recipe: %s", strerror(errno));
	Recipe *r = xcalloc(1, sizeof *r);
	Loader *ld = xcalloc(1, sizeof *ld);
	r->path = xstrdup(path);
	r->training = (TrainingPolicy){
		.loss_scale = LOSS_NONE, .loss_scale_init = 65536, .growth_factor = 2,
		.backoff_factor = 0.5, .growth_interval = 2000,
		.master_weights = PRECC_FP32, .optimizer_state = PRECC_FP32,
	};
	ld->r = r;
	ld->text = text;
	ld->sb = sandbox_new(path);
	r->lua = ld->sb;
	src_index(&ld->src, text, len);
	define_globals(ld->sb->L, ld);
	bool ok = sandbox_load(ld->sb, text, len, &err) &&
	          sandbox_call(ld->sb, 0, 0, SANDBOX_LOAD_STEPS, &err);
	if (!ok)
		give_up(r, ld, &err);
	lua_State *L = ld->sb->L;
	lua_getfield(L, LUA_REGISTRYINDEX, REG_RECIPE);
	bool found = !lua_isnil(L, -1);
	lua_pop(L, 1);
	if (!found) {
		snprintf(err.file, sizeof err.file, "%s", path);
		err.line = 0;
		snprintf(err.msg, sizeof err.msg, "no recipe here: a recipe file calls "
		         "recipe \"name\" { ... } once");
		give_up(r, ld, &err);
	}
	lua_pushcfunction(L, parse_all);
	lua_pushlightuserdata(L, ld);
	if (!sandbox_call(ld->sb, 1, 0, SANDBOX_LOAD_STEPS, &err))
		give_up(r, ld, &err);
	if (!r->name) {
		const char *b = strrchr(path, '/');
		b = b ? b + 1 : path;
		size_t n = strlen(b);
		if (n > 4 && !strcmp(b + n - 4, ".lua"))
			n -= 4;
		r->name = xmalloc(n + 1);
		memcpy(r->name, b, n);
		r->name[n] = 0;
	}
	*(Loader **)lua_getextraspace(L) = NULL;
	src_free(&ld->src);
	free(ld->text);
	free(ld);
	return r;
}

void
recipe_free(Recipe *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->nrules; i++) {
		free(r->rules[i].pattern);
		free(r->rules[i].label);
	}
	free(r->rules);
	sandbox_free(r->lua);
	free(r->name);
	free(r->description);
	free(r->path);
	free(r);
}

bool
recipe_rule_matches(const Recipe *r, const Rule *u, const Linear *l)
{
	Sandbox *sb = r->lua;
	lua_State *L = sb->L;
	SandboxError err;

	if (u->pattern) {
		lua_getfield(L, LUA_REGISTRYINDEX, REG_FIND);
		lua_pushstring(L, l->fqn);
		lua_pushstring(L, u->pattern);
		if (!sandbox_call(sb, 2, 1, SANDBOX_CALL_STEPS, &err))
			errorf(err.file, err.line, "%s", err.msg);
	} else if (u->predicate_ref != LUA_NOREF) {
		lua_rawgeti(L, LUA_REGISTRYINDEX, u->predicate_ref);
		lua_createtable(L, 0, 5);
		lua_pushstring(L, l->fqn);
		lua_setfield(L, -2, "fqn");
		lua_pushinteger(L, l->in_features);
		lua_setfield(L, -2, "in_features");
		lua_pushinteger(L, l->out_features);
		lua_setfield(L, -2, "out_features");
		lua_pushboolean(L, l->tied);
		lua_setfield(L, -2, "tied");
		lua_pushboolean(L, l->bias);
		lua_setfield(L, -2, "bias");
		if (!sandbox_call(sb, 1, 1, SANDBOX_CALL_STEPS, &err))
			errorf(err.file, err.line, "%s", err.msg);
	} else {
		return false;
	}
	bool m = lua_toboolean(L, -1);
	lua_pop(L, 1);
	return m;
}
