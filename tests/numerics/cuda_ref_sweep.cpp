// cuda_ref_sweep.cpp — precc's numerics against NVIDIA's own host code.
//
// A host-only test helper (never part of the product): compiled with g++
// against the CUDA toolkit headers cuda_fp8.h, cuda_fp16.h, cuda_bf16.h,
// cuda_fp6.h and cuda_fp4.h, it compares precc_encode (every rounding mode
// and saturation variant the headers offer), precc_encode_default and the
// fp8 fast paths with the headers' __host__ conversions over fp32 bit
// patterns, and every code's decode with the headers' decoders.
//
//   cuda_ref_sweep                 default: a stride through the 2^32
//                                  patterns plus every pattern next to a
//                                  rounding boundary (ctest runs this)
//   cuda_ref_sweep --full          all 2^32 patterns (`make sweep`)
//   cuda_ref_sweep --stride N      every N-th pattern
//   cuda_ref_sweep --format NAME   only the checks of one format (repeatable)
//   cuda_ref_sweep --threads N     worker threads (default: all cores)
//
// Exit 0 when everything matches, 1 on any mismatch (the first few are
// printed), 77 (ctest SKIP_RETURN_CODE) when built without the headers.
#if !PRECC_HAVE_CUDA_HEADERS
#include <cstdio>
int main()
{
	std::printf("SKIP: the CUDA toolkit headers (cuda_fp8.h, cuda_fp16.h, cuda_bf16.h, "
	            "cuda_fp6.h, cuda_fp4.h) were not found at configure time\n");
	return 77;
}
#else
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_fp6.h>
#include <cuda_fp4.h>

#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "precc/numerics.h"

namespace {

float u2f(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
uint32_t f2u(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

// One check: a precc result and NVIDIA's for the same fp32 input.
struct Check {
	const char *name;
	precc_format fmt;
	uint32_t (*precc)(float);
	uint32_t (*nvidia)(float);
	std::atomic<uint64_t> mismatches{0};
};

uint32_t pe(precc_format f, float x, precc_round r, bool sat)
{
	return precc_encode(f, x, r, sat, 0);
}

uint32_t half_bits(__half h) { return static_cast<__half_raw>(h).x; }
uint32_t bf16_bits(__nv_bfloat16 h) { return static_cast<__nv_bfloat16_raw>(h).x; }

uint8_t fast_e4m3(float x) { uint8_t c; precc_encode_e4m3_rne_sat(&x, &c, 1); return c; }
uint8_t fast_e5m2(float x) { uint8_t c; precc_encode_e5m2_rne_sat(&x, &c, 1); return c; }

#define P(F, R, S) [](float x) -> uint32_t { return pe(F, x, R, S); }
#define N(EXPR) [](float x) -> uint32_t { return (uint32_t)(EXPR); }

Check checks[] = {
	// fp8: cvt.rn.satfinite (the default) and the header's __NV_NOSAT.
	{"e4m3 rn satfinite", PRECC_E4M3, P(PRECC_E4M3, PRECC_RNE, true),
	 N(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3))},
	{"e4m3 rn nosat", PRECC_E4M3, P(PRECC_E4M3, PRECC_RNE, false),
	 N(__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3))},
	{"e4m3 default", PRECC_E4M3, [](float x) { return precc_encode_default(PRECC_E4M3, x); },
	 N(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3))},
	{"e4m3 fast path", PRECC_E4M3, N(fast_e4m3(x)),
	 N(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3))},
	{"e5m2 rn satfinite", PRECC_E5M2, P(PRECC_E5M2, PRECC_RNE, true),
	 N(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2))},
	{"e5m2 rn nosat", PRECC_E5M2, P(PRECC_E5M2, PRECC_RNE, false),
	 N(__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2))},
	{"e5m2 default", PRECC_E5M2, [](float x) { return precc_encode_default(PRECC_E5M2, x); },
	 N(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2))},
	{"e5m2 fast path", PRECC_E5M2, N(fast_e5m2(x)),
	 N(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2))},
	// fp16 / bf16: cvt.rn (the default), .rz, .rp; no saturation.
	{"fp16 rn", PRECC_FP16, P(PRECC_FP16, PRECC_RNE, false), N(half_bits(__float2half_rn(x)))},
	{"fp16 default", PRECC_FP16, [](float x) { return precc_encode_default(PRECC_FP16, x); },
	 N(half_bits(__float2half_rn(x)))},
	{"fp16 rz", PRECC_FP16, P(PRECC_FP16, PRECC_RZ, false), N(half_bits(__float2half_rz(x)))},
	{"fp16 ru", PRECC_FP16, P(PRECC_FP16, PRECC_RU, false), N(half_bits(__float2half_ru(x)))},
	{"bf16 rn", PRECC_BF16, P(PRECC_BF16, PRECC_RNE, false), N(bf16_bits(__float2bfloat16_rn(x)))},
	{"bf16 default", PRECC_BF16, [](float x) { return precc_encode_default(PRECC_BF16, x); },
	 N(bf16_bits(__float2bfloat16_rn(x)))},
	{"bf16 rz", PRECC_BF16, P(PRECC_BF16, PRECC_RZ, false), N(bf16_bits(__float2bfloat16_rz(x)))},
	{"bf16 ru", PRECC_BF16, P(PRECC_BF16, PRECC_RU, false), N(bf16_bits(__float2bfloat16_ru(x)))},
	// fp6 / fp4: always satfinite in the headers; rn (default) and rz.
	// precc's saturate=false must agree too (the formats cannot overflow).
	{"e3m2 rn satfinite", PRECC_E3M2, P(PRECC_E3M2, PRECC_RNE, true),
	 N(__nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest))},
	{"e3m2 rn (no-saturate)", PRECC_E3M2, P(PRECC_E3M2, PRECC_RNE, false),
	 N(__nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest))},
	{"e3m2 default", PRECC_E3M2, [](float x) { return precc_encode_default(PRECC_E3M2, x); },
	 N(__nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest))},
	{"e3m2 rz satfinite", PRECC_E3M2, P(PRECC_E3M2, PRECC_RZ, true),
	 N(__nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundZero))},
	{"e2m3 rn satfinite", PRECC_E2M3, P(PRECC_E2M3, PRECC_RNE, true),
	 N(__nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest))},
	{"e2m3 rn (no-saturate)", PRECC_E2M3, P(PRECC_E2M3, PRECC_RNE, false),
	 N(__nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest))},
	{"e2m3 default", PRECC_E2M3, [](float x) { return precc_encode_default(PRECC_E2M3, x); },
	 N(__nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest))},
	{"e2m3 rz satfinite", PRECC_E2M3, P(PRECC_E2M3, PRECC_RZ, true),
	 N(__nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundZero))},
	{"e2m1 rn satfinite", PRECC_E2M1, P(PRECC_E2M1, PRECC_RNE, true),
	 N(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest))},
	{"e2m1 rn (no-saturate)", PRECC_E2M1, P(PRECC_E2M1, PRECC_RNE, false),
	 N(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest))},
	{"e2m1 default", PRECC_E2M1, [](float x) { return precc_encode_default(PRECC_E2M1, x); },
	 N(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest))},
	{"e2m1 rz satfinite", PRECC_E2M1, P(PRECC_E2M1, PRECC_RZ, true),
	 N(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundZero))},
	// e8m0: cvt.rz / cvt.rp, with and without .satfinite; rp.satfinite is
	// the default (the __nv_fp8_e8m0 constructor).
	{"e8m0 rz satfinite", PRECC_E8M0, P(PRECC_E8M0, PRECC_RZ, true),
	 N(__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero))},
	{"e8m0 rz nosat", PRECC_E8M0, P(PRECC_E8M0, PRECC_RZ, false),
	 N(__nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero))},
	{"e8m0 rp satfinite", PRECC_E8M0, P(PRECC_E8M0, PRECC_RU, true),
	 N(__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf))},
	{"e8m0 rp nosat", PRECC_E8M0, P(PRECC_E8M0, PRECC_RU, false),
	 N(__nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf))},
	{"e8m0 default", PRECC_E8M0, [](float x) { return precc_encode_default(PRECC_E8M0, x); },
	 N(static_cast<__nv_fp8_storage_t>(__nv_fp8_e8m0(x).__x))},
};
const int nchecks = sizeof checks / sizeof checks[0];

std::vector<bool> enabled(nchecks, true);
std::mutex report_lock;
int reported = 0;

void check_one(uint32_t u)
{
	float x = u2f(u);
	for (int i = 0; i < nchecks; i++) {
		if (!enabled[i])
			continue;
		uint32_t got = checks[i].precc(x), want = checks[i].nvidia(x);
		if (got != want) {
			checks[i].mismatches++;
			std::lock_guard<std::mutex> g(report_lock);
			if (reported++ < 20)
				std::printf("MISMATCH %s: x = %a (0x%08" PRIx32 "): precc 0x%" PRIx32
				            ", nvidia 0x%" PRIx32 "\n", checks[i].name, x, u, got, want);
		}
	}
}

// Bit patterns next to rounding boundaries: every top-16-bit pattern with
// low halves that sit on, just below and just above the ties of bf16
// (bit 15), fp16/tf32 (bit 12) and every narrower format (exactly on or
// off the top half).
const uint32_t low_halves[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x2000,
                               0x3000, 0x7fff, 0x8000, 0x8001, 0xefff, 0xffff};

// Every code of every format of <= 16 bits decodes to the header's value.
int check_decodes()
{
	int bad = 0;
	auto same = [](float a, float b) {
		return (std::isnan(a) && std::isnan(b)) || f2u(a) == f2u(b);
	};
	auto half2f = [](unsigned short h) { __half_raw r; r.x = h; return __half2float(__half(r)); };
	auto cmp = [&](const char *what, precc_format f, uint32_t c, float want) {
		float got = precc_decode(f, c);
		if (!same(got, want) && bad++ < 20)
			std::printf("MISMATCH decode %s 0x%" PRIx32 ": precc %a, nvidia %a\n", what, c, got, want);
	};
	for (uint32_t c = 0; c < 0x10000; c++) {
		__nv_bfloat16_raw b; b.x = (unsigned short)c;
		cmp("fp16", PRECC_FP16, c, half2f((unsigned short)c));
		cmp("bf16", PRECC_BF16, c, __bfloat162float(__nv_bfloat16(b)));
	}
	for (uint32_t c = 0; c < 0x100; c++) {
		cmp("e4m3", PRECC_E4M3, c, half2f(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3).x));
		cmp("e5m2", PRECC_E5M2, c, half2f(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E5M2).x));
		__nv_bfloat16_raw b = __nv_cvt_e8m0_to_bf16raw((__nv_fp8_storage_t)c);
		cmp("e8m0", PRECC_E8M0, c, __bfloat162float(__nv_bfloat16(b)));
	}
	for (uint32_t c = 0; c < 0x40; c++) {
		cmp("e3m2", PRECC_E3M2, c, half2f(__nv_cvt_fp6_to_halfraw((__nv_fp6_storage_t)c, __NV_E3M2).x));
		cmp("e2m3", PRECC_E2M3, c, half2f(__nv_cvt_fp6_to_halfraw((__nv_fp6_storage_t)c, __NV_E2M3).x));
	}
	for (uint32_t c = 0; c < 0x10; c++)
		cmp("e2m1", PRECC_E2M1, c, half2f(__nv_cvt_fp4_to_halfraw((__nv_fp4_storage_t)c, __NV_E2M1).x));
	return bad;
}

int usage()
{
	std::fprintf(stderr, "usage: cuda_ref_sweep [--full | --stride N] [--format NAME]... [--threads N]\n");
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
#ifdef PRECC_SWEEP_DEFAULT_STRIDE
	uint64_t stride = PRECC_SWEEP_DEFAULT_STRIDE;
#else
	uint64_t stride = 1021;
#endif
	bool boundaries = true;
	unsigned nthreads = std::thread::hardware_concurrency();
	std::vector<std::string> only;

	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (a == "--full") {
			stride = 1;
			boundaries = false;
		} else if (a == "--stride" && i + 1 < argc) {
			stride = std::strtoull(argv[++i], nullptr, 0);
			if (!stride)
				return usage();
		} else if (a == "--format" && i + 1 < argc) {
			if (precc_format_by_name(argv[i + 1]) < 0) {
				std::fprintf(stderr, "cuda_ref_sweep: unknown format '%s'\n", argv[i + 1]);
				return 2;
			}
			only.push_back(argv[++i]);
		} else if (a == "--threads" && i + 1 < argc) {
			nthreads = (unsigned)std::strtoul(argv[++i], nullptr, 0);
		} else if (a == "--help") {
			usage();
			return 0;
		} else {
			return usage();
		}
	}
	if (nthreads < 1)
		nthreads = 1;
	if (!only.empty())
		for (int i = 0; i < nchecks; i++) {
			bool on = false;
			for (auto &n : only)
				on |= precc_format_by_name(n.c_str()) == (int)checks[i].fmt;
			enabled[i] = on;
		}

	int decode_bad = check_decodes(), bad = decode_bad;

	// Strided patterns: thread t takes indices t, t + T, ... of the
	// sequence 0, stride, 2*stride, ... < 2^32.
	const uint64_t npat = ((uint64_t)1 << 32) / stride + (((uint64_t)1 << 32) % stride != 0);
	std::vector<std::thread> pool;
	for (unsigned t = 0; t < nthreads; t++)
		pool.emplace_back([=] {
			for (uint64_t k = t; k < npat; k += nthreads)
				check_one((uint32_t)(k * stride));
			if (boundaries)
				for (uint32_t hi = t; hi < 0x10000; hi += nthreads)
					for (uint32_t lo : low_halves)
						check_one(hi << 16 | lo);
		});
	for (auto &th : pool)
		th.join();

	uint64_t total = npat + (boundaries ? 0x10000ull * (sizeof low_halves / sizeof low_halves[0]) : 0);
	std::printf("cuda_ref_sweep: %" PRIu64 " fp32 patterns (stride %" PRIu64 "%s), %u threads\n",
	            total, stride, boundaries ? " + rounding boundaries" : "", nthreads);
	for (int i = 0; i < nchecks; i++)
		if (enabled[i]) {
			uint64_t m = checks[i].mismatches.load();
			std::printf("  %-24s %s", checks[i].name, m ? "FAIL" : "ok");
			if (m)
				std::printf(" (%" PRIu64 " mismatches)", m);
			std::printf("\n");
			bad += m != 0;
		}
	std::printf("  %-24s %s\n", "decode, every code", decode_bad ? "FAIL" : "ok");
	return bad ? 1 : 0;
}
#endif
