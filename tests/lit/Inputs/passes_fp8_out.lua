-- fp8 outputs with their amax (passes/fuse.c: the output amax in the GEMM
-- epilogue, scale + quantize in a kernel after the GEMM).
recipe "passes_fp8_out" {
  format = hybrid,
  scaling = current,
  fprop = { output = { format = e4m3, amax = true } },
  output = bf16,
  fallback = bf16,
}
