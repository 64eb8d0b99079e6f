#!/bin/sh
# manifest_format.sh PRECC TEST_MANIFEST_FORMAT SRC — manifests of plans that
# use every part of a layer object (delayed-scaling updates, per-block
# scales, target_layers of a second target) are cJSON's bytes.
set -eu
precc=$1 check=$2 src=$3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
for r in te_delayed_hybrid deepseek_v3; do
	PRECC_PTXAS=/nonexistent "$precc" build "$src/recipes/$r.lua" \
		--model "$src/tests/lit/build/Inputs/build_small.lua" --target sm_90a,sm_89 \
		--no-cache -o "$d/$r" 2>/dev/null
	grep -q '"target_layers"' "$d/$r/manifest.json"
	"$check" "$d/$r/manifest.json"
done
grep -q '"updates":	\[{' "$d/te_delayed_hybrid/manifest.json"
echo "driver.manifest_format: ok"
