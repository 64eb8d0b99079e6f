-- shapes.lua: the GEMM benchmark's shapes (bench/bench_gemm_gpu.c,
-- bench/gemm/torch_ref.py). Each linear is named m<M>_n<N>_k<K>: the
-- bench runs it at M tokens, y[M,N] = x[M,K] w[N,K]^T.
--   8192^3, issue 10's tensorwise figure;
--   DeepGEMM's published H800 table at M = 4096 (N x K);
--   Llama-3-8B's MLP (gate 14336 x 4096, down 4096 x 14336) and
--   Llama-3-70B's (28672 x 8192, 8192 x 28672) at M = 4096 and 16384.
model "gemm_shapes"
local shapes = {
	{8192, 8192, 8192},
	{4096, 2112, 7168}, {4096, 24576, 1536}, {4096, 7168, 16384},
	{4096, 4096, 7168}, {4096, 7168, 2048},
	{4096, 14336, 4096}, {16384, 14336, 4096},
	{4096, 4096, 14336}, {16384, 4096, 14336},
	{4096, 28672, 8192}, {16384, 28672, 8192},
	{4096, 8192, 28672}, {16384, 8192, 28672},
}
for _, s in ipairs(shapes) do
	local m, n, k = s[1], s[2], s[3]
	linear(string.format("m%d_n%d_k%d", m, n, k), k, n)
end
