recipe "knob_bad_type" {
  format = hybrid, scaling = delayed,
  zero_amax = true,
}
