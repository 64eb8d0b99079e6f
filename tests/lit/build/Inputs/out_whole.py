#!/usr/bin/env python3
"""out_whole.py DIR: prints the recipe name of the build in DIR if DIR is
one build, whole: every file manifest.json lists exists with its size and
FNV-1a 64, the launchers launch only kernels it lists (and all of them),
and no kernel file it does not list lies beside it; else MIXED: why."""
import json, os, re, sys

def fnv1a64(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    return "%016x" % h

def main(d):
    try:
        m = json.load(open(os.path.join(d, "manifest.json")))
    except (OSError, ValueError) as e:
        return "MIXED: manifest.json: %s" % e
    names = set()
    listed = set()
    for k in m["kernels"]:
        names.add(k["name"])
        for files in k["files"].values():
            for kind in ("ptx", "cubin"):
                if kind not in files:
                    continue
                fn = files[kind]
                listed.add(fn)
                try:
                    b = open(os.path.join(d, fn), "rb").read()
                except OSError as e:
                    return "MIXED: %s: %s" % (fn, e)
                if len(b) != files[kind + "_bytes"] or fnv1a64(b) != files[kind + "_fnv1a64"]:
                    return "MIXED: %s is not the file manifest.json lists" % fn
    for f in ("precc_kernels.c", "precc_kernels.h"):
        try:
            launched = set(re.findall(r"k_[0-9a-f]{16}", open(os.path.join(d, f)).read()))
        except OSError as e:
            return "MIXED: %s: %s" % (f, e)
        if f.endswith(".c") and launched != names:
            return "MIXED: %s launches %d kernels, manifest.json lists %d, %d in common" % (
                f, len(launched), len(names), len(launched & names))
    for fn in os.listdir(d):
        if re.fullmatch(r"k_[0-9a-f]{16}\..*\.(ptx|cubin)", fn) and fn not in listed:
            return "MIXED: %s is not in manifest.json" % fn
    return m["recipe"]["name"]

print(main(sys.argv[1]))
