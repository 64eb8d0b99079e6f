-- bw8192.lua: one 8192 x 8192 linear layer, the shape of the bandwidth
-- benchmark (bench/bench_quant_bw.c; tests/gpu/prepare.sh builds it).
model "bw8192"
linear("bw", 8192, 8192)
