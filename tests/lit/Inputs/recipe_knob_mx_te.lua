-- An MX recipe one knob away from TE: the nearest reference is TE's
-- MXFP8BlockScaling from 2.13 on (its multiplier came then).
recipe "knob_mx_te" {
  format = e4m3, scaling = mx,
  mx_round = "rceil", amax_nan = "propagate",
}
