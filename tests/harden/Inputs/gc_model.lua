setmetatable({}, {__gc = function() while true do string.find(string.rep("a", 40), string.rep("a*", 40) .. "b") end end})
linear("a", 16, 16)
