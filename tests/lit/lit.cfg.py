# lit configuration for precc's golden tests (recipe -> plan -> IR, CLI).
# Every test is a text file carrying its own RUN: lines.
import os
import lit.formats

config.name = "precc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".lua", ".json", ".ir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)

site = lit_config.params.get("precc_site")
if not site:
    lit_config.fatal("run through ctest (needs --param precc_site=...)")
ns = {}
exec(open(site).read(), ns)

config.test_exec_root = os.path.join(ns["precc_bin"], "tests", "lit-out")
config.substitutions.append(("%precc", os.path.join(ns["precc_bin"], "precc")))
config.substitutions.append(("%recipes", os.path.join(ns["precc_src"], "recipes")))
# lower_grouped's IR of a recipe x model (tests/frontend/grouped_ir.c)
config.substitutions.append(("%grouped_ir", os.path.join(ns["precc_bin"], "tests", "frontend", "grouped_ir")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
# %exit N CMD...: run CMD and fail unless it exits with exactly N.
config.substitutions.append(("%exit", os.path.join(config.test_source_root, "exit.sh")))
config.substitutions.append(("FileCheck", ns["filecheck"]))
config.environment["PRECC_CACHE_DIR"] = os.path.join(config.test_exec_root, "cache")
# the cache key (driver/cache_key.c) made on first use here, not in ~/.config
config.environment["PRECC_CACHE_KEY"] = os.path.join(config.test_exec_root, "cache.key")
for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "HOME"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
