-- An unknown key names the table it is in and the nearest real key.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- RUN: cd %inputs && %exit 1 %precc check recipe_unknown_top_key.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=TOP
-- RUN: cd %inputs && %exit 1 %precc check recipe_unknown_gemm_key.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=GEMM
-- CHECK: recipe/unknown_key.lua:9: error: unknown key 'histroy' in delayed{...} (did you mean 'history'?){{$}}
-- TOP: {{^}}recipe_unknown_top_key.lua:3: error: unknown key 'acumulate' in recipe (did you mean 'accumulate'?){{$}}
-- GEMM: {{^}}recipe_unknown_gemm_key.lua:4: error: dgrad has no input operand (dgrad: dX = dY·W takes grad_output and weight){{$}}
recipe "unknown_key" {
  format = hybrid, scaling = delayed { histroy = 1024 },
}
