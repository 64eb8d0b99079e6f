-- e2e_model.lua: one linear for test_e2e (K = 384: a multiple of 128,
-- 32 and 16, so every block size of the shipped recipes fits).
model "refsem"

linear("model.layers.0.mlp.up_proj", 384, 256)
