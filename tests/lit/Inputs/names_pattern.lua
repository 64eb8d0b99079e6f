recipe "r" {
  format = bf16,
  rules = {
    rule {"q_proj", "k_proj\1"} { format = bf16 },
  },
}
