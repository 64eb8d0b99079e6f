-- cluster_shapes.lua: the shapes bench/gemm/lease_gemm.sh times at 1x1 and
-- 2x1 side by side (issue 28 §1: does TMA multicast of B pay?): 8192^3,
-- DeepGEMM's 4096 x 7168 x 16384 and Llama-3-8B's gate at M = 4096 (from
-- shapes.lua). Each linear is named m<M>_n<N>_k<K> (bench_gemm_gpu.c).
model "gemm_cluster_shapes"
local shapes = {
	{8192, 8192, 8192},
	{4096, 7168, 16384},
	{4096, 14336, 4096},
}
for _, s in ipairs(shapes) do
	local m, n, k = s[1], s[2], s[3]
	linear(string.format("m%d_n%d_k%d", m, n, k), k, n)
end
