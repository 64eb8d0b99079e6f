linear("lm_head", 64, 0)
