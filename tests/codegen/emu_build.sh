#!/bin/sh
# emu_build.sh TEST_EMU DIR...: every kernel of the builds in DIR... (each
# an output directory of `precc build`, one target each) through test_emu,
# the emulated GPU, against the interpreter: the kernels a user's recipe x
# model gets, at the model's own shapes, not only tests/codegen/kernels.
# The kernels' IR comes from each manifest ("ir"); a kernel several builds
# share runs once. Prints test_emu's line per run and a total; exits 1 if
# any kernel fails. GEMMs get moderate inputs ("# emu: moderate").
# EMU_BUILD_KEEP=DIR keeps the kernel files there; EMU_BUILD_SHAPE=S runs
# only the kernels of manifest shape S (gemm, rows, ...); EMU_BUILD_GROUPED=1
# only the grouped GEMMs (an expert group's, at small M most experts empty);
# EMU_BUILD_M=N runs
# the GEMMs whose M multiple divides N at M = N (test_emu's default: 128).
#   for r in recipes/*.lua; do
#     PRECC_PTXAS=/nonexistent build/precc build $r --model M --target sm_89 -o out/$(basename $r .lua)
#   done
#   sh tests/codegen/emu_build.sh build/tests/codegen/test_emu out/*
set -u
emu=$1
shift
[ $# -gt 0 ] || { echo "usage: emu_build.sh TEST_EMU DIR..." >&2; exit 2; }
work=${EMU_BUILD_KEEP:-$(mktemp -d)}
[ -n "${EMU_BUILD_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
# kernel files by target, at most 200 a directory (test_emu takes 256)
python3 - "$work" "$@" <<'PY' || exit 2
import json, os, re, sys
work, seen, count = sys.argv[1], set(), {}
only = os.environ.get("EMU_BUILD_SHAPE")
grouped = os.environ.get("EMU_BUILD_GROUPED")
gemm_m = int(os.environ.get("EMU_BUILD_M", "0"))
for d in sys.argv[2:]:
    m = json.load(open(os.path.join(d, "manifest.json")))
    for k in m["kernels"]:
        t = k["target"]
        key = (t, k["name"])
        if key in seen or (only and k["shape"] != only) or (grouped and "gemm_grouped" not in k["ir"]):
            continue
        seen.add(key)
        n = count.get(t, 0)
        count[t] = n + 1
        sub = os.path.join(work, "%s.%d" % (t, n // 200))
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, k["name"] + ".ir"), "w") as f:
            # a GEMM at a model's K, or with an f16 output, would make most
            # results inf or NaN from test_emu's specials (its GEMMs of
            # tests/codegen/kernels keep them): moderate inputs
            if k["shape"] == "gemm":
                f.write("# emu: moderate\n")
                if gemm_m and gemm_m % k["grid"].get("m_multiple", 1) == 0:
                    f.write("# emu: m=%d\n" % gemm_m)
                # a k-grouped GEMM's experts start a token block of its
                # scales (the interpreter's contract, which the runtime's
                # token_align enforces): deal whole blocks
                al = [int(b) for b in re.findall(r"\{1x(\d+)\}", k["ir"])]
                if "group=k" in k["ir"] and al:
                    f.write("# emu: offs_align=%d\n" % max(al))
            f.write(k["ir"])
for t in sorted(count):
    print("emu_build: %s: %d kernels" % (t, count[t]))
PY
bad=0 files=0
for sub in "$work"/*.*; do
	[ -d "$sub" ] || continue
	t=$(basename "$sub")
	t=${t%.*}
	"$emu" "$sub" --target "$t" --no-self-test > "$sub.log" 2>&1
	rc=$?
	grep -E '^(ok|FAIL)' "$sub.log"
	n=$(ls "$sub" | wc -l)
	files=$((files + n))
	if [ $rc -ne 0 ]; then
		echo "emu_build: $t: test_emu exit $rc on $n kernels ($sub.log)"
		bad=1
	fi
done
echo "emu_build: $files kernels run, $( [ $bad = 0 ] && echo 'no failures' || echo 'FAILURES')"
exit $bad
