#!/bin/sh
# floors_test.sh SRC OBJECTS: runtime/ is laid out in floors that call down
# (runtime/base.h lists them; docs/runtime.md, "Floors"). SRC is runtime/,
# OBJECTS precc_rt's object files (one argument, ';'-separated, as CMake's
# $<TARGET_OBJECTS> gives them, or several). Fails when
#   - an object calls or reads a symbol that a higher floor's object defines
#     (nm: each undefined symbol against every object's definitions);
#   - a file includes the header of a higher floor;
#   - a runtime/*.c or *.h is on no floor (a new file must be placed here).
set -u
src=$1
shift
floor_of() {
	case $1 in
	base.c|base.h|limits.h) echo 0 ;;
	json.c|artifact.c|manifest.h) echo 1 ;;
	plan.c|split.c|share.c|plan.h) echo 2 ;;
	backend_cpu.c|backend_cuda.c|cuda.c|backend.h) echo 3 ;;
	rt.c|run.c|layer.c|grouped.c|commit_bulk.c|reduce.c|train.c|state.c|gemm_check.c|rt.h) echo 4 ;;
	precc_run.c) echo 5 ;;   # the tool on top: precc-run
	*) echo -1 ;;
	esac
}
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# every file placed
for f in "$src"/*.c "$src"/*.h; do
	b=${f##*/}
	if [ "$(floor_of "$b")" -lt 0 ]; then
		echo "FAIL: runtime/$b is on no floor (add it to tests/runtime/floors_test.sh and runtime/base.h)"
		fail=1
	fi
done

# includes: only the own floor's header or lower ones
for f in "$src"/*.c "$src"/*.h; do
	b=${f##*/}
	fl=$(floor_of "$b")
	for h in $(sed -n 's/^#include "\([a-z_]*\.h\)".*/\1/p' "$f"); do
		hf=$(floor_of "$h")
		if [ "$hf" -gt "$fl" ]; then
			echo "FAIL: runtime/$b (floor $fl) includes $h (floor $hf)"
			fail=1
		fi
	done
done

# symbols: definitions per object, then each object's undefined ones
objs=$(printf '%s\n' "$@" | tr ';' '\n' | grep -v '^$')
n=0
for o in $objs; do
	b=${o##*/}
	b=${b%.o}
	b=${b%.obj}
	fl=$(floor_of "$b")
	if [ "$fl" -lt 0 ]; then
		echo "FAIL: object $o ($b) is on no floor"
		fail=1
		continue
	fi
	nm -P -g --defined-only "$o" | awk -v f="$fl" -v file="$b" '{print $1, f, file}' >>"$tmp/def"
	nm -P -u "$o" | awk -v f="$fl" -v file="$b" '{print $1, f, file}' >>"$tmp/use"
	n=$((n + 1))
done
want=$(ls "$src"/*.c | grep -v -c '/precc_run\.c$')
if [ "$n" -ne "$want" ]; then
	echo "FAIL: read $n objects of precc_rt, expected $want (runtime/*.c but precc_run.c)"
	fail=1
fi
# use: sym floor file; def: sym floor file
awk 'NR == FNR { df[$1] = $2; dfile[$1] = $3; next }
     ($1 in df) { down++
                  if (df[$1] > $2) { printf "FAIL: %s (floor %d) uses %s, defined in %s (floor %d)\n", $3, $2, $1, dfile[$1], df[$1]; bad++ } }
     END { printf "%d references between runtime objects, %d upward\n", down, bad
           if (down < 50) { print "FAIL: too few references between objects (is nm reading them?)"; bad++ }
           exit bad > 0 }' "$tmp/def" "$tmp/use" || fail=1
[ "$fail" = 0 ] && echo "floors: ok ($n objects)"
exit $fail
