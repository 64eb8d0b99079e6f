recipe "r" { format = e4m3, scaling = current, rules = { rule "a" { reason = "x", bogus = 1 } } }
