#!/usr/bin/env python3
"""ptx_per_elem.py DIR [TARGET] - PTX instructions per element of the e2m1
quantize kernels of a `precc build` directory (manifest.json + PTX).
ptx_per_elem.py --paths CG_PTX [TARGET] - the bare element paths: the
kernels of bench/e2m1/ (one tensorwise quantize, nothing else) through
tests/codegen/cg_ptx, each against the e4m3 one, whose encode is half a
hardware cvt an element: path = (n - n_e4m3) / 16 + 0.5, the multiply,
encode, SR bits and nibble packing of one element.

Each of these kernels gives a thread 16 elements, straight-line: the count
is every instruction of the kernel's PTX (loads, amax, scales, the encode,
the SR bits, the stores; labels, directives and braces excluded) over 16.
A kernel with a branch (a transpose through shared memory) still runs each
instruction at most once per thread. Usage (bench/RESULTS.md):
  precc build recipes/nvfp4.lua --model recipes/models/llama-3-8b.json \
      --target sm_90a -o /tmp/nv && python3 bench/ptx_per_elem.py /tmp/nv
"""
import json
import os
import re
import sys

INS = re.compile(r"^\s+(@!?%p\d+\s+)?[a-z][a-z0-9_.:]*(\s|;)")


def count(path):
    n = 0
    with open(path) as f:
        for line in f:
            if line.lstrip().startswith(("//", ".reg", ".param", ".shared", ".local")):
                continue
            if INS.match(line):
                n += 1
    return n


def paths(cg, tgt):
    import subprocess
    import tempfile
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2m1")
    n = {}
    for name in ("e4m3_rne", "e2m1_rne", "e2m1_sr"):
        ptx = subprocess.run([cg, "--target", tgt, os.path.join(here, name + ".ir")],
                             check=True, capture_output=True, text=True).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(ptx)
        n[name] = count(f.name)
        os.unlink(f.name)
    print("%-9s %6s %12s" % ("kernel", "ptx", "path/elem"))
    for name in ("e4m3_rne", "e2m1_rne", "e2m1_sr"):
        print("%-9s %6d %12.1f" % (name, n[name], (n[name] - n["e4m3_rne"]) / 16 + 0.5))


def main():
    if sys.argv[1] == "--paths":
        paths(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "sm_90a")
        return
    d = sys.argv[1]
    tgt = sys.argv[2] if len(sys.argv) > 2 else None
    m = json.load(open(os.path.join(d, "manifest.json")))
    rows = []
    for k in m["kernels"]:
        outs = [p["type"] for p in k["params"] if p["dir"] == "out"]
        if not any(t.startswith("e2m1[") for t in outs) or k["shape"] == "gemm":
            continue
        for t, fl in k["files"].items():
            if tgt and t != tgt:
                continue
            n = count(os.path.join(d, fl["ptx"]))
            sr = "sr" if k["has_seed"] else "rne"
            rows.append((k["func"].rsplit(".", 1)[0], k["shape"], sr, t, n, n / 16, fl.get("regs")))
    rows.sort()
    print("%-22s %-15s %-4s %-7s %6s %8s %5s" % ("kernel", "shape", "rnd", "target", "ptx", "per elem", "regs"))
    for r in rows:
        print("%-22s %-15s %-4s %-7s %6d %8.1f %5s" % r)


main()
