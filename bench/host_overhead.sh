#!/bin/sh
# host_overhead.sh [BUILD] [M] [STEPS]: host time per layer and per Linear
# call (bench/RESULTS.md, "Host overhead per layer and per Linear call"):
# builds te_delayed_hybrid, current_tensorwise and deepseek_v3 for the
# Llama-3-70B config (561 linears, sm_90a), runs bench_host on each over
# tests/runtime's fake driver, then bench_torch_host.py in the Python tests'
# venv (BUILD/python-venv, tests/python/venv.sh). Exits 77 without the fake
# driver (no cuda.h at build time) or the venv.
set -u
build=${1:-build}
m=${2:-1024}
steps=${3:-50}
fake=$build/tests/runtime/libprecc_fake_cuda_count.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -x "$build/bench/bench_host" ] || [ ! -f "$fake" ]; then
	echo "SKIP: $build/bench/bench_host or the fake driver was not built (cuda.h missing)"
	exit 77
fi
uptime
for r in te_delayed_hybrid current_tensorwise deepseek_v3; do
	PRECC_CACHE_DIR=$tmp/cache "$build/precc" build recipes/$r.lua \
		--model tests/lit/Inputs/model_llama3_70b.json --target sm_90a -o "$tmp/$r" >/dev/null || exit 1
	PRECC_LIBCUDA=$fake "$build/bench/bench_host" "$tmp/$r" "$m" "$steps" || exit 1
done
py=$build/python-venv/bin/python
if [ ! -x "$py" ]; then
	echo "SKIP: no $py (sh tests/python/venv.sh python3 $build/python-venv)"
	exit 77
fi
PRECC_LIB=$build PRECC_BIN=$build/precc PYTHONPATH=python PRECC_LIBCUDA=$fake \
	PRECC_TORCH_CACHE=$tmp/torch "$py" bench/bench_torch_host.py
uptime
