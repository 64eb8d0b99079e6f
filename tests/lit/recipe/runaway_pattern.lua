-- A pattern that backtracks exponentially runs in C, where hooks cannot
-- see it; the watchdog stops it after a few seconds.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- CHECK: recipe/runaway_pattern.lua:7: error: recipe used more than 5 s of CPU time (a runaway pattern match?){{$}}
local s = string.rep("a", 40)
local p = string.rep("a*", 40) .. "b"
local found = string.find(s, p)
