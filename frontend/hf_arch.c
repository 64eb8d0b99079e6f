/*
 * hf_arch.c — a HuggingFace config.json as linear layers, driven by one
 * table of architectures (docs/models.md). Each entry says, per
 * model_type, how attention and the MLP are built (separate or fused
 * projections, MLA), which MoE layout it has, the tie_word_embeddings
 * default of its transformers config class, and where the text model's
 * keys live (Gemma-3 nests them under text_config).
 *
 * Module names are transformers' (modeling_<type>.py in 4.x, which are
 * also the checkpoint keys): Mixtral block_sparse_moe.experts.E.w1/w2/w3
 * with router block_sparse_moe.gate; Qwen2-MoE mlp.experts.E.*_proj,
 * mlp.shared_expert.*, mlp.shared_expert_gate, router mlp.gate; DeepSeek
 * self_attn.q_a_proj/q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_b_proj,
 * mlp.experts.E.*, mlp.gate, mlp.shared_experts.*. Linears come in module
 * order. An unknown model_type is an error naming the known ones
 * (PRECC_MODEL_TYPE=llama reads it as Llama).
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "recipe.h"

typedef enum { ATTN_GQA, ATTN_QKV, ATTN_MLA } Attn;
typedef enum { MLP_GATED, MLP_GATE_UP } Mlp;
typedef enum { MOE_NONE, MOE_MIXTRAL, MOE_QWEN2, MOE_QWEN3, MOE_DEEPSEEK } Moe;

typedef struct Arch {
	const char *type;         /* model_type */
	Attn attn;
	Mlp mlp;
	Moe moe;
	bool tied;                /* tie_word_embeddings when the config omits it */
	bool qkv_bias;            /* q/k/v bias when the config says nothing */
	const char *nest;         /* object holding the text model's keys, or NULL */
	const char *prefix;       /* module path of the decoder layers' parent */
} Arch;

/* tied: the default in transformers' configuration_<type>.py (Gemma,
 * Gemma-2 and Gemma-3 True, the others False); qkv_bias: Qwen2Attention
 * and Qwen2MoeAttention have q/k/v biases (qkv_bias=True). */
static const Arch archs[] = {
	{"llama", ATTN_GQA, MLP_GATED, MOE_NONE, false, false, NULL, "model."},
	{"mistral", ATTN_GQA, MLP_GATED, MOE_NONE, false, false, NULL, "model."},
	{"qwen2", ATTN_GQA, MLP_GATED, MOE_NONE, false, true, NULL, "model."},
	{"qwen3", ATTN_GQA, MLP_GATED, MOE_NONE, false, false, NULL, "model."},
	{"phi3", ATTN_QKV, MLP_GATE_UP, MOE_NONE, false, false, NULL, "model."},
	{"gemma", ATTN_GQA, MLP_GATED, MOE_NONE, true, false, NULL, "model."},
	{"gemma2", ATTN_GQA, MLP_GATED, MOE_NONE, true, false, NULL, "model."},
	{"gemma3_text", ATTN_GQA, MLP_GATED, MOE_NONE, true, false, NULL, "model."},
	{"gemma3", ATTN_GQA, MLP_GATED, MOE_NONE, true, false, "text_config",
	 "model.language_model."},
	{"mixtral", ATTN_GQA, MLP_GATED, MOE_MIXTRAL, false, false, NULL, "model."},
	{"qwen2_moe", ATTN_GQA, MLP_GATED, MOE_QWEN2, false, true, NULL, "model."},
	{"qwen3_moe", ATTN_GQA, MLP_GATED, MOE_QWEN3, false, false, NULL, "model."},
	{"deepseek_v2", ATTN_MLA, MLP_GATED, MOE_DEEPSEEK, false, false, NULL, "model."},
	{"deepseek_v3", ATTN_MLA, MLP_GATED, MOE_DEEPSEEK, false, false, NULL, "model."},
};
#define NARCH (int)(sizeof archs / sizeof archs[0])

const char *const hf_known_types = "llama, mistral, qwen2, qwen3, phi3, gemma, gemma2, "
                                   "gemma3, gemma3_text, mixtral, qwen2_moe, qwen3_moe, "
                                   "deepseek_v2, deepseek_v3";

typedef struct Json {
	Model *m;
	char *text;
	cJSON *root;
	const cJSON *cfg;         /* the object keys are read from */
	const char *nest;         /* its key ("text_config"), or NULL */
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

/* Line of "key" as a direct member of the object that starts at `from`
 * (the text's '{' of the config, or of text_config), or 0. */
static int
key_line_in(const char *text, const char *from, const char *key)
{
	char pat[128];
	int depth = 0, line = 1;
	size_t n = (size_t)snprintf(pat, sizeof pat, "\"%s\"", key);
	const char *p;

	for (p = text; p < from; p++)
		line += *p == '\n';
	for (; *p; p++) {
		if (*p == '\n')
			line++;
		else if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']') {
			if (--depth == 0)
				return 0;
		} else if (*p == '"') {
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

/* Where the object of the key path starts: the text's first '{', or the
 * '{' after "nest": at the top level. */
static const char *
object_start(const Json *j)
{
	const char *p = strchr(j->text, '{');
	int line;

	if (!j->nest || !p)
		return p ? p : j->text;
	line = key_line_in(j->text, p, j->nest);
	/* walk to that line, then to the '{' after the key */
	const char *q = j->text;
	for (int l = 1; l < line && *q; q++)
		l += *q == '\n';
	q = strstr(q, j->nest);
	q = q ? strchr(q, '{') : NULL;
	return q ? q : p;
}

static int
key_line(const Json *j, const char *key)
{
	return key_line_in(j->text, object_start(j), key);
}

/* "text_config.hidden_size" or "hidden_size", for messages. */
static const char *
kpath(const Json *j, const char *key)
{
	static char buf[4][160];
	static int k;
	char *s = buf[k++ & 3];

	snprintf(s, sizeof buf[0], "%s%s%s", j->nest ? j->nest : "", j->nest ? "." : "", key);
	return s;
}

static const char *
json_type(const cJSON *v)
{
	return cJSON_IsString(v) ? "a string" : cJSON_IsBool(v) ? "a boolean"
	     : cJSON_IsNull(v) ? "null" : cJSON_IsArray(v) ? "an array"
	     : cJSON_IsObject(v) ? "an object" : cJSON_IsNumber(v) ? "a number" : "invalid";
}

static const cJSON *
get(Json *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j->cfg, key);

	return v && !cJSON_IsNull(v) ? v : NULL;
}

/* A positive integer key; def < 0 means required, def == 0 that 0 is
 * allowed (n_shared_experts: 0). null counts as absent. */
static long
json_int(Json *j, const char *key, long def, long max)
{
	const cJSON *v = get(j, key);

	if (!v) {
		if (def < 0)
			json_fail(j, 0, "missing key '%s'", kpath(j, key));
		return def;
	}
	if (!cJSON_IsNumber(v))
		json_fail(j, key_line(j, key), "key '%s' must be a positive integer, not %s",
		          kpath(j, key), json_type(v));
	double d = v->valuedouble;
	if (d != floor(d))
		json_fail(j, key_line(j, key), "key '%s' must be an integer, got %g", kpath(j, key), d);
	if (d < (def == 0 ? 0 : 1) || d > max)
		json_fail(j, key_line(j, key), "key '%s' is %.0f, expected %d..%ld", kpath(j, key), d,
		          def == 0 ? 0 : 1, max);
	return (long)d;
}

static bool
json_bool(Json *j, const char *key, bool def)
{
	const cJSON *v = get(j, key);

	if (!v)
		return def;
	if (!cJSON_IsBool(v))
		json_fail(j, key_line(j, key), "key '%s' must be true or false, not %s",
		          kpath(j, key), json_type(v));
	return cJSON_IsTrue(v);
}

static const char *
json_str_at(Json *j, const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!v || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsString(v))
		json_fail(j, key_line_in(j->text, strchr(j->text, '{'), key),
		          "key '%s' must be a string, not %s", key, json_type(v));
	return v->valuestring;
}

/* mlp_only_layers: an array of layer indices (Qwen-MoE); is i in it? */
static bool
in_int_array(Json *j, const char *key, long i, long layers)
{
	const cJSON *v = get(j, key), *e;

	if (!v)
		return false;
	if (!cJSON_IsArray(v))
		json_fail(j, key_line(j, key), "key '%s' must be an array of layer indices, not %s",
		          kpath(j, key), json_type(v));
	cJSON_ArrayForEach(e, v) {
		if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble)
		    || e->valuedouble < 0 || e->valuedouble >= layers)
			json_fail(j, key_line(j, key), "key '%s' must hold layer indices 0..%ld",
			          kpath(j, key), layers - 1);
		if ((long)e->valuedouble == i)
			return true;
	}
	return false;
}

static const Arch *
find_arch(Json *j, const char *type)
{
	const char *as = getenv("PRECC_MODEL_TYPE");

	for (int k = 0; type && k < NARCH; k++)
		if (!strcmp(archs[k].type, type))
			return &archs[k];
	if (as && *as) {
		for (int k = 0; k < NARCH; k++)
			if (!strcmp(archs[k].type, as))
				return &archs[k];
		json_fail(j, 0, "PRECC_MODEL_TYPE=%s is not a known model_type (%s)", as,
		          hf_known_types);
	}
	const char *names[NARCH];
	for (int k = 0; k < NARCH; k++)
		names[k] = archs[k].type;
	const char *sg = type ? suggest(type, names, NARCH) : NULL;
	if (!type)
		json_fail(j, 0, "no model_type; precc knows %s (PRECC_MODEL_TYPE=llama reads the "
		          "config as Llama)", hf_known_types);
	json_fail(j, key_line_in(j->text, strchr(j->text, '{'), "model_type"),
	          "unknown model_type '%s'%s%s%s; precc knows %s (PRECC_MODEL_TYPE=llama reads "
	          "it as Llama)", type, sg ? " (did you mean '" : "", sg ? sg : "", sg ? "'?)" : "",
	          hf_known_types);
}

/* The shapes every architecture shares, read once. */
typedef struct Dims {
	long hidden, inter, layers, heads, kv, vocab, head_dim;
	bool qkv_bias, o_bias, mlp_bias, tied;
	/* MoE */
	long experts, moe_inter, shared_inter, n_shared, first_dense, moe_freq, sparse_step;
	/* MLA */
	long q_lora, kv_lora, rope_dim, nope_dim, v_dim;
} Dims;

/* Adds one linear; returns its index. */
static int
add(Json *j, Dims *d, const char *pre, long i, const char *part, long in, long out, bool b)
{
	char fqn[160];

	if (j->m->nlinears >= MODEL_MAX_LINEARS)
		json_fail(j, key_line(j, "num_hidden_layers"), "the config has more than %d linear "
		          "layers (the limit)", MODEL_MAX_LINEARS);
	snprintf(fqn, sizeof fqn, "%slayers.%ld.%s", pre, i, part);
	model_add_linear(j->m, fqn, in, out, false, b);
	(void)d;
	return j->m->nlinears - 1;
}

/* gate and up read the MLP's input; so does `with` (the MoE router that
 * feeds a shared expert the same hidden state), unless -1 */
static void
add_mlp(Json *j, Dims *d, const char *pre, long i, const char *mod, long inter, bool gate_up,
        int with)
{
	char p[96];
	int g;

	snprintf(p, sizeof p, "%s.%s", mod, gate_up ? "gate_up_proj" : "gate_proj");
	g = add(j, d, pre, i, p, d->hidden, gate_up ? 2 * inter : inter, d->mlp_bias);
	if (with >= 0)
		model_share_input(j->m, g, with);
	if (!gate_up) {
		snprintf(p, sizeof p, "%s.up_proj", mod);
		model_share_input(j->m, add(j, d, pre, i, p, d->hidden, inter, d->mlp_bias), g);
	}
	snprintf(p, sizeof p, "%s.down_proj", mod);
	add(j, d, pre, i, p, inter, d->hidden, d->mlp_bias);
}

static void
add_attn(Json *j, Dims *d, const Arch *a, const char *pre, long i)
{
	long hd = d->head_dim, q = d->heads * hd, kv = d->kv * hd;

	switch (a->attn) {
	case ATTN_GQA: {  /* q, k and v read the same normed hidden state */
		int qi = add(j, d, pre, i, "self_attn.q_proj", d->hidden, q, d->qkv_bias);
		model_share_input(j->m, add(j, d, pre, i, "self_attn.k_proj", d->hidden, kv, d->qkv_bias), qi);
		model_share_input(j->m, add(j, d, pre, i, "self_attn.v_proj", d->hidden, kv, d->qkv_bias), qi);
		add(j, d, pre, i, "self_attn.o_proj", q, d->hidden, d->o_bias);
		break;
	}
	case ATTN_QKV:    /* Phi3Attention: op_size = q + 2 kv */
		add(j, d, pre, i, "self_attn.qkv_proj", d->hidden, q + 2 * kv, false);
		add(j, d, pre, i, "self_attn.o_proj", q, d->hidden, false);
		break;
	case ATTN_MLA: {  /* DeepseekV2Attention */
		long qk = d->nope_dim + d->rope_dim;
		int qi;   /* q_a (or q) and kv_a read the hidden state */
		if (d->q_lora) {
			qi = add(j, d, pre, i, "self_attn.q_a_proj", d->hidden, d->q_lora, d->o_bias);
			add(j, d, pre, i, "self_attn.q_b_proj", d->q_lora, d->heads * qk, false);
		} else
			qi = add(j, d, pre, i, "self_attn.q_proj", d->hidden, d->heads * qk, false);
		model_share_input(j->m, add(j, d, pre, i, "self_attn.kv_a_proj_with_mqa", d->hidden,
		                            d->kv_lora + d->rope_dim, d->o_bias), qi);
		add(j, d, pre, i, "self_attn.kv_b_proj", d->kv_lora,
		    d->heads * (d->nope_dim + d->v_dim), false);
		add(j, d, pre, i, "self_attn.o_proj", d->heads * d->v_dim, d->hidden, d->o_bias);
		break;
	}
	}
}

static void
add_experts(Json *j, Dims *d, const char *pre, long i, const char *mod, bool mixtral)
{
	char p[128];

	for (long e = 0; e < d->experts; e++)
		if (mixtral) {   /* MixtralBlockSparseTop2MLP: w1 gate, w2 down, w3 up */
			snprintf(p, sizeof p, "%s.experts.%ld.w1", mod, e);
			int w1 = add(j, d, pre, i, p, d->hidden, d->moe_inter, false);
			snprintf(p, sizeof p, "%s.experts.%ld.w2", mod, e);
			add(j, d, pre, i, p, d->moe_inter, d->hidden, false);
			snprintf(p, sizeof p, "%s.experts.%ld.w3", mod, e);
			model_share_input(j->m, add(j, d, pre, i, p, d->hidden, d->moe_inter, false), w1);
		} else {   /* each expert its own routed tokens: no sharing across experts */
			snprintf(p, sizeof p, "%s.experts.%ld", mod, e);
			add_mlp(j, d, pre, i, p, d->moe_inter, false, -1);
		}
}

/* Is layer i a MoE layer? Each family has its own rule (modeling_*.py). */
static bool
moe_layer(Json *j, const Arch *a, const Dims *d, long i)
{
	switch (a->moe) {
	case MOE_NONE:
		return false;
	case MOE_MIXTRAL:
		return true;
	case MOE_QWEN2:
	case MOE_QWEN3:   /* Qwen2MoeDecoderLayer */
		return !in_int_array(j, "mlp_only_layers", i, d->layers)
		    && (i + 1) % d->sparse_step == 0;
	case MOE_DEEPSEEK:
		return i >= d->first_dense && i % d->moe_freq == 0;
	}
	return false;
}

static void
read_dims(Json *j, const Arch *a, Dims *d)
{
	const long F = MODEL_MAX_FEATURES;

	d->hidden = json_int(j, "hidden_size", -1, F);
	d->layers = json_int(j, "num_hidden_layers", -1, MODEL_MAX_LAYERS);
	d->heads = json_int(j, "num_attention_heads", -1, 65536);
	d->kv = json_int(j, "num_key_value_heads", d->heads, 65536);
	d->vocab = json_int(j, "vocab_size", -1, F);
	d->head_dim = json_int(j, "head_dim", 0, 65536);
	d->tied = json_bool(j, "tie_word_embeddings", a->tied);
	d->o_bias = json_bool(j, "attention_bias", false);
	d->qkv_bias = a->moe == MOE_QWEN2 ? json_bool(j, "qkv_bias", a->qkv_bias)
	                                  : json_bool(j, "attention_bias", a->qkv_bias);
	d->mlp_bias = json_bool(j, "mlp_bias", false);
	if (d->kv > d->heads || d->heads % d->kv)
		json_fail(j, key_line(j, "num_key_value_heads"),
		          "num_attention_heads %ld is not a multiple of num_key_value_heads %ld",
		          d->heads, d->kv);
	if (!d->head_dim && a->attn != ATTN_MLA) {
		if (d->hidden % d->heads)
			json_fail(j, key_line(j, "num_attention_heads"),
			          "hidden_size %ld is not a multiple of num_attention_heads %ld "
			          "(and there is no head_dim)", d->hidden, d->heads);
		d->head_dim = d->hidden / d->heads;
	}
	if (d->heads * (d->head_dim ? d->head_dim : 1) > F)
		json_fail(j, key_line(j, "num_attention_heads"),
		          "num_attention_heads x head_dim = %ld, expected at most %ld",
		          d->heads * d->head_dim, F);
	switch (a->moe) {
	case MOE_NONE:
		d->inter = json_int(j, "intermediate_size", -1, F);
		break;
	case MOE_MIXTRAL:
		d->inter = d->moe_inter = json_int(j, "intermediate_size", -1, F);
		d->experts = json_int(j, "num_local_experts", -1, 4096);
		break;
	case MOE_QWEN2:
	case MOE_QWEN3:
		d->inter = json_int(j, "intermediate_size", -1, F);
		d->experts = json_int(j, "num_experts", -1, 4096);
		d->moe_inter = json_int(j, "moe_intermediate_size", -1, F);
		d->sparse_step = json_int(j, "decoder_sparse_step", 1, MODEL_MAX_LAYERS);
		if (a->moe == MOE_QWEN2)
			d->shared_inter = json_int(j, "shared_expert_intermediate_size", 0, F);
		break;
	case MOE_DEEPSEEK:
		d->inter = json_int(j, "intermediate_size", -1, F);
		d->experts = json_int(j, "n_routed_experts", -1, 4096);
		d->moe_inter = json_int(j, "moe_intermediate_size", -1, F);
		d->n_shared = json_int(j, "n_shared_experts", 0, 4096);
		d->first_dense = json_int(j, "first_k_dense_replace", 0, MODEL_MAX_LAYERS);
		d->moe_freq = json_int(j, "moe_layer_freq", 1, MODEL_MAX_LAYERS);
		if (d->first_dense > d->layers)
			json_fail(j, key_line(j, "first_k_dense_replace"), "first_k_dense_replace %ld is "
			          "more than num_hidden_layers %ld", d->first_dense, d->layers);
		break;
	}
	if (a->attn == ATTN_MLA) {
		d->q_lora = json_int(j, "q_lora_rank", 0, F);      /* null: q_proj */
		d->kv_lora = json_int(j, "kv_lora_rank", -1, F);
		d->rope_dim = json_int(j, "qk_rope_head_dim", -1, 65536);
		d->nope_dim = json_int(j, "qk_nope_head_dim", -1, 65536);
		d->v_dim = json_int(j, "v_head_dim", -1, 65536);
	}
}

/* How many linears the config will make, before making any: a config
 * that declares 10^6 is refused at once, with the limit. */
static long
count_linears(Json *j, const Arch *a, const Dims *d)
{
	long n = 1, attn = a->attn == ATTN_QKV ? 2 : a->attn == ATTN_MLA ? (d->q_lora ? 5 : 4) : 4;
	long dense = a->mlp == MLP_GATE_UP ? 2 : 3;

	for (long i = 0; i < d->layers; i++) {
		n += attn;
		if (!moe_layer(j, a, d, i))
			n += dense;
		else
			n += 1 + 3 * d->experts + (d->shared_inter || d->n_shared ? 3 : 0)
			   + (d->shared_inter ? 1 : 0);
		if (n > MODEL_MAX_LINEARS)
			break;
	}
	return n;
}

void
hf_load(Model *m, char *text)
{
	Json j = {.m = m, .text = text};
	const char *end = NULL;

	j.root = cJSON_ParseWithOpts(j.text, &end, true);
	if (!j.root) {
		const char *at = end ? end : cJSON_GetErrorPtr();
		int line = 1, col = 1;
		char where[600], near[24] = "";
		size_t k = 0;
		if (!at)
			at = j.text;
		for (const char *p = j.text; p < at && *p; p++)
			if (*p == '\n')
				line++, col = 1;
			else
				col++;
		snprintf(where, sizeof where, "%s:%d", m->path, line);
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
	j.cfg = j.root;
	const Arch *a = find_arch(&j, json_str_at(&j, j.root, "model_type"));
	if (a->nest) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(j.root, a->nest);
		if (!t || !cJSON_IsObject(t))
			json_fail(&j, key_line_in(j.text, strchr(j.text, '{'), a->nest),
			          "model_type '%s' keeps the text model's keys under '%s', %s", a->type,
			          a->nest, t ? "which is not an object" : "which is missing");
		j.cfg = t, j.nest = a->nest;
	}
	Dims d = {0};
	read_dims(&j, a, &d);
	long n = count_linears(&j, a, &d);
	if (n > MODEL_MAX_LINEARS)
		json_fail(&j, key_line(&j, "num_hidden_layers"), "the config makes more than %d "
		          "linear layers (the limit is %d)", MODEL_MAX_LINEARS, MODEL_MAX_LINEARS);
	const char *name = json_str_at(&j, j.root, "_name_or_path");
	char why[64];
	if (name && text_fault(name, strlen(name), false, why, sizeof why))
		json_fail(&j, key_line_in(j.text, strchr(j.text, '{'), "_name_or_path"),
		          "key '_name_or_path': %s", why);
	if (name && *name) {
		free(m->name);
		m->name = xstrdup(name);
	}
	for (long i = 0; i < d.layers; i++) {
		const char *pre = a->prefix;
		add_attn(&j, &d, a, pre, i);
		if (!moe_layer(&j, a, &d, i)) {
			add_mlp(&j, &d, pre, i, "mlp", d.inter, a->mlp == MLP_GATE_UP, -1);
			continue;
		}
		switch (a->moe) {
		case MOE_MIXTRAL:   /* MixtralSparseMoeBlock: gate, experts */
			add(&j, &d, pre, i, "block_sparse_moe.gate", d.hidden, d.experts, false);
			add_experts(&j, &d, pre, i, "block_sparse_moe", true);
			break;
		case MOE_QWEN2:     /* gate, experts, shared_expert, shared_expert_gate */
		case MOE_QWEN3:
		{	/* the router, the shared expert and its gate read the whole hidden state */
			int r = add(&j, &d, pre, i, "mlp.gate", d.hidden, d.experts, false);
			add_experts(&j, &d, pre, i, "mlp", false);
			if (d.shared_inter) {
				add_mlp(&j, &d, pre, i, "mlp.shared_expert", d.shared_inter, false, r);
				model_share_input(m, add(&j, &d, pre, i, "mlp.shared_expert_gate", d.hidden, 1,
				                         false), r);
			}
		}
			break;
		case MOE_DEEPSEEK:  /* DeepseekV2Moe: experts, gate, shared_experts */
		{
			add_experts(&j, &d, pre, i, "mlp", false);
			int r = add(&j, &d, pre, i, "mlp.gate", d.hidden, d.experts, false);
			if (d.n_shared)
				add_mlp(&j, &d, pre, i, "mlp.shared_experts", d.moe_inter * d.n_shared, false, r);
		}
			break;
		case MOE_NONE:
			break;
		}
	}
	model_add_linear(m, "lm_head", d.hidden, d.vocab, d.tied, false);
	cJSON_Delete(j.root);
	free(j.text);
}
