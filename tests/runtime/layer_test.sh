#!/bin/sh
# layer_test.sh PRECC TEST_LAYER ROOT — `precc build` for tiny x the
# recipes below into a temp dir, then test_layer over each (forward +
# backward + commit == run_layer; delayed scaling's commit), and over two of
# them with the steps' gemm labels removed. 77 when this precc has no
# `build`.
set -u
precc=$1 test=$2 root=$3
"$precc" build --help >/dev/null 2>&1 || { echo "SKIP: $precc has no 'build' command"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
for r in te_delayed_hybrid current_tensorwise deepseek_v3 bf16 fp16_dynamic_loss_scale mxfp8 rowwise nvfp4; do
	if ! PRECC_CACHE_DIR=$tmp/cache "$precc" build "$root/recipes/$r.lua" \
		--model "$root/recipes/models/tiny.lua" -o "$tmp/$r" >"$tmp/build.log" 2>&1; then
		echo "FAIL  precc build $r: $(tail -1 "$tmp/build.log")"
		fails=$((fails + 1))
		continue
	fi
	mode=
	[ $r = te_delayed_hybrid ] && mode=delayed
	# bf16 recipes quantize no x: nothing for k to share with q
	[ $r = bf16 ] || [ $r = fp16_dynamic_loss_scale ] && mode=noshare
	if "$test" "$tmp/$r" $mode; then
		echo "ok    $r"
	else
		echo "FAIL  $r"
		fails=$((fails + 1))
	fi
done
# GEMM output amaxes (fprop's y.amax, dgrad's dx.amax) are placed in the
# saved region: test_layer compares them with run_layer's; a NULL dx skips
# the dgrad that also makes dx.amax
cat >"$tmp/out_amax.lua" <<'EOF'
recipe "out_amax" {
  format = hybrid,
  scaling = current,
  fprop = { output = { format = bf16, amax = true } },
  dgrad = { output = { format = bf16, amax = true } },
}
EOF
if ! PRECC_CACHE_DIR=$tmp/cache "$precc" build "$tmp/out_amax.lua" \
	--model "$root/recipes/models/tiny.lua" -o "$tmp/out_amax" >"$tmp/build.log" 2>&1; then
	echo "FAIL  precc build out_amax: $(tail -1 "$tmp/build.log")"
	fails=$((fails + 1))
elif ! grep -q '"name":[[:space:]]*"dx.amax"' "$tmp/out_amax/manifest.json" ||
	! grep -q '"name":[[:space:]]*"y.amax"' "$tmp/out_amax/manifest.json"; then
	echo "FAIL  out_amax: the plan has no y.amax or dx.amax"
	fails=$((fails + 1))
elif "$test" "$tmp/out_amax"; then
	echo "ok    out_amax (y.amax and dx.amax saved)"
else
	echo "FAIL  out_amax"
	fails=$((fails + 1))
fi
# The phases come from the dataflow, not from the steps' gemm labels: the
# same plans without any "gemm" key cut the same way (rowwise's weight
# quantize, which fprop and dgrad share, is labelled dgrad).
for r in rowwise te_delayed_hybrid; do
	mkdir -p "$tmp/$r.nogemm"
	sed 's/"gemm":[[:space:]]*"[a-z]*",//' "$tmp/$r/manifest.json" > "$tmp/$r.nogemm/manifest.json"
	if grep -q '"gemm":' "$tmp/$r.nogemm/manifest.json"; then
		echo "FAIL  $r: gemm keys left"; fails=$((fails + 1))
	elif "$test" "$tmp/$r.nogemm" $([ $r = te_delayed_hybrid ] && echo delayed); then
		echo "ok    $r without gemm labels"
	else
		echo "FAIL  $r without gemm labels"; fails=$((fails + 1))
	fi
done
[ $fails -eq 0 ]
