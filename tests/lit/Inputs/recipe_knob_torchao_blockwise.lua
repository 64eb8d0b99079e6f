-- torchao 0.18's blockwise fp8 training (prototype/blockwise_fp8_training/
-- kernels.py:509-512): amax clamped at 1e-12, fp64 448 / amax, x * scale;
-- a reference of its own: no warning.
recipe "knob_torchao_blockwise" {
  format = e4m3,
  amax_eps = 1e-12,
  nonfinite_scale = "ieee",
  input       = { scaling = blockwise { 1, 128 } },
  grad_output = { scaling = blockwise { 1, 128 } },
  weight      = { scaling = blockwise { 128, 128 } },
}
