-- MXFP8 that pads misaligned layers instead of leaving fp8.
recipe "check_pad" {
  format = e4m3,
  scaling = mx,
  fallback = "pad",
}
