recipe "rule_kinds" {
  format = hybrid, scaling = current,
  rules = {
    rule(function(l) return l.kind == "router" end) { format = bf16, reason = "router" },
    rule(function(l) return l.kind == "expert.up" and l.expert < 2 end) { format = bf16, reason = "experts 0-1 up" },
  },
}
