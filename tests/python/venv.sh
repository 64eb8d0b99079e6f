#!/bin/sh
# venv.sh PYTHON VENV — make (once) the virtual environment the Python tests
# run in: torch==2.13.0 (the CPU wheel; never an unpinned torch, which pulls
# the CUDA build), pytest, numpy and setuptools (python.install builds the
# package with --no-build-isolation; venvs of Python 3.12+ lack it), and
# where they install, torchao and ml_dtypes (independent references for
# MX/NVFP4). Reused while its stamp
# matches this list. $PRECC_PYTHON_VENV names an existing venv to use as is.
# Exit 77 with the reason when no venv with torch can be had.
set -u
py=$1 venv=$2
REQ="torch==2.13.0 pytest numpy setuptools"
OPT="torchao==0.18.0 ml_dtypes"
if [ -n "${PRECC_PYTHON_VENV:-}" ]; then
	"$PRECC_PYTHON_VENV/bin/python" -c "import torch, pytest" 2>/dev/null && exit 0
	echo "SKIP: PRECC_PYTHON_VENV=$PRECC_PYTHON_VENV has no torch and pytest"; exit 77
fi
stamp="$venv/.precc-stamp"
want="$REQ | $OPT"
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0
rm -rf "$venv"
log=$(dirname "$venv")/python-venv.log
if ! "$py" -m venv "$venv" >"$log" 2>&1; then
	echo "SKIP: '$py -m venv' failed (on Debian: apt-get install python3-venv): $(tail -1 "$log")"
	rm -rf "$venv"; exit 77
fi
pip="$venv/bin/python -m pip install -q --disable-pip-version-check"
if ! $pip $REQ >>"$log" 2>&1; then
	echo "SKIP: pip install $REQ failed: $(grep -i error "$log" | tail -1)"
	rm -rf "$venv"; exit 77
fi
$pip $OPT >>"$log" 2>&1 || echo "note: pip install $OPT failed; the tests against torchao skip"
echo "$want" > "$stamp"
