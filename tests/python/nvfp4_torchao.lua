-- nvfp4_torchao.lua — the NVFP4 recipe with torchao's arithmetic, for
-- test_numerics.py's comparison with torchao's nvfp4_quantize: the block
-- scale e4m3(amax/6 · genc) and multiplier genc/dq (nvfp4_scale = "precc"),
-- no Hadamard transform. The shipped nvfp4.lua follows TE 2.15 instead
-- (tests/refsem checks that one).
recipe "nvfp4_torchao" {
  format = e2m1,
  scaling = nvfp4,
  nvfp4_scale = "precc",
  rht = "none",
  weight = { scaling = nvfp4 { 16, 16 } },
  grad_output = { round = "sr" },
  accumulate = fp32,
  output = bf16,
  fallback = bf16,
}
