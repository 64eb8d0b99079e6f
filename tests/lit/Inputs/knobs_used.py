"""knobs_used.py PRECC DIR: precc check --json shows an operand's knobs
(and amax_eps) exactly when its IR uses them. For each cast, the union of
what the JSON lists over a layer's six operands must be the set of knobs
whose other value changes `precc ir` (a value the recipe check refuses
proves nothing either way). Prints one line per cast, the knobs shown;
exits 1 if any cast disagrees."""
import json, os, subprocess, sys

precc, tmp = sys.argv[1], sys.argv[2]
model = os.path.join(tmp, "m.lua")
with open(model, "w") as f:
    f.write('model "m"\nlinear("a.b", 256, 256)\n')

CASTS = {
    "current": "format = e4m3, scaling = current",
    "current_pow2": "format = e4m3, scaling = current, pow2 = true",
    "current_skip": "format = e4m3, scaling = current, nonfinite = \"skip_step\"",
    "none_e4m3": "format = e4m3",
    "delayed_pow2": "format = e4m3, scaling = delayed, pow2 = true",
    "rowwise": "format = e4m3, scaling = rowwise",
    "blockwise": "format = e4m3, scaling = blockwise { 1, 128 }",
    "mx": "format = e4m3, scaling = mx",
    "mx_pow2": "format = e4m3, scaling = mx, pow2 = true",
    "nvfp4": "format = e2m1, scaling = nvfp4, scale_format = e4m3",
    "bf16": "format = bf16",
}
OTHER = {
    "amax_eps": "amax_eps = 0.001", "amax_nan": 'amax_nan = "ignore"',
    "zero_amax": 'zero_amax = "keep"', "nonfinite_scale": 'nonfinite_scale = "one"',
    "scale_form": 'scale_form = "amax_over_fmax"', "quantize": 'quantize = "divide"',
    "mx_round": 'mx_round = "floor"', "nvfp4_scale": 'nvfp4_scale = "te2.8-2.13"',
    "pow2_round": 'pow2_round = "log2"', "rht": 'rht = "wgrad"',
}


def run(*args):
    return subprocess.run([precc, *args], capture_output=True)


def recipe(cast, extra=""):
    p = os.path.join(tmp, "r.lua")
    with open(p, "w") as f:
        f.write('recipe "r" { %s%s }\n' % (cast, ", " + extra if extra else ""))
    return p


bad = 0
for name, cast in CASTS.items():
    out = run("check", recipe(cast), "--model", model, "--json")
    layer = json.loads(out.stdout)["layers"][0]
    shown = set()
    for g in ("fprop", "dgrad", "wgrad"):
        for op in ("a", "b"):
            o = layer[g][op]
            shown |= set(o) & set(OTHER)
    ir = run("ir", recipe(cast), "--model", model).stdout
    used, refused = set(), set()
    for knob, text in OTHER.items():
        r = run("ir", recipe(cast, text), "--model", model)
        if r.returncode != 0:
            refused.add(knob)
        elif r.stdout != ir:
            used.add(knob)
    print((name + ": " + " ".join(k for k in OTHER if k in shown)).rstrip())
    if shown - refused != used:
        print("  shown but unused: %s; used but not shown: %s"
              % (sorted(shown - refused - used), sorted(used - shown)))
        bad = 1
sys.exit(bad)
