-- print() in a recipe is a note on stderr (stdout stays the plan), and a
-- recipe can compute its settings with ordinary Lua.
-- RUN: %precc check %s --model %recipes/models/tiny.lua 2>&1 >/dev/null | FileCheck %s
-- RUN: %precc check %s --model %recipes/models/tiny.lua 2>/dev/null | FileCheck %s --check-prefix=PLAN
-- CHECK: recipe/print_note.lua:11: note: history is 64{{$}}
-- PLAN: recipe print_note
-- PLAN: delayed/64
local function pow2(n) return 1 << n end
local fp8 = { scaling = delayed { history = pow2(6) } }
local history = pow2(6)
print("history is " .. history)
recipe "print_note" {
  format = hybrid,
  input = fp8, weight = fp8, grad_output = fp8,
}
