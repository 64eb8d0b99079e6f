/*
 * base.h — floor 0 of the runtime (docs/runtime.md, "Floors"): the error
 * path and the one way a file is read. Every floor above includes this;
 * it includes nothing of the runtime but limits.h.
 *
 * Floors, bottom to top, each file calling only its own floor and those
 * below (tests/runtime/floors_test.sh checks the objects' symbols):
 *   0 base.h      base.c
 *   1 manifest.h  json.c artifact.c             what a manifest says
 *   2 plan.h      plan.c split.c share.c        steps, checks, grids, the cut
 *   3 backend.h   backend_cpu.c backend_cuda.c cuda.c
 *                                               rt_ops: one table per backend
 *   4 rt.h        rt.c run.c layer.c grouped.c commit_bulk.c reduce.c train.c
 *                 state.c gemm_check.c          the public API
 */
#ifndef PRECC_RT_BASE_H
#define PRECC_RT_BASE_H

#include <stddef.h>
#include "precc/precc_rt.h"
#include "limits.h"

#define RT_ERR_MAX 16384   /* room for a message plus a JIT log */

/* base.c */
/* Sets this thread's last error (precc_rt_last_error). fmt's arguments
 * may point into the last error itself. */
void rt_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The whole of path, NUL-terminated, if it is a regular file of at most
 * max bytes: opened with O_NOFOLLOW | O_NONBLOCK (a symlink is refused,
 * a FIFO cannot block), fstat before any read. NULL with why filled. */
char *rt_read_file(const char *path, long max, size_t *len, char *why, size_t whysz);

#endif
