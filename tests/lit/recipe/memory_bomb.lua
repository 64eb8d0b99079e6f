-- A memory bomb hits the sandbox's heap cap, whether one huge string or
-- a table that grows without end.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- RUN: cd %inputs && %exit 1 %precc check recipe_table_bomb.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=TABLE
-- CHECK: recipe/memory_bomb.lua:7: error: recipe exceeded the memory limit (64 MiB){{$}}
-- TABLE: {{^}}recipe_table_bomb.lua:3: error: recipe exceeded the memory limit (64 MiB){{$}}
local s = string.rep("x", 1 << 30)
recipe "memory_bomb" { format = bf16 }
