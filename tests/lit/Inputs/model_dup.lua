for i = 0, 1 do
	linear("model.layers." .. i .. ".mlp.up_proj", 64, 128)
end
linear("model.layers.1.mlp.up_proj", 64, 128)
