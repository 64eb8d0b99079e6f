recipe "block_zero" {
  format = e4m3,
  scaling = blockwise { 0, 128 },
}
