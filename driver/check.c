/*
 * check.c — precc check RECIPE --model MODEL [--json] [--no-group]:
 * validate a recipe against a model and print the per-layer plan.
 */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "recipe.h"

static void
help(FILE *f)
{
	fputs("usage: precc check RECIPE --model MODEL [--json] [--no-group]\n\n"
	      "Validate a precision recipe against a model and print, for every linear\n"
	      "layer, what its fprop, dgrad and wgrad GEMMs get: operand formats, scaling,\n"
	      "accumulation, output dtype, the rule that matched, and each fallback with\n"
	      "its reason.\n\n"
	      "  RECIPE          a recipe file (.lua)\n"
	      "  --model MODEL   a Lua model file (.lua) or a HuggingFace config.json\n"
	      "                  (Llama, Mistral, Qwen2, Qwen3), or a directory holding one\n"
	      "  --json          the plan as JSON: one object per layer, every field\n"
	      "  --no-group      one row per layer (default: identical layers are grouped,\n"
	      "                  model.layers.[0-31].mlp.up_proj)\n"
	      "  --help          this text\n\n"
	      "exit status: 0 success, 1 user error, 2 bad usage\n", f);
}

int
cmd_check(int argc, char **argv)
{
	const char *recipe = NULL, *model = NULL;
	bool json = false, group = true;
	static const char *const opts[] = {"--model", "--json", "--no-group", "--help"};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			help(stdout);
			return 0;
		} else if (!strcmp(a, "--json"))
			json = true;
		else if (!strcmp(a, "--no-group"))
			group = false;
		else if (!strcmp(a, "--model") || !strcmp(a, "-m")) {
			if (++i == argc)
				return usage_error("check", "%s needs a model file", a);
			model = argv[i];
		} else if (!strncmp(a, "--model=", 8))
			model = a + 8;
		else if (a[0] == '-' && a[1]) {
			const char *s = suggest(a, opts, sizeof opts / sizeof opts[0]);
			if (s)
				return usage_error("check", "unknown option '%s' (did you mean '%s'?)",
				                   a, s);
			return usage_error("check", "unknown option '%s'", a);
		}
		else if (recipe)
			return usage_error("check", "one recipe at a time ('%s' and '%s')", recipe, a);
		else
			recipe = a;
	}
	if (!recipe)
		return usage_error("check", "missing RECIPE");
	if (!model)
		return usage_error("check", "missing --model MODEL");
	if (!*model)
		return usage_error("check", "--model needs a model file");

	Recipe *rc = recipe_load(recipe);
	Model *m = model_load(model);
	Plan *plan = plan_resolve(rc, m);
	if (json)
		plan_print_json(plan, stdout);
	else if (group)
		plan_print_table(plan, stdout);
	else
		plan_print_table_flat(plan, stdout);
	plan_free(plan);
	model_free(m);
	recipe_free(rc);
	return 0;
}
