#!/bin/sh
# bench/gemm/lease_gemm.sh — issue 28's GEMM figures in one device call
# (<= 8 minutes): bench_gemm_gpu (fprop, dgrad and wgrad of every linear of
# bench/gemm/shapes.lua, each output checked, then timed) for bf16,
# current_tensorwise and deepseek_v3 on sm_90a, then bench/gemm/torch_ref.py
# (cuBLASLt tensorwise/rowwise/blockwise, torch.matmul) at the same shapes,
# then bench/gemm_model.py --compare: each measured row beside the cost
# model's prediction, and #28's targets measured and predicted. Records the
# card, driver, clocks, torch and the date first. Then the cluster part
# (issue 28 §1): bf16 and current_tensorwise built at --cluster=1x1 and
# --cluster=2x1 on bench/gemm/cluster_shapes.lua (8192^3 and two of
# shapes.lua's), timed in one bench_gemm_gpu call, side by side with 2x1's
# speedup (bench/gemm/cluster_compare.py).
#
#   sh bench/gemm/lease_gemm.sh prepare    here (CPU): the artifacts into
#        $ART (default tests/gpu/artifacts/gemm; PTX dropped, cubins kept)
#        and the model's predictions ($ART/predicted.json: needs nvdisasm
#        and cuobjdump, see bench/sass_audit.py)
#   sh bench/gemm/lease_gemm.sh predict    here: only the predictions, for
#        the kernels already in $ART (tests/gpu/prepare.sh's gemm/)
#   sh bench/gemm/lease_gemm.sh dry-run    here: checks what a lease needs
#        (every shape in every recipe's manifest, a prediction for each
#        GEMM, the budget) and prints the commands it would run
#   sh bench/gemm/lease_gemm.sh cluster-prepare   here: only the cluster
#        part's artifacts, $ART/cluster/<recipe>.{1x1,2x1} (tests/gpu/prepare.sh
#        calls it; tests/gpu/lease.sh runs them as its part C)
#   sh bench/gemm/lease_gemm.sh cluster-fake PRECC BENCH LIBFAKE   here
#        (ctest bench.cluster.fake): the cluster part on the fake driver at
#        small shapes (launches checked against the manifests, nothing
#        computed or timed for real), and its comparison table
#   sh bench/gemm/lease_gemm.sh [SECONDS]  there: the run (default 480 s),
#        logs and JSON into $OUT (the device tool's folder) or /tmp/precc-gemm
#
# tests/gpu/lease.sh can call it as its GEMM part (see the line in
# bench/RESULTS.md, "GEMM cost model"); alone, carry tests/gpu/artifacts.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
ART=${PRECC_GEMM_ARTIFACTS:-$ROOT/tests/gpu/artifacts/gemm}
PRECC=${PRECC:-$ROOT/build/precc}
RECIPES="bf16:0.02 current_tensorwise:0.2 deepseek_v3:0.2"
# the cluster part: the recipes whose GEMMs take 2x1 (bf16, tensorwise fp8)
CRECIPES="bf16:0.02 current_tensorwise:0.2"
CART=$ART/cluster
MODE=${1:-480}
. "$ROOT/bench/gemm/lease_lib.sh"

# cluster_build MODEL DIR [PRECC_BUILD_ENV...]: each recipe of $CRECIPES at
# --cluster=1x1 and =2x1 into DIR/<recipe>.<cluster>; a 2x1 build must
# have a kernel in clusters
cluster_build() {
	mkdir -p "$2" || return 1
	for rt in $CRECIPES; do
		r=${rt%%:*}
		for c in 1x1 2x1; do
			rm -rf "${2:?}/$r.$c"
			"$PRECC" build "recipes/$r.lua" --model "$1" --target sm_90a --cluster=$c -o "$2/$r.$c" \
				>"$2/$r.$c.build.log" 2>&1 ||
				{ echo "lease_gemm: $r --cluster=$c does not build:"; tail -3 "$2/$r.$c.build.log"; return 1; }
		done
		grep -q '"cluster":[[:space:]]*2' "$2/$r.2x1/manifest.json" ||
			{ echo "lease_gemm: $r at --cluster=2x1 has no kernel in clusters"; return 1; }
		! grep -q '"cluster"' "$2/$r.1x1/manifest.json" ||
			{ echo "lease_gemm: $r at --cluster=1x1 has a kernel in clusters"; return 1; }
	done
	echo "built $2: $CRECIPES at 1x1 and 2x1"
}

# the bench's recipe arguments: <recipe>.1x1:TOL <recipe>.2x1:TOL ...
cluster_args() {
	for rt in $CRECIPES; do
		printf '%s.1x1:%s %s.2x1:%s ' "${rt%%:*}" "${rt#*:}" "${rt%%:*}" "${rt#*:}"
	done
}

case $MODE in
prepare)
	lease_build lease_gemm bench/gemm/shapes.lua || exit 1
	cluster_build bench/gemm/cluster_shapes.lua "$CART" || exit 1
	sh "$0" predict || echo "lease_gemm: no predictions (the run prints measured rows only)"
	python3 tests/gpu/slim.py "$ART" || exit 1
	echo "lease_gemm: prepared $ART ($(du -sh "$ART" | cut -f1))"
	exit 0 ;;
predict)
	# the model's predictions for the kernels in $ART (their SASS: before
	# tests/gpu/slim.py drops the PTX it does not matter, the cubins stay)
	lease_audit lease_gemm || exit 1
	python3 bench/gemm_model.py --write "$ART/predicted.json" "$ART/audit.json"
	exit $? ;;
cluster-prepare)
	cluster_build bench/gemm/cluster_shapes.lua "$CART"
	exit $? ;;
cluster-fake)
	# the cluster part without a GPU: small shapes (odd row tiles, one and
	# several waves), no ptxas, the fake driver checking each launch
	# (cuLaunchKernelEx's cluster dimension, the grid a multiple of it)
	[ $# -ge 4 ] || { echo "usage: lease_gemm.sh cluster-fake PRECC BENCH LIBFAKE"; exit 2; }
	PRECC=$2 bench=$3 lib=$4
	t=$(mktemp -d) || exit 1
	trap 'rm -rf "$t"' EXIT
	printf 'model "cluster_fake"\nlinear("m640_n384_k256", 256, 384)\nlinear("m2304_n2048_k512", 512, 2048)\n' \
		>"$t/shapes.lua"
	PRECC_CACHE_DIR=$t/cache PRECC_PTXAS=/nonexistent cluster_build "$t/shapes.lua" "$t/c" || exit 1
	man=
	for rt in $CRECIPES; do man=${man:+$man:}$t/c/${rt%%:*}.1x1:$t/c/${rt%%:*}.2x1; done
	# shellcheck disable=SC2046
	FAKE_CUDA_MANIFEST=$man PRECC_LIBCUDA=$lib PRECC_BENCH_NO_CHECK=1 \
		"$bench" "$t/c" "$t/c.jsonl" $(cluster_args) >"$t/bench.log" 2>&1
	rc=$?
	if [ $rc != 0 ] || grep -q 'fake_cuda: launch' "$t/bench.log"; then
		echo "FAIL: bench_gemm_gpu on the fake driver: exit $rc"; cat "$t/bench.log"; exit 1
	fi
	python3 bench/gemm/cluster_compare.py "$t/c.jsonl" | tee "$t/cmp.txt" || exit 1
	# 2 recipes x 2 shapes x (fprop, dgrad, wgrad, chain), both clusters
	n=$(grep -c 'x$' "$t/cmp.txt")
	[ "$n" = 16 ] || { echo "FAIL: $n side-by-side rows, expected 16"; exit 1; }
	grep -q 'cluster 2x1 over 1x1: current_tensorwise fprop: geometric mean' "$t/cmp.txt" ||
		{ echo "FAIL: no summary line"; exit 1; }
	echo "cluster-fake: ok"
	exit 0 ;;
dry-run)
	bad=0
	python3 - "$ART" $RECIPES <<'PY' || bad=1
import json, os, re, sys
sys.path.insert(0, "bench")
import gemm_model
art, recipes = sys.argv[1], [r.split(":")[0] for r in sys.argv[2:]]
shapes = gemm_model.shapes()
bad = 0
pred = {}
if os.path.exists(os.path.join(art, "predicted.json")):
    for p in json.load(open(os.path.join(art, "predicted.json")))["rows"]:
        pred[(p["recipe"], p["m"], p["n"], p["k"], p["what"])] = p
else:
    print("dry-run: no %s/predicted.json: the run prints no predictions" % art); bad = 1
gemms = 0
for r in recipes:
    mf = os.path.join(art, r, "manifest.json")
    if not os.path.exists(mf):
        print("dry-run: FAIL: no %s (sh bench/gemm/lease_gemm.sh prepare)" % mf); bad = 1; continue
    m = json.load(open(mf))
    kern = {k["name"]: k for k in m["kernels"]}
    layers = {l["fqn"]: l["class"] for l in m["layers"]}
    for (mm, n, k) in shapes:
        name = "m%d_n%d_k%d" % (mm, n, k)
        if name not in layers:
            print("dry-run: FAIL: %s has no layer %s" % (r, name)); bad = 1; continue
        lc = m["layer_classes"][layers[name]]
        for st in lc["steps"]:
            kk = kern[st["kernel"]]
            if kk["shape"] != "gemm":
                continue
            gemms += 1
            if "cubin" not in kk["files"].get("sm_90a", {}):
                print("dry-run: FAIL: %s %s %s: no sm_90a cubin" % (r, name, st["gemm"])); bad = 1
            p = pred.get((r, mm, n, k, st["gemm"]))
            mv = kk.get("m_variant") or {}
            # at M >= m_min the runtime launches the m_variant kernel
            want = mv["kernel"] if isinstance(mv, dict) and mv.get("m_min", 1 << 62) <= mm else st["kernel"]
            if pred and (not p or p.get("kernel") != want):
                print("dry-run: %s %s %s: no prediction for kernel %s" % (r, name, st["gemm"], st["kernel"])); bad = 1
flop = sum(2.0 * mm * n * k for mm, n, k in shapes)
# time on the device: 3 GEMMs + the fprop chain, (20 + 3 + 1) launches each,
# at a pessimistic 300 TFLOP/s, plus torch_ref's 5 references x 23
est = 3 * 4 * 24 * flop / 300e12 + 5 * 23 * flop / 600e12
print("dry-run: %d shapes x %d recipes: %d GEMM steps, %d predicted; %.1f TFLOP per pass over the shapes, "
      "est. %.0f s of GPU time at 300 TFLOP/s (+ build, fills, checks)" % (len(shapes), len(recipes), gemms,
                                                                          len(pred), flop / 1e12, est))
sys.exit(bad)
PY
	for rt in $CRECIPES; do
		for c in 1x1 2x1; do
			[ -f "$CART/${rt%%:*}.$c/manifest.json" ] ||
				{ echo "dry-run: FAIL: no $CART/${rt%%:*}.$c (sh bench/gemm/lease_gemm.sh prepare)"; bad=1; }
		done
		grep -q '"cluster":[[:space:]]*2' "$CART/${rt%%:*}.2x1/manifest.json" 2>/dev/null ||
			{ echo "dry-run: FAIL: $CART/${rt%%:*}.2x1 has no kernel in clusters"; bad=1; }
	done
	echo "dry-run: on the device it would run:"
	echo "  PRECC_GPU_OUT=/tmp/precc-build-gpu PRECC_GPU_CHECKS=none PRECC_GPU_BENCH=0 sh tests/gpu/run.sh"
	echo "  /tmp/precc-build-gpu/bench_gemm_gpu $ART OUT/gemm.jsonl $RECIPES"
	echo "  timeout 90 /tmp/precc-build-gpu/bench_gemm_gpu $CART OUT/cluster.jsonl $(cluster_args)"
	echo "  python3 bench/gemm/cluster_compare.py OUT/cluster.jsonl"
	echo "  python3 bench/gemm/torch_ref.py OUT/gemm.jsonl --json OUT/gemm_torch.json"
	echo "  python3 bench/gemm_model.py --compare OUT/gemm.jsonl $ART/predicted.json OUT/gemm_torch.json"
	[ $bad = 0 ] && echo "dry-run: ready" || echo "dry-run: NOT ready"
	exit $bad ;;
esac

BUDGET=$MODE
T0=$(date +%s)
O=${OUT:-/tmp/precc-gemm}
B=${PRECC_GPU_OUT:-/tmp/precc-build-gpu}
mkdir -p "$O" || exit 1
left() { echo $((BUDGET - ($(date +%s) - T0))); }
lease_machine "$O/gemm_machine.txt"
[ -f "$ART/predicted.json" ] || echo "lease_gemm: no $ART/predicted.json: measured rows only"

if [ ! -x "$B/bench_gemm_gpu" ]; then
	PRECC_GPU_OUT=$B PRECC_GPU_CHECKS=none PRECC_GPU_BENCH=0 sh tests/gpu/run.sh >"$O/gemm_build.log" 2>&1
	[ -x "$B/bench_gemm_gpu" ] || { echo "lease_gemm: bench_gemm_gpu did not build"; tail -5 "$O/gemm_build.log"; exit 1; }
fi
echo "== bench_gemm_gpu ($(left) s left)"
# leave the cluster part its 90 s and torch_ref a third of the rest
ta=$((($(left) - 90) * 2 / 3))
[ "$ta" -ge 30 ] || ta=30
timeout "$ta" "$B/bench_gemm_gpu" "$ART" "$O/gemm.jsonl" $RECIPES >"$O/gemm.log" 2>&1
rc=$?
tail -3 "$O/gemm.log"
echo "bench_gemm_gpu: exit $rc"
# 1x1 against 2x1 (issue 28 §1): 3 shapes x 4 steps x 4 builds, 24 launches
# each, ~5 PFLOP: ~20 s at 300 TFLOP/s; boxed to 90 s
echo "== clusters: 1x1 and 2x1 side by side ($(left) s left)"
if [ -d "$CART" ]; then
	# shellcheck disable=SC2046
	timeout 90 "$B/bench_gemm_gpu" "$CART" "$O/cluster.jsonl" $(cluster_args) >"$O/cluster.log" 2>&1
	echo "bench_gemm_gpu (clusters): exit $?"
	grep -E 'BAD|not finite|run failed|cannot open' "$O/cluster.log" | head -5
	python3 bench/gemm/cluster_compare.py "$O/cluster.jsonl" 2>&1 | tee "$O/cluster_compare.txt"
else
	echo "SKIP clusters: no $CART (sh bench/gemm/lease_gemm.sh prepare)"
fi
echo "== torch_ref.py ($(left) s left)"
if lease_cuda_torch; then
	timeout $(($(left) - 10)) python3 bench/gemm/torch_ref.py "$O/gemm.jsonl" --json "$O/gemm_torch.json" \
		>"$O/gemm_torch.log" 2>&1
	echo "torch_ref.py: exit $?"
else
	echo "SKIP torch_ref.py: python3 has no torch with a CUDA device"
fi
echo "== measured beside predicted ($(left) s left)"
if [ -f "$ART/predicted.json" ] && [ -s "$O/gemm.jsonl" ]; then
	python3 bench/gemm_model.py --compare "$O/gemm.jsonl" "$ART/predicted.json" "$O/gemm_torch.json" \
		2>&1 | tee "$O/gemm_compare.txt"
fi
sed -n '/^precc against/,$p' "$O/gemm_torch.log" 2>/dev/null
grep -E 'BAD|not finite|run failed|cannot open [^s]' "$O/gemm.log" | head -10
exit $rc   # 77: no GPU (bench_gemm_gpu says why)
