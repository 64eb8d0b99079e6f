#!/bin/sh
# main_grad_test.sh PRECC TEST_LAYER INPUTS ROOT [FAKE_LIB] — build tiny x
# Inputs/recipes/ds_main_grad.lua (wgrad accumulates into main_grad) and
# ds_f32_dw.lua (the same dW in f32), then test_layer main_grad over both.
set -u
precc=$1 test=$2 inputs=$3 root=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in ds_main_grad ds_f32_dw; do
	PRECC_CACHE_DIR=$tmp/cache "$precc" build "$inputs/recipes/$r.lua" \
		--model "$root/recipes/models/tiny.lua" --target sm_89 -o "$tmp/$r" >"$tmp/log" 2>&1 ||
		{ echo "FAIL  precc build $r: $(tail -1 "$tmp/log")"; exit 1; }
done
# with the fake driver, each launch is checked against its manifest (fake_launch.c)
export FAKE_CUDA_MANIFEST="$tmp/ds_main_grad:$tmp/ds_f32_dw"
exec "$test" main_grad "$tmp/ds_main_grad" "$tmp/ds_f32_dw" ${5:+"$5"}
