-- tiny.lua: a two-layer Llama-shaped model, small enough to read whole.
-- The same network as tiny.json (an HF-style config.json): precc check
-- gives identical plans for both.
--
--   model "NAME"                          optional; default: the file's name
--   linear(FQN, in_features, out_features [, {tied = bool, bias = bool,
--          shares_input = FQN}])   -- shares_input: an earlier linear that
--                                      reads the same tensor (q for k and v)
model "tiny"

local hidden, ffn, vocab = 256, 688, 1024
local heads, kv_heads, head_dim = 4, 2, 64

for i = 0, 1 do
	local attn = "model.layers." .. i .. ".self_attn."
	linear(attn .. "q_proj", hidden, heads * head_dim)
	linear(attn .. "k_proj", hidden, kv_heads * head_dim, {shares_input = attn .. "q_proj"})
	linear(attn .. "v_proj", hidden, kv_heads * head_dim, {shares_input = attn .. "q_proj"})
	linear(attn .. "o_proj", heads * head_dim, hidden)
	local mlp = "model.layers." .. i .. ".mlp."
	linear(mlp .. "gate_proj", hidden, ffn)
	linear(mlp .. "up_proj", hidden, ffn, {shares_input = mlp .. "gate_proj"})
	linear(mlp .. "down_proj", ffn, hidden)
end
linear("lm_head", hidden, vocab, {tied = true})
