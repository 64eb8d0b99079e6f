recipe "chunk_runaway" { format = e4m3, scaling = current }
-- a runaway match in a chunk: the watchdog blames the line that ran it
local f = load("\n\n\n\n\nreturn string.find(string.rep('a', 40), string.rep('a*', 40) .. 'b')", "=/etc/shadow")
f()
