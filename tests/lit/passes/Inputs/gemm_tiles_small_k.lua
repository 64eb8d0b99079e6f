-- One linear with a short K (in_features 64: 128 bytes of bf16, under the
-- 256 that the 128x128 GEMM tile wants) and a wide N (8192: 64 tile columns).
model "gemm_tiles_small_k"
linear("proj", 64, 8192)
