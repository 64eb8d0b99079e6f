-- "te2.14" named TE 2.8-2.13's rowwise-only formula: refused, with the
-- names of the two quantize_transpose kernels.
recipe "knob_nvfp4_te214" {
  format = e2m1, scaling = nvfp4,
  nvfp4_scale = "te2.14",
}
