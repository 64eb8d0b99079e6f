/*
 * interp/quant.c — quantize (fp32 -> any format, RNE/RZ/RU/SR, per-block
 * scale) and dequantize (any format -> fp32, per-block scale_inv).
 * SR bits come from Philox-4x32-10 keyed by (seed, stream, element index).
 */
#include <string.h>

#include "util.h"

enum { CHUNK = 512 };

/* codes of elements off .. off+n-1; esize 0: e2m1, two a byte (a row
 * starts a byte: cols is even, and CHUNK too) */
static void
store(void *q, size_t esize, size_t off, long n, const uint32_t *codes)
{
	long i;

	if (esize == 0) {
		uint8_t *d = q;
		for (i = 0; i < n; i++) {
			size_t j = off + (size_t)i;
			unsigned sh = 4 * (j & 1);
			d[j / 2] = (uint8_t)((d[j / 2] & ~(0xfu << sh)) | (codes[i] & 0xf) << sh);
		}
	} else if (esize == 1) {
		uint8_t *d = (uint8_t *)q + off;
		for (i = 0; i < n; i++)
			d[i] = (uint8_t)codes[i];
	} else if (esize == 2) {
		uint16_t *d = (uint16_t *)q + off;
		for (i = 0; i < n; i++)
			d[i] = (uint16_t)codes[i];
	} else {
		memcpy((uint32_t *)q + off, codes, (size_t)n * 4);
	}
}

/* Random bits for elements [i0, i0+n): 32 a element, four per Philox call
 * (precc_sr_bits), or with half 16, the e2m1 encode's, eight per call
 * (precc_sr_bits16). */
static void
sr_bits_n(uint64_t seed, uint32_t stream, uint64_t i0, long n, uint32_t *rb, int half)
{
	uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
	uint32_t out[4];
	uint64_t g = UINT64_MAX;
	int sh = half ? 3 : 2;   /* log2 elements a call */
	long j;

	for (j = 0; j < n; j++) {
		uint64_t i = i0 + (uint64_t)j;
		if (i >> sh != g) {
			uint32_t ctr[4] = { (uint32_t)(i >> sh), (uint32_t)(i >> (32 + sh)),
			                    stream, 0 };
			g = i >> sh;
			precc_philox4x32_10(ctr, key, out);
		}
		rb[j] = half ? out[(i >> 1) & 3] >> (16 * (i & 1)) & 0xffff : out[i & 3];
	}
}

static void
sr_bits(uint64_t seed, uint32_t stream, uint64_t i0, long n, uint32_t *rb)
{
	sr_bits_n(seed, stream, i0, n, rb, 0);
}

static void
sr_bits16(uint64_t seed, uint32_t stream, uint64_t i0, long n, uint32_t *rb)
{
	sr_bits_n(seed, stream, i0, n, rb, 1);
}

typedef struct Quant {
	const void *x;
	precc_format xf;
	long rows, cols, br, bc, nbc;
	const precc_quant_opts *o;
	void *q;
	size_t qes;
	int fast;
} Quant;

/* Where element i of the output starts (e2m1: i even). */
static void *
out_at(const Quant *k, size_t i)
{
	return (uint8_t *)k->q + (k->qes ? i * k->qes : i / 2);
}

/* buf[j] *= sc[j] (or /=); fixed trip counts vectorize. */
static void
scale_by(float *restrict buf, const float *restrict sc, long n, bool divide)
{
	long i = 0;

	if (divide) {
		for (; i + 32 <= n; i += 32)
			for (int j = 0; j < 32; j++)
				buf[i + j] /= sc[i + j];
		for (; i < n; i++)
			buf[i] /= sc[i];
		return;
	}
	for (; i + 32 <= n; i += 32)
		for (int j = 0; j < 32; j++)
			buf[i + j] *= sc[i + j];
	for (; i < n; i++)
		buf[i] *= sc[i];
}

/* RNE into a format precc_encode_rne_n serves, straight from an fp32
 * input. Blocks of 64 columns or more: the scale multiply fused, one call
 * a block. Narrower blocks (MX, NVFP4), divisors, and e2m1 blocks that
 * split a byte: each element's factor spread into a row first, the
 * product (or quotient) rounded to fp32 as the fused form does, then one
 * call for the chunk. */
static void
quant_fast(const Quant *k, long r, long c0, long n, float *buf)
{
	const precc_quant_opts *o = k->o;
	const float *srow = o->scale ? o->scale + (r / k->br) * k->nbc : NULL;
	const float *drow = o->divisor ? o->divisor + (r / k->br) * k->nbc : NULL;
	size_t off = (size_t)r * (size_t)k->cols + (size_t)c0;
	const float *src = buf;
	long j, bc = k->bc;

	if (k->xf == PRECC_FP32)
		src = (const float *)k->x + off;
	else
		interp_load(k->x, k->xf, off, n, buf);
	if (drow || (srow && (bc < 64 || (o->qf == PRECC_E2M1 && bc % 2)))) {
		const float *f = drow ? drow : srow;
		float sc[CHUNK];
		for (j = 0; j < n;) {
			long c = c0 + j, end = (c / bc + 1) * bc - c0;
			float d = f[c / bc];
			if (end > n)
				end = n;
			for (; j < end; j++)
				sc[j] = d;
		}
		if (src != buf)
			memcpy(buf, src, (size_t)n * sizeof *buf);
		scale_by(buf, sc, n, drow != NULL);
		src = buf;
		srow = NULL;
	}
	if (!srow) {
		precc_encode_rne_n(o->qf, o->saturate, src, 1.0f, out_at(k, off), n);
		return;
	}
	for (j = 0; j < n;) {
		long c = c0 + j, end = (c / bc + 1) * bc - c0;
		if (end > n)
			end = n;
		precc_encode_rne_n(o->qf, o->saturate, src + j, srow[c / bc],
		                   out_at(k, off + (size_t)j), end - j);
		j = end;
	}
}

static void
quant_rows(void *ctx, int part, long r0, long r1)
{
	const Quant *k = ctx;
	const precc_quant_opts *o = k->o;
	float buf[CHUNK];
	uint32_t codes[CHUNK], rb[CHUNK];
	long r, c0, cols = k->cols, bc = k->bc;

	for (r = r0; r < r1; r++) {
		const float *srow = o->scale ? o->scale + (r / k->br) * k->nbc : NULL;
		const float *drow = o->divisor ? o->divisor + (r / k->br) * k->nbc
		                    : NULL;
		for (c0 = 0; c0 < cols; c0 += CHUNK) {
			long n = cols - c0 < CHUNK ? cols - c0 : CHUNK, j;
			size_t off = (size_t)r * (size_t)cols + (size_t)c0;
			if (k->fast) {
				quant_fast(k, r, c0, n, buf);
				continue;
			}
			interp_load(k->x, k->xf, off, n, buf);
			if (drow) {
				for (j = 0; j < n;) {
					long c = c0 + j, end = (c / bc + 1) * bc - c0;
					float d = drow[c / bc];
					if (end > n)
						end = n;
					for (; j < end; j++)
						buf[j] /= d;
				}
			} else if (srow) {
				for (j = 0; j < n;) {
					long c = c0 + j, end = (c / bc + 1) * bc - c0;
					float s = srow[c / bc];
					if (end > n)
						end = n;
					for (; j < end; j++)
						buf[j] *= s;
				}
			}
			if (o->round == PRECC_SR && o->qf == PRECC_E2M1) {
				/* 16 bits an element, 8 elements a Philox call */
				sr_bits16(o->seed, o->stream, off, n, rb);
				for (j = 0; j < n; j++)
					codes[j] = precc_encode_sr(o->qf, buf[j], o->saturate,
					                           rb[j], 16);
				store(k->q, k->qes, off, n, codes);
				continue;
			}
			if (o->round == PRECC_SR)
				sr_bits(o->seed, o->stream, off, n, rb);
			else
				memset(rb, 0, (size_t)n * sizeof *rb);
			for (j = 0; j < n; j++)
				codes[j] = precc_encode(o->qf, buf[j], o->round,
				                        o->saturate, rb[j]);
			store(k->q, k->qes, off, n, codes);
		}
	}
}

int
precc_quantize(const void *x, precc_format xf, long rows, long cols,
               const precc_quant_opts *o, void *q)
{
	Quant k;
	int e;

	if (!x || !o || !q)
		return interp_fail(PRECC_IEINVAL, "quantize: NULL argument");
	if (!interp_input_format(xf))
		return interp_fail(PRECC_IEINVAL, "quantize: unsupported input "
		                   "format");
	if ((k.qes = precc_interp_elem_bytes(o->qf)) == 0 && o->qf != PRECC_E2M1)
		return interp_fail(PRECC_IEINVAL, "quantize: unsupported output "
		                   "format");
	if ((unsigned)o->round >= PRECC_NROUND)
		return interp_fail(PRECC_IEINVAL, "quantize: unknown rounding %d",
		                   (int)o->round);
	if (o->threads < 0)
		return interp_fail(PRECC_IEINVAL, "quantize: threads %d < 0",
		                   o->threads);
	if ((e = interp_check_fmt("quantize", xf, rows, cols)) != 0
	    || (e = interp_check_fmt("quantize", o->qf, rows, cols)) != 0)
		return e;
	if ((e = interp_block("quantize", rows, cols, o->blk, &k.br, &k.bc)) != 0)
		return e;
	precc_block_count(rows, cols, o->blk, NULL, &k.nbc);
	k.x = x;
	k.xf = xf;
	k.rows = rows;
	k.cols = cols;
	k.o = o;
	k.q = q;
	k.fast = o->round == PRECC_RNE && o->qf != PRECC_FP32 && o->qf != PRECC_TF32
	         && o->qf != PRECC_E8M0;
	interp_parallel_rows(rows, cols, o->threads, quant_rows, &k);
	return PRECC_IOK;
}

int
precc_dequantize(const void *q, precc_format qf, long rows, long cols,
                 precc_block blk, const float *scale_inv, float *y)
{
	long br, bc, nbc, r, c0;
	int e;

	if (!q || !y)
		return interp_fail(PRECC_IEINVAL, "dequantize: NULL argument");
	if (!interp_input_format(qf))
		return interp_fail(PRECC_IEINVAL, "dequantize: unsupported format");
	if ((e = interp_check_fmt("dequantize", qf, rows, cols)) != 0)
		return e;
	if ((e = interp_block("dequantize", rows, cols, blk, &br, &bc)) != 0)
		return e;
	precc_block_count(rows, cols, blk, NULL, &nbc);
	for (r = 0; r < rows; r++) {
		const float *srow = scale_inv ? scale_inv + (r / br) * nbc : NULL;
		for (c0 = 0; c0 < cols; c0 += CHUNK) {
			long n = cols - c0 < CHUNK ? cols - c0 : CHUNK, j;
			size_t off = (size_t)r * (size_t)cols + (size_t)c0;
			float *d = y + off;
			interp_load(q, qf, off, n, d);
			if (!srow)
				continue;
			for (j = 0; j < n;) {
				long c = c0 + j, end = (c / bc + 1) * bc - c0;
				float s = srow[c / bc];
				if (end > n)
					end = n;
				for (; j < end; j++)
					d[j] *= s;
			}
		}
	}
	return PRECC_IOK;
}
