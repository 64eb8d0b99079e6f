-- fp8 everywhere and no fallback: a misaligned layer is an error.
recipe "check_fallback_error" {
  format = e4m3,
  scaling = current,
  fallback = "error",
}
