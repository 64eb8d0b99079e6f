recipe "predicate_error" {
  format = e4m3, scaling = current,
  rules = {
    rule(function(layer)
      return layer.fqn.missing.field
    end) { format = bf16 },
  },
}
