-- \xff is not UTF-8: the name could not go into manifest.json.
recipe "r\xff" {
  format = bf16,
}
