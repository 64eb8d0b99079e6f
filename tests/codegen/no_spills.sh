#!/bin/sh
# no_spills.sh PRECC SRC [MODEL...]: every shipped recipe (SRC/recipes/*.lua)
# x MODEL (default Llama-3-8B and the 70B-class config) through `precc build
# --target sm_90a,sm_89,sm_90` with ptxas; fails on any kernel file whose
# ptxas -v spilled (issue 7: no spills for any shipped recipe on any
# target). bench/quant_stats.sh is the wider table (four models, the
# ratios). Exit 77 without ptxas.
#
# NO_SPILLS_BUILD_ONLY=1 (the sanitized build's ctest): the same builds
# without ptxas (PRECC_PTXAS=/nonexistent), so that the whole pipeline at
# 70B scale runs under ASan + UBSan; ptxas's figures are the unsanitized
# suite's to check, and they are the same for both builds.
set -u
precc=$1 src=$2
only=${NO_SPILLS_BUILD_ONLY:-0}
shift 2
models=${*:-$src/recipes/models/llama-3-8b.json $src/tests/lit/Inputs/model_llama3_70b.json}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0 n=0
for m in $models; do
	for r in "$src"/recipes/*.lua; do
		rm -rf "$tmp/out"
		if [ "$only" = 1 ]; then
			if ! PRECC_PTXAS=/nonexistent PRECC_CACHE_DIR="$tmp/cache" "$precc" build "$r" \
				--model "$m" --target sm_90a,sm_89,sm_90 -o "$tmp/out" > "$tmp/log" 2>&1; then
				echo "FAIL $(basename "$r") x $(basename "$m"): build failed"
				cat "$tmp/log"
				bad=1
			fi
			n=$((n + 1))
			continue
		fi
		if ! PRECC_CACHE_DIR="$tmp/cache" "$precc" build "$r" --model "$m" \
			--target sm_90a,sm_89,sm_90 -o "$tmp/out" > "$tmp/log" 2>&1; then
			echo "FAIL $(basename "$r") x $(basename "$m"): build failed"
			cat "$tmp/log"
			bad=1
			continue
		fi
		if ! grep -q '^precc build: ptxas ' "$tmp/log"; then
			echo "SKIP: no ptxas ($(grep -m1 'ptxas not found' "$tmp/log"))"
			exit 77
		fi
		python3 - "$tmp/out/manifest.json" "$(basename "$r" .lua) x $(basename "$m" .json)" <<'PY' || bad=1
import json, sys
m = json.load(open(sys.argv[1]))
bad = 0
files = 0
for k in m["kernels"]:
    for sm, f in k["files"].items():
        files += 1
        if "spill_bytes" not in f:
            print("FAIL %s: %s %s: no ptxas figures" % (sys.argv[2], k["name"], sm)); bad = 1
        elif f["spill_bytes"] > 0:
            print("FAIL %s: %s (%s, %s) spills %d bytes at %d registers on %s"
                  % (sys.argv[2], k["name"], k["shape"], k.get("func", "?"), f["spill_bytes"], f["regs"], sm))
            bad = 1
print("%s: %d kernel files, %s" % (sys.argv[2], files, "spills" if bad else "no spills"))
sys.exit(bad)
PY
		n=$((n + 1))
	done
done
echo "$n builds"
exit $bad
