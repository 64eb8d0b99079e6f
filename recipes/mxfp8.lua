-- mxfp8.lua — MXFP8 as in the OCP Microscaling Formats (MX) v1.0 spec and
-- Transformer Engine's MXFP8BlockScaling(fp8_format=Format.E4M3) (TE docs,
-- "Common API"; Blackwell and later): every operand — activations,
-- weights and gradients — is e4m3 in blocks of 32 consecutive elements
-- along the reduction dim, each block sharing one e8m0 (power-of-two)
-- scale. The scale is taken from the block's amax, so there is no amax
-- history and no separate amax pass. fp32 accumulation, bf16 outputs.
recipe "mxfp8" {
  description = "OCP MXFP8 / TE MXFP8BlockScaling: e4m3 elements, 1x32 blocks, e8m0 scales",
  format = e4m3,
  scaling = mx,
  accumulate = fp32,
  output = bf16,
  fallback = bf16,
}
