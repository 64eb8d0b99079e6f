#!/bin/sh
# tests/gpu/prepare.sh — build, on this (CPU) machine, the artifacts that
# tests/gpu/run.sh checks on a GPU machine: `precc build` for every shipped
# recipe x {tiny, llama-3-8b} (targets sm_90a,sm_89), and the bandwidth
# benchmark's 8192 x 8192 layer (tests/gpu/bw8192.lua) for the two recipes
# bench/bench_quant_bw.c measures. The artifacts are build output: never
# commit them (tests/gpu/.gitignore).
#
#   sh tests/gpu/prepare.sh                 into tests/gpu/artifacts/
#   PRECC=build/precc PRECC_GPU_ARTIFACTS=/tmp/a sh tests/gpu/prepare.sh
#
# Layout: ARTIFACTS/<model>/<recipe>/manifest.json, ARTIFACTS/bench/<recipe>/.
# A recipe that does not build is listed in ARTIFACTS/FAILED (with the
# error), which run.sh reports as failures; when it builds for the first
# target alone (sm_90a, the H200's), that build is kept for the GPU check.
# Exit status: 0 when everything built, 1 otherwise.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
PRECC=${PRECC:-$ROOT/build/precc}
OUT=${PRECC_GPU_ARTIFACTS:-$ROOT/tests/gpu/artifacts}
TARGETS=${PRECC_GPU_TARGETS:-sm_90a,sm_89}

[ -x "$PRECC" ] || { echo "prepare.sh: no precc at $PRECC (build it, or set PRECC)"; exit 1; }
case $OUT in ""|/|"$HOME"|"$ROOT") echo "prepare.sh: refusing to empty '$OUT'"; exit 1 ;; esac
rm -rf "$OUT" && mkdir -p "$OUT" || exit 1
: >"$OUT/FAILED"
built=0 failed=0

build() {  # build NAME RECIPE MODEL DIR
	log="$OUT/build.log"
	if "$PRECC" build "$2" --model "$3" --target "$TARGETS" -o "$4" >"$log" 2>&1; then
		built=$((built + 1))
		echo "built  $1"
		return
	fi
	err=$(tail -1 "$log")
	rm -rf "$4"
	failed=$((failed + 1))
	# the H200's target alone still gives the GPU run something to check
	first=${TARGETS%%,*}
	if [ "$first" != "$TARGETS" ] &&
	   "$PRECC" build "$2" --model "$3" --target "$first" -o "$4" >"$log" 2>&1; then
		echo "FAILED $1 for $TARGETS (built for $first only): $err"
		echo "$1: for $TARGETS (built for $first only): $err" >>"$OUT/FAILED"
	else
		rm -rf "$4"
		echo "FAILED $1: $err"
		echo "$1: $err" >>"$OUT/FAILED"
	fi
}

for model in tiny:recipes/models/tiny.lua llama-3-8b:recipes/models/llama-3-8b.json; do
	mname=${model%%:*} mfile=${model#*:}
	for r in recipes/*.lua; do
		rname=$(basename "$r" .lua)
		build "$mname/$rname" "$r" "$mfile" "$OUT/$mname/$rname"
	done
done
for rname in current_tensorwise deepseek_v3; do
	build "bench/$rname" "recipes/$rname.lua" tests/gpu/bw8192.lua "$OUT/bench/$rname"
done
rm -f "$OUT/build.log"
echo "prepare.sh: $built built, $failed failed, into $OUT ($(du -sh "$OUT" | cut -f1));"
echo "  git ignores it: carry it to the GPU machine with the tree, then sh tests/gpu/run.sh"
[ $failed -eq 0 ]
