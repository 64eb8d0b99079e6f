-- moe_shapes.lua: the grouped GEMM benchmark's shapes (issue 29;
-- bench/bench_grouped_gpu.c, bench/gemm/grouped_ref.py): MoE blocks whose
-- experts precc groups, and the dense linears of the same total M that
-- bench_gemm_gpu times beside them (m<M>_n<N>_k<K>, the fprop of M rows).
-- A block's name carries its top-k ("_top8": the bench routes T x top-k
-- rows) and, where the tokens are fixed, T ("_t32768"; else T = 4096 and
-- 16384, balanced and skewed routing).
--   layer 0: DeepSeek-V3's routed experts (256, top-8, hidden 7168,
--            moe_intermediate 2048): gate_proj, up_proj 7168 -> 2048,
--            down_proj 2048 -> 7168;
--   layer 1: Mixtral-8x7B's (8, top-2, hidden 4096, intermediate 14336):
--            w1, w3 4096 -> 14336, w2 14336 -> 4096;
--   layer 2: DeepGEMM's published grouped shapes (8 groups of 4096 rows,
--            balanced): the contiguous-layout fprop rows N 4096 x K 7168
--            and N 7168 x K 2048 (its README at release, H800), and the
--            grouped wgrad row dW 7168 x 4096 (deepseek-ai/DeepGEMM#107,
--            PR #95's figure) as up_proj 4096 -> 7168.
model "moe_shapes"
local blocks = {
	{"model.layers.0.deepseek_v3_top8", 256, {{"gate_proj", 7168, 2048}, {"up_proj", 7168, 2048},
	                                          {"down_proj", 2048, 7168}}},
	{"model.layers.1.mixtral_8x7b_top2", 8, {{"w1", 4096, 14336}, {"w3", 4096, 14336},
	                                         {"w2", 14336, 4096}}},
	{"model.layers.2.deepgemm_top1_t32768", 8, {{"gate_proj", 7168, 4096}, {"up_proj", 4096, 7168},
	                                            {"down_proj", 2048, 7168}}},
}
for _, b in ipairs(blocks) do
	local name, experts, projs = b[1], b[2], b[3]
	for e = 0, experts - 1 do
		for _, p in ipairs(projs) do
			linear(string.format("%s.experts.%d.%s", name, e, p[1]), p[2], p[3])
		end
	end
end
local dense = {}
for _, b in ipairs(blocks) do
	local topk = tonumber(string.match(b[1], "_top(%d+)"))
	local fixed = string.match(b[1], "_t(%d+)$")
	local tokens = fixed and {tonumber(fixed)} or {4096, 16384}
	for _, t in ipairs(tokens) do
		for _, p in ipairs(b[3]) do
			local name = string.format("m%d_n%d_k%d", t * topk, p[3], p[2])
			if not dense[name] then
				dense[name] = true
				linear(name, p[2], p[3])
			end
		end
	end
end
