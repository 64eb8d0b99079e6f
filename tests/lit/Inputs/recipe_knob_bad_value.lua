recipe "knob_bad_value" {
  format = e4m3, scaling = mx,
  mx_round = "ceil",
}
