-- ir_odd.lua: one aligned layer with a bias and one misaligned layer.
model "ir_odd"
linear("proj", 256, 512, {bias = true})
linear("head", 256, 1000)
