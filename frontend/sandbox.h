/*
 * sandbox.h — frontend-internal: the Lua sandbox recipes run in
 * (sandbox.c) and the source index that turns a table key back into the
 * line it was written on (srcpos.c). Only recipe.c includes this.
 */
#ifndef PRECC_SANDBOX_H
#define PRECC_SANDBOX_H

#include <stdbool.h>
#include <signal.h>
#include <stddef.h>
#include <lua.h>

/* ---- sandbox.c ---------------------------------------------------------- */

enum {
	SANDBOX_MEM_LIMIT = 64 << 20,        /* bytes of Lua heap */
	SANDBOX_LOAD_STEPS = 20000000,       /* VM instructions to load a recipe */
	SANDBOX_CALL_STEPS = 1000000,        /* ... per predicate call */
	SANDBOX_CPU_S = 5,                   /* watchdog: CPU seconds for all runs together */
};

/* The limits in force, SANDBOX_* above unless lowered. Only the fuzz
 * harnesses lower them (tests/fuzz/fuzz.h), so that a runaway input costs
 * them milliseconds rather than seconds; PRECC_SANDBOX_CPU_S lowers cpu_s
 * for one precc run (tests, docs/testing.md). */
typedef struct SandboxLimits {
	size_t mem;
	long long load_steps, call_steps;
	int cpu_s;
} SandboxLimits;
extern SandboxLimits sandbox_limits;

typedef struct Sandbox {
	lua_State *L;
	char *path;               /* the recipe or model file, as given */
	const char *what;         /* "recipe" or "model file", for messages */
	size_t mem, mem_limit;
	long long steps, step_limit;
	bool over_steps, over_mem;
	volatile sig_atomic_t over_time;  /* the watchdog's first tick: Lua stops at
	                                     its next hook (sandbox.c, on_alarm) */
	int line;                 /* last line of the recipe's own code run
	                             (line hook; a load()ed chunk's lines are
	                             not the recipe's) */
	bool chunks;              /* load() has made a chunk: from then on the
	                             line hook checks whose line it is (twice
	                             the time of a line, only then) */
	int err_line;             /* where the last error is (msgh) */
	int cpu_s;                /* the CPU budget of all runs together ... */
	long long cpu_left_us;    /* ... and what is left of it */
	/* What the watchdog blames while recipe code runs for precc (a rule
	 * matching a layer) rather than at its own top level: the line, and
	 * the end of the message. task_line 0: the line running. */
	int task_line;
	char task[512];
} Sandbox;

/* A failed run: where and what, ready for errorf(file, line, "%s", msg). */
typedef struct SandboxError {
	char file[1024];
	int line;
	char msg[1024];
} SandboxError;

Sandbox *sandbox_new(const char *path, const char *what);
void sandbox_free(Sandbox *);
Sandbox *sandbox_of(lua_State *L);
/* Load the recipe text as a text-only chunk named "@path" with the
 * sandbox's globals; pushes the chunk. Returns false and fills err on a
 * syntax error or a binary (bytecode) chunk. */
bool sandbox_load(Sandbox *, const char *text, size_t len, SandboxError *err);
/* lua_pcall with a fresh instruction budget and the watchdog armed with
 * the CPU time left to the sandbox: one budget for the recipe's load and
 * every call of its rules, so that a slow rule cannot run per layer. */
bool sandbox_call(Sandbox *, int nargs, int nresults, long long steps, SandboxError *err);
/* Raise a Lua error "path:line: msg" (line 0: the recipe's line now
 * running); the error is then placed at that line, while the same text
 * from the recipe's own error() is not trusted for a position;
 * fmt is lua_pushfstring's: %s %d %I %f %p %c %U %% only. */
int sandbox_raise(lua_State *L, int line, const char *fmt, ...);
/* The line of the recipe's own code that called the running C function
 * (through load()ed chunks or pcall), or 0. */
int sandbox_caller_line(lua_State *L);

/* ---- srcpos.c ----------------------------------------------------------- */

typedef struct SrcTok { int kind; int line; const char *s; int len; } SrcTok;
enum { TOK_EOF, TOK_NAME, TOK_STRING, TOK_NUMBER, TOK_PUNCT };

typedef struct Src { SrcTok *tok; int ntok; } Src;

void src_index(Src *, const char *text, size_t len);
void src_free(Src *);
/* The '{' that opens the table argument of the nth (0-based) call to
 * `name` on `line`: name{...}, name "x" {...}, name(...) {...},
 * name("x", {...}). -1 if there is none. */
int src_call_table(const Src *, int line, const char *name, int nth);
/* In the table opened at token `open`, the `key =` at its top level (or
 * ["key"] =): returns the token index of the key, -1 if not found. */
int src_find_key(const Src *, int open, const char *key);
/* The '{' directly after `key =` (token index from src_find_key), or -1. */
int src_value_table(const Src *, int keytok);
/* The nth (0-based) positional (unkeyed) item of the table at `open`:
 * its first token, or -1. */
int src_find_item(const Src *, int open, int nth);
static inline int src_line(const Src *s, int tok, int dflt)
{
	return tok >= 0 && tok < s->ntok ? s->tok[tok].line : dflt;
}

#endif
