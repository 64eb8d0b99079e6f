#!/bin/sh
# layer_test.sh PRECC TEST_LAYER ROOT — `precc build` for tiny x the
# recipes below into a temp dir, then test_layer over each (forward +
# backward + commit == run_layer; delayed scaling's commit). 77 when this
# precc has no `build`.
set -u
precc=$1 test=$2 root=$3
"$precc" build --help >/dev/null 2>&1 || { echo "SKIP: $precc has no 'build' command"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
for r in te_delayed_hybrid current_tensorwise deepseek_v3 bf16 fp16_dynamic_loss_scale mxfp8; do
	if ! PRECC_CACHE_DIR=$tmp/cache "$precc" build "$root/recipes/$r.lua" \
		--model "$root/recipes/models/tiny.lua" -o "$tmp/$r" >"$tmp/build.log" 2>&1; then
		echo "FAIL  precc build $r: $(tail -1 "$tmp/build.log")"
		fails=$((fails + 1))
		continue
	fi
	mode=
	[ $r = te_delayed_hybrid ] && mode=delayed
	if "$test" "$tmp/$r" $mode; then
		echo "ok    $r"
	else
		echo "FAIL  $r"
		fails=$((fails + 1))
	fi
done
[ $fails -eq 0 ]
