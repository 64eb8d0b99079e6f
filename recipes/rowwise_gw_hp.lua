-- rowwise_gw_hp.lua — torchao's Float8LinearRecipeName.ROWWISE_WITH_GW_HP
-- (Float8LinearConfig.from_recipe_name("rowwise_with_gw_hp"),
-- torchao/float8/config.py; first published as LW_AXISWISE_WITH_GW_HP):
--   output      = input_fp8_axiswise   @ weight_t_axiswise      (fprop)
--   grad_input  = grad_output_fp8_axiswise @ weight_fp8_tensorwise (dgrad)
--   grad_weight = input_t_hp @ grad_output_hp                   (wgrad, bf16)
-- i.e. cast_config_input/weight AXISWISE, cast_config_grad_output AXISWISE
-- with target_dtype=e4m3 (e4m3 is used for gradients too),
-- cast_config_weight_for_grad_input TENSORWISE, and
-- cast_config_input_for_grad_weight / grad_output_for_grad_weight
-- DISABLED: the weight gradient stays in high precision for accuracy.
-- Power-of-two scales as in torchao's rowwise recipes.
-- Reference: torchao/float8/float8_utils.py: torch.amax(|x|, dim) (:69,
-- NaN propagates), max / clamp(amax, 1e-12) in fp64 (:47), and the
-- power of two as exp2(floor(log2(scale))) (:244-247: pow2_round = log2,
-- which rounds a scale just below 2^k up to 2^k, unlike TE's mask).
-- Status: the knobs above reach the IR, the interpreter and the generated
-- kernels; tests/refsem/e2e_build.c checks precc build + the cpu backend
-- against the reference bit for bit (docs/recipes.md, "Reference knobs").
recipe "rowwise_gw_hp" {
  description = "torchao ROWWISE_WITH_GW_HP: rowwise e4m3 fprop/dgrad, tensorwise weight in dgrad, bf16 wgrad",
  format = e4m3,
  scaling = rowwise { pow2 = true, amax_eps = 1e-12 },
  pow2_round = "log2",
  amax_nan = "propagate",
  nonfinite_scale = "ieee",
  fprop = { accumulate = "fast" },
  dgrad = {
    weight = { scaling = current { pow2 = true, amax_eps = 1e-12 } },
  },
  wgrad = bf16,
  output = bf16,
  fallback = bf16,
}
