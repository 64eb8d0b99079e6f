-- te_delayed_hybrid.lua — NVIDIA Transformer Engine's delayed scaling:
--   transformer_engine.common.recipe.DelayedScaling(
--       margin=0, fp8_format=Format.HYBRID,
--       amax_history_len=1024, amax_compute_algo="max")
-- (TE docs, "Common API"; these are DelayedScaling's defaults in TE 2.x).
-- HYBRID: e4m3 for activations and weights (forward), e5m2 for the
-- gradients (backward). Each tensor gets one fp32 scale computed from the
-- largest amax of its last 1024 steps, so no extra pass over the data is
-- needed before the cast. As in TE's Linear, the forward GEMM uses the
-- Hopper fast fp8 accumulator and dgrad/wgrad use the split (fp32)
-- accumulator (TE's _2X_ACC_FPROP=False, _2X_ACC_DGRAD/_WGRAD=True).
-- Reference: TE's default fused update, kernel_bulk in
-- transformer_engine/common/recipe/delayed_scaling.cu (:163-253): amaxes
-- reduced with fmaxf, so NaN is never recorded (amax_nan = ignore); a
-- zero amax keeps the previous scale and the history does not roll that
-- step (zero_amax = keep); an inf/NaN amax keeps the previous scale
-- (nonfinite_scale = keep); scale = fp8_max * 2^-margin / amax, FLT_MAX
-- when that overflows. tests/refsem/test_te.c checks it over thousands
-- of steps with NaN steps and long zero runs.
-- Not expressed here: reduce_amax (the all-reduce of amaxes across data-
-- parallel ranks) is a property of the runtime, not of the kernels.
-- Status: the knobs above reach the IR, the interpreter and the generated
-- kernels; tests/refsem/e2e_build.c checks precc build + the cpu backend
-- against the reference bit for bit (docs/recipes.md, "Reference knobs").
recipe "te_delayed_hybrid" {
  description = "TE DelayedScaling, HYBRID (e4m3 fwd / e5m2 grads), amax history 1024, max",
  format = hybrid,
  scaling = delayed { history = 1024, algo = "max", margin = 0 },
  nonfinite = "keep_scale",
  amax_nan = "ignore",
  zero_amax = "keep",
  nonfinite_scale = "keep",
  accumulate = fp32,
  fprop = { accumulate = "fast" },
  output = bf16,
  fallback = bf16,
}
