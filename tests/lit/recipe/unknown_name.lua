-- A misspelled global (formats are globals too): caught when read.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- CHECK: recipe/unknown_name.lua:6: error: unknown name 'e4m4' (did you mean 'e4m3'?){{$}}
recipe "unknown_name" {
  scaling = current,
  format = e4m4,
}
