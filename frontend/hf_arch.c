/*
 * hf_arch.c — a HuggingFace config.json as linear layers, driven by one
 * table of architectures (docs/models.md). Each entry says, per
 * model_type, how attention and the MLP are built (separate or fused
 * projections, MLA), which MoE layout it has, which bias keys it reads,
 * and its transformers config class's defaults, which fill the keys a
 * config leaves out (the Hub writes only those that differ). Vision-
 * language types (gemma3, llava, qwen2_5_vl) wrap a text tower whose keys
 * are under text_config and whose layers are under model.language_model.
 *
 * Module names are transformers' (modeling_<type>.py in 4.x, which are
 * also the checkpoint keys): Mixtral block_sparse_moe.experts.E.w1/w2/w3
 * with router block_sparse_moe.gate; Qwen2-MoE mlp.experts.E.*_proj,
 * mlp.shared_expert.*, mlp.shared_expert_gate, router mlp.gate; DeepSeek
 * self_attn.q_a_proj/q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_b_proj,
 * mlp.experts.E.*, mlp.gate, mlp.shared_experts.*. Linears come in module
 * order. A key written twice is read at its last copy, as Python's json
 * does. An unknown model_type is an error naming the known ones, with a
 * hint only for a misspelling (PRECC_MODEL_TYPE=llama reads it as Llama).
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
typedef enum { MOE_NONE, MOE_MIXTRAL, MOE_QWEN2, MOE_QWEN3, MOE_DEEPSEEK, MOE_FUSED } Moe;
typedef enum { SHARED_NONE, SHARED_LLAMA4, SHARED_GRANITE } Shared;

/* transformers 5's fused experts (MOE_FUSED): one 3-D parameter per GEMM
 * for all E experts of a block, `BLOCK.experts.gate_up_proj` (H -> 2I, gate
 * and up in one GEMM) and `BLOCK.experts.down_proj` (I -> H), which precc
 * lists per expert as BLOCK.experts.E.gate_up_proj / .down_proj (Linear.group,
 * docs/models.md), and a router BLOCK.ROUTER (H -> E). */
typedef struct Fused {
	const char *block;        /* the MoE module: mlp, block_sparse_moe, feed_forward */
	const char *router;       /* its router's name: router, gate */
	const char *experts_key;  /* E's key */
	const char *alias;        /* attribute_map's other name for it, or NULL */
	bool in_out;              /* stored [E, in, out] (x @ W[e]), else [E, out, in] */
	bool expert_bias;         /* gate_up_proj_bias, down_proj_bias (gpt-oss) */
	bool router_bias;
	Shared shared;
	bool interleave;          /* Llama-4: moe_layers / interleave_moe_layer_step */
} Fused;


/* Which config keys put biases on which linears (modeling_<type>.py):
 * attention_bias on q/k/v/o (MLA: q_a, kv_a, o); q/k/v always (Qwen2);
 * qkv_bias on q/k/v (Qwen2-MoE); mlp_bias on gate/up/down. Absent flags
 * are nn.Linear(..., bias=False) whatever the config says. */
enum { BIAS_ATTN = 1, BIAS_QKV = 2, BIAS_QKV_KEY = 4, BIAS_MLP = 8 };

/* A key's value when config.json leaves it out: the default of the
 * transformers config class, NONE where that default is None and the
 * model derives it (num_key_value_heads = heads, head_dim = H / heads,
 * q_lora_rank: a plain q_proj). The Hub writes only non-default keys, so
 * these are part of the published model (Gemma-3-12B's head_dim 256). */
typedef struct Default {
	const char *key;
	long value;
} Default;
#define NONE (-1L)
#define END {NULL, 0}

/* transformers 5.25.0, configuration_<type>.py; the field defaults of
 * each class (docs/models.md cites them). */
#define DENSE(vocab, h, inter, layers, heads, kv) \
	{"vocab_size", vocab}, {"hidden_size", h}, {"intermediate_size", inter}, \
	{"num_hidden_layers", layers}, {"num_attention_heads", heads}, {"num_key_value_heads", kv}
static const Default llama_defs[] = {     /* LlamaConfig */
	DENSE(32000, 4096, 11008, 32, 32, NONE), {"head_dim", NONE}, {"tie_word_embeddings", 0},
	{"attention_bias", 0}, {"mlp_bias", 0}, END};
static const Default mistral_defs[] = {   /* MistralConfig */
	DENSE(32000, 4096, 14336, 32, 32, 8), {"head_dim", NONE}, {"tie_word_embeddings", 0}, END};
static const Default qwen2_defs[] = {     /* Qwen2Config */
	DENSE(151936, 4096, 22016, 32, 32, 32), {"head_dim", NONE}, {"tie_word_embeddings", 0}, END};
static const Default qwen3_defs[] = {     /* Qwen3Config */
	DENSE(151936, 4096, 22016, 32, 32, 32), {"head_dim", 128}, {"tie_word_embeddings", 0},
	{"attention_bias", 0}, END};
static const Default phi3_defs[] = {      /* Phi3Config */
	DENSE(32064, 3072, 8192, 32, 32, NONE), {"head_dim", NONE}, {"tie_word_embeddings", 0}, END};
static const Default gemma_defs[] = {     /* GemmaConfig */
	DENSE(256000, 3072, 24576, 28, 16, 16), {"head_dim", 256}, {"tie_word_embeddings", 1},
	{"attention_bias", 0}, END};
static const Default gemma2_defs[] = {    /* Gemma2Config */
	DENSE(256000, 2304, 9216, 26, 8, 4), {"head_dim", 256}, {"tie_word_embeddings", 1},
	{"attention_bias", 0}, END};
static const Default gemma3_defs[] = {    /* Gemma3TextConfig */
	DENSE(262208, 2304, 9216, 26, 8, 4), {"head_dim", 256}, {"tie_word_embeddings", 1},
	{"attention_bias", 0}, END};
static const Default mixtral_defs[] = {   /* MixtralConfig */
	DENSE(32000, 4096, 14336, 32, 32, 8), {"head_dim", NONE}, {"tie_word_embeddings", 0},
	{"num_local_experts", 8}, END};
static const Default qwen2_moe_defs[] = { /* Qwen2MoeConfig */
	DENSE(151936, 2048, 5632, 24, 16, 16), {"head_dim", NONE}, {"tie_word_embeddings", 0},
	{"qkv_bias", 1}, {"num_experts", 60}, {"moe_intermediate_size", 1408},
	{"shared_expert_intermediate_size", 5632}, {"decoder_sparse_step", 1}, END};
static const Default qwen3_moe_defs[] = { /* Qwen3MoeConfig */
	DENSE(151936, 2048, 6144, 24, 32, 4), {"head_dim", NONE}, {"tie_word_embeddings", 0},
	{"attention_bias", 0}, {"num_experts", 128}, {"moe_intermediate_size", 768},
	{"decoder_sparse_step", 1}, END};
static const Default deepseek_v2_defs[] = { /* DeepseekV2Config */
	DENSE(102400, 4096, 11008, 32, 32, NONE), {"tie_word_embeddings", 0},
	{"attention_bias", 0}, {"mlp_bias", 0}, {"n_routed_experts", 64},
	{"moe_intermediate_size", 1407}, {"n_shared_experts", 2}, {"head_dim", NONE}, {"first_k_dense_replace", 0},
	{"moe_layer_freq", 1}, {"q_lora_rank", 1536}, {"kv_lora_rank", 512},
	{"qk_rope_head_dim", 64}, {"qk_nope_head_dim", 128}, {"v_head_dim", 128}, END};
static const Default deepseek_v3_defs[] = { /* DeepseekV3Config */
	DENSE(129280, 7168, 18432, 61, 128, 128), {"tie_word_embeddings", 0},
	{"attention_bias", 0}, {"head_dim", NONE}, {"n_routed_experts", 256}, {"moe_intermediate_size", 2048},
	{"n_shared_experts", 1}, {"first_k_dense_replace", 3}, {"moe_layer_freq", 1},
	{"q_lora_rank", 1536}, {"kv_lora_rank", 512}, {"qk_rope_head_dim", 64},
	{"qk_nope_head_dim", 128}, {"v_head_dim", 128}, END};
static const Default olmo2_defs[] = {     /* Olmo2Config */
	DENSE(50304, 4096, 11008, 32, 32, NONE), {"head_dim", NONE}, {"tie_word_embeddings", 0},
	{"attention_bias", 0}, END};
static const Default granite_defs[] = {   /* GraniteConfig */
	DENSE(32000, 4096, 11008, 32, 32, NONE), {"head_dim", NONE}, {"tie_word_embeddings", 0},
	{"attention_bias", 0}, {"mlp_bias", 0}, END};
/* configuration_gpt_oss.py:51-77 (GptOssConfig) */
static const Default gpt_oss_defs[] = {
	DENSE(201088, 2880, 2880, 36, 64, 8), {"head_dim", 64}, {"tie_word_embeddings", 0},
	{"attention_bias", 1}, {"num_local_experts", 128}, END};
/* configuration_llama4.py:129-163 (Llama4TextConfig) */
static const Default llama4_defs[] = {
	DENSE(202048, 5120, 8192, 48, 40, 8), {"intermediate_size_mlp", 16384}, {"head_dim", 128},
	{"tie_word_embeddings", 0}, {"attention_bias", 0}, {"num_local_experts", 16},
	{"interleave_moe_layer_step", 1}, END};
/* configuration_granitemoe.py:59-84 (GraniteMoeConfig); granitemoeshared
 * :70-96 adds shared_intermediate_size 0 */
static const Default granitemoe_defs[] = {
	DENSE(32000, 4096, 11008, 32, 32, NONE), {"head_dim", NONE}, {"tie_word_embeddings", 0},
	{"attention_bias", 0}, {"num_local_experts", 8}, {"shared_intermediate_size", 0}, END};
/* configuration_phimoe.py:62-87 (PhimoeConfig) */
static const Default phimoe_defs[] = {
	DENSE(32064, 4096, 6400, 32, 32, 8), {"head_dim", NONE}, {"tie_word_embeddings", 0},
	{"attention_bias", 0}, {"lm_head_bias", 0}, {"num_local_experts", 16}, END};
/* configuration_olmoe.py:59-82 (OlmoeConfig) */
static const Default olmoe_defs[] = {
	DENSE(50304, 2048, 2048, 16, 16, NONE), {"head_dim", NONE}, {"tie_word_embeddings", 0},
	{"attention_bias", 0}, {"num_experts", 64}, END};
static const Default qwen2_5_vl_defs[] = { /* Qwen2_5_VLTextConfig (tie: Qwen2_5_VLConfig) */
	DENSE(152064, 8192, 29568, 80, 64, 8), {"head_dim", NONE}, {"tie_word_embeddings", 0}, END};
#undef DENSE

typedef struct Arch {
	const char *type;         /* model_type */
	const char *cls;          /* its transformers config class */
	Attn attn;
	Mlp mlp;
	Moe moe;
	unsigned bias;            /* BIAS_* */
	const Default *defs;
	bool inner;               /* only as a text tower (no model_type of its own here) */
	const Fused *fused;       /* MOE_FUSED's layout */
	const char *mlp_mod;      /* the dense MLP's module (NULL: mlp) */
} Arch;

/* modeling_<type>.py of transformers 5.25.0: GptOssMLP (router: not an
 * nn.Linear, weight [E, H] and bias [E]; GptOssExperts [E, H, 2I] + bias
 * [E, 2I], [E, I, H] + bias [E, H]: :67-77, :116-136); Llama4TextMoe
 * (experts [E, H, 2I], [E, I, H], router an nn.Linear H -> E, shared_expert
 * a Llama4TextMLP of intermediate_size; dense layers intermediate_size_mlp:
 * :55-63, :145-167, :397-407); GraniteMoeMoE (router [E, H], experts
 * [E, 2I, H], [E, H, I]: :113-182; granitemoeshared adds shared_mlp
 * input_linear H -> 2S, output_linear S -> H: :70-86, :344);
 * PhimoeSparseMoeBlock (router an nn.Linear, experts [E, 2I, H]:
 * :301-310, :463-502); OlmoeSparseMoeBlock (gate [E, H], experts [E, 2I, H]:
 * :279-343). */
static const Fused gpt_oss_moe = {"mlp", "router", "num_local_experts", "num_experts", true,
                                  true, true, SHARED_NONE, false};
static const Fused llama4_moe = {"feed_forward", "router", "num_local_experts", NULL, true,
                                 false, false, SHARED_LLAMA4, true};
static const Fused granitemoe_moe = {"block_sparse_moe", "router", "num_local_experts", NULL,
                                     false, false, false, SHARED_NONE, false};
static const Fused granitemoeshared_moe = {"block_sparse_moe", "router", "num_local_experts",
                                           NULL, false, false, false, SHARED_GRANITE, false};
static const Fused phimoe_moe = {"mlp", "router", "num_local_experts", NULL, false, false, false,
                                 SHARED_NONE, false};
static const Fused olmoe_moe = {"mlp", "gate", "num_experts", "num_local_experts", false, false,
                                false, SHARED_NONE, false};

static const Arch archs[] = {
	{"llama", "LlamaConfig", ATTN_GQA, MLP_GATED, MOE_NONE, BIAS_ATTN | BIAS_MLP, llama_defs, false, NULL, NULL},
	{"mistral", "MistralConfig", ATTN_GQA, MLP_GATED, MOE_NONE, 0, mistral_defs, false, NULL, NULL},
	{"qwen2", "Qwen2Config", ATTN_GQA, MLP_GATED, MOE_NONE, BIAS_QKV, qwen2_defs, false, NULL, NULL},
	{"qwen3", "Qwen3Config", ATTN_GQA, MLP_GATED, MOE_NONE, BIAS_ATTN, qwen3_defs, false, NULL, NULL},
	{"phi3", "Phi3Config", ATTN_QKV, MLP_GATE_UP, MOE_NONE, 0, phi3_defs, false, NULL, NULL},
	{"gemma", "GemmaConfig", ATTN_GQA, MLP_GATED, MOE_NONE, BIAS_ATTN, gemma_defs, false, NULL, NULL},
	{"gemma2", "Gemma2Config", ATTN_GQA, MLP_GATED, MOE_NONE, BIAS_ATTN, gemma2_defs, false, NULL, NULL},
	{"gemma3_text", "Gemma3TextConfig", ATTN_GQA, MLP_GATED, MOE_NONE, BIAS_ATTN, gemma3_defs,
	 false, NULL, NULL},
	{"olmo2", "Olmo2Config", ATTN_GQA, MLP_GATED, MOE_NONE, BIAS_ATTN, olmo2_defs, false, NULL, NULL},
	{"granite", "GraniteConfig", ATTN_GQA, MLP_GATED, MOE_NONE, BIAS_ATTN | BIAS_MLP,
	 granite_defs, false, NULL, NULL},
	{"mixtral", "MixtralConfig", ATTN_GQA, MLP_GATED, MOE_MIXTRAL, 0, mixtral_defs, false, NULL, NULL},
	{"qwen2_moe", "Qwen2MoeConfig", ATTN_GQA, MLP_GATED, MOE_QWEN2, BIAS_QKV_KEY, qwen2_moe_defs,
	 false, NULL, NULL},
	{"qwen3_moe", "Qwen3MoeConfig", ATTN_GQA, MLP_GATED, MOE_QWEN3, BIAS_ATTN, qwen3_moe_defs,
	 false, NULL, NULL},
	{"deepseek_v2", "DeepseekV2Config", ATTN_MLA, MLP_GATED, MOE_DEEPSEEK, BIAS_ATTN | BIAS_MLP,
	 deepseek_v2_defs, false, NULL, NULL},
	{"deepseek_v3", "DeepseekV3Config", ATTN_MLA, MLP_GATED, MOE_DEEPSEEK, BIAS_ATTN,
	 deepseek_v3_defs, false, NULL, NULL},
	{"qwen2_5_vl_text", "Qwen2_5_VLTextConfig", ATTN_GQA, MLP_GATED, MOE_NONE, BIAS_QKV,
	 qwen2_5_vl_defs, true, NULL, NULL},
	{"gpt_oss", "GptOssConfig", ATTN_GQA, MLP_GATED, MOE_FUSED, BIAS_ATTN, gpt_oss_defs, false,
	 &gpt_oss_moe, NULL},
	{"llama4_text", "Llama4TextConfig", ATTN_GQA, MLP_GATED, MOE_FUSED, BIAS_ATTN, llama4_defs,
	 false, &llama4_moe, "feed_forward"},
	{"granitemoe", "GraniteMoeConfig", ATTN_GQA, MLP_GATED, MOE_FUSED, BIAS_ATTN,
	 granitemoe_defs, false, &granitemoe_moe, NULL},
	{"granitemoeshared", "GraniteMoeSharedConfig", ATTN_GQA, MLP_GATED, MOE_FUSED, BIAS_ATTN,
	 granitemoe_defs, false, &granitemoeshared_moe, NULL},
	{"phimoe", "PhimoeConfig", ATTN_GQA, MLP_GATED, MOE_FUSED, BIAS_ATTN, phimoe_defs, false,
	 &phimoe_moe, NULL},
	{"olmoe", "OlmoeConfig", ATTN_GQA, MLP_GATED, MOE_FUSED, BIAS_ATTN, olmoe_defs, false,
	 &olmoe_moe, NULL},
};
#define NARCH (int)(sizeof archs / sizeof archs[0])

/* Vision-language models: the text tower's keys under text_config, its
 * layers under model.language_model., lm_head at the top; the vision
 * tower and the projector are not read. */
typedef struct Wrap {
	const char *type, *cls;
	const char *text;         /* the text tower's model_type */
	bool any_text;            /* text_config.model_type may name another (AutoConfig) */
	bool flat;                /* without text_config, the text keys sit at the top */
	bool tied;                /* the class's tie_word_embeddings */
	bool tie_text;            /* text_config's tie_word_embeddings ties too */
	const char *pre;          /* the text tower's layers: PRE layers.N. */
	const char *head;         /* lm_head's name */
	bool text_tie_only;       /* only text_config's flag ties (its own is not read) */
} Wrap;

/* Gemma3Config, LlavaConfig, Qwen2_5_VLConfig (transformers 5.25.0): the
 * first builds Gemma3TextConfig(**text_config) and ties by its own flag;
 * Llava reads text_config through AutoConfig (default "llama"); Qwen2.5-VL
 * takes the top-level keys when there is no text_config (the Hub's
 * files), and both forward a text_config tie_word_embeddings. */
static const Wrap wraps[] = {
	{"gemma3", "Gemma3Config", "gemma3_text", false, false, true, false,
	 "model.language_model.", "lm_head", false},
	{"llava", "LlavaConfig", "llama", true, false, false, true, "model.language_model.",
	 "lm_head", false},
	{"qwen2_5_vl", "Qwen2_5_VLConfig", "qwen2_5_vl_text", false, true, false, true,
	 "model.language_model.", "lm_head", false},
	/* Llama4ForConditionalGeneration (modeling_llama4.py:1140-1151) holds a
	 * Llama4ForCausalLM as language_model, not a bare text model */
	/* ... and ties by that model's own (text_config's) flag, :575-578 */
	{"llama4", "Llama4Config", "llama4_text", false, false, false, true,
	 "language_model.model.", "language_model.lm_head", true},
};
#define NWRAP (int)(sizeof wraps / sizeof wraps[0])

const char *const hf_known_types = "llama, mistral, qwen2, qwen3, phi3, gemma, gemma2, "
                                   "gemma3, gemma3_text, olmo2, granite, mixtral, qwen2_moe, "
                                   "qwen3_moe, deepseek_v2, deepseek_v3, gpt_oss, llama4, "
                                   "llama4_text, granitemoe, granitemoeshared, phimoe, olmoe, "
                                   "llava, qwen2_5_vl";

typedef struct Json {
	Model *m;
	char *text;
	cJSON *root;
	const cJSON *cfg;         /* the object keys are read from */
	const char *nest;         /* its key ("text_config"), or NULL */
	const char *obj;          /* its '{' in the text, NULL when absent (all defaults) */
	const Arch *a;            /* whose defaults fill absent keys */
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

/* A direct member of an object in the text: its key (between the quotes,
 * escapes as written), the line, and where its value starts. */
typedef struct Member {
	const char *key, *value;
	size_t len;
	int line;
} Member;

enum { MAX_MEMBERS = 1024 };

/* The members of the object whose '{' is at obj, in order (at most max). */
static int
members(const char *text, const char *obj, Member *out, int max)
{
	int depth = 0, line = 1, n = 0;
	const char *p;

	for (p = text; p < obj; p++)
		line += *p == '\n';
	for (; *p; p++) {
		if (*p == '\n')
			line++;
		else if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']') {
			if (--depth == 0)
				break;
		} else if (*p == '"') {
			const char *k = p + 1;
			for (p++; *p && *p != '"'; p++)
				if (*p == '\\' && p[1])
					p++;
				else if (*p == '\n')
					line++;
			if (!*p)
				break;
			const char *q = p + 1;
			while (isspace((unsigned char)*q))
				q++;
			if (depth == 1 && *q == ':' && n < max) {
				for (q++; isspace((unsigned char)*q); q++)
					;
				out[n++] = (Member){k, q, (size_t)(p - k), line};
			}
		}
	}
	return n;
}

/* The last member named key (the one Python's json keeps), or NULL. */
static const Member *
member(const Member *ms, int n, const char *key)
{
	size_t len = strlen(key);

	for (int i = n - 1; i >= 0; i--)
		if (ms[i].len == len && !memcmp(ms[i].key, key, len))
			return &ms[i];
	return NULL;
}

/* Line of "key" in the object at obj (the last of its copies), or 0. */
static int
key_line_in(const char *text, const char *obj, const char *key)
{
	static Member ms[MAX_MEMBERS];
	const Member *k;

	if (!obj)
		return 0;
	k = member(ms, members(text, obj, ms, MAX_MEMBERS), key);
	return k ? k->line : 0;
}

static int
key_line(const Json *j, const char *key)
{
	return key_line_in(j->text, j->obj, key);
}

static int
top_line(const Json *j, const char *key)
{
	return key_line_in(j->text, strchr(j->text, '{'), key);
}

/* Python's json, and so transformers, keeps the last of a key's copies;
 * cJSON keeps them all. This is the last. */
static const cJSON *
last_item(const cJSON *obj, const char *key)
{
	const cJSON *c, *v = NULL;

	cJSON_ArrayForEach(c, obj)
		if (c->string && !strcmp(c->string, key))
			v = c;
	return v;
}

/* A key written twice in one object of those read: precc reads the last
 * copy, as transformers does, and says so at its line. */
static void
warn_duplicates(const Json *j, const char *obj, const char *where)
{
	static Member ms[MAX_MEMBERS];
	int n = obj ? members(j->text, obj, ms, MAX_MEMBERS) : 0;

	for (int k = 1; k < n; k++)
		for (int i = 0; i < k; i++)
			if (ms[i].len == ms[k].len && !memcmp(ms[i].key, ms[k].key, ms[k].len)) {
				bool later = false;   /* once per key: at its last copy */
				for (int l = k + 1; l < n && !later; l++)
					later = ms[l].len == ms[k].len && !memcmp(ms[l].key, ms[k].key, ms[k].len);
				if (!later)
					warnf(j->m->path, ms[k].line, "key '%s%s%.*s' is written twice (lines %d "
					      "and %d); precc reads the last, as Python's json and transformers do",
					      where ? where : "", where ? "." : "", (int)ms[k].len, ms[k].key,
					      ms[i].line, ms[k].line);
				break;
			}
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

/* The config class's default for key: true and *v, or false when the
 * class has none (then the key is required). */
static bool
class_default(const Json *j, const char *key, long *v)
{
	for (const Default *d = j->a->defs; d->key; d++)
		if (!strcmp(d->key, key)) {
			*v = d->value;
			return true;
		}
	return false;
}

/* An integer key in min..max; absent, the class's default. null is
 * None: NONE where None has a meaning (nullable: num_key_value_heads,
 * head_dim, q_lora_rank), else the class's default. */
static long
json_num(Json *j, const char *key, long min, long max, bool nullable)
{
	const cJSON *v = j->cfg ? last_item(j->cfg, key) : NULL;
	long def;

	if (v && cJSON_IsNull(v) && nullable)
		return NONE;
	if (!v || cJSON_IsNull(v)) {
		if (!class_default(j, key, &def))
			json_fail(j, 0, "missing key '%s'", kpath(j, key));
		return def;
	}
	if (!cJSON_IsNumber(v))
		json_fail(j, key_line(j, key), "key '%s' must be a positive integer, not %s",
		          kpath(j, key), json_type(v));
	double d = v->valuedouble;
	if (d != floor(d))
		json_fail(j, key_line(j, key), "key '%s' must be an integer, got %g", kpath(j, key), d);
	if (d < min || d > max)
		json_fail(j, key_line(j, key), "key '%s' is %.0f, expected %ld..%ld", kpath(j, key), d,
		          min, max);
	return (long)d;
}

static long
json_int(Json *j, const char *key, long min, long max)
{
	return json_num(j, key, min, max, false);
}

/* A boolean key; absent, the class's default; null is None, false. */
static bool
json_bool(Json *j, const char *key)
{
	const cJSON *v = j->cfg ? last_item(j->cfg, key) : NULL;
	long def = 0;

	if (!v) {
		class_default(j, key, &def);
		return def;
	}
	if (cJSON_IsNull(v))
		return false;
	if (!cJSON_IsBool(v))
		json_fail(j, key_line(j, key), "key '%s' must be true or false, not %s",
		          kpath(j, key), json_type(v));
	return cJSON_IsTrue(v);
}

/* A top-level key that must be a boolean, or def. */
static bool
top_bool(Json *j, const char *key, bool def)
{
	const cJSON *v = last_item(j->root, key);

	if (!v)
		return def;
	if (cJSON_IsNull(v))
		return false;
	if (!cJSON_IsBool(v))
		json_fail(j, top_line(j, key), "key '%s' must be true or false, not %s", key,
		          json_type(v));
	return cJSON_IsTrue(v);
}

static const char *
json_str_at(Json *j, const cJSON *obj, const char *key, const char *where)
{
	const cJSON *v = obj ? last_item(obj, key) : NULL;

	if (!v || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsString(v))
		json_fail(j, where ? key_line(j, key) : top_line(j, key),
		          "key '%s%s%s' must be a string, not %s", where ? where : "", where ? "." : "",
		          key, json_type(v));
	return v->valuestring;
}

/* mlp_only_layers: an array of layer indices (Qwen-MoE); is i in it? */
static bool
in_int_array(Json *j, const char *key, long i, long layers)
{
	const cJSON *v = j->cfg ? last_item(j->cfg, key) : NULL, *e;

	if (!v || cJSON_IsNull(v))
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

/* Lowercase letters and digits of a model_type, separators dropped:
 * "Qwen2.5-VL" -> "qwen25vl". */
static void
fold(const char *s, char *out, size_t cap)
{
	size_t n = 0;

	for (; *s && n + 1 < cap; s++)
		if (isalnum((unsigned char)*s))
			out[n++] = (char)tolower((unsigned char)*s);
	out[n] = 0;
}

/* Is word a slip of the fingers on the model_type cand: the same letters
 * and digits up to case and separators ("Qwen2-MoE"), two neighbouring
 * letters swapped ("mixrtal"), or a letter doubled or undoubled
 * ("mixtrall", "lama")? Not a letter changed or added, and never a digit:
 * that is how real models differ (pixtral and mixtral, flava and llava,
 * mllama and llama, molmo2 and olmo2, phimoe and phi3, olmo and olmo2,
 * qwen2_5_vl and qwen2_moe; bench/hf_linears.py checks every model_type
 * transformers knows). */
static bool
spelling_neighbour(const char *word, const char *cand)
{
	char a[64], b[64];
	size_t la, lb, i = 0;

	fold(word, a, sizeof a);
	fold(cand, b, sizeof b);
	la = strlen(a), lb = strlen(b);
	if (la < lb)   /* a the longer */
		return spelling_neighbour(cand, word);
	while (i < lb && a[i] == b[i])
		i++;
	if (la == lb)
		return i == la || (i + 1 < la && a[i] == b[i + 1] && a[i + 1] == b[i]
		                   && isalpha((unsigned char)a[i]) && isalpha((unsigned char)a[i + 1])
		                   && !strcmp(a + i + 2, b + i + 2));
	/* a has one more: a[i], a letter, doubled */
	return la == lb + 1 && isalpha((unsigned char)a[i]) && i > 0 && a[i] == a[i - 1]
	    && !strcmp(a + i + 1, b + i);
}

static const Arch *
arch_named(const char *type)
{
	for (int k = 0; type && k < NARCH; k++)
		if (!strcmp(archs[k].type, type))
			return &archs[k];
	return NULL;
}

/* The architecture of a model_type (a decoder, or a wrapper *w and its
 * text tower), or an error naming the known ones; a suggestion only for
 * a misspelling (spelling_neighbour). */
static const Arch *
find_arch(Json *j, const char *type, const Wrap **w)
{
	const char *as = getenv("PRECC_MODEL_TYPE"), *sg = NULL;
	const Arch *a;

	*w = NULL;
	for (int k = 0; type && k < NWRAP; k++)
		if (!strcmp(wraps[k].type, type))
			return *w = &wraps[k], arch_named(wraps[k].text);
	if ((a = arch_named(type)) && !a->inner)
		return a;
	if (as && *as) {
		/* Nothing here can tell whether the model is that architecture
		 * under another name: say so every time (phimoe read as phi3 is
		 * 129 linears of its 1,697, exit 0). */
		warnf(j->m->path, type ? top_line(j, "model_type") : 0, "model_type '%s' read as "
		      "'%s' (PRECC_MODEL_TYPE); precc cannot check that the two are one "
		      "architecture, and if not, every linear it reads is wrong",
		      type ? type : "(none)", as);
		for (int k = 0; k < NWRAP; k++)
			if (!strcmp(wraps[k].type, as))
				return *w = &wraps[k], arch_named(wraps[k].text);
		if ((a = arch_named(as)) && !a->inner)
			return a;
		json_fail(j, 0, "PRECC_MODEL_TYPE=%s is not a known model_type (%s)", as,
		          hf_known_types);
	}
	if (!type)
		json_fail(j, 0, "no model_type; precc knows %s (PRECC_MODEL_TYPE=TYPE reads the "
		          "config as one of them, unchecked)", hf_known_types);
	for (int k = 0; k < NWRAP && !sg; k++)
		if (spelling_neighbour(type, wraps[k].type))
			sg = wraps[k].type;
	for (int k = 0; k < NARCH && !sg; k++)
		if (!archs[k].inner && spelling_neighbour(type, archs[k].type))
			sg = archs[k].type;
	json_fail(j, top_line(j, "model_type"),
	          "unknown model_type '%s'%s%s%s; precc knows %s (PRECC_MODEL_TYPE=TYPE reads "
	          "it as one of them, unchecked: only for the same architecture under another "
	          "name)", type, sg ? " (did you mean '" : "", sg ? sg : "", sg ? "'?)" : "",
	          hf_known_types);
}

/* The shapes every architecture shares, read once. */
typedef struct Dims {
	long hidden, inter, layers, heads, kv, vocab, head_dim;
	bool qkv_bias, o_bias, mlp_bias, tied, lm_bias;
	/* MoE */
	long experts, moe_inter, shared_inter, n_shared, first_dense, sparse_step, moe_step;
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
add_mlp_b(Json *j, Dims *d, const char *pre, long i, const char *mod, long inter, bool gate_up,
          int with, bool bias)
{
	char p[96];
	int g;

	snprintf(p, sizeof p, "%s.%s", mod, gate_up ? "gate_up_proj" : "gate_proj");
	g = add(j, d, pre, i, p, d->hidden, gate_up ? 2 * inter : inter, bias);
	if (with >= 0)
		model_share_input(j->m, g, with);
	if (!gate_up) {
		snprintf(p, sizeof p, "%s.up_proj", mod);
		model_share_input(j->m, add(j, d, pre, i, p, d->hidden, inter, bias), g);
	}
	snprintf(p, sizeof p, "%s.down_proj", mod);
	add(j, d, pre, i, p, inter, d->hidden, bias);
}

static void
add_mlp(Json *j, Dims *d, const char *pre, long i, const char *mod, long inter, bool gate_up,
        int with)
{
	add_mlp_b(j, d, pre, i, mod, inter, gate_up, with, d->mlp_bias);
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
		} else {   /* each expert its own routed tokens: no sharing across experts;
			    * no bias: transformers 5 fuses DeepSeek-V2's experts without
			    * one (modeling_deepseek_v2.py:46-55), whatever mlp_bias says */
			snprintf(p, sizeof p, "%s.experts.%ld", mod, e);
			add_mlp_b(j, d, pre, i, p, d->moe_inter, false, -1, false);
		}
}

/* A MOE_FUSED block (Fused): router, experts (gate_up, down per expert,
 * slices of the two 3-D parameters), shared expert; in module order. */
static void
add_fused_moe(Json *j, Dims *d, const Fused *f, const char *pre, long i)
{
	char p[128];
	int r = -1;

	/* Llama4TextMoe builds experts before its router; the rest router first */
	if (f->shared != SHARED_LLAMA4) {
		snprintf(p, sizeof p, "%s.%s", f->block, f->router);
		r = add(j, d, pre, i, p, d->hidden, d->experts, f->router_bias);
	}
	for (long e = 0; e < d->experts; e++) {
		snprintf(p, sizeof p, "%s.experts.%ld.gate_up_proj", f->block, e);
		model_fuse(j->m, add(j, d, pre, i, p, d->hidden, 2 * d->moe_inter, f->expert_bias),
		           (int)d->experts, f->in_out);
		snprintf(p, sizeof p, "%s.experts.%ld.down_proj", f->block, e);
		model_fuse(j->m, add(j, d, pre, i, p, d->moe_inter, d->hidden, f->expert_bias),
		           (int)d->experts, f->in_out);
	}
	switch (f->shared) {
	case SHARED_LLAMA4:   /* the router and the shared expert read the hidden state */
		snprintf(p, sizeof p, "%s.%s", f->block, f->router);
		r = add(j, d, pre, i, p, d->hidden, d->experts, f->router_bias);
		snprintf(p, sizeof p, "%s.shared_expert", f->block);
		add_mlp_b(j, d, pre, i, p, d->shared_inter, false, r, false);
		break;
	case SHARED_GRANITE:  /* GraniteMoeSharedMLP: input_linear H -> 2S, output_linear */
		if (d->shared_inter) {
			model_share_input(j->m, add(j, d, pre, i, "shared_mlp.input_linear", d->hidden,
			                            2 * d->shared_inter, false), r);
			add(j, d, pre, i, "shared_mlp.output_linear", d->shared_inter, d->hidden, false);
		}
		break;
	case SHARED_NONE:
		break;
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
	case MOE_DEEPSEEK:   /* DeepseekV2DecoderLayer, modeling_deepseek_v2.py:412 */
		return i >= d->first_dense;
	case MOE_FUSED:      /* Llama4TextDecoderLayer: i in moe_layers (:403), whose
		              * default is range(step - 1, L, step) (configuration_llama4.py:175) */
		if (!a->fused->interleave)
			return true;
		if (j->cfg && last_item(j->cfg, "moe_layers") && !cJSON_IsNull(last_item(j->cfg, "moe_layers")))
			return in_int_array(j, "moe_layers", i, d->layers);
		return i >= d->moe_step - 1 && (i - (d->moe_step - 1)) % d->moe_step == 0;
	}
	return false;
}

static void
read_dims(Json *j, const Arch *a, Dims *d)
{
	const long F = MODEL_MAX_FEATURES;

	d->hidden = json_int(j, "hidden_size", 1, F);
	d->layers = json_int(j, "num_hidden_layers", 1, MODEL_MAX_LAYERS);
	d->heads = json_int(j, "num_attention_heads", 1, 65536);
	d->kv = json_num(j, "num_key_value_heads", 1, 65536, true);
	if (d->kv == NONE)
		d->kv = d->heads;
	d->vocab = json_int(j, "vocab_size", 1, F);
	d->head_dim = json_num(j, "head_dim", 1, 65536, true);
	d->tied = json_bool(j, "tie_word_embeddings");
	/* a bias key the model does not read is left unread: MistralAttention
	 * builds q/k/v/o with bias=False whatever attention_bias says */
	d->o_bias = a->bias & BIAS_ATTN ? json_bool(j, "attention_bias") : false;
	d->qkv_bias = a->bias & BIAS_QKV ? true
	            : a->bias & BIAS_QKV_KEY ? json_bool(j, "qkv_bias") : d->o_bias;
	d->mlp_bias = a->bias & BIAS_MLP ? json_bool(j, "mlp_bias") : false;
	if (d->kv > d->heads || d->heads % d->kv)
		json_fail(j, key_line(j, "num_key_value_heads"),
		          "num_attention_heads %ld is not a multiple of num_key_value_heads %ld",
		          d->heads, d->kv);
	if (d->head_dim == NONE) {
		d->head_dim = 0;
		if (a->attn != ATTN_MLA) {
			if (d->hidden % d->heads)
				json_fail(j, key_line(j, "num_attention_heads"),
				          "hidden_size %ld is not a multiple of num_attention_heads %ld "
				          "(and there is no head_dim)", d->hidden, d->heads);
			d->head_dim = d->hidden / d->heads;
		}
	}
	if (d->heads * (d->head_dim ? d->head_dim : 1) > F)
		json_fail(j, key_line(j, "num_attention_heads"),
		          "num_attention_heads x head_dim = %ld, expected at most %ld",
		          d->heads * d->head_dim, F);
	d->inter = json_int(j, "intermediate_size", 1, F);
	switch (a->moe) {
	case MOE_NONE:
		break;
	case MOE_MIXTRAL:
		d->moe_inter = d->inter;
		d->experts = json_int(j, "num_local_experts", 1, 4096);
		break;
	case MOE_QWEN2:
	case MOE_QWEN3:
		d->experts = json_int(j, "num_experts", 1, 4096);
		d->moe_inter = json_int(j, "moe_intermediate_size", 1, F);
		d->sparse_step = json_int(j, "decoder_sparse_step", 1, MODEL_MAX_LAYERS);
		if (a->moe == MOE_QWEN2)
			d->shared_inter = json_int(j, "shared_expert_intermediate_size", 0, F);
		break;
	case MOE_DEEPSEEK:
		d->experts = json_int(j, "n_routed_experts", 1, 4096);
		d->moe_inter = json_int(j, "moe_intermediate_size", 1, F);
		d->n_shared = json_int(j, "n_shared_experts", 0, 4096);
		d->first_dense = json_int(j, "first_k_dense_replace", 0, MODEL_MAX_LAYERS);
		/* first_k_dense_replace past the last layer: all dense, as in
		 * DeepseekV3DecoderLayer (DeepseekV3Config's 3 with 2 layers).
		 * moe_layer_freq is not read: transformers 5 makes every layer from
		 * first_k_dense_replace on MoE (modeling_deepseek_v2.py:412,
		 * modeling_deepseek_v3.py:477); DeepSeek's remote code of 4.x
		 * skipped i % moe_layer_freq != 0, and every published config has 1 */
		break;
	case MOE_FUSED: {
		const Fused *f = a->fused;
		const char *ek = f->experts_key;
		/* attribute_map: the other name sets the same field, and wins
		 * when both are written (GptOssConfig(num_local_experts=8,
		 * num_experts=4) has 4, in either order; so does OlmoeConfig) */
		if (f->alias && j->cfg && last_item(j->cfg, f->alias))
			ek = f->alias;
		d->experts = json_int(j, ek, 1, 4096);
		d->moe_inter = d->inter;
		if (f->shared == SHARED_LLAMA4) {
			d->inter = json_int(j, "intermediate_size_mlp", 1, F);
			d->shared_inter = d->moe_inter;
			d->moe_step = json_int(j, "interleave_moe_layer_step", 1, MODEL_MAX_LAYERS);
		}
		if (f->shared == SHARED_GRANITE)
			d->shared_inter = json_int(j, "shared_intermediate_size", 0, F);
		break;
	}
	}
	if (a->defs == phimoe_defs)   /* PhimoeForCausalLM: lm_head bias=lm_head_bias (:750) */
		d->lm_bias = json_bool(j, "lm_head_bias");
	if (a->attn == ATTN_MLA) {
		d->q_lora = json_num(j, "q_lora_rank", 0, F, true);   /* null: q_proj */
		if (d->q_lora == NONE)
			d->q_lora = 0;
		d->kv_lora = json_int(j, "kv_lora_rank", 1, F);
		d->rope_dim = json_int(j, "qk_rope_head_dim", 1, 65536);
		d->nope_dim = json_int(j, "qk_nope_head_dim", 1, 65536);
		d->v_dim = json_int(j, "v_head_dim", 1, 65536);
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
		else if (a->moe == MOE_FUSED)
			n += 1 + 2 * d->experts + (a->fused->shared == SHARED_LLAMA4 ? 3
			                           : d->shared_inter ? 2 : 0);
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
	j.obj = strchr(j.text, '{');
	warn_duplicates(&j, j.obj, NULL);
	const Wrap *w;
	const Arch *a = find_arch(&j, json_str_at(&j, j.root, "model_type", NULL), &w);
	const char *pre = "model.";
	if (w) {
		static Member ms[MAX_MEMBERS];
		const cJSON *t = last_item(j.root, "text_config");
		const Member *tm = member(ms, members(j.text, j.obj, ms, MAX_MEMBERS), "text_config");
		pre = w->pre;
		if (t && !cJSON_IsNull(t) && !cJSON_IsObject(t))
			json_fail(&j, top_line(&j, "text_config"), "key 'text_config' must be an object "
			          "(the text model's keys), not %s", json_type(t));
		if (t && cJSON_IsObject(t)) {
			j.cfg = t, j.nest = "text_config", j.obj = tm ? tm->value : NULL;
			warn_duplicates(&j, j.obj, "text_config");
		} else if (!w->flat)   /* no text_config: transformers builds the class's defaults */
			j.cfg = NULL, j.nest = "text_config", j.obj = NULL;
		const char *tt = w->any_text ? json_str_at(&j, j.cfg, "model_type", "text_config") : NULL;
		if (tt && (!(a = arch_named(tt)) || a->inner))
			json_fail(&j, key_line(&j, "model_type"), "model_type '%s' has a text tower of "
			          "model_type '%s', which precc does not read as a text tower", w->type, tt);
	}
	j.a = a;
	Dims d = {0};
	read_dims(&j, a, &d);
	long n = count_linears(&j, a, &d);
	if (n > MODEL_MAX_LINEARS)
		json_fail(&j, key_line(&j, "num_hidden_layers"), "the config makes more than %d "
		          "linear layers (the limit is %d)", MODEL_MAX_LINEARS, MODEL_MAX_LINEARS);
	const char *name = json_str_at(&j, j.root, "_name_or_path", NULL);
	char why[64];
	if (name && text_fault(name, strlen(name), false, why, sizeof why))
		json_fail(&j, top_line(&j, "_name_or_path"),
		          "key '_name_or_path': %s", why);
	if (name && *name) {
		free(m->name);
		m->name = xstrdup(name);
	}
	if (w) {   /* the wrapper's flag ties; Llava and Qwen2.5-VL forward text_config's */
		d.tied = w->text_tie_only ? d.tied
		       : top_bool(&j, "tie_word_embeddings", w->tied) || (w->tie_text && d.tied);
		fprintf(stderr, "%s: note: model_type '%s' is vision-language: precc reads its text "
		        "tower (%s, %ld layers under %s) and lm_head; the vision tower and the "
		        "multimodal projector stay out\n", m->path, w->type, a->type,
		        d.layers, pre);
	}
	for (long i = 0; i < d.layers; i++) {
		add_attn(&j, &d, a, pre, i);
		if (!moe_layer(&j, a, &d, i)) {
			add_mlp(&j, &d, pre, i, a->mlp_mod ? a->mlp_mod : "mlp", d.inter,
			        a->mlp == MLP_GATE_UP, -1);
			continue;
		}
		switch (a->moe) {
		case MOE_FUSED:
			add_fused_moe(&j, &d, a->fused, pre, i);
			break;
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
	model_add_linear(m, w ? w->head : "lm_head", d.hidden, d.vocab, d.tied, d.lm_bias);
	cJSON_Delete(j.root);
	free(j.text);
}
