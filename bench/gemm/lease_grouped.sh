#!/bin/sh
# bench/gemm/lease_grouped.sh — issue 29's grouped GEMM figures in one device
# call (<= 8 minutes): bench_grouped_gpu (precc's grouped fprop, dgrad,
# wgrad and the grouped forward/backward calls through the runtime's
# grouped API, each output checked, then timed) on bench/gemm/moe_shapes.lua
# (DeepSeek-V3's and Mixtral-8x7B's experts at T = 4096 and 16384, balanced
# and skewed routing, and DeepGEMM's published shapes), bench_gemm_gpu on
# the dense GEMMs of the same total M, then bench/gemm/grouped_ref.py
# (torch._grouped_mm bf16, torch._scaled_grouped_mm, a per-expert
# torch.matmul loop) and the side-by-side table with #29's targets.
#
#   sh bench/gemm/lease_grouped.sh prepare   here (CPU): the artifacts into
#        $ART (default tests/gpu/artifacts/grouped; PTX dropped, cubins kept)
#        and the cost model's predictions ($ART/predicted_grouped.txt: needs
#        nvdisasm and cuobjdump, see bench/sass_audit.py)
#   sh bench/gemm/lease_grouped.sh predict   here: only the predictions, for
#        the kernels already in $ART (tests/gpu/prepare.sh's grouped/)
#   sh bench/gemm/lease_grouped.sh dry-run   here: checks what a lease needs
#        (the groups and dense linears in every recipe's manifest, cubins),
#        the budget, and prints the commands it would run
#   sh bench/gemm/lease_grouped.sh fake PRECC BENCH LIBFAKE [PYTHON]
#        here (ctest bench.grouped.fake): bench_grouped_gpu against the
#        counting fake driver on a Mixtral-style block (launch geometry and
#        arguments checked against the manifest, nothing computed), and
#        grouped_ref.py --dry-run under PYTHON where it has torch
#   sh bench/gemm/lease_grouped.sh [SECONDS] there: the run (default 480 s),
#        logs and JSON into $OUT (the device tool's folder) or /tmp/precc-grouped
#
# Budget (H100/H200, estimated; every part boxed by timeout, JSONL written
# as it goes): build with cc ~60-90 s; bench_grouped_gpu ~70 s at 300 grouped
# TFLOP/s (19 configurations x 3 recipes, 44 PFLOP per GEMM kind, 5 timings
# of 24 runs each), boxed to half of what is left; bench_gemm_gpu on the 10
# dense shapes ~30 s; grouped_ref.py ~40 s. tests/gpu/lease.sh runs it as
# part G (PRECC_LEASE_G=1).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
ART=${PRECC_GROUPED_ARTIFACTS:-$ROOT/tests/gpu/artifacts/grouped}
PRECC=${PRECC:-$ROOT/build/precc}
# deepseek_v3 first: DeepGEMM's comparison; then bf16 (torch._grouped_mm)
RECIPES="deepseek_v3:0.2 bf16:0.02 mxfp8:0.2"
MODE=${1:-480}
. "$ROOT/bench/gemm/lease_lib.sh"

case $MODE in
prepare)
	lease_build lease_grouped bench/gemm/moe_shapes.lua || exit 1
	sh "$0" predict || echo "lease_grouped: no predictions (the run prints measured rows only)"
	python3 tests/gpu/slim.py "$ART" || exit 1
	echo "lease_grouped: prepared $ART ($(du -sh "$ART" | cut -f1))"
	exit 0 ;;
predict)
	# the cost model's grouped predictions from the kernels' SASS (the
	# audit's JSON, its rows named by group), before slim.py drops the PTX
	lease_audit lease_grouped || exit 1
	python3 bench/gemm_model.py --grouped "$ART/audit.json" >"$ART/predicted_grouped.txt" || exit 1
	echo "predictions: $ART/predicted_grouped.txt"
	exit 0 ;;
fake)
	[ $# -ge 4 ] || { echo "usage: lease_grouped.sh fake PRECC BENCH LIBFAKE [PYTHON]"; exit 2; }
	precc=$2 bench=$3 lib=$4 py=${5:-python3}
	t=$(mktemp -d) || exit 1
	trap 'rm -rf "$t"' EXIT
	man=
	for rt in $RECIPES; do
		r=${rt%%:*}
		PRECC_CACHE_DIR=$t/cache PRECC_PTXAS=/nonexistent "$precc" build "recipes/$r.lua" \
			--model tests/lit/Inputs/model_mixtral_small.json -o "$t/$r" >"$t/build.log" 2>&1 ||
			{ echo "FAIL: $r does not build: $(tail -1 "$t/build.log")"; exit 1; }
		man=${man:+$man:}$t/$r
	done
	# T = 100 and 300 x top-2: unaligned counts, padding rows, an expert
	# with 4x the others' rows; every launch checked against the manifest
	FAKE_CUDA_MANIFEST=$man PRECC_LIBCUDA=$lib PRECC_BENCH_NO_CHECK=1 PRECC_GROUPED_TOKENS="100 300" \
		"$bench" "$t/g.jsonl" "$t/deepseek_v3" "$t/bf16:0.02" "$t/mxfp8" >"$t/bench.log" 2>&1
	rc=$?
	if [ $rc != 0 ]; then echo "FAIL: bench_grouped_gpu on the fake driver: exit $rc"; cat "$t/bench.log"; exit 1; fi
	python3 - "$t/g.jsonl" <<'PY' || exit 1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bad = 0
# 3 recipes x 2 distinct shapes (w1 = w3, w2) x 2 T x 2 routings x
# (fprop, dgrad, wgrad, forward, backward)
want = 3 * 2 * 2 * 2 * 5
if len(rows) != want:
    print("FAIL: %d JSONL rows, expected %d" % (len(rows), want)); bad = 1
for r in rows:
    if r["m"] != r["tokens"] * 2:   # top-2 (no "_top" in the names)
        print("FAIL: M %d for T %d" % (r["m"], r["tokens"])); bad = 1
    align = r["token_align"]
    # GroupedExperts' static bound
    if r["m_total"] < r["m"] + r["experts"] * (align - 1):
        print("FAIL: m_total %d below M + E (token_align - 1) for %s" % (r["m_total"], r["recipe"])); bad = 1
kinds = {(r["recipe"], r["what"]) for r in rows}
for rec in ("bf16", "deepseek_v3", "mxfp8"):
    for w in ("fprop", "dgrad", "wgrad", "forward", "backward"):
        if (rec, w) not in kinds:
            print("FAIL: no %s %s row" % (rec, w)); bad = 1
al = {r["recipe"]: r["token_align"] for r in rows}
print("fake: %d rows; token_align %s" % (len(rows), al))
sys.exit(bad)
PY
	# with the values checked, the fake's outputs (never computed: still the
	# NaN poison) must fail the check
	FAKE_CUDA_MANIFEST=$t/bf16 PRECC_LIBCUDA=$lib PRECC_GROUPED_TOKENS=100 PRECC_GROUPED_ROUTING=balanced \
		"$bench" "$t/c.jsonl" "$t/bf16:0.02" >"$t/check.log" 2>&1
	rc=$?
	if [ $rc != 1 ] || [ "$(grep -c 'fprop .* BAD' "$t/check.log")" != 2 ]; then
		echo "FAIL: bench_grouped_gpu took outputs nothing computed (exit $rc)"; cat "$t/check.log"; exit 1
	fi
	if "$py" -c 'import torch' 2>/dev/null; then
		"$py" bench/gemm/grouped_ref.py --dry-run || { echo "FAIL: grouped_ref.py --dry-run"; exit 1; }
		"$py" bench/gemm/grouped_ref.py --dry-run --tokens 4096,x >/dev/null 2>&1 &&
			{ echo "FAIL: grouped_ref.py took --tokens 4096,x"; exit 1; }
	else
		echo "note: $py has no torch: grouped_ref.py --dry-run not run"
	fi
	echo "lease_grouped: fake run ok"
	exit 0 ;;
dry-run)
	bad=0
	python3 - "$ART" $RECIPES <<'PY' || bad=1
import json, os, re, sys
art, recipes = sys.argv[1], [r.split(":")[0] for r in sys.argv[2:]]
text = open("bench/gemm/moe_shapes.lua").read()
blocks = re.findall(r'\{"(model\.layers\.\d+\.[^"]+)",\s*(\d+),', text)
bad = 0
for r in recipes:
    mf = os.path.join(art, r, "manifest.json")
    if not os.path.exists(mf):
        print("dry-run: FAIL: no %s (sh bench/gemm/lease_grouped.sh prepare)" % mf); bad = 1; continue
    m = json.load(open(mf))
    kern = {k["name"]: k for k in m["kernels"]}
    groups = m.get("groups", [])
    for name, ne in blocks:
        gs = [g for g in groups if g["name"].startswith(name + ".experts.")]
        if not gs:
            print("dry-run: FAIL: %s groups nothing of %s" % (r, name)); bad = 1
        for g in gs:
            if g["experts"] != int(ne) or g["gemms"] != ["fprop", "dgrad", "wgrad"]:
                print("dry-run: FAIL: %s %s: %d experts, gemms %s" % (r, g["name"], g["experts"], g["gemms"])); bad = 1
            for st in m["layer_classes"][g["class"]]["steps"]:
                if "cubin" not in kern[st["kernel"]]["files"].get("sm_90a", {}):
                    print("dry-run: FAIL: %s %s: kernel %s has no sm_90a cubin" % (r, g["name"], st["kernel"])); bad = 1
    dense = [l["fqn"] for l in m["layers"] if re.match(r"m\d+_n\d+_k\d+$", l["fqn"])]
    print("dry-run: %s: %d groups, %d dense linears (%s)" % (r, len(groups), len(dense), " ".join(dense)))
sys.exit(bad)
PY
	[ -f "$ART/predicted_grouped.txt" ] && head -3 "$ART/predicted_grouped.txt"
	echo "dry-run: on the device it would run (budget: see the header):"
	echo "  PRECC_GPU_OUT=/tmp/precc-build-gpu PRECC_GPU_CHECKS=none PRECC_GPU_BENCH=0 sh tests/gpu/run.sh"
	echo "  /tmp/precc-build-gpu/bench_grouped_gpu OUT/grouped.jsonl $(for rt in $RECIPES; do printf '%s ' "$ART/$rt"; done)"
	echo "  /tmp/precc-build-gpu/bench_gemm_gpu $ART OUT/grouped_dense.jsonl $RECIPES"
	echo "  python3 bench/gemm/grouped_ref.py OUT/grouped.jsonl --dense OUT/grouped_dense.jsonl --json OUT/grouped_torch.json"
	[ $bad = 0 ] && echo "dry-run: ready" || echo "dry-run: NOT ready"
	exit $bad ;;
esac

BUDGET=$MODE
T0=$(date +%s)
O=${OUT:-/tmp/precc-grouped}
B=${PRECC_GPU_OUT:-/tmp/precc-build-gpu}
mkdir -p "$O" || exit 1
left() { echo $((BUDGET - ($(date +%s) - T0))); }
lease_machine "$O/grouped_machine.txt"
if [ ! -x "$B/bench_grouped_gpu" ] || [ ! -x "$B/bench_gemm_gpu" ]; then
	PRECC_GPU_OUT=$B PRECC_GPU_CHECKS=none PRECC_GPU_BENCH=0 timeout 150 sh tests/gpu/run.sh \
		>"$O/grouped_build.log" 2>&1
	[ -x "$B/bench_grouped_gpu" ] || { echo "lease_grouped: bench_grouped_gpu did not build"; tail -5 "$O/grouped_build.log"; exit 1; }
fi
dirs=
for rt in $RECIPES; do dirs="$dirs $ART/$rt"; done
echo "== bench_grouped_gpu ($(left) s left)"
# shellcheck disable=SC2086
timeout $(($(left) / 2)) "$B/bench_grouped_gpu" "$O/grouped.jsonl" $dirs >"$O/grouped.log" 2>&1
rc=$?
tail -3 "$O/grouped.log"
echo "bench_grouped_gpu: exit $rc"
echo "== bench_gemm_gpu, the dense GEMMs of the same M ($(left) s left)"
# shellcheck disable=SC2086
timeout $(($(left) / 2)) "$B/bench_gemm_gpu" "$ART" "$O/grouped_dense.jsonl" $RECIPES >"$O/grouped_dense.log" 2>&1
echo "bench_gemm_gpu: exit $?"
echo "== grouped_ref.py ($(left) s left)"
if lease_cuda_torch; then
	timeout $(($(left) - 10)) python3 bench/gemm/grouped_ref.py "$O/grouped.jsonl" --dense "$O/grouped_dense.jsonl" \
		--json "$O/grouped_torch.json" --budget $(($(left) - 40)) >"$O/grouped_torch.log" 2>&1
	echo "grouped_ref.py: exit $?"
	sed -n '/^precc.s grouped GEMMs against/,$p' "$O/grouped_torch.log"
else
	echo "SKIP grouped_ref.py: python3 has no torch with a CUDA device"
fi
[ -f "$ART/predicted_grouped.txt" ] && cp "$ART/predicted_grouped.txt" "$O/"
grep -E 'BAD|not finite|not 0|cannot open' "$O/grouped.log" "$O/grouped_dense.log" | head -10
exit $rc   # 77: no GPU (bench_grouped_gpu says why)
