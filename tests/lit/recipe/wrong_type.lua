-- A value of the wrong type names the key and shows what was written.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- CHECK: recipe/wrong_type.lua:8: error: 'history' must be an integer, not a string ("long"){{$}}
recipe "wrong_type" {
  format = hybrid,
  scaling = delayed {
    algo = "max",
    history = "long",
  },
}
