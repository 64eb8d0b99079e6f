/*
 * group.h — layers that lower to the same IR, lowered and passed once
 * (group.c).
 */
#ifndef PRECC_GROUP_H
#define PRECC_GROUP_H

#include <stdbool.h>
#include "ir.h"
#include "recipe.h"

typedef struct LayerGroups {
	int n;                  /* plan layers */
	int *rep;               /* per layer: its class's first layer */
	bool on;                /* off under PRECC_NO_GROUP or --layer */
} LayerGroups;

/* Lowers every layer once to class them; returns the number of classes. */
int group_layers(const Plan *, const char *pattern, LayerGroups *);
/* The funcs of the representatives only (everything when off). */
Module *group_lower(const Plan *, const char *pattern, const LayerGroups *);
/* After the passes: every other layer's step func, copied from its
 * representative's, in model order; dedupe's call counts redone. When
 * origin is not NULL, *origin is malloc'ed: per func of the module, the
 * index of the func it is a copy of (an earlier one), else its own. */
void group_expand(Module *, const Plan *, const LayerGroups *, int **origin);
void group_free(LayerGroups *);

#endif
