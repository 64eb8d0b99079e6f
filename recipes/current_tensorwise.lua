-- current_tensorwise.lua — fp8 with just-in-time tensorwise scaling:
-- torchao's default Float8LinearConfig (Float8LinearRecipeName.TENSORWISE:
-- CastConfig(scaling_type=DYNAMIC, scaling_granularity=TENSORWISE) for
-- input, weight and grad_output; torchao/float8/config.py), which is also
-- TE's Float8CurrentScaling(fp8_format=Format.HYBRID).
-- input and weight e4m3, grad_output e5m2; each tensor's scale comes from
-- its own amax, computed right before the cast (torchao clamps amax below
-- at EPS = 1e-12). torchao's default GEMM configs: use_fast_accum=True
-- for the output GEMM, False (fp32) for grad_input and grad_weight.
-- torchao skips layers whose dims are not multiples of 16: they stay bf16.
recipe "current_tensorwise" {
  description = "torchao tensorwise / TE Float8CurrentScaling: e4m3 fwd, e5m2 grads, per-tensor JIT scales",
  format = hybrid,
  scaling = current { amax_eps = 1e-12 },
  fprop = { accumulate = "fast" },
  output = bf16,
  fallback = bf16,
}
