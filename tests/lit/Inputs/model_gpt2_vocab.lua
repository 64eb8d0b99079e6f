-- A GPT-2-sized head: vocab 50257 is not a multiple of 16, so fp8 GEMMs on
-- lm_head cannot run as is and the recipe's fallback applies.
model "gpt2_vocab"
for i = 0, 1 do
	linear("transformer.h." .. i .. ".mlp.c_fc", 768, 3072)
	linear("transformer.h." .. i .. ".mlp.c_proj", 3072, 768)
end
linear("lm_head", 768, 50257, {tied = true})
