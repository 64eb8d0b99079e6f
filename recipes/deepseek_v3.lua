-- deepseek_v3.lua — DeepSeek-V3's fp8 training framework (DeepSeek-V3
-- Technical Report, arXiv:2412.19437, §3.3 "FP8 Training"):
--  * e4m3 for all GEMM operands, gradients included (§3.3.2: finer-grained
--    scaling makes e5m2 unnecessary);
--  * fine-grained quantization (§3.3.2): activations and gradients scaled
--    per 1x128 tile (per token per 128 channels), weights per 128x128
--    block; scales computed online from each tile's max;
--  * increased accumulation precision (§3.3.2): partial sums from the
--    tensor cores are promoted to fp32 on CUDA cores every 128 elements of
--    K (N_C = 128, four WGMMAs), since Hopper's fp8 accumulator keeps
--    only ~14 bits;
--  * kept in higher precision (§3.3.1): the embedding module, the output
--    head, MoE gating modules, normalization and attention operators —
--    of these, the output head (lm_head) and the MoE router (mlp.gate)
--    are linear layers precc compiles, so they stay bf16;
--  * low-precision storage (§3.3.3): master weights and gradients fp32,
--    AdamW moments in bf16.
-- Reference: DeepGEMM deep_gemm/utils/math.py per_token_cast_to_fp8 /
-- per_block_cast_to_fp8 (:26-62) and DeepSeek-V3 inference/kernel.py
-- act_quant_kernel (:10-34): sf = max(amax, 1e-4) / 448 in fp32
-- (scale_form = amax_over_fmax, amax_eps = 1e-4), codes of x * (1/sf)
-- (quantize = multiply, DeepGEMM; DeepSeek-V3's inference kernel divides,
-- quantize = divide, and gives the same codes on every case of
-- tests/refsem), the GEMM multiplies back by sf. amax by torch.amax (NaN
-- propagates); an inf amax gives sf = inf, codes 0 and NaN
-- (nonfinite_scale = ieee).
-- Status: the knobs above reach the IR, the interpreter and the generated
-- kernels; tests/refsem/e2e_build.c checks precc build + the cpu backend
-- against the reference bit for bit (docs/recipes.md, "Reference knobs").
recipe "deepseek_v3" {
  description = "DeepSeek-V3: e4m3, 1x128 activation/gradient tiles, 128x128 weight blocks, fp32 promotion every 128",
  format = e4m3,
  amax_eps = 1e-4,
  scale_form = "amax_over_fmax",
  quantize = "multiply",
  amax_nan = "propagate",
  nonfinite_scale = "ieee",
  input       = { scaling = blockwise { 1, 128 } },
  grad_output = { scaling = blockwise { 1, 128 } },
  weight      = { scaling = blockwise { 128, 128 } },
  accumulate = promote { every = 128 },
  output = bf16,
  fallback = bf16,
  rules = {
    rule "^lm_head$"     { format = bf16, reason = "output head kept in bf16 (DeepSeek-V3 §3.3.1)" },
    rule "%.mlp%.gate$"  { format = bf16, reason = "MoE gating kept in bf16 (DeepSeek-V3 §3.3.1)" },
  },
  training = {
    master_weights = fp32,
    optimizer_state = bf16,
  },
}
