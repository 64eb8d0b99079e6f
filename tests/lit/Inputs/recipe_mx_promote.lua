-- MX blocks (1x32) cannot be scaled at a 128-element promotion.
recipe "mxp" {
  format = e4m3,
  scaling = mx,
  accumulate = promote { every = 128 },
}
