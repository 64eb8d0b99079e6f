recipe "history_current" {
  format = e4m3,
  scaling = current,
  history = 16,
}
