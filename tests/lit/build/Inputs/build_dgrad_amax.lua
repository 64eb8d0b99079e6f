-- build_dgrad_amax.lua: a dgrad with an output amax, so the step func's ret
-- holds dx.amax before dx (tests/lit/build/gemm_labels.test).
recipe "build_dgrad_amax" {
  format = hybrid,
  scaling = current,
  dgrad = { output = { format = bf16, amax = true } },
}
