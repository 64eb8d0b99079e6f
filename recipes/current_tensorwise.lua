-- current_tensorwise.lua — fp8 with just-in-time tensorwise scaling:
-- torchao's default Float8LinearConfig (Float8LinearRecipeName.TENSORWISE:
-- CastConfig(scaling_type=DYNAMIC, scaling_granularity=TENSORWISE) for
-- input, weight and grad_output; torchao/float8/config.py). TE's
-- Float8CurrentScaling differs (NaN-ignoring amax, eps 0, scale 1 for an
-- inf/NaN amax): recipes/te_current.lua.
-- Reference: torchao/float8/float8_utils.py: amax = torch.max(|x|) (:65,
-- NaN propagates: amax_nan = propagate), scale = max / clamp(amax, 1e-12)
-- in fp64 (:32-51; an inf amax gives scale 0, NaN gives NaN:
-- nonfinite_scale = ieee), codes of clamp(x * scale) (:118-137).
-- input and weight e4m3, grad_output e5m2; each tensor's scale comes from
-- its own amax, computed right before the cast (torchao clamps amax below
-- at EPS = 1e-12). torchao's default GEMM configs: use_fast_accum=True
-- for the output GEMM, False (fp32) for grad_input and grad_weight.
-- torchao skips layers whose dims are not multiples of 16: they stay bf16.
-- Status: the knobs above reach the IR, the interpreter and the generated
-- kernels; tests/refsem/e2e_build.c checks precc build + the cpu backend
-- against the reference bit for bit (docs/recipes.md, "Reference knobs").
recipe "current_tensorwise" {
  description = "torchao tensorwise: e4m3 fwd, e5m2 grads, per-tensor JIT scales",
  format = hybrid,
  scaling = current { amax_eps = 1e-12 },
  amax_nan = "propagate",
  nonfinite_scale = "ieee",
  fprop = { accumulate = "fast" },
  output = bf16,
  fallback = bf16,
}
