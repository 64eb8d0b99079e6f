-- blockwise_torchao.lua — torchao's blockwise fp8 training (v0.18.0,
-- prototype/blockwise_fp8_training/kernels.py): e4m3, 1x128 activation and
-- gradient tiles, 128x128 weight tiles, amax clamped at EPS = 1e-12 (:32),
-- scale = fp64 448 / amax rounded to fp32, codes of x * scale, scale_inv
-- 1 / scale (:509-522, :1031-1058, :1121-1155). precc check names it
-- "torchao blockwise"; test_numerics.py compares it with torchao's code.
recipe "blockwise_torchao" {
  format = e4m3,
  amax_eps = 1e-12,
  amax_nan = "propagate",
  nonfinite_scale = "ieee",
  input       = { scaling = blockwise { 1, 128 } },
  grad_output = { scaling = blockwise { 1, 128 } },
  weight      = { scaling = blockwise { 128, 128 } },
  accumulate = fp32,
  output = bf16,
  fallback = bf16,
}
