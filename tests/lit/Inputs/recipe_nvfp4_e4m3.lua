-- nvfp4 elements are e2m1; a more specific level cannot make them e4m3.
recipe "nvfp4_e4m3" {
  format = e2m1,
  scaling = nvfp4,
  weight = { format = e4m3 },
}
