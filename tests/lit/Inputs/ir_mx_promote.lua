-- ir_mx_promote.lua: MX 1x32 blocks with fp32 promotion every 128 — the
-- block scales change inside a promotion interval, which no GEMM can do:
-- the IR verifier rejects what the lowering makes of it.
recipe "ir_mx_promote" {
  format = e4m3,
  scaling = mx,
  accumulate = promote { every = 128 },
}
