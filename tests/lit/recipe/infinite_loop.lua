-- An infinite loop runs out of its instruction budget: an error, not a
-- hang; pcall in the recipe cannot swallow that error.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- RUN: cd %inputs && %exit 1 %precc check recipe_pcall_loop.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=PCALL
-- CHECK: recipe/infinite_loop.lua:9: error: recipe exceeded its instruction budget (20000000 instructions): an infinite loop?{{$}}
-- PCALL: {{^}}recipe_pcall_loop.lua:2: error: recipe exceeded its instruction budget (20000000 instructions): an infinite loop?{{$}}
local n = 0
while true do
  n = n + 1
end
