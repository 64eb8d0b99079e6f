"""sim_assert.py JSON EXPR...: evaluate each EXPR over `precc sim --json`
output and fail (exit 1) on the first false one, printing the values.

In EXPR: g(recipe, gemm, key) reads a GEMM field (rel_fro, max_rel, snr_db,
accum_rel_fro, accum_max_rel, ...); op(recipe, gemm, i, key) an operand
field (saturated, flushed, n, ...); rel(recipe, gemm) is g(..., 'rel_fro').
"""
import json
import sys

data = json.load(open(sys.argv[1]))
recipes = {r["name"]: r for r in data["recipes"]}


def gemm(recipe, name):
    return next(x for x in recipes[recipe]["gemms"] if x["gemm"] == name)


def g(recipe, name, key):
    return gemm(recipe, name)[key]


def op(recipe, name, i, key):
    return gemm(recipe, name)["operands"][i][key]


def rel(recipe, name):
    return g(recipe, name, "rel_fro")


env = {"g": g, "op": op, "rel": rel, "data": data}
for expr in sys.argv[2:]:
    ok = eval(expr, env)
    print(("ok:   " if ok else "FAIL: ") + expr)
    if not ok:
        sys.exit(1)
