-- A knob's diagnostic goes to the more specific of the knob and what it
-- contradicts: a rule that inherits a top-level knob and changes the
-- scaling is reported in the rule, at its scaling (issue 30), and a knob
-- the nearest reference wants and the rule lacks, at the rule's line.
-- RUN: %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- RUN: cd %inputs && %exit 1 %precc check recipe_knob_rule_delayed.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=DELAYED
-- RUN: cd %inputs && %exit 1 %precc check recipe_knob_rule_pow2.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=POW2
-- CHECK-NOT: knob_rule_line.lua:[[@LINE+8]]:
-- CHECK: recipe/knob_rule_line.lua:[[@LINE+12]]: warning: input in fprop: rowwise scaling with amax_nan = ignore matches no reference; nearest is torchao rowwise (torchao/float8/float8_utils.py), which uses amax_nan = propagate{{$}}
-- CHECK: recipe/knob_rule_line.lua:[[@LINE+13]]: warning: input in fprop: nvfp4 scaling with nvfp4_scale = precc matches no reference; nearest is TE NVFP4BlockScaling >= 2.14 (transformer_engine/common/cast/nvfp4/quantize_transpose_nvfp4.cuh), which uses nvfp4_scale = te2.14+{{$}}
-- DELAYED: {{^}}recipe_knob_rule_delayed.lua:7: error: input in fprop: scale_form = amax_over_fmax is for current, rowwise and blockwise scaling, not delayed{{$}}
-- POW2: {{^}}recipe_knob_rule_pow2.lua:7: error: input in fprop: scale_form = amax_over_fmax takes no pow2 (DeepGEMM's sf has none){{$}}
recipe "knob_rule_line" {
  format = e4m3, scaling = current,
  -- TE Float8CurrentScaling
  amax_nan = "ignore", zero_amax = "one", nonfinite_scale = "one",

  rules = {
    rule "q_proj" {
      format = e4m3,
      scaling = rowwise,
    },
    rule "k_proj" {
      format = e2m1, scaling = nvfp4, scale_format = e4m3,
    },
  },
}
