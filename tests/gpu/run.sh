#!/bin/sh
# tests/gpu/run.sh — the prepared script for a GPU machine.
#
# Builds precc_ir + precc_rt + precc-run + the runtime tests + the
# bandwidth benchmark with a plain C compiler and cuda.h only (no cmake,
# LLVM or Lua: GPU boxes may lack them), runs the tests, then
# `precc-run --check` (cuda vs cpu, bit for bit) over every carried
# artifact directory, then bench_quant_bw, bench_commit, bench_gemm_gpu
# and bench/gemm/torch_ref.py (cuBLASLt at the same shapes), and prints a
# summary. On a machine with an NVIDIA GPU a skipped GPU test counts as a
# failure: there it must really run.
#
#   sh tests/gpu/prepare.sh          first, on a machine with precc built:
#                                    the artifacts, into tests/gpu/artifacts/
#                                    (git ignores them: carry that folder
#                                    to the GPU machine with the tree)
#   sh tests/gpu/run.sh              build into build-gpu/, run everything
#   CC=clang CUDA_HOME=/opt/cuda sh tests/gpu/run.sh
#   PRECC_GPU_OUT=/tmp/g PRECC_GPU_ARTIFACTS=/tmp/a sh tests/gpu/run.sh
#   PRECC_GPU_FULL=1 sh tests/gpu/run.sh   every llama-3-8b layer, not only
#                                    layer 0's (the cpu side is slow)
#   PRECC_GPU_CHECKS='tiny*' ...     only the checks whose model.recipe name
#                                    matches; PRECC_GPU_BENCH=0: no benches
#   PRECC_GPU_M=128 ...              precc-run --check's M (default its own)
#   tests/gpu/lease.sh               all of it, ordered and time-boxed for
#                                    one device lease
#
# To extend: add a build_* function and call it under "build", and add
# `run NAME COMMAND...` lines under "run".
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
CC=${CC:-cc}
OUT=${PRECC_GPU_OUT:-$ROOT/build-gpu}
ART=${PRECC_GPU_ARTIFACTS:-$ROOT/tests/gpu/artifacts}
VERSION=$(sed -n 's/^project(precc VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)

CUDA_INC=
for d in ${CUDA_HOME:+"$CUDA_HOME/include"} /usr/local/cuda/include; do
	if [ -f "$d/cuda.h" ]; then CUDA_INC=$d; break; fi
done

CFLAGS="-std=c17 -O2 -g -fPIC -Wall -Wextra -Wno-unused-parameter
 -D_POSIX_C_SOURCE=200809L -I$OUT/include -Iinclude -Iir -Iruntime"
if [ -n "$CUDA_INC" ]; then
	CFLAGS="$CFLAGS -DPRECC_HAVE_CUDA_H=1 -I$CUDA_INC"
fi
LIBS="-lm -ldl -lpthread"

have_gpu=no
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
	have_gpu=yes
elif [ -e /dev/nvidia0 ]; then
	have_gpu=yes
fi

echo "precc $VERSION GPU run: $(uname -n), $($CC --version | head -1)"
echo "cuda.h: ${CUDA_INC:-none (cpu backend only)}; GPU visible: $have_gpu"
if [ "$have_gpu" = yes ]; then
	nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null
fi
mkdir -p "$OUT/obj" "$OUT/include/precc" || exit 1
# precc/version.h, as CMake's configure_file writes it
VMAJ=${VERSION%%.*} VREST=${VERSION#*.}
VMIN=${VREST%%.*} VPAT=${VREST#*.}
sed -e "s/@PROJECT_VERSION@/$VERSION/" -e "s/@PROJECT_VERSION_MAJOR@/$VMAJ/" \
    -e "s/@PROJECT_VERSION_MINOR@/$VMIN/" -e "s/@PROJECT_VERSION_PATCH@/$VPAT/" \
    include/precc/version.h.in >"$OUT/include/precc/version.h" || exit 1

# ---- build -----------------------------------------------------------------

fail_build() { echo "BUILD FAILED: $*"; exit 1; }

# lib NAME SOURCES...: compiles each source (in parallel) into OUT/libNAME.a
lib() {
	name=$1; shift
	objs=
	for src in "$@"; do
		obj="$OUT/obj/$name-$(basename "$src" .c).o"
		objs="$objs $obj"
		$CC $CFLAGS -c "$src" -o "$obj" &
	done
	wait
	for obj in $objs; do [ -f "$obj" ] || fail_build "$name: $obj"; done
	rm -f "$OUT/lib$name.a"
	ar rcs "$OUT/lib$name.a" $objs || fail_build "ar $name"
}

build_libs() {
	rm -f "$OUT"/obj/*.o
	lib precc_ir ir/*.c ir/interp/*.c
	lib precc_rt $(ls runtime/*.c | grep -v 'runtime/precc_run\.c$')
	# libprecc_rt.so, as CMake's precc_rt_shared: what precc.torch loads
	# (tests/gpu/torch_step.py: PRECC_LIB=$OUT/libprecc_rt.so)
	$CC -shared -Wl,--version-script=runtime/precc_rt.map -o "$OUT/libprecc_rt.so" \
		"$OUT"/obj/precc_rt-*.o "$OUT"/obj/precc_ir-*.o $LIBS || fail_build libprecc_rt.so
}

build_tools() {
	$CC $CFLAGS runtime/precc_run.c -o "$OUT/precc-run" \
		"$OUT/libprecc_rt.a" "$OUT/libprecc_ir.a" $LIBS || fail_build precc-run
	[ -n "$CUDA_INC" ] || return 0
	for b in bench_quant_bw bench_commit bench_gemm_gpu bench_grouped_gpu; do
		$CC $CFLAGS bench/$b.c -o "$OUT/$b" \
			"$OUT/libprecc_rt.a" "$OUT/libprecc_ir.a" $LIBS || fail_build $b
	done
}

build_runtime_tests() {
	for t in test_state test_json test_plan; do
		$CC $CFLAGS tests/runtime/$t.c -o "$OUT/$t" \
			"$OUT/libprecc_rt.a" "$OUT/libprecc_ir.a" $LIBS || fail_build $t
	done
	[ -n "$CUDA_INC" ] || return 0
	for t in test_backend test_gpu test_gpu_layer; do
		$CC $CFLAGS tests/runtime/$t.c -o "$OUT/$t" \
			"$OUT/libprecc_rt.a" "$OUT/libprecc_ir.a" $LIBS || fail_build $t
	done
	$CC $CFLAGS -fPIC -shared tests/runtime/fake_cuda.c tests/runtime/fake_launch.c \
		-o "$OUT/libfake_cuda.so" || fail_build fake_cuda
	$CC $CFLAGS -DFAKE_MISSING=1 -fPIC -shared tests/runtime/fake_cuda.c \
		tests/runtime/fake_launch.c -o "$OUT/libfake_cuda_missing.so" || fail_build fake_cuda_missing
}

build_libs
build_tools
build_runtime_tests
echo "built into $OUT"

# ---- run -------------------------------------------------------------------

passed=0 failed=0 skipped=0 failures=
# run NAME [--gpu] COMMAND...: exit 0 passes, 77 skips, anything else fails;
# with --gpu, a skip on a machine with a GPU is a failure.
run() {
	name=$1; shift
	gpu=no
	if [ "$1" = --gpu ]; then gpu=yes; shift; fi
	log="$OUT/$name.log"
	"$@" >"$log" 2>&1
	rc=$?
	if [ $rc -eq 77 ] && [ "$gpu" = yes ] && [ "$have_gpu" = yes ]; then
		rc=1
		echo "(a GPU is visible, so this skip is a failure)" >>"$log"
	fi
	case $rc in
	0) passed=$((passed + 1)); echo "PASS  $name" ;;
	77) skipped=$((skipped + 1)); echo "SKIP  $name: $(grep -m1 SKIP "$log")" ;;
	*) failed=$((failed + 1)); failures="$failures $name"
	   echo "FAIL  $name (exit $rc)"; sed 's/^/      /' "$log" ;;
	esac
	# a GPU run's evidence: its last lines (the whole log is in OUT)
	if [ "$gpu" = yes ] && [ $rc -eq 0 ]; then tail -n 14 "$log" | sed 's/^/      /'; fi
}

INPUTS=$ROOT/tests/runtime/Inputs
run runtime.state "$OUT/test_state"
run runtime.json "$OUT/test_json"
run runtime.plan.cpu "$OUT/test_plan" cpu "$INPUTS"
run runtime.plan.manifest "$OUT/test_plan" manifest "$INPUTS"
if [ -n "$CUDA_INC" ]; then
	for mode in here nolib notalib init_fail no_device fake current; do
		run runtime.backend.$mode "$OUT/test_backend" $mode "$OUT/libfake_cuda.so"
	done
	run runtime.backend.missing "$OUT/test_backend" missing "$OUT/libfake_cuda_missing.so"
	run runtime.gpu --gpu "$OUT/test_gpu"
	run runtime.gpu.layer --gpu "$OUT/test_gpu_layer" "$ART/tiny/te_delayed_hybrid"
	run runtime.plan.fake "$OUT/test_plan" fake "$INPUTS" "$OUT/libfake_cuda.so"
	run runtime.precc_run sh tests/runtime/precc_run_test.sh "$OUT/precc-run" \
		"$INPUTS" "$OUT/libfake_cuda.so"
else
	run runtime.precc_run sh tests/runtime/precc_run_test.sh "$OUT/precc-run" "$INPUTS"
fi

# precc-run --check: every carried kernel, cuda against the interpreter.
# llama-3-8b: layer 0's layers (every distinct kernel but lm_head's) unless
# PRECC_GPU_FULL=1; precc-run skips layers that repeat an earlier one's
# kernels either way.
if [ ! -d "$ART" ]; then
	failed=$((failed + 1)); failures="$failures artifacts"
	echo "FAIL  artifacts: none at $ART (run tests/gpu/prepare.sh where precc is built)"
else
	if [ -s "$ART/FAILED" ]; then
		while IFS= read -r line; do
			failed=$((failed + 1)); failures="$failures build:${line%%:*}"
			echo "FAIL  build ${line%%:*} (prepare.sh):${line#*:}"
		done <"$ART/FAILED"
	fi
	for dir in "$ART"/*/*/; do
		[ -f "$dir/manifest.json" ] || continue
		name=$(basename "$(dirname "$dir")").$(basename "$dir")
		case $name in bench.*|gemm.*|gemm-*|grouped.*) continue ;; esac
		# shellcheck disable=SC2254
		case $name in ${PRECC_GPU_CHECKS:-*}) ;; *) continue ;; esac
		layer=
		case $name in llama-3-8b.*)
			[ "${PRECC_GPU_FULL:-0}" = 1 ] || layer="--layer model.layers.0." ;;
		esac
		run "check.$name" --gpu "$OUT/precc-run" "$dir" --check $layer \
			${PRECC_GPU_M:+--m $PRECC_GPU_M}
	done
fi

# the bandwidth benchmark (prints its figures: copy, tensorwise, blockwise)
if [ -n "$CUDA_INC" ] && [ "${PRECC_GPU_BENCH:-1}" = 1 ]; then
	run bench.quant_bw --gpu "$OUT/bench_quant_bw" "$ART/bench"
	# delayed scaling's commit of llama-3-8b's 225 layers: per layer vs bulk
	run bench.commit --gpu "$OUT/bench_commit" "$ART/llama-3-8b/te_delayed_hybrid"
	# the GEMMs at bench/gemm/shapes.lua (each output checked, then timed),
	# then cuBLASLt and torch.matmul at the same shapes and the ratios
	run bench.gemm --gpu "$OUT/bench_gemm_gpu" "$ART/gemm" "$OUT/gemm.jsonl" \
		bf16:0.02 current_tensorwise:0.2 deepseek_v3:0.2
	run bench.gemm.sm_90 --gpu env PRECC_BENCH_MAX_MNK="${PRECC_BENCH_MAX_MNK_SM90:-1e12}" \
		"$OUT/bench_gemm_gpu" "$ART/gemm-sm_90" \
		"$OUT/gemm-sm_90.jsonl" current_tensorwise:0.2 deepseek_v3:0.2
	if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
		run bench.gemm.torch --gpu python3 bench/gemm/torch_ref.py "$OUT/gemm.jsonl" \
			--json "$OUT/gemm_torch.json"
	else
		echo "SKIP  bench.gemm.torch: python3 has no torch with a CUDA device"
	fi
fi

echo "summary: $passed passed, $failed failed, $skipped skipped${failures:+ (failed:$failures)}"
[ $failed -eq 0 ]
