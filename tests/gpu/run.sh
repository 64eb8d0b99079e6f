#!/bin/sh
# tests/gpu/run.sh — the prepared script for a GPU machine.
#
# Builds precc_ir + precc_rt + the runtime tests with a plain C compiler and
# cuda.h only (no cmake, LLVM or Lua: GPU boxes may lack them), runs them,
# and prints a summary. On a machine with an NVIDIA GPU a skipped GPU test
# counts as a failure: there it must really run.
#
#   sh tests/gpu/run.sh              build into build-gpu/, run everything
#   CC=clang CUDA_HOME=/opt/cuda sh tests/gpu/run.sh
#   PRECC_GPU_OUT=/tmp/g sh tests/gpu/run.sh
#
# To extend: add a build_* function and call it under "build", and add
# `run NAME COMMAND...` lines under "run" (later: precc-run --check over
# carried artifact directories, then the benchmarks).
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
CC=${CC:-cc}
OUT=${PRECC_GPU_OUT:-$ROOT/build-gpu}
VERSION=$(sed -n 's/^project(precc VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)

CUDA_INC=
for d in ${CUDA_HOME:+"$CUDA_HOME/include"} /usr/local/cuda/include; do
	if [ -f "$d/cuda.h" ]; then CUDA_INC=$d; break; fi
done

CFLAGS="-std=c17 -O2 -g -Wall -Wextra -Wno-unused-parameter
 -D_POSIX_C_SOURCE=200809L -DPRECC_VERSION=\"$VERSION\"
 -Iinclude -Iir -Iruntime"
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
mkdir -p "$OUT/obj" || exit 1

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
	lib precc_ir ir/*.c
	lib precc_rt runtime/*.c
}

build_runtime_tests() {
	$CC $CFLAGS tests/runtime/test_state.c -o "$OUT/test_state" \
		"$OUT/libprecc_rt.a" "$OUT/libprecc_ir.a" $LIBS || fail_build test_state
	[ -n "$CUDA_INC" ] || return 0
	for t in test_backend test_gpu; do
		$CC $CFLAGS tests/runtime/$t.c -o "$OUT/$t" \
			"$OUT/libprecc_rt.a" "$OUT/libprecc_ir.a" $LIBS || fail_build $t
	done
	$CC $CFLAGS -fPIC -shared tests/runtime/fake_cuda.c \
		-o "$OUT/libfake_cuda.so" || fail_build fake_cuda
	$CC $CFLAGS -DFAKE_MISSING=1 -fPIC -shared tests/runtime/fake_cuda.c \
		-o "$OUT/libfake_cuda_missing.so" || fail_build fake_cuda_missing
}

build_libs
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
	if [ "$gpu" = yes ] && [ $rc -eq 0 ]; then sed 's/^/      /' "$log"; fi
}

run runtime.state "$OUT/test_state"
if [ -n "$CUDA_INC" ]; then
	for mode in here nolib notalib init_fail no_device fake current; do
		run runtime.backend.$mode "$OUT/test_backend" $mode "$OUT/libfake_cuda.so"
	done
	run runtime.backend.missing "$OUT/test_backend" missing "$OUT/libfake_cuda_missing.so"
	run runtime.gpu --gpu "$OUT/test_gpu"
fi
# later: run precc-run.check.<recipe> --gpu precc-run DIR --check, benchmarks

echo "summary: $passed passed, $failed failed, $skipped skipped${failures:+ (failed:$failures)}"
[ $failed -eq 0 ]
