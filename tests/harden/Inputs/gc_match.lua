setmetatable({}, {__gc = function() string.find(string.rep("a", 40), string.rep("a*", 40) .. "b") end})
error("stop")
