#!/bin/sh
# publish_kill.sh PRECC INPUTS RECIPES TMP: kills builds into one -o at each
# publishing step (PRECC_TEST_KILL_AT) and before every rename the build
# makes (an LD_PRELOAD hook); after each kill -o must be one build, whole
# (out_whole.py), with the user's files; a rebuild must leave no stage
# beside -o and no temporary in it. Prints what it checked; exits 1 on the
# first failure.
precc=$1 in=$2 recipes=$3 t=$4
model=$in/build_small.lua
rm -rf "$t" && mkdir -p "$t/p/out/sub" || exit 1
out=$t/p/out
echo keep > "$out/notes.txt"; echo keep > "$out/sub/data"
export PRECC_CACHE_DIR=$t/cache PRECC_PTXAS=/nonexistent
build() { "$precc" build "$recipes/$1.lua" --model "$model" -o "$out" --jobs 2 2>"$t/err"; }
fail() { echo "FAIL: $*"; cat "$t/err"; exit 1; }
whole() {   # whole RECIPE...: -o is one of them, whole, user files there
	got=$(python3 "$in/out_whole.py" "$out")
	for r in "$@"; do [ "$got" = "$r" ] && break; done
	[ "$got" = "$r" ] || fail "$1: $got"
	[ -f "$out/notes.txt" ] || fail "$1: notes.txt gone"
}
clean() {   # nothing of a build left beside -o or hidden in it
	left=$(ls -A "$t/p" | grep -v '^out$'; ls -A "$out" | grep '^\.' | grep -v '^\.precc\.lock$')
	[ -z "$left" ] || fail "left behind: $left"
	[ -f "$out/sub/data" ] || fail "sub/data gone"
}
build bf16 || fail "first build"
build te_delayed_hybrid || fail "second build"   # both in the cache now
build bf16 || fail "third build"
for at in staged written exchanged; do
	PRECC_TEST_KILL_AT=$at build te_delayed_hybrid
	rc=$?
	[ $rc -eq 137 ] || fail "PRECC_TEST_KILL_AT=$at: exit $rc, not killed"
	if [ $at = exchanged ]; then whole te_delayed_hybrid; else whole bf16; fi
	build bf16 || fail "rebuild after $at"
	whole bf16
	clean
	echo "killed at $at: whole, swept"
done
# a rebuild of what -o holds publishes nothing: no syncfs, no swap
ino=$(stat -c %i "$out")
PRECC_TEST_KILL_AT=written build bf16 || fail "a rebuild of what -o holds went on to publish"
[ "$(stat -c %i "$out")" = "$ino" ] || fail "a rebuild of what -o holds swapped it"
whole bf16
clean
echo "rebuilt as it was: nothing published"
# every rename of a build from the cache (a whole-build entry), every 7th
# of one compiling afresh (kernel entries renamed into the cache count)
hook=$t/kill_rename.so
if ! cc -shared -fPIC -o "$hook" "$in/kill_rename.c" -ldl 2>"$t/err"; then
	echo "hook: SKIP (no C compiler for the LD_PRELOAD hook)"; exit 0
fi
if ! LD_PRELOAD=$hook "$precc" --version >/dev/null 2>&1; then
	echo "hook: SKIP (precc does not run with LD_PRELOAD, an ASan build?)"; exit 0
fi
kills=0
for mode in cache fresh; do
	step=1; [ $mode = cache ] || step=7
	prev=bf16 next=te_delayed_hybrid n=1
	while :; do
		[ $mode = cache ] || rm -rf "$PRECC_CACHE_DIR"
		LD_PRELOAD=$hook KILL_AT_RENAME=$n build $next
		rc=$?
		[ $rc -eq 0 ] && break
		[ $rc -eq 137 ] || fail "KILL_AT_RENAME=$n: exit $rc"
		kills=$((kills + 1))
		whole $prev $next
		n=$((n + step))
		[ $n -le 200 ] || fail "200 renames and still not done"
	done
	whole $next
	build $prev || fail "rebuild"
	whole $prev
	clean
done
echo "hook: $kills kills, whole after each, swept"
