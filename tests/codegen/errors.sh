#!/bin/sh
# errors.sh CG_PTX DIR: every DIR/*.ir must fail to generate with exit 1
# and the message in its "# ERROR: " line on stderr.
tool=$1; dir=$2; fails=0
for f in "$dir"/*.ir; do
  want=$(sed -n 's/^# ERROR: //p' "$f")
  got=$("$tool" "$f" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 1 ] || ! printf '%s' "$got" | grep -qF "$want"; then
    echo "FAIL $f: exit $rc, stderr: $got (want: $want)"; fails=$((fails + 1))
  fi
done
echo "$fails failures"
[ $fails -eq 0 ]
