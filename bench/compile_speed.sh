#!/bin/sh
# compile_speed.sh [PRECC] [MODEL] [RUNS]: precc build wall time, cold cache
# (a fresh PRECC_CACHE_DIR each run) and warm (the same one again), for every
# shipped recipe, sm_90a, with the LLVM time per kernel from --time.
# Prints one markdown row per recipe: medians of RUNS runs.
set -u
precc=${1:-build/precc}
model=${2:-recipes/models/llama-3-8b.json}
runs=${3:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ms() { echo $(($(date +%s%N) / 1000000)); }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "| recipe | kernels | cold wall ms | warm wall ms | LLVM ms/kernel | ptxas ms (sum) | status |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
for r in recipes/*.lua; do
	name=$(basename "$r" .lua)
	: > "$tmp/cold" ; : > "$tmp/warm"; : > "$tmp/llvm"
	status=ok
	for i in $(seq "$runs"); do
		rm -rf "$tmp/cache" "$tmp/out"
		t0=$(ms)
		PRECC_CACHE_DIR="$tmp/cache" "$precc" build "$r" --model "$model" --target sm_90a \
			-o "$tmp/out" --time > "$tmp/log" 2>&1 || status=fails
		t1=$(ms)
		PRECC_CACHE_DIR="$tmp/cache" "$precc" build "$r" --model "$model" --target sm_90a \
			-o "$tmp/out" > /dev/null 2>&1
		t2=$(ms)
		echo $((t1 - t0)) >> "$tmp/cold"
		echo $((t2 - t1)) >> "$tmp/warm"
		sed -n 's/.*LLVM (\([0-9.]*\) ms, \([0-9.]*\) ms\/kernel), [0-9]* ptxas (\([0-9.]*\) ms).*/\2 \3/p' \
			"$tmp/log" >> "$tmp/llvm"
	done
	k=$(sed -n 's/^time: \([0-9]*\) kernels.*/\1/p' "$tmp/log" | tail -1)
	[ "$status" = fails ] && status="fails: $(grep -m1 error "$tmp/log" | cut -c1-90)"
	printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "${k:-?}" \
		"$(median < "$tmp/cold")" "$(median < "$tmp/warm")" \
		"$(awk '{ print $1 }' "$tmp/llvm" | median)" "$(awk '{ print $2 }' "$tmp/llvm" | median)" \
		"$status"
done
