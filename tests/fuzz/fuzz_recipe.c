/* fuzz_recipe.c — the recipe loader (sandboxed Lua, recipe_parse.c) and
 * the layering and checks of plan_resolve against the tiny model. An error
 * is errorf's exit(1), caught by FUZZ_TRY. */
#define FUZZ_WRAP_EXIT
#include "fuzz.h"
#include <sanitizer/lsan_interface.h>
#include "recipe.h"

static Model *model;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fz_fuzz_limits();
	model = model_load(PRECC_SRC "/recipes/models/tiny.lua");
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fz_write("recipe.lua", data, size);
	static Recipe *volatile r;
	static Plan *volatile p;

	r = NULL, p = NULL;
	/* recipe_load frees all it made before its errorf; plan_resolve's
	 * errors leave the plan to the exit, so its allocations are no leak */
	static volatile int lsan_off;
	lsan_off = 0;
	FUZZ_TRY(r = recipe_load(path); __lsan_disable(); lsan_off = 1; p = plan_resolve(r, model));
	if (lsan_off)
		__lsan_enable();
	if (p)
		plan_free(p);
	if (r)
		recipe_free(r);
	return 0;
}
