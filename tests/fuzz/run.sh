#!/bin/sh
# run.sh FUZZ_BUILD SECONDS [FUZZER...]: runs each fuzzer for SECONDS on its
# corpus (FUZZ_BUILD/corpus/<name>, grown in place), findings into
# FUZZ_BUILD/findings/<name>/. Prints one line per fuzzer (executions, edge
# coverage, corpus size) and fails if any fuzzer found something.
# FUZZ_RUNS=N also stops each fuzzer after N executions (the issue's 10 M:
# FUZZ_RUNS=10000000 with a SECONDS large enough).
set -u
fb=$1 secs=$2
shift 2
all="fuzz_ir fuzz_manifest_cpu fuzz_manifest_fake fuzz_state fuzz_config fuzz_model_lua fuzz_recipe"
[ $# -gt 0 ] && all="$*"
bad=0
regress=$(cd "$(dirname "$0")" && pwd)/regress
for name in $all; do
	bin=$fb/tests/fuzz/$name
	if [ ! -x "$bin" ]; then
		echo "fuzz: $name: not built (SKIP)"
		continue
	fi
	mkdir -p $fb/corpus/$name $fb/findings/$name
	log=$fb/findings/$name.log
	# the fuzzers' fixed findings, replayed first (tests/fuzz/regress/NAME/):
	# not seeds, since inputs that run to a limit breed more of themselves
	for f in "$regress/$name"/*; do
		[ -f "$f" ] || continue
		if ! ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
		     UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
		     $bin "$f" > $log 2>&1; then
			echo "fuzz: $name: REGRESSION on $f, see $log"
			grep -m3 -E 'ERROR|SUMMARY|runtime error|deadly' $log | sed 's/^/    /'
			bad=1
			continue 2
		fi
		echo "fuzz: $name: replayed $(basename "$f")"
	done
	# -close_fd_mask=3: the readers' error messages stay out of the log;
	# -timeout: an input that takes longer than the sandbox's 5 s watchdog
	# (plus sanitizer slowdown) is a hang; -report_slow_units at the same
	# 25 s: libFuzzer's 10 s default wrote a 'slow unit' (a finding here) for
	# a DeepSeek-V3 config.json, 0.5 s alone, on a machine at load 98
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	start=$(date +%s)
	nice -n 19 $bin $fb/corpus/$name ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} -max_total_time=$secs -timeout=25 -report_slow_units=25 -rss_limit_mb=2048 \
		-close_fd_mask=3 -print_final_stats=1 -artifact_prefix=$fb/findings/$name/ \
		> $log 2>&1
	rc=$?
	wall=$(( $(date +%s) - start ))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' $log | tail -1)
	cov=$(grep -o 'cov: [0-9]*' $log | tail -1 | cut -d' ' -f2)
	ft=$(grep -o 'ft: [0-9]*' $log | tail -1 | cut -d' ' -f2)
	corp=$(ls $fb/corpus/$name | wc -l)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' $log | tail -1)
	echo "fuzz: $name: ${execs:-?} executions in ${wall} s (${rate:-?}/s), cov ${cov:-?} edges, ft ${ft:-?}, corpus $corp (exit $rc)"
	# 72: libFuzzer's exit on SIGINT (a run stopped by hand, its
	# executions counted above); a finding still fails
	if [ $rc -eq 72 ] && [ -z "$(ls $fb/findings/$name)" ]; then
		echo "fuzz: $name: interrupted, no finding"
		bad=1
	elif [ $rc -ne 0 ] || [ -n "$(ls $fb/findings/$name)" ]; then
		echo "fuzz: $name: FINDING, see $log and $fb/findings/$name/"
		grep -m3 -E 'ERROR|SUMMARY|runtime error|deadly' $log | sed 's/^/    /'
		bad=1
	fi
done
exit $bad
