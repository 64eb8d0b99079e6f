-- A Lua syntax error is reported at its line, like a compiler would.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- CHECK: recipe/syntax_error.lua:8: error: '}' expected (to close '{' at line 5) near 'output'{{$}}
-- CHECK-NOT: error
recipe "syntax_error" {
  format = e4m3,
  scaling = current
  output = bf16,
}
