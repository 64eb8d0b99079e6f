#!/bin/sh
# precc_train_test.sh PRECC_TRAIN — precc-train end to end (examples/train):
#  - resume is exact: 10 steps + checkpoint + 10 resumed steps give the
#    same losses, bit for bit (%.9g round-trips fp32), as 20 steps, for a
#    delayed-scaling recipe (its amax histories and scales in the
#    checkpoint), fp16 with dynamic loss scaling (the scaler) and fp32;
#  - a checkpoint of other recipes, another model setting (seed), another
#    state-file format version, a corrupt one or a FIFO (which must not
#    block the reader) is refused with the reason;
#  - an injected NaN gradient skips the step: fp16 dynamic halves its scale,
#    bf16 counts it; the losses before are unchanged and stay finite after;
#  - the plot and the JSON are written;
#  - a failed precc build is reported with its exit status and its output,
#    also when its log cannot be written (a full disk: /dev/full here).
set -u
t=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL  $*"; fails=$((fails + 1)); }
R="--recipe te_delayed_hybrid --recipe fp16_dynamic_loss_scale"

"$t" $R --steps 20 --out "$tmp/o" --json > "$tmp/a.json" || fail "20 steps"
"$t" $R --steps 10 --out "$tmp/o" --json --checkpoint "$tmp/c.pst" > "$tmp/b.json" || fail "10 steps"
"$t" $R --steps 10 --out "$tmp/o" --json --resume "$tmp/c.pst" > "$tmp/c.json" || fail "resume"
python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, math, sys
d = sys.argv[1]
a, b, c = (json.load(open(d + "/%s.json" % k)) for k in "abc")
ok = True
for ra, rb, rc in zip(a["recipes"] + [a["fp32"]], b["recipes"] + [b["fp32"]],
                      c["recipes"] + [c["fp32"]]):
    if len(ra["loss"]) != 20 or len(rb["loss"]) != 10 or rc["loss"] != ra["loss"]:
        print("FAIL  resume of %s: %s then %s, uninterrupted %s" % (
            ra["name"], rb["loss"][-2:], rc["loss"][-2:], ra["loss"][-2:]))
        ok = False
    if not all(math.isfinite(x) and x > 0 for x in ra["loss"]):
        print("FAIL  %s: a loss is not finite" % ra["name"])
        ok = False
if (c["first_step"], c["steps"]) != (11, 20):
    print("FAIL  resumed run: steps %s..%s" % (c["first_step"], c["steps"]))
    ok = False
print("ok    resume: 10 + checkpoint + 10 == 20 steps bit for bit (%s)" %
      ", ".join(r["name"] for r in a["recipes"] + [a["fp32"]]) if ok else "")
sys.exit(0 if ok else 1)
PY
[ -s "$tmp/o/loss.svg" ] && grep -q '<polyline' "$tmp/o/loss.svg" || fail "no loss.svg"

refuse() {  # refuse WHAT EXPECTED-MESSAGE ARGS...
	what=$1 want=$2
	shift 2
	# a reader that blocks (a FIFO) fails here instead of hanging the suite
	if timeout 60 "$t" "$@" --steps 1 --out "$tmp/o" > "$tmp/r.out" 2> "$tmp/r.err"; then
		fail "a checkpoint of $what was accepted"
	elif ! grep -q "$want" "$tmp/r.err"; then
		fail "a checkpoint of $what: expected '$want', got: $(cat "$tmp/r.err")"
	else
		echo "ok    refused ($what): $(head -c 160 "$tmp/r.err")"
	fi
}
refuse "other recipes" "recipe mismatch" --recipe bf16 --resume "$tmp/c.pst"
refuse "another seed" "model mismatch" $R --seed 2 --resume "$tmp/c.pst"
cp "$tmp/c.pst" "$tmp/v.pst"
printf '\003' | dd of="$tmp/v.pst" bs=1 seek=8 conv=notrunc 2>/dev/null
refuse "another format version" "format version 3 is newer" $R --resume "$tmp/v.pst"
cp "$tmp/c.pst" "$tmp/x.pst"
printf 'Z' | dd of="$tmp/x.pst" bs=1 seek=5000 conv=notrunc 2>/dev/null
refuse "a corrupt file" "checksum mismatch" $R --resume "$tmp/x.pst"
refuse "a missing file" "cannot resume" $R --resume "$tmp/none.pst"
mkfifo "$tmp/fifo.pst"
refuse "a FIFO" "cannot open: not a regular file" $R --resume "$tmp/fifo.pst"

# NaN gradients at step 4
"$t" --recipe fp16_dynamic_loss_scale --recipe bf16 --steps 8 --out "$tmp/o" --json > "$tmp/n0.json" || fail "8 steps"
"$t" --recipe fp16_dynamic_loss_scale --recipe bf16 --steps 8 --out "$tmp/o" --json --inject-nan 4 > "$tmp/n1.json" || fail "--inject-nan"
python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, math, sys
d = sys.argv[1]
a, b = (json.load(open(d + "/n%d.json" % k)) for k in (0, 1))
ok = True
for ra, rb in zip(a["recipes"] + [a["fp32"]], b["recipes"] + [b["fp32"]]):
    if ra["loss"][:4] != rb["loss"][:4] or not all(math.isfinite(x) for x in rb["loss"]):
        print("FAIL  %s: losses with a NaN at step 4: %s" % (ra["name"], rb["loss"]))
        ok = False
    if ra["name"] == "fp32":
        continue
    if (ra["skipped"], rb["skipped"], rb["nonfinite"]) != (0, 1, 1):
        print("FAIL  %s: skipped %s -> %s, nonfinite %s" % (ra["name"], ra["skipped"],
              rb["skipped"], rb["nonfinite"]))
        ok = False
    want = ra["loss_scale"] / 2 if ra["name"].startswith("fp16_dynamic") else ra["loss_scale"]
    if rb["loss_scale"] != want:
        print("FAIL  %s: loss scale %s, expected %s" % (ra["name"], rb["loss_scale"], want))
        ok = False
    if rb["loss"][4:] == ra["loss"][4:]:
        print("FAIL  %s: the NaN step was not skipped (the losses after are unchanged)" % ra["name"])
        ok = False
if ok:
    print("ok    NaN gradient at step 4: skipped and counted (fp16 scale %s -> %s), losses finite"
          % (a["recipes"][0]["loss_scale"], b["recipes"][0]["loss_scale"]))
sys.exit(0 if ok else 1)
PY
mkdir -p "$tmp/full/art" && ln -s /dev/full "$tmp/full/art/te_delayed_hybrid.log"
printf '#!/bin/sh\necho "out/manifest.json: error: cannot write: No space left on device" >&2\nexit 1\n' \
	> "$tmp/precc" && chmod +x "$tmp/precc"
PRECC=$tmp/precc timeout 60 "$t" --recipe te_delayed_hybrid --steps 1 --out "$tmp/full" 2> "$tmp/f.err"
if [ $? -eq 1 ] && grep -q "precc build .* failed (exit status 1):" "$tmp/f.err" \
   && grep -q "  out/manifest.json: error: cannot write: No space left on device" "$tmp/f.err" \
   && grep -q "nor could .*te_delayed_hybrid.log be written: No space left on device" "$tmp/f.err"; then
	echo "ok    build failure on a full disk: $(head -c 160 "$tmp/f.err" | tr '\n' ' ')"
else
	fail "build failure on a full disk: $(head -c 400 "$tmp/f.err")"
fi
[ $fails -eq 0 ]
