-- The recipe falls back to bf16, but a rule refuses for the head.
recipe "check_rule_error" {
  format = hybrid,
  scaling = delayed { history = 16 },
  fallback = bf16,
  rules = {
    rule "^lm_head$" {
      fallback = "error",
      reason = "the head must stay fp8",
    },
  },
}
