local t = {}
for i = 1, 1e9 do
  t[i] = { i, tostring(i) }
end
