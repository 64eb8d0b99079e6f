-- The reference knobs: a combination no reference makes is allowed, and
-- precc check names the nearest reference and the knob that departs from
-- it; bad values are errors at their line with the accepted names. The
-- shipped recipes match their references (no such warning; a rule that
-- matches no layer of tiny, like deepseek_v3's router rule, may warn).
-- RUN: %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- RUN: cd %inputs && %exit 1 %precc check recipe_knob_bad_value.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=BAD
-- RUN: cd %inputs && %exit 1 %precc check recipe_knob_bad_type.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=TYPE
-- RUN: cd %inputs && %exit 1 %precc check recipe_knob_misplaced.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=PLACE
-- RUN: cd %inputs && %exit 1 %precc check recipe_knob_form_pow2.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=FORM
-- RUN: cd %inputs && %precc check recipe_knob_mx_floor.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=OCP
-- RUN: cd %inputs && %precc check recipe_knob_torchao_blockwise.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=AOBLOCK --implicit-check-not='matches no reference'
-- RUN: cd %inputs && %precc check recipe_knob_nvfp4_names.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=NVNAMES --implicit-check-not=warning:
-- RUN: cd %inputs && %exit 1 %precc check recipe_knob_nvfp4_te214.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=TE214
-- RUN: cd %inputs && %precc check recipe_knob_mx_te.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=MXTE
-- RUN: %precc check %recipes/te_current.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=SHIPPED --implicit-check-not='matches no reference'
-- RUN: %precc check %recipes/te_delayed_hybrid.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=SHIPPED --implicit-check-not='matches no reference'
-- RUN: %precc check %recipes/deepseek_v3.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=SHIPPED --implicit-check-not='matches no reference'
-- RUN: %precc check %recipes/mxfp8.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=SHIPPED --implicit-check-not='matches no reference'
-- RUN: %precc check %recipes/nvfp4.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=SHIPPED --implicit-check-not='matches no reference'
-- RUN: %precc check %recipes/rowwise.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=SHIPPED --implicit-check-not='matches no reference'
-- RUN: %precc check %recipes/current_tensorwise.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=SHIPPED --implicit-check-not='matches no reference'
-- CHECK: recipe/knobs.lua:[[@LINE+14]]: warning: input in fprop: delayed scaling with amax_nan = propagate matches no reference; nearest is TE DelayedScaling (transformer_engine/common/recipe/delayed_scaling.cu), which uses amax_nan = ignore{{$}}
-- BAD: {{^}}recipe_knob_bad_value.lua:3: error: unknown mx_round 'ceil' (expected one of: rceil_div, rceil, floor){{$}}
-- TYPE: {{^}}recipe_knob_bad_type.lua:3: error: 'zero_amax' must be one of "one", "keep", not a boolean{{$}}
-- PLACE: {{^}}recipe_knob_misplaced.lua:3: error: input in fprop: scale_form = amax_over_fmax is for current, rowwise and blockwise scaling, not delayed{{$}}
-- FORM: {{^}}recipe_knob_form_pow2.lua:3: error: input in fprop: scale_form = amax_over_fmax takes no pow2 (DeepGEMM's sf has none){{$}}
-- OCP-NOT: warning
-- AOBLOCK: recipe knob_torchao_blockwise
-- NVNAMES: {{^}}recipe_knob_nvfp4_names.lua:9: warning: nvfp4_scale "te2.15" is deprecated: TE's kernels use that formula since 2.14; write "te2.14+"{{$}}
-- NVNAMES: recipe knob_nvfp4_names
-- TE214: {{^}}recipe_knob_nvfp4_te214.lua:5: error: nvfp4_scale 'te2.14' is no more: it was TE 2.8-2.13's rowwise-only formula, which TE's training does not run (did you mean 'te2.14+', TE >= 2.14's quantize_transpose kernel, or 'te2.8-2.13', that kernel before 2.14?){{$}}
-- MXTE: {{^}}recipe_knob_mx_te.lua:5: warning: input in fprop: mx scaling with amax_nan = propagate matches no reference; nearest is TE MXFP8BlockScaling >= 2.13 (transformer_engine/common/util/ptx.cuh), which uses amax_nan = ignore{{$}}
-- SHIPPED: recipe
recipe "knobs" {
  format = hybrid, scaling = delayed { history = 16 },
  amax_nan = "propagate",
  zero_amax = "keep",
}
