recipe "unknown_top_key" {
  format = e4m3, scaling = current,
  acumulate = "fast",
}
