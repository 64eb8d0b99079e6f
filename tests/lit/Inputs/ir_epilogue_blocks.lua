-- ir_epilogue_blocks.lua: the output's amax per 1x128 block (fprop) and
-- wgrad accumulating into main_grad (dW in f32).
recipe "ir_epilogue_blocks" {
  format = e4m3,
  scaling = current,
  fprop = { output = { format = bf16, amax = {1, 128} } },
  wgrad = { output = { accumulate = true } },
  fallback = "pad",
}
