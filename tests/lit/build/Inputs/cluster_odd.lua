-- one linear of bench/gemm/shapes.lua (DeepGEMM's 4096 x 2112 x 7168): its
-- wgrad's 2112 rows are 17 M blocks of 128 (cluster.test)
model "cluster_odd"
linear("m4096_n2112_k7168", 7168, 2112)
