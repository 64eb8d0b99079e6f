recipe "slow_pattern" {
  format = e4m3, scaling = current,
  rules = {
    rule "^lm_head$" { format = bf16 },
    rule ".-.-.-.-.-.-X" { format = bf16 },   -- backtracks: O(n^6) per layer name
  },
}
