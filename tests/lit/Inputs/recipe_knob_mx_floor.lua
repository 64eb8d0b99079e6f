-- OCP MX v1.0's floor rounding is a reference of its own: no warning.
recipe "knob_mx_floor" {
  format = e4m3, scaling = mx,
  mx_round = "floor",
}
