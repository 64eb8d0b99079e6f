linear("lm_head", 64, 256, {tide = true})
