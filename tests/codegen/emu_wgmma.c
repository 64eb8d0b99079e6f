/*
 * emu_wgmma.c — the emulator's host model of the sm_90a warpgroup MMA
 * (wgmma.mma_async, wgmma.fence / commit_group / wait_group) and
 * setmaxnreg, the host ABI of TEAM.md / docs/codegen.md.
 *
 * The 128 threads of a warpgroup (warps 4g..4g+3) meet at wg_bar (emu.c);
 * a barrier site per operation finds threads that do not call together.
 * Thread 0 of the group decodes both descriptors and reads A and B from
 * this CTA's shared arrays (memcheck and racecheck per element, like any
 * shared load); then every thread computes its own n/2 accumulators.
 *
 * Descriptors (PTX ISA "Matrix Descriptor Format"; CuTe's GmmaDescriptor,
 * NVIDIA/cutlass@082a375c, include/cute/arch/mma_sm90_desc.hpp): start
 * address >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, base
 * offset 49-51, layout type 62-63 (0 interleave, 1 128B, 2 64B, 3 32B). In
 * host mode the start field is (host pointer >> 4) & 0x3fff, i.e. the low
 * 18 bits of the host address, as CuTe truncates the 32-bit shared
 * address (make_gmma_desc: start_address_ = uint16_t(addr >> 4)); this
 * CTA's shared memory (emu.c: 144 KiB, 1024-aligned) holds exactly one
 * address with those bits, and the swizzle acts on the same address bits
 * as on a GPU.
 *
 * Layouts, in units of 16 bytes (uint128_t), from the comments of
 * make_gmma_desc in include/cute/atom/mma_traits_sm90_gmma.hpp at the
 * same commit (W = 1, 2, 4, 8 for interleave, 32B, 64B, 128B):
 *   K-major  INTERLEAVE: ((8,m),2):((1,SBO),LBO)   swizzled: ((8,m),2):((W,SBO),1)
 *   MN-major INTERLEAVE: ((1,n),(8,k)):((X,SBO),(1,LBO))
 *            swizzled:   ((W,n),(8,k)):((1,LBO),(W,SBO))
 * then Swizzle<B,4,3> (B = log2 W) on the byte address: bits 4..4+B ^=
 * bits 7..7+B. Only base offset 0 is modeled; CuTe also sets it to 0 and
 * its sanity check asserts start bits 7-9 are 0 (make_gmma_desc, "#if 0
 * DEBUG and SANITY"), which this model requires for each swizzle's pattern
 * (1024, 512, 256 bytes).
 *
 * Arithmetic: as precc_emu_mma (emu.c), each accumulator is one fp32
 * multiply and one fp32 add per term in ascending k, starting from D
 * (scale_d 1) or +0 (scale_d 0). The hardware's wgmma may add products in
 * another order or with wider intermediates (NVIDIA does not document
 * it); the interpreter comparison needs this model and precc_emu_mma to
 * agree, so they do.
 *
 * Async: the product is computed at the call. What is checked: a wgmma
 * needs a wgmma.fence since the group's last wait_group (or kernel start);
 * every byte it reads that a thread stored (not TMA) needs a
 * fence.proxy.async of that thread after the store;
 * a thread must not leave the kernel with wgmmas uncommitted or groups not
 * waited on. Reads of the accumulators between the wgmma and its wait are
 * not seen (they are registers).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "emu.h"
#include "emu_int.h"
#include "precc/numerics.h"

enum { OP_FENCE = 1001, OP_COMMIT, OP_WAIT, OP_MMA, OP_NREG };

typedef struct Post {
	uint32_t n, fa, fb, trans, scale_d;
	uint64_t da, db;
} Post;

typedef struct WG {
	Post post[128];
	int used, fenced, uncommitted, groups, ok;
	float a[64][32], b[256][32];
} WG;
static WG wg[EMU_NSLOT][8];

void
emu_wgmma_reset(unsigned slot)
{
	for (int g = 0; g < 8; g++)
		wg[slot][g].used = wg[slot][g].fenced = wg[slot][g].uncommitted = wg[slot][g].groups = 0;
}

void
emu_wgmma_leave(void)
{
	WG *w = &wg[my_slot][my_tid / 128 % 8];
	if (my_tid % 128 || !w->used)
		return;
	if (w->uncommitted)
		emu_fail("wgmma: warpgroup %u leaves the kernel with %d wgmma.mma_async not committed "
		         "(no wgmma.commit_group)", my_tid / 128, w->uncommitted);
	else if (w->groups)
		emu_fail("wgmma: warpgroup %u leaves the kernel with %d wgmma groups not waited on "
		         "(no wgmma.wait_group covering them)", my_tid / 128, w->groups);
}

static WG *
meet(int op)
{
	WG *w = &wg[my_slot][my_tid / 128 % 8];
	if (my_tid / 128 >= 8) {
		emu_fail("wgmma: warpgroup %u: the emulator holds 8", my_tid / 128);
		return NULL;
	}
	return bar_wait(&wg_bar[my_slot][my_tid / 128], op) == 0 ? w : NULL;
}

void
precc_emu_wgmma_fence(void)
{
	WG *w = meet(OP_FENCE);
	if (w && my_tid % 128 == 0)
		w->fenced = 1, w->used = 1;
	if (w)
		bar_wait(&wg_bar[my_slot][my_tid / 128], OP_FENCE);
}

void
precc_emu_wgmma_commit(void)
{
	WG *w = meet(OP_COMMIT);
	if (w && my_tid % 128 == 0 && w->uncommitted) {
		w->groups++;
		w->uncommitted = 0;
	}
	if (w)
		bar_wait(&wg_bar[my_slot][my_tid / 128], OP_COMMIT);
}

void
precc_emu_wgmma_wait(uint32_t n)
{
	WG *w = meet(OP_WAIT);
	if (w && my_tid % 128 == 0) {
		w->post[0].n = n;
		if (n > 7)   /* PTX ISA wgmma.wait_group: N is the number of pending groups; ptxas takes 0..7 */
			emu_fail("wgmma: wgmma.wait_group %u: out of range 0..7", n);
		if ((uint32_t)w->groups > n)
			w->groups = (int)n;
		w->fenced = 0;   /* accumulators may be read and written now: next wgmma needs a fence */
	}
	if (w)
		bar_wait(&wg_bar[my_slot][my_tid / 128], OP_WAIT);
}

/* the shared address -> this CTA's host byte; NULL (and a failure) if none.
 * The CTA's array 0 lies in the first 256 KiB of its block (emu.c), so
 * every 18-bit address names one byte there (or past the block's arrays);
 * the arrays' declared sizes then decide (the caller's check). */
static uint8_t *
sh_host(uint32_t sa, const char *what)
{
	uint64_t size;
	uint8_t *base = emu_smem_base(&size);
	uintptr_t h = ((uintptr_t)base & ~(uintptr_t)0x3ffff) | sa;
	if (h < (uintptr_t)base)
		h += 0x40000;
	if (h >= (uintptr_t)base + size) {
		emu_fail("wgmma: %s descriptor start address 0x%x is not in this CTA's shared memory",
		         what, sa);
		return NULL;
	}
	return (uint8_t *)h;
}

static int
is8(uint32_t f)
{
	return f == PRECC_E4M3 || f == PRECC_E5M2;
}

/* Read operand `what` (rows x k elements, row = m or n) into out via desc. */
static int
load_op(const char *what, uint64_t d, int mn_major, uint32_t f, int rows, int k, float *out)
{
	static const int wlog[4] = {0, 3, 2, 1};
	uint32_t start = (uint32_t)(d & 0x3fff) << 4, lbo = (uint32_t)(d >> 16 & 0x3fff) << 4;
	uint32_t sbo = (uint32_t)(d >> 32 & 0x3fff) << 4, boff = (uint32_t)(d >> 49 & 7);
	int sw = (int)(d >> 62), bl = wlog[sw], W = 1 << bl, es = is8(f) ? 1 : 2;

	if (boff) {
		emu_fail("wgmma: %s descriptor base offset %u (only 0 is modeled)", what, boff);
		return -1;
	}
	if (sw && (start >> 7) & (uint32_t)(W - 1)) {
		emu_fail("wgmma: %s descriptor start address 0x%x is misaligned for %dB swizzle: its "
		         "pattern repeats every %d bytes and base offset is 0", what, start, 16 * W,
		         128 * W);
		return -1;
	}
	uint8_t *h0 = sh_host(start, what);
	if (!h0)
		return -1;
	for (int r = 0; r < rows; r++)
		for (int kk = 0; kk < k; kk++) {
			uint64_t off;
			if (!mn_major) {
				uint32_t kb = (uint32_t)(kk * es), c = kb / 16, b = kb % 16;
				off = sw == 0 ? (uint64_t)(r % 8) * 16 + (uint64_t)(r / 8) * sbo + c * lbo + b
				              : (uint64_t)(r % 8) * 16 * W + (uint64_t)(r / 8) * sbo + c * 16 + b;
			} else {
				uint32_t q = (uint32_t)(r * es) / 16, e = (uint32_t)(r * es) % 16;
				off = sw == 0 ? (uint64_t)q * sbo + (uint64_t)(kk % 8) * 16 + (uint64_t)(kk / 8) * lbo + e
				              : (uint64_t)(q % (uint32_t)W) * 16 + (uint64_t)(q / (uint32_t)W) * lbo +
				                    (uint64_t)(kk % 8) * 16 * W + (uint64_t)(kk / 8) * sbo + e;
			}
			uintptr_t u = (uintptr_t)h0 + off;
			if (emu_break != 5)   /* self-test 5: no swizzle */
				u ^= (u >> 7 & (uintptr_t)(W - 1)) << 4;
			unsigned s, id;
			uint64_t so;
			if (!shared_loc(u, &s, &id, &so) || s != my_slot || so + (uint64_t)es > emu_smem_declared(id)) {
				emu_fail("wgmma: %s element (%d,%d) at byte offset %llu from the descriptor start "
				         "is outside this CTA's shared arrays", what, r, kk, (unsigned long long)off);
				return -1;
			}
			const uint8_t *p = precc_emu_check((void *)u, (uint64_t)es, 1, 0);
			/* a thread's st.shared is seen by wgmma (the async proxy)
			 * only after that thread's fence.proxy.async (PTX ISA,
			 * "Memory Consistency Model: Proxies"), as a TMA store's
			 * source (emu_tma.c): the NVFP4 producer's upcast stores */
			unsigned who;
			uint64_t at;
			if (emu_shared_unfenced((void *)u, (uint64_t)es, &who, &at)) {
				emu_fail("racecheck: wgmma reads %s element (%d,%d), shared byte %llu, which thread %u "
				         "stored with no fence.proxy.async after it", what, r, kk, (unsigned long long)at, who);
				return -1;
			}
			uint32_t code = es == 1 ? p[0] : (uint32_t)p[0] | (uint32_t)p[1] << 8;
			out[r * 32 + kk] = precc_decode((precc_format)f, code);
		}
	return 0;
}

void
precc_emu_wgmma(uint32_t n, uint32_t fa, uint32_t fb, uint32_t trans, uint64_t desc_a,
                uint64_t desc_b, float *d, uint32_t scale_d)
{
	unsigned t = my_tid % 128;
	WG *w = &wg[my_slot][my_tid / 128 % 8];
	if (my_tid / 128 >= 8)
		return (void)emu_fail("wgmma: warpgroup %u: the emulator holds 8", my_tid / 128);
	w->post[t] = (Post){n, fa, fb, trans, scale_d, desc_a, desc_b};
	if (bar_wait(&wg_bar[my_slot][my_tid / 128], OP_MMA))
		return;
	if (t == 0) {
		const Post *p = &w->post[0];
		w->ok = 0;
		w->used = 1;
		for (int i = 1; i < 128; i++)
			if (memcmp(&w->post[i], p, sizeof *p)) {
				emu_fail("wgmma: threads 0 and %d of warpgroup %u disagree on the wgmma "
				         "(n %u/%u, formats %u,%u/%u,%u, descriptors 0x%llx,0x%llx/0x%llx,0x%llx)",
				         i, my_tid / 128, p->n, w->post[i].n, p->fa, p->fb, w->post[i].fa,
				         w->post[i].fb, (unsigned long long)p->da, (unsigned long long)p->db,
				         (unsigned long long)w->post[i].da, (unsigned long long)w->post[i].db);
				goto done;
			}
		int f8 = is8(fa) && is8(fb), f16 = fa == fb && (fa == PRECC_BF16 || fa == PRECC_FP16);
		if (!f8 && !f16)
			emu_fail("wgmma: formats %u x %u (e4m3/e5m2 in any mix, or bf16 x bf16, f16 x f16)",
			         fa, fb);
		else if (n < 8 || n > 256 || n % 8)
			emu_fail("wgmma: n %u (8..256, a multiple of 8)", n);
		else if (f8 && trans)
			emu_fail("wgmma: fp8 operands MN-major (trans %u): fp8 wgmma is K-major only", trans);
		else if (trans > 3)
			emu_fail("wgmma: trans %u (bit 0: A MN-major, bit 1: B MN-major)", trans);
		else if (!w->fenced)
			emu_fail("wgmma: wgmma.mma_async without a wgmma.fence since the last "
			         "wgmma.wait_group (or the kernel's start)");
		else if (load_op("A", desc_a, trans & 1, fa, 64, f8 ? 32 : 16, &w->a[0][0]) == 0 &&
		         load_op("B", desc_b, trans >> 1 & 1, fb, (int)n, f8 ? 32 : 16, &w->b[0][0]) == 0) {
			w->ok = 1;
			w->uncommitted++;
		}
	}
done:
	if (bar_wait(&wg_bar[my_slot][my_tid / 128], OP_MMA) || !w->ok)
		return;
	/* D fragment (TEAM.md; PTX ISA "wgmma .m64nNk* D matrix fragment"; CuTe's
	 * CLayout_64xN, mma_traits_sm90_gmma.hpp): register i of lane l of warp wp */
	unsigned wp = t / 32, l = t % 32;
	int k = is8(fa) ? 32 : 16;
	for (uint32_t i = 0; i < n / 2; i++) {
		unsigned row = 16 * wp + l / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
		if (emu_break == 6)   /* self-test 6: the two columns of a pair swapped */
			col ^= 1;
		float acc = scale_d ? d[i] : 0.0f;
		for (int kk = 0; kk < k; kk++) {
			float pr = w->a[row][kk] * w->b[col][kk];
			acc = acc + pr;
		}
		d[i] = acc;
	}
	bar_wait(&wg_bar[my_slot][my_tid / 128], OP_MMA);
}

void
precc_emu_setmaxnreg(uint32_t inc, uint32_t regs)
{
	unsigned t = my_tid % 128;
	WG *w = &wg[my_slot][my_tid / 128 % 8];
	if (my_tid / 128 >= 8)
		return (void)emu_fail("setmaxnreg: warpgroup %u: the emulator holds 8", my_tid / 128);
	w->post[t] = (Post){.n = regs, .fa = inc};
	if (bar_wait(&wg_bar[my_slot][my_tid / 128], OP_NREG))
		return;
	if (t == 0) {
		/* PTX ISA setmaxnreg: imm-reg-count in 24..256, a multiple of 8; .sync.aligned
		 * over the warpgroup */
		if (regs < 24 || regs > 256 || regs % 8)
			emu_fail("setmaxnreg.%s %u: not a multiple of 8 in 24..256", inc ? "inc" : "dec", regs);
		for (int i = 1; i < 128; i++)
			if (w->post[i].n != regs || w->post[i].fa != inc) {
				emu_fail("setmaxnreg: threads 0 and %d of warpgroup %u disagree (%s %u / %s %u)",
				         i, my_tid / 128, inc ? "inc" : "dec", regs,
				         w->post[i].fa ? "inc" : "dec", w->post[i].n);
				break;
			}
	}
	bar_wait(&wg_bar[my_slot][my_tid / 128], OP_NREG);
}
