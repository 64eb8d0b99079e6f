setmetatable({}, {__gc = function() rule "x" { format = bf16 } end})
error("stop")
