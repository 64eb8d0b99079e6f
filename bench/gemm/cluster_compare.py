#!/usr/bin/env python3
"""cluster_compare.py JSONL — bench_gemm_gpu's rows of the same recipe built
at 1x1 and at 2x1 (recipe names "<recipe>.1x1", "<recipe>.2x1":
bench/gemm/lease_gemm.sh's cluster part) side by side: per (recipe, shape,
GEMM) both times, both rates and 2x1's speedup (1x1 time / 2x1 time), then
the geometric mean of the speedups per recipe and GEMM. Exit 1 when a row
has no partner or a result was BAD."""
import json
import math
import sys


def main(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    by = {}
    bad = 0
    for r in rows:
        rec, _, cl = r["recipe"].rpartition(".")
        if cl not in ("1x1", "2x1"):
            continue
        if not r.get("ok", True):
            print("BAD result: %s m%d n%d k%d %s" % (r["recipe"], r["m"], r["n"], r["k"], r["what"]))
            bad = 1
        by.setdefault((rec, r["m"], r["n"], r["k"], r["what"]), {})[cl] = r
    print("%-20s %-24s %-6s %10s %10s %9s %9s %8s" % ("recipe", "shape (M N K)", "gemm", "1x1 ms",
                                                     "2x1 ms", "1x1 TF/s", "2x1 TF/s", "2x1/1x1"))
    speed = {}
    for key in sorted(by):
        rec, m, n, k, what = key
        v = by[key]
        if "1x1" not in v or "2x1" not in v:
            print("%-20s %-24s %-6s  only %s" % (rec, "%d %d %d" % (m, n, k), what, ",".join(v)))
            bad = 1
            continue
        a, b = v["1x1"], v["2x1"]
        s = a["ms"] / b["ms"] if b["ms"] > 0 else float("nan")
        speed.setdefault((rec, what), []).append(s)
        print("%-20s %-24s %-6s %10.3f %10.3f %9.1f %9.1f %7.3fx" % (rec, "%d %d %d" % (m, n, k), what,
                                                                    a["ms"], b["ms"], a["tflops"],
                                                                    b["tflops"], s))
    for (rec, what), v in sorted(speed.items()):
        ok = [x for x in v if x > 0 and math.isfinite(x)]
        g = math.exp(sum(math.log(x) for x in ok) / len(ok)) if ok else float("nan")
        print("cluster 2x1 over 1x1: %s %s: geometric mean %.3fx over %d shapes" % (rec, what, g, len(v)))
    return bad


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
