-- fp16_no_loss_scale.lua — recipes/fp16_dynamic_loss_scale.lua without its
-- loss scaling: fp16 operands and outputs, fp32 accumulation, fp32 masters,
-- and the raw gradients. precc-train runs it beside the scaled recipe to
-- show why fp16 needs a loss scale: its small gradients fall into fp16's
-- subnormals (below 6.1e-5) and lose their bits, so training stalls.
recipe "fp16_no_loss_scale" {
  description = "fp16 like fp16_dynamic_loss_scale, but no loss scaling",
  format = fp16,
  accumulate = fp32,
  output = fp16,
  training = {
    loss_scale = none,
    master_weights = fp32,
    optimizer_state = fp32,
  },
}
