linear("q", 64, 64)
linear("k", 64, 32, {shares_input = "v"})
linear("v", 64, 32)
