recipe "chunk_name" { format = e4m3, scaling = current }
-- what the recipe sees of errors in chunks: their names quoted
print(pcall(load("local x\nlocal y = x.z", "@/etc/passwd")))
print(pcall(load("local t = {}\nreturn t.a.b")))
local f = load("local x = 1\nerror('boom')", "=/etc/shadow")
f()
