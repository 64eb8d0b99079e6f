recipe "bad_pattern" {
  format = e4m3, scaling = current,
  rules = {
    rule "[oops" { format = bf16 },
  },
}
