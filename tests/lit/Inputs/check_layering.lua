-- Every level of the layering at once, to pin down precedence:
-- defaults < top < role < gemm < gemm.role, then the first matching rule.
recipe "check_layering" {
  format = e4m3,
  scaling = current,
  weight = { scaling = delayed { history = 16 } },
  dgrad = { accumulate = fp32, grad_output = { format = e5m2 } },
  wgrad = { format = e5m2, input = { format = e4m3 } },
  accumulate = "fast",
  output = bf16,
  rules = {
    rule "down_proj$" { weight = { scaling = rowwise }, reason = "rowwise weights" },
    rule "proj$"      { format = bf16, reason = "never reached for down_proj" },
  },
}
