#!/bin/sh
# run.sh BUILD SRC PYTHON TEST... — the Python tests (pytest) in the venv
# venv.sh makes under BUILD, with PYTHONPATH=SRC/python and the built
# libprecc_rt.so and precc (PRECC_LIB, PRECC_BIN). Artifacts and kernels
# are cached under BUILD/python-cache. 77 (skip) with the reason when the
# venv cannot be made.
set -u
build=$1 src=$2 py=$3
shift 3
venv=${PRECC_PYTHON_VENV:-$build/python-venv}
# One venv for all the Python tests ctest runs in parallel: they take turns.
if command -v flock >/dev/null 2>&1; then
	out=$(flock "$build/.python-venv.lock" sh "$src/tests/python/venv.sh" "$py" "$venv"); rc=$?
else
	out=$(sh "$src/tests/python/venv.sh" "$py" "$venv"); rc=$?
fi
[ -n "$out" ] && echo "$out"
[ $rc -eq 0 ] || exit $rc
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
export PRECC_LIB="$build/libprecc_rt.so" PRECC_BIN="$build/precc"
export PRECC_TEST_BUILD="$build"   # test_install.py installs this build
export PRECC_TORCH_CACHE="$build/python-cache/artifacts" PRECC_CACHE_DIR="$build/python-cache/kernels"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} PYTHONDONTWRITEBYTECODE=1
cd "$src/tests/python" || exit 1
# pytest exits 5 when it collected nothing: a failure here, not a skip.
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs "$@"
