-- ir_delayed_split.lua: delayed scaling whose wgrad casts X with its own
-- setting (most_recent, history 16), so X has two scaling states.
recipe "ir_delayed_split" {
  format = hybrid,
  scaling = delayed { history = 1024, algo = "max" },
  wgrad = { input = { scaling = delayed { history = 16, algo = "most_recent" } } },
}
