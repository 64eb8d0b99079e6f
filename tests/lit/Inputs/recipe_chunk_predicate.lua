recipe "chunk_predicate" {
  format = e4m3, scaling = current,
  rules = {
    rule(load("return function(layer) return layer.nope.x end", "=/etc/shadow")()) { format = bf16 },
  },
}
