-- bf16.lua — plain bf16 mixed precision: the baseline every fp8 recipe is
-- measured against. Reproduces PyTorch AMP with torch.autocast(dtype=
-- torch.bfloat16) for linear layers (PyTorch "Automatic Mixed Precision"
-- docs): bf16 operands, fp32 accumulation on the tensor cores, bf16
-- outputs, fp32 master weights and optimizer state, no loss scaling
-- (bf16 has fp32's exponent range, so gradients do not underflow).
recipe "bf16" {
  description = "bf16 operands, fp32 accumulation, bf16 outputs (torch.autocast bf16)",
  format = bf16,
  accumulate = fp32,
  output = bf16,
  training = {
    loss_scale = none,
    master_weights = fp32,
    optimizer_state = fp32,
  },
}
