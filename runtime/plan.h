/*
 * plan.h — floor 2 of the runtime (base.h lists the floors): a layer's
 * plan as data, for any backend: which kernel a step launches at M, its
 * grid, the M checks, and the cut of the steps into forward, backward and
 * commit with each buffer's place (split.c) and what a shared-input layer
 * skips (share.c). Nothing here runs a kernel or touches memory.
 */
#ifndef PRECC_RT_PLAN_H
#define PRECC_RT_PLAN_H

#include "manifest.h"

/* plan.c */
/* 0 when M is a positive multiple of the layer's m_multiple and buffers
 * is not NULL; -1 with the error ("plan: layer 'L': ..."). */
int rt_check_m(const rt_layer *l, long m, void *const *buffers);
/* The kernel launched for kernel k at M: its m_variant at M >= m_min (the
 * same GEMM on a larger tile), else k. */
int rt_step_kernel(const rt_artifact *a, int k, long m);
/* The grid of k (step st of l, or the kernel launched for it at M) at M:
 * one geometry, or the sum over a fused kernel's phases (precc/grid.h, as
 * the launchers and the emulator), over the extents of the step's buffers.
 * -1: larger than CUDA allows. */
int rt_kernel_grid(const rt_kdesc *k, const rt_layer *l, const rt_step *st, long m,
                   unsigned grid[3]);
/* Cuts every layer (split.c) and plans its shared input (share.c); -1
 * with the error only when out of memory. */
int rt_plan_artifact(rt_artifact *a);
/* Frees what rt_plan_artifact made, leaving the artifact's split and
 * share NULL (before rt_artifact_free). */
void rt_plan_free(rt_artifact *a);

/* split.c — a layer's plan cut into forward, backward and commit, once per
 * layer when the manifest loads (layer.c runs it, share.c reads it). */
enum { RT_PH_FWD, RT_PH_BWD, RT_PH_COMMIT };
#define RT_REGION_ALIGN 256   /* each buffer's offset in a region (state, saved, work) */
typedef struct rt_split {
	char *why;              /* not NULL: the layer cannot be cut, and why */
	unsigned char *phase;   /* per step */
	unsigned char *place;   /* per buffer: precc_place */
	unsigned char *minv;    /* per buffer: its size does not depend on M */
	size_t *state_off;      /* per buffer: offset in state (PLACE_STATE) */
	size_t state_bytes;
	int io[7];              /* buffer index of each caller tensor (x, w,
	                           bias, y, dy, dx, dw), or -1 */
	int main_grad;          /* the main_grad param the wgrad kernel
	                           accumulates dW into, or -1 (older plans: the
	                           runtime adds dW on the host, cpu only) */
	int offsets;            /* an expert group's offs buffer (role
	                           "offsets", PRECC_PLACE_OFFSETS), or -1 */
	int reads_x, reads_w;   /* backward reads the caller's x / w */
	int has_state;
	unsigned char *amax;    /* per buffer: a saved f32 the commit reads (an
	                           amax to reduce across data-parallel ranks) */
	unsigned char *out_amax; /* per buffer: a GEMM's output amax (y.amax,
	                           dx.amax), saved: it alone keeps no step */
	void **ptr;             /* nbuf pointers: the bound buffers of a call */
	/* the region layout at M = at_m (0: none yet), kept for the next call
	 * at the same M (forward, backward and commit run at one M): */
	long at_m;
	size_t *at_off;         /* per buffer: offset in saved or workspace */
	size_t at_saved, at_work, at_dw_slot;
} rt_split;
/* Cuts each layer (a layer that cannot be cut gets its why); -1 only when
 * out of memory. */
int rt_layers_split(rt_artifact *a);
void rt_split_free(rt_split *);

/* share.c — linears that read one tensor (docs/runtime.md, "Shared
 * inputs"): per layer with a root, the forward steps the root runs alike
 * on the same tensors (same kernel, same inputs up to the shared x and its
 * state), which a shared forward skips, reading their outputs in the
 * root's saved region (the root keeps them there: promoted to saved). */
typedef struct rt_share {
	unsigned char *skip;    /* per step */
	int *alias;             /* per buffer: the root's buffer read instead, -1 */
	unsigned char *copy;    /* per buffer: copied from the root's after the
	                           forward (its commit reads it) */
	int nskip;
} rt_share;
int rt_share_plan(rt_artifact *a);       /* after rt_layers_split; -1: no memory */
void rt_share_free(rt_share *);

#endif
