local fmt = setmetatable({}, {__index = function() return e4m3 end})
recipe "gc_ok" { format = fmt.x, scaling = current }
