-- No os library in the sandbox.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- CHECK: recipe/os_execute.lua:5: error: 'os' is not available in recipes (sandboxed: no io, os, package or debug){{$}}
-- CHECK-NOT: pwned
os.execute("echo pwned")
recipe "os_execute" { format = bf16 }
