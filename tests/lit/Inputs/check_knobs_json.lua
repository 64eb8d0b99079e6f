-- Knobs at the top, rules that change the scaling: precc check --json shows
-- each operand's knobs as resolved, only those its IR uses.
recipe "knobs_json" {
  format = e4m3, scaling = current,
  amax_eps = 1e-4, amax_nan = "ignore", zero_amax = "one", nonfinite_scale = "one",
  mx_round = "rceil",

  rules = {
    rule "q_proj" { scaling = mx },
    rule "k_proj" {
      format = e2m1, scaling = nvfp4, scale_format = e4m3,
      nvfp4_scale = "te2.14+", rht = "wgrad", amax_eps = 0,
    },
  },
}
