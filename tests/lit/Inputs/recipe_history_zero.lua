recipe "history_zero" {
  format = hybrid, scaling = delayed { history = 0 },
}
