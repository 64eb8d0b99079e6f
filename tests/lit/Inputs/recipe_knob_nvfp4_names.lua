-- nvfp4_scale's settings are named after the kernel each reproduces;
-- torchao's nvfp4_quantize is a reference of its own, TE 2.8-2.13's
-- quantize_transpose kernel another, and the old "te2.15" (TE >= 2.14's
-- formula) still works, with a warning.
recipe "knob_nvfp4_names" {
  format = e2m1, scaling = nvfp4,
  nvfp4_scale = "torchao", rht = "none", nonfinite_scale = "ieee",
  weight = { scaling = nvfp4, amax_nan = "ignore", nvfp4_scale = "te2.8-2.13", rht = "wgrad" },
  grad_output = { scaling = nvfp4, amax_nan = "ignore", nvfp4_scale = "te2.15", rht = "wgrad" },
}
