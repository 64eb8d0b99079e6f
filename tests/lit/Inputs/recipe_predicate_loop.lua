recipe "predicate_loop" {
  format = e4m3, scaling = current,
  rules = { rule(function(layer) while true do end end) { format = bf16 } },
}
