-- The watchdog's hard stop: a pattern match that backtracks for ever runs
-- in C, where no hook sees it, so the second tick _exits from the signal
-- handler and the harness ignores the load's blocks (fuzz.h). The matcher
-- allocates nothing while it runs, so the tick cannot land inside malloc.
string.find(string.rep("a", 40), string.rep("a*", 40) .. "b")
