-- Unbounded recursion overflows Lua's stack: a clean error at the call.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- CHECK: recipe/deep_recursion.lua:6: error: stack overflow (recursion too deep?){{$}}
local function depth(n)
  -- not a tail call, so every level keeps a frame
  return 1 + depth(n + 1)
end
recipe "deep_recursion" { format = bf16, description = tostring(depth(1)) }
