/*
 * recipe_lua.h — frontend-internal: what the three files of the recipe
 * language share. recipe.c: vocabulary, constructor objects and entry
 * points; recipe_parse.c: the walk from Lua tables to Settings;
 * recipe_check.c: combinations after layering. Only they include this.
 */
#ifndef PRECC_RECIPE_LUA_H
#define PRECC_RECIPE_LUA_H

#include <lua.h>
#include "recipe.h"
#include "sandbox.h"

#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))
#define HYBRID (-2)               /* format = hybrid, where a format is read */

/* Registry keys: the constructor-object metatable, the recipe object,
 * and the original string.find (rule patterns). */
#define REG_OBJ "precc.object"
#define REG_RECIPE "precc.recipe"
#define REG_FIND "precc.find"

typedef struct Call { char name[32]; int line, n; } Call;

typedef struct Loader {
	Sandbox *sb;
	Src src;                  /* tokens point into text */
	char *text;
	Recipe *r;
	Call calls[512];          /* constructor calls seen, per name and line */
	int ncalls;
} Loader;

/* Where a table was written: its '{' token (or -1) and a fallback line. */
typedef struct Tab { int idx, open, line; const char *what; } Tab;

/* Raise "path:line: msg" (lua_pushfstring formats) from the table walk. */
#define fail(ld, line, ...) sandbox_raise((ld)->sb->L, (line), __VA_ARGS__)

/* recipe.c */
extern const char *const rc_role_names[NROLE], *const rc_gemm_names[NGEMM];
extern const char *const rc_scaling_names[NSCALING], *const rc_format_names[PRECC_NFORMAT];
extern const char *const rc_gemm_formula[NGEMM];
extern const Role rc_gemm_roles[NGEMM][2];
const char *rc_fmtname(precc_format f);
bool rc_lowp(int f);                     /* fp8, fp6 or fp4 */
int rc_bit(unsigned b);                  /* index of a SET_ bit */
int rc_call_nth(Loader *, const char *name, int line);
int rc_keyline(Loader *, const Tab *, const char *key);
bool rc_is_obj(lua_State *, int idx, const char *cat);
const char *rc_obj_str(lua_State *, int idx, const char *field);
int rc_obj_int(lua_State *, int idx, const char *field);
bool rc_is_pattern_list(lua_State *, int idx);

/* recipe_parse.c */
/* An object's options as a Tab; pushes them (idx 0 and nothing pushed
 * when it has none). */
Tab rc_obj_tab(Loader *, int v, int line, const char *what);
/* A recipe's top level (rec != NULL) or a rule's table (label != NULL). */
void rc_settings_table(Loader *, const Tab *, Settings *, Recipe *rec, char **label);
/* The string at v, refused at line unless plain text (text_fault). */
const char *rc_text(Loader *, int line, const char *what, int v, bool lines);

/* recipe_check.c */
/* Layer base (and rule) as plan.c does and reject contradictions. */
void rc_check_level(Loader *, const Settings *base, const Settings *rule);
/* recipe_sem.c */
bool rc_knob_key(Loader *, const char *key, int v, int line, Knobs *);
void rc_check_reference(Loader *, const Cast *, const char *where, int dflt);

#endif
