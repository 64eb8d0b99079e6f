#!/bin/sh
# tests/gpu/prepare.sh — build, on this (CPU) machine, the artifacts that
# tests/gpu/run.sh checks on a GPU machine: `precc build` for every shipped
# recipe x {tiny, llama-3-8b} (targets sm_90a,sm_89), bf16, deepseek_v3 and
# mxfp8 x a Mixtral-style block (mixtral-small: the expert groups), every recipe x tiny
# for sm_90 alone (tiny-sm_90: the mma.sync GEMMs on a Hopper), the
# bandwidth benchmark's 8192 x 8192 layer (tests/gpu/bw8192.lua) for the
# two recipes bench/bench_quant_bw.c measures, and bench/gemm/shapes.lua
# for bench/bench_gemm_gpu.c (gemm/: sm_90a; gemm-sm_90/: sm_90),
# bench/gemm/moe_shapes.lua for bench/bench_grouped_gpu.c (grouped/), and the
# Llama-style block of tests/gpu/torch_step.py (torch_step/: sm_90a) with
# the torchao wheel that script takes along (tests/gpu/wheels/). The
# artifacts and wheels are build output: never commit them
# (tests/gpu/.gitignore).
#
#   sh tests/gpu/prepare.sh                 into tests/gpu/artifacts/
#   PRECC=build/precc PRECC_GPU_ARTIFACTS=/tmp/a sh tests/gpu/prepare.sh
#   PRECC_GPU_SLIM=1 sh tests/gpu/prepare.sh   only what an sm_90 GPU loads
#
# Layout: ARTIFACTS/<model>/<recipe>/manifest.json (mixtral-small too), ARTIFACTS/bench/<recipe>/,
# ARTIFACTS/gemm/<recipe>/, ARTIFACTS/gemm/cluster/<recipe>.{1x1,2x1}/,
# ARTIFACTS/gemm-sm_90/<recipe>/, ARTIFACTS/grouped/<recipe>/,
# ARTIFACTS/torch_step/<recipe>/.
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

build() {  # build NAME RECIPE MODEL DIR [TARGETS]
	log="$OUT/build.log"
	if "$PRECC" build "$2" --model "$3" --target "${5:-$TARGETS}" -o "$4" >"$log" 2>&1; then
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
# a Mixtral-style block (8 experts): its expert groups' grouped kernels,
# which run.sh's precc-run --check runs after the layers (issue 29)
for rname in bf16 deepseek_v3 mxfp8; do
	build "mixtral-small/$rname" "recipes/$rname.lua" tests/lit/Inputs/model_mixtral_small.json \
		"$OUT/mixtral-small/$rname"
done
# the sm_89 family (mma.sync) on a Hopper: plans built for sm_90 alone
# (the runtime picks sm_90a's wgmma kernels whenever a plan has them)
for r in recipes/*.lua; do
	rname=$(basename "$r" .lua)
	build "tiny-sm_90/$rname" "$r" recipes/models/tiny.lua "$OUT/tiny-sm_90/$rname" sm_90
done
# bench_gemm_gpu's shapes: the wgmma family, and the mma.sync one on sm_90
for rname in bf16 current_tensorwise deepseek_v3; do
	build "gemm/$rname" "recipes/$rname.lua" bench/gemm/shapes.lua "$OUT/gemm/$rname" sm_90a
done
for rname in current_tensorwise deepseek_v3; do
	build "gemm-sm_90/$rname" "recipes/$rname.lua" bench/gemm/shapes.lua \
		"$OUT/gemm-sm_90/$rname" sm_90
done
# issue 28 §1: bf16 and current_tensorwise at --cluster=1x1 and 2x1 on
# bench/gemm/cluster_shapes.lua (gemm/cluster/<recipe>.<cluster>), timed side by
# side by lease.sh's part C (bench/gemm/lease_gemm.sh's cluster part)
if PRECC=$PRECC PRECC_GEMM_ARTIFACTS="$OUT/gemm" sh bench/gemm/lease_gemm.sh cluster-prepare >"$OUT/build.log" 2>&1; then
	built=$((built + 1))
	echo "built  gemm/cluster"
else
	failed=$((failed + 1))
	echo "FAILED gemm/cluster: $(tail -1 "$OUT/build.log")"
	echo "gemm/cluster: $(tail -1 "$OUT/build.log")" >>"$OUT/FAILED"
fi
# bench_grouped_gpu's MoE blocks and the dense GEMMs of the same M
# (bench/gemm/moe_shapes.lua, sm_90a): bench/gemm/lease_grouped.sh, lease.sh's part G
for rname in deepseek_v3 bf16 mxfp8; do
	build "grouped/$rname" "recipes/$rname.lua" bench/gemm/moe_shapes.lua "$OUT/grouped/$rname" sm_90a
done
PRECC_GROUPED_ARTIFACTS="$OUT/grouped" sh bench/gemm/lease_grouped.sh predict ||
	echo "prepare.sh: no grouped GEMM predictions (no nvdisasm/cuobjdump: make sass-tools)"
# the cost model's prediction for each of those GEMMs (bench/gemm_model.py,
# from their SASS), which lease.sh prints beside the measured rows
PRECC_GEMM_ARTIFACTS="$OUT/gemm" sh bench/gemm/lease_gemm.sh predict ||
	echo "prepare.sh: no GEMM predictions (no nvdisasm/cuobjdump: make sass-tools)"
# tests/gpu/torch_step.py's Llama-style block (hidden 4096, intermediate
# 14336), each fp8 recipe it runs, sm_90a
if PYTHONPATH="$ROOT/python" PRECC_BIN="$PRECC" \
   python3 tests/gpu/torch_step.py --build "$OUT/torch_step" --targets sm_90a >"$OUT/build.log" 2>&1; then
	n=$(grep -c '^built' "$OUT/build.log"); built=$((built + n)); echo "built  torch_step ($n recipes)"
else
	grep '^FAILED' "$OUT/build.log" | tee -a "$OUT/FAILED"
	failed=$((failed + $(grep -c '^FAILED' "$OUT/build.log")))
	built=$((built + $(grep -c '^built' "$OUT/build.log")))
fi
rm -f "$OUT/build.log"
# torchao for torch_step.py: the GPU machine has no package index. Its torch
# is the image's own (2.11.0+cu130 when last seen; a CUDA wheel of torch is
# ~900 MB, beyond the 64 MiB a lease carries), so the torchao of that torch
# (0.17.0, 3 MB) goes as a wheel into tests/gpu/wheels (git ignores it;
# carry it with the tree). PRECC_GPU_TORCHAO=0.18.0 for another, none: skip.
TORCHAO=${PRECC_GPU_TORCHAO:-0.17.0}
WHEELS=$ROOT/tests/gpu/wheels
if [ "$TORCHAO" != none ]; then
	mkdir -p "$WHEELS" && rm -f "$WHEELS"/torchao-*.whl
	if python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
		--implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
		--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		-d "$WHEELS" "torchao==$TORCHAO" >/dev/null 2>&1; then
		echo "wheel  $(basename "$WHEELS"/torchao-*.whl)"
	else
		echo "note: pip download torchao==$TORCHAO failed: torch_step.py runs without torchao"
	fi
fi
# PRECC_GPU_SLIM=1: only what an sm_90 GPU loads (a lease carries at most
# 64 MiB; tests/gpu/slim.py)
if [ "${PRECC_GPU_SLIM:-0}" = 1 ]; then
	python3 tests/gpu/slim.py "$OUT" || exit 1
fi
echo "prepare.sh: $built built, $failed failed, into $OUT ($(du -sh "$OUT" | cut -f1));"
echo "  git ignores it: carry it to the GPU machine with the tree, then sh tests/gpu/run.sh"
[ $failed -eq 0 ]
