recipe "routers in fp8" {
  format = e4m3,
  rules = {
    rule(function(l) return l.kind == "router" end) { format = e4m3, reason = "router in fp8" },
  },
}
