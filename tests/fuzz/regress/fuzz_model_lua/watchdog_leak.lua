-- fuzz_model_lua finding (2026-12-06): a runaway loop stopped by the
-- sandbox's CPU watchdog, whose _exit the harness catches mid-load;
-- LeakSanitizer then reported the load's blocks, which precc leaves to the
-- exit. fuzz.h ignores them after a watchdog exit only. run.sh replays it
-- before every run of fuzz_model_lua (make fuzz-smoke in CI).
for i = 0, 30203020 do
	pcall""linear(i.. "_pj",7, 12)end
lndum("oj",12)
