recipe "history_current2" {
  format = e4m3,
  scaling = current { history = 16 },
}
