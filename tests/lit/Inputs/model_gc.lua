local x = setmetatable({}, { __gc = function() end })
linear("fc", 64, 64)
