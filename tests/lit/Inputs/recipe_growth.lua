recipe "growth" {
  format = fp16,
  training = {
    loss_scale = dynamic {
      growth = 0.5,
    },
  },
}
