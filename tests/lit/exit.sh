#!/bin/sh
# exit.sh N CMD...: run CMD; succeed only if it exits with status N.
want=$1; shift
"$@"; got=$?
if [ "$got" -ne "$want" ]; then
	echo "exit.sh: '$*' exited $got, expected $want" >&2
	exit 1
fi
exit 0
