recipe "margin_range" {
  format = hybrid, scaling = delayed { history = 16 },
  margin = 99,
}
