-- fuzz_model_lua finding (2026-12-06): a runaway loop of linear calls,
-- stopped by the sandbox's CPU watchdog. The watchdog then _exited from
-- its signal handler, which the harness caught mid-load; LeakSanitizer
-- reported the load's blocks, which precc left to the exit. fuzz.h came
-- to ignore them after a watchdog exit, and CI (2026-12-07) still saw one
-- 34-byte block: the tick had landed inside malloc, after the allocation
-- and before the hook that logs it. Now the first tick stops Lua at its
-- next hook with an ordinary error that frees everything, and this input
-- must end with no report at all. run.sh replays it before every run of
-- fuzz_model_lua (make fuzz-smoke in CI).
for i = 0, 30203020 do
	pcall""linear(i.. "_pj",7, 12)end
lndum("oj",12)
