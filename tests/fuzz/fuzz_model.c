/* fuzz_model.c — the model loaders (model_load): FUZZ_EXT ".json" is the
 * HuggingFace config.json reader (cJSON), ".lua" the sandboxed Lua model
 * file. An error is errorf's exit(1), caught by FUZZ_TRY. */
#define FUZZ_WRAP_EXIT
#include "fuzz.h"
#include "recipe.h"

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fz_fuzz_limits();
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fz_write("model" FUZZ_EXT, data, size);
	static Model *volatile m;

	m = NULL;
	FUZZ_TRY(m = model_load(path));
	if (m)
		model_free(m);
	return 0;
}
