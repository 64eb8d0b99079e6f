#!/usr/bin/env python3
"""sass_audit.py — the SASS audit of issue 28: every GEMM kernel of every
shipped recipe x {Llama-3-8B, the 70B config, Mixtral-8x7B} built for
sm_90a, one row each: GEMM (fprop/dgrad/wgrad), tile, cluster, stages
(schedule's `# schedule:` comment; the tile also from the manifest's grid),
registers, spill bytes (the manifest's ptxas -v figures), local memory
(cuobjdump -res-usage: STACK/LOCAL; LDL/STL in the SASS), and from the
SASS (nvdisasm) per K tile: WGMMA (HGMMA/QGMMA/IGMMA), UTMALDG, LDG and
the K loop's instructions; per kernel: UTMASTG, STSM, STG.

The K loop is the smallest loop (a backward branch, BRA.U.ANY excluded:
those are the single-instruction TMA issue loops) holding a *GMMA (HMMA on
the mma.sync family); its K tiles per iteration are its mbarrier waits
(SYNCS.PHASECHK), at least 1. The producer loop is the smallest holding a
UTMALDG. e2m1 (NVFP4) kernels have none: their `upcast` counts are the
producer warpgroup's stage loop (the smallest holding a PRMT and its
FENCE) and its upcast loops' instructions (gemm_model.py weighs them).

Exit status 1 (the default is strict) when a kernel has local memory, a
spill, or is a GEMM not on wgmma at sm_90a; --allow-known forgives the
failures listed in KNOWN (each with the issue item that fixes it) and
still fails on any other. 2 on a usage or tool error.

  python3 bench/sass_audit.py [--precc build/precc] [--recipes 'a b.lua']
      [--models 'm.json ...'] [--group] [--json OUT] [--allow-known]
  python3 bench/sass_audit.py --dirs 'OUT...'   audit builds already made
  python3 bench/sass_audit.py --dirs 'OUT...' --layers   each GEMM kernel's
      GEMMs and layers from the manifests alone (no tools): an expert
      group's kernels by the group, model.layers.0.mlp.experts.*.gate_proj
  python3 bench/sass_audit.py --cubin K.cubin [--ptx K.ptx]   one kernel
      (--ptx: ptxas -arch=sm_90a -v it into the cubin first)

Tools: $NVDISASM / $CUOBJDUMP, else /usr/local/cuda/bin, else PATH, else
build/sass-venv (pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ["recipes/models/llama-3-8b.json", "tests/lit/Inputs/model_llama3_70b.json",
          "recipes/models/mixtral-8x7b.json"]
# Failures known today, by recipe (and GEMM kind, None = every kind) and the
# finding's class: the issue item that removes each.
KNOWN = [
    # (nvfp4's "not on wgmma", #28 item 5, is gone: its GEMMs are on wgmma)
]


def find_tool(name):
    env = os.environ.get(name.upper())
    cands = [env] if env else []
    cands += ["/usr/local/cuda/bin/" + name, shutil.which(name) or ""]
    cands += sorted(glob.glob(os.path.join(ROOT, "build/sass-venv/lib/python*/site-packages/nvidia/*/bin/" + name)))
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    return None


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


INS = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
LABEL = re.compile(r"^(\.L\w+):")
TARGET = re.compile(r"`\((\.L\w+)\)")


def parse_sass(text):
    """[(addr, opcode, text)] and {label: addr} of nvdisasm's listing."""
    ins, labels, pending = [], {}, []
    for line in text.splitlines():
        m = LABEL.match(line.strip())
        if m:
            pending.append(m.group(1))
            continue
        m = INS.match(line)
        if not m:
            continue
        addr, body = int(m.group(1), 16), m.group(2)
        for lab in pending:
            labels[lab] = addr
        pending = []
        toks = body.split()
        if toks and toks[0].startswith("@"):   # guard predicate
            toks = toks[1:]
        ins.append((addr, toks[0] if toks else "", body))
    return ins, labels


def loops(ins, labels):
    """[(start, end)] address ranges of backward branches (uniform-ANY
    issue loops excluded)."""
    out = []
    for addr, op, body in ins:
        if not op.startswith("BRA") or ".U.ANY" in op:
            continue
        m = TARGET.search(body)
        if m and m.group(1) in labels and labels[m.group(1)] <= addr:
            out.append((labels[m.group(1)], addr))
    return out


def count(ins, lo, hi, pred):
    return sum(1 for a, op, b in ins if lo <= a <= hi and pred(op, b))


def is_gmma(op, _b):
    return op.split(".")[0] in ("HGMMA", "QGMMA", "IGMMA", "BGMMA")


def is_hmma(op, _b):
    return op.split(".")[0] in ("HMMA", "IMMA")


def is_wait(op, _b):
    return op.startswith("SYNCS.PHASECHK")


def smallest(lps, ins, pred):
    best = None
    for lo, hi in lps:
        if count(ins, lo, hi, pred) and (best is None or hi - lo < best[1] - best[0]):
            best = (lo, hi)
    return best


def sass_counts(text):
    """The audit's SASS figures of one kernel's nvdisasm listing."""
    ins, labels = parse_sass(text)
    lps = loops(ins, labels)
    first = lambda op: op.split(".")[0]
    c = {
        "instructions": len(ins),
        "gmma": sum(1 for _, op, b in ins if is_gmma(op, b)),
        "hmma": sum(1 for _, op, b in ins if is_hmma(op, b)),
        "utmastg": sum(1 for _, op, _b in ins if first(op) == "UTMASTG"),
        "stsm": sum(1 for _, op, _b in ins if first(op) == "STSM"),
        "stg": sum(1 for _, op, _b in ins if first(op) == "STG"),
        "ldl": sum(1 for _, op, _b in ins if first(op) == "LDL"),
        "stl": sum(1 for _, op, _b in ins if first(op) == "STL"),
    }
    kl = smallest(lps, ins, is_gmma) or smallest(lps, ins, is_hmma)
    if kl:
        lo, hi = kl
        kt = max(1, count(ins, lo, hi, is_wait))
        # a loop holding the epilogue's stores is the tile loop: the K loop
        # was unrolled away (K of one or two K tiles)
        tile_loop = count(ins, lo, hi, lambda o, b: first(o) in ("STG", "STSM", "UTMASTG")) > 0
        c["k_loop"] = {"start": lo, "end": hi, "k_tiles": kt, "tile_loop": tile_loop,
                       "instructions": count(ins, lo, hi, lambda o, b: True) / kt,
                       "mma": count(ins, lo, hi, lambda o, b: is_gmma(o, b) or is_hmma(o, b)) / kt,
                       "ldg": count(ins, lo, hi, lambda o, b: first(o) == "LDG") / kt,
                       "fp": count(ins, lo, hi, lambda o, b: first(o) in ("FMUL", "FADD", "FFMA")) / kt}
    # e2m1 (NVFP4): no TMA; the producer warpgroup's stage loop (the
    # smallest holding its fence.proxy.async and a PRMT) and the upcast
    # loops inside it (those holding PRMT: A's rows, then B's, 32 rows an
    # iteration), each loop's static instructions; gemm_model.py weighs
    # them by the tile (bench/RESULTS.md, "NVFP4 at speed")
    st = None
    if not any(first(op) == "UTMALDG" for _, op, _b in ins):
        st = smallest([(lo, hi) for lo, hi in lps if count(ins, lo, hi, lambda o, b: first(o) == "PRMT")],
                      ins, lambda o, b: first(o) == "FENCE")
    if st:
        inner = sorted((lo, hi) for lo, hi in lps if st[0] <= lo and hi < st[1] and (lo, hi) != st
                       and count(ins, lo, hi, lambda o, b: first(o) == "PRMT"))
        c["upcast"] = {"stage": count(ins, st[0], st[1], lambda o, b: True),
                       "inner": [count(ins, lo, hi, lambda o, b: True) for lo, hi in inner]}
    pl = smallest(lps, ins, lambda o, b: first(o) == "UTMALDG")
    if pl:
        lo, hi = pl
        kt = max(1, count(ins, lo, hi, lambda o, b: o == "SYNCS.ARRIVE.TRANS64"),
                 count(ins, lo, hi, is_wait))
        c["utmaldg_per_k"] = count(ins, lo, hi, lambda o, b: first(o) == "UTMALDG") / kt
    return c


def res_usage(cuobjdump, cubin):
    out = run([cuobjdump, "-res-usage", cubin]).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", out)
    if not m:
        raise RuntimeError("%s -res-usage %s: %s" % (cuobjdump, cubin, out.strip()[:200]))
    return {"regs": int(m.group(1)), "stack": int(m.group(2)), "local": int(m.group(4))}


def audit_cubin(tools, cubin, spill_bytes=None):
    dis = run([tools["nvdisasm"], "-c", cubin])
    if dis.returncode:
        raise RuntimeError("nvdisasm %s: %s" % (cubin, dis.stdout.strip()[:200]))
    r = sass_counts(dis.stdout)
    r.update(res_usage(tools["cuobjdump"], cubin))
    r["spill_bytes"] = spill_bytes
    return r


# the manifest's "schedule" (78485aa), else the kernel's `# schedule:` comment
SCHED = re.compile(r"# schedule: (\d+)x(\d+) tile, (\d+) stages \((\d+) bytes\), cluster (\w+), (\d+) consumer")


def ir_shape(ir):
    """N, K and the A/B formats of the kernel's gemm, from its IR text."""
    types = {}
    for line in ir.splitlines():
        m = re.match(r"\s*%(\S+) = .* : (\w+)\[([^\]]*)\]", line)
        if m:
            types[m.group(1)] = (m.group(2), m.group(3).split(","))
    for line in ir.splitlines():
        m = re.match(r"\s*%(\S+) = gemm(?:_grouped)? %(\S+?), %(\S+?)[, ]", line)
        if m:
            out, a, b = types[m.group(1)], types.get(m.group(2)), types.get(m.group(3))
            return {"n": out[1][1], "k": a[1][1] if a else "?", "fmt": a[0] if a else "?",
                    "rows": out[1][0]}
    return {}


def verdict(r):
    why = []
    if r.get("spill_bytes"):
        why.append("spill %d B" % r["spill_bytes"])
    if r["local"] or r["stack"] or r["ldl"] or r["stl"]:
        why.append("local memory (LOCAL %d, STACK %d, %d LDL, %d STL)" % (r["local"], r["stack"], r["ldl"], r["stl"]))
    if r.get("gemm_kernel", True) and not r["gmma"]:
        why.append("not on wgmma (%d HMMA)" % r["hmma"])
    return why


def known(r, why):
    for rec, kind, cls, item in KNOWN:
        if r.get("recipe") == rec and (kind is None or kind in r.get("kinds", [])) and all(cls in w for w in why):
            return item
    return None


def name_pattern(names, few=0):
    """One name for several dotted names: a part where they differ as
    {a,b} when it takes at most `few` values, else *."""
    parts = [n.split(".") for n in names]
    if len({len(p) for p in parts}) != 1:
        return names[0]
    out = []
    for p in zip(*parts):
        v = sorted(set(p))
        out.append(v[0] if len(v) == 1 else "{%s}" % ",".join(v) if len(v) <= few else "*")
    return ".".join(out)


def group_names(man):
    """{class: {name, experts, n, k, count}} of the manifest's expert groups
    (targets[0]'s "groups"): name is the experts' layers as a pattern,
    model.layers.0.mlp.experts.*.gate_proj."""
    by = {}
    for g in man.get("groups", []):
        el = g.get("expert_layers") or [g["name"]]
        pat = name_pattern(el) if len(el) > 1 else el[0]
        by.setdefault(g["class"], []).append((pat, g))
    out = {}
    for c, gs in by.items():
        g = gs[0][1]
        out[c] = {"name": name_pattern([p for p, _ in gs], 3), "experts": g["experts"], "n": g["n"],
                  "k": g["k"], "count": len(gs)}
    return out


def kernel_names(man):
    """{kernel: (kinds, layers, grouped)} of every GEMM kernel of a
    manifest: the GEMMs its steps label it with, the layers whose steps
    launch it (a layer class's first layer's last name part; an expert
    group's kernels by the group: model.layers.0.mlp.experts.*.gate_proj),
    and for a grouped GEMM its experts, each expert's W [n, k] and how many
    groups launch it (else None)."""
    kinds, layers = {}, {}
    for ci, lc in enumerate(man["layer_classes"]):
        for st in lc["steps"]:
            kinds.setdefault(st["kernel"], set()).add(st.get("gemm") or "?")
            layers.setdefault(st["kernel"], set()).add(ci)
    # an m_variant (the same GEMM on another tile, launched from M >= m_min)
    # is named by its kernel, not by a step: it serves the base's steps
    variant = {}
    for k in man["kernels"]:
        mv = k.get("m_variant")
        if isinstance(mv, dict) and mv.get("kernel"):
            variant[mv["kernel"]] = (k["name"], mv.get("m_min"))
            kinds.setdefault(mv["kernel"], set()).update(kinds.get(k["name"], set()))
            layers.setdefault(mv["kernel"], set()).update(layers.get(k["name"], set()))
    fqn = {}
    for l in man["layers"]:
        fqn.setdefault(l["class"], l["fqn"].split(".")[-1])
    # an expert group's step is a class of its own (manifest "groups"): its
    # kernels are named by the group, the experts' index (and the blocks',
    # where several groups share the class) as "*"
    group = group_names(man)
    fqn.update({c: g["name"] for c, g in group.items()})
    out = {}
    for k in man["kernels"]:
        if k["shape"] != "gemm":
            continue
        gs = [group[c] for c in layers.get(k["name"], []) if c in group]
        out[k["name"]] = (sorted(kinds.get(k["name"], [])),
                          sorted({fqn.get(c, "?") for c in layers.get(k["name"], [])}),
                          {"experts": gs[0]["experts"], "n": gs[0]["n"], "k": gs[0]["k"],
                           "groups": sum(g["count"] for g in gs)} if gs else None)
    return out, variant


def audit_build(tools, out, recipe, model):
    man = json.load(open(os.path.join(out, "manifest.json")))
    names, variant = kernel_names(man)
    rows = []
    for k in man["kernels"]:
        if k["shape"] != "gemm" or "sm_90a" not in k["files"]:
            continue
        f = k["files"]["sm_90a"]
        r = audit_cubin(tools, os.path.join(out, f["cubin"]), f.get("spill_bytes"))
        kinds, layers, grouped = names[k["name"]]
        r.update(recipe=recipe, model=model, kernel=k["name"], kinds=kinds, layers=layers,
                 manifest_regs=f.get("regs"), **ir_shape(k["ir"]))
        if grouped:   # a grouped GEMM: its experts and each expert's W [n, k]
            r["grouped"] = grouped
            r.update(n=str(grouped["n"]), k=str(grouped["k"]))
        g = k.get("grid", {})
        r["tile"] = "%sx%s" % (g.get("tile_rows", "?"), g.get("tile_cols", "?"))
        m = SCHED.search("# schedule: " + k["schedule"] if k.get("schedule") else k["ir"])
        r["sched"] = m is not None
        if m:
            r.update(tile="%sx%s" % (m.group(1), m.group(2)), stages=int(m.group(3)),
                     smem=int(m.group(4)), cluster=m.group(5), consumers=int(m.group(6)))
        r["m_variant"] = k.get("m_variant")
        if k["name"] in variant:
            r["variant_of"], r["m_min"] = variant[k["name"]]
        rows.append(r)
    return rows


def fmt_k(r, key):
    kl = r.get("k_loop")
    if not kl:
        return "-"
    v = kl[key]
    return "%g%s" % (round(v, 1), "*" if kl["tile_loop"] else "")


COLS = ["recipe", "model", "GEMM", "layers", "N x K", "tile", "cluster", "stages", "regs", "spill", "local",
        "wgmma/kt", "UTMALDG/kt", "LDG/kt", "loop instr/kt", "UTMASTG", "STSM", "STG", "verdict"]


def row_cells(r):
    why = r["why"]
    return [r.get("recipe", "-"), r.get("model", "-"), "/".join(r.get("kinds", [])) or "-",
            ",".join(l[6:] if l.startswith("model.") else l for l in r.get("layers", []))[:64] or "-", "%s x %s" % (r.get("n", "?"), r.get("k", "?")),
            r.get("tile", "-"), r.get("cluster", "-"), str(r.get("stages", "-")), str(r["regs"]),
            str(r.get("spill_bytes") if r.get("spill_bytes") is not None else "-"),
            str(r["local"] + r["stack"]),
            fmt_k(r, "mma") + ("" if r["gmma"] else " HMMA"),
            "%g" % round(r["utmaldg_per_k"], 1) if "utmaldg_per_k" in r else "0",
            fmt_k(r, "ldg"), fmt_k(r, "instructions"), str(r["utmastg"]), str(r["stsm"]), str(r["stg"]),
            "ok" if not why else ("KNOWN " if r.get("known") else "FAIL ") + "; ".join(why)]


def markdown(rows, group):
    lines = ["| " + " | ".join(COLS + (["kernels"] if group else [])) + " |",
             "|" + "---|" * (len(COLS) + (1 if group else 0))]
    if group:
        # identical rows but for model, layers, N x K: one line, counted
        agg = {}
        for r in rows:
            c = row_cells(r)
            key = tuple(c[:1] + c[2:3] + c[5:])
            a = agg.setdefault(key, {"c": c, "models": [], "n": 0, "nk": set(), "layers": set()})
            a["n"] += 1
            if r["model"] not in a["models"]:
                a["models"].append(r["model"])
            a["nk"].add(c[4])
            a["layers"].update(r.get("layers", []))
        for a in agg.values():
            c = list(a["c"])
            c[1] = ", ".join(m.replace("model_", "").replace("llama3_70b", "llama-3-70b") for m in a["models"])
            c[3] = ",".join(sorted(a["layers"]))[:48]
            c[4] = "%d shapes" % len(a["nk"]) if len(a["nk"]) > 1 else next(iter(a["nk"]))
            lines.append("| " + " | ".join(c + [str(a["n"])]) + " |")
    else:
        for r in rows:
            lines.append("| " + " | ".join(row_cells(r)) + " |")
    return "\n".join(lines)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precc", default=os.path.join(ROOT, "build/precc"))
    ap.add_argument("--recipes", default=None)
    ap.add_argument("--models", default=None)
    ap.add_argument("--group", action="store_true", help="merge rows alike but for model/layer/shape")
    ap.add_argument("--json", default=None)
    ap.add_argument("--allow-known", action="store_true")
    ap.add_argument("--dirs", default=None, help="audit these precc build outputs instead of building")
    ap.add_argument("--cubin", default=None)
    ap.add_argument("--ptx", default=None)
    ap.add_argument("--not-gemm", action="store_true", help="--cubin: not a GEMM (no wgmma check)")
    ap.add_argument("--layers", action="store_true",
                    help="with --dirs: each GEMM kernel's GEMMs and layers from the manifest alone (no SASS)")
    a = ap.parse_args(argv)
    if a.layers and a.dirs:
        for d in a.dirs.split():
            names, _ = kernel_names(json.load(open(os.path.join(d, "manifest.json"))))
            for kern, (kinds, layers, grouped) in names.items():
                print("%s %s %s%s" % (kern, "/".join(kinds) or "-", ",".join(layers) or "-",
                                      " grouped: %d experts, n %d, k %d, %d group(s)"
                                      % (grouped["experts"], grouped["n"], grouped["k"], grouped["groups"])
                                      if grouped else ""))
        return 0
    tools = {t: find_tool(t) for t in ("nvdisasm", "cuobjdump")}
    if not all(tools.values()):
        print("sass_audit: SKIP: no nvdisasm/cuobjdump (pip install nvidia-cuda-nvdisasm "
              "nvidia-cuda-cuobjdump into build/sass-venv, or set NVDISASM/CUOBJDUMP)")
        return 77
    print("sass_audit: nvdisasm %s, cuobjdump %s" % (tools["nvdisasm"], tools["cuobjdump"]), file=sys.stderr)
    rows = []
    if a.cubin:
        spill = None
        if a.ptx:
            ptxas = os.environ.get("PRECC_PTXAS") or find_tool("ptxas")
            p = run([ptxas, "-arch=sm_90a", "-v", "-o", a.cubin, a.ptx])
            if p.returncode:
                print(p.stdout)
                return 2
            m = re.search(r"(\d+) bytes spill stores", p.stdout)
            spill = int(m.group(1)) if m else None
        r = audit_cubin(tools, a.cubin, spill)
        r.update(recipe=os.path.basename(a.cubin), gemm_kernel=not a.not_gemm)
        rows.append(r)
    elif a.dirs:
        for d in a.dirs.split():
            man = json.load(open(os.path.join(d, "manifest.json")))
            rows += audit_build(tools, d, man["recipe"]["name"], man["model"]["name"])
    else:
        recipes = (a.recipes.split() if a.recipes else
                   sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(ROOT, "recipes/*.lua"))))
        models = a.models.split() if a.models else MODELS
        tmp = tempfile.mkdtemp(prefix="sass_audit.")
        env = dict(os.environ, PRECC_CACHE_DIR=os.environ.get("PRECC_CACHE_DIR", os.path.join(tmp, "cache")))
        try:
            for m in models:
                mpath = m if os.path.exists(m) else os.path.join(ROOT, m)
                for rec in recipes:
                    # a shipped recipe's name, or a recipe file's path
                    rpath = rec if rec.endswith(".lua") else os.path.join(ROOT, "recipes", rec + ".lua")
                    rec = os.path.basename(rec)[:-4] if rec.endswith(".lua") else rec
                    out = os.path.join(tmp, "out")
                    shutil.rmtree(out, ignore_errors=True)
                    p = run([a.precc, "build", rpath, "--model", mpath,
                             "--target", "sm_90a", "-o", out], env=env)
                    mname = os.path.basename(m).rsplit(".", 1)[0]
                    if p.returncode:
                        print("sass_audit: FAIL %s x %s: build failed: %s" % (rec, mname, p.stdout.strip()[-300:]))
                        rows.append({"recipe": rec, "model": mname, "build_failed": True})
                        continue
                    got = audit_build(tools, out, rec, mname)
                    print("sass_audit: %s x %s: %d GEMM kernels" % (rec, mname, len(got)), file=sys.stderr)
                    rows += got
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    bad = sum(1 for r in rows if r.get("build_failed"))
    rows = [r for r in rows if not r.get("build_failed")]
    nknown = 0
    for r in rows:
        r["why"] = verdict(r)
        r["known"] = known(r, r["why"]) if r["why"] and a.allow_known else None
        if r["why"] and not r["known"]:
            bad += 1
        nknown += bool(r["known"])
    print(markdown(rows, a.group))
    fails = [r for r in rows if r["why"]]
    print("\nsass_audit: %d GEMM kernels, %d ok, %d fail%s" % (len(rows), len(rows) - len(fails), len(fails),
          " (%d known, allowed: --allow-known)" % nknown if nknown else ""))
    if fails:
        by = {}
        for r in fails:
            key = (r.get("recipe"), "; ".join(w.split(" (")[0] for w in r["why"]))
            by.setdefault(key, []).append(r)
        for (rec, w), rs in sorted(by.items()):
            item = known(rs[0], rs[0]["why"])
            print("  %s: %d kernels: %s%s" % (rec, len(rs), w, " -> " + item if item else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1, default=list)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
