-- nvfp4_no_rht.lua: the shipped nvfp4 recipe without the random Hadamard
-- transform (rht = "none", TE's NVTE_NVFP4_DISABLE_RHT=1), for test_e2e's
-- wgrad error with and without it. precc check warns that TE's
-- NVFP4BlockScaling uses rht = wgrad.
recipe "nvfp4_no_rht" {
  format = e2m1,
  scaling = nvfp4,
  amax_nan = "ignore",
  nvfp4_scale = "te2.14+",
  rht = "none",
  weight = { scaling = nvfp4 { 16, 16 } },
  grad_output = { round = "sr" },
  accumulate = fp32,
  output = bf16,
  fallback = bf16,
}
