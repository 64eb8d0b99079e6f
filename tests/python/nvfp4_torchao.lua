-- nvfp4_torchao.lua — the NVFP4 recipe with torchao's arithmetic, for
-- test_numerics.py's comparison with torchao 0.18's nvfp4_quantize
-- (prototype/mx_formats/nvfp4_tensor.py): the global decode scale
-- amax / 2688, block scales e4m3(clamp(amax / 6 / gdec, 2^-6, 448)), the
-- multiplier (1 / gdec) / dq (nvfp4_scale = "torchao"), NaN-propagating
-- amaxes, an inf global amax giving gdec = inf as torch computes it
-- (nonfinite_scale = "ieee"), no Hadamard transform. The shipped nvfp4.lua follows TE >= 2.14
-- instead (tests/refsem checks that one).
recipe "nvfp4_torchao" {
  format = e2m1,
  scaling = nvfp4,
  nvfp4_scale = "torchao",
  rht = "none",
  nonfinite_scale = "ieee",
  weight = { scaling = nvfp4 { 16, 16 } },
  grad_output = { round = "sr" },
  accumulate = fp32,
  output = bf16,
  fallback = bf16,
}
