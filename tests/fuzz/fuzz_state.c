/* fuzz_state.c — the scaling-state file reader (precc_state_load) into a
 * state of three tensors. PRECC_FUZZ_SEED=PATH writes a valid file of that
 * state to PATH and exits (tests/fuzz/seeds.sh uses it). */
#include "fuzz.h"
#include "precc/precc_rt.h"

static const char *const names[] = {"model.layers.0.q_proj:x.amax_history",
                                    "model.layers.0.q_proj:x.scale", "w:s"};
static const uint32_t lens[] = {1024, 1, 16};
static precc_state *st;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seed = getenv("PRECC_FUZZ_SEED");

	(void)argc, (void)argv;
	if (!(st = precc_state_new(0x1234, 0x5678, 3, names, lens)))
		abort();
	if (seed) {
		int rc = precc_state_save(st, seed);
		if (rc)
			fprintf(stderr, "%s\n", precc_rt_last_error());
		exit(rc != 0);
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	precc_state_load(st, fz_write("state.pst", data, size));
	return 0;
}
