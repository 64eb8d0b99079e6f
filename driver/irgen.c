/*
 * irgen.c — precc ir: a recipe x model lowered to IR, or an IR text file
 * parsed, run through the stages (verify, then the passes of
 * passes/pipeline.c up to the last one asked for) and printed.
 * --print-after dumps the module after any stage; --target picks the
 * target the passes legalize and schedule for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "recipe.h"
#include "ir.h"
#include "passes.h"

/* The pipeline after the first stage (lower or parse): append passes here. */
typedef bool (*StageFn)(Module *);

static bool
stage_verify(Module *m)
{
	size_t sz = 1 << 16;
	char *err = xmalloc(sz);
	int n = ir_verify(m, err, sz);

	if (n) {
		/* parsed IR carries file:line:col; lowered IR does not */
		const char *s = err, *nl;
		for (; s && *s; s = nl ? nl + 1 : NULL) {
			nl = strchr(s, '\n');
			fprintf(stderr, "%s%.*s\n", m->name ? "" : "precc: ",
			        nl ? (int)(nl - s) : (int)strlen(s), s);
		}
	}
	free(err);
	return n == 0;
}

static const struct { const char *name; StageFn run; } stages[] = {
	{"verify", stage_verify},
};
#define NSTAGE (int)(sizeof stages / sizeof stages[0])

static void
help(FILE *f)
{
	fputs("usage: precc ir RECIPE --model MODEL [--layer PATTERN] [--print-after=STAGE|all]\n"
	      "                [--target sm_90a]\n"
	      "       precc ir FILE.ir [--print-after=STAGE|all] [--target sm_90a]\n\n"
	      "Lower a recipe x model to precc IR, one function per layer and GEMM\n"
	      "(FQN.fprop, FQN.dgrad, FQN.wgrad), verify it and print it. Given an .ir\n"
	      "file (or - for stdin), parse, verify and print it: the text round-trips.\n"
	      "docs/ir.md describes the IR.\n\n"
	      "  RECIPE               a recipe file (.lua)\n"
	      "  --model MODEL        a Lua model file (.lua) or a HuggingFace config.json\n"
	      "  --layer PATTERN      only layers whose fully qualified name matches: a\n"
	      "                       shell glob when PATTERN has * ? or [ (fnmatch, on the\n"
	      "                       whole name: 'model.layers.[0-3].mlp.*'), otherwise a\n"
	      "                       plain substring ('up_proj')\n"
	      "  --print-after=STAGE  print the IR after STAGE, under a '# after STAGE'\n"
	      "                       line; repeat or separate with commas; 'all' prints\n"
	      "                       after every stage. Stages: lower (or parse), verify,\n"
	      "                       legalize, merge, fuse, partition, dedupe, schedule\n"
	      "                       (docs/passes.md); the passes run up to the last\n"
	      "                       stage asked for\n"
	      "  --target T           the target of the passes: sm_89, sm_90 or sm_90a\n"
	      "                       (default sm_90a)\n"
	      "  --no-grid-barrier    never fuse a global amax with its quantize through a\n"
	      "                       grid-wide barrier: two kernels instead\n"
	      "  --help               this text\n\n"
	      "Without --print-after the IR is printed once, after verify (no passes).\n"
	      "exit status: 0 success, 1 user error (bad recipe, model or IR; parse and\n"
	      "verifier errors read file:line:col: error: ...), 2 bad usage\n", f);
}

/* Stage names --print-after knows; index 0 is the front (lower/parse). */
static int
stage_index(const char *s)
{
	if (!strcmp(s, "lower") || !strcmp(s, "parse"))
		return 0;
	for (int i = 0; i < NSTAGE; i++)
		if (!strcmp(s, stages[i].name))
			return i + 1;
	for (int i = 0; i < pass_count(); i++)
		if (!strcmp(s, pass_name(i)))
			return 1 + NSTAGE + i;
	return -1;
}

#define MAXSTAGE 32

static void
print_after(const char *pass, const Module *m, void *ctx)
{
	const bool *after = ctx;
	int k = stage_index(pass);

	if (k >= 0 && after[k]) {
		printf("# after %s\n", pass);
		ir_print_module(stdout, m);
	}
}

static char *
read_all(const char *path)
{
	size_t n;
	bool opened;
	char *buf = read_file(path, 0, &n, &opened);

	if (!buf)
		errorf(path, 0, "cannot %s: %s", opened ? "read" : "open", strerror(errno));
	if (strlen(buf) != n)
		errorf(path, 0, "not a text file (NUL byte at offset %zu)", strlen(buf));
	return buf;
}

static bool
is_ir_file(const char *p)
{
	size_t n = strlen(p);

	return !strcmp(p, "-") || (n > 3 && !strcmp(p + n - 3, ".ir"));
}

int
cmd_ir(int argc, char **argv)
{
	const char *input = NULL, *model = NULL, *layer = NULL, *target = "sm_90a";
	bool after[MAXSTAGE] = {false}, dump = false;
	int nstage = 1 + NSTAGE + pass_count();
	static const char *const opts[] = {"--model", "--layer", "--print-after", "--target",
	                                   "--no-grid-barrier", "--help"};
	bool no_grid = false;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL, **slot = NULL;
		static const struct { const char *opt; int len; } valued[] = {
			{"--model", 7}, {"--layer", 7}, {"--print-after", 13}, {"--target", 8}};
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			help(stdout);
			return 0;
		}
		if (!strcmp(a, "--no-grid-barrier")) {
			no_grid = true;
			continue;
		}
		for (int k = 0; k < 4; k++)
			if (!strncmp(a, valued[k].opt, valued[k].len)
			    && (a[valued[k].len] == 0 || a[valued[k].len] == '=')) {
				if (a[valued[k].len] == '=')
					v = a + valued[k].len + 1;
				else if (++i == argc)
					return usage_error("ir", "%s needs a value", a);
				else
					v = argv[i];
				slot = k == 0 ? &model : k == 1 ? &layer : k == 3 ? &target : NULL;
			}
		if (!strcmp(a, "-m")) {
			if (++i == argc)
				return usage_error("ir", "%s needs a value", a);
			v = argv[i], slot = &model;
		}
		if (v && slot)
			*slot = v;
		else if (v) {             /* --print-after */
			char buf[256], *tok, *save;
			snprintf(buf, sizeof buf, "%s", v);
			for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				int k = stage_index(tok);
				if (!strcmp(tok, "all"))
					for (k = 0; k < nstage; k++)
						after[k] = true;
				else if (k >= 0)
					after[k] = true;
				else {
					char list[256] = "lower, parse";
					for (int s = 0; s < NSTAGE; s++)
						snprintf(list + strlen(list), sizeof list - strlen(list), ", %s",
						         stages[s].name);
					for (int s = 0; s < pass_count(); s++)
						snprintf(list + strlen(list), sizeof list - strlen(list), ", %s",
						         pass_name(s));
					return usage_error("ir", "unknown stage '%s' for --print-after "
					                   "(stages: %s, or all)", tok, list);
				}
			}
			dump = true;
		} else if (a[0] == '-' && a[1]) {
			const char *s = suggest(a, opts, sizeof opts / sizeof opts[0]);
			if (s)
				return usage_error("ir", "unknown option '%s' (did you mean '%s'?)", a, s);
			return usage_error("ir", "unknown option '%s'", a);
		} else if (input)
			return usage_error("ir", "one input at a time ('%s' and '%s')", input, a);
		else
			input = a;
	}
	if (!input)
		return usage_error("ir", "missing RECIPE or FILE.ir");
	const Target *tg = target_by_name(target);
	if (!tg)
		return usage_error("ir", "unknown target '%s' (targets: %s)", target, target_names);

	Module *m;
	const char *front;
	Recipe *rc = NULL;
	Model *md = NULL;
	Plan *plan = NULL;
	if (is_ir_file(input)) {
		if (model || layer)
			return usage_error("ir", "%s applies to recipes, not IR files",
			                   model ? "--model" : "--layer");
		char *text = read_all(input);
		char err[1024];
		m = ir_parse(text, strcmp(input, "-") ? input : "<stdin>", err, sizeof err);
		free(text);
		if (!m) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
		front = "parse";
	} else {
		if (!model)
			return usage_error("ir", "missing --model MODEL");
		if (!*model)
			return usage_error("ir", "--model needs a model file");
		rc = recipe_load(input);
		md = model_load(model);
		plan = plan_resolve(rc, md);
		m = lower_plan(plan, layer);
		front = "lower";
		if (m->nfn == 0) {
			ir_module_free(m);
			plan_free(plan);
			model_free(md);
			recipe_free(rc);
			errorf(NULL, 0, "no layer of '%s' matches '%s'", model, layer ? layer : "");
		}
	}

	int rc_ = 0;
	for (int s = 0; s <= NSTAGE; s++) {
		if (s > 0 && !stages[s - 1].run(m)) {
			rc_ = 1;
			break;
		}
		if (after[s]) {
			printf("# after %s\n", s ? stages[s - 1].name : front);
			ir_print_module(stdout, m);
		}
	}
	/* the passes, up to the last stage asked for */
	int last = -1;
	for (int k = 1 + NSTAGE; k < nstage; k++)
		if (after[k])
			last = k - 1 - NSTAGE;
	if (!rc_ && last >= 0) {
		PassOptions po = {.target = tg, .print_after = print_after, .ctx = after,
		                  .stop_after = pass_name(last), .no_grid_barrier = no_grid};
		passes_run(m, &po);
	}
	if (!rc_ && !dump)
		ir_print_module(stdout, m);
	ir_module_free(m);
	if (plan)
		plan_free(plan);
	if (md)
		model_free(md);
	if (rc)
		recipe_free(rc);
	return rc_;
}
