local s = string.rep("x", 1 << 30)
linear("fc", 64, 64)
