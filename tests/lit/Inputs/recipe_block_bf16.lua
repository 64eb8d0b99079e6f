recipe "block_bf16" {
  format = bf16,
  weight = {
    scaling = blockwise { 128, 128 },
  },
}
