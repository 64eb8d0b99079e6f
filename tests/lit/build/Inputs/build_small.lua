-- build_small.lua: one Llama-shaped block whose every dim is a multiple of
-- 64, so each kernel of the fp8 recipes is one codegen takes (fused
-- transposes need 64-row tiles).
model "small"

linear("model.layers.0.self_attn.q_proj", 256, 256)
linear("model.layers.0.self_attn.k_proj", 256, 128)
linear("model.layers.0.mlp.up_proj", 256, 512)
linear("model.layers.0.mlp.down_proj", 512, 256)
