-- test input: delayed scaling that skips the step on an inf/NaN amax.
recipe "nonfinite_skip" {
  format = hybrid,
  scaling = delayed { history = 16 },
  nonfinite = "skip_step",
  output = bf16,
}
