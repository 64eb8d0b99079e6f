-- te_nvfp4_rht.lua: the shipped nvfp4 recipe (TE NVFP4BlockScaling >= 2.15)
-- with TE's random Hadamard transform on the wgrad operands (rht = "wgrad";
-- TE's default, NVTE_NVFP4_DISABLE_RHT unset). test_e2e runs its wgrad
-- through the interpreter (codegen does not generate the transform yet).
recipe "te_nvfp4_rht" {
  format = e2m1,
  scaling = nvfp4,
  amax_nan = "ignore",
  nvfp4_scale = "te2.15",
  rht = "wgrad",
  weight = { scaling = nvfp4 { 16, 16 } },
  accumulate = fp32,
  output = bf16,
  fallback = bf16,
}
