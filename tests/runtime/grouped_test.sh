#!/bin/sh
# grouped_test.sh PRECC TEST_GROUPED ROOT PRECC_RUN — `precc build` for a
# Mixtral-style block (8 experts, tests/lit/Inputs/model_mixtral_small.json)
# under a bf16 and three fp8 recipes (fprop, dgrad and wgrad grouped) and one
# whose dgrad stays per expert, then test_grouped over each: the grouped
# forward/backward (dx too) against every expert's own layer, bit for bit,
# and the bad offsets refused (runtime/grouped.c); a manifest whose groups
# contradict themselves is refused at load, at its line. 77 when this
# precc has no `build`.
#
# grouped_test.sh PRECC TEST_GROUPED ROOT PRECC_RUN FAKE_LIB — precc-run
# --check on the fake driver (which runs nothing): the groups' GEMM
# outputs are bounded as GEMMs (gemm_check.c takes gemm_grouped), so the
# never-written cuda outputs are reported beyond the bound.
set -u
precc=$1 test=$2 root=$3 run=$4 fake=${5-}
"$precc" build --help >/dev/null 2>&1 || { echo "SKIP: $precc has no 'build' command"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
if [ -n "$fake" ]; then
	PRECC_CACHE_DIR=$tmp/cache PRECC_PTXAS=/nonexistent "$precc" build "$root/recipes/deepseek_v3.lua" \
		--model "$root/tests/lit/Inputs/model_mixtral_small.json" -o "$tmp/a" >"$tmp/log" 2>&1 ||
		{ echo "FAIL: precc build: $(tail -1 "$tmp/log")"; exit 1; }
	FAKE_CUDA_MANIFEST=$tmp/a PRECC_LIBCUDA=$fake "$run" "$tmp/a" --check --layer experts.w1 \
		--m 256 >"$tmp/out" 2>&1
	for want in "gemm model.layers.0.block_sparse_moe.experts.w1 (random inputs) 'y' bf16[M,384]" \
		"gemm model.layers.0.block_sparse_moe.experts.w1 (random inputs) 'dw' bf16[3072,256]" \
		"BEYOND THE BOUND" "check: FAILED"; do
		grep -qF "$want" "$tmp/out" || { echo "FAIL: output lacks: $want"; fails=1; }
	done
	[ $fails -eq 0 ] || { sed 's/^/    /' "$tmp/out" | head -40; exit 1; }
	echo "ok: precc-run --check bounds the groups' GEMM outputs"
	exit 0
fi
# bf16, deepseek_v3, mxfp8, current_tensorwise, te_current (a tensorwise
# activation scale per expert: {gx*}, {*xg} in wgrad) and rowwise_gw_hp (its dgrad's tensorwise
# weight scale one per expert, {N x *} over the stacked weights) group
# fprop, dgrad and wgrad; dgrad_expert
# (bf16, but one expert's dX in fp32: the experts' dgrads differ) leaves
# dgrad to each expert's own layer, and a dx is refused
cat >"$tmp/dgrad_expert.lua" <<'EOF'
recipe "dgrad_expert" {
  description = "bf16; expert 3's dX in fp32: its dgrad differs from the others', so not grouped",
  format = bf16,
  output = bf16,
  rules = { rule "experts%.3%." { dgrad = { output = fp32 } } },
}
EOF
for r in bf16 deepseek_v3 mxfp8 rowwise_gw_hp dgrad_expert current_tensorwise te_current; do
	recipe=$root/recipes/$r.lua want="gemms fprop dgrad wgrad"
	[ $r = dgrad_expert ] && recipe=$tmp/$r.lua want="gemms fprop wgrad"
	if ! PRECC_CACHE_DIR=$tmp/cache PRECC_PTXAS=/nonexistent "$precc" build "$recipe" \
		--model "$root/tests/lit/Inputs/model_mixtral_small.json" -o "$tmp/$r" >"$tmp/build.log" 2>&1; then
		echo "FAIL  precc build $r: $(tail -1 "$tmp/build.log")"
		fails=$((fails + 1))
		continue
	fi
	if "$test" "$tmp/$r" >"$tmp/out" 2>&1 && [ "$(grep -c ": 8 experts, .*, $want," "$tmp/out")" = 3 ]; then
		echo "ok    $r ($want): $(grep "compared" "$tmp/out")"
	else
		cat "$tmp/out"
		echo "FAIL  $r (want 3 groups of $want)"
		fails=$((fails + 1))
	fi
done
# two targets: sm_89's groups (target_groups) on its own plans
if PRECC_CACHE_DIR=$tmp/cache PRECC_PTXAS=/nonexistent "$precc" build "$root/recipes/bf16.lua" \
	--model "$root/tests/lit/Inputs/model_mixtral_small.json" --target sm_90a,sm_89 \
	-o "$tmp/two" >"$tmp/build.log" 2>&1 && "$test" "$tmp/two" sm_89; then
	echo "ok    bf16, sm_89 of two targets"
else
	echo "FAIL  bf16, sm_89 of two targets"
	fails=$((fails + 1))
fi
# precc-run runs the groups' steps after the layers (its own offsets)
out=$("$run" "$tmp/deepseek_v3" --backend cpu --layer experts.w 2>&1)
case $out in
*"layer model.layers.0.block_sparse_moe.experts.w2 M=256 random inputs: ran"*) echo "ok    precc-run runs the groups" ;;
*) echo "FAIL  precc-run: $(echo "$out" | grep -v "^k_" | tail -3)"; fails=$((fails + 1)) ;;
esac
# the reader: a group's count against its expert_layers, its offsets buffer
refuse() {
	rm -rf "$tmp/bad"
	cp -r "$tmp/bf16" "$tmp/bad"
	sed "$1" "$tmp/bf16/manifest.json" > "$tmp/bad/manifest.json"
	out=$("$run" "$tmp/bad" --backend cpu 2>&1)
	case $out in
	*"manifest.json:"*"$2"*) echo "ok    refused: $2" ;;
	*) echo "FAIL  want \"$2\", got: $(echo "$out" | head -1)"; fails=$((fails + 1)) ;;
	esac
}
refuse '0,/"experts":	8/s//"experts":	7/' "8 expert_layers for 7 experts"
refuse 's/"role":	"offsets"/"role":	"input"/' "buffer 'offs' is i32[8] but not the offsets"
refuse 's/"model.layers.0.block_sparse_moe.experts.7.w1"\]/"nope"]/' "is not one of the layers"
[ $fails -eq 0 ]
