-- seed_model.lua: the model tests/fuzz/seeds.sh builds the manifest and IR
-- seeds from. Two of tiny.lua's shapes (K = 256 and K = 688, so the
-- fallback and padding paths are in them), a fifth of its manifest: the
-- fuzzers' inputs stay small and fast, with the same kinds of kernel;
-- gate and up read one input (the manifest's shares_input).
model "seed"
linear("model.layers.0.mlp.gate_proj", 256, 688)
linear("model.layers.0.mlp.up_proj", 256, 688, {shares_input = "model.layers.0.mlp.gate_proj"})
linear("model.layers.0.mlp.down_proj", 688, 256)
