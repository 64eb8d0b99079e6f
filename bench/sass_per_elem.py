#!/usr/bin/env python3
"""sass_per_elem.py BEFORE AFTER [SHAPE] — the SASS instructions per
element of one kernel family (default quant_rowcol) in two `precc build`
directories with cubins (manifest.json), paired by kernel name (the IR's
hash, which a codegen change leaves alone): one markdown row per kernel
and target with its registers (ptxas -v, the manifest's), its instructions
(`nvdisasm -c`, every one but NOP) and those over the 64 elements a thread
of a 128 x 128 tile handles (quant_rowcol is straight-line: each
instruction runs once a thread). bench/RESULTS.md, "Columns at run time".
nvdisasm: $NVDISASM, /usr/local/cuda/bin, PATH, else build/sass-venv (as
bench/sass_audit.py).
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_audit import find_tool  # noqa: E402

INS = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?(\S+)")


def counts(d, shape, nd):
    m = json.load(open(os.path.join(d, "manifest.json")))
    out = {}
    for k in m["kernels"]:
        if k["shape"] != shape:
            continue
        data = [p["type"] for p in k["params"] if p["name"] == k["grid"]["data"]][0]
        for t, f in k["files"].items():
            if not f.get("cubin"):
                continue
            text = subprocess.run([nd, "-c", os.path.join(d, f["cubin"])], capture_output=True,
                                  text=True).stdout
            n = sum(1 for l in text.splitlines() if INS.match(l) and not INS.match(l).group(2).startswith("NOP"))
            out[(k["name"], t)] = (k["func"].split(".")[0], data, f.get("regs"), n)
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    nd = find_tool("nvdisasm")
    if not nd:
        sys.exit("sass_per_elem.py: no nvdisasm")
    shape = sys.argv[3] if len(sys.argv) > 3 else "quant_rowcol"
    b, a = counts(sys.argv[1], shape, nd), counts(sys.argv[2], shape, nd)
    print("| kernel | value | target | data | registers | SASS | a thread's element | change |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
    for key in sorted(b, key=lambda k: (b[k][0], k[1], b[k][1])):
        if key not in a:
            continue
        x, y = b[key], a[key]
        print("| %s | %s | %s | %s | %s → %s | %d → %d | %.2f → %.2f | %+.1f %% |" % (
            key[0], x[0], key[1], x[1], x[2], y[2], x[3], y[3], x[3] / 64, y[3] / 64,
            100.0 * (y[3] - x[3]) / x[3]))


if __name__ == "__main__":
    main()
