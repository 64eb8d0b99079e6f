-- One block kept in bf16: the table groups the rest as [0-3,5-31].
recipe "check_layer4" {
  format = hybrid,
  scaling = delayed { history = 1024 },
  fallback = bf16,
  rules = {
    rule "^model%.layers%.4%.mlp%." { format = bf16, reason = "block 4 MLP in bf16" },
  },
}
