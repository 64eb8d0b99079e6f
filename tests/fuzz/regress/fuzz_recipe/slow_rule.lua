-- A rule pattern at about 150 ms per layer: under the per-call watchdog of
-- old, 4.6 s for tiny.lua's 30 calls. The one budget of all calls stops it
-- in plan_resolve, in the middle of a rule call: the harness's jump back
-- from the watchdog, then recipe_free of the interrupted state.
recipe "slow_rule" {
  format = e4m3, scaling = current,
  rules = { rule ".-.-.-.-.-.-.-X" { format = bf16 } },
}
