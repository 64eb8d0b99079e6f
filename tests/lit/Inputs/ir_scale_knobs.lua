-- ir_scale_knobs.lua: every scale attribute the lowering passes on: margin,
-- power-of-two scales, amax epsilon, the inf/NaN policy, round toward zero
-- and no saturation.
recipe "ir_scale_knobs" {
  format = e4m3,
  scaling = current,
  input = { margin = 2, pow2 = true, amax_eps = 1e-12, nonfinite = "skip_step" },
  weight = { nonfinite = "error", round = "rz", saturate = false },
}
