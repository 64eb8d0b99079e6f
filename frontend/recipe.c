/*
 * recipe.c — the recipe language's vocabulary and entry points: the names
 * a recipe sees (formats, the scaling / accumulation / loss-scale
 * constructors, recipe, rule), running the file in the sandbox, and the
 * public recipe_load / recipe_free / recipe_rule_matches. The walk from
 * tables to structs is recipe_parse.c, the combination checks
 * recipe_check.c; docs/recipes.md is the user's manual.
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
#include "recipe_lua.h"

const char *const rc_role_names[NROLE] = {"input", "weight", "grad_output"};
const char *const rc_gemm_names[NGEMM] = {"fprop", "dgrad", "wgrad"};
const char *const rc_scaling_names[NSCALING] = {
	"none", "current", "delayed", "rowwise", "blockwise", "mx", "nvfp4",
};
static const char *const accum_names[NACCUM] = {"fp32", "fast", "promote"};
const Role rc_gemm_roles[NGEMM][2] = {
	[GEMM_FPROP] = {ROLE_INPUT, ROLE_WEIGHT},
	[GEMM_DGRAD] = {ROLE_GRAD_OUTPUT, ROLE_WEIGHT},
	[GEMM_WGRAD] = {ROLE_GRAD_OUTPUT, ROLE_INPUT},
};
const char *const rc_gemm_formula[NGEMM] = {
	"Y = X·Wᵀ takes input and weight",
	"dX = dY·W takes grad_output and weight",
	"dW = dYᵀ·X takes grad_output and input",
};

const char *role_name(Role r) { return r < NROLE ? rc_role_names[r] : "?"; }
const char *gemm_name(Gemm g) { return g < NGEMM ? rc_gemm_names[g] : "?"; }
const char *scaling_name(ScalingKind k) { return k < NSCALING ? rc_scaling_names[k] : "?"; }
const char *accum_name(Accum a) { return a < NACCUM ? accum_names[a] : "?"; }

const char *const rc_format_names[PRECC_NFORMAT] = {
	"fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2", "e8m0", "e2m1", "e3m2", "e2m3",
};

const char *
rc_fmtname(precc_format f)
{
	return f < PRECC_NFORMAT ? rc_format_names[f] : "?";
}

bool
rc_lowp(int f)
{
	return f == PRECC_E4M3 || f == PRECC_E5M2 || f == PRECC_E2M1 ||
	       f == PRECC_E3M2 || f == PRECC_E2M3;
}

int
rc_bit(unsigned b)
{
	int i = 0;

	while (b > 1) {
		b >>= 1;
		i++;
	}
	return i;
}

/* ---- loading state ------------------------------------------------------ */


static Loader *
loader(lua_State *L)
{
	Loader *ld = *(Loader **)lua_getextraspace(L);

	if (!ld)
		luaL_error(L, "recipe and rule are called while the recipe file loads, "
		           "not from a rule's predicate");
	return ld;
}

/* The nth call to `name` on `line` seen so far (calls run in source order). */
int
rc_call_nth(Loader *ld, const char *name, int line)
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


int
rc_keyline(Loader *ld, const Tab *t, const char *key)
{
	return src_line(&ld->src, src_find_key(&ld->src, t->open, key), t->line);
}

/* ---- constructor objects -------------------------------------------------
 * `delayed{history = 1024}` makes an object table:
 *   {cat = "scaling", kind = "delayed", name = "delayed", opts = {...},
 *    line = call line, open = token of its '{'}
 * with the metatable REG_OBJ. The global `delayed` itself is such an
 * object with no opts, so both `delayed` and `delayed{...}` are values. */


bool
rc_is_obj(lua_State *L, int idx, const char *cat)
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

const char *
rc_obj_str(lua_State *L, int idx, const char *field)
{
	lua_getfield(L, idx, field);
	const char *s = lua_tostring(L, -1);   /* anchored by the object */
	lua_pop(L, 1);
	return s ? s : "";
}

int
rc_obj_int(lua_State *L, int idx, const char *field)
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
	const char *name = rc_obj_str(L, 1, "name");

	if (!rc_is_obj(L, 1, "scaling") && !rc_is_obj(L, 1, "accum") && !rc_is_obj(L, 1, "loss"))
		return luaL_error(L, "attempt to call a recipe value");
	if (rc_obj_int(L, 1, "line") != 0)
		return luaL_error(L, "%s{...} is already built; write %s{...} once", name, name);
	int open = ld && line ? src_call_table(&ld->src, line, name, rc_call_nth(ld, name, line)) : -1;
	if (n == 1 && lua_type(L, 2) == LUA_TTABLE && !rc_is_obj(L, 2, "scaling")) {
		new_obj(L, rc_obj_str(L, 1, "cat"), rc_obj_str(L, 1, "kind"), name, 2, line, open);
		return 1;
	}
	lua_createtable(L, n, 0);
	for (int i = 1; i <= n; i++) {
		lua_pushvalue(L, i + 1);
		lua_rawseti(L, -2, i);
	}
	int t = lua_gettop(L);
	new_obj(L, rc_obj_str(L, 1, "cat"), rc_obj_str(L, 1, "kind"), name, t, line, -1);
	return 1;
}

static int
obj_tostring(lua_State *L)
{
	lua_pushfstring(L, "%s", rc_obj_str(L, 1, "name"));
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
		                  rc_obj_int(L, -1, "line"));
	lua_pop(L, 1);
	int open = line ? src_call_table(&ld->src, line, "recipe", rc_call_nth(ld, "recipe", line)) : -1;
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
	int open = line ? src_call_table(&ld->src, line, "rule", rc_call_nth(ld, "rule", line)) : -1;
	new_obj(L, "rule", "rule", "rule", tbl, line, open);
	if (match) {
		lua_pushvalue(L, match);
		lua_setfield(L, -2, "match");
	}
	return 1;
}

bool
rc_is_pattern_list(lua_State *L, int idx)
{
	if (lua_type(L, idx) != LUA_TTABLE || rc_is_obj(L, idx, "rule"))
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
	if (t1 == LUA_TSTRING || t1 == LUA_TFUNCTION || rc_is_pattern_list(L, 1)) {
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
		lua_pushstring(L, rc_format_names[f]);
		lua_setfield(L, -2, rc_format_names[f]);
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

/* ---- entry points ------------------------------------------------------------ */

static int
parse_all(lua_State *L)
{
	Loader *ld = lua_touserdata(L, 1);
	Recipe *r = ld->r;

	lua_getfield(L, LUA_REGISTRYINDEX, REG_RECIPE);
	int o = lua_gettop(L);
	Tab t = rc_obj_tab(ld, o, 1, "recipe");
	r->loc = (SrcLoc){r->path, t.line};
	lua_getfield(L, o, "given_name");
	if (lua_type(L, -1) == LUA_TSTRING)
		r->name = xstrdup(rc_text(ld, t.line, "recipe name", -1, false));
	lua_pop(L, 1);
	rc_settings_table(ld, &t, &r->base, r, NULL);
	rc_check_level(ld, &r->base, NULL);
	for (int i = 0; i < r->nrules; i++)
		rc_check_level(ld, &r->base, &r->rules[i].settings);
	return 0;
}

static _Noreturn void
give_up(Recipe *r, Loader *ld, const SandboxError *e)
{
	SandboxError copy = *e;

	*(Loader **)lua_getextraspace(ld->sb->L) = NULL;   /* before ld goes */
	src_free(&ld->src);
	free(ld->text);
	free(ld);
	recipe_free(r);
	errorf(copy.file, copy.line, "%s", copy.msg);
}

/* A model file given where the recipe goes: a config.json (JSON text), or
 * a Lua model file (calls linear(...), never recipe). What it is, or NULL. */
static const char *
swapped_model(const char *text, const char *path)
{
	const char *p = text;
	size_t n = strlen(path);

	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	if (*p == '{' || (n > 5 && !strcmp(path + n - 5, ".json")))
		return "this is a JSON file (a model's config.json?)";
	if (strstr(text, "linear(") && !strstr(text, "recipe"))
		return "this is a Lua model file (it calls linear)";
	return NULL;
}

Recipe *
recipe_load(const char *path)
{
	size_t len;
	char *text = read_file(path, 0, &len, NULL);
	SandboxError err;

	if (!text)
		errorf(path, 0, "cannot read recipe: %s", strerror(errno));
	const char *why = swapped_model(text, path);
	if (why) {
		free(text);
		errorf(path, 0, "%s, not a recipe; the recipe comes first: precc COMMAND RECIPE.lua "
		       "--model MODEL (are the two swapped?)", why);
	}
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
	ld->sb = sandbox_new(path, "recipe");
	r->lua = ld->sb;
	src_index(&ld->src, text, len);
	define_globals(ld->sb->L, ld);
	bool ok = sandbox_load(ld->sb, text, len, &err) &&
	          sandbox_call(ld->sb, 0, 0, sandbox_limits.load_steps, &err);
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
	if (!sandbox_call(ld->sb, 1, 0, sandbox_limits.load_steps, &err))
		give_up(r, ld, &err);
	if (!r->name) {
		const char *b = strrchr(path, '/');
		b = b ? b + 1 : path;
		size_t n = strlen(b);
		if (n > 4 && !strcmp(b + n - 4, ".lua"))
			n -= 4;
		char why[64];
		if (text_fault(b, n, false, why, sizeof why))
			errorf(path, 0, "the recipe is named after its file, whose name is not plain "
			       "text: %s; name it, recipe \"name\" { ... }", why);
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

	/* past the CPU budget, the watchdog blames this rule and layer */
	sb->task_line = u->loc.line;
	snprintf(sb->task, sizeof sb->task, u->pattern
	         ? "matching this rule's pattern to layer '%s' (a runaway pattern match?)"
	         : "in this rule's predicate on layer '%s' (a slow predicate?)", l->fqn);
	if (u->pattern) {
		lua_getfield(L, LUA_REGISTRYINDEX, REG_FIND);
		lua_pushstring(L, l->fqn);
		lua_pushstring(L, u->pattern);
		if (!sandbox_call(sb, 2, 1, sandbox_limits.call_steps, &err))
			errorf(err.file, err.line, "%s", err.msg);
	} else if (u->predicate_ref != LUA_NOREF) {
		lua_rawgeti(L, LUA_REGISTRYINDEX, u->predicate_ref);
		lua_createtable(L, 0, 9);
		lua_pushstring(L, l->fqn);
		lua_setfield(L, -2, "fqn");
		/* where the layer is (docs/recipes.md "Predicates"): block index
		 * and count, kind, expert; nil where a linear has none */
		if (l->block >= 0 && l->kind) {
			lua_pushinteger(L, l->block);
			lua_setfield(L, -2, "index");
		}
		lua_pushinteger(L, l->nblocks);
		lua_setfield(L, -2, "nblocks");
		if (l->kind) {
			lua_pushstring(L, l->kind);
			lua_setfield(L, -2, "kind");
		}
		if (l->expert >= 0 && l->kind) {
			lua_pushinteger(L, l->expert);
			lua_setfield(L, -2, "expert");
		}
		lua_pushinteger(L, l->in_features);
		lua_setfield(L, -2, "in_features");
		lua_pushinteger(L, l->out_features);
		lua_setfield(L, -2, "out_features");
		lua_pushboolean(L, l->tied);
		lua_setfield(L, -2, "tied");
		lua_pushboolean(L, l->bias);
		lua_setfield(L, -2, "bias");
		if (!sandbox_call(sb, 1, 1, sandbox_limits.call_steps, &err))
			errorf(err.file, err.line, "%s", err.msg);
	} else {
		sb->task_line = 0;
		return false;
	}
	sb->task_line = 0;
	bool m = lua_toboolean(L, -1);
	lua_pop(L, 1);
	return m;
}
