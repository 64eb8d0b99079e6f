/*
 * test_wgmma — the emulator's wgmma / setmaxnreg host model (emu_wgmma.c)
 * on one CTA of 128 emulated threads (emu_launch), against a plain C
 * matmul in the arithmetic convention of precc_emu_mma (one fp32 multiply
 * and one fp32 add per term, ascending k).
 *
 * Operands are laid out here in CuTe's canonical GMMA layouts
 * (NVIDIA/cutlass@082a375c, include/cute/atom/mma_traits_sm90_gmma.hpp,
 * make_gmma_desc's comments: K-major ((8,m),(T,2)):((1T,SBO),(1,LBO))
 * interleaved, ((8,m),(T,2)):((WT,SBO),(1,T)) swizzled; MN-major
 * ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)) interleaved,
 * ((T,W,m),(8,k)):((1,T,LBO),(WT,SBO)) swizzled; then Swizzle<log2 W,4,3>
 * of cute/swizzle.hpp: addr ^ ((addr & ((W-1) << 7)) >> 3)).
 *
 * The spot check places one element at a byte worked out by hand from
 * that layout (not from emu_wgmma.c) and sees it in the row it belongs to.
 * Self-tests: emu_break 5 (no swizzle) and 6 (D columns of a pair swapped)
 * must make the comparison fail; each checked failure must be reported.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu.h"
#include "emu_int.h"
#include "precc/numerics.h"

uint32_t precc_emu_sreg(uint32_t which);
void precc_emu_barrier(uint32_t site);
void *precc_emu_shared(uint32_t id, uint64_t bytes);

enum { SMEM = 48 * 1024, BOFF = 8192 };

typedef struct Case {
	uint32_t fa, fb, n, sw, trans, scale_d;
	uint32_t lbo_a, sbo_a, lbo_b, sbo_b;
	int mode;   /* 0 normal; 1 no fence; 2 no wait; 3 desc A +128 B (misaligned for 128B);
	             * 4 A start past shared memory; 5 setmaxnreg 100; 6 setmaxnreg differs;
	             * 7 a thread's n differs; 8 wait_group 9 */
	uint8_t img[SMEM];
	float c[128][128], out[128][128];
} Case;

static uint64_t
desc(const uint8_t *p, uint32_t lbo, uint32_t sbo, uint32_t sw)
{
	return ((uintptr_t)p >> 4 & 0x3fff) | (uint64_t)(lbo >> 4 & 0x3fff) << 16 |
	       (uint64_t)(sbo >> 4 & 0x3fff) << 32 | (uint64_t)sw << 62;
}

static void
kern(void **args)
{
	Case *k = args[0];
	uint32_t t = precc_emu_sreg(0);
	uint8_t *sm = precc_emu_shared(0, SMEM);
	if (t == 0)
		memcpy(sm, k->img, SMEM);
	precc_emu_barrier(1);
	if (k->mode == 5)
		precc_emu_setmaxnreg(1, 100);
	if (k->mode == 6)
		precc_emu_setmaxnreg(0, t == 77 ? 240 : 232);
	float d[128];
	memcpy(d, k->c[t], sizeof d);
	if (k->mode != 1)
		precc_emu_wgmma_fence();
	uint8_t *a = sm + (k->mode == 3 ? 128 : 0) + (k->mode == 4 ? SMEM * 3 : 0);
	uint32_t n = k->mode == 7 && t == 100 ? k->n - 8 : k->n;
	precc_emu_wgmma(n, k->fa, k->fb, k->trans, desc(a, k->lbo_a, k->sbo_a, k->sw),
	                desc(sm + BOFF, k->lbo_b, k->sbo_b, k->sw), d, k->scale_d);
	precc_emu_wgmma_commit();
	if (k->mode != 2)
		precc_emu_wgmma_wait(k->mode == 8 ? 9 : 0);
	memcpy(k->out[t], d, sizeof d);
}

static const int Wof[4] = {1, 8, 4, 2};

/* byte offset of element (r, kk) of an operand in the layouts above */
static uint32_t
place(int mn, int es, uint32_t sw, uint32_t lbo, uint32_t sbo, int r, int kk)
{
	uint32_t W = (uint32_t)Wof[sw], o;
	if (!mn) {
		uint32_t kb = (uint32_t)(kk * es);
		o = sw ? (uint32_t)(r % 8) * 16 * W + (uint32_t)(r / 8) * sbo + kb
		       : (uint32_t)(r % 8) * 16 + (uint32_t)(r / 8) * sbo + kb / 16 * lbo + kb % 16;
	} else {
		uint32_t mb = (uint32_t)(r * es);
		o = sw ? mb % (16 * W) + mb / (16 * W) * lbo + (uint32_t)(kk % 8) * 16 * W + (uint32_t)(kk / 8) * sbo
		       : mb / 16 * sbo + mb % 16 + (uint32_t)(kk % 8) * 16 + (uint32_t)(kk / 8) * lbo;
	}
	return o ^ ((o & ((W - 1) << 7)) >> 3);
}

static void
strides(int mn, uint32_t sw, uint32_t *lbo, uint32_t *sbo)
{
	uint32_t W = (uint32_t)Wof[sw];
	if (!mn)
		*lbo = sw ? 16 : 128, *sbo = sw ? 128 * W : 256;
	else
		*lbo = sw ? 256 * W : 128, *sbo = sw ? 128 * W : 256;
}

static uint32_t
rnd(void)
{
	static uint64_t s = 0x9e3779b97f4a7c15u;
	s ^= s << 13, s ^= s >> 7, s ^= s << 17;
	return (uint32_t)(s >> 16);
}

static int
run(Case *k, char *msg, size_t nm)
{
	void *args[1] = {k};
	emu_reset();
	if (emu_launch(kern, args, 128, 1, 1, 0))
		return -1;
	return emu_errors(msg, nm);
}

static float A[64][32], B[256][32];

/* fill a random case; returns mismatches against the reference (-1: emulator errors) */
static int
check(Case *k, uint32_t fa, uint32_t fb, uint32_t n, uint32_t sw, uint32_t trans, uint32_t sd)
{
	int es = fa == PRECC_E4M3 || fa == PRECC_E5M2 ? 1 : 2, K = es == 1 ? 32 : 16;
	char msg[512];
	memset(k, 0, sizeof *k);
	*k = (Case){fa, fb, n, sw, trans, sd, 0, 0, 0, 0, 0, {0}, {{0}}, {{0}}};
	strides(trans & 1, sw, &k->lbo_a, &k->sbo_a);
	strides(trans >> 1 & 1, sw, &k->lbo_b, &k->sbo_b);
	for (int r = 0; r < 64 + (int)n; r++)
		for (int kk = 0; kk < K; kk++) {
			int isb = r >= 64, rr = isb ? r - 64 : r;
			uint32_t f = isb ? fb : fa, code = rnd() & (es == 1 ? 0xff : 0xffff);
			float v = precc_decode((precc_format)f, code);
			if (v != v || v - v != 0) {   /* NaN / inf: use a finite one */
				v = (float)((int)(rnd() % 33) - 16) / 8;
				code = precc_encode((precc_format)f, v, PRECC_RNE, false, 0);
				v = precc_decode((precc_format)f, code);
			}
			uint32_t o = (isb ? BOFF : 0) +
			             place(isb ? trans >> 1 & 1 : trans & 1, es, sw, isb ? k->lbo_b : k->lbo_a,
			                   isb ? k->sbo_b : k->sbo_a, rr, kk);
			k->img[o] = (uint8_t)code;
			if (es == 2)
				k->img[o + 1] = (uint8_t)(code >> 8);
			if (isb)
				B[rr][kk] = v;
			else
				A[rr][kk] = v;
		}
	for (int t = 0; t < 128; t++)
		for (int i = 0; i < 128; i++)
			k->c[t][i] = (float)((int)(rnd() % 201) - 100) / 16;
	int e = run(k, msg, sizeof msg);
	if (e) {
		printf("  emulator: %d errors, first: %s\n", e, msg);
		return -1;
	}
	int bad = 0;
	for (unsigned t = 0; t < 128; t++)
		for (uint32_t i = 0; i < n / 2; i++) {
			unsigned w = t / 32, l = t % 32;
			unsigned row = 16 * w + l / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
			float acc = sd ? k->c[t][i] : 0.0f;
			for (int kk = 0; kk < K; kk++) {
				float p = A[row][kk] * B[col][kk];
				acc = acc + p;
			}
			if (memcmp(&acc, &k->out[t][i], 4))
				bad++;
		}
	return bad;
}

static Case cs;

int
main(void)
{
	static const uint32_t f8[2] = {PRECC_E4M3, PRECC_E5M2}, f16[2] = {PRECC_BF16, PRECC_FP16};
	static const uint32_t ns[3] = {64, 128, 256};
	int fails = 0, cases = 0;
	char msg[512];

	emu_init();
	/* the D fragment order (TEAM.md's formula, used by the reference below and by
	 * emu_wgmma.c) against CuTe's CLayout_64xN (NVIDIA/cutlass@7f5fe3ed,
	 * include/cute/atom/mma_traits_sm90_gmma.hpp:433-434):
	 * ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512)), (thread, value) -> m + 64 n */
	for (int t = 0; t < 128; t++)
		for (int i = 0; i < 128; i++) {
			int cute = 128 * (t % 4) + 1 * (t / 4 % 8) + 16 * (t / 32) + 64 * (i % 2) +
			           8 * (i / 2 % 2) + 512 * (i / 4);
			int w = t / 32, l = t % 32;
			int row = 16 * w + l / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
			if (cute != row + 64 * col) {
				printf("FAIL D order: thread %d value %d: CuTe m + 64n = %d, formula %d\n", t, i,
				       cute, row + 64 * col);
				fails++;
				t = 128;
				break;
			}
		}
	for (uint32_t sw = 0; sw < 4; sw++)
		for (int ni = 0; ni < 3; ni++)
			for (uint32_t sd = 0; sd < 2; sd++) {
				for (int x = 0; x < 4; x++) {
					int r = check(&cs, f8[x / 2], f8[x % 2], ns[ni], sw, 0, sd);
					cases++;
					if (r) {
						printf("FAIL fp8 %u x %u n %u sw %u scale_d %u: %d\n", f8[x / 2], f8[x % 2], ns[ni], sw, sd, r);
						fails++;
					}
				}
				for (int x = 0; x < 2; x++)
					for (uint32_t tr = 0; tr < 4; tr++) {
						int r = check(&cs, f16[x], f16[x], ns[ni], sw, tr, sd);
						cases++;
						if (r) {
							printf("FAIL 16-bit %u n %u sw %u trans %u scale_d %u: %d\n", f16[x], ns[ni], sw, tr, sd, r);
							fails++;
						}
					}
			}
	printf("%d random cases bit-exact against the reference, %d failed\n", cases - fails, fails);

	/* spot check, by hand from CuTe's Layout_K_SW128_Atom<bf16> = Swizzle<3,4,3> o
	 * (8,64):(64,1) tiled along M at SBO = 1024 bytes: A(9, 10) is at byte
	 * 1*128 + 1024 + 10*2 = 1172 = 0b100_1001_0100, bits 7-9 are 001, so bits 4-6
	 * (001) ^= 001: 1172 - 16 = 1156. (A first hand value of 1188, a wrong XOR,
	 * made this check fail, as it must.) */
	check(&cs, PRECC_BF16, PRECC_BF16, 64, 1, 0, 0);
	memset(cs.img, 0, sizeof cs.img);
	cs.img[1156] = 0x80, cs.img[1157] = 0x3f;   /* bf16 1.0 */
	for (int r = 0; r < 64; r++)
		for (int kk = 0; kk < 16; kk++) {
			uint32_t o = BOFF + place(0, 2, 1, cs.lbo_b, cs.sbo_b, r, kk);
			cs.img[o] = 0x80, cs.img[o + 1] = 0x3f;
		}
	if (run(&cs, msg, sizeof msg) || cs.out[4][2] != 1.0f ||
	    cs.out[1 * 4][0] != 0.0f) {
		/* row 9 = 16*0 + l/4 + 8 with l/4 = 1: lane 4, register i with (i/2)%2 = 1 */
		printf("FAIL spot check: A(9,10) not read from byte 1156 (%g %g) %s\n", cs.out[4][2], cs.out[4][0], msg);
		fails++;
	} else
		printf("spot check: A(9,10) of K-major SW128 bf16 read from byte 1156\n");

	/* each check must report */
	static const char *const want[] = {
		NULL, "without a wgmma.fence", "not waited on", "misaligned for 128B swizzle",
		"not in this CTA's shared memory", "not a multiple of 8", "setmaxnreg: threads 0 and 77",
		"disagree on the wgmma", "out of range",
	};
	for (int m = 1; m <= 8; m++) {
		check(&cs, PRECC_E4M3, PRECC_E4M3, 64, 1, 0, 1);
		cs.mode = m;
		int e = run(&cs, msg, sizeof msg);
		if (!e || !strstr(msg, want[m])) {
			printf("FAIL check %d: %d errors, first: %s (want \"%s\")\n", m, e, msg, want[m]);
			fails++;
		} else
			printf("check %d reported: %s\n", m, msg);
	}
	/* self-tests: the comparison must see a wrong model */
	for (int b = 5; b <= 6; b++) {
		emu_break = b;
		int r = check(&cs, PRECC_BF16, PRECC_BF16, 128, 1, b == 5 ? 2 : 0, 1);
		emu_break = 0;
		if (r == 0) {
			printf("FAIL self-test emu_break %d: the comparison did not notice\n", b);
			fails++;
		} else
			printf("self-test emu_break %d: %d mismatches, as it must\n", b, r);
	}
	printf(fails ? "test_wgmma: %d FAILED\n" : "test_wgmma: all passed\n", fails);
	return fails != 0;
}
