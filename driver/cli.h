/*
 * cli.h — the precc subcommands. Each returns the process exit status:
 * 0 success, 1 user error (bad recipe, model, value), 2 bad usage.
 */
#ifndef PRECC_CLI_H
#define PRECC_CLI_H

int cmd_fmt(int argc, char **argv);    /* fmt.c:   precc fmt FORMAT [VALUE...] */
int cmd_check(int argc, char **argv);  /* check.c: precc check RECIPE --model M */
int cmd_ir(int argc, char **argv);     /* irgen.c: precc ir RECIPE --model M */
int cmd_sim(int argc, char **argv);    /* sim.c:   precc sim --recipe R --m M --n N --k K */
int cmd_build(int argc, char **argv);  /* build.c: precc build RECIPE --model M -o DIR */

/* main.c: "precc CMD: " prefix for usage errors; returns 2. */
int usage_error(const char *cmd, const char *fmt, ...);
/* main.c: precc and LLVM versions, one line. */
const char *precc_version_string(void);

#endif
