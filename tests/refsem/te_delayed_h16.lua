-- te_delayed_h16.lua: te_delayed_hybrid (TE DelayedScaling, HYBRID, max,
-- margin 0, its default fused update) with a 16-step amax history, so
-- that runs of zero-amax steps longer than the history show whether the
-- history rolls (test_e2e's delayed run).
recipe "te_delayed_h16" {
  format = hybrid,
  scaling = delayed { history = 16, algo = "max", margin = 0 },
  nonfinite = "keep_scale",
  amax_nan = "ignore",
  zero_amax = "keep",
  nonfinite_scale = "keep",
  accumulate = fp32,
  output = bf16,
  fallback = bf16,
}
