linear("q", 64, 64)
linear("k", 64, 32, {share_input = "q"})
