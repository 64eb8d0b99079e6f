/*
 * k_gemm_sm90.c — the wgmma GEMM family (sm_90a): the same kernels as
 * k_gemm.c (C[M,N] = epilogue(A[M,K] · B[N,K]ᵀ), gemm_plan reads them),
 * warp-specialized, fed by TMA through an mbarrier ring.
 *
 * A CTA of three warpgroups (384 threads) computes a 128 x 128 tile of C:
 *   warpgroup 0, the producer (setmaxnreg.dec 40): one thread waits for a
 *     free stage (its `empty` barrier), arms the stage's `full` barrier
 *     with the bytes of both tiles (arrive.expect_tx) and issues the TMA
 *     loads: A's 128 rows and B's 128 rows, 128 bytes of K each, 128-byte
 *     swizzled, zero past M, N and K (one box per K-major operand; a
 *     16-bit transpose two MN-major boxes of 64 rows x 64 K, below);
 *   warpgroups 1 and 2, the consumers (setmaxnreg.inc 232): wait for a
 *     full stage, four wgmma.mma_async m64n128 (k32 fp8, k16 16-bit; 32
 *     bytes of K each, the descriptors' start address advanced by 32) over
 *     their 64 rows, commit, wait, and one arrival per warp on the stage's
 *     `empty` barrier (DeepGEMM's count: deepseek-ai/DeepGEMM 0f5f2662
 *     deep_gemm/include/deep_gemm/fp8_gemm.cuh, empty_barrier_arrive and
 *     the barriers' init with kNumMathThreads / 32).
 * STAGES = 4 stages of 32 KiB in dynamic shared memory, the 8 barriers
 * after them. Phases: stage s of K tile kt is in its (kt / STAGES)-th
 * round, parity (kt / STAGES) & 1; the producer waits for the empty
 * barrier's previous round (parity ^ 1, which a fresh barrier reports
 * complete), as CUTLASS's PipelineTmaAsync starts its producer.
 *
 * Promotion (DeepGEMM's structure, fp8_gemm.cuh's math loop): every P
 * K-elements (P a multiple of the stage's K, or below) the wgmmas of the chunk go
 * into a temporary accumulator (scale-d 0 on the chunk's first), then
 * after the wait outer = fma(inner, fl(sa · sb), outer) in fp32
 * registers, one FFMA, as DeepGEMM (sm90_fp8_gemm_1d2d.cuh:333-343), the
 * interpreter and k_gemm.c round it (tensorwise two roundings,
 * tensor_scale's s · p · p); P = 0: one promotion after all of K, and
 * with P > 0 the loop's last, partial chunk is promoted too. P smaller
 * than the stage's K (MX's 32: a divisor, a multiple of the wgmma's K)
 * splits each stage into chunks of P K-elements, P · bytes / 32 wgmmas
 * each (chunks_in_stage), each with its own wait and promotion, in a
 * loop kept rolled; a chunk past K
 * (the last stage's, when K is not a multiple of the stage's K) is not
 * promoted. The epilogue is k_gemm.c's (gemm.h):
 * bias, tensorwise amax, cast, slice, accumulate into main_grad.
 *
 * The epilogue follows the promotion's de-scale; the output amax is each
 * thread's max carried across its tiles, one warp-reduced atomic per CTA
 * at the end. Its way out (issue 28 §3; DeepGEMM's sm90_fp8_gemm_1d2d.cuh,
 * CUTLASS's sm90 TMA epilogue): a 16-bit result that does not accumulate
 * (c_by_tma) goes through a C buffer in shared memory, one region per
 * consumer warpgroup (64 mi rows x bn, 16-bit, in column stripes of the
 * widest TMA swizzle span dividing a row), between the ring and the
 * barriers, so the ring gets the stages that fit beside it. Per tile and
 * warpgroup (c_store_tma): the leader's cp.async.bulk.wait_group.read 0
 * (its previous tile's TMA store has read the buffer), bar.sync 1 + cw,
 * 128; stmatrix x4 per 16 x 16 (the D fragment's bf16x2 pairs are its m8n8
 * fragments, into the swizzled rows: no bank conflicts); fence.proxy.async
 * by every thread; bar.sync 1 + cw, 128; the leader's TMA stores, one per
 * stripe, committed as one bulk group and left in flight under the next
 * tile's mainloop (waited for before the thread leaves). TMA clips at M
 * and the row's end. f32 results keep per-element stores from registers,
 * predicated at M and N: accumulate adds main_grad in the thread
 * (c_by_tma says why not a TMA reduce-add).
 *
 * The D fragment: register i of lane l in warp w of the warpgroup is row
 * 16w + l/4 + 8((i/2)%2), column 8(i/4) + 2(l%4) + i%2 (PTX ISA, "Matrix
 * fragments for wgmma .m64nNk32 / .m64nNk16"), the order of k_gemm.c's
 * stacked m16n8 C fragments with MI = 1, NI = 16.
 *
 * Operands. A param used as is is K-major: its tensor map's rows are the
 * operand's rows, its columns K. A 16-bit operand that is transpose(v)
 * (the bf16 recipes' W in dgrad, dYᵀ and Xᵀ in wgrad) is loaded from v in
 * v's own layout, MN-major: v's rows run along K, so a box of 64 K rows
 * of 64 elements (128 bytes, the swizzle span) lands as CuTe's
 * Layout_MN_SW128_Atom tiled down K, and the tile's 128 rows are two such
 * boxes, MN_BOX_BYTES apart (the descriptor's LBO); wgmma reads it with
 * its transpose bit set (asm90_desc_mn128). fp8 wgmma is K-major only:
 * fp8 transposes are written by the quantize kernels.
 *
 * K may be the launch's M (every wgrad): the K loop's trip count comes
 * from the m param, the tensor map of a K-major operand is M columns
 * wide (its row stride M bytes: the kernel's m_multiple keeps it a
 * multiple of 16), and TMA zero-fills past M as past any edge.
 *
 * The tiles come from a scheduler (gemm90.h's Sched90: how many, and
 * where each lies, a Tile90): this file's is the dense one (tile_at over
 * M x N, all of K); k_gemm_grouped_sm90.c's the grouped GEMM's, whose
 * tiles have an expert's rows or an expert's tokens as the K window (a
 * window that ends inside its last stage has that stage zeroed past it by
 * the producer: zero_tail).
 *
 * What the family takes (gemm_sm90_takes; passes/schedule.c asks through
 * codegen_gemm_wgmma_takes and sends the rest to mma.sync): params or
 * 16-bit transposes of params with static rows a multiple of 8, e2m1 x
 * e2m1 (NVFP4: the producer warpgroup upcasts the codes into bf16
 * stages, upcast_operand; one k16 wgmma per 16-K scale block), K static
 * or M, K-major rows of 16-byte multiples (TMA's global stride), wgmma formats, P = 0, a multiple of the stage's K or a
 * multiple of the wgmma's K that divides the stage's, and no
 * per-block output amax.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gemm90.h"

enum {
	WG = 128,                     /* threads per warpgroup */
	WGMMA_M = 64,                 /* rows of one wgmma */
	KB = 128,                     /* bytes of K per stage row: the swizzle span */
	KSTEP = 32,                   /* bytes of K per wgmma (k32 fp8, k16 16-bit) */
	MN_BOX = 64,                  /* 16-bit elements in a 128-byte MN-major row */
	MN_BOX_BYTES = MN_BOX * KB,   /* one MN-major box: 64 K rows (a 16-bit stage)
	                                 of 128 bytes; the next 64 rows of the tile */
	BOX_MAX = 256,                /* TMA: elements along each side of a box */
	SMEM_MAX = 227 * 1024,        /* sm_90: dynamic + static shared memory a CTA
	                                 may opt into (CUDA C Programming Guide,
	                                 "Technical Specifications per Compute
	                                 Capability": 227 KB for 9.0) */
	SMEM_STATIC = 1024,           /* the static arrays (the amax's warp partials)
	                                 and the dynamic array's 1024-byte alignment
	                                 after them */
	STAGES_MIN = 3, STAGES_MAX = 16,   /* DeepGEMM's bounds (the header) */
	NACC_MAX = 128,               /* f32 accumulators per consumer thread */
	REG_BUDGET = 168,             /* accumulators, promotion's second set and the
	                                 scales live across the K loop (with no
	                                 promotion, per-column B scales count 3/4
	                                 a column: the epilogue's scales, their
	                                 products and the bias): what 232 registers
	                                 hold beside addresses and phases. ptxas 13
	                                 at the 70B shapes (no_spills.sh): 128 x 128
	                                 with 1x128 scales on both sides (162) and
	                                 rowwise 128 x 128 (162) hold without
	                                 spills; rowwise 256 x 96 (172) spills 16
	                                 bytes, 128 x 160 (202) 4 */
	PRODUCER_REGS = 40, CONSUMER_REGS = 232,   /* 128 x 40 + 256 x 232 <= 64 Ki */
	PRODUCER_REGS_K = 56, CONSUMER_REGS_K = 224,   /* a grouped wgrad's: its producer
	                                 holds the expert's K window and the tail
	                                 stage's state too (40 spilled 16 bytes at
	                                 Mixtral's shapes); 128 x 56 + 256 x 224
	                                 = 384 x 168 */
	GROUP_N = 8,                  /* n-blocks per rasterization group (tile_at) */
};

/* The kernel's shape (schedule's tile=BMxBN; 128x128 without one): the
 * CTA's tile of C, its consumers and the ring that fits beside them. */
typedef struct S90 {
	int bm, bn;           /* the CTA's tile of C */
	int ncw;              /* consumer warpgroups: 1 for 64 rows, else 2 */
	int mi;               /* m64 wgmma rows per consumer: bm / 64 / ncw */
	int nacc;             /* f32 accumulators per consumer thread: mi x bn / 2 */
	int threads;          /* the producer's warpgroup and the consumers' */
	int stages;
	int a_bytes, b_bytes, stage_bytes;
	int bar_off;          /* full[stages], empty[stages] after the ring */
	int smem;             /* dynamic shared memory */
	int c_span;           /* the epilogue's C buffer: its swizzle span in bytes
	                         (128, 64, 32), 0 for none (stores from registers) */
	int c_off, c_bytes;   /* the C buffer, between the ring and the barriers */
	int sc_na, sc_nb;     /* block-scaled promotion: the scales a stage's slot
	                         holds, A's (bm, or 1 for a scale uniform over
	                         the tile) and B's (bn or 1); 0: scales from
	                         global memory (tensorwise, MX's chunks, none) */
	int sc_off, sc_bytes; /* the slots, one a stage (sc_bytes each), after
	                         the C buffer */
	int up_nch;           /* e2m1 (NVFP4) with chunks in the stage: the
	                         chunks a stage (its scales in the stage's slot,
	                         up_scales); 0 none */
	int up_b16;           /* and B's scales one a 16-column block (16 x 16
	                         weights), else one a column */
	int tail_off;         /* group=k: the barrier of a stage that a tile's K
	                         window ends inside (producer_tile, zero_tail),
	                         after the ring's; 0 none */
	int cm;               /* CTAs of a cluster along M (tile=BMxBN:2x1): they
	                         share B's tile, each loads 1/cm of it and
	                         multicasts it to all (load_share_mc); 1: none */
} S90;

/* The shape of a bm x bn tile, or an error naming what does not fit (in
 * why): the wgmma's N is bn (a multiple of 8 up to 256), MN-major
 * operands in whole 64-element boxes, the accumulators in the register
 * budget, at least STAGES_MIN stages (4 for tiles under 128 x 192, as
 * DeepGEMM's get_layout_candidates asks: deepseek-ai/DeepGEMM 10747d47
 * csrc/jit_kernels/heuristics/sm90.hpp) in SMEM_MAX after the static
 * arrays; the most stages that fit, up to STAGES_MAX (the same file's
 * get_pipeline_config: kNumMaxStages = 16). */
static int scale_uniform(const Func *f, const GOp *op, int tile);
static int scale_straddles(const Func *f, const GOp *op, int tile);

/* An operand's elements as the stage holds them and wgmma reads them:
 * e2m1 codes (NVFP4) widened to bf16 by the producer warpgroup
 * (upcast_operand), else the operand's own format. */
static precc_format
wfmt(const GOp *op)
{
	return op->up ? PRECC_BF16 : op->fmt;
}

/* Whether an operand has block scales (not tensorwise) */
static int
block_scaled(const Func *f, const G *g)
{
	for (int o = 0; o < 2; o++) {
		const GOp *op = &g->op[o];
		if (op->s >= 0 && (f->val[op->s].type.block[0] || f->val[op->s].type.block[1]))
			return 1;
	}
	return 0;
}

/* Whether a promotion's scales come with the stage (issue 28 §4,
 * DeepGEMM's sm90_fp8_gemm_1d2d.cuh: A's scales by TMA into smem_sfa[s]
 * with the stage, B's through shared memory): block scales (not
 * tensorwise) promoted every P of a whole number of stages. The producer
 * warp writes each stage's scales into the stage's slot before the
 * stage's full barrier completes, so the consumers' K loop reads them
 * from shared memory (no ld.global). MX's chunks inside a stage
 * (P < the stage's K) keep their global loads; e2m1 too when promoted
 * every stage or more (its producer warpgroup does not run
 * producer_scales: the slot would be read unwritten). */
static int
scales_by_stage(const Func *f, const G *g)
{
	long bke = KB / gemm_ebytes(wfmt(&g->op[0]));
	return g->P && g->P >= bke && !g->op[0].up && block_scaled(f, g);
}

/* Whether an e2m1 (NVFP4) GEMM's chunk scales come with the stage: the
 * producer warpgroup, which upcasts the stage's codes, also decodes the
 * stage's A and B block scales once (fl(e4m3 · global), scale_at's) into
 * the stage's slot before its arrival on full, and the consumers read
 * them with ld.shared where they read 12 (wgrad 36) scales from global
 * memory a 16-K chunk (issue 28 §5). P < the stage's K: the chunks of
 * chunks_in_stage. */
static int
up_scales(const Func *f, const G *g)
{
	long bke = KB / gemm_ebytes(wfmt(&g->op[0]));
	return g->op[0].up && g->P && g->P < bke && block_scaled(f, g);
}

/* B's e2m1 scales one a 16-column block: blocks of a multiple of 16 rows
 * (NVFP4's 16 x 16 weights); a tile's columns from col0 (a multiple of
 * bn, of 16) fall 16 to a block */
static int
up_b16(const Func *f, const G *g)
{
	long bb = g->op[1].s >= 0 ? f->val[g->op[1].s].type.block[0] : 0;
	return g->op[1].up && bb >= 16 && bb % 16 == 0;
}

/* The slot of an e2m1 stage (up_scales), 16-byte aligned parts: A's
 * scales row-major, a row's nch chunks together (the producer thread of
 * a row stores them as one vector; the 8 rows of a warp's load lie 16
 * bytes apart: 8 banks); then B's, chunk-major: per chunk the bn / 16
 * blocks (up_b16: every consumer thread reads all of them, broadcast
 * vector loads) padded to 4, or per chunk 4 rows of up_col_row floats,
 * row t4 the columns 8ni + 2t4 + x of lanes with l % 4 = t4 at 2ni + x
 * (each lane's bn / 4 columns contiguous, 16-byte loads). A row is 8
 * words past a multiple of 32 banks: a phase of 8 lanes' 16-byte loads
 * hits 4 bank groups, and a warp of the producer's stores (columns 32w
 * .. 32w + 31: word 8 t4 + 2 ni + x + const) 32 banks. */
static int
up_col_row(const S90 *z)
{
	return (z->bn / 4 + 23) / 32 * 32 + 8;
}

static int
up_a_bytes(const S90 *z)
{
	return (z->bm * z->up_nch * 4 + 15) / 16 * 16;
}

static int
up_b_row(const S90 *z)
{
	return z->up_b16 ? (z->bn / 16 + 3) / 4 * 4 : 4 * up_col_row(z);
}

/* Whether the epilogue goes through shared memory and a TMA store: a
 * 16-bit result (stmatrix moves b16) that does not accumulate, whose rows
 * are static and a 16-byte multiple (TMA's global stride). An f32 result
 * keeps the register path: the accumulate into main_grad reads the old
 * value where it stores, fl(old + y) rounded by the thread (add.rn, as
 * the interpreter). A TMA reduce-add (cp.reduce.async.bulk.tensor .add)
 * would add in the memory system as an atomic, and the ISA's f32 atomic
 * add flushes subnormals (atom.add.f32; the bulk reduce's .noftz is for
 * f16/bf16 only): not bit for bit with the oracle near zero. stmatrix
 * moves 16-bit data, so an f32 C would also need st.shared. */
static int
c_by_tma(const Func *f, const G *g)
{
	precc_format of = g->cast >= 0 ? f->ins[g->cast].type.fmt : PRECC_FP32;
	long ns = g->slice ? g->slice : g->op[1].rows;
	/* a grouped GEMM's tile may not store rows past its expert's end (the
	 * next expert's tile stores them): predicated register stores */
	return gemm_ebytes(of) == 2 && g->acc_old < 0 && ns > 0 && ns * 2 % 16 == 0 && !g->grouped;
}

static int
shape90(const Func *f, const G *g, int bm, int bn, S90 *z, char *why, size_t n)
{
	memset(z, 0, sizeof *z);
	z->cm = 1;
	if ((bm != 64 && bm != 128 && bm != 256) || bn < 16 || bn > 256 || bn % 16) {
		snprintf(why, n, "tile %dx%d: 64, 128 or 256 rows by 16..256 columns in steps of 16", bm, bn);
		return -1;
	}
	for (int o = 0; o < 2; o++)
		if (g->op[o].tr && (o ? bn : bm) % MN_BOX) {
			snprintf(why, n, "tile %dx%d: %s is MN-major, in boxes of %d rows", bm, bn, o ? "B" : "A", MN_BOX);
			return -1;
		}
	if (scale_straddles(f, &g->op[1], bn)) {
		snprintf(why, n, "tile %dx%d: B's scale blocks of %ld rows straddle its columns", bm, bn,
		         f->val[g->op[1].s].type.block[0]);
		return -1;
	}
	z->bm = bm, z->bn = bn;
	z->ncw = bm == 64 ? 1 : 2;
	z->mi = bm / WGMMA_M / z->ncw;
	z->nacc = z->mi * bn / 2;
	z->threads = WG * (1 + z->ncw);
	/* the registers live across the K loop: the accumulators, with a
	 * promotion a second set, and the scales read before the wgmmas */
	int regs = z->nacc * (g->P ? 2 : 1) + (scale_uniform(f, &g->op[0], bm) ? 1 : 2 * z->mi)
	           + (scale_uniform(f, &g->op[1], bn) ? 1 : g->P ? bn / 4 : 3 * bn / 4);
	if (z->nacc > NACC_MAX || regs > REG_BUDGET) {
		snprintf(why, n, "tile %dx%d: %d accumulators%s and the scales a consumer thread: %d, over %d", bm, bn,
		         z->nacc, g->P ? " twice (promotion)" : "", regs, z->nacc > NACC_MAX ? NACC_MAX : REG_BUDGET);
		return -1;
	}
	z->a_bytes = bm * KB, z->b_bytes = bn * KB;
	z->stage_bytes = z->a_bytes + z->b_bytes;
	/* the C buffer: bm x bn 16-bit, in column stripes of the widest
	 * swizzle span that divides a row (DeepGEMM's kSwizzleDMode) */
	if (c_by_tma(f, g)) {
		z->c_span = bn * 2 % 128 == 0 ? 128 : bn * 2 % 64 == 0 ? 64 : 32;
		z->c_bytes = bm * bn * 2;
	}
	if (scales_by_stage(f, g)) {
		z->sc_na = scale_uniform(f, &g->op[0], bm) ? 1 : bm;
		z->sc_nb = scale_uniform(f, &g->op[1], bn) ? 1 : bn;
		z->sc_bytes = (z->sc_na + 3) / 4 * 16 + (z->sc_nb + 3) / 4 * 16;
	}
	if (up_scales(f, g)) {
		z->up_nch = (int)(KB / gemm_ebytes(wfmt(&g->op[0])) / g->P);
		z->up_b16 = up_b16(f, g);
		z->sc_bytes = up_a_bytes(z) + z->up_nch * up_b_row(z) * 4;
	}
	int tail = g->group_k ? 8 : 0;
	z->stages = (SMEM_MAX - SMEM_STATIC - z->c_bytes - tail) / (z->stage_bytes + z->sc_bytes + 2 * 8);
	if (z->stages > STAGES_MAX)
		z->stages = STAGES_MAX;
	if (z->stages < (bm * bn < 128 * 192 ? 4 : STAGES_MIN)) {
		snprintf(why, n, "tile %dx%d: %d stages of %d bytes fit in shared memory", bm, bn, z->stages,
		         z->stage_bytes);
		return -1;
	}
	z->c_off = z->stages * z->stage_bytes;
	z->sc_off = z->c_off + z->c_bytes;
	z->bar_off = z->sc_off + z->stages * z->sc_bytes;
	z->smem = z->bar_off + 2 * z->stages * 8;
	z->tail_off = tail ? z->smem : 0;
	z->smem += tail;
	return 0;
}

/* the tile= of the kernel: BMxBN, 128x128 without one, and its cluster
 * (BMxBN:CMx1, CM CTAs along M; 1 without) */
static int
tile_attr(const Func *f, int *bm, int *bn, int *cm)
{
	const char *t = f->pattr[PA_TILE];
	int cn = 1;
	*bm = *bn = 128;
	*cm = 1;
	if (!t)
		return 0;
	int r = sscanf(t, "%dx%d:%dx%d", bm, bn, cm, &cn);
	return r == 2 || (r == 4 && cn == 1) ? 0 : -1;
}

/* Whether z's kernel may run in clusters of cm CTAs along M (issue 28
 * §1; DeepGEMM's sm90_fp8_gemm_1d2d.cuh with kNumTMAMulticast = 2 on B):
 * 1 or 2 CTAs; the operands by TMA without scales by stage (bf16 and
 * tensorwise fp8, the L2-bound ones: e2m1's producer warpgroup and the
 * blockwise producer warp keep 1x1) and no K window (grouped); an
 * MN-major B in two halves of whole boxes. 0, or -1 and why. */
static int
cluster_check(const G *g, const S90 *z, int cm, char *why, size_t n)
{
	if (cm == 1)
		return 0;
	if (cm != 2) {
		snprintf(why, n, "cluster %dx1: 1x1 or 2x1", cm);
		return -1;
	}
	if (g->op[0].up || z->sc_na || z->tail_off) {
		snprintf(why, n, "cluster 2x1: not with %s", g->op[0].up ? "e2m1 operands (upcast by the producer warpgroup)"
		                                                  : z->sc_na ? "scales by stage" : "a K window (grouped)");
		return -1;
	}
	if (g->op[1].tr && z->bn % (2 * MN_BOX)) {
		snprintf(why, n, "cluster 2x1: B is MN-major and its %d rows are not two halves of %d-row boxes",
		         z->bn, MN_BOX);
		return -1;
	}
	return 0;
}

/* gemm_plan on f as the mma.sync family reads it (its tiles are 64x64 or
 * 128x128; the wgmma family's tile= is its own) */
static int
plan90(Kern *k, G *g)
{
	Func copy = *k->f;
	const Func *f = k->f;
	copy.pattr[PA_TILE] = (char *)"128x128";
	k->f = &copy;
	int r = gemm_plan(k, g);
	k->f = f;
	return r;
}

/* Whether the family takes the kernel: 1 yes, 0 no (why says), -1 the
 * plan itself fails (its error in k). */
int
gemm_sm90_takes(Kern *k, G *g, char *why, size_t n)
{
	if (plan90(k, g))
		return -1;
	for (int o = 0; o < 2; o++) {
		const GOp *op = &g->op[o];
		const char *nm = o ? "B" : "A";
		if (op->tr && !op->mnmaj) {
			if (gemm_ebytes(op->fmt) != 2)
				snprintf(why, n, "%s is a transpose of %s (wgmma reads fp8 K-major only)", nm,
				         ir_fmt_name(op->fmt));
			else
				snprintf(why, n, "%s is a transpose with %s rows (MN-major by TMA: static, a "
				         "multiple of 8)", nm, op->rows < 0 ? "dynamic" : "odd");
			return 0;
		}
		if (op->narrow || (op->up && !g->op[!o].up)) {
			snprintf(why, n, "%s %s", nm, op->narrow ? "has rows that are not 16-byte multiples"
			                                      : "is upcast from e2m1 and the other operand is not");
			return 0;
		}
		/* a K-major operand with K = M: rows of M elements, a 16-byte
		 * multiple for TMA by the launch's m_multiple */
		if (!op->tr && !op->up && g->K == DIM_M && k->m_multiple * gemm_ebytes(op->fmt) % 16) {
			snprintf(why, n, "%s has rows of M elements and M a multiple of %ld only (TMA: 16-byte rows)",
			         nm, k->m_multiple);
			return 0;
		}
	}
	if (!asm90_wgmma_ok(wfmt(&g->op[0]), wfmt(&g->op[1]))) {
		snprintf(why, n, "no wgmma for %s x %s", ir_fmt_name(g->op[0].fmt), ir_fmt_name(g->op[1].fmt));
		return 0;
	}
	if (g->K == 0 || (g->K < 0 && g->K != DIM_M)) {
		snprintf(why, n, "K must be static or M");
		return 0;
	}
	long bke = KB / gemm_ebytes(wfmt(&g->op[0])), kstep = KSTEP / gemm_ebytes(wfmt(&g->op[0]));
	if (g->P && (g->P % kstep || (g->P < bke ? bke % g->P : g->P % bke))) {
		snprintf(why, n, "promotion every %ld K-elements: a multiple of the stage's %ld, or of the wgmma's %ld "
		         "dividing it", g->P, bke, kstep);
		return 0;
	}
	if (g->amax_block) {
		snprintf(why, n, "a per-block output amax");
		return 0;
	}
	return 1;
}

int
gemm_sm90_probe(const Func *f, int (*takes)(Kern *, G *, char *, size_t), G *g, char *why, size_t n)
{
	Kern k;
	char err[256];

	memset(&k, 0, sizeof k);
	k.f = f;
	k.err = err;
	k.errsz = sizeof err;
	int r = takes(&k, g, why, n);
	if (r < 0)
		snprintf(why, n, "%s", err);
	return r > 0;
}

int
codegen_gemm_wgmma_takes(const Func *f, char *why, size_t n)
{
	G g;
	return gemm_sm90_probe(f, gemm_sm90_takes, &g, why, n);
}

int
codegen_gemm_wgmma_shape(const Func *f, int bm, int bn, CodegenGemmShape *s, char *why, size_t n)
{
	G g;
	memset(s, 0, sizeof *s);
	return gemm_sm90_probe(f, gemm_sm90_takes, &g, why, n) && gemm_sm90_shape(f, &g, bm, bn, s, why, n);
}

int
codegen_gemm_wgmma_cluster(const Func *f, int bm, int bn, int cm, char *why, size_t n)
{
	G g;
	S90 z;
	return gemm_sm90_probe(f, gemm_sm90_takes, &g, why, n) && !shape90(f, &g, bm, bn, &z, why, n)
	       && !cluster_check(&g, &z, cm, why, n);
}

int
gemm_sm90_shape(const Func *f, const G *g, int bm, int bn, CodegenGemmShape *s, char *why, size_t n)
{
	S90 z;
	if (shape90(f, g, bm, bn, &z, why, n))
		return 0;
	*s = (CodegenGemmShape){z.bm, z.bn, z.ncw, z.stages, z.threads, z.smem, z.nacc * (g->P ? 2 : 1),
	                        z.stage_bytes};
	return 1;
}

/* Fill k from the GEMM: ABI (the tensor maps after the scalar params),
 * shape and launch geometry. */
int
gemm_sm90_classify(Kern *k)
{
	const Func *f = k->f;
	char why[160];
	G g;

	for (int i = 0; i < f->nins; i++) {
		const Ins *in = &f->ins[i];
		if (in->op == OP_param) {
			if (k->nin >= KMAXP)
				return kfail(k, "too many params");
			k->in[k->nin++] = in->res;
		} else if (in->op == OP_ret)
			for (int j = 0; j < in->narg; j++) {
				if (k->nout >= KMAXP)
					return kfail(k, "too many outputs");
				k->out[k->nout++] = in->arg[j];
			}
	}
	int r = gemm_sm90_takes(k, &g, why, sizeof why);
	if (r < 0)
		return -1;
	if (r == 0)
		return kfail(k, "mma=wgmma: the wgmma family does not take this GEMM: %s", why);
	for (int i = 0; i < k->nout; i++)
		if (k->out[i] != g.out && (g.amax < 0 || k->out[i] != f->ins[g.amax].res))
			return kfail(k, "a GEMM kernel returns its result and its amax only (%%%s)",
			             f->val[k->out[i]].name);
	int bm, bn, cm;
	S90 z;
	if (tile_attr(f, &bm, &bn, &cm))
		return kfail(k, "tile=%s: the wgmma GEMM family's tiles are BMxBN (:2x1 a cluster)",
		             f->pattr[PA_TILE]);
	if (shape90(f, &g, bm, bn, &z, why, sizeof why) || cluster_check(&g, &z, cm, why, sizeof why))
		return kfail(k, "%s", why);
	z.cm = cm;
	k->cluster = cm;
	k->shape = CG_GEMM;
	k->wgmma = 1;
	k->persistent = 1;
	k->x = g.out;
	k->threads = z.threads;
	k->tiled = 1;
	k->tile_rows = z.bm;
	k->tile_cols = z.bn;
	k->rows = g.op[0].rows;
	k->cols = g.op[1].rows;
	k->smem = z.smem;
	/* e2m1 operands have none: the producer warpgroup loads them */
	k->ntmap = (g.op[0].up ? 0 : 2) + (z.c_span != 0);
	for (int o = 0; o < 2 && !g.op[0].up; o++) {
		CodegenTmap *t = &k->tmap[o];
		const GOp *op = &g.op[o];
		int p = 0;
		while (k->in[p] != op->v)
			p++;
		t->param = p;
		t->elem_bytes = gemm_ebytes(op->fmt);
		t->swizzle = 128;
		t->mn_major = op->tr;
		if (!op->tr) {
			/* the operand as stored: its rows by K, a box of the tile's
			 * rows by a stage's K */
			t->rows = op->rows < 0 ? -1 : op->rows;
			t->cols = g.K < 0 ? -1 : g.K;
			t->box_rows = o ? z.bn / z.cm : z.bm;   /* B: a CTA's share of a cluster's tile */
			t->box_cols = KB / t->elem_bytes;
		} else {
			/* v = the operand's transpose, [K, rows]: a box of a stage's
			 * K rows by 64 of the operand's rows */
			t->rows = g.K < 0 ? -1 : g.K;
			t->cols = op->rows;
			t->box_rows = KB / t->elem_bytes;
			t->box_cols = MN_BOX;
		}
		if (t->cols < 0 && k->m_multiple * t->elem_bytes % 16)
			return kfail(k, "a tensor map of M columns needs M a multiple of %d", 16 / t->elem_bytes);
	}
	if (z.c_span) {
		/* C [M, N or the slice] as stored, 16-bit; a box of one consumer
		 * warpgroup's rows by one column stripe of the C buffer */
		CodegenTmap *t = &k->tmap[k->ntmap - 1];
		int j = 0;
		while (k->out[j] != g.out)
			j++;
		t->param = k->nin + j;
		t->elem_bytes = 2;
		t->rows = g.op[0].rows < 0 ? -1 : g.op[0].rows;
		t->cols = g.slice ? g.slice : g.op[1].rows;
		t->box_rows = WGMMA_M * z.mi;
		t->box_cols = z.c_span / 2;
		t->swizzle = z.c_span;
		t->mn_major = 0;
	}
	return 0;
}

/* ---- emission ---------------------------------------------------------- */

static LLVMValueRef
slot(E *e, LLVMValueRef arr, int i)
{
	LLVMValueRef ix[2] = {c64(e, 0), c64(e, (uint64_t)i)};
	return LLVMBuildGEP2(e->b, LLVMArrayType2(e->g->f32, NACC_MAX), arr, ix, 2, "");
}

/* The CTA's shared memory: dynamic (extern, 1024-byte aligned for the
 * 128-byte swizzle) on the device, the emulator's array on the host. */
static LLVMValueRef
smem_base(E *e, const S90 *z)
{
	LLVMTypeRef at = LLVMArrayType2(e->g->i8, (uint64_t)z->smem);
	if (e->g->host)
		return shared_array(e, "gemm_smem", 0, at, 1024);
	LLVMValueRef gv = LLVMAddGlobalInAddressSpace(e->g->mod, LLVMArrayType2(e->g->i8, 0), "gemm_smem", 3);
	LLVMSetLinkage(gv, LLVMExternalLinkage);
	LLVMSetAlignment(gv, 1024);
	return gv;
}

/* this thread's rows (m64 block mi, h = 0, 1) and columns (i/4, i%2) of C;
 * accumulator i of block mi is register mi * bn/2 + i */
typedef struct Frag90 {
	LLVMValueRef rowv[2][2], colv[NACC_MAX / 4][2];
	LLVMValueRef rowc[2][2], colc[NACC_MAX / 4][2];   /* clamped in range (i32), for scales:
	                                                     B's rows (bbase + column) */
	LLVMValueRef ka, kb;      /* the K window's first element in A and in B (Tile90) */
} Frag90;

/* the tile p at rows row0, columns col0 (opaque copies, or 0 for a slot) */
static Tile90
tile_moved(const Tile90 *p, LLVMValueRef row0, LLVMValueRef col0)
{
	Tile90 q = *p;
	q.row0 = row0, q.col0 = col0;
	return q;
}

static void
frag90(E *e, const S90 *z, Frag90 *fr, LLVMValueRef tid, const Tile90 *p)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef row0 = p->row0, col0 = p->col0, M = p->mend, N = p->nend;
	fr->ka = p->ka, fr->kb = p->kb;
	LLVMValueRef cw = LLVMBuildSub(b, LLVMBuildUDiv(b, tid, c64(e, WG), ""), c64(e, 1), "");
	LLVMValueRef w = LLVMBuildURem(b, LLVMBuildUDiv(b, tid, c64(e, 32), ""), c64(e, 4), "");
	LLVMValueRef l = LLVMBuildURem(b, tid, c64(e, 32), "");
	LLVMValueRef r = add64(e, add64(e, row0, mul64(e, cw, (uint64_t)(WGMMA_M * z->mi))),
	                       add64(e, mul64(e, w, 16), LLVMBuildUDiv(b, l, c64(e, 4), "")));
	LLVMValueRef c = add64(e, col0, mul64(e, LLVMBuildURem(b, l, c64(e, 4), ""), 2));

	for (int mi = 0; mi < z->mi; mi++)
		for (int h = 0; h < 2; h++) {
			LLVMValueRef v = add64(e, r, c64(e, (uint64_t)(WGMMA_M * mi + 8 * h)));
			fr->rowv[mi][h] = v;
			fr->rowc[mi][h] = LLVMBuildTrunc(b, sel(e, ult(e, v, M), v, c64(e, 0)), e->g->i32, "");
		}
	for (int ni = 0; ni < z->bn / 8; ni++)
		for (int x = 0; x < 2; x++) {
			fr->colv[ni][x] = add64(e, c, c64(e, (uint64_t)(8 * ni + x)));
			fr->colc[ni][x] = LLVMBuildTrunc(b, add64(e, p->bbase, sel(e, ult(e, fr->colv[ni][x], N),
			                                                           fr->colv[ni][x], c64(e, 0))),
			                                 e->g->i32, "");
		}
}

/* The scales of a promotion of the chunk at kstart: A's of this thread's
 * rows, B's of its columns. A scale block that spans whole tiles (W's
 * 128x128 over a tile of 128 or fewer) is one value for the thread: its
 * first row's (in range, or all its rows are past the edge and never
 * stored). */
typedef struct Scales90 {
	LLVMValueRef sa[2][2], sb[NACC_MAX / 4][2];
	LLVMValueRef ts, tp;    /* tensorwise: sa · sb as ts · tp · tp (gemm.h), else NULL */
} Scales90;

/* one scale for the whole tile's rows of the operand */
static int
scale_uniform(const Func *f, const GOp *op, int tile)
{
	long br = op->s >= 0 ? f->val[op->s].type.block[0] : 0;
	return op->s < 0 || br == 0 || br % tile == 0;
}

/* B's scale blocks straddle a tile of bn columns (128-row blocks on a
 * 96-wide tile): each column would load its own scale, 3bn/4 loads and
 * registers per K tile where a tile inside one block loads one (the SASS
 * audit's 611-627 instructions per K tile against 265, bench/RESULTS.md).
 * A tile of several whole blocks (256 wide) would need bn / 128; none
 * fits the registers with promotion, so those straddle too. NVFP4's 16 x
 * 16 weight blocks (e2m1) do not count: promoted every 16 K, B's scales
 * are read per chunk whatever their blocks' rows (scales90). */
static int
scale_straddles(const Func *f, const GOp *op, int tile)
{
	long br = op->s >= 0 ? f->val[op->s].type.block[0] : 0;
	return br > 1 && !op->up && !scale_uniform(f, op, tile);
}

static void
scales90(E *e, const S90 *z, const G *g, const Frag90 *fr, LLVMValueRef kstart, Scales90 *sc)
{
	int ua = scale_uniform(e->k->f, &g->op[0], z->bm), ub = scale_uniform(e->k->f, &g->op[1], z->bn);
	sc->ts = sc->tp = NULL;
	LLVMValueRef ka = add64(e, kstart, fr->ka), kb = add64(e, kstart, fr->kb);
	if (gemm_tensorwise(e, g)) {
		tensor_scale(e, scale_at(e, &g->op[0], fr->rowc[0][0], ka),
		             scale_at(e, &g->op[1], fr->colc[0][0], kb), &sc->ts, &sc->tp);
		return;
	}
	for (int mi = 0; mi < z->mi; mi++)
		for (int h = 0; h < 2; h++)
			sc->sa[mi][h] = ua && (mi || h) ? sc->sa[0][0] : scale_at(e, &g->op[0], fr->rowc[mi][h], ka);
	/* NVFP4's 16 x 16 weight blocks: the thread's four columns of ni = 2p,
	 * 2p + 1 (col0 + 16p ..: col0 a multiple of bn, of 16) lie in one
	 * block, read once (the first: in range if any of them is; the
	 * others' results are past N, never stored) */
	long bb = g->op[1].s >= 0 ? e->k->f->val[g->op[1].s].type.block[0] : 0;
	int b16 = g->op[1].up && bb >= 16 && bb % 16 == 0;
	for (int ni = 0; ni < z->bn / 8; ni++)
		for (int x = 0; x < 2; x++)
			sc->sb[ni][x] = ub && (ni || x) ? sc->sb[0][0]
			                : b16 && (ni % 2 || x) ? sc->sb[ni & ~1][0]
			                : scale_at(e, &g->op[1], fr->colc[ni][x], kb);
}

/* outer = fma(inner, fl(sa · sb), outer) for the chunk with scales sc (one
 * FFMA, DeepGEMM's promotion), tensorwise fl(outer + fl(fl(fl(inner · ts)
 * · tp) · tp)) (k_gemm.c's promote; outer NULL: the only one, from +0,
 * into res) */
static void
promote90(E *e, const S90 *z, const Scales90 *sc, LLVMValueRef inner, LLVMValueRef outer,
          LLVMValueRef res[NACC_MAX])
{
	for (int i = 0; i < z->nacc; i++) {
		int mi = i / (z->bn / 2), j = i % (z->bn / 2);
		LLVMValueRef in = LLVMBuildLoad2(e->b, e->g->f32, slot(e, inner, i), "");
		LLVMValueRef o = outer ? LLVMBuildLoad2(e->b, e->g->f32, slot(e, outer, i), "") : cf(e, 0);
		o = sc->ts ? fadd_rn(e, o, fmul_rn(e, fmul_rn(e, fmul_rn(e, in, sc->ts), sc->tp), sc->tp))
		           : ffma_rn(e, in, fmul_rn(e, sc->sa[mi][(j / 2) % 2], sc->sb[j / 4][j % 2]), o);
		if (outer)
			LLVMBuildStore(e->b, o, slot(e, outer, i));
		else
			res[i] = o;
	}
}

/* Grouped rasterization for L2: tile t -> (m-block, n-block), DeepGEMM's
 * get_swizzled_block_idx (deepseek-ai/DeepGEMM deep_gemm/include/
 * deep_gemm/scheduler.cuh, as carried in microsoft/onnxruntime 043246f6
 * onnxruntime/contrib_ops/cuda/llm/deep_gemm/scheduler.cuh:49-62): groups
 * of GROUP_N n-blocks (N is static but for wgrad), each group all the m-blocks, the
 * n-block fastest within it, so that a wave of CTAs reads GROUP_N blocks
 * of B's rows from L2 while it walks down A; the last group is narrower. */
static void
tile_at(E *e, const S90 *z, LLVMValueRef t, LLVMValueRef nmb, LLVMValueRef nnb, LLVMValueRef *row0,
        LLVMValueRef *col0)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef per_group = mul64(e, nmb, GROUP_N);
	LLVMValueRef first_n = mul64(e, LLVMBuildUDiv(b, t, per_group, ""), GROUP_N);
	LLVMValueRef left = LLVMBuildSub(b, nnb, first_n, "");
	LLVMValueRef nin = sel(e, ult(e, left, c64(e, GROUP_N)), left, c64(e, GROUP_N));
	LLVMValueRef in = LLVMBuildURem(b, t, per_group, "");
	*row0 = mul64(e, LLVMBuildUDiv(b, in, nin, ""), (uint64_t)z->bm);
	*col0 = mul64(e, add64(e, first_n, LLVMBuildURem(b, in, nin, "")), (uint64_t)z->bn);
}

/* The tile loop both roles walk: for (tile = ctaid.x; tile < ntiles; tile
 * += nctaid.x), DeepGEMM's NormalScheduler::get_next_block (next_block_idx
 * = current_iter * gridDim.x + blockIdx.x). Returns the CTA's running
 * tile count ti (from 0) and sets *tile. */
typedef struct TileLoop {
	Loop l;
	LLVMValueRef cta, ncta;
} TileLoop;

static LLVMValueRef
tiles_begin(E *e, TileLoop *tl, LLVMValueRef ntiles, LLVMValueRef *tile, int cm)
{
	LLVMBuilderRef b = e->b;
	/* in clusters of cm along x (consecutive ctaid.x) the cluster takes
	 * the tile: its index and the clusters' count */
	tl->cta = LLVMBuildUDiv(b, LLVMBuildZExt(b, sreg(e, "ctaid.x"), e->g->i64, ""), c64(e, (uint64_t)cm), "");
	tl->ncta = LLVMBuildUDiv(b, LLVMBuildZExt(b, sreg(e, "nctaid.x"), e->g->i64, ""), c64(e, (uint64_t)cm), "");
	/* the CTA's tiles: ceil((ntiles - cta) / ncta), 0 when cta >= ntiles */
	LLVMValueRef mine = LLVMBuildUDiv(b, LLVMBuildSub(b, add64(e, ntiles, LLVMBuildSub(b, tl->ncta, c64(e, 1), "")),
	                                                   tl->cta, ""), tl->ncta, "");
	LLVMValueRef ti = loop_begin(e, &tl->l, c64(e, 0), mine);
	*tile = add64(e, tl->cta, LLVMBuildMul(b, ti, tl->ncta, "tile"));
	return ti;
}

/* The CTA's running K-iteration count at the start of its tile, from
 * the count in *ring (each role adds its tile's nkt after the tile): the
 * ring's stages and parities go on across tiles, as the producer's and
 * the consumers' barriers do, whatever each tile's K window */
static LLVMValueRef
ring_base(E *e, LLVMValueRef ring)
{
	return LLVMBuildZExt(e->b, LLVMBuildLoad2(e->b, e->g->i32, ring, ""), e->g->i64, "");
}

/* *ring = it0 + nkt: the count in 32 bits (a CTA's K iterations), so that
 * the producer holds it in one of its 40 registers */
static void
ring_advance(E *e, LLVMValueRef ring, LLVMValueRef it0, LLVMValueRef nkt)
{
	LLVMBuildStore(e->b, LLVMBuildTrunc(e->b, add64(e, it0, nkt), e->g->i32, ""), ring);
}

/* The ring position of the CTA's it-th K iteration (it counts on across
 * tiles): stage it % stages in round it / stages, parity of the round. */
static void
ring_at(E *e, const S90 *z, LLVMValueRef it, LLVMValueRef *s, LLVMValueRef *ph)
{
	LLVMBuilderRef b = e->b;
	*s = LLVMBuildURem(b, it, c64(e, (uint64_t)z->stages), "");
	*ph = LLVMBuildTrunc(b, LLVMBuildAnd(b, LLVMBuildUDiv(b, it, c64(e, (uint64_t)z->stages), ""), c64(e, 1), ""),
	                     e->g->i32, "");
}

static LLVMValueRef
full_bar(E *e, const S90 *z, LLVMValueRef sm, LLVMValueRef s)
{
	return gep(e, sm, add64(e, c64(e, (uint64_t)z->bar_off), mul64(e, s, 8)));
}

static LLVMValueRef
empty_bar(E *e, const S90 *z, LLVMValueRef sm, LLVMValueRef s)
{
	return gep(e, sm, add64(e, c64(e, (uint64_t)(z->bar_off + 8 * z->stages)), mul64(e, s, 8)));
}

/* One operand's tile of a stage at dst: rows r0.. r0 + rows of the
 * operand, K elements k0.. (i32). K-major: one box, (k0, r0) of the map;
 * MN-major (mn, the map is the operand's transpose): rows / 64 boxes of
 * 64 rows, (r0 + 64j, k0), MN_BOX_BYTES apart. */
static void
load_operand(E *e, LLVMValueRef dst, LLVMValueRef tm, int mn, int rows, LLVMValueRef k0, LLVMValueRef r0,
             LLVMValueRef bar)
{
	Cg *cg = e->g;
	LLVMValueRef r = LLVMBuildTrunc(e->b, r0, cg->i32, "");
	if (!mn) {
		asm90_tma_load_2d(cg, dst, tm, k0, r, bar);
		return;
	}
	for (int j = 0; j < rows / MN_BOX; j++)
		asm90_tma_load_2d(cg, gep(e, dst, c64(e, (uint64_t)(j * MN_BOX_BYTES))), tm,
		                  LLVMBuildAdd(e->b, r, c32(e, (unsigned)(j * MN_BOX)), ""), k0, bar);
}

/* A cluster's shared B (z->cm CTAs along M): this CTA's share, the
 * rank-th 1/cm of the tile's bn rows, multicast into every CTA of the
 * cluster at the same offset and on the barrier at bar's (DeepGEMM's
 * tma_copy with num_tma_multicast, each CTA issuing its share): K-major
 * one box of bn/cm rows (its offset a multiple of the 1024-byte swizzle
 * atom), MN-major its bn/cm/64 boxes. The stage's bytes on each CTA's
 * full barrier stay the whole stage's. */
static unsigned
share_mask(const S90 *z)
{
	return (1u << z->cm) - 1;
}

static void
load_share_mc(E *e, const S90 *z, LLVMValueRef dst, LLVMValueRef tm, int mn, LLVMValueRef k0, LLVMValueRef r0,
              LLVMValueRef bar)
{
	Cg *cg = e->g;
	LLVMBuilderRef b = e->b;
	int rows = z->bn / z->cm;
	LLVMValueRef rank = LLVMBuildZExt(b, LLVMBuildURem(b, sreg(e, "ctaid.x"), c32(e, (unsigned)z->cm), ""),
	                                  cg->i64, "");
	LLVMValueRef r = LLVMBuildTrunc(b, add64(e, r0, mul64(e, rank, (uint64_t)rows)), cg->i32, "");
	if (!mn) {
		asm90_tma_load_2d_mc(cg, gep(e, dst, mul64(e, rank, (uint64_t)rows * KB)), tm, k0, r, bar,
		                     share_mask(z));
		return;
	}
	LLVMValueRef at = gep(e, dst, mul64(e, rank, (uint64_t)(rows / MN_BOX * MN_BOX_BYTES)));
	for (int j = 0; j < rows / MN_BOX; j++)
		asm90_tma_load_2d_mc(cg, gep(e, at, c64(e, (uint64_t)(j * MN_BOX_BYTES))), tm,
		                     LLVMBuildAdd(b, r, c32(e, (unsigned)(j * MN_BOX)), ""), k0, bar, share_mask(z));
}

/* The CTAs whose consumers free a stage: every CTA of the cluster, as
 * each CTA's producer writes its share into all of them (the empty
 * barrier counts their consumer warps) */
static int
stage_owners(const S90 *z)
{
	return z->cm;
}

/* A consumer warp frees stage s (lane 0): its arrival on the stage's
 * empty barrier, in each CTA of the cluster from its own on (DeepGEMM's
 * empty_barrier_arrive: a remote arrival to each CTA of the cluster) */
static void
release_stage(E *e, const S90 *z, LLVMValueRef bar)
{
	if (z->cm == 1) {
		asm90_mbar_arrive(e->g, bar);
		return;
	}
	LLVMBuilderRef b = e->b;
	LLVMValueRef rank = LLVMBuildURem(b, sreg(e, "ctaid.x"), c32(e, (unsigned)z->cm), "");
	for (int r = 0; r < stage_owners(z); r++)
		asm90_mbar_arrive_cluster(e->g, bar, LLVMBuildURem(b, LLVMBuildAdd(b, rank, c32(e, (unsigned)r), ""),
		                                                   c32(e, (unsigned)z->cm), ""));
}

/* Stage s's scale slot: A's sc_na floats, then B's sc_nb, 16-byte
 * aligned each */
static LLVMValueRef
scale_slot(E *e, const S90 *z, LLVMValueRef sm, LLVMValueRef s, int o)
{
	uint64_t off = (uint64_t)z->sc_off + (o ? (uint64_t)(z->sc_na + 3) / 4 * 16 : 0);
	return gep(e, sm, add64(e, c64(e, off), mul64(e, s, (uint64_t)z->sc_bytes)));
}

/* The producer warp's part of a stage with scales (scales_by_stage): lane
 * l stores A's scales of the tile's rows l, l + 32, .. and B's of its
 * columns into the stage's slot, read as scale_at reads them for the
 * chunk at kstart (rows past the edge clamped to 0, as frag90's: their
 * results are never stored) */
static void
producer_scales(E *e, const S90 *z, const G *g, LLVMValueRef sm, LLVMValueRef s, LLVMValueRef lane,
                const Tile90 *p, LLVMValueRef kstart)
{
	/* a rolled loop a lane, from opaque bases: unrolled and hoisted out
	 * of the tile loop, the rows' scale addresses spilled 24 bytes at
	 * 128 x 128 (1x128 x 1x128) */
	for (int o = 0; o < 2; o++) {
		int n = o ? z->sc_nb : z->sc_na;
		LLVMValueRef base = asm_opaque_u64(e->g, o ? p->col0 : p->row0), lim = o ? p->nend : p->mend;
		LLVMValueRef slot = scale_slot(e, z, sm, s, o);
		Loop l;
		LLVMValueRef j = loop_begin(e, &l, c64(e, 0), c64(e, (uint64_t)(n + 31) / 32));
		LLVMValueRef i = add64(e, lane, mul64(e, j, 32));
		LLVMBasicBlockRef in = n % 32 ? begin_if(e, ult(e, i, c64(e, (uint64_t)n))) : NULL;
		LLVMValueRef v = add64(e, base, i);
		LLVMValueRef vc = sel(e, ult(e, v, lim), v, c64(e, 0));
		vc = LLVMBuildTrunc(e->b, o ? add64(e, p->bbase, vc) : vc, e->g->i32, "");
		store_al(e, scale_at(e, &g->op[o], vc, add64(e, kstart, o ? p->kb : p->ka)), gep(e, slot, mul64(e, i, 4)), 4);
		if (in)
			end_if(e, in);
		loop_end(e, &l);
		loop_nounroll(e, &l);
	}
}

/* The K elements [t, bke) of stage st (t in 1 .. bke - 1, i64), past
 * the end of the tile's K window (group=k: an expert's last tokens; TMA
 * loaded the next expert's or the padding's), zeroed by the producer
 * thread after the stage's loads landed: a K-major row holds them at
 * bytes t·eb .. 127, 16-byte chunk c of row r at c ^ (r % 8) (the
 * 128-byte swizzle: one st.shared.u8 a byte), an MN-major box as its K
 * rows t .. 63, 128 bytes each (a K row is whole under the swizzle: 16
 * st.shared.u64) */
static void
zero_tail(E *e, const S90 *z, const G *g, LLVMValueRef st, LLVMValueRef t)
{
	LLVMBuilderRef b = e->b;
	Cg *cg = e->g;
	for (int o = 0; o < 2; o++) {
		const GOp *op = &g->op[o];
		int rows = o ? z->bn : z->bm, eb = gemm_ebytes(op->fmt);
		LLVMValueRef base = gep(e, st, c64(e, o ? (uint64_t)z->a_bytes : 0));
		Loop lr, lk;
		if (op->tr) {
			for (int j = 0; j < rows / MN_BOX; j++) {
				LLVMValueRef k = loop_begin(e, &lk, t, c64(e, (uint64_t)(KB / eb)));
				LLVMValueRef row = gep(e, base, add64(e, c64(e, (uint64_t)(j * MN_BOX_BYTES)), mul64(e, k, KB)));
				for (int c = 0; c < KB / 8; c++)
					store_al(e, LLVMConstInt(cg->i64, 0, 0), gep(e, row, c64(e, (uint64_t)(8 * c))), 8);
				loop_end(e, &lk);
				loop_nounroll(e, &lk);
			}
			continue;
		}
		LLVMValueRef r = loop_begin(e, &lr, c64(e, 0), c64(e, (uint64_t)rows));
		LLVMValueRef x = LLVMBuildAnd(b, r, c64(e, 7), "");
		LLVMValueRef by = loop_begin(e, &lk, mul64(e, t, (uint64_t)eb), c64(e, KB));
		LLVMValueRef ch = LLVMBuildXor(b, LLVMBuildLShr(b, by, c64(e, 4), ""), x, "");
		LLVMValueRef off = add64(e, add64(e, mul64(e, r, KB), mul64(e, ch, 16)), LLVMBuildAnd(b, by, c64(e, 15), ""));
		store_al(e, LLVMConstInt(cg->i8, 0, 0), gep(e, base, off), 1);
		loop_end(e, &lk);
		loop_nounroll(e, &lk);
		loop_end(e, &lr);
		loop_nounroll(e, &lr);
	}
}

/* Stage s's slot of e2m1 scales (up_scales): A's part, B's after it */
static LLVMValueRef
up_slot(E *e, const S90 *z, LLVMValueRef sm, LLVMValueRef s, int o)
{
	uint64_t off = (uint64_t)z->sc_off + (o ? (uint64_t)up_a_bytes(z) : 0);
	return gep(e, sm, add64(e, c64(e, off), mul64(e, s, (uint64_t)z->sc_bytes)));
}

/* The producer warpgroup's part of an e2m1 stage's scales (up_scales):
 * thread tid decodes A's row tid (tid + 128, ..) and B's column or 16-column
 * block tid, the stage's nch chunks each (kel + cP; a chunk past the
 * window as the stage's first, which the consumers do not promote: no
 * read past the tensor), as scale_at decodes them for chunk_scales, into
 * stage s's slot (up_a_bytes' layout). Rows and columns past the tile's
 * edge read row 0's, as frag90's clamp: their results are never stored. */
static void
producer_up_scales(E *e, const S90 *z, const G *g, LLVMValueRef sm, LLVMValueRef s, LLVMValueRef tid,
                   const Tile90 *p, LLVMValueRef kel)
{
	LLVMBuilderRef b = e->b;
	Cg *cg = e->g;
	int nch = z->up_nch, W = up_col_row(z);
	LLVMValueRef kc[KB / KSTEP];
	for (int c = 0; c < nch; c++) {
		kc[c] = add64(e, kel, c64(e, (uint64_t)(c * g->P)));
		kc[c] = sel(e, ult(e, kc[c], p->klen), kc[c], kel);
	}
	for (int o = 0; o < 2; o++) {
		int n = o ? (z->up_b16 ? z->bn / 16 : z->bn) : z->bm;
		LLVMValueRef base = asm_opaque_u64(cg, o ? p->col0 : p->row0), lim = o ? p->nend : p->mend;
		LLVMValueRef slot = up_slot(e, z, sm, s, o);
		Loop l;
		LLVMValueRef j = loop_begin(e, &l, c64(e, 0), c64(e, (uint64_t)(n + WG - 1) / WG));
		LLVMValueRef i = add64(e, tid, mul64(e, j, WG));
		LLVMBasicBlockRef in = n % WG ? begin_if(e, ult(e, i, c64(e, (uint64_t)n))) : NULL;
		LLVMValueRef v = add64(e, base, o && z->up_b16 ? mul64(e, i, 16) : i);
		LLVMValueRef vc = sel(e, ult(e, v, lim), v, c64(e, 0));
		vc = LLVMBuildTrunc(b, o ? add64(e, p->bbase, vc) : vc, cg->i32, "");
		LLVMValueRef val[KB / KSTEP];
		for (int c = 0; c < nch; c++)
			val[c] = scale_at(e, &g->op[o], vc, add64(e, kc[c], o ? p->kb : p->ka));
		if (!o) {
			/* a row's chunks together: one vector store */
			LLVMValueRef w = LLVMGetUndef(LLVMVectorType(cg->f32, (unsigned)nch));
			for (int c = 0; c < nch; c++)
				w = LLVMBuildInsertElement(b, w, val[c], c32(e, (uint64_t)c), "");
			store_al(e, w, gep(e, slot, mul64(e, i, (uint64_t)nch * 4)), (unsigned)(nch * 4));
		} else {
			LLVMValueRef pos = i;
			if (!z->up_b16) {
				LLVMValueRef t4 = LLVMBuildURem(b, LLVMBuildUDiv(b, i, c64(e, 2), ""), c64(e, 4), "");
				pos = add64(e, mul64(e, t4, (uint64_t)W),
				            add64(e, mul64(e, LLVMBuildUDiv(b, i, c64(e, 8), ""), 2),
				                  LLVMBuildURem(b, i, c64(e, 2), "")));
			}
			for (int c = 0; c < nch; c++)
				store_al(e, val[c], gep(e, slot, mul64(e, add64(e, pos, c64(e, (uint64_t)(c * up_b_row(z)))), 4)), 4);
		}
		if (in)
			end_if(e, in);
		loop_end(e, &l);
		loop_nounroll(e, &l);
	}
}

/* NVFP4 (e2m1 x e2m1): wgmma has no e2m1 kind on sm_90a, so the producer
 * warpgroup writes the bf16 stage TMA would have written for a bf16
 * operand: item i of the tile's rows x 4 (thread tid takes tid, tid +
 * 128, ..) is row r = i / 4's 16 codes 16 (i % 4).. of the stage's 64 K,
 * one 8-byte load (ld.global.nc.v2.u32 at (row K + k) / 2: code 2j in the
 * low nibble of byte j; K a multiple of 16, so 8-aligned and a group is
 * all in K or all past it), widened to 16 bf16 (exact; prmt lookups) and
 * stored as the row's 16-byte chunks 2 (i % 4) + h at chunk ^ (r % 8), the
 * 128-byte swizzle of asm90_desc_k128; zeros past the rows and K. Four
 * threads read a row's 32 contiguous bytes, and each 8-thread phase of
 * the 16-byte stores hits 8 bank groups. A rolled loop (40 registers). */
static void
upcast_operand(E *e, const G *g, const GOp *op, LLVMValueRef dst, int rows, LLVMValueRef r0, LLVMValueRef R,
               LLVMValueRef k0, LLVMValueRef tid)
{
	LLVMBuilderRef b = e->b;
	Cg *cg = e->g;
	LLVMTypeRef v2 = LLVMVectorType(cg->i32, 2), v4 = LLVMVectorType(cg->i32, 4);
	LLVMValueRef K = dimv(e, g->K);
	/* item tid + 128j is row rt + 32j (rt = tid / 4), group q = tid % 4:
	 * q, the swizzle's x = row % 8 and the K offset do not change along
	 * the loop, and the addresses step 32 rows an iteration (computed
	 * from i = tid + 128j each time, the row's divisions and 64-bit
	 * products were half the loop's instructions) */
	LLVMValueRef rt = LLVMBuildUDiv(b, tid, c64(e, 4), ""), q = LLVMBuildURem(b, tid, c64(e, 4), "");
	LLVMValueRef x = LLVMBuildURem(b, rt, c64(e, 8), ""), g0 = add64(e, r0, rt);
	LLVMValueRef gk = add64(e, k0, mul64(e, q, 16)), okk = ult(e, gk, K);
	LLVMValueRef src0 = gep(e, e->ptr[op->v], LLVMBuildLShr(b, add64(e, LLVMBuildMul(b, g0, K, ""), gk), c64(e, 1), ""));
	LLVMValueRef dst0 = gep(e, dst, mul64(e, rt, KB));
	Loop l;
	LLVMValueRef j = loop_begin(e, &l, c64(e, 0), c64(e, (uint64_t)(rows + 31) / 32));
	LLVMBasicBlockRef in = rows % 32 ? begin_if(e, ult(e, add64(e, rt, mul64(e, j, 32)), c64(e, (uint64_t)rows))) : NULL;
	LLVMValueRef ok = LLVMBuildAnd(b, ult(e, add64(e, g0, mul64(e, j, 32)), R), okk, "");
	/* 32 rows on: 16 K bytes of codes; a group past the rows or K reads
	 * the tensor's first (in range) and is zeros */
	LLVMValueRef src = LLVMBuildSelect(b, ok, gep(e, src0, LLVMBuildMul(b, mul64(e, j, 16), K, "")),
	                                   e->ptr[op->v], "");
	LLVMValueRef v = sel(e, ok, load_al(e, v2, src, 8), LLVMConstNull(v2));
	LLVMValueRef drow = gep(e, dst0, mul64(e, j, 32 * KB));
	for (int h = 0; h < 2; h++) {
		LLVMValueRef wd = LLVMBuildExtractElement(b, v, c32(e, (uint64_t)h), "");
		LLVMValueRef w = LLVMGetUndef(v4);
		for (int p = 0; p < 2; p++) {
			/* codes 4p.. (the nibbles of hw): the bf16 bytes of their
			 * magnitudes m by two prmt lookups (high bytes 00 3f 3f 3f
			 * 40 40 40 40, low 00 00 80 c0 00 40 80 c0: 0, .5, 1, 1.5, 2,
			 * 3, 4, 6), interleaved into two bf16 pairs by two more, the
			 * signs (bit 3 of each nibble) or'ed in at bits 15 and 31 */
			LLVMValueRef hw = LLVMBuildLShr(b, wd, c32(e, (uint64_t)(16 * p)), "");
			LLVMValueRef m = LLVMBuildAnd(b, hw, c32(e, 0x7777), "");
			LLVMValueRef th = asm_prmt(cg, c32(e, 0x3f3f3f00), c32(e, 0x40404040), m);
			LLVMValueRef tl = asm_prmt(cg, c32(e, 0xc0800000), c32(e, 0xc0804000), m);
			for (int q = 0; q < 2; q++) {
				LLVMValueRef pr = asm_prmt(cg, tl, th, c32(e, q ? 0x7362 : 0x5140));
				LLVMValueRef s0 = LLVMBuildAnd(b, LLVMBuildShl(b, hw, c32(e, (uint64_t)(12 - 8 * q)), ""),
				                               c32(e, 0x8000), "");
				LLVMValueRef s1 = LLVMBuildAnd(b, LLVMBuildShl(b, hw, c32(e, (uint64_t)(24 - 8 * q)), ""),
				                               c32(e, 0x80000000u), "");
				w = LLVMBuildInsertElement(b, w, LLVMBuildOr(b, pr, LLVMBuildOr(b, s0, s1, ""), ""),
				                           c32(e, (uint64_t)(2 * p + q)), "");
			}
		}
		LLVMValueRef ch = LLVMBuildXor(b, add64(e, mul64(e, q, 2), c64(e, (uint64_t)h)), x, "");
		store_al(e, w, gep(e, drow, mul64(e, ch, 16)), 16);
	}
	if (in)
		end_if(e, in);
	loop_end(e, &l);
	loop_nounroll(e, &l);
}

/* The producer's tile p: K tiles it0 + kt of the ring, A's rows at row0
 * and K at ka, B's at bbase + col0 and kb. With scales by stage
 * (z->sc_na) a warp runs it: every lane waits for the free stage, stores
 * its scales into the stage's slot and arrives on full (32 arrivals, lane
 * 0's the arrive.expect_tx, after its own stores, then the TMA loads):
 * mbarrier.arrive releases each lane's st.shared to the consumers' wait.
 * Else one thread. A last stage that the K window ends inside (p->ktail)
 * is loaded on the tail barrier instead, which lane 0 waits for (parity
 * the CTA's count of such stages, *ntail), zeroes the stage past the
 * window (zero_tail), fences its stores for the wgmmas' async proxy and
 * arrives on full without bytes. e2m1 (NVFP4): every thread of the
 * warpgroup upcasts its part of both tiles (upcast_operand) instead. */
static void
producer_tile(E *e, const S90 *z, const G *g, LLVMValueRef sm, LLVMValueRef tma, LLVMValueRef tmb,
              LLVMValueRef it0, const Tile90 *p, long bke, LLVMValueRef lane, LLVMValueRef ntail)
{
	LLVMBuilderRef b = e->b;
	Cg *cg = e->g;
	Loop l;
	LLVMValueRef nkt = p->nkt, row0 = p->row0, col0 = add64(e, p->bbase, p->col0);
	LLVMValueRef kt = loop_begin(e, &l, c64(e, 0), nkt);
	LLVMValueRef s, ph;
	ring_at(e, z, add64(e, it0, kt), &s, &ph);
	LLVMValueRef full = full_bar(e, z, sm, s);
	asm90_mbar_wait(cg, empty_bar(e, z, sm, s), LLVMBuildXor(b, ph, c32(e, 1), ""));
	if (g->op[0].up) {
		/* e2m1: every producer thread upcasts its part of both tiles,
		 * fences its shared stores for wgmma (the async proxy) and
		 * arrives (full counts WG arrivals): the arrival releases the
		 * stores to the consumers' wait */
		LLVMValueRef st = gep(e, sm, mul64(e, s, (uint64_t)z->stage_bytes));
		LLVMValueRef k0 = mul64(e, kt, (uint64_t)bke);
		if (z->up_nch)
			producer_up_scales(e, z, g, sm, s, lane, p, k0);
		upcast_operand(e, g, &g->op[0], st, z->bm, row0, p->mend, add64(e, k0, p->ka), lane);
		upcast_operand(e, g, &g->op[1], gep(e, st, c64(e, (uint64_t)z->a_bytes)), z->bn, col0,
		               add64(e, p->bbase, p->nend), add64(e, k0, p->kb), lane);
		asm90_fence_proxy_async(cg);
		asm90_mbar_arrive(cg, full);
		loop_end(e, &l);
		return;
	}
	LLVMBasicBlockRef l0 = NULL;
	if (z->sc_na) {
		LLVMValueRef kel = mul64(e, kt, (uint64_t)bke);
		LLVMValueRef kstart = mul64(e, LLVMBuildUDiv(b, kel, c64(e, (uint64_t)g->P), ""), (uint64_t)g->P);
		producer_scales(e, z, g, sm, s, lane, p, kstart);
		LLVMValueRef is0 = LLVMBuildICmp(b, LLVMIntEQ, lane, c64(e, 0), "");
		LLVMBasicBlockRef other = begin_if(e, LLVMBuildNot(b, is0, ""));
		asm90_mbar_arrive(cg, full);
		end_if(e, other);
		l0 = begin_if(e, is0);
	}
	/* the last stage of a window that ends inside it: on the tail barrier */
	LLVMValueRef tail = p->ktail ? LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, p->ktail, c64(e, 0), ""),
	                                            LLVMBuildICmp(b, LLVMIntEQ, kt, LLVMBuildSub(b, nkt, c64(e, 1), ""), ""), "")
	                   : NULL;
	LLVMValueRef tbar = tail ? gep(e, sm, c64(e, (uint64_t)z->tail_off)) : NULL;
	LLVMValueRef bar = tail ? sel(e, tail, tbar, full) : full;
	asm90_mbar_arrive_expect_tx(cg, bar, (unsigned)z->stage_bytes);
	LLVMValueRef st = gep(e, sm, mul64(e, s, (uint64_t)z->stage_bytes));
	LLVMValueRef k0 = mul64(e, kt, (uint64_t)bke);
	load_operand(e, st, tma, g->op[0].tr, z->bm, LLVMBuildTrunc(b, add64(e, k0, p->ka), cg->i32, ""), row0, bar);
	LLVMValueRef bdst = gep(e, st, c64(e, (uint64_t)z->a_bytes));
	LLVMValueRef kb = LLVMBuildTrunc(b, add64(e, k0, p->kb), cg->i32, "");
	if (z->cm > 1)
		load_share_mc(e, z, bdst, tmb, g->op[1].tr, kb, col0, bar);
	else
		load_operand(e, bdst, tmb, g->op[1].tr, z->bn, kb, col0, bar);
	if (tail) {
		LLVMBasicBlockRef zt = begin_if(e, tail);
		LLVMValueRef n = LLVMBuildLoad2(b, cg->i32, ntail, "");
		asm90_mbar_wait(cg, tbar, LLVMBuildAnd(b, n, c32(e, 1), ""));
		LLVMBuildStore(b, LLVMBuildAdd(b, n, c32(e, 1), ""), ntail);
		zero_tail(e, z, g, st, p->ktail);
		asm90_fence_proxy_async(cg);
		asm90_mbar_arrive(cg, full);
		end_if(e, zt);
	}
	if (l0)
		end_if(e, l0);
	loop_end(e, &l);
}

/* The descriptor of an operand's 64 rows of A or bn rows of B at p:
 * K-major, or MN-major with the next 64 rows one box on */
static LLVMValueRef
operand_desc(E *e, int mn, LLVMValueRef p)
{
	return mn ? asm90_desc_mn128(e->g, p, MN_BOX_BYTES) : asm90_desc_k128(e->g, p);
}

/* e8m0 code (i8) -> f32, as scale_at decodes it: 2^(c-127); 0 -> 2^-127
 * (subnormal), 0xff -> NaN */
static LLVMValueRef
e8m0_f32(E *e, LLVMValueRef code)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef c = LLVMBuildZExt(b, code, e->g->i32, "");
	LLVMValueRef bits = sel(e, LLVMBuildICmp(b, LLVMIntEQ, c, c32(e, 0), ""), c32(e, 0x00400000),
	                        LLVMBuildShl(b, c, c32(e, 23), ""));
	bits = sel(e, LLVMBuildICmp(b, LLVMIntEQ, c, c32(e, 0xff), ""), c32(e, 0x7fffffff), bits);
	return LLVMBuildBitCast(b, bits, e->g->f32, "");
}

/* A promotion chunk's scales inside the stage (scales90's values). MX's
 * B has a scale per column and per 32 K: in a whole n-block (col0 + bn
 * <= N, the same for the CTA) each of the thread's bn / 4 columns is read
 * unclamped, at the thread's first column's address plus an immediate
 * (one load and the decode a column); the last, partial n-block clamps
 * each column, as scales90 (an unsigned compare, selects and the 64-bit
 * index a column: about 830 SASS instructions a chunk at 128 x 128, against
 * about 470). Rows and columns from opaque bases, anew per chunk (not
 * held across the chunks beside the accumulators). */
static void
chunk_scales(E *e, const S90 *z, const G *g, LLVMValueRef tid, const Tile90 *p, LLVMValueRef kstart,
             Scales90 *sc)
{
	Cg *cg = e->g;
	LLVMBuilderRef b = e->b;
	const GOp *ob = &g->op[1];
	const Type *st = ob->s >= 0 ? &e->k->f->val[ob->s].type : NULL;
	Frag90 fr;
	LLVMValueRef col0 = p->col0, N = p->nend;
	Tile90 q = tile_moved(p, asm_opaque_u64(cg, p->row0), asm_opaque_u64(cg, col0));
	frag90(e, z, &fr, asm_opaque_u64(cg, tid), &q);
	if (!st || st->fmt != PRECC_E8M0 || st->block[0] != 1 || !st->block[1] || gemm_tensorwise(e, g)) {
		scales90(e, z, g, &fr, kstart, sc);
		return;
	}
	LLVMValueRef whole = LLVMBuildICmp(b, LLVMIntULE, add64(e, col0, c64(e, (uint64_t)z->bn)), N, "");
	LLVMBasicBlockRef bw = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "scales_whole");
	LLVMBasicBlockRef be = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "scales_edge");
	LLVMBasicBlockRef bj = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "scales");
	LLVMBuildCondBr(b, whole, bw, be);

	LLVMPositionBuilderAtEnd(b, bw);
	Scales90 w;
	w.ts = w.tp = NULL;
	for (int mi = 0; mi < z->mi; mi++)
		for (int h = 0; h < 2; h++)
			w.sa[mi][h] = scale_at(e, &g->op[0], fr.rowc[mi][h], add64(e, kstart, fr.ka));
	LLVMValueRef kb = LLVMBuildUDiv(b, add64(e, kstart, fr.kb), c64(e, (uint64_t)st->block[1]), "");
	LLVMValueRef nbk = dimv(e, st->dim[1]);
	for (int ni = 0; ni < z->bn / 8; ni++)
		for (int x = 0; x < 2; x++) {
			LLVMValueRef ix = add64(e, LLVMBuildMul(b, add64(e, p->bbase, fr.colv[ni][x]), nbk, ""), kb);
			w.sb[ni][x] = e8m0_f32(e, load_al(e, cg->i8, gep(e, e->ptr[ob->s], ix), 1));
		}
	LLVMBasicBlockRef bw_end = LLVMGetInsertBlock(b);
	LLVMBuildBr(b, bj);

	LLVMPositionBuilderAtEnd(b, be);
	Scales90 c;
	scales90(e, z, g, &fr, kstart, &c);
	LLVMBasicBlockRef be_end = LLVMGetInsertBlock(b);
	LLVMBuildBr(b, bj);

	LLVMPositionBuilderAtEnd(b, bj);
	LLVMBasicBlockRef from[2] = {bw_end, be_end};
	sc->ts = sc->tp = NULL;
	for (int mi = 0; mi < z->mi; mi++)
		for (int h = 0; h < 2; h++) {
			LLVMValueRef v[2] = {w.sa[mi][h], c.sa[mi][h]};
			sc->sa[mi][h] = LLVMBuildPhi(b, cg->f32, "");
			LLVMAddIncoming(sc->sa[mi][h], v, from, 2);
		}
	for (int ni = 0; ni < z->bn / 8; ni++)
		for (int x = 0; x < 2; x++) {
			LLVMValueRef v[2] = {w.sb[ni][x], c.sb[ni][x]};
			sc->sb[ni][x] = LLVMBuildPhi(b, cg->f32, "");
			LLVMAddIncoming(sc->sb[ni][x], v, from, 2);
		}
}

/* Chunk c's scales of an e2m1 stage s from its slot (up_scales,
 * up_a_bytes' layout): A's of this thread's rows (frag90 from 0), B's of
 * its columns: up_b16, the tile's bn / 16 blocks (the same for every
 * thread: broadcast 16-byte loads), else the lane's bn / 4 columns,
 * contiguous in its row t4 = l % 4 (16-byte loads). Read after the
 * stage's full wait and before the chunk's wgmma: the wgmma and its wait
 * are warp-synchronous, so every lane's loads precede lane 0's empty
 * arrival, after which the producer may refill the slot (read after the
 * wait, the emulator's 64-row wgrad tiles read a refilled slot: lane 0
 * arrived while other lanes of its warp were still loading) */
static void
up_stage_scales(E *e, const S90 *z, LLVMValueRef sm, LLVMValueRef s, LLVMValueRef tid, LLVMValueRef c,
                Scales90 *sc)
{
	LLVMBuilderRef b = e->b;
	Cg *cg = e->g;
	Frag90 fr;
	LLVMValueRef big = c64(e, (uint64_t)1 << 40);
	Tile90 q = {.row0 = c64(e, 0), .col0 = c64(e, 0), .mend = big, .nend = big, .bbase = c64(e, 0),
	            .ka = c64(e, 0), .kb = c64(e, 0)};
	frag90(e, z, &fr, tid, &q);
	LLVMValueRef sa = up_slot(e, z, sm, s, 0);
	LLVMValueRef sb = gep(e, sa, add64(e, c64(e, (uint64_t)up_a_bytes(z)), mul64(e, c, (uint64_t)up_b_row(z) * 4)));
	LLVMTypeRef v4 = LLVMVectorType(cg->f32, 4);
	sc->ts = sc->tp = NULL;
	for (int mi = 0; mi < z->mi; mi++)
		for (int h = 0; h < 2; h++)
			sc->sa[mi][h] = load_al(e, cg->f32, gep(e, sa, mul64(e, add64(e, mul64(e, fr.rowv[mi][h],
			                                                                      (uint64_t)z->up_nch), c), 4)), 4);
	LLVMValueRef v[NACC_MAX / 2];
	int nb = z->up_b16 ? z->bn / 16 : z->bn / 4;
	if (!z->up_b16) {
		LLVMValueRef t4 = LLVMBuildURem(b, tid, c64(e, 4), "");
		sb = gep(e, sb, mul64(e, t4, (uint64_t)up_col_row(z) * 4));
	}
	for (int j = 0; j < (nb + 3) / 4; j++) {
		LLVMValueRef w = load_al(e, v4, gep(e, sb, c64(e, (uint64_t)(16 * j))), 16);
		for (int x = 0; x < 4; x++)
			v[4 * j + x] = LLVMBuildExtractElement(b, w, c32(e, (uint64_t)x), "");
	}
	for (int ni = 0; ni < z->bn / 8; ni++)
		for (int x = 0; x < 2; x++)
			sc->sb[ni][x] = z->up_b16 ? v[ni / 2] : v[2 * ni + x];
}

/* A stage of several promotion chunks (P < the stage's K: MX's 32 fp8,
 * NVFP4's 16 bf16): each chunk's wgmmas (one k32 or k16 each) from +0,
 * commit, wait, then its promotion with the chunk's scales, in K order,
 * as the interpreter promotes every P (k_gemm.c's promote_if). The stage
 * is freed after the last chunk's wait. A chunk at or past K (the last
 * stage of a K that is not a multiple of the stage's) runs its wgmmas on
 * TMA's zeros but is not promoted: its scales are past the tensor's, and
 * fl(+0 · NaN) would not be the interpreter's nothing. */
static void
chunks_in_stage(E *e, const S90 *z, const G *g, LLVMValueRef sm, LLVMValueRef inner, LLVMValueRef outer,
                LLVMValueRef s, LLVMValueRef tid, const Tile90 *p, const LLVMValueRef *da, LLVMValueRef db,
                LLVMValueRef kel, long bke, LLVMValueRef lane0)
{
	LLVMBuilderRef b = e->b;
	Cg *cg = e->g;
	precc_format fa = wfmt(&g->op[0]), fb = wfmt(&g->op[1]);
	int mna = g->op[0].tr, mnb = g->op[1].tr;
	int nch = (int)(bke / g->P), per = KB / KSTEP / nch;     /* chunks, wgmmas per chunk */
	/* chunks past K only where K is not a multiple of the stage's (or
	 * the window is an expert's tokens) */
	int guard = g->K < 0 || g->K % bke || p->ktail;
	/* a loop, kept rolled: unrolled, LLVM sank each chunk's promotion
	 * below the next chunk's wgmmas and hoisted the next chunk's scale
	 * loads above it (two sets of accumulators and scales live: ptxas
	 * spilled 28 bytes at 128 x 128) */
	Loop l;
	LLVMValueRef c = loop_begin(e, &l, c64(e, 0), c64(e, (uint64_t)nch));
	LLVMValueRef kc = add64(e, kel, mul64(e, c, (uint64_t)g->P));
	LLVMValueRef live = guard ? ult(e, kc, p->klen) : NULL;
	/* the chunk's scales before its wgmmas (e2m1: from the stage's slot);
	 * a chunk past K reads the stage's first (in range) and is not
	 * promoted */
	Scales90 sc;
	if (z->up_nch)
		up_stage_scales(e, z, sm, s, tid, c, &sc);
	else
		chunk_scales(e, z, g, tid, p, live ? sel(e, live, kc, kel) : kc, &sc);
	LLVMValueRef d[NACC_MAX];
	for (int i = 0; i < z->nacc; i++)
		d[i] = LLVMBuildLoad2(b, cg->f32, slot(e, inner, i), "");
	asm90_wgmma_fence(cg);
	/* each wgmma's K as consumer_tile's, from the chunk's first */
	LLVMValueRef ks0 = mul64(e, c, (uint64_t)per);
	for (int j = 0; j < per; j++) {
		LLVMValueRef ks = add64(e, ks0, c64(e, (uint64_t)j));
		LLVMValueRef offk = mul64(e, ks, KSTEP / 16), offmn = mul64(e, ks, (KSTEP / 2) * KB / 16);
		for (int mi = 0; mi < z->mi; mi++)
			asm90_wgmma(cg, fa, fb, z->bn, add64(e, da[mi], mna ? offmn : offk),
			            add64(e, db, mnb ? offmn : offk), d + mi * (z->bn / 2), c32(e, j ? 1 : 0),
			            mna | mnb << 1);
	}
	asm90_wgmma_commit(cg);
	asm90_wgmma_wait(cg, 0);
	for (int i = 0; i < z->nacc; i++)
		LLVMBuildStore(b, d[i], slot(e, inner, i));
	/* the stage is read after the last chunk's wait: free it (one
	 * arrival per warp) */
	LLVMValueRef lastc = LLVMBuildICmp(b, LLVMIntEQ, c, c64(e, (uint64_t)nch - 1), "");
	LLVMBasicBlockRef fr_ = begin_if(e, LLVMBuildAnd(b, lastc, lane0, ""));
	release_stage(e, z, empty_bar(e, z, sm, s));
	end_if(e, fr_);
	LLVMBasicBlockRef pc = live ? begin_if(e, live) : NULL;
	promote90(e, z, &sc, inner, outer, NULL);
	if (pc)
		end_if(e, pc);
	loop_end(e, &l);
	loop_nounroll(e, &l);
}

/* The chunk's scales from stage s's slot (scales_by_stage), A's (ops bit
 * 0) and B's (bit 1): this thread's rows and columns of the tile (frag90
 * from 0), or the slot's one value where a scale spans the tile. Read
 * after the stage's full barrier and before its empty arrival (then the
 * producer may refill the slot): A's, and a B scale that spans the tile,
 * before the wgmmas, as DeepGEMM reads smem_sfa[s] ("all shared memory
 * read must be prior to warpgroup_arrive"); B's per column (1x128 x
 * 1x128 wgrad: bn / 4 values a thread) after the wait, where they are
 * not live across the wgmmas beside both accumulator sets (ptxas spilled
 * 24 bytes at 128 x 128 with them read before) */
static void
stage_scales(E *e, const S90 *z, LLVMValueRef sm, LLVMValueRef s, LLVMValueRef tid, Scales90 *sc, int ops)
{
	Frag90 fr;
	LLVMValueRef big = c64(e, (uint64_t)1 << 40);
	Tile90 q = {.row0 = c64(e, 0), .col0 = c64(e, 0), .mend = big, .nend = big, .bbase = c64(e, 0),
	            .ka = c64(e, 0), .kb = c64(e, 0)};
	frag90(e, z, &fr, tid, &q);
	LLVMValueRef sa = scale_slot(e, z, sm, s, 0), sb = scale_slot(e, z, sm, s, 1);
	sc->ts = sc->tp = NULL;
	for (int mi = 0; mi < z->mi && (ops & 1); mi++)
		for (int h = 0; h < 2; h++)
			sc->sa[mi][h] = z->sc_na == 1 && (mi || h) ? sc->sa[0][0]
			                : load_al(e, e->g->f32, gep(e, sa, z->sc_na == 1 ? c64(e, 0)
			                                            : mul64(e, fr.rowv[mi][h], 4)), 4);
	for (int ni = 0; ni < z->bn / 8 && (ops & 2); ni++)
		for (int x = 0; x < 2; x++)
			sc->sb[ni][x] = z->sc_nb == 1 && (ni || x) ? sc->sb[0][0]
			                : load_al(e, e->g->f32, gep(e, sb, z->sc_nb == 1 ? c64(e, 0)
			                                            : mul64(e, fr.colv[ni][x], 4)), 4);
}

/* The consumers' main loop over one tile's K: the chunk's wgmmas into
 * inner, promoted into outer every P (g->P > 0) */
static void
consumer_tile(E *e, const S90 *z, const G *g, LLVMValueRef sm, LLVMValueRef inner, LLVMValueRef outer,
              LLVMValueRef it0, LLVMValueRef tid, const Tile90 *p, long bke)
{
	LLVMBuilderRef b = e->b;
	Cg *cg = e->g;
	precc_format fa = wfmt(&g->op[0]), fb = wfmt(&g->op[1]);
	int mna = g->op[0].tr, mnb = g->op[1].tr;
	Loop l;
	LLVMValueRef nkt = p->nkt;
	LLVMValueRef cw = LLVMBuildSub(b, LLVMBuildUDiv(b, tid, c64(e, WG), ""), c64(e, 1), "");
	LLVMValueRef lane0 = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, tid, c64(e, 32), ""), c64(e, 0), "");
	LLVMValueRef kt = loop_begin(e, &l, c64(e, 0), nkt);
	LLVMValueRef s, ph;
	ring_at(e, z, add64(e, it0, kt), &s, &ph);
	asm90_mbar_wait(cg, full_bar(e, z, sm, s), ph);
	LLVMValueRef st = mul64(e, s, (uint64_t)z->stage_bytes);
	/* this consumer's m64 blocks of A: 64 K-major rows of KB bytes each,
	 * or one MN-major box each, at the same offsets */
	LLVMValueRef da[2];
	for (int mi = 0; mi < z->mi; mi++)
		da[mi] = operand_desc(e, mna, gep(e, sm, add64(e, st, add64(e, mul64(e, cw, (uint64_t)(z->mi * WGMMA_M * KB)),
		                                                           c64(e, (uint64_t)(mi * WGMMA_M * KB))))));
	LLVMValueRef db = operand_desc(e, mnb, gep(e, sm, add64(e, st, c64(e, (uint64_t)z->a_bytes))));
	LLVMValueRef kel = mul64(e, kt, (uint64_t)bke);
	if (g->P && g->P < bke) {
		chunks_in_stage(e, z, g, sm, inner, outer, s, tid, p, da, db, kel, bke, lane0);
		loop_end(e, &l);
		return;
	}
	/* the first wgmma of a chunk (of all of K when P = 0) starts from 0 */
	LLVMValueRef first = g->P ? LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, kel, c64(e, (uint64_t)g->P), ""),
	                                          c64(e, 0), "")
	                          : LLVMBuildICmp(b, LLVMIntEQ, kt, c64(e, 0), "");
	/* the chunk's scales, read before its wgmmas are issued so that the
	 * loads' latency passes under them (DeepGEMM reads its scales before
	 * warpgroup_arrive, fp8_gemm.cuh's math loop); the fragment's rows and
	 * columns from opaque bases: not hoisted and held across the K loop
	 * beside the accumulators */
	Scales90 sc;
	if (z->sc_na) {
		stage_scales(e, z, sm, s, tid, &sc, z->sc_nb == 1 ? 3 : 1);
	} else if (g->P) {
		LLVMValueRef kstart = mul64(e, LLVMBuildUDiv(b, kel, c64(e, (uint64_t)g->P), ""), (uint64_t)g->P);
		Frag90 fr;
		Tile90 q = tile_moved(p, asm_opaque_u64(cg, p->row0), asm_opaque_u64(cg, p->col0));
		frag90(e, z, &fr, asm_opaque_u64(cg, tid), &q);
		scales90(e, z, g, &fr, kstart, &sc);
	}
	LLVMValueRef d[NACC_MAX];
	for (int i = 0; i < z->nacc; i++)
		d[i] = LLVMBuildLoad2(b, cg->f32, slot(e, inner, i), "");
	asm90_wgmma_fence(cg);
	/* each wgmma's K: KSTEP bytes along a K-major row, or KSTEP / 2 rows
	 * of KB bytes down an MN-major box (in the descriptors' 16-byte
	 * units); one wgmma per m64 block of the consumer */
	for (int ks = 0; ks < KB / KSTEP; ks++) {
		LLVMValueRef sd = ks ? c32(e, 1) : LLVMBuildZExt(b, LLVMBuildNot(b, first, ""), cg->i32, "");
		LLVMValueRef offk = c64(e, (uint64_t)(ks * KSTEP / 16));
		LLVMValueRef offmn = c64(e, (uint64_t)(ks * (KSTEP / 2) * KB / 16));
		for (int mi = 0; mi < z->mi; mi++)
			asm90_wgmma(cg, fa, fb, z->bn, add64(e, da[mi], mna ? offmn : offk), add64(e, db, mnb ? offmn : offk),
			            d + mi * (z->bn / 2), sd, mna | mnb << 1);
	}
	asm90_wgmma_commit(cg);
	asm90_wgmma_wait(cg, 0);
	for (int i = 0; i < z->nacc; i++)
		LLVMBuildStore(b, d[i], slot(e, inner, i));
	/* B's per-column scales are read after the wait, each lane its own:
	 * the warp meets before lane 0 frees the slot for all of them (the
	 * wait's warp sync is before those reads) */
	if (z->sc_nb > 1) {
		stage_scales(e, z, sm, s, tid, &sc, 2);
		asm90_warp_sync(cg);
	}
	/* the stage is read: free it (one arrival per warp) */
	LLVMBasicBlockRef fr_ = begin_if(e, lane0);
	release_stage(e, z, empty_bar(e, z, sm, s));
	end_if(e, fr_);
	if (g->P) {
		LLVMValueRef kend = add64(e, kel, c64(e, (uint64_t)bke));
		LLVMValueRef at_p = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, kend, c64(e, (uint64_t)g->P), ""),
		                                  c64(e, 0), "");
		LLVMValueRef last = LLVMBuildICmp(b, LLVMIntEQ, kt, LLVMBuildSub(b, nkt, c64(e, 1), ""), "");
		LLVMBasicBlockRef pc = begin_if(e, LLVMBuildOr(b, at_p, last, ""));
		promote90(e, z, &sc, inner, outer, NULL);
		end_if(e, pc);
	}
	loop_end(e, &l);
}

/* The consumer warpgroup cw's C buffer: its 64 mi rows of the tile, in
 * bn / (span / 2) column stripes of rows x span bytes, each stripe one TMA
 * box in the span's swizzle (16-byte chunk c of row r at c ^ (r % 8) for
 * 128 bytes: emu_tma.c's swz); its named barrier is 1 + cw (0 is the
 * CTA's). */
static LLVMValueRef
c_buf(E *e, const S90 *z, LLVMValueRef sm, LLVMValueRef cw)
{
	return gep(e, sm, add64(e, c64(e, (uint64_t)z->c_off), mul64(e, cw, (uint64_t)(WGMMA_M * z->mi * z->bn * 2))));
}

/* The tile's 16-bit C through shared memory, DeepGEMM's epilogue
 * (sm90_fp8_gemm_1d2d.cuh: tma_store_wait, stmatrix, tma_store_fence, a
 * named barrier, one thread's TMA stores) per consumer warpgroup: its
 * leader waits until the previous tile's store has read the buffer
 * (wait_group.read 0: the store ran under this tile's mainloop), the
 * warpgroup meets, each warp stmatrix-es its 16 rows (one x4 per 16 x 16:
 * the fragment's pairs pk[mi][ni][h], rows 16w + 8h + l/4, columns 8ni +
 * 2(l%4), are stmatrix's m8n8 fragments), every thread fences its writes
 * to the async proxy, the warpgroup meets, and the leader issues one TMA
 * store per stripe and commits them as a bulk group that it leaves in
 * flight. TMA clips the box at M and at the row's end (N or the slice). */
static void
c_store_tma(E *e, const S90 *z, LLVMValueRef sm, LLVMValueRef tmc, LLVMValueRef tid, LLVMValueRef row0,
            LLVMValueRef col0, LLVMValueRef pk[2][NACC_MAX / 4][2])
{
	LLVMBuilderRef b = e->b;
	Cg *cg = e->g;
	int rows = WGMMA_M * z->mi, span = z->c_span, chunks = span / 16;
	LLVMValueRef cw = LLVMBuildSub(b, LLVMBuildUDiv(b, tid, c64(e, WG), ""), c64(e, 1), "");
	LLVMValueRef bar = LLVMBuildTrunc(b, add64(e, cw, c64(e, 1)), cg->i32, "");
	LLVMValueRef buf = c_buf(e, z, sm, cw);
	LLVMValueRef leader = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, tid, c64(e, WG), ""), c64(e, 0), "");

	LLVMBasicBlockRef w = begin_if(e, leader);
	asm90_bulk_wait_read0(cg);
	end_if(e, w);
	asm90_bar_named(cg, bar, WG);
	/* lane l names row l % 8 of matrix l / 8: half h = (l / 8) % 2 of
	 * the 16 rows, the 8 columns (l / 16) after the x4's first */
	LLVMValueRef l = LLVMBuildURem(b, tid, c64(e, 32), "");
	LLVMValueRef wp = LLVMBuildURem(b, LLVMBuildUDiv(b, tid, c64(e, 32), ""), c64(e, 4), "");
	LLVMValueRef r = add64(e, add64(e, mul64(e, wp, 16), LLVMBuildURem(b, l, c64(e, 8), "")),
	                       mul64(e, LLVMBuildURem(b, LLVMBuildUDiv(b, l, c64(e, 8), ""), c64(e, 2), ""), 8));
	LLVMValueRef c8 = LLVMBuildUDiv(b, l, c64(e, 16), "");
	for (int mi = 0; mi < z->mi; mi++) {
		LLVMValueRef row = add64(e, r, c64(e, (uint64_t)(WGMMA_M * mi)));
		/* the swizzle: the chunk xor bits 7.. of the row's offset */
		LLVMValueRef x = LLVMBuildAnd(b, LLVMBuildLShr(b, mul64(e, row, (uint64_t)span), c64(e, 7), ""),
		                              c64(e, (uint64_t)chunks - 1), "");
		for (int p = 0; p < z->bn / 16; p++) {
			LLVMValueRef ch = add64(e, c8, c64(e, (uint64_t)(2 * p)));   /* 16-byte chunk of the row */
			LLVMValueRef stripe = LLVMBuildUDiv(b, ch, c64(e, (uint64_t)chunks), "");
			LLVMValueRef in = LLVMBuildXor(b, LLVMBuildURem(b, ch, c64(e, (uint64_t)chunks), ""), x, "");
			LLVMValueRef off = add64(e, add64(e, mul64(e, stripe, (uint64_t)(rows * span)), mul64(e, row, (uint64_t)span)),
			                         mul64(e, in, 16));
			LLVMValueRef v[4] = {pk[mi][2 * p][0], pk[mi][2 * p][1], pk[mi][2 * p + 1][0], pk[mi][2 * p + 1][1]};
			asm90_stmatrix_x4(cg, 0, gep(e, buf, off), v);
		}
	}
	asm90_fence_proxy_async(cg);
	asm90_bar_named(cg, bar, WG);
	LLVMBasicBlockRef st = begin_if(e, leader);
	LLVMValueRef r0 = LLVMBuildTrunc(b, add64(e, row0, mul64(e, cw, (uint64_t)rows)), cg->i32, "");
	for (int j = 0; j < z->bn / (span / 2); j++)
		asm90_tma_store_2d(cg, tmc, LLVMBuildTrunc(b, add64(e, col0, c64(e, (uint64_t)(j * span / 2))), cg->i32, ""),
		                   r0, gep(e, buf, c64(e, (uint64_t)(j * rows * span))));
	asm90_bulk_commit(cg);
	end_if(e, st);
}

/* The tile's epilogue (k_gemm.c's, over the wgmma fragment); the output
 * amax's bits max into *mbits. A 16-bit C goes through shared memory and
 * TMA (c_store_tma, tmc its map), anything else from registers, into C's
 * rows crow0 + row (a grouped wgrad's expert's); a zero tile's are +0. */
static int
epilogue_tile(E *e, const S90 *z, const G *g, const Frag90 *fr, LLVMValueRef inner, LLVMValueRef outer,
              const Tile90 *p, LLVMValueRef *mbits, LLVMValueRef sm, LLVMValueRef tmc, LLVMValueRef tid)
{
	LLVMValueRef M = p->mend, N = p->nend;
	LLVMValueRef pk[2][NACC_MAX / 4][2];
	Kern *k = e->k;
	Cg *cg = e->g;
	LLVMBuilderRef b = e->b;
	LLVMValueRef acc[NACC_MAX];

	if (!g->P) {
		Scales90 sc;
		scales90(e, z, g, fr, c64(e, 0), &sc);
		promote90(e, z, &sc, inner, NULL, acc);
	} else
		for (int i = 0; i < z->nacc; i++)
			acc[i] = LLVMBuildLoad2(b, cg->f32, slot(e, outer, i), "");
	for (int i = 0; i < z->nacc && p->zero; i++)
		acc[i] = sel(e, p->zero, cf(e, 0), acc[i]);
	precc_format of = g->cast >= 0 ? k->f->ins[g->cast].type.fmt : PRECC_FP32;
	int oeb = gemm_ebytes(of);
	LLVMValueRef NS = g->slice ? c64(e, (uint64_t)g->slice) : N;
	for (int mi = 0; mi < z->mi; mi++)
		for (int ni = 0; ni < z->bn / 8; ni++)
			for (int h = 0; h < 2; h++) {
				LLVMValueRef y[2], r = fr->rowv[mi][h];
				for (int c = 0; c < 2; c++) {
					int i = mi * (z->bn / 2) + ni * 4 + 2 * h + c;
					y[c] = acc[i];
					if (g->bias >= 0) {
						LLVMValueRef bx = epi_bias(e, g, fr->colv[ni][c]);
						if (!bx)
							return -1;
						y[c] = fadd_rn(e, y[c], bx);
					}
					if (g->amax >= 0) {
						LLVMValueRef ok = LLVMBuildAnd(b, ult(e, r, M), ult(e, fr->colv[ni][c], N), "");
						LLVMValueRef v = g->amax_arg == k->f->ins[k->gm].res ? acc[i] : y[c];
						*mbits = umax(e, *mbits, sel(e, ok, vec_amax_bits(e, &v, 1), c32(e, 0)));
					}
				}
				LLVMValueRef pair = oeb == 2 ? asm_cvt_16x2(cg, of, y[0], y[1]) : NULL;
				pk[mi][ni][h] = pair;
				for (int c = 0; c < 2 && !z->c_span; c++) {
					LLVMValueRef col = fr->colv[ni][c];
					LLVMValueRef ok = LLVMBuildAnd(b, ult(e, r, M), ult(e, col, NS), "");
					LLVMBasicBlockRef cont = begin_if(e, ok);
					LLVMValueRef off = mul64(e, add64(e, LLVMBuildMul(b, add64(e, p->crow0, r), NS, ""), col),
					                         (uint64_t)oeb);
					LLVMValueRef p = gep(e, e->ptr[g->out], off);
					if (oeb == 2)
						store_al(e, LLVMBuildTrunc(b, c ? LLVMBuildLShr(b, pair, c32(e, 16), "") : pair,
						                           cg->i16, ""), p, 2);
					else
						store_al(e, epi_accumulate(e, g, off, y[c]), p, 4);
					end_if(e, cont);
				}
			}
	if (z->c_span)
		c_store_tma(e, z, sm, tmc, tid, p->row0, p->col0, pk);
	return 0;
}

/* The dense scheduler: ceil(M / bm) m-blocks x ceil(N / bn) n-blocks
 * (either may be the launch's M) in tile_at's order; every tile all of K */
static LLVMValueRef
dense_ntiles(E *e, Sched90 *s)
{
	LLVMBuilderRef b = e->b;
	const G *g = s->g;
	LLVMValueRef M = dimv(e, g->op[0].rows), N = dimv(e, g->op[1].rows);
	/* in clusters along M a tile is the cluster's: cm m-blocks (the last
	 * CTAs past M load their share of B for the others and store nothing) */
	uint64_t bmc = (uint64_t)s->bm * (uint64_t)s->cm;
	s->v[0] = LLVMBuildUDiv(b, add64(e, M, c64(e, bmc - 1)), c64(e, bmc), "");
	s->v[1] = LLVMBuildUDiv(b, add64(e, N, c64(e, (uint64_t)s->bn - 1)), c64(e, (uint64_t)s->bn), "");
	/* K tiles per tile: ceil(K / bke), K the launch's M for wgrad */
	s->v[2] = LLVMBuildUDiv(b, add64(e, dimv(e, g->K), c64(e, (uint64_t)s->bke - 1)), c64(e, (uint64_t)s->bke), "nkt");
	return LLVMBuildMul(b, s->v[0], s->v[1], "ntiles");
}

static void
dense_start(E *e, Sched90 *s)
{
	(void)e, (void)s;
}

static void
dense_at(E *e, Sched90 *s, LLVMValueRef tile, Tile90 *p)
{
	const G *g = s->g;
	S90 z = {.bm = s->bm * s->cm, .bn = s->bn};
	tile_at(e, &z, tile, s->v[0], s->v[1], &p->row0, &p->col0);
	if (s->cm > 1) {
		LLVMValueRef rank = LLVMBuildZExt(e->b, LLVMBuildURem(e->b, sreg(e, "ctaid.x"), c32(e, (unsigned)s->cm), ""),
		                                  e->g->i64, "");
		p->row0 = add64(e, p->row0, mul64(e, rank, (uint64_t)s->bm));
	}
	p->mend = dimv(e, g->op[0].rows), p->nend = dimv(e, g->op[1].rows);
	p->bbase = p->ka = p->kb = p->crow0 = c64(e, 0);
	p->klen = dimv(e, g->K);
	p->nkt = s->v[2];
	p->ktail = p->zero = NULL;
}

int
emit_gemm_sm90(E *e)
{
	Sched90 s = {.ntiles = dense_ntiles, .start = dense_start, .at = dense_at};
	return gemm_sm90_emit(e, &s);
}

int
gemm_sm90_emit(E *e, Sched90 *sc)
{
	Kern *k = e->k;
	Cg *cg = e->g;
	LLVMBuilderRef b = e->b;
	G g;
	S90 z;
	int bm, bn, cm;
	char why[160];

	if (plan90(k, &g))
		return -1;
	if (tile_attr(k->f, &bm, &bn, &cm) || shape90(k->f, &g, bm, bn, &z, why, sizeof why)
	    || cluster_check(&g, &z, cm, why, sizeof why))
		return kfail(k, "tile: %s", why);
	if (cm > 1 && sc->ntiles != dense_ntiles)
		return kfail(k, "tile: cluster %dx1: the dense scheduler's only", cm);
	z.cm = cm;
	long bke = KB / gemm_ebytes(wfmt(&g.op[0]));
	sc->g = &g, sc->bm = z.bm, sc->bn = z.bn, sc->bke = bke, sc->cm = z.cm;
	unsigned np = LLVMCountParams(cg->fn);
	unsigned t0 = np - (unsigned)k->ntmap;   /* the tensor maps: A, B (none for e2m1) (, C) */
	LLVMValueRef tma = g.op[0].up ? NULL : LLVMGetParam(cg->fn, t0);
	LLVMValueRef tmb = g.op[0].up ? NULL : LLVMGetParam(cg->fn, t0 + 1);
	LLVMValueRef tmc = z.c_span ? LLVMGetParam(cg->fn, np - 1) : NULL;
	LLVMTypeRef at = LLVMArrayType2(cg->f32, NACC_MAX);
	LLVMValueRef inner = LLVMBuildAlloca(b, at, "inner");
	LLVMValueRef outer = g.P ? LLVMBuildAlloca(b, at, "outer") : NULL;
	LLVMValueRef mslot = LLVMBuildAlloca(b, cg->i32, "amax");
	/* the CTA's running K-iteration count (ring_at), and its count of
	 * stages on the tail barrier (producer_tile) */
	LLVMValueRef ring = LLVMBuildAlloca(b, cg->i32, "ring");
	LLVMValueRef ntail = LLVMBuildAlloca(b, cg->i32, "ntail");
	LLVMBuildStore(b, c32(e, 0), mslot);
	LLVMValueRef sm = smem_base(e, &z);
	LLVMValueRef tid = LLVMBuildZExt(b, sreg(e, "tid.x"), cg->i64, "");
	LLVMValueRef wg = LLVMBuildUDiv(b, tid, c64(e, WG), "");
	LLVMValueRef ntiles = sc->ntiles(e, sc);

	/* the barriers, before anyone uses them: full[s] completes on the
	 * producer's arrival and the stage's bytes, empty[s] on one arrival
	 * per consumer warp; the tail barrier on its thread's and the bytes */
	LLVMBasicBlockRef init = begin_if(e, LLVMBuildICmp(b, LLVMIntEQ, tid, c64(e, 0), ""));
	for (int s = 0; s < z.stages; s++) {
		asm90_mbar_init(cg, gep(e, sm, c64(e, (uint64_t)(z.bar_off + 8 * s))), g.op[0].up ? WG : z.sc_na ? 32 : 1);
		asm90_mbar_init(cg, gep(e, sm, c64(e, (uint64_t)(z.bar_off + 8 * (z.stages + s)))),
		                (unsigned)(4 * z.ncw * stage_owners(&z)));
	}
	if (z.tail_off)
		asm90_mbar_init(cg, gep(e, sm, c64(e, (uint64_t)z.tail_off)), 1);
	asm90_fence_mbar_init(cg);
	end_if(e, init);
	barrier(e);
	/* a cluster: every CTA's barriers are initialized and fenced before a
	 * peer's multicast or arrival uses them (DeepGEMM's cluster_sync
	 * after the init) */
	if (z.cm > 1)
		asm90_cluster_sync(cg);

	LLVMBasicBlockRef prod = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "producer");
	LLVMBasicBlockRef cons = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "consumer");
	LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "join");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, wg, c64(e, 0), ""), prod, cons);

	/* the producer: one thread feeds the ring, tile after tile (a warp
	 * where the scales come with the stage, the warpgroup for e2m1) */
	LLVMPositionBuilderAtEnd(b, prod);
	asm90_setmaxnreg(cg, 0, g.group_k ? PRODUCER_REGS_K : PRODUCER_REGS);
	LLVMBasicBlockRef one = begin_if(e, ult(e, tid, c64(e, g.op[0].up ? WG : z.sc_na ? 32 : 1)));
	LLVMBuildStore(b, c32(e, 0), ring);
	LLVMBuildStore(b, c32(e, 0), ntail);
	sc->start(e, sc);
	TileLoop tl;
	LLVMValueRef tile;
	Tile90 p;
	tiles_begin(e, &tl, ntiles, &tile, z.cm);
	sc->at(e, sc, tile, &p);
	LLVMValueRef it0 = ring_base(e, ring);
	producer_tile(e, &z, &g, sm, tma, tmb, it0, &p, bke, tid, ntail);
	ring_advance(e, ring, it0, p.nkt);
	loop_end(e, &tl.l);
	end_if(e, one);
	LLVMBuildBr(b, join);

	/* the consumers: the same tiles in the same order */
	LLVMPositionBuilderAtEnd(b, cons);
	asm90_setmaxnreg(cg, 1, g.group_k ? CONSUMER_REGS_K : CONSUMER_REGS);
	LLVMBuildStore(b, c32(e, 0), ring);
	sc->start(e, sc);
	tiles_begin(e, &tl, ntiles, &tile, z.cm);
	sc->at(e, sc, tile, &p);
	for (int i = 0; i < z.nacc; i++) {
		LLVMBuildStore(b, cf(e, 0), slot(e, inner, i));
		if (outer)
			LLVMBuildStore(b, cf(e, 0), slot(e, outer, i));
	}
	it0 = ring_base(e, ring);
	consumer_tile(e, &z, &g, sm, inner, outer, it0, tid, &p, bke);
	ring_advance(e, ring, it0, p.nkt);
	Frag90 fr;
	frag90(e, &z, &fr, tid, &p);
	/* the output amax's bits, carried across the CTA's tiles in mslot */
	LLVMValueRef mbits = LLVMBuildLoad2(b, cg->i32, mslot, "");
	if (epilogue_tile(e, &z, &g, &fr, inner, outer, &p, &mbits, sm, tmc, tid))
		return -1;
	LLVMBuildStore(b, mbits, mslot);
	loop_end(e, &tl.l);
	if (z.c_span) {
		/* the last tile's store reads the buffer before the thread leaves */
		LLVMBasicBlockRef last = begin_if(e, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, tid, c64(e, WG), ""),
		                                                   c64(e, 0), ""));
		asm90_bulk_wait_read0(cg);
		end_if(e, last);
	}
	LLVMBuildBr(b, join);
	LLVMPositionBuilderAtEnd(b, join);
	if (g.amax >= 0) {
		/* every thread, the producer's with 0: cta_max's barriers see all */
		e->red = shared_array(e, "red", 2, LLVMArrayType2(cg->i32, 32), 4);
		tensor_amax_out(e, LLVMBuildLoad2(b, cg->i32, mslot, ""));
	}
	/* no CTA of a cluster leaves while a peer may still multicast into
	 * its stages or arrive on its barriers (DeepGEMM and CUTLASS end
	 * with a cluster barrier) */
	if (z.cm > 1)
		asm90_cluster_sync(cg);
	return 0;
}
