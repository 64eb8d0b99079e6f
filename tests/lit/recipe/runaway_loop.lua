-- A loop of cheap instructions around costly C calls stays under the
-- instruction budget and runs into the CPU watchdog. Lua is running, so
-- the watchdog's first tick stops it at the next hook with an ordinary
-- error: the loop's line, and the state unwound and freed rather than an
-- _exit from the signal handler (the fuzzers caught a block lost that way).
-- RUN: %exit 1 env PRECC_SANDBOX_CPU_S=1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- CHECK: {{^}}{{.*}}recipe/runaway_loop.lua:9: error: recipe used more than 1 s of CPU time (an infinite loop?){{$}}
local n = 0
for i = 1, 1e9 do n = n + #string.rep("x", 1 << 20) end
