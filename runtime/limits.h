/*
 * limits.h — every limit precc_rt's readers apply to what a file says, in
 * one place (docs/runtime.md, "Limits"). Files come from other people,
 * other jobs and shared directories: each size is checked before anything
 * is allocated from it, each count before it is used as an index.
 */
#ifndef PRECC_RT_LIMITS_H
#define PRECC_RT_LIMITS_H

/* Files (rt_read_file): regular files only, never through a symlink. */
#define RT_MAX_MANIFEST_BYTES (256L << 20)   /* manifest.json */
#define RT_MAX_KERNEL_BYTES   (256L << 20)   /* one .ptx or .cubin */

/* JSON (json.c): the manifest's syntax. */
#define JSON_MAX_DEPTH 64                    /* nesting of arrays and objects */
#define JSON_MAX_BYTES RT_MAX_MANIFEST_BYTES
#define JSON_MAX_VALUES (1L << 22)           /* values and keys, counted before
                                                parsing: each costs ~100 bytes parsed */

/* The manifest's numbers (artifact.c need_long ranges). */
#define RT_MAX_THREADS       1024            /* per CTA */
#define RT_MAX_SYNC_WORDS    (1L << 20)
#define RT_MAX_SMEM          (1L << 30)
#define RT_MAX_ELEMS_PER_CTA (1L << 40)
#define RT_MAX_TILE          (1L << 20)      /* tile_rows, tile_cols */
#define RT_MAX_M_MULTIPLE    (1L << 20)      /* one kernel's */
#define RT_MAX_LAYER_M_MULTIPLE (1L << 30)   /* the lcm over a layer's steps */
#define RT_MAX_DIM           (1L << 40)      /* one dimension of a type */
#define RT_MAXPHASE 8                        /* phases of a fused kernel */

/* State (state.c, run.c precc_rt_state_new). */
#define RT_MAX_STATE_ELEMS   (1L << 24)      /* f32 words of one state buffer */
#define RT_MAX_STATE_TOTAL   (1L << 26)      /* f32 words of all of them */
#define RT_MAX_STATE_SLACK   (1L << 20)      /* a state file may be this many bytes
                                                larger than the state it is loaded
                                                into (to say what is wrong with it) */

#endif
