-- string.dump is gone, and load refuses binary mode
assert(string.dump == nil)
local f = load("\27Lua", "chunk", "b")
