#!/bin/sh
# tests/gpu/lease.sh — what one device lease runs (15 minutes of device
# time, one command of at most 10), in order of what it tells us, each part
# boxed in time so that a slow one cannot take the rest with it:
#
#   A  tests/gpu/run.sh on the tiny plans (both families: sm_90a's wgmma,
#      tiny-sm_90's mma.sync) and every bench: quant bandwidth, bulk commit,
#      the GEMMs (bench_gemm_gpu, then cuBLASLt at the same shapes)
#   C  (after A) the wgmma GEMMs at cluster 1x1 and 2x1 side by side (issue
#      28 §1: bf16 and current_tensorwise on bench/gemm/cluster_shapes.lua,
#      8192^3 and two of shapes.lua's; tests/gpu/prepare.sh builds them into
#      ARTIFACTS/gemm/cluster): bench_gemm_gpu boxed to 90 s (~20 s at 300
#      TFLOP/s), then bench/gemm/cluster_compare.py's table and 2x1's
#      speedup. PRECC_LEASE_C=0: no part C
#   S  compute-sanitizer memcheck, racecheck and synccheck over precc-run
#      on tiny plans with GEMMs of each family
#   B  precc-run --check on llama-3-8b's layer 0 for every recipe, in
#      parallel (the interpreter's side is the slow one)
#   T  (PRECC_LEASE_T=1, first) tests/gpu/torch_step.py: precc.torch on
#      CUDA tensors, a Llama-style block's step against bf16 and torchao
#      + compile, 50 steps' loss, a CUDA graph of the step; its own box
#      (PRECC_LEASE_T_SECONDS, default 300), the rest of the budget after
#      it. PRECC_LEASE_T=only: T alone.
#   G  (PRECC_LEASE_G=1, first; after T) bench/gemm/lease_grouped.sh: precc's
#      grouped GEMMs (DeepSeek-V3 and Mixtral-8x7B experts, DeepGEMM's
#      shapes) beside the dense GEMMs of the same M, torch._grouped_mm and
#      DeepGEMM's published figures (issue 29); its own box
#      (PRECC_LEASE_G_SECONDS, default 300: ~90 s build, ~70 s grouped,
#      ~30 s dense, ~40 s torch, estimated), the rest of the budget after it.
#      PRECC_LEASE_G=only: G alone (then give it up to 540 s).
#
# Logs: one tarball in $OUT (the device tool's folder), else /tmp/precc-lease.
# Before it, here: sh tests/gpu/prepare.sh with PRECC_GPU_SLIM=1 (the lease
# carries tests/gpu/artifacts; 64 MiB in all).
#
#   sh tests/gpu/lease.sh [SECONDS [A_SECONDS [B_SECONDS]]]
#        the whole budget (default 540), part A's box (330), B's least (40)
#   PRECC_LEASE_SAN=0        no part S
#   PRECC_LEASE_B='deepseek_v3 nvfp4'   B for these recipes only
#   PRECC_LEASE_B_FIRST=1    B starts first, beside A (it is CPU-bound, A
#                            GPU-bound), boxed to the budget less 30 s
# Whatever else run.sh reads passes through (PRECC_BENCH_MAX_MNK_SM90=1:
# no mma.sync GEMM bench).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
BUDGET=${1:-540} TA=${2:-330} TB=${3:-40}
T0=$(date +%s)
O=${OUT:-/tmp/precc-lease}
LOG=/tmp/precc-lease-logs
B=/tmp/precc-build-gpu
ART=$ROOT/tests/gpu/artifacts
rm -rf "$LOG" && mkdir -p "$O" "$LOG" || exit 1
left() { echo $((BUDGET - ($(date +%s) - T0))); }

{
	date -u
	nvidia-smi
	nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
	command -v compute-sanitizer ncu nvcc python3
	python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available())'
} >"$LOG/machine.txt" 2>&1
head -20 "$LOG/machine.txt"

b_start() {  # b_start SECONDS: part B's checks, in the background
	for d in "$ART"/llama-3-8b/*/; do
		r=$(basename "$d")
		case " ${PRECC_LEASE_B:-$r} " in *" $r "*) ;; *) continue ;; esac
		( timeout "$1" "$B/precc-run" "$d" --check --layer model.layers.0. --m 128 \
			>"$LOG/B.$r.log" 2>&1; echo "check.llama-3-8b.$r: exit $?" >>"$LOG/B.$r.log" ) &
	done
}
b_report() {
	for f in "$LOG"/B.*.log; do
		[ -f "$f" ] || continue
		tail -1 "$f"
		grep -m3 -E 'BEYOND|MISMATCH|error' "$f"
	done
}

if [ "${PRECC_LEASE_T:-0}" != 0 ]; then
	TT=${PRECC_LEASE_T_SECONDS:-300}
	echo "== T: torch_step.py ($(left) s left, box $TT s)"
	# libprecc_rt.so (run.sh builds it with the static libraries)
	PRECC_GPU_OUT=$B PRECC_GPU_CHECKS=none PRECC_GPU_BENCH=0 timeout 120 sh tests/gpu/run.sh \
		>"$LOG/T.build.log" 2>&1
	site=/tmp/precc-site
	rm -rf "$site"
	if ls tests/gpu/wheels/*.whl >/dev/null 2>&1; then
		python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
			--target "$site" tests/gpu/wheels/*.whl >"$LOG/T.pip.log" 2>&1 ||
			echo "T: pip install of tests/gpu/wheels failed ($(tail -1 "$LOG/T.pip.log"))"
	fi
	if [ -f "$B/libprecc_rt.so" ]; then
		PYTHONUNBUFFERED=1 PYTHONPATH="$site:$ROOT/python" PRECC_LIB=$B/libprecc_rt.so \
			timeout "$TT" python3 tests/gpu/torch_step.py --artifacts "$ART/torch_step" \
			--budget $((TT - 25)) >"$LOG/T.log" 2>&1
		rc=$?
		grep -vE '^W[0-9]|^ +File|Warning' "$LOG/T.log" | tail -40
		echo "T exit $rc"
		cp "$LOG/T.log" "$O/T.log" 2>/dev/null
	else
		echo "T: no $B/libprecc_rt.so: $(tail -3 "$LOG/T.build.log")"
	fi
	if [ "${PRECC_LEASE_T}" = only ]; then
		tar -C "$LOG" -czf "$O/logs.tgz" . 2>/dev/null
		exit 0
	fi
	TA=$(( $(left) - TB - 60 < TA ? $(left) - TB - 60 : TA ))
fi
if [ "${PRECC_LEASE_G:-0}" != 0 ]; then
	TG=${PRECC_LEASE_G_SECONDS:-300}
	[ "$TG" -gt $(($(left) - 10)) ] && TG=$(($(left) - 10))
	echo "== G: lease_grouped.sh ($(left) s left, box $TG s)"
	OUT=$LOG PRECC_GPU_OUT=$B timeout "$TG" sh bench/gemm/lease_grouped.sh $((TG - 10)) 2>&1 | tail -40
	cp "$LOG"/grouped*.log "$LOG"/grouped*.jsonl "$LOG"/grouped_torch.json "$O/" 2>/dev/null
	if [ "${PRECC_LEASE_G}" = only ]; then
		tar -C "$LOG" -czf "$O/logs.tgz" . 2>/dev/null
		exit 0
	fi
	TA=$(( $(left) - TB - 60 < TA ? $(left) - TB - 60 : TA ))
fi
if [ "${PRECC_LEASE_B_FIRST:-0}" = 1 ]; then
	# run.sh builds precc-run; for B beside A, build it first (run.sh
	# rebuilds the same objects)
	PRECC_GPU_OUT=$B PRECC_GPU_CHECKS=none PRECC_GPU_BENCH=0 sh tests/gpu/run.sh \
		>"$LOG/build.log" 2>&1
	echo "== B: started beside A ($(left) s left)"
	b_start $((BUDGET - 30))
fi
echo "== A: run.sh, tiny plans and benches ($(left) s left)"
PRECC_GPU_OUT=$B PRECC_GPU_CHECKS='tiny*' timeout "$TA" sh tests/gpu/run.sh >"$LOG/A.log" 2>&1
echo "A exit $?"
grep -E '^(PASS|FAIL|SKIP|summary)' "$LOG/A.log"
cp "$B"/*.log "$B"/*.jsonl "$B"/*.json "$LOG/" 2>/dev/null
# the measured GEMMs beside the cost model's prediction (bench/gemm_model.py)
[ -f "$ART/gemm/predicted.json" ] && [ -s "$B/gemm.jsonl" ] &&
	python3 bench/gemm_model.py --compare "$B/gemm.jsonl" "$ART/gemm/predicted.json" \
		"$B/gemm_torch.json" 2>&1 | tee "$LOG/gemm_compare.txt" | tail -25

echo "== C: clusters 1x1 and 2x1 side by side ($(left) s left)"
if [ "${PRECC_LEASE_C:-1}" = 0 ]; then
	echo "skipped (PRECC_LEASE_C=0)"
elif [ -d "$ART/gemm/cluster" ] && [ -x "$B/bench_gemm_gpu" ] && [ "$(left)" -gt $((TB + 120)) ]; then
	timeout 90 "$B/bench_gemm_gpu" "$ART/gemm/cluster" "$LOG/cluster.jsonl" \
		bf16.1x1:0.02 bf16.2x1:0.02 current_tensorwise.1x1:0.2 current_tensorwise.2x1:0.2 \
		>"$LOG/cluster.log" 2>&1
	echo "bench_gemm_gpu (clusters): exit $?"
	grep -E 'BAD|not finite|run failed|cannot open' "$LOG/cluster.log" | head -5
	python3 bench/gemm/cluster_compare.py "$LOG/cluster.jsonl" 2>&1 | tee "$LOG/cluster_compare.txt"
else
	echo "skipped: no $ART/gemm/cluster, no bench_gemm_gpu, or under $((TB + 120)) s left"
fi

echo "== S: compute-sanitizer ($(left) s left)"
if [ "${PRECC_LEASE_SAN:-1}" = 0 ]; then
	echo "skipped (PRECC_LEASE_SAN=0)"
elif command -v compute-sanitizer >/dev/null 2>&1 && [ -x "$B/precc-run" ]; then
	for tp in memcheck:tiny/deepseek_v3 memcheck:tiny-sm_90/deepseek_v3 \
	          racecheck:tiny/deepseek_v3 synccheck:tiny/deepseek_v3 \
	          memcheck:tiny/current_tensorwise racecheck:tiny-sm_90/deepseek_v3; do
		t=${tp%%:*} p=${tp#*:}
		[ "$(left)" -gt $((TB + 30)) ] || { echo "sanitizer: out of time"; break; }
		n=$t.$(echo "$p" | tr / .)
		timeout 25 compute-sanitizer --tool $t --error-exitcode 9 \
				"$B/precc-run" "$ART/$p" --backend cuda >"$LOG/san.$n.log" 2>&1
		echo "sanitizer $t $p: exit $? ($(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/san.$n.log"))"
	done
else
	echo "no compute-sanitizer, or no precc-run"
fi

echo "== B: llama-3-8b layer 0, in parallel ($(left) s left)"
if [ "${PRECC_LEASE_B_FIRST:-0}" = 1 ]; then
	wait
	b_report
else
	tb=$(($(left) - 15))
	if [ "$tb" -ge "$TB" ] && [ -x "$B/precc-run" ]; then
		b_start "$tb"
		wait
		b_report
	else
		echo "skipped: $tb s"
	fi
fi

tar -C "$LOG" -czf "$O/logs.tgz" . 2>/dev/null
cp "$LOG/A.log" "$O/A.log" 2>/dev/null
echo "== the GEMMs against the references ($(left) s left)"
sed -n '/^precc against/,$p' "$LOG/bench.gemm.torch.log" 2>/dev/null
grep -E 'BAD|not finite|run failed|cannot' "$LOG"/bench.gemm*.log 2>/dev/null | head -20
