-- Rules that match nothing, rules earlier rules shadow, --Werror, and
-- layer-aware predicates (index, nblocks, kind, expert).
-- RUN: %precc check %s --model %recipes/models/tiny.lua > %t.out 2> %t.err
-- RUN: FileCheck %s --check-prefix=WARN < %t.err
-- WARN: {{^}}{{.*}}rule_diagnostics.lua:[[# @LINE + 21]]: warning: rule '^lm_haed$' matches no layer of tiny (did you mean 'lm_head'?){{$}}
-- WARN-NEXT: {{^}}{{.*}}rule_diagnostics.lua:[[# @LINE + 21]]: warning: rule 'k_proj$' matches 2 layers, all taken by earlier rules (first: the rule at line [[# @LINE + 19]]), so it never applies{{$}}
-- WARN-NOT: warning
-- RUN: FileCheck %s --check-prefix=PLAN < %t.out
-- The predicate takes blocks 0 and nblocks-1 (tiny has 2 blocks: both), not lm_head:
-- PLAN: model.layers.[0-1].self_attn.q_proj {{.*}} first and last block
-- PLAN: model.layers.[0-1].mlp.gate_proj {{.*}} first and last block
-- PLAN: lm_head {{.*}} e4m3·e4m3
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua --Werror 2>&1 | FileCheck %s --check-prefix=WERROR
-- WERROR: rule_diagnostics.lua:[[# @LINE + 12]]: error: rule '^lm_haed$' matches no layer
-- WERROR: precc: error: 2 warnings treated as errors (--Werror)
-- Kinds and experts, on a MoE model: only routed experts 0-1 of each block.
-- RUN: %precc check %inputs/rule_kinds.lua --model %recipes/models/mixtral-8x7b.json --json | FileCheck %s --check-prefix=KIND
-- KIND: {"fqn":"model.layers.0.block_sparse_moe.gate",{{.*}}"rule":"router"
-- KIND: {"fqn":"model.layers.0.block_sparse_moe.experts.0.w1",{{.*}}"rule":"experts 0-1 up"
-- KIND: {"fqn":"model.layers.0.block_sparse_moe.experts.0.w2",{{.*}}"rule":null
-- KIND: {"fqn":"model.layers.0.block_sparse_moe.experts.2.w1",{{.*}}"rule":null
recipe "rule_diagnostics" {
  format = hybrid, scaling = current,
  rules = {
    rule(function(l) return l.index == 0 or l.index == l.nblocks - 1 end) { format = bf16, reason = "first and last block" },
    rule "^lm_haed$" { format = bf16 },
    rule "k_proj$" { format = bf16 },
  },
}
