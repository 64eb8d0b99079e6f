-- No require (and no package, dofile or loadfile) in the sandbox.
-- RUN: %exit 1 %precc check %s --model %recipes/models/tiny.lua 2>&1 | FileCheck %s
-- RUN: cd %inputs && %exit 1 %precc check recipe_dofile.lua --model %recipes/models/tiny.lua 2>&1 | FileCheck %s --check-prefix=DOFILE
-- CHECK: recipe/require.lua:6: error: 'require' is not available in recipes (sandboxed: no io, os, package or debug){{$}}
-- DOFILE: {{^}}recipe_dofile.lua:2: error: 'dofile' is not available in recipes (sandboxed: no io, os, package or debug){{$}}
local lfs = require("lfs")
recipe "require" { format = bf16 }
