linear("q", 64, 64)
linear("o", 32, 64, {shares_input = "q"})
