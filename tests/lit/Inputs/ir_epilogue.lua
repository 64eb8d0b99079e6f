-- ir_epilogue.lua: exercises the lowering's epilogue and padding: bias,
-- output amax, fallback = "pad", stochastic rounding of gradients.
recipe "ir_epilogue" {
  format = hybrid,
  scaling = current,
  grad_output = { round = "sr" },
  fprop = { output = { format = bf16, bias = true, amax = true } },
  fallback = "pad",
}
