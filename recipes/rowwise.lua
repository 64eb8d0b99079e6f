-- rowwise.lua — torchao's Float8LinearRecipeName.ROWWISE
-- (Float8LinearConfig.from_recipe_name("rowwise"), torchao/float8/config.py):
-- CastConfig(scaling_granularity=AXISWISE, target_dtype=e4m3) for input,
-- weight and grad_output, and round_scales_to_power_of_2=True. Every
-- operand of every GEMM is e4m3 with one scale per row along the GEMM's
-- reduction dim (torchao calls it axiswise); scales are powers of two.
-- GEMM configs are Float8LinearConfig's defaults: fast accumulation for
-- the output GEMM, fp32 for grad_input and grad_weight.
-- Reference: torchao/float8/float8_utils.py: torch.amax(|x|, dim) (:69,
-- NaN propagates), max / clamp(amax, 1e-12) in fp64 (:47), and the
-- power of two as exp2(floor(log2(scale))) (:244-247: pow2_round = log2,
-- which rounds a scale just below 2^k up to 2^k, unlike TE's mask).
-- Status: the knobs above reach the IR, the interpreter and the generated
-- kernels; tests/refsem/e2e_build.c checks precc build + the cpu backend
-- against the reference bit for bit (docs/recipes.md, "Reference knobs").
recipe "rowwise" {
  description = "torchao ROWWISE: e4m3 everywhere, rowwise (axiswise) power-of-two scales",
  format = e4m3,
  scaling = rowwise { pow2 = true, amax_eps = 1e-12 },
  pow2_round = "log2",
  amax_nan = "propagate",
  nonfinite_scale = "ieee",
  fprop = { accumulate = "fast" },
  output = bf16,
  fallback = bf16,
}
