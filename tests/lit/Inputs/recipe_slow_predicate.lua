recipe "slow_predicate" {
  format = e4m3, scaling = current,
  rules = {
    rule "^lm_head$" { format = bf16 },
    rule(function(layer)   -- about 600 k instructions a layer, under the 1 M of a call
      local n = 0
      for i = 1, 200000 do n = n + i end
      return n < 0
    end) { format = bf16 },
  },
}
