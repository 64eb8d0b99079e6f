-- Rowwise fp8 that pads misaligned layers (passes/fuse.c: the column amax of
-- a padded source takes the pad into the amax kernel).
recipe "passes_rowwise_pad" {
  format = e4m3,
  scaling = rowwise,
  output = bf16,
  fallback = "pad",
}
