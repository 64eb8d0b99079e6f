#!/bin/sh
# tests/mutants.sh — apply issue 7's mutants one at a time, rebuild what
# they touch, run the tests that should see them, and report survivors.
# Not in ctest (a rebuild and a test run per mutant: minutes). From the
# repository root, with a configured build directory:
#
#   sh tests/mutants.sh [BUILD_DIR] [NAME...]     (default build/, all)
#
# Each mutant is one exact text replacement (it must match exactly once,
# else the mutant is stale and reported as such). The file is restored
# after each one, also on interrupt. Exit 1 if any mutant survives or is
# stale.
set -u
B=${1:-build}
[ $# -gt 0 ] && shift
ONLY="$*"
[ -f "$B/CMakeCache.txt" ] || { echo "mutants.sh: $B is not a configured build directory" >&2; exit 2; }

# name|file|tests (ctest -R)|from|to   (\n in from/to is a newline)
MUTANTS='eps_clamp|codegen/emit_scale.c|codegen.emu|	if (eps > 0)\n		a = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, a, cf(e, eps), ""), cf(e, eps), a, "");|	(void)eps;
grid_tiled|include/precc/grid.h|codegen.emu\|runtime|gx = (g->cols + g->tile_cols - 1) / g->tile_cols;|gx = g->cols / g->tile_cols;
grid_flat|include/precc/grid.h|codegen.emu\|runtime|gx = (g->rows * g->cols + g->elems_per_cta - 1) / g->elems_per_cta;|gx = g->rows * g->cols / g->elems_per_cta;
grid_launcher|driver/artifacts.c|lit.build|(precc_grid_phase){%d, rows, cols, %ld, %ld, %ld};|(precc_grid_phase){%d, rows, cols, %ld + 1, %ld, %ld};
align_8|include/precc/grid.h|codegen.emu\|runtime|#define PRECC_BUFFER_ALIGN 16|#define PRECC_BUFFER_ALIGN 8
grid_schedule|passes/schedule.c|lit.passes\|codegen.emu|snprintf(buf, n, "%ld", (d + per - 1) / per);|snprintf(buf, n, "%ld", d / per);
cvt_e4m3x2_swap|codegen/ptx_asm.c|codegen.emu|#define CVT_E4M3X2 "cvt.rn.satfinite.e4m3x2.f32 $0, $2, $1;"|#define CVT_E4M3X2 "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;"
shfl_clamp_0|codegen/emit.c|codegen.emu|c32(e, (unsigned)lanemask), c32(e, 0x1f)}|c32(e, (unsigned)lanemask), c32(e, 0)}
amax_nan|codegen/emit.c|codegen.emu|uint32_t nan = amax_nan_ignore(e) ? 0 : 0x7fc00000;|uint32_t nan = amax_nan_ignore(e) ? 0 : 0x7f800000;
zero_outputs|codegen/kernel.c|codegen.emu\|lit.build|			*mask \|= 1u << p;|			(void)mask;
colblock_m_multiple|codegen/kernel.c|codegen.emu|			k->m_multiple = k->bc;|			k->m_multiple = 1;
fp8_decode_fmt|codegen/ptx_asm.c|codegen.emu|f == PRECC_E4M3 ? CVT_F16X2_E4M3X2 : CVT_F16X2_E5M2X2|f == PRECC_E4M3 ? CVT_F16X2_E5M2X2 : CVT_F16X2_E4M3X2
cvt_bf16x2_swap|codegen/ptx_asm.c|codegen.emu|#define CVT_BF16X2_F32 "cvt.rn.bf16x2.f32 $0, $2, $1;"|#define CVT_BF16X2_F32 "cvt.rn.bf16x2.f32 $0, $1, $2;"
barrier_dropped|codegen/emit.c|codegen.emu|	intrin(e, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);|	(void)e;
margin_sign|codegen/emit_scale.c|codegen.emu|LLVMConstReal(e->g->f64, ldexp(1.0, -margin))|LLVMConstReal(e->g->f64, ldexp(1.0, margin))
e2m1_tie|codegen/swcvt.c|codegen.swcvt\|codegen.emu|OP2(SW_AND, OP2(SW_EQ, rem, half), OP2(SW_AND, k, K(1)))|OP2(SW_EQ, rem, half)
bulk_no_commit|codegen/k_delayed.c|codegen.emu|begin_if(&e, LLVMBuildIsNotNull(b, dst, ""));|begin_if(&e, LLVMConstInt(g->i1, 0, 0));
bulk_row_stride|codegen/k_delayed.c|codegen.emu|c64(&e, (uint64_t)width * 8)|c64(&e, (uint64_t)width * 4)
bulk_one_cta|codegen/k_delayed.c|codegen.emu|	if (!e->bulk)     /* the per-layer kernel: one CTA does it */|	if (1)
reduce_tie_last|codegen/k_delayed.c|codegen.emu|LLVMBuildICmp(b, LLVMIntULT, oi, idx, "")|LLVMBuildICmp(b, LLVMIntUGT, oi, idx, "")
reduce_nan_lane|codegen/k_delayed.c|codegen.emu|		nn = LLVMBuildOr(b, nn, shfl_xor(e, nn, o), "");|		(void)0;
persist_stride_ctaid|codegen/k_gemm_sm90.c|codegen.emu_sm90a|*tile = add64(e, tl->cta, LLVMBuildMul(b, ti, tl->ncta, "tile"));|*tile = add64(e, tl->cta, LLVMBuildMul(b, ti, tl->cta, "tile"));
persist_ring_reset|codegen/k_gemm_sm90.c|codegen.emu_sm90a|	return LLVMBuildZExt(e->b, LLVMBuildLoad2(e->b, e->g->i32, ring, ""), e->g->i64, "");|	return c64(e, 0);
persist_group_16|codegen/k_gemm_sm90.c|codegen.emu_sm90a|	GROUP_N = 8,  |	GROUP_N = 16,  
wgrad_scales_no_warp_sync|codegen/k_gemm_sm90.c|codegen.emu_sm90a|		asm90_warp_sync(cg);|		;
interp_grouped_stats_group|ir/interp/interp.c|ir_interp.ops|		while (g < ng - 1 && r >= offs[g])|		while (g < ng - 1 && r > offs[g])
persist_group_clamp|codegen/k_gemm_sm90.c|codegen.emu_sm90a|LLVMValueRef nin = sel(e, ult(e, left, c64(e, GROUP_N)), left, c64(e, GROUP_N));|LLVMValueRef nin = c64(e, GROUP_N);
persist_grid_runtime|runtime/backend_cuda.c|runtime.plan|	else if (k->cooperative \|\| k->persistent)|	else if (k->cooperative)
persist_grid_launcher|driver/artifacts.c|lit.build|		else if (in->cooperative \|\| in->persistent)|		else if (in->cooperative)
rowcol_bank_order|codegen/k_rowcol.c|codegen.emu|LLVMValueRef up = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, t, c64(e, 4), ""), c64(e, 0), "");|LLVMValueRef up = LLVMConstInt(e->g->i1, 0, 0);
rowcol_one_group|codegen/k_rowcol.c|codegen.emu|		int ng = (int)(Bc / RT);|		int ng = 1;
rowcol_no_barrier|codegen/k_rowcol.c|codegen.emu|			barrier(&e);      /* the whole tile is in */|			(void)0;
rowcol_pair_order|codegen/k_rowcol.c|codegen.emu|		LLVMValueRef h2[2] = {LLVMBuildTrunc(b, u, e->g->i16, ""),|		LLVMValueRef h2[2] = {LLVMBuildTrunc(b, LLVMBuildLShr(b, u, c32(e, 16), ""), e->g->i16, ""),
share_no_alias|runtime/layer.c|runtime.layer$|		if (sh->alias[b] >= 0)\n			buf[b] = (char *)(uintptr_t)root_saved +|		if (0)\n			buf[b] = (char *)(uintptr_t)root_saved +
share_no_copy|runtime/layer.c|runtime.layer$|		if (rt->ops->copy(rt, dst, buf[b], n, stream))|		if ((void)dst, 0)
share_any_input|runtime/share.c|runtime.layer$|			ok = !is_in(k, p) \|\| eq[b] >= 0;|			ok = 1;
share_no_promote|runtime/share.c|runtime.layer$|				r->split->place[s->alias[b]] = PRECC_PLACE_SAVED;|				(void)0;
transpose_no_swizzle|codegen/k_transpose.c|codegen.emu|	LLVMValueRef sx = LLVMBuildShl(b, LLVMBuildAnd(b, LLVMBuildLShr(b, r, c64(e, 4), ""), c64(e, 3), ""),|	LLVMValueRef sx = LLVMBuildShl(b, LLVMBuildAnd(b, LLVMBuildLShr(b, r, c64(e, 4), ""), c64(e, 0), ""),
tile_half_swizzle|codegen/k_tile.c|codegen.emu|			LLVMValueRef ch = LLVMBuildXor(b, LLVMBuildURem(b, tid, c64(e, 8), ""),\n			                               LLVMBuildUDiv(b, r, c64(e, 64), ""), "");|			LLVMValueRef ch = LLVMBuildURem(b, tid, c64(e, 8), "");
rowcol_rht_skipped|codegen/k_rowcol.c|codegen.emu|			rht_block(e, &k->f->ins[k->had], xv[c], y);|			memcpy(y, xv[c], sizeof y);
hadamard_one_amax|codegen/k_hadamard.c|codegen.emu|		LLVMValueRef cm = cta_max(e, m[s]);|		LLVMValueRef cm = cta_max(e, m[0]);
amax_rowcol_word_col|codegen/k_rowcol.c|codegen.emu|	                       add64(e, mul64(e, LLVMBuildUDiv(b, l, c64(e, TC / VEC), ""), 4), j)));|	                       add64(e, mul64(e, LLVMBuildUDiv(b, l, c64(e, TC / VEC), ""), 4), c64(e, 0))));
rowcol_param_row|codegen/k_rowcol.c|codegen.emu|k->bc ? c64(e, (uint64_t)k->bc) : C, "");|k->bc ? c64(e, (uint64_t)k->bc) : c64(e, TC), "");
rowcol_static_cols|codegen/k_rowcol.c|codegen.emu|C = top->has_cols ? e.cols : dimv(&e, e.k->cols);|C = dimv(&e, e.k->cols);
cols_wrong_runtime|runtime/backend_cuda.c|runtime.precc_run.cols|int64_t m64 = m, cols64 = k->cols;|int64_t m64 = m, cols64 = k->cols + k->cols_align;
cols_wrong_launcher|driver/artifacts.c|runtime.precc_run.cols|fprintf(c, "%s(void *)&ncols", sep), sep = ", ";|fprintf(c, "%s(void *)&m", sep), sep = ", ";
sr_row_threads|codegen/kernel.c|codegen.ptxas|long cap = k->q >= 0 && k->f->ins[k->q].round == PRECC_SR ? 512 : 1024;|long cap = 1024;
rowcol_maxnreg|codegen/kemit.c|codegen.ptxas|: k->shape == CG_QUANT_ROWCOL ? (rc4 > 255 ? 255 : rc4)|: k->shape == CG_QUANT_ROWCOL ? 0
e2m1_nibble_interp|ir/interp/quant.c|refsem.test_fp4_pack|			unsigned sh = 4 * (j & 1);|			unsigned sh = 4 * (~j & 1);
e2m1_nibble_store|codegen/emit.c|codegen.emu|word = LLVMBuildOr(e->b, word, LLVMBuildShl(e->b, c, c32(e, 4 * i), ""), "");|word = LLVMBuildOr(e->b, word, LLVMBuildShl(e->b, c, c32(e, 4 * (i ^ 1)), ""), "");
e2m1_upcast_bytes|codegen/k_gemm.c|codegen.emu|sel(e, ok, gk, c64(e, 0))), c64(e, 1), "");|sel(e, ok, gk, c64(e, 0))), c64(e, 0), "");
e2m1_sr_halves|codegen/emit_quant.c|codegen.emu|			rb[8 * j + w] = w & 1 ? LLVMBuildLShr|			rb[8 * j + w] = !(w & 1) ? LLVMBuildLShr
wgmma_trans_b|codegen/k_gemm_sm90.c|codegen.emu_sm90a|d + mi * (z->bn / 2), sd, mna \| mnb << 1);|d + mi * (z->bn / 2), sd, mna);
wgmma_trans_a|codegen/k_gemm_sm90.c|codegen.emu_sm90a|d + mi * (z->bn / 2), sd, mna \| mnb << 1);|d + mi * (z->bn / 2), sd, mnb << 1);
wgmma_nkt_floor|codegen/k_gemm_sm90.c|codegen.emu_sm90a|add64(e, dimv(e, g->K), c64(e, (uint64_t)s->bke - 1))|add64(e, dimv(e, g->K), c64(e, 0))
wgmma_k_loop_short|codegen/k_gemm_sm90.c|codegen.emu_sm90a|	LLVMValueRef kt = loop_begin(e, &l, c64(e, 0), nkt);\n	LLVMValueRef s, ph;\n	ring_at(e, z, add64(e, it0, kt), &s, &ph);\n	asm90_mbar_wait(cg, full_bar|	LLVMValueRef kt = loop_begin(e, &l, c64(e, 0), LLVMBuildSub(b, nkt, c64(e, 1), ""));\n	LLVMValueRef s, ph;\n	ring_at(e, z, add64(e, it0, kt), &s, &ph);\n	asm90_mbar_wait(cg, full_bar
wgmma_mn_box_coords|codegen/k_gemm_sm90.c|codegen.emu_sm90a|		                  LLVMBuildAdd(e->b, r, c32(e, (unsigned)(j * MN_BOX)), ""), k0, bar);|		                  k0, LLVMBuildAdd(e->b, r, c32(e, (unsigned)(j * MN_BOX)), ""), bar);
wgmma_mn_lbo|codegen/k_gemm_sm90.c|codegen.emu_sm90a|return mn ? asm90_desc_mn128(e->g, p, MN_BOX_BYTES)|return mn ? asm90_desc_mn128(e->g, p, 2 * MN_BOX_BYTES)
wgmma_mn_kstep|codegen/k_gemm_sm90.c|codegen.emu_sm90a|c64(e, (uint64_t)(ks * (KSTEP / 2) * KB / 16));|c64(e, (uint64_t)(ks * KSTEP / 16));
tmap_cols_m_runtime|runtime/cuda.c|runtime.backend|cols = t->cols < 0 ? m : t->cols;|cols = t->cols < 0 ? 1 : t->cols;
tmap_cols_m_launcher|driver/artifacts.c|lit.build|				c_dim(c, t->cols < 0 ? DIM_M : t->cols);|				c_dim(c, t->cols < 0 ? 16 : t->cols);
tmap_launcher_args|driver/artifacts.c|lit.build|			fprintf(c, "%s(void *)&tm[%d]", sep, i), sep = ", ";|			(void)i;
wgmma_promote_tail|codegen/k_gemm_sm90.c|codegen.emu_sm90a|begin_if(e, LLVMBuildOr(b, at_p, last, ""));|begin_if(e, LLVMBuildAnd(b, at_p, LLVMBuildOr(b, at_p, last, ""), ""));
tensor_scale_unbounded|codegen/k_gemm.c|codegen.emu$\|codegen.emu_sm90a|	*p = sel(e, over, cf(e, 0x1p64), sel(e, under, cf(e, 0x1p-64), cf(e, 1.0)));|	*p = cf(e, 1.0);
grid_tiled_rows|include/precc/grid.h|runtime.plan.fake\|runtime.precc_run.m_variant|gy = (g->rows + g->tile_rows - 1) / g->tile_rows;|gy = g->rows / g->tile_rows;'
# issue 29, MoE (moefront): gemm_grouped's reference and lowering, the fused-expert
# configs, routers in bf16
MUTANTS="$MUTANTS
grouped_b_offset|ir/interp/grouped.c|ir.grouped\|frontend.grouped_lower|s.b.data = (const char *)d->b.data + (size_t)g * (size_t)d->n|s.b.data = (const char *)d->b.data + (size_t)(g ? g - 1 : 0) * (size_t)d->n
grouped_monotone|ir/interp/grouped.c|ir.grouped|if (g && offs[g] < offs[g - 1])|if (0 && offs[g] < offs[g - 1])
router_bf16|frontend/plan.c|lit.check|				keep_router(lp, g);|				(void)lp;
fused_layout|frontend/hf_arch.c|lit.check|\"num_local_experts\", \"num_experts\", true,|\"num_local_experts\", \"num_experts\", false,
dsv2_expert_bias|frontend/hf_arch.c|lit.check|false, -1, false);|false, -1, d->mlp_bias);"
# issue 28 §6, compile time (compiletime): LLVM once per kernel across targets, ptxas once per PTX;
# (compile-time) the jobs largest first by job_cost (tests/lit/build/order.test)
MUTANTS="$MUTANTS
llvm_share_keeps_target|driver/build.c|lit.build|*to = b->tg[j->t]->name;|*to = from;
ptxas_share_half_cubin|driver/build.c|lit.build|			j->e.cubin_len = o->e.cubin_len;|			j->e.cubin_len = o->e.cubin_len / 2;
order_ascending|driver/build.c|lit.build|return ca != cb ? (ca < cb) - (ca > cb) : (a > c) - (a < c);|return ca != cb ? (ca > cb) - (ca < cb) : (a > c) - (a < c);
order_no_rht_cost|driver/build.c|lit.build|	if (had && q)\n		c += 450;|	if (had && q)\n		c += 0;"
# issue 31 §4-5 (rtfloors): the stream and device checks, the state file's SR counter,
# the buffer-extent cache
MUTANTS="$MUTANTS
stream_other_ctx|runtime/cuda.c|runtime.plan.fake\|runtime.layer.fake|	if (c != rt->ctx) {|	if (0) {
ptr_other_device|runtime/cuda.c|runtime.plan.fake|	if (ord != (int)rt->dev) {|	if (0) {
sr_counter_not_saved|runtime/state.c|runtime.state\|runtime.resume|	p = put64(p, st->sr_counter);|	p = put64(p, 0);
sr_counter_not_loaded|runtime/state.c|runtime.state\|runtime.resume|	st->sr_counter = get32(buf + 8) >= 2 ? get64(p) : 0;|	(void)p;
extent_stale_m|runtime/artifact.c|runtime.plan\|runtime.layer$|	if (x->m != m \|\| m <= 0) {|	if (m <= 0) {
wgmma_scale_straddle|codegen/k_gemm_sm90.c|codegen.errors|	return br > 1 && !op->up && !scale_uniform(f, op, tile);|	return 0;"

# epilogue (issue 28 §3): a 16-bit C leaves through stmatrix into a swizzled
# buffer and TMA stores left in flight under the next tile. The buffer
# rewritten before the previous tile's store has read it (no wait), a thread
# leaving with its store in flight, the stmatrix rows unswizzled, no proxy
# fence before the store, both consumer warpgroups on one named barrier,
# the column stripes 128 bytes apart whatever the span (64- and 32-byte
# spans: tiles 16..240 wide that are not multiples of 64).
MUTANTS="$MUTANTS
epi_no_wait_read|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|	asm90_bulk_wait_read0(cg);\n	end_if(e, w);|	end_if(e, w);
epi_no_last_wait|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|		asm90_bulk_wait_read0(cg);\n		end_if(e, last);|		end_if(e, last);
epi_no_swizzle|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|c64(e, (uint64_t)chunks - 1), \"\");|c64(e, 0), \"\");
epi_no_proxy_fence|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|	asm90_fence_proxy_async(cg);\n	asm90_bar_named(cg, bar, WG);|	asm90_bar_named(cg, bar, WG);
epi_one_named_barrier|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|LLVMValueRef bar = LLVMBuildTrunc(b, add64(e, cw, c64(e, 1)), cg->i32, \"\");|LLVMValueRef bar = c32(e, 1);
epi_stripe_span128|codegen/k_gemm_sm90.c|codegen.emu_sm90a_tiles|mul64(e, stripe, (uint64_t)(rows * span))|mul64(e, stripe, (uint64_t)(rows * 128))"

# sm90sched (issue 28 §1): the wgmma family's shapes. A ring of one stage
# more than 227 KiB holds, B's box as tall as A's, a 256-row tile's second
# m64 block read from the first's rows, the shape's stages not the ones
# codegen uses in the ring.
MUTANTS="$MUTANTS
sm90_stages_overflow|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|	z->stages = (SMEM_MAX - SMEM_STATIC - z->c_bytes - tail) / (z->stage_bytes + z->sc_bytes + 2 * 8);|	z->stages = (SMEM_MAX - SMEM_STATIC - z->c_bytes - tail) / (z->stage_bytes + z->sc_bytes + 2 * 8) + 1;
sm90_box_rows|codegen/k_gemm_sm90.c|codegen.emu_sm90a_tiles|			t->box_rows = o ? z.bn / z.cm : z.bm;|			t->box_rows = o ? z.bm : z.bn / z.cm;
sm90_mi_rows|codegen/k_gemm_sm90.c|codegen.emu_sm90a_tiles|c64(e, (uint64_t)(mi * WGMMA_M * KB))))));|c64(e, 0)))));
sm90_frag_mi|codegen/k_gemm_sm90.c|codegen.emu_sm90a_tiles|LLVMValueRef v = add64(e, r, c64(e, (uint64_t)(WGMMA_M * mi + 8 * h)));|LLVMValueRef v = add64(e, r, c64(e, (uint64_t)(8 * h)));"

# issue 31 §2: precc.torch's bulk commit (Group._commit_bulk) over each
# layer's fixed saved region: the table's addresses out of order, a region
# handed to a second forward while autograd still holds the first's, a layer
# run twice in a step committed in bulk.
MUTANTS="$MUTANTS
torch_bulk_saved_order|python/precc/torch/_ops.py|python.torch|BulkCommit(rt, layers, mp, [p.saved.data_ptr() for p in ps]|BulkCommit(rt, layers, mp, [p.saved.data_ptr() for p in reversed(ps)]
torch_slot_in_use|python/precc/torch/_ops.py|python.torch|            if e[2] or e[0]._use_count() != 1:|            if e[2]:
torch_bulk_twice|python/precc/torch/_ops.py|python.torch|            if any(p.plan in twice for ps in sets.values() for p in ps):|            if False:
torch_fast_again|python/precc/torch/_ops.py|python.torch|g.pending.append(_ApiPending(self, saved, ctx.state, m, e, again))|g.pending.append(_ApiPending(self, saved, ctx.state, m, e, False))
rt_seen_off|runtime/run.c|runtime.layer.fake|	if (seen_holds(seen, p))\n		return 1;\n	if (!rt->ops->mem_ok|	if (!rt->ops->mem_ok
cast_prologue|passes/fuse.c|lit.build$|		bool ok = (i->op == OP_transpose \|\| i->op == OP_pad)|		bool ok = (i->op == OP_transpose \|\| i->op == OP_cast \|\| i->op == OP_pad)
cast_pair|codegen/emit.c|codegen.emu$|: asm_cvt_16x2(e->g, f, x[per * j + 2 * i], x[per * j + 2 * i + 1]),|: asm_cvt_16x2(e->g, f, x[per * j + 2 * i + 1], x[per * j + 2 * i]),
layer_out_amax_wanted|runtime/layer.c|runtime.layer$|		if (!k->param[p].out \|\| s->out_amax[b])|		if (!k->param[p].out)
layer_out_amax_dx|runtime/split.c|runtime.layer$|    && gemm_writes(a, l, b)) {|    && 0) {"

# issue 29 §1-2 (grouped): the grouped GEMM family's tile scheduler. A row
# tile that runs past its expert's end into the next expert's rows (with
# this expert's weights), a tile id at an expert's last tile counted to
# that expert (off by one at the group's end), a grouped wgrad summing
# from token 0 instead of its expert's first token.
MUTANTS="$MUTANTS
grouped_tile_straddle|codegen/k_gemm_grouped.c|codegen.emu$|		.mend = end,|		.mend = M,
grouped_end_off_by_one|codegen/k_gemm_grouped.c|codegen.emu$|LLVMBuildICmp(b, LLVMIntUGE, tile, add64(e, base, nt), \"\")|LLVMBuildICmp(b, LLVMIntUGT, tile, add64(e, base, nt), \"\")
grouped_k_from_0|codegen/k_gemm_grouped.c|codegen.emu$|		.kbase = kbase, .klen = klen,|		.kbase = c64(e, 0), .klen = klen,"

# issue 29 (groupdgrad): the grouped dgrad, B stacked along K. Every
# expert's tile reading expert 0's weights (no K window), B's scales read
# at A's K (expert 0's), the reference slicing expert 0's columns for every
# expert. (dgrad's weight scales per expert are not lowered grouped yet:
# group_refusal in frontend/lower.c.)
MUTANTS="$MUTANTS
grouped_dgrad_expert0_weights|codegen/k_gemm_grouped.c|codegen.emu$|		p.bkbase = mul64(e, ge, (uint64_t)g.K);|		p.bkbase = c64(e, 0);
grouped_dgrad_scale_k|codegen/k_gemm.c|codegen.emu$|LLVMValueRef bk = fr->bk ? add64(e, kstart, fr->bk) : kstart;|LLVMValueRef bk = kstart;
grouped_dgrad_ref_columns|ir/interp/grouped.c|ir.grouped\|frontend.grouped_lower|			long c0 = (long)g * d->k;|			long c0 = 0;"

# grouped-amax (issue 29 §1): a tensorwise weight scale per expert, {N x *}
# over the stacked weights. The quantize's rows all taking expert 0's
# scale (one scale shared across experts); an amax counted to the expert
# after its own unless it starts its expert's rows (the slot rounded up:
# an off-by-one expert lookup); the fused-transpose
# quantize looking up the scale by its 64-row tile, not by the row (a tile
# across two experts); the lowering making one tensorwise scale for all
# the stacked experts.
MUTANTS="$MUTANTS
seg_shared_scale|codegen/k_flat.c|codegen.emu$|		bidx = LLVMBuildUDiv(e->b, idx, c64(e, span), \"\");|		bidx = c64(e, 0);
seg_amax_next_expert|codegen/emit_quant.c|codegen.emu$|LLVMValueRef slot = LLVMBuildUDiv(e->b, idx, c64(e, (uint64_t)span), \"\");|LLVMValueRef slot = LLVMBuildUDiv(e->b, add64(e, idx, c64(e, (uint64_t)span - 1)), c64(e, (uint64_t)span), \"\");
seg_transpose_tile_scale|codegen/k_transpose.c|codegen.emu$|LLVMBuildUDiv(b, grow, c64(e, (uint64_t)k->seg), \"\")|LLVMBuildUDiv(b, LLVMBuildMul(b, trw, c64(e, T), \"\"), c64(e, (uint64_t)k->seg), \"\")
grouped_weight_scale|frontend/lower.c|frontend.grouped_lower|			b0 = l->out;|			b0 = 0;"

# grouped-act (issue 29 §1): a tensorwise activation scale per expert,
# {gx*} over the routed rows of %offs. The group lookup never past the
# last group (a padding row counted in the last expert's amax and
# quantized with its scale); the quantize taking the neighbour expert's
# scale (group g xor 1); the grouped GEMM de-scaling a tile with the
# neighbour expert's activation scale.
MUTANTS="$MUTANTS
group_gemm_neighbour_scale|codegen/k_gemm.c|codegen.emu$|		ix = e->grp;    /* one per group: the tile's (k_gemm_grouped*.c) */|		ix = LLVMBuildXor(b, e->grp, c64(e, 1), \"\");
group_pad_counts|codegen/emit_quant.c|codegen.emu$|LLVMValueRef in = LLVMBuildICmp(b, LLVMIntULE, cand, c64(e, (uint64_t)G), \"\");|LLVMValueRef in = LLVMBuildICmp(b, LLVMIntULT, cand, c64(e, (uint64_t)G), \"\");
group_neighbour_scale|codegen/k_flat.c|codegen.emu$|		bidx = LLVMBuildSelect(e->b, pad, last, grp, \"\");|		bidx = LLVMBuildSelect(e->b, pad, last, LLVMBuildXor(e->b, grp, c64(e, 1), \"\"), \"\");"

# grouped-wgrad (issue 29): current scaling's grouped wgrad, {*xg}. The
# transposed quantize taking the neighbour expert's scale (group g xor 1)
# for its codes; a window's element loads starting one token early (the
# last token of expert g read into g+1's K range); a window's cp.async
# copying whole 16 bytes past its end (the next expert's first tokens read
# into g's K range); the lowering's wgrad quantizing dY and x with one
# tensorwise scale for every expert.
MUTANTS="$MUTANTS
group_t_neighbour_scale|codegen/k_transpose.c|codegen.emu$|c64(e, (uint64_t)k->f->val[k->goffs].type.dim[0] - 1), grp, \"\");|c64(e, (uint64_t)k->f->val[k->goffs].type.dim[0] - 1), LLVMBuildXor(b, grp, c64(e, 1), \"\"), \"\");
kwin_gather_early|codegen/k_gemm.c|codegen.emu$|store_al(e, gather_chunk(e, base, eb, gr, gk, R, KE, K, c64(e, 1)), gep(e, sm, dst), 16);|store_al(e, gather_chunk(e, base, eb, gr, LLVMBuildSub(b, gk, c64(e, 1), \"\"), R, KE, K, c64(e, 1)), gep(e, sm, dst), 16);
kwin_copy_past_end|codegen/k_gemm.c|codegen.emu$|asm_cp_async(e->g, gep(e, sm, dst), gep(e, base, off), sel(e, ok, nb, c32(e, 0)));|asm_cp_async(e->g, gep(e, sm, dst), gep(e, base, off), sel(e, ok, c32(e, 16), c32(e, 0)));
group_wgrad_one_scale|frontend/lower.c|frontend.grouped_lower|	bool gact = l->groups && (k == 0 \|\| l->g == GEMM_WGRAD) && c->scaling == SCALING_CURRENT;|	bool gact = l->groups && k == 0 && l->g != GEMM_WGRAD && c->scaling == SCALING_CURRENT;"

# mxwgmma (issue 28 §5): MXFP8 on wgmma, a promotion every 32 K inside the
# stage. Every chunk scaled by the stage's first chunk's scales; the
# chunks past K promoted (their scales read past the tensor's); a chunk's
# wgmma added onto the previous chunk's partial sum (scale-d 1); in a
# whole n-block every column scaled by the first column pair's scales.
MUTANTS="$MUTANTS
mx_chunk_scale_first|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|chunk_scales(e, z, g, tid, p, live ? sel(e, live, kc, kel) : kc, &sc);|chunk_scales(e, z, g, tid, p, kel, &sc);
mx_chunk_past_k|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|	int guard = g->K < 0 \|\| g->K % bke \|\| p->ktail;|	int guard = 0;
mx_chunk_scale_d|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|d + mi * (z->bn / 2), c32(e, j ? 1 : 0),|d + mi * (z->bn / 2), c32(e, 1),
mx_whole_column|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|p->bbase, fr.colv[ni][x]), nbk|p->bbase, fr.colv[0][x]), nbk"

# ffma (issue 28 §4): blockwise promotion as DeepGEMM does it. The
# promotion as a separate multiply and add (two roundings) in the wgmma
# kernel, the mma.sync kernel and the interpreter's promotion pass (each
# against the FFMA model); the consumers reading the scales of stage 0's
# slot whatever the stage; the producer warp storing a stage's scales into
# the next stage's slot; the full barrier expecting the TMA lane alone
# (the other lanes' scale stores then unordered before the consumers').
MUTANTS="$MUTANTS
ffma_sm90_mul_add|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|		           : ffma_rn(e, in, fmul_rn(e, sc->sa[mi][(j / 2) % 2], sc->sb[j / 4][j % 2]), o);|		           : fadd_rn(e, o, fmul_rn(e, in, fmul_rn(e, sc->sa[mi][(j / 2) % 2], sc->sb[j / 4][j % 2])));
ffma_sync_mul_add|codegen/k_gemm.c|codegen.emu$|				       : ffma_rn(e, in, fmul_rn(e, sa[mi][v >> 1], sb[ni][v & 1]), o);|				       : fadd_rn(e, o, fmul_rn(e, in, fmul_rn(e, sa[mi][v >> 1], sb[ni][v & 1])));
ffma_interp_mul_add|ir/interp/gemm.c|interp.test_gemm|				o[j] = fmaf(in[j], s * sb[j], o[j]);|				o[j] = o[j] + in[j] * (s * sb[j]);
ffma_slot_stage0|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|	LLVMValueRef sa = scale_slot(e, z, sm, s, 0), sb = scale_slot(e, z, sm, s, 1);|	LLVMValueRef sa = scale_slot(e, z, sm, c64(e, 0), 0), sb = scale_slot(e, z, sm, c64(e, 0), 1);
ffma_slot_next|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|		producer_scales(e, z, g, sm, s, lane, p, kstart);|		producer_scales(e, z, g, sm, LLVMBuildURem(b, add64(e, s, c64(e, 1)), c64(e, (uint64_t)z->stages), \"\"), lane, p, kstart);
ffma_full_count_one|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|(uint64_t)(z.bar_off + 8 * s))), g.op[0].up ? WG : z.sc_na ? 32 : 1);|(uint64_t)(z.bar_off + 8 * s))), g.op[0].up ? WG : 1);"

# nvfp4wgmma (issue 28 §5): NVFP4 on wgmma, e2m1 codes upcast to bf16 by
# the producer warpgroup. Its shared stores not fenced for the async proxy
# before the arrival (the emulator's wgmma: "no fence.proxy.async"); the
# full barrier completed by the first upcasting thread's arrival; a
# promotion every 32 K instead of the scale block's 16 (two k16 wgmmas a
# chunk); the upcast's stores unswizzled; every column of a 16 x 16
# weight tile with the first block's scale (P = 64's global path,
# wgmma_nvfp4_p64.ir). nvfp4-speed (§5 follow-up): the chunk scales in
# the stage's slot read from the previous stage's; the producer's scale
# stores after its arrival on full (the emulator's racecheck: an arriver
# joins the phase's epoch); every 16-column block with the first's scale;
# a wgrad lane's columns from another lane's row; chunks past K's scales
# read past the tensor (memcheck).
MUTANTS="$MUTANTS
nvfp4_no_proxy_fence|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|add64(e, k0, p->kb), lane);\n		asm90_fence_proxy_async(cg);|add64(e, k0, p->kb), lane);
nvfp4_full_count_one|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|(uint64_t)(z.bar_off + 8 * s))), g.op[0].up ? WG : z.sc_na ? 32 : 1);|(uint64_t)(z.bar_off + 8 * s))), g.op[0].up ? 1 : z.sc_na ? 32 : 1);
nvfp4_promote32|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|	int nch = (int)(bke / g->P), per|	int nch = (int)(bke / g->P / (g->op[0].up ? 2 : 1)), per
nvfp4_no_swizzle|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|c64(e, (uint64_t)h)), x, \"\");|c64(e, (uint64_t)h)), c64(e, 0), \"\");
nvfp4_weight_block_first|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|: b16 && (ni % 2 \|\| x) ? sc->sb[ni & ~1][0]|: b16 && (ni % 2 \|\| x) ? sc->sb[0][0]
nvfp4_slot_prev_stage|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|	LLVMValueRef sa = up_slot(e, z, sm, s, 0);|	LLVMValueRef sa = up_slot(e, z, sm, LLVMBuildURem(b, add64(e, s, c64(e, (uint64_t)z->stages - 1)), c64(e, (uint64_t)z->stages), \"\"), 0);
nvfp4_scales_after_arrive|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|		if (z->up_nch)\n			producer_up_scales(e, z, g, sm, s, lane, p, k0);\n		upcast_operand(e, g, &g->op[0], st, z->bm, row0, p->mend, add64(e, k0, p->ka), lane);\n		upcast_operand(e, g, &g->op[1], gep(e, st, c64(e, (uint64_t)z->a_bytes)), z->bn, col0,\n		               add64(e, p->bbase, p->nend), add64(e, k0, p->kb), lane);\n		asm90_fence_proxy_async(cg);\n		asm90_mbar_arrive(cg, full);|		upcast_operand(e, g, &g->op[0], st, z->bm, row0, p->mend, add64(e, k0, p->ka), lane);\n		upcast_operand(e, g, &g->op[1], gep(e, st, c64(e, (uint64_t)z->a_bytes)), z->bn, col0,\n		               add64(e, p->bbase, p->nend), add64(e, k0, p->kb), lane);\n		asm90_fence_proxy_async(cg);\n		asm90_mbar_arrive(cg, full);\n		if (z->up_nch)\n			producer_up_scales(e, z, g, sm, s, lane, p, k0);
nvfp4_slot_block_first|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|sc->sb[ni][x] = z->up_b16 ? v[ni / 2] : v[2 * ni + x];|sc->sb[ni][x] = z->up_b16 ? v[0] : v[2 * ni + x];
nvfp4_slot_column_row|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|LLVMValueRef t4 = LLVMBuildURem(b, tid, c64(e, 4), \"\");|LLVMValueRef t4 = LLVMBuildURem(b, LLVMBuildUDiv(b, tid, c64(e, 4), \"\"), c64(e, 4), \"\");
nvfp4_slot_chunk_past_k|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|		kc[c] = sel(e, ult(e, kc[c], p->klen), kc[c], kel);|		(void)kel;"

# issue 29 (moe-bench): the expert groups' traffic in precc build --stats. The
# grouped plan's rows without GroupedExperts' token_align padding (m_total
# = M), a grouped GEMM reading all m_total rows rather than the experts'.
MUTANTS="$MUTANTS
stats_no_align_pad|driver/stats.c|lit.build|	t->m_total = round_up(m + (long)ne * (t->align - 1), t->mm);|	t->m_total = round_up(m, t->mm);
stats_grouped_reads_all|driver/stats.c|lit.build|kernel_traffic(k, reads_offsets(st, offs) ? t->gemm_rows : t->m_total,|kernel_traffic(k, t->m_total,"
# The grouped GEMM benchmark: bench_grouped_gpu without GroupedExperts'
# token_align padding (m_total = M: the fake driver's launches then cover
# fewer rows than the bound), the audit's grouped kernels unnamed ("?"),
# the cost model's grouped tiles all on one CTA.
MUTANTS="$MUTANTS
grouped_bench_no_pad|bench/bench_grouped_gpu.c|bench.grouped.fake|		g.m_total = round_up(g.m + ne * (al - 1), mm);|		g.m_total = round_up(g.m, mm);
sass_audit_group_names|bench/sass_audit.py|bench.sass_audit_layers|    fqn.update({c: g[\"name\"] for c, g in group.items()})|    fqn.update({})
gemm_model_grouped_one_cta|bench/gemm_model.py|bench.gemm_model_grouped|            load[t % SMS] += kt * per_k + epi|            load[0] += kt * per_k + epi"

# issue 29 §2: the grouped GEMM on wgmma (k_gemm_grouped_sm90.c). A tile
# whose rows run on past its expert's end (stored with this expert's
# weights: a tile straddling two experts), a tile id at an expert's last
# tile counted to that expert, every expert reading expert 0's slice of
# B, a grouped dgrad reading expert 0's K columns, a grouped wgrad summing
# from token 0, and the producer leaving the tokens past an expert's end
# in its last stage (the next expert's) unzeroed: all of them, or a
# K-major (fp8) stage's bytes.
MUTANTS="$MUTANTS
grouped90_tile_straddle|codegen/k_gemm_grouped_sm90.c|codegen.emu_sm90a$|	p->mend = end;|	p->mend = M;
grouped90_end_off_by_one|codegen/k_gemm_grouped_sm90.c|codegen.emu_sm90a$|LLVMBuildICmp(b, LLVMIntUGE, tile, add64(e, base, nt), \"\")|LLVMBuildICmp(b, LLVMIntUGT, tile, add64(e, base, nt), \"\")
grouped90_b_expert0|codegen/k_gemm_grouped_sm90.c|codegen.emu_sm90a$|	p->bbase = g->bkstack ? c64(e, 0) : mul64(e, ge, (uint64_t)g->n);|	p->bbase = c64(e, 0);
grouped90_dgrad_expert0|codegen/k_gemm_grouped_sm90.c|codegen.emu_sm90a$|	p->kb = g->bkstack ? mul64(e, ge, (uint64_t)g->K) : c64(e, 0);|	p->kb = c64(e, 0);
grouped90_k_from_0|codegen/k_gemm_grouped_sm90.c|codegen.emu_sm90a$|	p->ka = p->kb = kbase;|	p->ka = p->kb = c64(e, 0);
grouped90_no_tail_zero|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|		zero_tail(e, z, g, st, p->ktail);\n|
grouped90_kmajor_tail|codegen/k_gemm_sm90.c|codegen.emu_sm90a$|LLVMValueRef by = loop_begin(e, &lk, mul64(e, t, (uint64_t)eb), c64(e, KB));|LLVMValueRef by = loop_begin(e, &lk, c64(e, KB), c64(e, KB));
cluster_remote_release|tests/codegen/emu_tma.c|codegen.cluster|			if (b->vc_pend && my_vc)\n				emu_vc_release(b->vc_pend);\n			b->pending--;|			b->pending--;
cluster_grid_multiple|tests/codegen/emu.c|codegen.cluster|		if (gx % clu_x \|\| gy % clu_y) {|		if (0) {
cluster_init_published|tests/codegen/emu_tma.c|codegen.cluster|	if (!b->fenced \|\| emu_cluster_waited() < b->cinit) {|	if (0) {
cluster_rank_x_fastest|tests/codegen/emu.c|codegen.cluster|			clu_rank[c] = (int)(cx % clu_x + cy % clu_y * clu_x);|			clu_rank[c] = (int)(cy % clu_y + cx % clu_x * clu_y);
cluster_kernel_own_release|codegen/k_gemm_sm90.c|codegen.emu_sm90a_cluster|	return z->cm;\n}|	return 1;\n}
cluster_kernel_mask_self|codegen/k_gemm_sm90.c|codegen.emu_sm90a_cluster|	return (1u << z->cm) - 1;|	return 1u;
cluster_kernel_no_final_sync|codegen/k_gemm_sm90.c|codegen.emu_sm90a_cluster|	if (z.cm > 1)\n		asm90_cluster_sync(cg);\n	return 0;|	return 0;
cluster_launch_no_attr|runtime/cuda.c|runtime.plan.fake$|	                       stream, &at, 1};|	                       stream, &at, 0};
cluster_grid_not_multiple|runtime/backend_cuda.c|runtime.plan.fake$|	if (k->cluster > 1)\n		cluster_grid(rt, ck, grid);|	if (0)\n		cluster_grid(rt, ck, grid);
cluster_no_occupancy|runtime/cuda.c|runtime.plan.fake$|	if (!rc && drv.cuOccupancyMaxActiveClusters) {|	if (0) {
cluster_manifest_any|runtime/artifact.c|runtime.plan.fake$|		if (need_long(c, j, path, \"cluster\", 1, 2, &x))|		if (need_long(c, j, path, \"cluster\", 1, 16, &x))
cluster_rule_one_wave|passes/schedule.c|lit.build|	else if (tiles <= t->sms)|	else if (0)
cluster_rule_odd_m|passes/schedule.c|lit.build|	else if (m >= 0 && mb % 2)|	else if (0)
cluster_launcher_flags|driver/artifacts.c|lit.build|		if (in->cluster > 1)\n			snprintf(flags + strlen(flags)|		if (0)\n			snprintf(flags + strlen(flags)
cluster_build_key|driver/build.c|lit.build|	if (b->cluster != GEMM_CLUSTER_1X1) {  /* other kernels */|	if (0) {
cluster_bench_one_build|bench/gemm/lease_gemm.sh|bench.cluster.fake|printf '%s.1x1:%s %s.2x1:%s '|printf '%s.1x1:%s %s.1x1:%s '"

survivors=0
stale=0
total=0
tmp=$(mktemp -d)
restore() { [ -n "${cur:-}" ] && [ -f "$tmp/orig" ] && cp "$tmp/orig" "$cur"; cur=; }
trap 'restore; rm -rf "$tmp"; exit 130' INT TERM
OLDIFS=$IFS
IFS='
'
for line in $MUTANTS; do
	IFS=$OLDIFS
	name=${line%%|*}; rest=${line#*|}
	file=${rest%%|*}; rest=${rest#*|}
	# tests may hold an escaped \| (a regex alternation)
	tests=$(printf '%s' "$rest" | sed 's/\\|/\x01/g' | cut -d'|' -f1 | sed 's/\x01/|/g')
	rest=$(printf '%s' "$rest" | sed 's/\\|/\x01/g' | cut -d'|' -f2- | sed 's/\x01/\\|/g')
	from=$(printf '%s' "$rest" | sed 's/\\|/\x01/g' | cut -d'|' -f1 | sed 's/\x01/|/g')
	to=$(printf '%s' "$rest" | sed 's/\\|/\x01/g' | cut -d'|' -f2- | sed 's/\x01/|/g')
	IFS='
'
	if [ -n "$ONLY" ] && ! echo " $ONLY " | grep -q " $name "; then continue; fi
	total=$((total + 1))
	cur=$file
	cp "$file" "$tmp/orig"
	if ! python3 - "$file" "$from" "$to" <<'PY'
import sys
p, a, b = sys.argv[1], sys.argv[2].replace('\\n', '\n'), sys.argv[3].replace('\\n', '\n')
s = open(p).read()
if s.count(a) != 1:
    sys.exit(1)
open(p, 'w').write(s.replace(a, b))
PY
	then
		echo "STALE    $name: the text to mutate is not once in $file"
		stale=$((stale + 1))
		restore
		continue
	fi
	if ! nice cmake --build "$B" -j2 >"$tmp/build.log" 2>&1; then
		echo "killed   $name (does not build)"
		restore
		continue
	fi
	if nice ctest --test-dir "$B" -j2 -R "$tests" >"$tmp/test.log" 2>&1; then
		echo "SURVIVED $name ($file; ran: $tests)"
		survivors=$((survivors + 1))
	else
		echo "killed   $name by $(sed -n '/tests FAILED/,$p' "$tmp/test.log" | grep ' - ' | sed 's/.* - //; s/ (.*//' | tr '\n' ' ')"
	fi
	restore
done
IFS=$OLDIFS
# rebuild the unmutated tree
nice cmake --build "$B" -j2 >/dev/null 2>&1
rm -rf "$tmp"
echo "$total mutants: $survivors survived, $stale stale"
[ "$survivors" -eq 0 ] && [ "$stale" -eq 0 ]
