/*
 * sandbox.c — the Lua 5.4 state recipes and Lua model files run in. Only
 * base (without dofile/loadfile/collectgarbage, with a text-only load and a
 * setmetatable that refuses __gc), string (without dump), table, math and
 * utf8; no io, os, package or debug. Reading an unknown global is an error
 * with a suggestion. Every run has an instruction budget (count hook), the
 * heap a cap (lua_Alloc), and a watchdog bounds the CPU time of all runs
 * together, C code the hooks cannot see included (runaway pattern
 * matching). Errors come back as file:line + message, naming what ran
 * ("recipe" or "model file"); the file is always the recipe's and the
 * line one of its own: chunks load() makes are named "=\"name\"", so no
 * chunk passes for the recipe or another file.
 */
#include <ctype.h>
#include <signal.h>
#include <sys/time.h>
#include <stdarg.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lauxlib.h>
#include <lualib.h>
#include "recipe.h"
#include "sandbox.h"

#define REG_RAISED "precc.raised"   /* the last message sandbox_raise built */

SandboxLimits sandbox_limits = {SANDBOX_MEM_LIMIT, SANDBOX_LOAD_STEPS, SANDBOX_CALL_STEPS, SANDBOX_CPU_S};

static const char *const banned[] = {
	"os", "io", "package", "debug", "require", "dofile", "loadfile",
};
#define NBANNED (int)(sizeof banned / sizeof banned[0])

static void *
sb_alloc(void *ud, void *p, size_t osize, size_t nsize)
{
	Sandbox *sb = ud;

	if (!p)
		osize = 0;
	if (nsize == 0) {
		sb->mem -= osize;
		free(p);
		return NULL;
	}
	if (nsize > osize && sb->mem - osize + nsize > sb->mem_limit) {
		sb->over_mem = true;
		return NULL;
	}
	void *q = realloc(p, nsize);
	if (q)
		sb->mem = sb->mem - osize + nsize;
	return q;
}

Sandbox *
sandbox_of(lua_State *L)
{
	void *ud;

	lua_getallocf(L, &ud);
	return ud;
}

static bool
is_recipe_source(const Sandbox *sb, const char *source)
{
	return source && source[0] == '@' && !strcmp(source + 1, sb->path);
}

enum { RECIPE_FRAMES = 64 };   /* how deep to look for the recipe's own code */

/* The line of the innermost frame at or above `level` that runs the
 * recipe's own code, 0 if none is within RECIPE_FRAMES (lua_getstack
 * walks from the top: a walk to the bottom of a deep recursion would be
 * quadratic). */
static int
recipe_frame_line(lua_State *L, int level)
{
	Sandbox *sb = sandbox_of(L);
	lua_Debug ar;

	for (int n = 0; n < RECIPE_FRAMES && lua_getstack(L, level + n, &ar); n++)
		if (lua_getinfo(L, "Sl", &ar) && is_recipe_source(sb, ar.source) && ar.currentline > 0)
			return ar.currentline;
	return 0;
}

static int limit_error(lua_State *L);

static void
hook(lua_State *L, lua_Debug *ar)
{
	Sandbox *sb = sandbox_of(L);

	if (sb->over_time)                 /* the watchdog ticked: stop here */
		limit_error(L);
	if (ar->event == LUA_HOOKLINE) {   /* runs on every line: cheap */
		if (!sb->chunks || (lua_getinfo(L, "S", ar) && is_recipe_source(sb, ar->source)))
			sb->line = ar->currentline;
		return;
	}
	sb->steps += 1000;
	if (sb->steps > sb->step_limit) {
		sb->over_steps = true;
		limit_error(L);
	}
}

int
sandbox_raise(lua_State *L, int line, const char *fmt, ...)
{
	Sandbox *sb = sandbox_of(L);
	va_list ap;

	if (line <= 0)
		line = recipe_frame_line(L, 0);
	if (line <= 0)
		line = sb->line;
	lua_pushfstring(L, "%s:%d: ", sb->path, line);
	va_start(ap, fmt);
	lua_pushvfstring(L, fmt, ap);
	va_end(ap);
	lua_concat(L, 2);
	lua_pushvalue(L, -1);
	lua_setfield(L, LUA_REGISTRYINDEX, REG_RAISED);
	return lua_error(L);
}

int
sandbox_caller_line(lua_State *L)
{
	return recipe_frame_line(L, 1);
}

/* A limit, once hit, stays hit: pcall in the recipe cannot swallow it. */
static int
limit_error(lua_State *L)
{
	Sandbox *sb = sandbox_of(L);

	if (sb->over_time && sb->task_line)
		return sandbox_raise(L, sb->task_line, "%s used more than %d s of CPU time in "
		                     "all, the last of it %s", sb->what, sb->cpu_s, sb->task);
	if (sb->over_time)
		return sandbox_raise(L, 0, "%s used more than %d s of CPU time (an infinite "
		                     "loop?)", sb->what, sb->cpu_s);
	if (sb->over_steps)
		return sandbox_raise(L, 0, "%s exceeded its instruction budget "
		                     "(%I instructions): an infinite loop?", sb->what,
		                     (lua_Integer)sb->step_limit);
	return sandbox_raise(L, 0, "%s exceeded the memory limit (%d MiB)", sb->what,
	                     (int)(sb->mem_limit >> 20));
}

static int
sb_pcall(lua_State *L)
{
	Sandbox *sb = sandbox_of(L);

	luaL_checkany(L, 1);
	int base = lua_gettop(L);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	lua_call(L, base, LUA_MULTRET);
	if (sb->over_steps || sb->over_mem || sb->over_time)
		return limit_error(L);
	return lua_gettop(L);
}

/* Text handed to Lua's parser a line at a time, so that a parser error
 * without a position (nesting too deep: "C stack overflow") can be placed
 * at the last line the parser read. Lines end as Lua's lexer ends them:
 * \n, \r, \r\n or \n\r. */
typedef struct LineReader { const char *s, *end; int line; } LineReader;

static const char *
read_line(lua_State *L, void *ud, size_t *size)
{
	LineReader *rd = ud;
	const char *p = rd->s, *e = p;

	(void)L;
	if (p >= rd->end) {
		*size = 0;
		return NULL;
	}
	while (e < rd->end && *e != '\n' && *e != '\r')
		e++;
	if (e < rd->end) {
		e++;
		if (e < rd->end && (*e == '\n' || *e == '\r') && *e != e[-1])
			e++;
	}
	rd->s = e;
	rd->line++;
	*size = e - p;
	return p;
}

/* lua_load of text named `name`; *line: the last line read. */
static int
load_lines(lua_State *L, const char *text, size_t len, const char *name, int *line)
{
	LineReader rd = {text, text + len, 0};
	int st = lua_load(L, read_line, &rd, name, "t");

	*line = rd.line > 0 ? rd.line : 1;
	return st;
}

/* A parser error without a position, from its C stack limit. */
static bool
nested_too_deep(const char *m)
{
	return m && !strcmp(m, "C stack overflow");
}
#define NESTED_TOO_DEEP "nested too deeply for Lua's parser (C stack overflow)"

/* The name load() gives a chunk: "=" and, in double quotes, the name the
 * recipe chose (a leading = or @ dropped), or for text without one its
 * first line as [string "..."]. Lua then writes positions in the chunk as
 * "name":3: and the chunk cannot pass for the recipe or for another file;
 * quoted and escaped, under LUA_IDSIZE so that Lua keeps all of it. */
static const char *
push_chunk_name(lua_State *L, const char *name, bool text)
{
	luaL_Buffer b;
	const unsigned char *p = (const unsigned char *)name;
	int n = 0;

	if (*p == '=' || *p == '@')
		p++;
	luaL_buffinit(L, &b);
	luaL_addstring(&b, text ? "=[string \"" : "=\"");
	for (; *p && !(text && *p == '\n'); p++) {
		char e[8];
		if (*p == '"' || *p == '\\')
			snprintf(e, sizeof e, "\\%c", *p);
		else if (*p < 32 || *p == 127)
			snprintf(e, sizeof e, "\\%d", *p);
		else
			snprintf(e, sizeof e, "%c", *p);
		if (n + (int)strlen(e) > LUA_IDSIZE - 16) {
			luaL_addstring(&b, "...");
			break;
		}
		luaL_addstring(&b, e);
		n += (int)strlen(e);
	}
	if (text && *p == '\n')
		luaL_addstring(&b, "...");
	luaL_addstring(&b, text ? "\"]" : "\"");
	luaL_pushresult(&b);
	return lua_tostring(L, -1);
}

/* load(chunk [, name [, mode [, env]]]): text only, sandbox globals, the
 * chunk named by push_chunk_name. */
static int
sb_load(lua_State *L)
{
	int top = lua_gettop(L);
	const char *mode = luaL_optstring(L, 3, "t");
	size_t len;
	const char *text = lua_tolstring(L, 1, &len);

	luaL_checkany(L, 1);
	if (strcmp(mode, "t"))
		return luaL_error(L, "load: %ss may load text chunks only (mode 't'), not '%s'",
		                  sandbox_of(L)->what, mode);
	const char *given = luaL_optstring(L, 2, NULL);
	const char *name = push_chunk_name(L, given ? given : text ? text : "(load)",
	                                   !given && text);
	if (!text) {                  /* a reader function: Lua's own load */
		lua_pushvalue(L, lua_upvalueindex(1));
		lua_pushvalue(L, 1);
		lua_pushvalue(L, -3);
		lua_pushliteral(L, "t");
		if (top >= 4)
			lua_pushvalue(L, 4);
		else
			lua_pushglobaltable(L);
		lua_call(L, 4, LUA_MULTRET);
		sandbox_of(L)->chunks = true;
		return lua_gettop(L) - top - 1;
	}
	int line;
	if (load_lines(L, text, len, name, &line) != LUA_OK) {
		if (nested_too_deep(lua_tostring(L, -1)))
			lua_pushfstring(L, "%s:%d: " NESTED_TOO_DEEP, name + 1, line);
		luaL_pushfail(L);
		lua_insert(L, -2);
		return 2;
	}
	sandbox_of(L)->chunks = true;
	if (top >= 4) {
		lua_pushvalue(L, 4);
		if (!lua_setupvalue(L, -2, 1))
			lua_pop(L, 1);
	}
	return 1;
}

/* setmetatable refusing __gc: Lua runs finalizers with hooks off (no
 * instruction budget) at any collection and at lua_close(), after the
 * loader that rule and recipe write to is gone. An object is marked for
 * finalization only if its metatable has __gc when it is set, so refusing
 * it here means no recipe object ever has a finalizer. */
static int
sb_setmetatable(lua_State *L)
{
	if (lua_type(L, 2) == LUA_TTABLE) {
		lua_pushliteral(L, "__gc");
		if (lua_rawget(L, 2) != LUA_TNIL)
			return luaL_error(L, "setmetatable: __gc finalizers are not available in %ss",
			                  sandbox_of(L)->what);
		lua_pop(L, 1);
	}
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
	return lua_gettop(L);
}

/* A control character of recipe text as \ddd (\n, \r as such): text
 * cannot start a line of precc's output, where it could pass for a
 * diagnostic of another file ("\n/etc/shadow:4: error: ..."). */
static int
escape_control(char *e, unsigned char c)
{
	return c == '\n' ? sprintf(e, "\\n") : c == '\r' ? sprintf(e, "\\r")
	     : (c < 32 && c != '\t') || c == 127 ? sprintf(e, "\\%d", c) : 0;
}

/* print goes to stderr as a note, so it never mixes with precc's output;
 * each of its lines is a note at the line that printed it. */
static int
sb_print(lua_State *L)
{
	Sandbox *sb = sandbox_of(L);
	int n = lua_gettop(L), line = sandbox_caller_line(L);
	char pre[1100], e[8];

	snprintf(pre, sizeof pre, "%s:%d: note: ", sb->path, line ? line : sb->line);
	fputs(pre, stderr);
	for (int i = 1; i <= n; i++) {
		size_t len;
		const char *s = luaL_tolstring(L, i, &len);
		if (i > 1)
			fputc('\t', stderr);
		for (size_t k = 0; k < len; k++) {
			if (s[k] == '\n')
				fprintf(stderr, "\n%s", pre);
			else if (escape_control(e, s[k]))
				fputs(e, stderr);
			else
				fputc(s[k], stderr);
		}
		lua_pop(L, 1);
	}
	fputc('\n', stderr);
	return 0;
}

static int
env_index(lua_State *L)
{
	const char *cands[512];
	int n = 0;

	if (lua_type(L, 2) != LUA_TSTRING)
		return 0;
	const char *k = lua_tostring(L, 2);
	for (int i = 0; i < NBANNED; i++)
		if (!strcmp(k, banned[i]))
			return luaL_error(L, "'%s' is not available in %ss "
			                  "(sandboxed: no io, os, package or debug)", k, sandbox_of(L)->what);
	lua_pushnil(L);
	while (lua_next(L, 1)) {
		lua_pop(L, 1);
		if (lua_type(L, -1) == LUA_TSTRING && n < 512)
			cands[n++] = lua_tostring(L, -1);
	}
	const char *s = suggest(k, cands, n), *fam = format_family_hint(k);
	if (fam && strcmp(k, "e8m0"))
		return luaL_error(L, "unknown name '%s': precc names formats by their bits, write %s",
		                  k, fam);
	if (s)
		return luaL_error(L, "unknown name '%s' (did you mean '%s'?)", k, s);
	return luaL_error(L, "unknown name '%s'", k);
}

static void
open_libs(lua_State *L)
{
	static const luaL_Reg libs[] = {
		{LUA_GNAME, luaopen_base}, {LUA_STRLIBNAME, luaopen_string},
		{LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
		{LUA_UTF8LIBNAME, luaopen_utf8},
	};
	for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
		luaL_requiref(L, libs[i].name, libs[i].func, 1);
		lua_pop(L, 1);
	}
	lua_pushglobaltable(L);
	for (int i = 0; i < NBANNED; i++) {
		lua_pushnil(L);
		lua_setfield(L, -2, banned[i]);
	}
	lua_pushnil(L);
	lua_setfield(L, -2, "collectgarbage");
	lua_getfield(L, -1, "string");
	lua_pushnil(L);
	lua_setfield(L, -2, "dump");
	lua_pop(L, 1);
	lua_getfield(L, -1, "load");
	lua_pushcclosure(L, sb_load, 1);
	lua_setfield(L, -2, "load");
	lua_getfield(L, -1, "pcall");
	lua_pushcclosure(L, sb_pcall, 1);
	lua_setfield(L, -2, "pcall");
	lua_getfield(L, -1, "xpcall");
	lua_pushcclosure(L, sb_pcall, 1);
	lua_setfield(L, -2, "xpcall");
	lua_pushcfunction(L, sb_print);
	lua_setfield(L, -2, "print");
	lua_getfield(L, -1, "setmetatable");
	lua_pushcclosure(L, sb_setmetatable, 1);
	lua_setfield(L, -2, "setmetatable");
	lua_newtable(L);
	lua_pushcfunction(L, env_index);
	lua_setfield(L, -2, "__index");
	lua_pushboolean(L, 0);
	lua_setfield(L, -2, "__metatable");
	lua_setmetatable(L, -2);
	lua_pop(L, 1);
}

Sandbox *
sandbox_new(const char *path, const char *what)
{
	Sandbox *sb = xcalloc(1, sizeof *sb);

	sb->path = xstrdup(path);
	sb->what = what;
	sb->mem_limit = sandbox_limits.mem;
	sb->step_limit = sandbox_limits.load_steps;
	sb->cpu_s = sandbox_limits.cpu_s;
	const char *e = getenv("PRECC_SANDBOX_CPU_S");
	if (e && atoi(e) > 0 && atoi(e) < sb->cpu_s)   /* lowers it, never raises */
		sb->cpu_s = atoi(e);
	sb->cpu_left_us = sb->cpu_s * 1000000LL;
	sb->L = lua_newstate(sb_alloc, sb);
	if (!sb->L)
		die("cannot create a Lua state");
	open_libs(sb->L);
	lua_sethook(sb->L, hook, LUA_MASKCOUNT | LUA_MASKLINE, 1000);
	return sb;
}

/* No recipe object has a finalizer (sb_setmetatable), so lua_close() runs
 * no recipe code; the watchdog is armed anyway, as for every run, with a
 * budget of its own: freeing is precc's time, not the recipe's. */
static void arm_watchdog(Sandbox *, long long us, struct itimerval *prev);
static void disarm_watchdog(struct itimerval *prev);

void
sandbox_free(Sandbox *sb)
{
	struct itimerval prev;

	if (!sb)
		return;
	sb->task_line = 0;
	arm_watchdog(sb, sb->cpu_s * 1000000LL, &prev);
	lua_close(sb->L);
	disarm_watchdog(&prev);
	free(sb->path);
	free(sb);
}

/* An error in the recipe's file, at `line`, on one line of output. */
static void
fill_error(Sandbox *sb, const char *m, int line, SandboxError *err)
{
	size_t n = 0;
	char e[8];

	snprintf(err->file, sizeof err->file, "%s", sb->path);
	err->line = line;
	for (; *m && n + 8 < sizeof err->msg; m++) {
		int k = escape_control(e, *m);
		if (k)
			memcpy(err->msg + n, e, k);
		else
			err->msg[n] = *m;
		n += k ? k : 1;
	}
	err->msg[n] = 0;
	if (!strcmp(err->msg, "stack overflow") || strstr(err->msg, "stack overflow ("))
		snprintf(err->msg, sizeof err->msg, "stack overflow (recursion too deep?)");
}

/* A syntax error's "path:N: " (the parser's; Lua shortens a long path to
 * "...tail"): the length of the prefix and *line, or 0. */
static size_t
parser_position(const Sandbox *sb, const char *m, int *line)
{
	const char *c = strchr(m, ':'), *d;

	for (; c; c = strchr(c + 1, ':')) {
		for (d = c + 1; isdigit((unsigned char)*d); d++)
			;
		if (d == c + 1 || d[0] != ':' || d[1] != ' ')
			continue;
		size_t n = c - m, plen = strlen(sb->path);
		if ((n == plen && !memcmp(m, sb->path, n)) ||
		    (n > 3 && !memcmp(m, "...", 3) && n - 3 <= plen &&
		     !memcmp(m + 3, sb->path + plen - (n - 3), n - 3))) {
			*line = atoi(c + 1);
			return d + 2 - m;
		}
		break;
	}
	return 0;
}

bool
sandbox_load(Sandbox *sb, const char *text, size_t len, SandboxError *err)
{
	char name[1100];

	if (len >= 4 && !memcmp(text, LUA_SIGNATURE, 4)) {
		snprintf(err->file, sizeof err->file, "%s", sb->path);
		err->line = 1;
		snprintf(err->msg, sizeof err->msg, "precompiled Lua bytecode is not accepted: "
		         "a %s must be Lua source text", sb->what);
		return false;
	}
	snprintf(name, sizeof name, "@%s", sb->path);
	int line, st = load_lines(sb->L, text, len, name, &line);
	if (st == LUA_OK)
		return true;
	const char *m = st == LUA_ERRMEM ? "" : lua_tostring(sb->L, -1);
	m += parser_position(sb, m, &line);
	fill_error(sb, nested_too_deep(m) ? NESTED_TOO_DEEP : m, line, err);
	if (st == LUA_ERRMEM)
		snprintf(err->msg, sizeof err->msg, "%s exceeded the memory limit", sb->what);
	lua_pop(sb->L, 1);
	return false;
}

/* Where an error is: in the recipe's file, at the innermost line of its
 * own code on the stack (an error in a load()ed chunk: the line that ran
 * the chunk, the chunk's own "name":N: left in the text). A position at
 * the head of the message is taken only where precc (sandbox_raise) or
 * Lua wrote it for a frame of the recipe, as error(msg, 2) names the
 * caller; the same text from anywhere else stays text. */
static int
msgh(lua_State *L)
{
	Sandbox *sb = sandbox_of(L);
	lua_Debug ar;
	int line = 0;

	if (lua_type(L, 1) != LUA_TSTRING &&
	    !(luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING))
		lua_pushfstring(L, "%s raised an error object of type %s", sb->what,
		                luaL_typename(L, 1));
	const char *m = lua_tostring(L, -1);
	lua_getfield(L, LUA_REGISTRYINDEX, REG_RAISED);
	bool raised = lua_rawequal(L, -1, -2);
	lua_pop(L, 1);
	if (raised) {                      /* "path:N: " of sandbox_raise */
		line = atoi(m + strlen(sb->path) + 1);
		m = strstr(m + strlen(sb->path) + 1, ": ") + 2;
	}
	for (int n = 0; !raised && n < RECIPE_FRAMES && lua_getstack(L, 1 + n, &ar); n++) {
		if (!lua_getinfo(L, "Sl", &ar) || !is_recipe_source(sb, ar.source) ||
		    ar.currentline <= 0)
			continue;
		char pre[LUA_IDSIZE + 32];
		int np = snprintf(pre, sizeof pre, "%s:%d: ", ar.short_src, ar.currentline);
		if (!line)
			line = ar.currentline;
		if (!strncmp(m, pre, np)) {
			line = ar.currentline;
			m += np;
			break;
		}
	}
	if (!line)                 /* no recipe code on the stack: a rule's chunk */
		line = sb->task_line ? sb->task_line : sb->line;
	sb->err_line = line;
	lua_pushstring(L, m);
	return 1;
}

/* The watchdog: past the CPU-time limit its first tick sets over_time,
 * and Lua code stops at its next hook (within 1000 instructions or a line)
 * with an error, unwinding as any other: the recipe's line, its memory
 * freed. C code (a runaway pattern match) cannot be interrupted by hooks,
 * so a second tick, WATCHDOG_GRACE_US of CPU later, reports and exits.
 * CPU time, not wall time: a loaded machine or a sanitizer build must not
 * turn a legitimate recipe into an error. The timer is armed with what is
 * left of the sandbox's budget, and each run's CPU time is taken off it,
 * so its runs share one budget: a rule that costs a second per layer is
 * stopped on a model of any size, not allowed a budget per layer. */
enum { WATCHDOG_GRACE_US = 250000 };

static Sandbox *watched;

static void
on_alarm(int sig)
{
	char buf[1400];
	int n;

	(void)sig;
	if (!watched)          /* the handler stays; a late tick finds no run */
		return;
	if (!watched->over_time) {
		watched->over_time = 1;
		return;
	}
	if (watched->task_line)
		n = snprintf(buf, sizeof buf, "%s:%d: error: %s used more than %d s of CPU time "
		             "in all, the last of it %s\n", watched->path, watched->task_line,
		             watched->what, watched->cpu_s, watched->task);
	else
		n = snprintf(buf, sizeof buf, "%s:%d: error: %s used more than %d s of CPU time "
		             "(a runaway pattern match?)\n", watched->path, watched->line,
		             watched->what, watched->cpu_s);
	if (n > 0)
		(void)!write(2, buf, n < (int)sizeof buf ? n : (int)sizeof buf - 1);
	_exit(1);
}

/* The handler is installed once and stays (two system calls fewer on
 * each of the up to rules x layers x 2 runs of a check). */
static void
arm_watchdog(Sandbox *sb, long long us, struct itimerval *prev)
{
	static bool installed;
	struct itimerval limit = {0};

	if (us < 1)             /* 0 would disarm it */
		us = 1;
	limit.it_value.tv_sec = us / 1000000;
	limit.it_value.tv_usec = us % 1000000;
	limit.it_interval.tv_usec = WATCHDOG_GRACE_US;   /* the second tick */
	sb->over_time = 0;
	watched = sb;
	if (!installed) {
		struct sigaction sa = {0};
		sa.sa_handler = on_alarm;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGPROF, &sa, NULL);
		installed = true;
	}
	setitimer(ITIMER_PROF, &limit, prev);
}

static void
disarm_watchdog(struct itimerval *prev)
{
	setitimer(ITIMER_PROF, prev, NULL);
	watched = NULL;
}

/* The process's CPU time, as ITIMER_PROF counts it. Not the timer's own
 * remainder: that moves only at scheduler ticks, so runs shorter than a
 * tick (a predicate call) would spend nothing. */
static long long
cpu_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

bool
sandbox_call(Sandbox *sb, int nargs, int nresults, long long steps, SandboxError *err)
{
	lua_State *L = sb->L;
	struct itimerval prev;
	int base = lua_gettop(L) - nargs;

	sb->steps = 0;
	sb->step_limit = steps;
	sb->over_steps = sb->over_mem = false;
	sb->err_line = 0;
	lua_pushcfunction(L, msgh);
	lua_insert(L, base);
	long long t0 = cpu_us();
	arm_watchdog(sb, sb->cpu_left_us, &prev);
	int st = lua_pcall(L, nargs, nresults, base);
	if (st == LUA_OK && sb->over_time) {   /* C code ran past the budget and returned */
		lua_settop(L, base);
		lua_pushcfunction(L, limit_error);
		st = lua_pcall(L, 0, 0, base);
	}
	disarm_watchdog(&prev);
	sb->cpu_left_us -= cpu_us() - t0;
	lua_remove(L, base);
	if (st == LUA_OK)
		return true;
	int line = sb->err_line ? sb->err_line : sb->line;
	if (st == LUA_ERRMEM || sb->over_mem) {
		fill_error(sb, "", line, err);
		snprintf(err->msg, sizeof err->msg, "%s exceeded the memory limit (%d MiB)", sb->what,
		         (int)(sb->mem_limit >> 20));
	} else {
		fill_error(sb, lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error", line, err);
	}
	lua_pop(L, 1);
	return false;
}
