-- Every way to write a rule (tests/frontend/test_recipes.c loads this).
local fp8 = { format = e4m3, scaling = current }
recipe "rule_forms" {
  format = hybrid,
  scaling = delayed { history = 16 },
  rules = {
    rule "^lm_head$" { format = bf16 },
    rule { "q_proj$", "k_proj$" } { scaling = current, reason = "attention: JIT scales" },
    rule(function(layer) return layer.in_features >= 8192 end) {
      input = fp8, weight = fp8, grad_output = { format = e5m2, scaling = current },
    },
    rule("%.mlp%.", { fprop = { accumulate = promote(256) } }),
    rule { match = "embed", format = fp32, fallback = "error" },
  },
}
