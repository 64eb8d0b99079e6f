recipe "knob_rule_delayed" {
  format = e4m3, scaling = current,
  scale_form = "amax_over_fmax", amax_eps = 1e-4, amax_nan = "propagate", nonfinite_scale = "ieee",

  rules = {
    rule "q_proj" {
      scaling = delayed,
    },
  },
}
