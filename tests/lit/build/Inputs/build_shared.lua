-- build_shared.lua: q and k read the same X (shares_input), as in every
-- attention block; the step figures of --stats count that X once.
model "shared"

linear("model.layers.0.self_attn.q_proj", 256, 256)
linear("model.layers.0.self_attn.k_proj", 256, 128, {shares_input = "model.layers.0.self_attn.q_proj"})
