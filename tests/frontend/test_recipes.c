/*
 * test_recipes.c — load each recipe in recipes/ and check what it says:
 * formats, scalings, blocks, histories, accumulation, rules, training.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipe.h"

static int failures;

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s: failed: %s\n", \
	__FILE__, __LINE__, cur, #c); failures++; } } while (0)

static const char *cur;

static Recipe *
load(const char *name)
{
	static char path[1024];

	snprintf(path, sizeof path, "%s/%s.lua", PRECC_RECIPES, name);
	cur = name;
	Recipe *r = recipe_load(path);
	CHECK(r->name && !strcmp(r->name, name));
	CHECK(r->description && *r->description);
	return r;
}

static bool
has(const CastSpec *c, unsigned bits)
{
	return (c->set & bits) == bits;
}

static void
bf16(void)
{
	Recipe *r = load("bf16");
	CHECK(has(&r->base.all, SET_FORMAT) && r->base.all.v.format == PRECC_BF16);
	CHECK(r->base.all.set == SET_FORMAT);
	CHECK(r->base.gemm_set == (SET_ACCUM | SET_OUT_FORMAT));
	CHECK(r->base.gemm_all.accum == ACCUM_FP32 && r->base.gemm_all.out_format == PRECC_BF16);
	CHECK(r->training.loss_scale == LOSS_NONE);
	CHECK(r->training.master_weights == PRECC_FP32 && r->training.optimizer_state == PRECC_FP32);
	CHECK(r->nrules == 0 && !r->base.has_fallback);
	recipe_free(r);
}

static void
fp16_dynamic(void)
{
	Recipe *r = load("fp16_dynamic_loss_scale");
	CHECK(r->base.all.v.format == PRECC_FP16 && r->base.gemm_all.out_format == PRECC_FP16);
	const TrainingPolicy *t = &r->training;
	CHECK(t->loss_scale == LOSS_DYNAMIC);
	CHECK(t->loss_scale_init == 65536 && t->growth_factor == 2 && t->backoff_factor == 0.5f);
	CHECK(t->growth_interval == 2000);
	recipe_free(r);
}

static void
te_delayed_hybrid(void)
{
	Recipe *r = load("te_delayed_hybrid");
	const Cast *c = &r->base.all.v;
	CHECK(r->base.hybrid && !has(&r->base.all, SET_FORMAT));
	CHECK(has(&r->base.all, SET_SCALING | SET_HISTORY | SET_AMAX_ALGO | SET_MARGIN));
	CHECK(c->scaling == SCALING_DELAYED && c->history == 1024 && c->amax_algo == AMAX_MAX);
	CHECK(c->margin == 0 && c->nonfinite == NONFINITE_KEEP_SCALE);
	CHECK(r->base.gemm[GEMM_FPROP].set == SET_ACCUM && r->base.gemm[GEMM_FPROP].v.accum == ACCUM_FAST);
	CHECK(r->base.gemm_all.accum == ACCUM_FP32);
	CHECK(r->base.has_fallback && r->base.fallback == FALLBACK_HIGH &&
	      r->base.fallback_format == PRECC_BF16 && r->base.fallback_loc.line > 0);
	recipe_free(r);
}

static void
current_tensorwise(void)
{
	Recipe *r = load("current_tensorwise");
	CHECK(r->base.hybrid);
	CHECK(r->base.all.v.scaling == SCALING_CURRENT && r->base.all.v.amax_eps == 1e-12f);
	CHECK(!has(&r->base.all, SET_HISTORY));
	CHECK(r->base.gemm[GEMM_FPROP].v.accum == ACCUM_FAST);
	CHECK(!(r->base.gemm[GEMM_DGRAD].set & SET_ACCUM));
	recipe_free(r);
}

static void
rowwise(void)
{
	Recipe *r = load("rowwise");
	const Cast *c = &r->base.all.v;
	CHECK(c->format == PRECC_E4M3 && c->scaling == SCALING_ROWWISE && c->pow2_scale);
	CHECK(has(&r->base.all, SET_BLOCK) && c->block[0] == 1 && c->block[1] == 0);
	CHECK(!r->base.hybrid);
	recipe_free(r);

	r = load("rowwise_gw_hp");
	CHECK(r->base.all.v.scaling == SCALING_ROWWISE && r->base.all.v.format == PRECC_E4M3);
	const CastSpec *w = &r->base.gemm[GEMM_DGRAD].role[ROLE_WEIGHT];
	CHECK(has(w, SET_SCALING) && w->v.scaling == SCALING_CURRENT && w->v.pow2_scale);
	const CastSpec *wg = &r->base.gemm[GEMM_WGRAD].all;
	CHECK(wg->set == SET_FORMAT && wg->v.format == PRECC_BF16);
	CHECK(!r->base.gemm[GEMM_FPROP].all.set && !r->base.gemm[GEMM_FPROP].role[ROLE_WEIGHT].set);
	recipe_free(r);
}

static void
deepseek_v3(void)
{
	Recipe *r = load("deepseek_v3");
	const Settings *s = &r->base;
	CHECK(s->all.v.format == PRECC_E4M3 && !s->hybrid);
	for (int i = 0; i < NROLE; i++) {
		const CastSpec *c = &s->role[i];
		CHECK(has(c, SET_SCALING | SET_BLOCK) && c->v.scaling == SCALING_BLOCK);
		CHECK(c->v.scale_format == PRECC_FP32);
		int rows = i == ROLE_WEIGHT ? 128 : 1;
		CHECK(c->v.block[0] == rows && c->v.block[1] == 128);
		CHECK(c->line[1] > 0 && c->line[2] == c->line[1]);   /* scaling, block */
	}
	CHECK(s->gemm_all.accum == ACCUM_PROMOTE && s->gemm_all.promote_every == 128);
	CHECK(s->gemm_set & SET_PROMOTE);
	CHECK(r->nrules == 2);
	CHECK(r->rules[0].pattern && !strcmp(r->rules[0].pattern, "^lm_head$"));
	CHECK(r->rules[0].settings.all.v.format == PRECC_BF16 && r->rules[0].loc.line > 0);
	CHECK(strstr(r->rules[0].label, "output head") != NULL);
	Linear head = {"lm_head", 4096, 128256, false, false, -1, -1, 0, "other", 0, 0, false};
	Linear q = {"model.layers.3.self_attn.q_proj", 4096, 4096, false, false, -1, -1, 0, "other", 0, 0, false};
	Linear gate = {"model.layers.3.mlp.gate", 7168, 256, false, false, -1, -1, 0, "other", 0, 0, false};
	Linear gate_proj = {"model.layers.3.mlp.gate_proj", 7168, 18432, false, false, -1, -1, 0, "other", 0, 0, false};
	CHECK(recipe_rule_matches(r, &r->rules[0], &head));
	CHECK(!recipe_rule_matches(r, &r->rules[0], &q));
	CHECK(recipe_rule_matches(r, &r->rules[1], &gate));
	CHECK(!recipe_rule_matches(r, &r->rules[1], &gate_proj));
	CHECK(r->training.optimizer_state == PRECC_BF16 && r->training.master_weights == PRECC_FP32);
	recipe_free(r);
}

static void
mxfp8(void)
{
	Recipe *r = load("mxfp8");
	const Cast *c = &r->base.all.v;
	CHECK(c->format == PRECC_E4M3 && c->scaling == SCALING_MX);
	CHECK(c->block[0] == 1 && c->block[1] == 32 && c->scale_format == PRECC_E8M0);
	CHECK(has(&r->base.all, SET_BLOCK | SET_SCALE_FORMAT));
	recipe_free(r);
}

static void
nvfp4(void)
{
	Recipe *r = load("nvfp4");
	const Cast *c = &r->base.all.v;
	CHECK(c->format == PRECC_E2M1 && c->scaling == SCALING_NVFP4);
	CHECK(c->block[0] == 1 && c->block[1] == 16 && c->scale_format == PRECC_E4M3);
	const CastSpec *w = &r->base.role[ROLE_WEIGHT];
	CHECK(w->v.block[0] == 16 && w->v.block[1] == 16);
	const CastSpec *go = &r->base.role[ROLE_GRAD_OUTPUT];
	CHECK(go->set == SET_ROUND && go->v.round == PRECC_SR);
	CHECK(r->nrules == 1);
	recipe_free(r);
}

/* Every rule form, in tests/lit/Inputs/recipe_rule_forms.lua. */
static void
rule_forms(void)
{
	cur = "rule_forms";
	Recipe *r = recipe_load(PRECC_INPUTS "/recipe_rule_forms.lua");
	CHECK(r->nrules == 6);
	if (r->nrules != 6) {
		recipe_free(r);
		return;
	}
	Linear head = {"lm_head", 4096, 32000, false, false, -1, -1, 0, "other", 0, 0, false};
	Linear q = {"model.layers.0.self_attn.q_proj", 4096, 4096, false, false, -1, -1, 0, "other", 0, 0, false};
	Linear k = {"model.layers.0.self_attn.k_proj", 4096, 1024, false, false, -1, -1, 0, "other", 0, 0, false};
	Linear down = {"model.layers.0.mlp.down_proj", 14336, 4096, false, false, -1, -1, 0, "other", 0, 0, false};
	Linear up = {"model.layers.0.mlp.up_proj", 4096, 14336, false, false, -1, -1, 0, "other", 0, 0, false};
	Linear emb = {"model.embed_tokens", 4096, 4096, false, false, -1, -1, 0, "other", 0, 0, false};
	const Rule *u = r->rules;
	CHECK(recipe_rule_matches(r, &u[0], &head) && !recipe_rule_matches(r, &u[0], &q));
	CHECK(recipe_rule_matches(r, &u[1], &q) && !recipe_rule_matches(r, &u[1], &k));
	CHECK(recipe_rule_matches(r, &u[2], &k) && !strcmp(u[1].label, u[2].label));
	CHECK(u[1].settings.all.v.scaling == SCALING_CURRENT && u[1].loc.line == 8);
	CHECK(!u[3].pattern && recipe_rule_matches(r, &u[3], &down) && !recipe_rule_matches(r, &u[3], &up));
	CHECK(u[3].settings.role[ROLE_GRAD_OUTPUT].v.format == PRECC_E5M2);
	CHECK(u[3].settings.role[ROLE_WEIGHT].v.scaling == SCALING_CURRENT);
	CHECK(recipe_rule_matches(r, &u[4], &up) && !recipe_rule_matches(r, &u[4], &q));
	CHECK(u[4].settings.gemm[GEMM_FPROP].v.accum == ACCUM_PROMOTE);
	CHECK(u[4].settings.gemm[GEMM_FPROP].v.promote_every == 256);
	CHECK(recipe_rule_matches(r, &u[5], &emb) && u[5].settings.all.v.format == PRECC_FP32);
	CHECK(u[5].settings.has_fallback && u[5].settings.fallback == FALLBACK_ERROR);
	CHECK(u[5].settings.fallback_loc.line == 13);
	recipe_free(r);
}

/* Names are plain text (issue 30): what text_fault refuses, at which byte. */
static void
text_rules(void)
{
	static const struct { const char *s; bool lines; const char *why; } t[] = {
		{"llama-3 8b ✓ 𝔽", false, NULL},
		{"*/ #error x ?\?/ \\", false, NULL},     /* C escapes these, not the name check */
		{"two\nlines\tok", true, NULL},
		{"a\nb", false, "byte 2 is a control character (U+000A)"},
		{"a\x7f", false, "byte 2 is a control character (U+007F)"},
		{"a\xc2\x85", false, "byte 2 is a control character (U+0085)"},    /* C1 NEL */
		{"a\xff", false, "byte 2 (0xff) is not valid UTF-8"},
		{"\xc0\xaf", false, "byte 1 (0xc0) is not valid UTF-8"},           /* overlong '/' */
		{"\xe0\x80\xaf", false, "byte 1 (0xe0) is not valid UTF-8"},      /* overlong */
		{"ab\xed\xa0\x80", false, "byte 3 (0xed) is not valid UTF-8"},    /* surrogate */
		{"\xf4\x90\x80\x80", false, "byte 1 (0xf4) is not valid UTF-8"}, /* > U+10FFFF */
		{"x\xe2\x9c", false, "byte 2 (0xe2) is not valid UTF-8"},          /* cut short */
	};
	char buf[64];

	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		const char *why = text_fault(t[i].s, strlen(t[i].s), t[i].lines, buf, sizeof buf);
		CHECK(t[i].why ? why && !strcmp(why, t[i].why) : !why);
	}
	CHECK(text_fault("a\0b", 3, true, buf, sizeof buf));   /* an embedded NUL */
	char *p = text_lossy("q\xfe\x01.lua \xe2\x9c\x93");
	CHECK(!strcmp(p, "q\xef\xbf\xbd\x01.lua \xe2\x9c\x93"));
	free(p);
}

int
main(void)
{
	bf16();
	fp16_dynamic();
	te_delayed_hybrid();
	current_tensorwise();
	rowwise();
	deepseek_v3();
	mxfp8();
	nvfp4();
	rule_forms();
	text_rules();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("recipes: all checks passed\n");
	return 0;
}
