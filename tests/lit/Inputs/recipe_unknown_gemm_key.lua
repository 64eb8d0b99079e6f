recipe "unknown_gemm_key" {
  format = e4m3, scaling = current,
  dgrad = {
    input = { format = e5m2 },
  },
}
