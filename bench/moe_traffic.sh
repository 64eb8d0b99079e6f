#!/bin/sh
# bench/moe_traffic.sh — issue 29's grouped vs per-expert traffic, static
# (driver/stats.c, "the expert groups' traffic"; nothing is run): for a
# DeepSeek-V3 MoE layer (256 experts, top-8, 7168 -> 2048) and one layer of
# Mixtral-8x7B (8 experts, top-2, 4096 -> 14336), every recipe that groups,
# at T = 4096 and 16384 tokens (M = T x top-k routed rows, spread evenly),
# `precc build --stats-m M` and its expert lines, as one table: launches
# and MB per training step of the layer's expert groups, grouped and per
# expert, the minimum (each operand read once, each result written once),
# and the rows GroupedExperts' static m_total bound adds (token_align).
#
#   sh bench/moe_traffic.sh [PRECC]      (make moe-traffic; 16 builds, ~1-2 min)
#
# Mixtral-8x7B's 32 layers repeat the one built here: x32 for the model.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PRECC=${1:-${PRECC:-$ROOT/build/precc}}
[ -x "$PRECC" ] || { echo "moe_traffic: no precc at $PRECC"; exit 1; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
sed 's/"num_hidden_layers": *[0-9]*/"num_hidden_layers": 1/' "$ROOT/recipes/models/mixtral-8x7b.json" \
	>"$T/mixtral-8x7b-layer.json"
RECIPES=${PRECC_MOE_RECIPES:-"bf16 fp16_dynamic_loss_scale mxfp8 deepseek_v3"}
printf '%-14s %-26s %6s %7s | %6s %11s | %6s %11s | %11s | %7s %7s | %s\n' model recipe T M \
	launches "grouped MB" launches "expert MB" "min MB" grouped expert "m_total (token_align)"
bad=0
for mm in "deepseek-v3-layer:$ROOT/tests/lit/Inputs/model_deepseek_v3_layer.json" \
          "mixtral-8x7b-layer:$T/mixtral-8x7b-layer.json"; do
	mname=${mm%%:*} mfile=${mm#*:}
	topk=$(sed -n 's/.*"num_experts_per_tok": *\([0-9]*\).*/\1/p' "$mfile")
	for r in $RECIPES; do
		for tok in 4096 16384; do
			m=$((tok * topk))
			log=$T/$mname.$r.$tok.log
			if ! PRECC_CACHE_DIR=$T/cache PRECC_PTXAS=/nonexistent "$PRECC" build \
				"$ROOT/recipes/$r.lua" --model "$mfile" -o "$T/out" --stats-m $m >"$log" 2>&1; then
				echo "moe_traffic: $r on $mname does not build: $(tail -1 "$log")"
				bad=1
				continue
			fi
			tot=$(grep '^stats: expert groups at M=' "$log")
			[ -n "$tot" ] || { echo "moe_traffic: $r on $mname: no expert groups"; bad=1; continue; }
			# stats: expert groups at M=32768: grouped A MB in B launches, per expert C MB in D launches, minimum E MB: ratio F grouped, G per expert
			set -- $(echo "$tot" | sed 's/[^0-9. ]//g')
			mt=$(grep -m1 '^stats:   ' "$log" | sed -n 's/.*m_total \([0-9]*\) rows (\([^;]*\); token_align \([0-9]*\)).*/\1 \2 \3/p')
			set -- "$@" $mt
			printf '%-14s %-26s %6d %7d | %6d %11.1f | %6d %11.1f | %11.1f | %7.3f %7.3f | %s %s (%s)\n' \
				"$mname" "$r" $tok $m $3 $2 $5 $4 $6 $7 $8 ${9:-?} ${10:-?} ${11:-?}
		done
	done
done
exit $bad
