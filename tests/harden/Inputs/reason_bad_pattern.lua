recipe "r" { format = e4m3, scaling = current, rules = { rule "[" { reason = "x" } } }
