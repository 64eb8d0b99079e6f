recipe "mx_scale" {
  format = e4m3,
  scaling = mx { scale_format = fp32 },
}
