for i = 0, 999999 do linear("l" .. i, 16, 16) end
