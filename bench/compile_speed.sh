#!/bin/sh
# compile_speed.sh [PRECC] [MODEL] [RUNS]: precc build time, cold cache (a
# fresh PRECC_CACHE_DIR each run) and warm (the same build again), for
# every shipped recipe (or $RECIPES), on $TARGETS (default sm_90a; the
# issue-28 plan is TARGETS=sm_90a,sm_89 with the 70B config), with --jobs
# $JOBS (default: precc's, the CPUs it may use).
# Prints one markdown row per recipe and binary: medians of RUNS runs of
# wall and CPU seconds (precc + its ptxas children, /usr/bin/time), and
# from --time the CPU in LLVM and in ptxas, the kernels and the ptxas runs.
# With BASE=OTHER_PRECC each run builds with BASE and then PRECC, turn about,
# so both see the same load; the load average is printed before each recipe.
# CPU seconds are the figure to compare on a shared machine: wall seconds
# at 2 jobs there say more about the other processes than about precc.
set -u
precc=${1:-build/precc}
model=${2:-recipes/models/llama-3-8b.json}
runs=${3:-3}
targets=${TARGETS:-sm_90a}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x /usr/bin/time ] || { echo "compile_speed.sh: needs /usr/bin/time" >&2; exit 2; }
jobs=${JOBS:+--jobs $JOBS}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# run BIN TAG: one cold and one warm build; appends to $tmp/TAG.*
run() {
	rm -rf "$tmp/cache" "$tmp/out"
	PRECC_CACHE_DIR="$tmp/cache" /usr/bin/time -f "%e %U %S" -o "$tmp/t" "$1" build "$r" \
		--model "$model" --target "$targets" -o "$tmp/out" --time $jobs > "$tmp/log" 2>&1 \
		|| echo "fails: $(grep -m1 error "$tmp/log" | cut -c1-80)" > "$tmp/$2.status"
	awk '{ print $1 }' "$tmp/t" >> "$tmp/$2.cw"
	awk '{ print $2 + $3 }' "$tmp/t" >> "$tmp/$2.cc"
	sed -n 's/^time: cpu: .* LLVM \([0-9.]*\) ms, ptxas \([0-9.]*\) ms.*/\1 \2/p' "$tmp/log" >> "$tmp/$2.lp"
	sed -n 's/^time: \([0-9]*\) kernels, .*, \([0-9]*\) ptxas (.*/\1 \2/p' "$tmp/log" > "$tmp/$2.k"
	PRECC_CACHE_DIR="$tmp/cache" /usr/bin/time -f "%e %U %S" -o "$tmp/t" "$1" build "$r" \
		--model "$model" --target "$targets" -o "$tmp/out" $jobs > /dev/null 2>&1
	awk '{ print $1 }' "$tmp/t" >> "$tmp/$2.ww"
	awk '{ print $2 + $3 }' "$tmp/t" >> "$tmp/$2.wc"
}

row() { # TAG NAME
	k=$(cat "$tmp/$1.k" 2>/dev/null)
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$2" \
		"$(echo "$k" | awk '{ print $1 }')" "$(echo "$k" | awk '{ print $2 }')" \
		"$(median < "$tmp/$1.cw")" "$(median < "$tmp/$1.cc")" \
		"$(awk '{ printf "%.2f\n", $1 / 1000 }' "$tmp/$1.lp" | median)" \
		"$(awk '{ printf "%.2f\n", $2 / 1000 }' "$tmp/$1.lp" | median)" \
		"$(median < "$tmp/$1.ww")" "$(median < "$tmp/$1.wc")" \
		"$(cat "$tmp/$1.status" 2>/dev/null || echo ok)"
}

echo "model $(basename "$model"), targets $targets, $runs runs, $(nproc) CPUs, $(date -u '+%F %H:%M UTC')"
echo
echo "| recipe | precc | kernels | ptxas runs | cold wall s | cold CPU s | LLVM CPU s | ptxas CPU s | warm wall s | warm CPU s | status |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
for r in ${RECIPES:-recipes/*.lua}; do
	case $r in */*) ;; *) r=recipes/$r.lua ;; esac
	name=$(basename "$r" .lua)
	rm -f "$tmp"/base.* "$tmp"/new.*
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	for i in $(seq "$runs"); do
		[ -n "${BASE:-}" ] && run "$BASE" base
		run "$precc" new
	done
	[ -n "${BASE:-}" ] && row base "base (load $load)"
	row new "$( [ -n "${BASE:-}" ] && echo new || echo "load $load")"
done
