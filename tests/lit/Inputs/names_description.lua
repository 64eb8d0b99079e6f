recipe "r" {
  format = bf16,
  description = "bad \xc0\xaf overlong",
}
