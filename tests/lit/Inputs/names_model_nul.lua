model "m\0x"
linear("a.b", 64, 64)
