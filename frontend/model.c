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
 * JSON form: a Llama / Mistral / Qwen2 / Qwen3 decoder config.json; every
 * linear is derived under HF's own module names, in module order (q, k, v,
 * o, gate, up, down per layer, then lm_head). Both forms give identical
 * Models for the same network.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cJSON.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "recipe.h"
#include "sandbox.h"

enum {
	MAX_FEATURES = 1 << 24,     /* 16M: larger than any real hidden/vocab */
	MAX_LAYERS = 4096,
	MAX_LINEARS = 1 << 16,
	MAX_FILE = 16 << 20,
};

static void
add_linear(Model *m, const char *fqn, long in, long out, bool tied, bool bias)
{
	if (m->nlinears % 64 == 0)
		m->linears = xrealloc(m->linears, (m->nlinears + 64) * sizeof *m->linears);
	m->linears[m->nlinears++] = (Linear){
		.fqn = xstrdup(fqn), .in_features = in, .out_features = out,
		.tied = tied, .bias = bias,
	};
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
static _Noreturn void
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

/* ---- Lua model files ---------------------------------------------------- */

/*
 * Model files run in the recipes' sandbox (sandbox.c): the same libraries,
 * instruction budget and memory cap, plus two functions, linear and model.
 */
typedef struct LuaModel {
	Model *m;
	int *line;              /* source line of each linear, for duplicates */
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

static const char *const linear_opts[] = {"tied", "bias"};

/* linear(fqn, in_features, out_features [, {tied = bool, bias = bool}]) */
static int
l_linear(lua_State *L)
{
	LuaModel *lm = getlm(L);
	bool flag[2] = {false, false};
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
			int i = !strcmp(k, "tied") ? 0 : !strcmp(k, "bias") ? 1 : -1;
			if (i < 0) {
				const char *sg = suggest(k, linear_opts, 2);
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
	if (lm->m->nlinears % 64 == 0)
		lm->line = xrealloc(lm->line, (lm->m->nlinears + 64) * sizeof *lm->line);
	lm->line[lm->m->nlinears] = line;
	add_linear(lm->m, fqn, in, out, flag[0], flag[1]);
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
	const char *name = lua_tostring(L, 1);
	if (lm->named)
		return sandbox_raise(L, line, "model name given twice");
	if (!*name)
		return sandbox_raise(L, line, "model name must not be empty");
	free(lm->m->name);
	lm->m->name = xstrdup(name);
	lm->named = true;
	return 0;
}

static const Model *sort_model;

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
	Sandbox *sb = sandbox_new(m->path);
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
	     sandbox_call(sb, 0, 0, SANDBOX_LOAD_STEPS, &err);
	sandbox_free(sb);
	free(text);
	if (!ok) {
		free(lm.line);
		model_fail(m, err.file, err.line, "%s", err.msg);
	}
	if (m->nlinears == 0) {
		free(lm.line);
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
			free(lm.line);
			model_fail(m, m->path, line, "%s", what);
		}
	free(idx);
	free(lm.line);
}

/* ---- HuggingFace config.json -------------------------------------------- */

typedef struct Json {
	Model *m;
	char *text;
	cJSON *root;
} Json;

static _Noreturn void
json_fail(Json *j, int line, const char *fmt, ...)
{
	char msg[1024], f[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(f, sizeof f, "%s", j->m->path);
	cJSON_Delete(j->root);
	free(j->text);
	model_free(j->m);
	errorf(f, line, "%s", msg);
}

/* Line of the first top-level occurrence of "key": in the text, or 0. */
static int
key_line(const Json *j, const char *key)
{
	char pat[128];
	int depth = 0, line = 1;
	size_t n = (size_t)snprintf(pat, sizeof pat, "\"%s\"", key);

	for (const char *p = j->text; *p; p++) {
		if (*p == '\n')
			line++;
		else if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']')
			depth--;
		else if (*p == '"') {
			if (depth == 1 && !strncmp(p, pat, n)) {
				const char *q = p + n;
				while (isspace((unsigned char)*q))
					q++;
				if (*q == ':')
					return line;
			}
			for (p++; *p && *p != '"'; p++)
				if (*p == '\\' && p[1])
					p++;
				else if (*p == '\n')
					line++;
			if (!*p)
				break;
		}
	}
	return 0;
}

static const char *
json_type(const cJSON *v)
{
	return cJSON_IsString(v) ? "a string" : cJSON_IsBool(v) ? "a boolean"
	     : cJSON_IsNull(v) ? "null" : cJSON_IsArray(v) ? "an array"
	     : cJSON_IsObject(v) ? "an object" : cJSON_IsNumber(v) ? "a number" : "invalid";
}

/* A positive integer key; def < 0 means required. null counts as absent. */
static long
json_int(Json *j, const char *key, long def, long max)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j->root, key);

	if (!v || cJSON_IsNull(v)) {
		if (def < 0)
			json_fail(j, 0, "missing key '%s'", key);
		return def;
	}
	if (!cJSON_IsNumber(v))
		json_fail(j, key_line(j, key), "key '%s' must be a positive integer, not %s",
		          key, json_type(v));
	double d = v->valuedouble;
	if (d != floor(d))
		json_fail(j, key_line(j, key), "key '%s' must be an integer, got %g", key, d);
	if (d <= 0 || d > max)
		json_fail(j, key_line(j, key), "key '%s' is %.0f, expected 1..%ld", key, d, max);
	return (long)d;
}

static bool
json_bool(Json *j, const char *key, bool def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j->root, key);

	if (!v || cJSON_IsNull(v))
		return def;
	if (!cJSON_IsBool(v))
		json_fail(j, key_line(j, key), "key '%s' must be true or false, not %s",
		          key, json_type(v));
	return cJSON_IsTrue(v);
}

static const char *
json_str(Json *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j->root, key);

	if (!v || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsString(v))
		json_fail(j, key_line(j, key), "key '%s' must be a string, not %s",
		          key, json_type(v));
	return v->valuestring;
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

static const char *const dense_types[] = {"llama", "mistral", "qwen2", "qwen3"};
static const char *const moe_types[] = {
	"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "dbrx",
	"olmoe", "jamba", "granitemoe", "phimoe", "llama4",
};
static const char *const moe_keys[] = {
	"num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size",
};

static void
check_architecture(Json *j)
{
	const char *type = json_str(j, "model_type");
	const cJSON *arch = cJSON_GetObjectItemCaseSensitive(j->root, "architectures");
	const char *a0 = NULL;

	if (arch && !cJSON_IsNull(arch)) {
		if (!cJSON_IsArray(arch) || !cJSON_IsString(cJSON_GetArrayItem(arch, 0)))
			json_fail(j, key_line(j, "architectures"),
			          "key 'architectures' must be an array of strings, not %s",
			          json_type(arch));
		a0 = cJSON_GetArrayItem(arch, 0)->valuestring;
	}
	for (size_t i = 0; type && i < sizeof moe_types / sizeof moe_types[0]; i++)
		if (!strcmp(type, moe_types[i]))
			json_fail(j, key_line(j, "model_type"),
			          "model_type '%s' is a mixture-of-experts model; precc reads dense "
			          "decoder configs (llama, mistral, qwen2, qwen3) — list its layers "
			          "in a Lua model file instead", type);
	for (size_t i = 0; i < sizeof moe_keys / sizeof moe_keys[0]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(j->root, moe_keys[i]);
		if (v && cJSON_IsNumber(v) && v->valuedouble > 0)
			json_fail(j, key_line(j, moe_keys[i]),
			          "key '%s' says this is a mixture-of-experts model; precc reads "
			          "dense decoder configs (llama, mistral, qwen2, qwen3) — list its "
			          "layers in a Lua model file instead", moe_keys[i]);
	}
	if (a0 && strstr(a0, "Moe"))
		json_fail(j, key_line(j, "architectures"),
		          "architecture '%s' is a mixture-of-experts model; precc reads dense "
		          "decoder configs (llama, mistral, qwen2, qwen3)", a0);
	if (type) {
		for (size_t i = 0; i < sizeof dense_types / sizeof dense_types[0]; i++)
			if (!strcmp(type, dense_types[i]))
				return;
		warnf(j->m->path, key_line(j, "model_type"),
		      "model_type '%s' is not one of llama, mistral, qwen2, qwen3; "
		      "deriving Llama-style layers", type);
	} else if (!a0 || !(strstr(a0, "Llama") || strstr(a0, "Mistral") || strstr(a0, "Qwen")))
		warnf(j->m->path, 0, "no model_type; deriving Llama-style layers");
}

static void
load_json(Model *m)
{
	Json j = {.m = m};
	const char *end = NULL;

	j.text = read_model_text(m);
	j.root = cJSON_ParseWithOpts(j.text, &end, true);
	if (!j.root) {
		const char *at = end ? end : cJSON_GetErrorPtr();
		int line = 1, col = 1;
		char where[600];
		if (!at)
			at = j.text;
		for (const char *p = j.text; p < at && *p; p++)
			if (*p == '\n')
				line++, col = 1;
			else
				col++;
		snprintf(where, sizeof where, "%s:%d", m->path, line);
		char near[24] = "";
		size_t k = 0;
		for (const char *p = at; *p && *p != '\n' && k < 16; p++)
			near[k++] = *p;
		near[k] = 0;
		bool at_end = !*at;
		free(j.text);
		model_free(m);
		if (!at_end)
			errorf(where, col, "malformed JSON near '%s'", near);
		errorf(where, col, "malformed JSON: unexpected end of input");
	}
	if (!cJSON_IsObject(j.root))
		json_fail(&j, 0, "a config.json must be a JSON object, not %s", json_type(j.root));
	check_architecture(&j);

	long hidden = json_int(&j, "hidden_size", -1, MAX_FEATURES);
	long inter = json_int(&j, "intermediate_size", -1, MAX_FEATURES);
	long layers = json_int(&j, "num_hidden_layers", -1, MAX_LAYERS);
	long heads = json_int(&j, "num_attention_heads", -1, 65536);
	long kv = json_int(&j, "num_key_value_heads", heads, 65536);
	long vocab = json_int(&j, "vocab_size", -1, MAX_FEATURES);
	long head_dim = json_int(&j, "head_dim", 0, 65536);
	bool tied = json_bool(&j, "tie_word_embeddings", false);
	const char *type = json_str(&j, "model_type");
	/* Qwen2 always has q/k/v biases; Llama/Qwen3 have attention_bias. */
	bool qkv_bias = json_bool(&j, "attention_bias", type && !strcmp(type, "qwen2"));
	bool o_bias = json_bool(&j, "attention_bias", false);
	bool mlp_bias = json_bool(&j, "mlp_bias", false);

	if (kv > heads || heads % kv)
		json_fail(&j, key_line(&j, "num_key_value_heads"),
		          "num_attention_heads %ld is not a multiple of num_key_value_heads %ld",
		          heads, kv);
	if (!head_dim) {
		if (hidden % heads)
			json_fail(&j, key_line(&j, "num_attention_heads"),
			          "hidden_size %ld is not a multiple of num_attention_heads %ld "
			          "(and there is no head_dim)", hidden, heads);
		head_dim = hidden / heads;
	}
	if (heads * head_dim > MAX_FEATURES)
		json_fail(&j, key_line(&j, "num_attention_heads"),
		          "num_attention_heads x head_dim = %ld, expected at most %d",
		          heads * head_dim, MAX_FEATURES);
	if (layers * 7 + 1 > MAX_LINEARS)
		json_fail(&j, key_line(&j, "num_hidden_layers"), "too many layers");

	const char *name = json_str(&j, "_name_or_path");
	if (name && *name) {
		free(m->name);
		m->name = xstrdup(name);
	}
	for (long i = 0; i < layers; i++) {
		char fqn[96];
#define L(part, in, out, b) \
		(snprintf(fqn, sizeof fqn, "model.layers.%ld." part, i), \
		 add_linear(m, fqn, in, out, false, b))
		L("self_attn.q_proj", hidden, heads * head_dim, qkv_bias);
		L("self_attn.k_proj", hidden, kv * head_dim, qkv_bias);
		L("self_attn.v_proj", hidden, kv * head_dim, qkv_bias);
		L("self_attn.o_proj", heads * head_dim, hidden, o_bias);
		L("mlp.gate_proj", hidden, inter, mlp_bias);
		L("mlp.up_proj", hidden, inter, mlp_bias);
		L("mlp.down_proj", inter, hidden, mlp_bias);
#undef L
	}
	add_linear(m, "lm_head", hidden, vocab, tied, false);
	cJSON_Delete(j.root);
	free(j.text);
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
		load_json(m);
		return m;
	}
	m->path = xstrdup(path);
	m->name = basename_noext(path);
	if (ends_with(path, ".lua"))
		load_lua(m);
	else if (ends_with(path, ".json"))
		load_json(m);
	else
		model_fail(m, path, 0, "a model is a Lua file (.lua) or a HuggingFace "
		                       "config.json (.json)");
	return m;
}
