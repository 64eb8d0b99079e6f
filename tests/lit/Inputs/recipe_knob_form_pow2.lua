recipe "knob_form_pow2" {
  format = e4m3, scaling = blockwise { pow2 = true },
  scale_form = "amax_over_fmax",
}
