-- bf16 training whose dgrad runs in fp16: the recipe casts dY and W to
-- f16 for that GEMM (tests/lit/build/cast.test)
recipe "bf16_dgrad_fp16" {
  format = bf16,
  accumulate = fp32,
  output = bf16,
  dgrad = { format = fp16 },
}
