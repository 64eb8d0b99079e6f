recipe "r" {
  format = bf16,
  rules = {
    rule "q_proj" { reason = "\27[31mred", format = bf16 },
  },
}
