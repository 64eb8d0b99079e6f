#!/bin/sh
# quant_stats.sh [PRECC] [MODEL...]: every shipped recipe x MODEL (default
# Llama-3-8B, Llama-3-70B, Mistral-7B, Qwen2-7B) x target (sm_90a, sm_89,
# sm_90) through `precc build --stats` (issue 7: "no spills for any
# shipped recipe x these models x every target", and the step's bytes
# against its minimum). One markdown row per build: kernels, the kernels
# with spill bytes (ptxas -v, as the manifest records them), the most
# registers, the fewest CTAs an SM (H100/H200 figures, sm_90 targets only),
# and the step's ratios (all kernels, and without the GEMMs) at M = 8192.
# RECIPES="a b" and TARGETS="sm_90a" limit the rows.
set -u
precc=${1:-build/precc}
shift 2>/dev/null || true
models=${*:-recipes/models/llama-3-8b.json tests/lit/Inputs/model_llama3_70b.json tests/lit/Inputs/model_mistral_7b.json tests/lit/Inputs/model_qwen2_7b.json}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo '| recipe | model | target | kernels | spilling | max regs | fewest CTAs/SM | step ratio | without GEMMs |'
echo '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |'
for m in $models; do
	mname=$(basename "$m" .json)
	for r in ${RECIPES:-recipes/*.lua}; do
		case $r in */*) ;; *) r=recipes/$r.lua ;; esac
		name=$(basename "$r" .lua)
		for sm in ${TARGETS:-sm_90a sm_89 sm_90}; do
			rm -rf "$tmp/out"
			if ! PRECC_CACHE_DIR="$tmp/cache" "$precc" build "$r" --model "$m" --target $sm \
				-o "$tmp/out" --stats > "$tmp/log" 2>&1; then
				echo "| $name | $mname | $sm | build fails: $(tail -1 "$tmp/log") | | | | | |"
				continue
			fi
			python3 - "$tmp/out/manifest.json" "$name" "$mname" "$sm" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
ks = m["kernels"]
st = [k.get("stats", {}) for k in ks]
spill = sum(1 for s in st if s.get("spill_bytes", 0) > 0)
regs = max((s.get("regs", 0) for s in st), default=0)
ctas = [s["ctas_per_sm"] for s in st if "ctas_per_sm" in s]
t = m["stats"]
print("| %s | %s | %s | %d | %d | %d | %s | %.3f | %.3f |" % (
    sys.argv[2], sys.argv[3], sys.argv[4], len(ks), spill, regs,
    min(ctas) if ctas else "-", t["ratio"], t["quantize_ratio"]))
PY
		done
	done
done
