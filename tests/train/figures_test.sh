#!/bin/sh
# figures_test.sh PRECC_TRAIN — the claims of the README's training figures,
# on a shorter run (60 steps): the demo's recipes end within 5 % of fp32,
# fp16 without loss scaling does not (its gradients flush to zero in fp16),
# fp16 with dynamic loss scaling almost none (< 0.1 %).
set -u
t=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$t" --recipe bf16 --recipe current_tensorwise --recipe deepseek_v3 \
     --recipe fp16_dynamic_loss_scale --recipe fp16_no_loss_scale \
     --steps 60 --out "$tmp/o" --json > "$tmp/f.json" || { echo "FAIL  precc-train"; exit 1; }
python3 - "$tmp/f.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
ok = True
for r in j["recipes"]:
    v, flushed = r["vs_fp32"], r["dy_flushed"]
    stall = r["name"] == "fp16_no_loss_scale"
    good = (v > 0.05 and flushed > 0.3) if stall else (abs(v) < 0.05 and flushed < 1e-3)
    print("%s  %-24s final %.4g, %+.2f %% vs fp32 %.4g, dy flushed %.1f %%" % (
        "ok  " if good else "FAIL", r["name"], r["final"], 100 * v, j["fp32"]["final"],
        100 * flushed))
    ok &= good
sys.exit(0 if ok else 1)
PY
