# lit configuration for the hardening tests: the main suite's configuration,
# with this folder as its source root (%inputs is tests/harden/Inputs).
import os
exec(open(os.path.join(os.path.dirname(__file__), "..", "lit", "lit.cfg.py")).read())
config.name = "precc-harden"
config.excludes += ["CMakeLists.txt", "test_harden.c", "test_seal.c"]
exit_sh = os.path.join(os.path.dirname(__file__), "..", "lit", "exit.sh")
config.substitutions = [(k, exit_sh if k == "%exit" else v) for k, v in config.substitutions]
config.test_exec_root = os.path.join(ns["precc_bin"], "tests", "harden-out")
config.environment["PRECC_CACHE_DIR"] = os.path.join(config.test_exec_root, "cache")
# the cache key (driver/cache_key.c) made on first use here, not in ~/.config
config.environment["PRECC_CACHE_KEY"] = os.path.join(config.test_exec_root, "cache.key")
import sys
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%rtinputs", os.path.join(ns["precc_src"], "tests", "runtime", "Inputs")))
config.substitutions.append(("%fakecuda", os.path.join(ns["precc_bin"], "tests", "runtime", "libprecc_fake_cuda.so")))
config.substitutions.append(("%cachekey", config.environment["PRECC_CACHE_KEY"]))
