-- nvfp4.lua — NVIDIA's NVFP4 training recipe: Transformer Engine's
-- NVFP4BlockScaling(fp4_format=Format.E2M1) (TE docs, "Common API") and
-- NVIDIA, "Pretraining Large Language Models with NVFP4" (arXiv:2509.25147):
--  * e2m1 elements in 16-element blocks, each with an e4m3 scale, plus
--    one fp32 scale per tensor (the two-level NVFP4 scaling);
--  * weights quantized in 2D 16x16 blocks so the forward and backward
--    passes see the same quantized weight; activations and gradients 1x16;
--  * stochastic rounding for gradients, round-to-nearest-even elsewhere;
--  * a few sensitive layers stay in high precision — here the output head.
-- Reference: TE's quantize_transpose kernel as of v2.14 (the same lines in
-- later tags) transformer_engine/common/cast/nvfp4/core_nvfp4.cuh and
-- quantize_transpose_nvfp4.cuh: global and block amaxes by fmaxf
-- (amax_nan = ignore); S_enc = min(2688 / global_amax, FLT_MAX), 1 when
-- the amax is 0 or inf (core:79-91); block scale e4m3(amax * (S_enc *
-- (1/6))) (core:49-52, nvfp4_scale = "te2.14+"; TE 2.8-2.13's kernel
-- computed amax / 6 * S_enc, "te2.8-2.13"); element multiplier
-- min(1 / (e4m3 * (1/S_enc)), FLT_MAX) (quantize_transpose:530-531), so a
-- block whose e4m3 scale is 0 saturates.
-- The wgrad operands (X^T, dY^T) go through TE's random Hadamard transform
-- first, with TE's signs (rht = "wgrad"; its global amax is post-RHT).
-- Status: the knobs above reach the IR, the interpreter and the generated
-- kernels; tests/refsem/e2e_build.c checks precc build + the cpu backend
-- against the reference bit for bit (docs/recipes.md, "Reference knobs").
recipe "nvfp4" {
  description = "NVFP4: e2m1, 1x16 blocks with e4m3 scales + fp32 tensor scale, 16x16 weights, SR gradients",
  format = e2m1,
  scaling = nvfp4,
  amax_nan = "ignore",
  nvfp4_scale = "te2.14+",
  rht = "wgrad",
  weight = { scaling = nvfp4 { 16, 16 } },
  grad_output = { round = "sr" },
  accumulate = fp32,
  output = bf16,
  fallback = bf16,
  rules = {
    rule "^lm_head$" { format = bf16, reason = "output head kept in bf16 (NVFP4 recipe)" },
  },
}
