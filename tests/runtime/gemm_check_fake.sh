#!/bin/sh
# gemm_check_fake.sh PRECC PRECC_RUN ROOT FAKE_LIB — precc-run --check's
# GEMM path on the fake driver, which runs nothing: each GEMM output is
# compared within its bound (a line with max abs, max rel and ulps per
# GEMM output), the never-written cuda outputs are beyond it, and the check
# fails naming the first element beyond the bound.
set -u
precc=$1 run=$2 root=$3 lib=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PRECC_CACHE_DIR=$tmp/cache "$precc" build "$root/recipes/deepseek_v3.lua" \
	--model "$root/recipes/models/tiny.lua" --target sm_90 -o "$tmp/a" >"$tmp/log" 2>&1 ||
	{ echo "FAIL: precc build: $(tail -1 "$tmp/log")"; exit 1; }
# the fake checks each launch against the manifest (fake_launch.c)
FAKE_CUDA_MANIFEST=$tmp/a PRECC_LIBCUDA=$lib "$run" "$tmp/a" --check --layer layers.0.self_attn.q_proj --m 128 >"$tmp/out" 2>&1
rc=$?
fails=0
[ $rc -eq 1 ] || { echo "FAIL: exit $rc, want 1"; fails=1; }
for want in "gemm model.layers.0.self_attn.q_proj (random inputs) 'y' bf16[M,256]" \
	"max abs" "max rel" "ulps" "BEYOND THE BOUND" "elements beyond the bound; first [0, 0]" \
	"check: FAILED"; do
	grep -qF "$want" "$tmp/out" || { echo "FAIL: output lacks: $want"; fails=1; }
done
[ $fails -eq 0 ] || { sed 's/^/    /' "$tmp/out" | head -40; exit 1; }
echo "ok: precc-run --check bounds every GEMM output and fails past the bound"
