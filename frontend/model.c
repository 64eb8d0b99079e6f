/*
 * model.c — the linear layers of a model, from a Lua model file or a
 * HuggingFace config.json.
 *
 * Lua form (runs sandboxed like a recipe; loops allowed):
 *
 *	model "tiny"                       -- optional; default: file's basename
 *	for i = 0, 1 do
 *		local p = "model.layers." .. i
 *		linear(p .. ".self_attn.q_proj", 64, 64)     -- fqn, in, out
 *	end
 *	linear("lm_head", 64, 256, {tied = true})      -- options: tied, bias
 *
 * JSON form: a HuggingFace config.json, read by hf_arch.c's table of
 * architectures. Both forms give identical Models for the same network;
 * model_classify (below) gives every linear its block, expert and kind
 * from its name, whichever form it came from.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cJSON.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "ir.h"
#include "recipe.h"
#include "sandbox.h"

enum {
	MAX_FEATURES = MODEL_MAX_FEATURES,
	MAX_LINEARS = MODEL_MAX_LINEARS,
	MAX_FILE = 16 << 20,
};

void
model_add_linear(Model *m, const char *fqn, long in, long out, bool tied, bool bias)
{
	int n = m->nlinears;

	if (n == 0 || (n >= 64 && !(n & (n - 1))))   /* 64, 128, 256, ...: doubling */
		m->linears = xrealloc(m->linears, (size_t)(n ? 2 * n : 64) * sizeof *m->linears);
	m->linears[m->nlinears++] = (Linear){
		.fqn = xstrdup(fqn), .in_features = in, .out_features = out,
		.tied = tied, .bias = bias,
	};
}

void
model_share_input(Model *m, int later, int first)
{
	int r = model_input_root(m, first);

	m->linears[later].shares_input = 1 + (r >= 0 ? r : first);
}

void
model_fuse(Model *m, int i, int group, bool in_out)
{
	m->linears[i].group = group;
	m->linears[i].param_in_out = in_out;
}

/* "model.layers.0.mlp.experts.3.gate_up_proj" -> "...experts.gate_up_proj" */
void
model_fused_param(const Linear *l, char *out, size_t cap)
{
	const char *e = strstr(l->fqn, "experts."), *d = e ? strchr(e + 8, '.') : NULL;

	if (!e || !d)
		snprintf(out, cap, "%s", l->fqn);
	else
		snprintf(out, cap, "%.*s%s", (int)(e + 7 - l->fqn), l->fqn, d);
}

int
model_input_root(const Model *m, int i)
{
	return m->linears[i].shares_input - 1;
}

/* The number after "key." in fqn (key preceded by '.' or at the start),
 * or -1: block("model.layers.3.mlp", "layers") == 3. */
static int
index_after(const char *fqn, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = strstr(fqn, key); p; p = strstr(p + 1, key))
		if ((p == fqn || p[-1] == '.') && p[n] == '.' && isdigit((unsigned char)p[n + 1])) {
			char *e;
			long v = strtol(p + n + 1, &e, 10);
			if ((*e == '.' || !*e) && v < 1 << 30)
				return (int)v;
		}
	return -1;
}

/* What a linear is, from its module name (transformers' names, which the
 * HF reader writes and Lua model files follow): docs/models.md. */
static const char *
kind_of(const char *fqn)
{
	static const struct { const char *leaf, *kind; } attn[] = {
		{"q_proj", "attn.q"}, {"q_a_proj", "attn.q"}, {"q_b_proj", "attn.q"},
		{"k_proj", "attn.kv"}, {"v_proj", "attn.kv"}, {"kv_a_proj_with_mqa", "attn.kv"},
		{"kv_b_proj", "attn.kv"}, {"qkv_proj", "attn.qkv"}, {"o_proj", "attn.o"},
	};
	static const struct { const char *leaf, *part; } mlp[] = {
		{"gate_proj", "up"}, {"up_proj", "up"}, {"w1", "up"}, {"w3", "up"},
		{"gate_up_proj", "gate_up"}, {"down_proj", "down"}, {"w2", "down"},
		{"input_linear", "gate_up"}, {"output_linear", "down"},   /* Granite shared_mlp */
	};
	const char *dot = strrchr(fqn, '.'), *leaf = dot ? dot + 1 : fqn;

	if (!strcmp(fqn, "lm_head") || !strcmp(leaf, "lm_head"))
		return "lm_head";
	/* gate (Mixtral, Qwen, DeepSeek, OLMoE), router (gpt-oss, Llama-4,
	 * Granite-MoE, Phi-3.5-MoE in transformers 5), shared_expert_gate */
	if (!strcmp(leaf, "gate") || !strcmp(leaf, "router") || !strcmp(leaf, "shared_expert_gate"))
		return "router";
	for (size_t k = 0; k < sizeof attn / sizeof attn[0]; k++)
		if (!strcmp(leaf, attn[k].leaf))
			return attn[k].kind;
	for (size_t k = 0; k < sizeof mlp / sizeof mlp[0]; k++)
		if (!strcmp(leaf, mlp[k].leaf)) {
			bool shared = strstr(fqn, "shared_expert") || strstr(fqn, "shared_mlp");
			bool expert = !shared && index_after(fqn, "experts") >= 0;
			bool up = !strcmp(mlp[k].part, "up"), down = !strcmp(mlp[k].part, "down");
			if (shared)
				return up ? "shared_expert.up" : down ? "shared_expert.down"
				          : "shared_expert.gate_up";
			if (expert)
				return up ? "expert.up" : down ? "expert.down" : "expert.gate_up";
			return up ? "mlp.up" : down ? "mlp.down" : "mlp.gate_up";
		}
	return "other";
}

void
model_classify(Model *m)
{
	m->nblocks = 0;
	for (int i = 0; i < m->nlinears; i++) {
		Linear *l = &m->linears[i];
		l->block = index_after(l->fqn, "layers");
		if (l->block < 0)
			l->block = index_after(l->fqn, "h");
		if (l->block < 0)
			l->block = index_after(l->fqn, "blocks");
		l->expert = index_after(l->fqn, "experts");
		l->kind = kind_of(l->fqn);
		if (l->block + 1 > m->nblocks)
			m->nblocks = l->block + 1;
	}
	for (int i = 0; i < m->nlinears; i++)
		m->linears[i].nblocks = m->nblocks;
}

void
model_free(Model *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->nlinears; i++)
		free(m->linears[i].fqn);
	free(m->linears);
	free(m->name);
	free(m->path);
	free(m);
}

/* "dir/llama-3-8b.json" -> "llama-3-8b" */
static char *
basename_noext(const char *path)
{
	const char *b = strrchr(path, '/');
	char *s = xstrdup(b ? b + 1 : path), *dot = strrchr(s, '.');

	if (dot && dot != s)
		*dot = 0;
	return s;
}

/* Free m, then report; the error paths leave nothing allocated behind. */
_Noreturn void
model_fail(Model *m, const char *file, int line, const char *fmt, ...)
{
	char msg[1024], f[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(f, sizeof f, "%s", file);
	model_free(m);
	errorf(f, line, "%s", msg);
}

/* A model that names itself was checked where it did (model "name",
 * _name_or_path); one named after its file is checked here. */
static void
name_check(Model *m, const char *path)
{
	char why[64];

	if (text_fault(m->name, strlen(m->name), false, why, sizeof why))
		model_fail(m, path, 0, "the model is named after its file, whose name is not plain "
		           "text: %s; name it (model \"name\", or _name_or_path)", why);
}

/* ---- Lua model files ---------------------------------------------------- */

/*
 * Model files run in the recipes' sandbox (sandbox.c): the same libraries,
 * instruction budget and memory cap, plus two functions, linear and model.
 */
typedef struct LuaModel {
	Model *m;
	int *line;              /* source line of each linear, for duplicates */
	char **share;           /* each linear's shares_input name, or NULL */
	bool named;
} LuaModel;

static LuaModel *
getlm(lua_State *L)
{
	return lua_touserdata(L, lua_upvalueindex(1));
}

static long
check_features(lua_State *L, int arg, const char *what)
{
	int isnum;
	lua_Integer v = lua_tointegerx(L, arg, &isnum);

	if (!isnum) {
		if (lua_type(L, arg) == LUA_TNUMBER)
			return sandbox_raise(L, sandbox_caller_line(L), "%s must be an integer, "
			                     "got %s", what, lua_tostring(L, arg));
		return sandbox_raise(L, sandbox_caller_line(L), "%s must be an integer, got %s",
		                     what, luaL_typename(L, arg));
	}
	if (v <= 0 || v > MAX_FEATURES)
		return sandbox_raise(L, sandbox_caller_line(L), "%s %I out of range (1..%d)",
		                     what, v, MAX_FEATURES);
	return (long)v;
}

static const char *const linear_opts[] = {"tied", "bias", "shares_input"};

/* linear(fqn, in_features, out_features [, {tied = bool, bias = bool,
 * shares_input = "fqn of an earlier linear that reads the same tensor"}]) */
static int
l_linear(lua_State *L)
{
	LuaModel *lm = getlm(L);
	bool flag[2] = {false, false};
	const char *share = NULL;
	int line = sandbox_caller_line(L);

	if (lua_type(L, 1) != LUA_TSTRING)
		return sandbox_raise(L, line, "linear: the first argument must be the layer's "
		                     "name (a string), got %s", luaL_typename(L, 1));
	const char *fqn = lua_tostring(L, 1);
	if (!*fqn || strspn(fqn, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                         "0123456789._-") != strlen(fqn))
		return sandbox_raise(L, line, "linear: bad layer name '%s' (letters, digits, "
		                     "'.', '_' and '-' only)", fqn);
	long in = check_features(L, 2, "in_features");
	long out = check_features(L, 3, "out_features");
	if (!lua_isnoneornil(L, 4)) {
		if (!lua_istable(L, 4))
			return sandbox_raise(L, line, "linear: the fourth argument must be a table "
			                     "of options ({tied = true}), got %s", luaL_typename(L, 4));
		lua_pushnil(L);
		while (lua_next(L, 4)) {
			if (lua_type(L, -2) != LUA_TSTRING)
				return sandbox_raise(L, line, "linear: option names must be strings");
			const char *k = lua_tostring(L, -2);
			int i = !strcmp(k, "tied") ? 0 : !strcmp(k, "bias") ? 1
			        : !strcmp(k, "shares_input") ? 2 : -1;
			if (i == 2) {
				if (lua_type(L, -1) != LUA_TSTRING)
					return sandbox_raise(L, line, "linear: option 'shares_input' must be "
					                     "the name of an earlier linear, got %s",
					                     luaL_typename(L, -1));
				share = lua_tostring(L, -1);
				lua_pop(L, 1);
				continue;
			}
			if (i < 0) {
				const char *sg = suggest(k, linear_opts, 3);
				return sandbox_raise(L, line, "linear: unknown option '%s'%s%s%s", k,
				                     sg ? " (did you mean '" : "", sg ? sg : "",
				                     sg ? "'?)" : "");
			}
			if (!lua_isboolean(L, -1))
				return sandbox_raise(L, line, "linear: option '%s' must be true or "
				                     "false, got %s", k, luaL_typename(L, -1));
			flag[i] = lua_toboolean(L, -1);
			lua_pop(L, 1);
		}
	}
	if (lm->m->nlinears >= MAX_LINEARS)
		return sandbox_raise(L, line, "too many linear layers (limit %d)", MAX_LINEARS);
	int n = lm->m->nlinears;
	if (n == 0 || (n >= 64 && !(n & (n - 1)))) {   /* 64, 128, 256, ...: doubling,
	                                                   as model_add_linear grows */
		size_t cap = n ? 2 * (size_t)n : 64;
		lm->line = xrealloc(lm->line, cap * sizeof *lm->line);
		lm->share = xrealloc(lm->share, cap * sizeof *lm->share);
	}
	lm->line[lm->m->nlinears] = line;
	lm->share[lm->m->nlinears] = share ? xstrdup(share) : NULL;
	model_add_linear(lm->m, fqn, in, out, flag[0], flag[1]);
	return 0;
}

/* model "name" */
static int
l_model(lua_State *L)
{
	LuaModel *lm = getlm(L);
	int line = sandbox_caller_line(L);

	if (lua_type(L, 1) != LUA_TSTRING)
		return sandbox_raise(L, line, "model: the name must be a string, got %s",
		                     luaL_typename(L, 1));
	size_t n;
	const char *name = lua_tolstring(L, 1, &n);
	char why[64];
	if (lm->named)
		return sandbox_raise(L, line, "model name given twice");
	if (!*name)
		return sandbox_raise(L, line, "model name must not be empty");
	if (text_fault(name, n, false, why, sizeof why))   /* it reaches manifest.json and C */
		return sandbox_raise(L, line, "model name: %s", why);
	free(lm->m->name);
	lm->m->name = xstrdup(name);
	lm->named = true;
	return 0;
}

static const Model *sort_model;

static void
lm_free(LuaModel *lm)
{
	for (int i = 0; lm->share && i < lm->m->nlinears; i++)
		free(lm->share[i]);
	free(lm->share);
	free(lm->line);
}

/* shares_input names -> indices: an earlier linear with the same
 * in_features (the same tensor has one width). */
static void
resolve_shares(Model *m, LuaModel *lm)
{
	NameTab at;
	char what[700];
	int bad = -1;

	ir_names_init(&at, (size_t)m->nlinears);
	for (int i = 0; i < m->nlinears && bad < 0; i++) {
		const char *s = lm->share[i];
		int j = s ? ir_names_get(&at, s) : -1;
		if (s && j < 0) {
			snprintf(what, sizeof what, "linear '%s': shares_input '%.200s' is not an earlier "
			         "linear", m->linears[i].fqn, s);
			bad = i;
		} else if (s && m->linears[j].in_features != m->linears[i].in_features) {
			snprintf(what, sizeof what, "linear '%s' (in_features %ld) cannot share its input "
			         "with '%s' (in_features %ld)", m->linears[i].fqn, m->linears[i].in_features,
			         m->linears[j].fqn, m->linears[j].in_features);
			bad = i;
		} else if (s)
			model_share_input(m, i, j);
		ir_names_put(&at, m->linears[i].fqn, i);
	}
	ir_names_free(&at);
	if (bad >= 0) {
		int line = lm->line[bad];
		lm_free(lm);
		model_fail(m, m->path, line, "%s", what);
	}
}

static int
cmp_idx(const void *a, const void *b)
{
	int i = *(const int *)a, j = *(const int *)b;
	int c = strcmp(sort_model->linears[i].fqn, sort_model->linears[j].fqn);

	return c ? c : i - j;
}

static char *read_model_text(Model *m);

static void
load_lua(Model *m)
{
	LuaModel lm = {.m = m};
	char *text = read_model_text(m);

	/* a recipe given where the model goes */
	if (!strstr(text, "linear") && (strstr(text, "recipe \"") || strstr(text, "recipe(")
	                                 || strstr(text, "recipe {") || strstr(text, "recipe'"))) {
		free(text);
		model_fail(m, m->path, 0, "this is a recipe (it calls recipe), not a model; the model "
		           "comes after --model: precc COMMAND RECIPE.lua --model MODEL (are the two "
		           "swapped?)");
	}
	Sandbox *sb = sandbox_new(m->path, "model file");
	SandboxError err = {.line = 0};
	lua_State *L = sb->L;
	bool ok;

	lua_pushlightuserdata(L, &lm);
	lua_pushcclosure(L, l_linear, 1);
	lua_setglobal(L, "linear");
	lua_pushlightuserdata(L, &lm);
	lua_pushcclosure(L, l_model, 1);
	lua_setglobal(L, "model");
	ok = sandbox_load(sb, text, strlen(text), &err) &&
	     sandbox_call(sb, 0, 0, sandbox_limits.load_steps, &err);
	sandbox_free(sb);
	free(text);
	if (!ok) {
		lm_free(&lm);
		model_fail(m, err.file, err.line, "%s", err.msg);
	}
	if (m->nlinears == 0) {
		lm_free(&lm);
		model_fail(m, m->path, 0, "the model declares no linear layers "
		                          "(write linear(\"name\", in_features, out_features))");
	}
	/* Duplicate names: sort indices by name, report the later line. */
	int *idx = xmalloc(m->nlinears * sizeof *idx);
	for (int i = 0; i < m->nlinears; i++)
		idx[i] = i;
	sort_model = m;
	qsort(idx, m->nlinears, sizeof *idx, cmp_idx);
	for (int i = 1; i < m->nlinears; i++)
		if (!strcmp(m->linears[idx[i]].fqn, m->linears[idx[i - 1]].fqn)) {
			char what[600];
			snprintf(what, sizeof what, "layer '%s' declared twice (first on line %d)",
			         m->linears[idx[i]].fqn, lm.line[idx[i - 1]]);
			int line = lm.line[idx[i]];
			free(idx);
			lm_free(&lm);
			model_fail(m, m->path, line, "%s", what);
		}
	free(idx);
	resolve_shares(m, &lm);
	lm_free(&lm);
}

static char *
read_model_text(Model *m)
{
	size_t n;
	bool opened;
	char *buf = read_file(m->path, MAX_FILE, &n, &opened);

	if (!buf && !opened)
		model_fail(m, m->path, 0, "cannot open: %s", strerror(errno));
	if (!buf && errno == EFBIG)
		model_fail(m, m->path, 0, "file larger than %d MiB", MAX_FILE >> 20);
	if (!buf)
		model_fail(m, m->path, 0, "read error");
	if (strlen(buf) != n) {
		free(buf);
		model_fail(m, m->path, 0, "not a text file (contains NUL bytes)");
	}
	return buf;
}

static bool
ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

Model *
model_load(const char *path)
{
	Model *m = xcalloc(1, sizeof *m);
	struct stat st;

	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		/* A HF checkpoint directory: read its config.json. */
		size_t n = strlen(path) + 16;
		m->path = xmalloc(n);
		snprintf(m->path, n, "%s/config.json", path);
		m->name = basename_noext(path);
		hf_load(m, read_model_text(m));
		name_check(m, path);
		model_classify(m);
		return m;
	}
	m->path = xstrdup(path);
	m->name = basename_noext(path);
	if (ends_with(path, ".lua"))
		load_lua(m);
	else if (ends_with(path, ".json"))
		hf_load(m, read_model_text(m));
	else
		model_fail(m, path, 0, "a model is a Lua file (.lua) or a HuggingFace "
		                       "config.json (.json)");
	name_check(m, path);
	model_classify(m);
	return m;
}
