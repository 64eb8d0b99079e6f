recipe "fallback_fp8" {
  format = e4m3, scaling = current,
  fallback = e5m2,
}
