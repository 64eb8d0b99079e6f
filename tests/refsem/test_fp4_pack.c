/*
 * test_fp4_pack.c — the byte layout of e2m1 against the two references
 * that define it for precc's users, transcribed (nothing here calls precc
 * to make an expected byte):
 *   torchao 36027d8, torchao/prototype/mx_formats/kernels.py:155-160
 *     pack_uint4:   (u[::2] | u[1::2] << 4) over the contiguous tensor,
 *                   last dim even; :137-141 unpack_uint4: first element
 *                   = byte & 0b1111, second = byte >> 4. NVFP4Tensor
 *                   views these bytes as torch.float4_e2m1fn_x2
 *                   (nvfp4_tensor.py:562) for torch._scaled_mm/cuBLASLt.
 *   Transformer Engine 1a4d3b0d, transformer_engine/pytorch/custom_recipes/
 *     quantization_nvfp4.py:51-73 cast_to_fp4x2: value -> code by the
 *     midpoints (ties to the even code), then
 *     result[:, ::2] + result[:, 1::2] * 16.
 * precc's buffers must be those bytes: element 2i in the low nibble of
 * byte i, row by row. A swapped nibble order fails every check here.
 */
#include "precc/interp.h"
#include "ir.h"
#include "ref.h"

enum { ROWS = 6, COLS = 34 };

/* torchao pack_uint4 / unpack_uint4 on a flattened contiguous tensor */
static void
ao_pack_uint4(const uint8_t *u, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n / 2; i++)
		out[i] = (uint8_t)(u[2 * i] | u[2 * i + 1] << 4);
}

static void
ao_unpack_uint4(const uint8_t *b, size_t nbytes, uint8_t *u)
{
	for (size_t i = 0; i < nbytes; i++) {
		u[2 * i] = b[i] & 0xf;
		u[2 * i + 1] = b[i] >> 4;
	}
}

/* TE cast_to_fp4x2's code of one value (its result[...] = k lines) */
static uint8_t
te_fp4_code(float x)
{
	uint8_t r = 0;
	if (x >= 0.0f && x <= 0.25f) r = 0;
	if (x > 0.25f && x < 0.75f) r = 1;
	if (x >= 0.75f && x <= 1.25f) r = 2;
	if (x > 1.25f && x < 1.75f) r = 3;
	if (x >= 1.75f && x <= 2.5f) r = 4;
	if (x > 2.5f && x < 3.5f) r = 5;
	if (x >= 3.5f && x <= 5.0f) r = 6;
	if (x > 5.0f) r = 7;
	if (x >= -0.25f && x < -0.0f) r = 8;
	if (x < -0.25f && x > -0.75f) r = 9;
	if (x <= -0.75f && x >= -1.25f) r = 10;
	if (x < -1.25f && x > -1.75f) r = 11;
	if (x <= -1.75f && x >= -2.5f) r = 12;
	if (x < -2.5f && x > -3.5f) r = 13;
	if (x <= -3.5f && x >= -5.0f) r = 14;
	if (x < -5.0f) r = 15;
	return r;
}

/* TE cast_to_fp4x2 on a [rows, cols] tensor: ::2 low, 1::2 high */
static void
te_cast_to_fp4x2(const float *x, long rows, long cols, uint8_t *out)
{
	for (long r = 0; r < rows; r++)
		for (long c = 0; c < cols / 2; c++)
			out[r * (cols / 2) + c] = (uint8_t)(te_fp4_code(x[r * cols + 2 * c])
			                          + te_fp4_code(x[r * cols + 2 * c + 1]) * 16);
}

int
main(void)
{
	/* every magnitude, the midpoints (ties), values just off them, both
	 * signs (not -0: TE's cast gives it code 0, precc's -0 keeps its sign),
	 * beyond 6 */
	static const float vals[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0.25f, 0.75f, 1.25f, 1.75f,
	                             2.5f, 3.5f, 5, 0.26f, 0.74f, 1.3f, 2.6f, 4.9f, 7, 100,
	                             0.1f, 0.3f, 1.1f, 2.2f, 3.3f, 5.5f};
	enum { NV = sizeof vals / sizeof vals[0], N = ROWS * COLS };
	static float x[N], y[N];
	static uint8_t q[N / 2 + 8], te[N / 2], ao[N / 2], codes[N], back[N], aot[N / 2];
	const size_t nb = N / 2;

	(void)fill, (void)case_name, (void)same;   /* ref.h's, for other tests */

	for (long i = 0; i < N; i++) {
		float v = vals[(i * 7 + i / COLS) % NV];
		x[i] = (i / 3) % 2 ? -v : v;
		if (x[i] == 0.0f)
			x[i] = 0.0f;   /* +0 only */
	}
	CHECK(precc_interp_tensor_bytes(PRECC_E2M1, ROWS, COLS) == nb, "%d x %d e2m1: %zu bytes",
	      ROWS, COLS, precc_interp_tensor_bytes(PRECC_E2M1, ROWS, COLS));
	CHECK(precc_interp_tensor_bytes(PRECC_E2M1, ROWS, COLS - 1) == 0,
	      "an odd last dim has no e2m1 layout");

	/* precc's quantize against TE's cast (RNE, scale 1), byte for byte;
	 * the 8 bytes after the tensor stay untouched */
	memset(q, 0xa5, sizeof q);
	precc_quant_opts o = {.qf = PRECC_E2M1, .round = PRECC_RNE, .saturate = true};
	CHECK(precc_quantize(x, PRECC_FP32, ROWS, COLS, &o, q) == PRECC_IOK, "quantize: %s",
	      precc_interp_error());
	te_cast_to_fp4x2(x, ROWS, COLS, te);
	for (size_t i = 0; i < nb; i++)
		CHECK(q[i] == te[i], "byte %zu (elements %zu, %zu = %g, %g): precc %02x, TE %02x", i,
		      2 * i, 2 * i + 1, x[2 * i], x[2 * i + 1], q[i], te[i]);
	for (size_t i = nb; i < sizeof q; i++)
		CHECK(q[i] == 0xa5, "quantize wrote byte %zu past the %zu of the tensor", i, nb);

	/* torchao's pack of the reference codes (ref.h's encoder) */
	for (long i = 0; i < N; i++)
		codes[i] = (uint8_t)rencode(R_E2M1, x[i]);
	ao_pack_uint4(codes, N, ao);
	CHECK(!memcmp(q, ao, nb), "precc's bytes are not torchao's pack_uint4");

	/* precc's reading of the bytes: torchao's unpack, decoded */
	CHECK(precc_dequantize(q, PRECC_E2M1, ROWS, COLS, (precc_block){0, 0}, NULL, y) == PRECC_IOK,
	      "dequantize: %s", precc_interp_error());
	ao_unpack_uint4(q, nb, back);
	for (long i = 0; i < N; i++)
		CHECK(y[i] == (float)rdecode(R_E2M1, back[i]), "dequantize element %ld: %g vs %g", i,
		      y[i], rdecode(R_E2M1, back[i]));

	/* the helpers, and an odd count */
	uint8_t p2[N / 2], u2[N];
	precc_e2m1_pack(codes, N, p2);
	precc_e2m1_unpack(ao, N, u2);
	CHECK(!memcmp(p2, ao, nb) && !memcmp(u2, codes, N), "precc_e2m1_pack/unpack");
	uint8_t three[2];
	precc_e2m1_pack((const uint8_t[]){1, 2, 3}, 3, three);
	CHECK(three[0] == 0x21 && three[1] == 0x03, "pack of 3 codes: %02x %02x", three[0], three[1]);

	/* the IR's transpose of packed codes (NVFP4 dgrad's w.q.t): torchao's
	 * pack of the transposed codes */
	char err[512];
	Module *m = ir_parse("func @t {\n"
	                     "  %x = param in : f32[6,34]\n"
	                     "  %s = param state : f32[1,1]{*x*}\n"
	                     "  %q = quantize %x, %s sat : e2m1[6,34]\n"
	                     "  %t = transpose %q : e2m1[34,6]\n"
	                     "  ret %q, %t\n"
	                     "}\n", "t.ir", err, sizeof err);
	CHECK(m && !ir_verify(m, err, sizeof err), "parse/verify: %s", err);
	IrInterp *ip = m ? ir_interp_new(m->fn[0], NULL, err, sizeof err) : NULL;
	float one = 1.0f;
	CHECK(ip && !ir_interp_bind(ip, "x", x, sizeof x) && !ir_interp_bind(ip, "s", &one, 4)
	      && !ir_interp_run(ip), "interp: %s", ip ? ir_interp_error(ip) : err);
	for (long r = 0; r < ROWS; r++)
		for (long c = 0; c < COLS; c++)
			u2[c * ROWS + r] = codes[r * COLS + c];
	ao_pack_uint4(u2, N, aot);
	if (ip && ir_interp_value(ip, ir_interp_result(ip, 1))) {
		CHECK(!memcmp(ir_interp_value(ip, ir_interp_result(ip, 0)), ao, nb),
		      "the interpreter's quantize differs from torchao's pack");
		CHECK(!memcmp(ir_interp_value(ip, ir_interp_result(ip, 1)), aot, nb),
		      "the interpreter's transpose differs from torchao's pack of the transpose");
		CHECK(ir_interp_value_bytes(ip, ir_interp_result(ip, 1), NULL, NULL) == nb,
		      "e2m1[34,6] is %zu bytes", nb);
	}
	ir_interp_free(ip);
	ir_module_free(m);
	/* and the verifier refuses an odd last dim */
	m = ir_parse("func @o {\n  %x = param in : f32[2,17]\n  %s = param state : f32[1,1]{*x*}\n"
	             "  %q = quantize %x, %s sat : e2m1[2,17]\n  ret %q\n}\n", "o.ir", err, sizeof err);
	CHECK(m && ir_verify(m, err, sizeof err) && strstr(err, "even"), "verify e2m1[2,17]: %s", err);
	ir_module_free(m);
	/* an e2m1 last dim M: an odd M is refused when the interpreter sizes it */
	m = ir_parse("func @m {\n  %x = param in : f32[4,M]\n  %s = param state : f32[1,1]{*x*}\n"
	             "  %q = quantize %x, %s sat : e2m1[4,M]\n  ret %q\n}\n", "m.ir", err, sizeof err);
	IrInterpOpts io;
	ir_interp_opts_init(&io);
	io.m = 7;
	ip = m ? ir_interp_new(m->fn[0], &io, err, sizeof err) : NULL;
	CHECK(m && !ip && strstr(err, "even"), "e2m1[4,M] at M=7: %s", ip ? "accepted" : err);
	ir_interp_free(ip);
	io.m = 8;
	ip = m ? ir_interp_new(m->fn[0], &io, err, sizeof err) : NULL;
	CHECK(ip && ir_interp_value_bytes(ip, ir_find_value(m->fn[0], "q"), NULL, NULL) == 16,
	      "e2m1[4,M] at M=8 is 16 bytes");
	ir_interp_free(ip);
	ir_module_free(m);

	/* an odd last dim is refused, not packed across rows */
	CHECK(precc_quantize(x, PRECC_FP32, 2, 17, &o, q) == PRECC_IESHAPE,
	      "quantize of [2, 17] e2m1 should be refused");
	CHECK(strstr(precc_interp_error(), "even") != NULL, "message: %s", precc_interp_error());

	if (fails) {
		printf("%d failures\n", fails);
		return 1;
	}
	printf("fp4 pack: precc's e2m1 bytes are TE's cast_to_fp4x2 and torchao's pack_uint4\n");
	return 0;
}
