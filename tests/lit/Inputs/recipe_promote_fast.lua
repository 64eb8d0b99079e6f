recipe "promote_fast" {
  format = e4m3,
  scaling = current,
  accumulate = "fast",
  promote_every = 128,
}
