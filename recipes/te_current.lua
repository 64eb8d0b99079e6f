-- te_current.lua — Transformer Engine's Float8CurrentScaling
-- (transformer_engine/common/recipe/__init__.py:286-309): HYBRID (e4m3
-- forward, e5m2 gradients), one scale per tensor from its own amax,
-- amax_epsilon 0, no power-of-two scales; fprop without the split
-- accumulator, dgrad and wgrad with it (:307-309).
-- Reference: the amax is a chain of fmaxf (recipe/current_scaling.cu:
-- 55-60: amax_nan = ignore); compute_scale_from_amax (recipe/
-- recipe_common.cuh:14-41): amax 0, inf or NaN gives scale 1
-- (nonfinite_scale = one), fp8_max / amax otherwise, FLT_MAX when that
-- overflows. tests/refsem/test_te.c checks it bit for bit.
-- Status: the knobs above reach the IR, the interpreter and the generated
-- kernels; tests/refsem/e2e_build.c checks precc build + the cpu backend
-- against the reference bit for bit (docs/recipes.md, "Reference knobs").
recipe "te_current" {
  description = "TE Float8CurrentScaling: HYBRID, per-tensor JIT scales, eps 0",
  format = hybrid,
  scaling = current,
  amax_nan = "ignore",
  nonfinite_scale = "one",
  accumulate = fp32,
  fprop = { accumulate = "fast" },
  output = bf16,
  fallback = bf16,
}
