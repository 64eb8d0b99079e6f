"""slim.py — what a Hopper loads of tests/gpu/prepare.sh's artifacts, and
nothing else (a lease carries at most 64 MiB): each kernel keeps its sm_90a
or sm_90 cubin; the PTX beside a cubin, and other targets' files, go, and so
do their entries in manifest.json (precc-run checks every file named there).

  python3 tests/gpu/slim.py ARTIFACTS
"""
import json
import os
import sys

KEEP = ("sm_90a", "sm_90")
root = sys.argv[1]
for d, _, files in os.walk(root):
    if "manifest.json" not in files:
        continue
    path = os.path.join(d, "manifest.json")
    m = json.load(open(path))
    gone = set()
    for k in m["kernels"]:
        for tg, f in k.get("files", {}).items():
            drop = ("ptx", "cubin") if tg not in KEEP else ("ptx",) if "cubin" in f else ()
            for what in drop:
                if what in f:
                    gone.add(f[what])
                    for key in (what, what + "_bytes", what + "_fnv1a64"):
                        f.pop(key, None)
    for name in gone:
        os.remove(os.path.join(d, name))
    json.dump(m, open(path, "w"), indent=1)
