recipe "chunk_own_name" { format = e4m3, scaling = current }
-- a chunk named as the recipe itself is still a chunk
local f = load("\n\n\n\n\n\nerror('boom')", "@recipe_chunk_own_name.lua")
f()
