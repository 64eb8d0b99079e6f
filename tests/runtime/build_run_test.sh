#!/bin/sh
# build_run_test.sh PRECC PRECC_RUN ROOT — `precc build` for tiny x every
# shipped recipe into a temp dir, then `precc-run --backend cpu` over each:
# every artifact the compiler writes must load (manifest, IR, ABI) and run
# through the cpu backend. A recipe precc build rejects is reported and
# skipped (the compiler's own tests own that); a precc-run failure on
# what it wrote fails this test. 77 when this precc has no `build`.
set -u
precc=$1 run=$2 root=$3
"$precc" build --help >/dev/null 2>&1 || { echo "SKIP: $precc has no 'build' command"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
built=0 fails=0
for r in "$root"/recipes/*.lua; do
	name=$(basename "$r" .lua)
	if ! PRECC_CACHE_DIR=$tmp/cache "$precc" build "$r" --model "$root/recipes/models/tiny.lua" \
		--target sm_90a -o "$tmp/$name" >"$tmp/build.log" 2>&1; then
		echo "note: precc build rejects $name: $(tail -1 "$tmp/build.log")"
		continue
	fi
	built=$((built + 1))
	if "$run" "$tmp/$name" --backend cpu >"$tmp/run.log" 2>&1; then
		echo "ok    $name: $(grep -c '^layer ' "$tmp/run.log") layer runs"
	else
		echo "FAIL  $name: precc-run --backend cpu exited $?"
		sed 's/^/    /' "$tmp/run.log" | tail -20
		fails=$((fails + 1))
	fi
done
[ $built -gt 0 ] || { echo "FAIL: precc build built no recipe"; exit 1; }
# A file precc build wrote, truncated afterwards: precc-run refuses the directory.
d=$(ls -d "$tmp"/current_tensorwise 2>/dev/null)
if [ -n "$d" ]; then
	"$run" "$d" --backend cpu > "$tmp/run.log" 2>&1
	grep -q "each has the size and FNV-1a 64 precc build recorded" "$tmp/run.log" || {
		echo "FAIL  precc-run does not check the recorded hashes"; fails=$((fails + 1)); }
	p=$(ls "$d"/*.ptx | head -1)
	head -c 100 "$p" > "$tmp/short" && cat "$tmp/short" > "$p"
	if "$run" "$d" --backend cpu > "$tmp/run.log" 2>&1 \
	   || ! grep -q "truncated or changed since precc build" "$tmp/run.log"; then
		echo "FAIL  precc-run accepts a truncated $p"; sed 's/^/    /' "$tmp/run.log" | tail -5
		fails=$((fails + 1))
	else
		echo "ok    a truncated PTX is refused: $(grep -m1 truncated "$tmp/run.log")"
	fi
fi
echo "runtime.build_run: $built built, $fails failed in precc-run"
[ $fails -eq 0 ]
