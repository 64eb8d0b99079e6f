/*
 * test_ir.c — unit tests of the IR text form and verifier:
 * print(parse(t)) == t over a set of texts, exact parse-error messages,
 * one exact message per verifier error class, and the construction API.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"

static int fails, checks;

#define EXPECT(c, ...) do { checks++; if (!(c)) { fails++; \
	fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* ---- round trip --------------------------------------------------------- */

static const char *const roundtrip[] = {
	/* empty module, comments only */
	"",
	"# just a comment\n",
	/* delayed scaling, tensorwise, with state */
	"# delayed scaling\n"
	"func @l.fprop {\n"
	"  %x = param in : bf16[M,256]\n"
	"  %w = param weight : bf16[768,256]\n"
	"  %x.scale = param state : f32[1,1]{*x*}\n"
	"  %x.amax_history = param state : f32[1024]\n"
	"  # quantize with the scale of the previous steps\n"
	"  %x.q = quantize %x, %x.scale sat : e4m3[M,256]\n"
	"  %x.scale_inv = recip %x.scale : f32[1,1]{*x*}\n"
	"  %x.amax = amax %x : f32[1,1]{*x*}\n"
	"  %h = history_push %x.amax_history, %x.amax : f32[1024]\n"
	"  %r = history_reduce %h algo=most_recent : f32[1,1]{*x*}\n"
	"  %s = scale %r, %x.scale fmt=e4m3 margin=2 pow2 eps=1e-12 nonfinite=skip : f32[1,1]{*x*}\n"
	"  %w.amax = amax %w : f32[1,1]{*x*}\n"
	"  %w.scale = scale %w.amax fmt=e4m3 nonfinite=error : f32[1,1]{*x*}\n"
	"  %w.q = quantize %w, %w.scale round=sr sat stream=1 : e4m3[768,256]\n"
	"  %w.si = recip %w.scale : f32[1,1]{*x*}\n"
	"  %acc = gemm %x.q, %w.q, %x.scale_inv, %w.si accum=fast:14 : f32[M,768]\n"
	"  %b = param bias : bf16[768]\n"
	"  %yb = bias %acc, %b : f32[M,768]\n"
	"  %y = cast %yb round=rz : bf16[M,768]\n"
	"  update %x.amax_history, %h\n"
	"  update %x.scale, %s\n"
	"  # the outputs\n"
	"  ret %y\n"
	"  # trailing comment inside\n"
	"}\n"
	"\n"
	"# trailing module comment\n",
	/* blockwise with transposes, dynamic blocked dims, MX, NVFP4, pad/slice */
	"func @a {\n"
	"  %x = param in : bf16[M,256]\n"
	"  %x.t = transpose %x : bf16[256,M]\n"
	"  %a = amax %x.t : f32[256,M/128]{1x128}\n"
	"  %s = scale %a fmt=e4m3 : f32[256,M/128]{1x128}\n"
	"  %q = quantize %x.t, %s : e4m3[256,M]\n"
	"  %qt = transpose %q : e4m3[M,256]\n"
	"  %si = recip %s : f32[256,M/128]{1x128}\n"
	"  %sit = transpose %si : f32[M/128,256]{128x1}\n"
	"  %ma = amax %x : f32[M,8]{1x32}\n"
	"  %ms = mx_scale %ma fmt=e5m2 mode=floor : e8m0[M,8]{1x32}\n"
	"  %ga = amax %x : f32[1,1]{*x*}\n"
	"  %gs = scale %ga fmt=e2m1 block_fmt=e4m3 : f32[1,1]{*x*}\n"
	"  %ba = amax %x : f32[M,16]{1x16}\n"
	"  %bs = block_scale %ba, %gs fmt=e2m1 : e4m3[M,16]{1x16}\n"
	"  %fq = quantize %x, %bs, %gs sat : e2m1[M,256]\n"
	"  %gsi = recip %gs : f32[1,1]{*x*}\n"
	"  %dq = dequantize %fq, %bs, %gsi : bf16[M,256]\n"
	"  %p = pad %dq : bf16[M,272]\n"
	"  %sl = slice %p : bf16[M,200]\n"
	"  %r = amax %x : f32[M,1]{1x*}\n"
	"  %c = amax %x : f32[1,256]{*x1}\n"
	"  ret %qt, %sit, %ms, %sl, %r, %c\n"
	"}\n"
	"\n"
	"func @b.wgrad {\n"
	"  %a = param grad : f32[4096,M]\n"
	"  %b = param in : f32[512,M]\n"
	"  %c = gemm %a, %b accum=promote:128 : f32[4096,512]\n"
	"  ret %c\n"
	"}\n",
};

static void
test_roundtrip(void)
{
	char err[512];

	for (size_t k = 0; k < sizeof roundtrip / sizeof *roundtrip; k++) {
		Module *m = ir_parse(roundtrip[k], "rt.ir", err, sizeof err);
		EXPECT(m, "text %zu does not parse: %s", k, err);
		if (!m)
			continue;
		char *s = ir_module_to_string(m);
		EXPECT(!strcmp(s, roundtrip[k]), "text %zu does not round-trip:\n%s---\n%s", k,
		       roundtrip[k], s);
		EXPECT(ir_verify(m, err, sizeof err) == 0, "text %zu does not verify: %s", k, err);
		free(s);
		ir_module_free(m);
	}
	/* Non-canonical spacing parses and prints canonically. */
	Module *m = ir_parse("func   @f{\n\t%x=param in:bf16[M,16]\n  ret   %x\n}\n", "s.ir", err,
	                     sizeof err);
	EXPECT(m, "loose spacing does not parse: %s", err);
	if (m) {
		char *s = ir_module_to_string(m);
		EXPECT(!strcmp(s, "func @f {\n  %x = param in : bf16[M,16]\n  ret %x\n}\n"),
		       "loose spacing prints as:\n%s", s);
		free(s);
		ir_module_free(m);
	}
}

/* ---- parse errors ------------------------------------------------------- */

static const struct { const char *text, *msg; } parse_errors[] = {
	{"fnuc @f {\n}\n", "p.ir:1:1: error: expected 'func', 'kernel' or a '#' comment, got 'fnuc'"},
	{"func f {\n}\n", "p.ir:1:6: error: expected '@' and a function name"},
	{"func @f\n}\n", "p.ir:1:8: error: expected '{' after @f"},
	{"func @f {\n  %x = param in : bf16[M,16]\n", "p.ir:1:1: error: @f is not closed: missing '}'"},
	{"func @f {\n}\nfunc @f {\n}\n", "p.ir:3:1: error: function @f is defined twice (first at line 1)"},
	{"func @f {\n  %x = frob %y : f32[1]\n}\n", "p.ir:2:8: error: unknown op 'frob'"},
	{"func @f {\n  amax %x : f32[1,1]{*x*}\n}\n",
	 "p.ir:2:3: error: amax defines a value: write %name = amax ..."},
	{"func @f {\n  %r = ret %x\n}\n", "p.ir:2:3: error: ret defines no value"},
	{"func @f {\n  %x param in : f32[4]\n}\n", "p.ir:2:6: error: expected '=' after %x"},
	{"func @f {\n  %x = param input : f32[4]\n}\n",
	 "p.ir:2:14: error: bad param kind 'input' (expected in, weight, grad, state, bias, buf or main_grad)"},
	{"func @f {\n  %x = param in : e4m4[4]\n}\n", "p.ir:2:19: error: unknown format 'e4m4'"},
	{"func @f {\n  %x = param in : f32(4)\n}\n", "p.ir:2:22: error: expected '[' after the format"},
	{"func @f {\n  %x = param in : f32[4,4,4]\n}\n", "p.ir:2:27: error: at most 2 dims"},
	{"func @f {\n  %x = param in : f32[N,4]\n}\n",
	 "p.ir:2:23: error: expected a dim (a number, M or M/B)"},
	{"func @f {\n  %x = param in : f32[4,4]{1x0}\n}\n",
	 "p.ir:2:30: error: block size 0 (write * for the whole extent)"},
	{"func @f {\n  %x = param in : f32[4,4]{1}\n}\n",
	 "p.ir:2:29: error: expected 'x' between block sizes"},
	{"func @f {\n  %x = param in\n}\n", "p.ir:2:16: error: expected ':' and the result type of param"},
	{"func @f {\n  %a = amax %x frob=1 : f32[1,1]{*x*}\n}\n",
	 "p.ir:2:16: error: unknown attribute 'frob'"},
	{"func @f {\n  %a = amax %x sat : f32[1,1]{*x*}\n}\n",
	 "p.ir:2:16: error: amax takes no attribute 'sat'"},
	{"func @f {\n  %q = quantize %x, %s round=rn : e4m3[4,4]\n}\n",
	 "p.ir:2:30: error: bad round 'rn' (expected rne, rz or sr)"},
	{"func @f {\n  %q = quantize %x, %s round=sr : e4m3[4,4]\n}\n",
	 "p.ir:2:8: error: round=sr needs a random stream: stream=N"},
	{"func @f {\n  %q = quantize %x, %s sat sat : e4m3[4,4]\n}\n",
	 "p.ir:2:28: error: attribute 'sat' given twice"},
	{"func @f {\n  %q = quantize %x, %s sat=1 : e4m3[4,4]\n}\n",
	 "p.ir:2:28: error: 'sat' is a flag and takes no value"},
	{"func @f {\n  %s = scale %a : f32[1,1]{*x*}\n}\n", "p.ir:2:8: error: scale needs fmt=FORMAT"},
	{"func @f {\n  %s = scale %a fmt=e4m3 margin=x : f32[1,1]{*x*}\n}\n",
	 "p.ir:2:33: error: bad margin 'x' (expected an integer in -127..127)"},
	{"func @f {\n  %c = gemm %a, %b : f32[4,4]\n}\n",
	 "p.ir:2:8: error: gemm needs accum=fp32, accum=promote:N or accum=fast:B"},
	{"func @f {\n  %c = gemm %a, %b accum=promote : f32[4,4]\n}\n",
	 "p.ir:2:26: error: accum=promote needs a count: accum=promote:N"},
	{"func @f {\n  %r = history_reduce %h : f32[1,1]{*x*}\n}\n",
	 "p.ir:2:8: error: history_reduce needs algo=max or algo=most_recent"},
	{"func @f {\n  %c = amax %a, : f32[1,1]{*x*}\n}\n",
	 "p.ir:2:17: error: expected an operand after ','"},
	{"func @f {\n  ret %x # done\n}\n", "p.ir:2:10: error: a comment must be on a line of its own"},
	{"func @f {\n  %x = param in : f32[4] junk\n}\n", "p.ir:2:26: error: expected end of line, got 'junk'"},
};

static void
test_parse_errors(void)
{
	char err[512];

	for (size_t k = 0; k < sizeof parse_errors / sizeof *parse_errors; k++) {
		err[0] = 0;
		Module *m = ir_parse(parse_errors[k].text, "p.ir", err, sizeof err);
		EXPECT(!m, "parse error %zu: parsed", k);
		ir_module_free(m);
		EXPECT(!strcmp(err, parse_errors[k].msg), "parse error %zu:\n  want %s\n  got  %s", k,
		       parse_errors[k].msg, err);
	}
}

/* ---- verifier errors ---------------------------------------------------- */

#define X   "  %x = param in : bf16[M,256]\n"
#define W   "  %w = param weight : bf16[768,256]\n"
#define XS  "  %xa = amax %x : f32[1,1]{*x*}\n  %xs = scale %xa fmt=e4m3 : f32[1,1]{*x*}\n"
#define WS  "  %wa = amax %w : f32[1,1]{*x*}\n  %ws = scale %wa fmt=e4m3 : f32[1,1]{*x*}\n"
#define F(body) "func @f {\n" body "}\n"

static const struct { const char *text, *msg; } verify_errors[] = {
	/* structure */
	{"func @f {\n  %x = param in : f32[4]\n}\n",
	 "v.ir:1:1: error: @f: missing ret at the end of the function"},
	{F(X "  ret %x\n  %y = amax %x : f32[1,1]{*x*}\n"),
	 "v.ir:4:3: error: @f: %y = amax: instruction after ret"},
	{F(X "  %x = param in : bf16[M,256]\n  ret %x\n"),
	 "v.ir:3:3: error: @f: %x = param: redefinition of %x"},
	{F("  %a = amax %x : f32[1,1]{*x*}\n" X "  ret %a\n"),
	 "v.ir:2:3: error: @f: %a = amax: %x is used before its definition"},
	{F("  ret %nope\n"), "v.ir:2:3: error: @f: ret: %nope is never defined"},
	{F(X "  %a = recip %x, %x : f32[1,1]{*x*}\n  ret %a\n"),
	 "v.ir:3:3: error: @f: %a = recip: takes 1 operand, got 2"},
	/* amax's second operand is a group's offsets ({gx*}) */
	{F(X "  %a = amax %x, %x : f32[1,1]{*x*}\n  ret %a\n"),
	 "v.ir:3:3: error: @f: %a = amax: offsets %x must be i32[G], the groups' end offsets, "
	 "got bf16[M,256]"},
	{F(X "  %q = quantize %x : e4m3[M,256]\n  ret %q\n"),
	 "v.ir:3:3: error: @f: %q = quantize: takes 2 to 3 operands, got 1"},
	{F(X "  ret\n"), "v.ir:3:3: error: @f: ret: takes at least 1 operand, got 0"},
	{F(X W "  %c = gemm %x, %w, %x accum=fp32 : f32[M,768]\n  ret %c\n"),
	 "v.ir:4:3: error: @f: %c = gemm: high-precision operands take no scales, got 3 operands"},
	/* types */
	{F("  %x = param in : bf16[0,16]\n  ret %x\n"),
	 "v.ir:2:3: error: @f: %x = param: result type bf16[0,16] has a zero dim"},
	{F("  %x = param in : bf16[M/128,16]\n  ret %x\n"),
	 "v.ir:2:3: error: @f: %x = param: result type bf16[M/128,16]: M/B dims are for scale tensors"},
	{F("  %x = param state : f32[16]{16}\n  ret %x\n"),
	 "v.ir:2:3: error: @f: %x = param: result type f32[16]{16}: scale tensors are rank 2"},
	/* params */
	{F("  %b = param bias : bf16[4,4]\n  ret %b\n"),
	 "v.ir:2:3: error: @f: %b = param: a bias param must be a vector like bf16[N], got bf16[4,4]"},
	{F("  %s = param state : bf16[4]\n  ret %s\n"),
	 "v.ir:2:3: error: @f: %s = param: a state param must be f32, got bf16[4]"},
	/* amax */
	{F(X "  %a = amax %x : f32[M,256]\n  ret %a\n"),
	 "v.ir:3:3: error: @f: %a = amax: result must be a scale tensor whose {granularity} says "
	 "what amax reduces over, e.g. f32[1,1]{*x*}; got f32[M,256]"},
	{F(X "  %a = amax %x : f32[M,4]{1x128}\n  ret %a\n"),
	 "v.ir:3:3: error: @f: %a = amax: %a has shape [M,4], but granularity {1x128} over %x "
	 "[M,256] needs [M,2]"},
	{F(X "  %a = amax %x : bf16[1,1]{*x*}\n  ret %a\n"),
	 "v.ir:3:3: error: @f: %a = amax: result must be f32, got bf16[1,1]{*x*}"},
	{F(X XS "  %a = amax %xs : f32[1,1]{*x*}\n  ret %a\n"),
	 "v.ir:5:3: error: @f: %a = amax: operand %xs is a scale tensor f32[1,1]{*x*}, expected data"},
	/* scale, recip, mx_scale, block_scale */
	{F(X "  %a = amax %x : f32[1,1]{*x*}\n  %s = scale %a fmt=bf16 : f32[1,1]{*x*}\n  ret %s\n"),
	 "v.ir:4:3: error: @f: %s = scale: fmt=bf16 is not a quantized format"},
	{F(X "  %a = amax %x : f32[1,1]{*x*}\n  %s = scale %a fmt=e4m3 : f32[M,1]{1x*}\n  ret %s\n"),
	 "v.ir:4:3: error: @f: %s = scale: result must be f32[1,1]{*x*}, got f32[M,1]{1x*}"},
	{F(X "  %s = scale %x fmt=e4m3 : f32[1,1]{*x*}\n  ret %s\n"),
	 "v.ir:3:3: error: @f: %s = scale: amax %x must be a scale tensor (a type with a "
	 "{granularity}), got bf16[M,256]"},
	{F(X XS "  %r = recip %xs : f32[1,2]{*x*}\n  ret %r\n"),
	 "v.ir:5:3: error: @f: %r = recip: result must be f32[1,1]{*x*}, got f32[1,2]{*x*}"},
	{F(X "  %a = amax %x : f32[M,8]{1x32}\n  %m = mx_scale %a fmt=e4m3 mode=rceil : f32[M,8]{1x32}\n  ret %m\n"),
	 "v.ir:4:3: error: @f: %m = mx_scale: result must be e8m0[M,8]{1x32}, got f32[M,8]{1x32}"},
	{F(X "  %a = amax %x : f32[M,16]{1x16}\n  %b = block_scale %a, %a fmt=e2m1 : e4m3[M,16]{1x16}\n  ret %b\n"),
	 "v.ir:4:3: error: @f: %b = block_scale: global scale %a must be a tensorwise scale "
	 "f32[1,1]{*x*}, got f32[M,16]{1x16}"},
	/* history */
	{F(X XS "  %h = history_push %xs, %xa : f32[1,1]{*x*}\n  ret %h\n"),
	 "v.ir:5:3: error: @f: %h = history_push: history %xs must be an f32 vector like "
	 "f32[1024], got f32[1,1]{*x*}"},
	{F("  %h = param state : f32[16]\n  %r = history_reduce %h algo=max : f32[1]\n  ret %r\n"),
	 "v.ir:3:3: error: @f: %r = history_reduce: result must be f32[1,1]{*x*}, got f32[1]"},
	/* quantize / dequantize / cast */
	{F(X XS "  %q = quantize %x, %xs : bf16[M,256]\n  ret %q\n"),
	 "v.ir:5:3: error: @f: %q = quantize: result must be a quantized format (e4m3, e5m2, "
	 "e2m1, e3m2 or e2m3), got bf16"},
	{F(X XS "  %q = quantize %x, %xs : e4m3[M,128]\n  ret %q\n"),
	 "v.ir:5:3: error: @f: %q = quantize: result must be e4m3[M,256], got e4m3[M,128]"},
	{F(X XS "  %q = quantize %x, %xs : e4m3[M,256]\n  %q2 = quantize %q, %xs : e4m3[M,256]\n  ret %q2\n"),
	 "v.ir:6:3: error: @f: %q2 = quantize: operand %q must be high precision (f32, tf32, f16 "
	 "or bf16), got e4m3"},
	{F(X "  %a = amax %x : f32[M,2]{1x128}\n  %s = scale %a fmt=e4m3 : f32[M,2]{1x128}\n"
	     "  %t = transpose %s : f32[2,M]{128x1}\n  %q = quantize %x, %t : e4m3[M,256]\n  ret %q\n"),
	 "v.ir:6:3: error: @f: %q = quantize: %t has shape [2,M], but granularity {128x1} over %x "
	 "[M,256] needs [M/128,256]"},
	{F(X "  %q = quantize %x, %x : e4m3[M,256]\n  ret %q\n"),
	 "v.ir:3:3: error: @f: %q = quantize: %x must be a scale tensor (a type with a "
	 "{granularity}), got bf16[M,256]"},
	{F(X XS "  %q = quantize %x, %xs, %xs : e4m3[M,256]\n  ret %q\n"),
	 "v.ir:5:3: error: @f: %q = quantize: two-level scales (block and global) are for e2m1 "
	 "results, got e4m3"},
	{F(X "  %d = dequantize %x, %x : bf16[M,256]\n  ret %d\n"),
	 "v.ir:3:3: error: @f: %d = dequantize: operand %x must be quantized, got bf16"},
	{F(X "  %c = cast %x : e4m3[M,256]\n  ret %c\n"),
	 "v.ir:3:3: error: @f: %c = cast: result must be high precision (f32, tf32, f16 or bf16), "
	 "got e4m3; quantized formats need quantize and a scale"},
	/* layout */
	{F(X "  %t = transpose %x : bf16[M,256]\n  ret %t\n"),
	 "v.ir:3:3: error: @f: %t = transpose: result must be bf16[256,M], got bf16[M,256]"},
	{F(X "  %p = pad %x : bf16[M,128]\n  ret %p\n"),
	 "v.ir:3:3: error: @f: %p = pad: pad %x [M,256] to [M,128]: pad only grows static dims"},
	{F(X "  %p = slice %x : bf16[1,256]\n  ret %p\n"),
	 "v.ir:3:3: error: @f: %p = slice: slice %x [M,256] to [1,256]: slice only shrinks static dims"},
	/* gemm */
	{F(X "  %w = param weight : bf16[768,128]\n  %c = gemm %x, %w accum=fp32 : f32[M,768]\n  ret %c\n"),
	 "v.ir:4:3: error: @f: %c = gemm: K mismatch: A %x is [M,256] and B %w is [768,128] "
	 "(gemm is A[M,K]·B[N,K]ᵀ)"},
	{F(X W "  %c = gemm %x, %w accum=fp32 : f32[768,M]\n  ret %c\n"),
	 "v.ir:4:3: error: @f: %c = gemm: result must be f32[M,768], got f32[768,M]"},
	{F(X W XS "  %q = quantize %x, %xs : e4m3[M,256]\n  %c = gemm %q, %w accum=fp32 : f32[M,768]\n  ret %c\n"),
	 "v.ir:7:3: error: @f: %c = gemm: A %q is e4m3 but B %w is bf16: quantize both or neither"},
	{F(X W XS WS "  %q = quantize %x, %xs : e4m3[M,256]\n  %r = quantize %w, %ws : e4m3[768,256]\n"
	   "  %c = gemm %q, %r accum=fp32 : f32[M,768]\n  ret %c\n"),
	 "v.ir:10:3: error: @f: %c = gemm: e4m3 operands need one scale_inv each: gemm %a, %b, %sa, "
	 "%sb (got 2 operands)"},
	{F(X W "  %xa = amax %x : f32[M,8]{1x32}\n  %xs = scale %xa fmt=e4m3 : f32[M,8]{1x32}\n" WS
	   "  %q = quantize %x, %xs : e4m3[M,256]\n  %r = quantize %w, %ws : e4m3[768,256]\n"
	   "  %c = gemm %q, %r, %xs, %ws accum=promote:128 : f32[M,768]\n  ret %c\n"),
	 "v.ir:10:3: error: @f: %c = gemm: accum=promote:128 applies scales at each promotion, so K "
	 "blocks must be multiples of 128; %xs has {1x32}"},
	{F("  %x = param in : bf16[M,200]\n  %w = param weight : bf16[768,200]\n"
	   "  %xa = amax %x : f32[M,2]{1x128}\n  %xs = scale %xa fmt=e4m3 : f32[M,2]{1x128}\n" WS
	   "  %q = quantize %x, %xs : e4m3[M,200]\n  %r = quantize %w, %ws : e4m3[768,200]\n"
	   "  %c = gemm %q, %r, %xs, %ws accum=fp32 : f32[M,768]\n  ret %c\n"),
	 "v.ir:10:3: error: @f: %c = gemm: K=200 is not a multiple of the K block of %xs {1x128}: "
	 "blocks along K may not be partial"},
	{F(X W "  %c = gemm %x, %w accum=fast:30 : f32[M,768]\n  ret %c\n"),
	 "v.ir:4:3: error: @f: %c = gemm: accum=fast:30: the accumulator keeps 1 to 23 mantissa bits"},
	/* epilogue and outputs */
	{F(X W "  %c = gemm %x, %w accum=fp32 : f32[M,768]\n  %b = param bias : bf16[256]\n"
	   "  %y = bias %c, %b : f32[M,768]\n  ret %y\n"),
	 "v.ir:6:3: error: @f: %y = bias: bias %b has [256] elements but %c has [M,768] columns"},
	{F(X XS "  update %x, %xs\n  ret %x\n"), "v.ir:5:3: error: @f: update: %x is not a state param"},
	{F("  %s = param state : f32[1,1]{*x*}\n  %h = param state : f32[8]\n  update %s, %h\n  ret %s\n"),
	 "v.ir:4:3: error: @f: update: new value %h is f32[8] but state %s is f32[1,1]{*x*}"},
	{F("  %s = param state : f32[8]\n  update %s, %s\n  update %s, %s\n  ret %s\n"),
	 "v.ir:4:3: error: @f: update: state %s is updated twice"},
};

static void
test_verify_errors(void)
{
	char err[2048];

	for (size_t k = 0; k < sizeof verify_errors / sizeof *verify_errors; k++) {
		Module *m = ir_parse(verify_errors[k].text, "v.ir", err, sizeof err);
		EXPECT(m, "verify case %zu does not parse: %s", k, err);
		if (!m)
			continue;
		int n = ir_verify(m, err, sizeof err);
		EXPECT(n == 1, "verify case %zu: %d errors, want 1:\n%s", k, n, err);
		EXPECT(!strcmp(err, verify_errors[k].msg), "verify case %zu:\n  want %s\n  got  %s", k,
		       verify_errors[k].msg, err);
		ir_module_free(m);
	}
}

/* ---- robustness: every prefix of every text parses or fails cleanly ---- */

static void
test_prefixes(void)
{
	char err[512], *buf;
	int ok = 0, bad = 0;

	for (size_t k = 0; k < sizeof roundtrip / sizeof *roundtrip; k++) {
		size_t n = strlen(roundtrip[k]);
		buf = malloc(n + 1);
		for (size_t len = 0; len <= n; len++) {
			memcpy(buf, roundtrip[k], len);
			buf[len] = 0;
			Module *m = ir_parse(buf, "x.ir", err, sizeof err);
			if (m) {
				char *s = ir_module_to_string(m);
				ir_verify(m, err, sizeof err);
				free(s);
				ir_module_free(m);
				ok++;
			} else {
				EXPECT(!strncmp(err, "x.ir:", 5), "prefix error without position: %s", err);
				bad++;
			}
		}
		free(buf);
	}
	EXPECT(ok > 0 && bad > 0, "prefixes: %d parsed, %d failed", ok, bad);
}

/* Errors only constructed IR can have. */
static void
test_built_errors(void)
{
	Module *m = ir_module_new();
	Func *f = ir_func_new(m, "g");
	char err[512];
	int x = ir_def(f, "x", ir_tensor(PRECC_BF16, DIM_M, 16), OP_param, NULL, 0);

	ir_emit(f, OP_param, x, NULL, 0);    /* defines %x again */
	ir_emit(f, OP_ret, -1, &x, 1);
	EXPECT(ir_verify(m, err, sizeof err) == 1 &&
	       !strcmp(err, "error: @g: %x = param: redefinition of %x"), "built redefinition: %s", err);
	ir_module_free(m);
}

/* The name tables behind the linear verifier and passes; the verifier's
 * duplicate check on a built module with many funcs. */
static void
test_names(void)
{
	NameTab t = {0};
	char key[4000][16];
	Module *m = ir_module_new();
	char err[512];
	bool *drop;
	int n = 4000, ok = 1;

	for (int k = 0; k < n; k++) {
		snprintf(key[k], sizeof key[k], "f%d", k);
		ok &= ir_names_put(&t, key[k], k) == -1;
	}
	EXPECT(ok && t.n == (size_t)n, "puts: %zu names", t.n);
	for (int k = 0; k < n; k++)
		ok &= ir_names_get(&t, key[k]) == k;
	EXPECT(ok && ir_names_get(&t, "f4000") == -1 && ir_names_get(&t, "") == -1, "gets");
	EXPECT(ir_names_put(&t, "f7", 99) == 7 && ir_names_get(&t, "f7") == 7, "put keeps the first");
	ir_names_set(&t, "f7", 99);
	EXPECT(ir_names_get(&t, "f7") == 99 && t.n == (size_t)n, "set replaces");
	ir_names_free(&t);
	EXPECT(ir_names_get(&t, "f1") == -1, "freed table is empty");

	/* n funcs, one name three times: two "defined twice" errors */
	for (int k = 0; k < n; k++) {
		Func *f = ir_func_new(m, k == 10 || k == 3000 ? "f5" : key[k]);
		int x = ir_def(f, "x", ir_tensor(PRECC_BF16, DIM_M, 16), OP_param, NULL, 0);
		ir_emit(f, OP_ret, -1, &x, 1);
	}
	EXPECT(ir_verify(m, err, sizeof err) == 2
	       && !strcmp(err, "error: @f5: function defined twice\nerror: @f5: function defined twice"),
	       "duplicates among %d funcs: %s", n, err);
	drop = calloc((size_t)n, 1);
	drop[10] = drop[3000] = drop[0] = true;
	ir_func_compact(m, drop);
	EXPECT(m->nfn == n - 3 && !strcmp(m->fn[0]->name, "f1") && !strcmp(m->fn[9]->name, "f11"),
	       "compact keeps order: %d funcs, %s", m->nfn, m->fn[0]->name);
	EXPECT(ir_verify(m, err, sizeof err) == 0, "compacted module verifies: %s", err);
	free(drop);
	ir_module_free(m);
}

/* Rewriting: insert, replace uses, delete, as passes do. */
static void
test_rewrite(void)
{
	const char *src = "func @f {\n"
	                  "  %x = param in : bf16[M,16]\n"
	                  "  %y = cast %x : f32[M,16]\n"
	                  "  ret %y\n"
	                  "}\n";
	char err[512];
	Module *m = ir_parse(src, "w.ir", err, sizeof err);
	Func *f = m->fn[0];
	int x = ir_find_value(f, "x"), y = ir_find_value(f, "y");
	int t = ir_value(f, "x.t", ir_tensor(PRECC_BF16, 16, DIM_M));

	ir_insert(f, 1, OP_transpose, t, &x, 1);
	EXPECT(f->val[y].def == 2 && f->val[t].def == 1, "insert keeps defs");
	EXPECT(ir_use_count(f, x) == 2, "uses of %%x: %d", ir_use_count(f, x));
	ir_delete(f, 2);                       /* the cast */
	ir_replace_uses(f, y, t);
	EXPECT(f->val[y].def == -1 && ir_use_count(f, y) == 0, "delete and replace");
	char *s = ir_module_to_string(m);
	EXPECT(!strcmp(s, "func @f {\n  %x = param in : bf16[M,16]\n  %x.t = transpose %x : "
	                  "bf16[16,M]\n  ret %x.t\n}\n"), "rewritten module:\n%s", s);
	EXPECT(ir_verify(m, err, sizeof err) == 0, "rewritten module verifies: %s", err);
	free(s);
	ir_module_free(m);
}

/* ---- construction ------------------------------------------------------- */

static void
test_build(void)
{
	Module *m = ir_module_new();
	Func *f = ir_func_new(m, "t.fprop");
	char err[512];
	int x, a, s, q, args[2];

	ir_comment(&f->comment, "built by hand");
	x = ir_def(f, "x", ir_tensor(PRECC_BF16, DIM_M, 4096), OP_param, NULL, 0);
	f->ins[f->nins - 1].param = PARAM_IN;
	a = ir_def(f, "x.amax", ir_scale_of(PRECC_FP32, &f->val[x].type, 1, 128), OP_amax, &x, 1);
	s = ir_def(f, "x.scale", f->val[a].type, OP_scale, &a, 1);
	f->ins[f->nins - 1].fmt = PRECC_E4M3;
	f->ins[f->nins - 1].pow2 = true;
	args[0] = x, args[1] = s;
	q = ir_def(f, "x.q", ir_tensor(PRECC_E4M3, DIM_M, 4096), OP_quantize, args, 2);
	f->ins[f->nins - 1].sat = true;
	ir_emit(f, OP_ret, -1, &q, 1);
	char *t = ir_module_to_string(m);
	EXPECT(!strcmp(t, "# built by hand\n"
	                  "func @t.fprop {\n"
	                  "  %x = param in : bf16[M,4096]\n"
	                  "  %x.amax = amax %x : f32[M,32]{1x128}\n"
	                  "  %x.scale = scale %x.amax fmt=e4m3 pow2 : f32[M,32]{1x128}\n"
	                  "  %x.q = quantize %x, %x.scale sat : e4m3[M,4096]\n"
	                  "  ret %x.q\n"
	                  "}\n"), "built module prints as:\n%s", t);
	EXPECT(ir_verify(m, err, sizeof err) == 0, "built module does not verify: %s", err);
	EXPECT(ir_scaled_dim(DIM_M, 128) == -128 && ir_scaled_dim(-128, 2) == -256
	       && ir_scaled_dim(100, 32) == 4 && ir_scaled_dim(7, 0) == 1, "ir_scaled_dim");
	EXPECT(ir_fmt_by_name("e4m3") == PRECC_E4M3 && ir_fmt_by_name("fp8") == -1, "fmt names");
	free(t);
	ir_module_free(m);
}

int
main(void)
{
	test_roundtrip();
	test_parse_errors();
	test_verify_errors();
	test_prefixes();
	test_build();
	test_built_errors();
	test_names();
	test_rewrite();
	printf("%d/%d IR checks passed\n", checks - fails, checks);
	return fails != 0;
}
