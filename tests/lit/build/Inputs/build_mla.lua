-- build_mla.lua: DeepSeek-V3's kv_a_proj_with_mqa at a reduced K: W has
-- 576 rows (kv_lora_rank 512 + rope dim 64), a multiple of 64 but not of
-- 128.
model "mla"

linear("model.layers.0.self_attn.kv_a_proj_with_mqa", 256, 576)
