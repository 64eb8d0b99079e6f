/*
 * interp/util.h — helpers shared by the interpreter's kernel files
 * (the files of ir/interp/); private to precc_ir, not installed.
 */
#ifndef PRECC_INTERP_UTIL_H
#define PRECC_INTERP_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "precc/interp.h"

/* Record a message for precc_interp_error() and return code. */
int interp_fail(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Check a [rows, cols] tensor of esize-byte elements: sizes > 0, the byte
 * count fits size_t and physical memory. name is used in messages. */
int interp_check_tensor(const char *name, long rows, long cols, size_t esize);

/* The same for a tensor of format f: e2m1 (two codes a byte) needs an
 * even cols. */
int interp_check_fmt(const char *name, precc_format f, long rows, long cols);

/* a*b without overflow; returns 0 and sets *r, or -1. */
int interp_mul(size_t a, size_t b, size_t *r);

/* Physical memory in bytes (sysconf), or SIZE_MAX if unknown. */
size_t interp_phys_bytes(void);

/* True if f can be read as an input (fp32, tf32, fp16, bf16, 8-bit). */
int interp_input_format(precc_format f);

/* Decode n elements of format f starting at element off of x to fp32
 * (e2m1: element j is nibble j & 1, low first, of byte j / 2). */
void interp_load(const void *x, precc_format f, size_t off, long n, float *dst);

/* Resolve a block against a [rows, cols] extent (0 -> whole extent) and
 * check it; *br, *bc receive the effective sizes. */
int interp_block(const char *name, long rows, long cols, precc_block blk,
                 long *br, long *bc);

/* Run fn(ctx, part, r0, r1) over contiguous row ranges covering [0, rows)
 * on up to interp_parallel_parts(rows, cols, threads) threads (one when the
 * tensor is small); part numbers the ranges from 0. Ranges never overlap,
 * so results do not depend on the count. */
enum { INTERP_MAX_PARTS = 64 };
int interp_parallel_parts(long rows, long cols, int threads);
void interp_parallel_rows(long rows, long cols, int threads,
                          void (*fn)(void *ctx, int part, long r0, long r1),
                          void *ctx);

#endif
