model "typo"
linaer("lm_head", 64, 256)
