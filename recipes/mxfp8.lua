-- mxfp8.lua — MXFP8 as in the OCP Microscaling Formats (MX) v1.0 spec and
-- Transformer Engine's MXFP8BlockScaling(fp8_format=Format.E4M3) (TE docs,
-- "Common API"; Blackwell and later): every operand — activations,
-- weights and gradients — is e4m3 in blocks of 32 consecutive elements
-- along the reduction dim, each block sharing one e8m0 (power-of-two)
-- scale. The scale is taken from the block's amax, so there is no amax
-- history and no separate amax pass. fp32 accumulation, bf16 outputs.
-- Reference: TE transformer_engine/common/cast/mxfp8/quantize_mxfp8.cuh
-- (:255-295): block amax by fmaxf (amax_nan = ignore), e8m0 =
-- float_to_e8m0(amax * (1/448)) (util/ptx_arch_spec.cuh:72-104: the
-- exponent rounded up, an inf amax saturates to 0xFE; mx_round = rceil),
-- elements x * 2^(127-e8m0) (util/ptx.cuh:309-318). The OCP spec's
-- floor(log2(amax)) - emax is mx_round = "floor".
-- Status: mx_round and amax_nan reach the IR (mx_scale mode=rceil_te, amax
-- nan=ignore), the interpreter and the generated kernels; tests/refsem/
-- e2e_build.c checks precc build + the cpu backend against TE bit for bit.
recipe "mxfp8" {
  description = "TE MXFP8BlockScaling: e4m3 elements, 1x32 blocks, e8m0 scales (RCEIL)",
  format = e4m3,
  scaling = mx,
  mx_round = "rceil",
  amax_nan = "ignore",
  accumulate = fp32,
  output = bf16,
  fallback = bf16,
}
