-- DeepSeek-V3's scaling (1x128 / 128x128 e4m3, promote every 128) with
-- wgrad accumulating into an fp32 main_grad in its epilogue.
recipe "ds_main_grad" {
  format = e4m3,
  input       = { scaling = blockwise { 1, 128 } },
  grad_output = { scaling = blockwise { 1, 128 } },
  weight      = { scaling = blockwise { 128, 128 } },
  accumulate = promote { every = 128 },
  output = bf16,
  wgrad = { output = { accumulate = true } },
}
