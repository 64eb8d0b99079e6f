-- A misspelled format, as a string: the value's line and a suggestion.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- CHECK: recipe/unknown_format.lua:8: error: unknown format 'e4m4' (did you mean 'e4m3'?){{$}}
recipe "unknown_format" {
  format = e4m3,
  scaling = current,
  input = {
    format = "e4m4",
  },
}
