/*
 * main.c — the precc driver: one flat dispatch to the subcommands.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "recipe.h"
#include "codegen.h"
#include "precc/version.h"

static const struct { const char *name; int (*run)(int, char **); const char *what; } cmds[] = {
	{"check", cmd_check, "validate a recipe against a model and print the per-layer plan"},
	{"ir",    cmd_ir,    "lower a recipe x model to IR and print it"},
	{"build", cmd_build, "compile a recipe x model to kernels, manifest and C launchers"},
	{"sim",   cmd_sim,   "measure a recipe's accuracy on one layer (interpreter vs float64)"},
	{"fmt",   cmd_fmt,   "format calculator: encode/decode values, list a format's codes"},
};
#define NCMD (int)(sizeof cmds / sizeof cmds[0])

const char *
precc_version_string(void)
{
	static char buf[128];

	snprintf(buf, sizeof buf, "precc %s (LLVM %s)", PRECC_VERSION, codegen_llvm_version());
	return buf;
}

int
usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "precc %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'precc %s --help'.\n", cmd);
	return 2;
}

static void
help(FILE *f)
{
	fprintf(f, "usage: precc COMMAND [ARGS...]\n\n"
	           "precc compiles precision recipes (Lua) into fused low-precision kernels.\n\n"
	           "commands:\n");
	for (int i = 0; i < NCMD; i++)
		fprintf(f, "  %-7s %s\n", cmds[i].name, cmds[i].what);
	fprintf(f, "\n'precc COMMAND --help' describes one command.\n"
	           "options:\n  --help     this text\n  --version  print the precc and LLVM versions\n"
	           "  --Werror   (after COMMAND) warnings are errors: exit 1\n\n"
	           "exit status: 0 success, 1 user error, 2 bad usage\n");
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		help(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		help(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		puts(precc_version_string());
		return 0;
	}
	/* --Werror anywhere after the command: warnings are errors (diag.c) */
	int n = 2;
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], "--Werror"))
			diag_werror = true;
		else
			argv[n++] = argv[i];
	argc = n;
	argv[argc] = NULL;
	for (int i = 0; i < NCMD; i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].run(argc - 1, argv + 1);
	fprintf(stderr, "precc: unknown command '%s'\n", argv[1]);
	help(stderr);
	return 2;
}
