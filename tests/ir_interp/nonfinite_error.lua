-- test input: tensorwise current scaling that stops on an inf/NaN amax.
recipe "nonfinite_error" {
  format = e4m3,
  scaling = "current",
  nonfinite = "error",
  output = bf16,
}
