-- No io library in the sandbox.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- CHECK: recipe/io_open.lua:4: error: 'io' is not available in recipes (sandboxed: no io, os, package or debug){{$}}
local f = io.open("/etc/passwd")
recipe "io_open" { format = bf16 }
