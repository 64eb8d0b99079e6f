-- ds_main_grad.lua without the accumulation: wgrad writes dW in f32, the
-- value ds_main_grad adds into main_grad.
recipe "ds_f32_dw" {
  format = e4m3,
  input       = { scaling = blockwise { 1, 128 } },
  grad_output = { scaling = blockwise { 1, 128 } },
  weight      = { scaling = blockwise { 128, 128 } },
  accumulate = promote { every = 128 },
  output = bf16,
  wgrad = { output = fp32 },
}
