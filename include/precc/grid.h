/*
 * precc/grid.h — how a precc kernel is launched: its grid from the
 * manifest's geometry (docs/artifacts.md) at a run's M, and the alignment
 * every buffer must have. One definition for the runtime (runtime/plan.c),
 * the generated launchers (precc build copies PRECC_GRID_FN's text into
 * precc_kernels.c, which must compile without precc's headers) and the
 * emulator (tests/codegen/emu.c), so that the three cannot disagree.
 *
 * One phase: tiled: gx = ceil(cols / tile_cols), gy = ceil(rows /
 * tile_rows); flat: gx = ceil(rows * cols / elems_per_cta), gy = 1; grid =
 * (gx, gy, 1). Several phases (a fused kernel): grid = (sum of gx_p * gy_p,
 * 1, 1). rows and cols are those of the phase's data value at M.
 *
 * A kernel that loops over its tiles (a persistent one, tile += nctaid.x,
 * or a cooperative one) is launched on a 1-D grid of min(tiles, resident)
 * CTAs, resident = CTAs per SM x SMs of the device (cuOccupancyMax-
 * ActiveBlocksPerMultiprocessor x CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
 * by PRECC_GRID_LOOP_FN; resident < 1 (unknown): one CTA per tile. One
 * in clusters by PRECC_GRID_CLUSTER_FN (below): a multiple of the cluster.
 */
#ifndef PRECC_GRID_H
#define PRECC_GRID_H

#include <stdint.h>

/* kernels load and store 16-byte vectors */
#define PRECC_BUFFER_ALIGN 16

#define PRECC_GRID_PHASE_TYPE \
typedef struct precc_grid_phase { \
	int tiled; \
	int64_t rows, cols, elems_per_cta, tile_rows, tile_cols; \
} precc_grid_phase;

/* int NAME(phases, nphase, grid): 0, or -1 when the geometry is empty or
 * the grid is beyond CUDA's limits (x < 2^31, y < 2^16). */
#define PRECC_GRID_FN(NAME) \
static inline int NAME(const precc_grid_phase *ph, int nphase, unsigned grid[3]) \
{ \
	int64_t total = 0, gx = 0, gy = 1; \
	grid[0] = grid[1] = grid[2] = 1; \
	if (nphase < 1) \
		return -1; \
	for (int p = 0; p < nphase; p++) { \
		const precc_grid_phase *g = &ph[p]; \
		if (g->rows < 0 || g->cols < 0 || (g->tiled ? g->tile_rows < 1 || g->tile_cols < 1 : g->elems_per_cta < 1)) \
			return -1; \
		if (g->tiled) { \
			gx = (g->cols + g->tile_cols - 1) / g->tile_cols; \
			gy = (g->rows + g->tile_rows - 1) / g->tile_rows; \
		} else { \
			gx = (g->rows * g->cols + g->elems_per_cta - 1) / g->elems_per_cta; \
			gy = 1; \
		} \
		total += gx * gy; \
	} \
	if (nphase > 1) \
		gx = total, gy = 1; \
	if (gx < 1 || gx > 0x7fffffff || gy < 1 || gy > 65535) \
		return -1; \
	grid[0] = (unsigned)gx; \
	grid[1] = (unsigned)gy; \
	return 0; \
}

/* void NAME(grid, resident): grid (from PRECC_GRID_FN) becomes the 1-D
 * grid of a kernel that loops over its tiles */
#define PRECC_GRID_LOOP_FN(NAME) \
static inline void NAME(unsigned grid[3], int64_t resident) \
{ \
	int64_t n = (int64_t)grid[0] * grid[1] * grid[2]; \
	grid[0] = (unsigned)(resident >= 1 && resident < n ? resident : n); \
	grid[1] = grid[2] = 1; \
}

/* void NAME(grid, clusters, cluster): the same for a persistent kernel in
 * clusters of `cluster` CTAs along x that take consecutive row tiles (the
 * sm_90a GEMM's tile=BMxBN:2x1): grid (a one-phase tiled grid from
 * PRECC_GRID_FN: x column tiles, y row tiles) has x * ceil(y / cluster)
 * cluster tiles; the 1-D grid is cluster x min(those, clusters), clusters
 * the ones resident at once (cuOccupancyMaxActiveClusters; < 1: one per
 * cluster tile), so always a multiple of the cluster */
#define PRECC_GRID_CLUSTER_FN(NAME) \
static inline void NAME(unsigned grid[3], int64_t clusters, unsigned cluster) \
{ \
	int64_t c = cluster > 1 ? cluster : 1; \
	int64_t n = (int64_t)grid[0] * ((grid[1] + c - 1) / c) * grid[2]; \
	grid[0] = (unsigned)(c * (clusters >= 1 && clusters < n ? clusters : n)); \
	grid[1] = grid[2] = 1; \
}
PRECC_GRID_PHASE_TYPE
PRECC_GRID_FN(precc_grid)
PRECC_GRID_LOOP_FN(precc_grid_loop)
PRECC_GRID_CLUSTER_FN(precc_grid_cluster)

#define PRECC_GRID_STR_(...) #__VA_ARGS__
#define PRECC_GRID_STR(...) PRECC_GRID_STR_(__VA_ARGS__)

#endif
