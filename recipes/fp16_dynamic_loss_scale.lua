-- fp16_dynamic_loss_scale.lua — classic fp16 mixed precision with dynamic
-- loss scaling: torch.autocast(dtype=torch.float16) plus
-- torch.amp.GradScaler(init_scale=2.0**16, growth_factor=2.0,
-- backoff_factor=0.5, growth_interval=2000) — GradScaler's defaults
-- (PyTorch "Automatic Mixed Precision" / torch.amp.GradScaler docs;
-- Micikevicius et al., "Mixed Precision Training", ICLR 2018). fp16 keeps
-- 10 mantissa bits but underflows below ~6e-5, so the loss is scaled up
-- before backward; an inf/NaN gradient skips the step and halves the
-- scale, 2000 clean steps double it. Master weights stay fp32.
recipe "fp16_dynamic_loss_scale" {
  description = "fp16 operands and outputs, fp32 accumulation, GradScaler-style dynamic loss scaling",
  format = fp16,
  accumulate = fp32,
  output = fp16,
  training = {
    loss_scale = dynamic { init = 65536, growth = 2.0, backoff = 0.5, interval = 2000 },
    master_weights = fp32,
    optimizer_state = fp32,
  },
}
