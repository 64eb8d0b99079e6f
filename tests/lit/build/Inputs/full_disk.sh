#!/bin/sh
# full_disk.sh PRECC INPUTS RECIPES TMP: builds into -o on a small tmpfs
# filled to leave a few bytes to a megabyte. Each build that runs out of
# room fails, saying so, and leaves -o the old build, whole, with no stage
# or temporary beside it; once there is room, a build through the same
# cache equals a clean serial build without it (no truncated cubin, from
# ptxas or us, was sealed). Real ptxas when /usr/local/cuda/bin has one.
# Skips, saying why, where mount is not permitted (not root, a container).
precc=$1 in=$2 recipes=$3 t=$4
model=$in/build_small.lua
umount "$t/mnt" 2>/dev/null
rm -rf "$t" && mkdir -p "$t/mnt" || exit 1
if ! mount -t tmpfs -o size=4m tmpfs "$t/mnt" 2>"$t/err"; then
	echo "SKIP: cannot mount a tmpfs: $(cat "$t/err")"; exit 0
fi
trap 'umount "$t/mnt"' EXIT
ptxas=/usr/local/cuda/bin/ptxas
[ -x $ptxas ] || ptxas=/nonexistent
export PRECC_PTXAS=$ptxas PRECC_CACHE_DIR=$t/cache
out=$t/mnt/out
fail() { echo "FAIL: $*"; cat "$t/err"; exit 1; }
build() { "$precc" build "$recipes/$1.lua" --model "$model" -o "$2" $3 2>"$t/err"; }
build te_delayed_hybrid "$t/ref" "--no-cache --jobs 1" || fail "reference build"
build bf16 "$out" || fail "first build"
nofit=0
for free in 0 65536 262144 524288; do
	avail=$(df -B1 --output=avail "$t/mnt" | tail -1)
	head -c $((avail - free)) /dev/zero > "$t/mnt/fill" 2>/dev/null
	if build te_delayed_hybrid "$out"; then
		build bf16 "$out" || fail "back to bf16"
	else
		nofit=$((nofit + 1))
		grep -q "No space left on device\|is malformed" "$t/err" || fail "$free bytes free: no reason given"
	fi
	got=$(python3 "$in/out_whole.py" "$out")
	[ "$got" = bf16 ] || fail "$free bytes free: $got"
	left=$(ls -A "$t/mnt" | grep -v '^out$\|^fill$'; ls -A "$out" | grep '^\.' | grep -v '^\.precc\.lock$')
	[ -z "$left" ] || fail "$free bytes free: left behind: $left"
	rm -f "$t/mnt/fill"
done
[ $nofit -gt 0 ] || fail "every build fitted"
echo "full disk: $nofit builds failed with a reason, -o whole after each"
# no inode left: the stage itself cannot be made
used=$(($(df --output=iused "$t/mnt" | tail -1)))
mount -o remount,nr_inodes=$used "$t/mnt" || fail "remount"
build te_delayed_hybrid "$out" && fail "built with no inode left"
grep -q "cannot stage the build beside it: No space left on device" "$t/err" || fail "no inode: no reason"
[ "$(python3 "$in/out_whole.py" "$out")" = bf16 ] || fail "no inode: -o is not the old build"
mount -o remount,nr_inodes=100000 "$t/mnt" || fail "remount"
echo "no inode for the stage: failed with the reason, -o whole"
build te_delayed_hybrid "$out" || fail "build with room"
diff -r "$t/ref" "$out" || fail "differs from a clean serial build"
echo "then equal to a clean serial build"
