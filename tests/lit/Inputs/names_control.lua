recipe {
  format = bf16,
  name = "r\n#error recipe",
}
