#!/bin/sh
# precc_run_test.sh PRECC_RUN INPUTS [FAKE_LIBCUDA] — precc-run's exit
# statuses and what it prints: a cpu run, bad --m, an unknown layer, --check
# without a driver (77, saying why) and, with the fake driver (which
# computes nothing), --check reporting the first differing element.
set -u
run=$1 inputs=$2 fake=${3:-}
# the fake driver checks each launch against the manifest (fake_launch.c)
export FAKE_CUDA_MANIFEST="$inputs/plan"
out=$(mktemp)
fails=0
trap 'rm -f "$out"' EXIT

expect() {  # expect STATUS TEXT COMMAND...
	want=$1 text=$2; shift 2
	"$@" >"$out" 2>&1
	rc=$?
	if [ "$rc" -ne "$want" ] || ! grep -qF -- "$text" "$out"; then
		echo "FAIL: $* (exit $rc, want $want; output should contain: $text)"
		sed 's/^/    /' "$out"
		fails=$((fails + 1))
	fi
}

expect 0 "layer model.layers.0.mlp.down_proj M=256 nonfinite inputs: ran" \
	"$run" "$inputs/plan" --backend cpu
expect 0 "k_00000000000000b2   quant_colblock          3       196608" \
	"$run" "$inputs/plan" --backend cpu --layer 'model.*.up_proj' --m 256
expect 1 "layer 'model.layers.0.mlp.up_proj' needs M to be a multiple of 32; --m 100 is not" \
	"$run" "$inputs/plan" --backend cpu --layer up_proj --m 100
expect 1 "no layer matches 'nothing'" "$run" "$inputs/plan" --backend cpu --layer nothing
expect 2 "usage: precc-run DIR" "$run"
expect 2 "unknown backend 'gpu'" "$run" "$inputs/plan" --backend gpu
expect 1 "cannot read: No such file or directory" "$run" /nonexistent --backend cpu
PRECC_LIBCUDA=/nonexistent/libcuda.so.1 expect 77 \
	"precc-run: SKIP: the cuda backend is unavailable, so --check cannot compare: cuda: cannot load '/nonexistent/libcuda.so.1' (from PRECC_LIBCUDA)" \
	"$run" "$inputs/plan" --check
if [ -n "$fake" ]; then
	PRECC_LIBCUDA=$fake expect 1 \
		"MISMATCH model.layers.0.mlp.up_proj (random inputs) buffer 'x.q' e4m3[M,256]:" \
		"$run" "$inputs/plan" --check --layer up_proj
	grep -qF "first [0, 0] (element 0): cuda 0xa5" "$out" || {
		echo "FAIL: --check names the first differing element"; fails=$((fails + 1)); }
	grep -qF "check: FAILED: outputs differ" "$out" || {
		echo "FAIL: --check ends with its verdict"; fails=$((fails + 1)); }
fi
# The summary says what "ran" means; every file the manifest names must exist.
expect 0 "ran: every layer above ran on the cpu backend to the end; outputs were not compared" \
	"$run" "$inputs/plan" --backend cpu
expect 0 "files: 7 PTX/cubin files named in manifest.json, all present; 0 of them checked" \
	"$run" "$inputs/plan" --backend cpu
gone=$(mktemp -d)
cp "$inputs/plan"/* "$gone/" && rm "$gone/k_00000000000000b1.sm_90a.ptx"
expect 1 "the ptx of kernel k_00000000000000b1 for sm_90a: cannot read '$gone/k_00000000000000b1.sm_90a.ptx': No such file or directory" \
	"$run" "$gone" --backend cpu
rm -rf "$gone"
# --json: stdout is one JSON object (checked by Python's json, not by us),
# the human report goes to stderr.
jq_py() {  # jq_py PYTHON-EXPR COMMAND... : EXPR over the parsed object `o` must hold
	expr=$1; shift
	"$@" >"$out" 2>"$out.err"
	rc=$?
	if ! python3 -c "import json,sys; o=json.load(open(sys.argv[1])); rc=int(sys.argv[2]); sys.exit(0 if ($expr) else 1)" "$out" "$rc"; then
		echo "FAIL: --json: $* (exit $rc) should satisfy: $expr"
		sed 's/^/    /' "$out"
		fails=$((fails + 1))
	fi
	rm -f "$out.err"
}
jq_py 'rc == 0 and o["result"] == "ran" and o["exit"] == 0 and len(o["runs"]) == 3 and {r["inputs"] for r in o["runs"]} == {"random", "edge", "nonfinite"} and all(r["result"] == "ran" and r["m"] == 256 for r in o["runs"]) and o["artifacts"]["model"] == "tiny-256" and o["files"]["named"] == 7 and any(k["name"] == "k_00000000000000b2" and k["launches"] == 3 and k["elements"] == 196608 for k in o["backends"]["cpu"]["kernels"])' \
	"$run" "$inputs/plan" --backend cpu --layer 'model.*.up_proj' --json
"$run" "$inputs/plan" --backend cpu --layer up_proj --json 2>&1 >/dev/null | grep -qF "ran: every layer above ran" || {
	echo "FAIL: --json keeps the human report on stderr"; fails=$((fails + 1)); }
PRECC_LIBCUDA=/nonexistent/libcuda.so.1 jq_py 'rc == 77 and o["result"] == "skipped" and "cannot load" in o["reason"]' \
	"$run" "$inputs/plan" --check --json
if [ -n "$fake" ]; then
	PRECC_LIBCUDA=$fake jq_py 'rc == 1 and o["result"] == "mismatch" and o["check"] and any(r["result"] == "differ" and r["buffers_differ"] > 0 for r in o["runs"]) and set(o["backends"]) == {"cuda", "cpu"}' \
		"$run" "$inputs/plan" --check --layer up_proj --json
fi
[ $fails -eq 0 ] && echo "runtime.precc_run: ok"
[ $fails -eq 0 ]
