recipe "knob_misplaced" {
  format = hybrid, scaling = delayed { history = 16 },
  scale_form = "amax_over_fmax",
}
