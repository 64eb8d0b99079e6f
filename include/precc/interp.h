/*
 * precc/interp.h — the interpreter's compute core: buffer-level kernels.
 *
 * These are the reference semantics of every precc kernel (amax, scale,
 * quantize, transpose, GEMM + epilogue) on host buffers. GPU kernels are
 * checked against them; the runtime's CPU backend calls them directly.
 * docs/interpreter.md gives the exact arithmetic of each.
 *
 * Part of precc_ir: libc, libm and pthreads only.
 *
 * Conventions
 *   - Tensors are row-major [rows, cols]; element (r, c) is at r*cols + c.
 *   - Storage of a format (precc_interp_tensor_bytes): fp32/tf32 in 4 bytes
 *     (float), fp16/bf16 in 2 bytes (uint16_t code), e4m3/e5m2/e8m0 and the
 *     fp6 formats one code per byte (uint8_t, low bits), and e2m1 two codes
 *     per byte: element 2i in the low nibble of byte i, 2i+1 in the high
 *     one, row-major along the last dim, which must be even (the layout of
 *     torch.float4_e2m1fn_x2, Transformer Engine and cuBLASLt).
 *   - A granularity is a block (br, bc) of data elements sharing one scale
 *     or amax; 0 means the whole extent. Tensorwise {0,0}, rowwise {1,0},
 *     columnwise {0,1}, 1x128 tiles {1,128}, 128x128 blocks {128,128},
 *     MX {1,32}, NVFP4 {1,16}. Blocks at the right/bottom edge may be
 *     partial. The scale/amax array is row-major over blocks:
 *     [ceil(rows/br), ceil(cols/bc)].
 *   - Every function returns PRECC_IOK (0) or a negative precc_istatus;
 *     on error precc_interp_error() describes it. Inputs are checked
 *     (zero or negative sizes, shape mismatch, size overflow, sizes beyond
 *     physical memory) before anything is allocated or written.
 */
#ifndef PRECC_INTERP_H
#define PRECC_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "precc/numerics.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum precc_istatus {
	PRECC_IOK = 0,
	PRECC_IEINVAL = -1,   /* bad argument: NULL buffer, unsupported format */
	PRECC_IESHAPE = -2,   /* shapes disagree, or a block does not fit */
	PRECC_IEEMPTY = -3,   /* a zero-size tensor */
	PRECC_IETOOBIG = -4,  /* size overflows, or exceeds physical memory */
	PRECC_IENOMEM = -5,   /* allocation failed */
	PRECC_IENONFINITE = -6, /* inf/NaN amax under PRECC_NF_ERROR */
} precc_istatus;

/* The message of the last failing call on this thread ("" if none). */
const char *precc_interp_error(void);

/* Bytes per element in interpreter buffers (see Conventions); 0 if bad,
 * and 0 for e2m1, whose elements share bytes: size tensors with
 * precc_interp_tensor_bytes. */
size_t precc_interp_elem_bytes(precc_format f);

/* Codes per byte: 2 for e2m1 (packed), 1 for every other format. */
int precc_interp_codes_per_byte(precc_format f);

/* Bytes of a row-major [rows, cols] tensor of format f; 0 if f has no
 * layout, a size is negative, e2m1's cols is odd, or the count overflows. */
size_t precc_interp_tensor_bytes(precc_format f, long rows, long cols);

/* e2m1 codes (low 4 bits of each byte) <-> packed bytes: code i is nibble
 * i & 1 of packed[i / 2], the low nibble first. An odd n leaves the last
 * byte's high nibble 0 (pack) or unread (unpack). */
void precc_e2m1_pack(const uint8_t *codes, size_t n, uint8_t *packed);
void precc_e2m1_unpack(const uint8_t *packed, size_t n, uint8_t *codes);

/* The code of element i (row-major) of a buffer of format f (fp32/tf32:
 * its bits), and its store; the other elements are left as they are. */
uint32_t precc_interp_code(const void *buf, precc_format f, size_t i);
void precc_interp_set_code(void *buf, precc_format f, size_t i, uint32_t code);

/* Number of worker threads `threads` means: itself if > 0; for 0 the
 * process default, which is precc_interp_set_threads's count where one was
 * set, else $PRECC_NUM_THREADS, else all online cores. Every kernel's
 * result is the same for any count (threads own output rows or tiles). */
int precc_interp_threads(int threads);

/* Set the process default thread count of the interpreter, and so of
 * precc_rt's cpu backend (n <= 0: back to $PRECC_NUM_THREADS or all
 * cores). precc.torch passes torch.get_num_threads() through it. */
void precc_interp_set_threads(int n);

/* A granularity: br x bc data elements per scale; 0 = whole extent. */
typedef struct precc_block {
	long br, bc;
} precc_block;

/* Number of blocks along each dim of a [rows, cols] tensor; returns the
 * total ceil(rows/br)*ceil(cols/bc), or a negative status. */
long precc_block_count(long rows, long cols, precc_block blk,
                       long *nbr, long *nbc);

/* ---- amax -------------------------------------------------------------
 * out[b] = max |x| over block b. NaN anywhere in a block makes that block's
 * amax NaN; inf gives inf. x: fp32, tf32, bf16, fp16, or any 8-bit format
 * (decoded exactly). global (may be NULL) receives the max over the whole
 * tensor (same NaN rule). Large tensors are split across all online cores;
 * the result does not depend on the split. */
int precc_amax(const void *x, precc_format xf, long rows, long cols,
               precc_block blk, float *out, float *global);

/* The amax NaN policy. PROPAGATE is precc_amax's rule (torch.amax);
 * IGNORE skips NaN as fmaxf does (TE's amax kernels, utils.cuh), so a
 * block of NaN only has amax 0. */
typedef enum precc_amax_nan {
	PRECC_AMAX_NAN_PROPAGATE,
	PRECC_AMAX_NAN_IGNORE,
} precc_amax_nan;

int precc_amax_policy(const void *x, precc_format xf, long rows, long cols,
                      precc_block blk, precc_amax_nan nan, float *out,
                      float *global);

/* ---- scales -----------------------------------------------------------
 * What to do when an amax is inf or NaN. */
typedef enum precc_nonfinite {
	PRECC_NF_PROPAGATE, /* scale = scale_inv = NaN for that block */
	PRECC_NF_KEEP_PREV, /* keep prev[b] (1.0 if prev is NULL), as TE does */
	PRECC_NF_ERROR,     /* fill as KEEP_PREV, then return PRECC_IENONFINITE */
	PRECC_NF_ONE,       /* scale = scale_inv = 1 (TE current scaling,
	                       recipe_common.cuh compute_scale_from_amax) */
	PRECC_NF_IEEE,      /* the formula in IEEE arithmetic, no special
	                       case (torchao, DeepGEMM): fmax/inf = 0,
	                       NaN stays NaN, scale_inv = 1/0 = inf */
} precc_nonfinite;

/* Per-block scale and scale_inv from n amax values:
 *   scale[b] = precc_compute_scale(amax[b], p)   (fmax / amax / 2^margin,
 *              eps clamp, optional pow2 round-down, amax 0 -> 1.0)
 *   scale_inv[b] = 1.0f / scale[b]   (fp32 division)
 * With p->amax_over_fmax, scale_inv[b] = max(amax, eps) / fmax (the
 * DeepSeek sf) and scale[b] = 1 / scale_inv[b]. With p->zero_keep an amax
 * of 0 (after eps) keeps prev[b] (1.0 if prev is NULL), as TE's delayed
 * update does. Quantize multiplies by scale, dequantize/GEMM by scale_inv. prev is the
 * previous scale array (for KEEP_PREV; may be NULL). scale_inv may be
 * NULL. *n_nonfinite (may be NULL) counts inf/NaN amax values. */
int precc_scales(const float *amax, long n, const precc_scale_params *p,
                 precc_nonfinite nf, const float *prev, float *scale,
                 float *scale_inv, long *n_nonfinite);

/* MX shared exponent rounding. */
typedef enum precc_mx_mode {
	PRECC_MX_FLOOR, /* OCP MX v1.0: e = floor(log2 amax) - emax_elem */
	PRECC_MX_RCEIL, /* NVIDIA/cuBLAS: e = ceil(log2(amax / fmax_elem)),
	                   amax/fmax in fp32 */
	PRECC_MX_RCEIL_TE, /* TE's float_to_e8m0(amax * (1/fmax)), ptx_arch_
	                      spec.cuh:72: the product with the fp32
	                      reciprocal, round the exponent up, inf -> 0xFE
	                      (satfinite), NaN -> 0xFF, 0 -> 0x00; scale =
	                      exp2f_rcp (ptx.cuh:309): 2^(127-e8m0) */
} precc_mx_mode;

/* MX (OCP microscaling) scales for element format elem (e4m3, e5m2, e2m1,
 * e3m2, e2m3) from n block amaxes. emax_elem = floor(log2(fmax)): e4m3 8,
 * e5m2 15, e2m1 2, e3m2 4, e2m3 2. e is clamped to [-127, 127]; amax 0 (or
 * subnormal below the range) gives -127. inf/NaN amax gives the NaN code
 * 0xff (scale and scale_inv NaN) and counts in *n_nonfinite.
 *   e8m0[b] = e + 127, scale[b] = 2^-e, scale_inv[b] = 2^e (exact fp32).
 * scale and scale_inv may be NULL. */
/* emax_elem = floor(log2(fmax)) of an MX element format (e4m3 8, e5m2 15,
 * e2m1 2, e3m2 4, e2m3 2); -1 for any other format. */
int precc_mx_emax(precc_format elem);

int precc_mx_scales(const float *amax, long n, precc_format elem,
                    precc_mx_mode mode, uint8_t *e8m0, float *scale,
                    float *scale_inv, long *n_nonfinite);

/* NVFP4 two-level scales (16-element blocks, e2m1 elements), fp32:
 *   genc = 448*6 / global_amax  (1.0 if global_amax is 0 or not finite,
 *                                FLT_MAX if the quotient overflows)
 *   *global_scale_inv = 1 / genc    (global_amax / 2688 within an ulp)
 *   e4m3[b]   = e4m3_rne_sat(amax[b] / 6 * genc)
 *   scale[b]  = genc / decode(e4m3[b])     (0 if decode(e4m3[b]) == 0)
 *   scale_inv[b] = decode(e4m3[b]) * *global_scale_inv
 * Quantize with scale, dequantize with scale_inv (one fp32 multiply).
 * Any output pointer except e4m3 may be NULL. */
int precc_nvfp4_scales(const float *amax, long n, float global_amax,
                       uint8_t *e4m3, float *global_scale_inv, float *scale,
                       float *scale_inv);

/* The NVFP4 scales of a reference kernel, each named after the file and
 * version it reproduces (docs/numerics.md "NVFP4"):
 *   TE214_TRANSPOSE  Transformer Engine >= 2.14, quantize_transpose_nvfp4.cuh
 *                    (the kernel TE's training runs):
 *                    e4m3[b] = e4m3_rne_sat(amax[b] * (genc * (1/6)))
 *                    (core_nvfp4.cuh:49-52 at v2.14)
 *   TE28_TRANSPOSE   TE 2.8-2.13, the same kernel before 2.14:
 *                    e4m3[b] = e4m3_rne_sat(amax[b] / 6 * genc)
 *                    (core_nvfp4.cuh:49-51 at v2.13; util/nvfp4_transpose.cuh
 *                    :123-125 at v2.8)
 *     with genc = fminf(448*6 / global_amax, FLT_MAX), 1.0 if global_amax
 *          == 0 or genc == 0 (core_nvfp4.cuh:79-91 at v2.14), gdec = 1 / genc
 *          (quantize_transpose_nvfp4.cuh:230), *global_scale_inv = gdec,
 *          scale[b] = fminf(1 / (decode(e4m3[b]) * gdec), FLT_MAX) (:530-531;
 *          a block whose e4m3 is 0 gets FLT_MAX: its codes saturate);
 *          global_amax should be NaN-ignoring (TE's is).
 *   TORCHAO          torchao 0.18 nvfp4_tensor.py nvfp4_quantize, two-level:
 *                    gdec = global_amax / 2688 (per_tensor_amax_to_scale,
 *                    :769), e4m3[b] = e4m3_rne(clamp(amax[b] / 6 / gdec,
 *                    2^-6, 448)) (:811, :837-840), scale[b] = (1 / gdec) /
 *                    decode(e4m3[b]) (:844), *global_scale_inv = gdec.
 *   scale_inv[b] = decode(e4m3[b]) * gdec for all. */
typedef enum precc_nvfp4_formula {
	PRECC_NVFP4_TE214_TRANSPOSE,
	PRECC_NVFP4_TE28_TRANSPOSE,
	PRECC_NVFP4_TORCHAO,
} precc_nvfp4_formula;

int precc_nvfp4_scales_ref(const float *amax, long n, float global_amax,
                           precc_nvfp4_formula f, uint8_t *e4m3,
                           float *global_scale_inv, float *scale,
                           float *scale_inv);

/* One block's e4m3 scale code by formula f from its amax and the global
 * scale gs: genc for TE's, gdec for torchao's. */
uint8_t precc_nvfp4_block_scale(precc_nvfp4_formula f, float amax, float gs);

/* ---- delayed scaling history -----------------------------------------
 * A ring of len slots, each holding n amax values (n = number of scale
 * blocks; 1 for tensorwise), caller-owned: buf has len*n floats, slot s at
 * buf + s*n. pos is the slot the next push writes. Init zeroes buf (TE
 * starts from a zero history). */
typedef struct precc_amax_history {
	float *buf;
	int len;
	long n;
	int pos;
} precc_amax_history;

typedef enum precc_history_algo {
	PRECC_HIST_MAX,         /* max over all len slots (NaN propagates) */
	PRECC_HIST_MOST_RECENT, /* the slot written by the last push */
} precc_history_algo;

int precc_history_init(precc_amax_history *h, float *buf, int len, long n);
int precc_history_push(precc_amax_history *h, const float *amax);
int precc_history_reduce(const precc_amax_history *h, precc_history_algo a,
                         float *out);

/* One step of TE's default fused update (recipe/delayed_scaling.cu
 * kernel_bulk, :163-253) on a precc history, for n scales:
 *   last = amax[j]; if last != 0 (NaN counts as nonzero): push it;
 *   else the history does not roll (and MAX's amax is 0).
 *   MAX: fmaxf over the len slots (NaN ignored); MOST_RECENT: last.
 *   scale[j] = fmax*2^-margin / amax if amax finite and > 0, else
 *   scale[j] unchanged; an inf quotient gives FLT_MAX.
 * n must be 1 (TE's tensorwise use: one history per scale).
 * scale is read (previous) and written. */
int precc_history_update_te(precc_amax_history *h, const float *amax,
                            precc_history_algo a, float fmax, int margin,
                            float *scale);

/* ---- quantize / dequantize --------------------------------------------
 * q[i] = precc_encode(qf, x[i] * scale[b(i)], round, saturate, rbits(i))
 * with x decoded to fp32 first and the product in fp32. scale NULL = 1.
 * q (and x, for dequantize) is stored per the Conventions: e2m1 packed,
 * cols even.
 *
 * SR random bits: rbits(i) for linear element index i = r*cols + c is
 * word (i & 3) of philox4x32_10(counter, key) with
 *   counter = { (uint32)(i >> 2), (uint32)(i >> 34), stream, 0 }
 *   key     = { (uint32)seed, (uint32)(seed >> 32) }
 * so one Philox call serves 4 consecutive elements. e2m1 takes 16 bits an
 * element, half (i & 1) (the low half first) of word ((i >> 1) & 3) with
 *   counter = { (uint32)(i >> 3), (uint32)(i >> 35), stream, 0 },
 * one Philox call for 8 elements (4 packed bytes), and rounds with
 * precc_encode_sr(e2m1, y, saturate, bits, 16). */
typedef struct precc_quant_opts {
	precc_format qf;
	precc_round round;     /* any precc_round: RNE, RZ, RU, RNA, SR */
	bool saturate;
	precc_block blk;       /* granularity of scale */
	const float *scale;    /* per block, or NULL */
	uint64_t seed;         /* SR only */
	uint32_t stream;       /* SR only: tensor/stream id */
	int threads;           /* 0 = all online cores; same result for any */
	const float *divisor;  /* per block, or NULL: when set, x / divisor[b]
	                          in fp32 instead of x * scale[b] (DeepSeek-V3
	                          inference/kernel.py:31 divides by s) */
} precc_quant_opts;

int precc_quantize(const void *x, precc_format xf, long rows, long cols,
                   const precc_quant_opts *o, void *q);

/* y[i] = decode(qf, q[i]) * scale_inv[b(i)] (fp32; scale_inv NULL = 1). */
int precc_dequantize(const void *q, precc_format qf, long rows, long cols,
                     precc_block blk, const float *scale_inv, float *y);

/* ---- random Hadamard transform (NVFP4 wgrad, TE's RHT) ----------------
 * Along each row, in blocks of 16 columns (cols % 16 == 0):
 *   y[r, 16b + j] = enc_yf( sum_{i=0..15} fl(x[r, 16b + i] * h(i, j)) )
 *   h(i, j) = (bit i of signs ? -1 : 1) * (-1)^popcount(i & j) / 4
 * i.e. the block times diag(s) * H16 / 4 (TE: x @ rht_matrix, pytorch/
 * tensor/nvfp4_tensor.py:94-103; signs 0xd7e8 is TE's wgrad sign vector,
 * :49-60). The products are exact; the sum is fp32 in ascending i (RNE,
 * no FMA), then rounded once to yf (f32, bf16 or f16; RNE, overflow to
 * inf). x: f32, bf16 or f16. The transform is orthogonal: applied to both
 * operands along a GEMM's K it cancels. */
int precc_hadamard16(const void *x, precc_format xf, long rows, long cols, unsigned signs,
                     void *y, precc_format yf, int threads);

/* ---- Philox-4x32-10 (Salmon et al., SC'11; Random123 constants) ------- */
void precc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                         uint32_t out[4]);
/* The SR bits of element i under (seed, stream), as documented above. */
uint32_t precc_sr_bits(uint64_t seed, uint32_t stream, uint64_t i);
/* The 16 SR bits of element i of an e2m1 tensor (see quantize). */
uint32_t precc_sr_bits16(uint64_t seed, uint32_t stream, uint64_t i);

/* ---- transpose ---------------------------------------------------------
 * y[c*rows + r] = x[r*cols + c] for elements of elem_bytes (1, 2, 4 or 8)
 * bytes; cache-blocked. x and y must not overlap. */
int precc_transpose(const void *x, size_t elem_bytes, long rows, long cols,
                    void *y);

/* ---- GEMM --------------------------------------------------------------
 * C[M,N] = epilogue(A[M,K] . B[N,K]^T)   (TN: both operands K-contiguous)
 *
 * Operands: fp32, tf32 (as fp32), bf16, fp16, e4m3, e5m2, e2m1, e3m2,
 * e2m3; decoded exactly to fp32 (8-bit codes through 256-entry tables;
 * e2m1 packed, K even, unpacked to codes first).
 * scale_inv: per-block dequant factors over the operand's own [rows, K]
 * shape with granularity blk (NULL = 1.0). Two-level NVFP4 folds the
 * global scale in: pass precc_nvfp4_scales' scale_inv.
 *
 * Accumulation (exact arithmetic in docs/interpreter.md):
 *   K is cut into chunks of P elements, P = promote_every, or, when 0,
 *   the operands' scale block along K (K when the scales do not vary
 *   along K). Each scale block along K must be a multiple of P.
 *   For each chunk, in ascending k:
 *     inner = 0; for k: inner = acc_round(fl(inner + fl(a*b)))
 *   where every fl is one fp32 RNE operation (no FMA in the sums), and
 *   acc_round keeps acc_mbits explicit mantissa bits by truncation toward
 *   zero (acc_mbits 0 or >= 23: identity, i.e. exact fp32).
 *   Then  outer = fma(inner, fl(sa * sb), outer),  outer starting +0:
 *   one rounding, DeepGEMM's FFMA (docs/interpreter.md); tensorwise
 *   scales (one per operand) fl(outer + fl(fl(fl(inner * s) * p) * p)),
 *   s * p * p = sa * sb.
 * Epilogue: y = fl(fl(outer * alpha) + bias[j]) (bias NULL = none);
 *   *out_amax = max |y| (NaN propagates); then
 *   C[i,j] = precc_encode(out_fmt, fl(y * out_scale), RNE, out_saturate).
 * Results are bit-identical for any thread count and any run: threads
 * own output tiles and K is never split across threads. */
typedef struct precc_gemm_operand {
	const void *data;
	precc_format fmt;
	const float *scale_inv;
	precc_block blk;
} precc_gemm_operand;

typedef struct precc_gemm_desc {
	long m, n, k;
	precc_gemm_operand a;  /* [m, k] */
	precc_gemm_operand b;  /* [n, k] */
	int promote_every;     /* P, 0 = see above */
	int acc_mbits;         /* inner accumulator mantissa bits; 0 = fp32 */
	float alpha;           /* de-scale; the caller sets 1.0 for none */
	const float *bias;     /* [n] or NULL */
	float out_scale;       /* output quantization scale; 1.0 for none */
	precc_format out_fmt;  /* storage per precc_interp_elem_bytes */
	bool out_saturate;
	void *c;               /* [m, n] */
	float *out_amax;       /* or NULL */
	int threads;           /* 0 = all online cores */
} precc_gemm_desc;

/* Fill d with defaults: alpha 1, out_scale 1, out_fmt fp32, threads 0. */
void precc_gemm_desc_init(precc_gemm_desc *d);
int precc_gemm(const precc_gemm_desc *d);

#ifdef __cplusplus
}
#endif
#endif
