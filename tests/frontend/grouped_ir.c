/*
 * grouped_ir.c — print lower_grouped's IR (frontend/lower.c) of a recipe
 * x model: each expert group's GEMMs as gemm_grouped funcs, which
 * `precc ir FILE.ir` then runs through the passes (the lit tests under
 * tests/lit/passes/grouped*). precc build lowers per expert; this is the
 * way into the passes for a grouped module until the driver lowers one.
 *
 *   grouped_ir RECIPE.lua MODEL [LAYER-PATTERN]
 */
#include <stdio.h>

#include "ir.h"
#include "recipe.h"

int
main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: grouped_ir RECIPE.lua MODEL [LAYER-PATTERN]\n");
		return 2;
	}
	Recipe *r = recipe_load(argv[1]);
	Model *m = model_load(argv[2]);
	Plan *p = plan_resolve(r, m);
	Module *gm = lower_grouped(p, argc > 3 ? argv[3] : NULL);
	char err[4096];

	if (ir_verify(gm, err, sizeof err)) {
		fprintf(stderr, "grouped_ir: the grouped IR does not verify: %s\n", err);
		return 1;
	}
	ir_print_module(stdout, gm);
	ir_module_free(gm);
	plan_free(p);
	model_free(m);
	recipe_free(r);
	return 0;
}
