"""grouped_ref.py — the grouped GEMM benchmark's references (issue 29), timed
in the same run as precc's grouped kernels (bench/bench_grouped_gpu.c), and
the side-by-side table.

For each MoE block of bench/gemm/moe_shapes.lua, each distinct expert shape
(N, K), each token count T and routing (balanced, skewed: the first eighth
of the experts with 4 times the others' share, as bench_grouped_gpu routes
them), M = T x top-k rows sorted by expert:
  grouped_bf16   torch._grouped_mm on bf16 (CUTLASS, sm_90+): fprop
                 x[M,K] . W[E,N,K]^T, dgrad dY . W, wgrad dY^T . x (the
                 offsets split M, the contraction: K-grouped)
  grouped_fp8    torch._scaled_grouped_mm, e4m3 with rowwise scales, fprop,
                 each expert's rows padded to 16 (where this torch has it;
                 else "n/a" and why; CUDA only)
  loop_bf16      one torch.matmul per expert (E launches): the per-expert
                 path's GEMMs
Each: median of 20 repetitions between CUDA events after 3 warm-ups, on
random inputs (bench_gemm_gpu's distribution), checked first against
torch.matmul per expert on two experts. Then, given bench_grouped_gpu's
JSONL (and bench_gemm_gpu's for the dense GEMMs of the same M), one line
per configuration: precc's grouped fprop, dgrad, wgrad beside
torch._grouped_mm (bf16 recipe), the dense precc fprop of the same total M
(#29's target: grouped fprop within 10 %, >= 0.9x) and, at DeepGEMM's
shapes, its published figures (deepseek_v3 recipe, >= 0.9x).

  python3 bench/gemm/grouped_ref.py [GROUPED_JSONL] [--dense GEMM_JSONL]
        [--json OUT] [--tokens 4096,16384] [--budget SECONDS]
  python3 bench/gemm/grouped_ref.py --dry-run   on CPU: the configurations,
        the routing, the ops' semantics at small shapes where this torch
        runs _grouped_mm on the CPU, and the device time budget; no timing

torch._grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None)
(aten/src/ATen/native/native_functions.yaml, "_grouped_mm"; the schema is
printed from the installed torch at start): 2-D x 3-D with int32 END
offsets over mat_a's rows (m-grouped), 2-D x 2-D with offsets over the
contraction (k-grouped).
"""
import json
import math
import os
import re
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from gemm_model import route   # noqa: E402  (bench_grouped_gpu's routing)
from torch_ref import REPS, WARMUP, rand, timed   # noqa: E402  (the dense references' timing, inputs)
TOKENS = (4096, 16384)

# DeepGEMM's published figures, H800, FP8 1x128 x 128x128 (deepseek_v3's
# recipe), TFLOP/s. m-grouped contiguous layout (fprop), (groups, rows per
# group, N, K): the README's "Grouped GEMMs for MoE models (contiguous
# layout)" table as released (deepseek-ai/DeepGEMM, Feb 2025; later READMEs
# dropped the table). k-grouped wgrad, (groups, dW rows, dW cols, rows per
# group): PR #95's released figures as quoted in deepseek-ai/DeepGEMM#107
# (which measured 9-18 % less on an H200).
DEEPGEMM_FPROP = {(4, 8192, 4096, 7168): 1297, (4, 8192, 7168, 2048): 1099,
                  (8, 4096, 4096, 7168): 1288, (8, 4096, 7168, 2048): 1093}
DEEPGEMM_WGRAD = {(4, 7168, 4096, 4096): 939, (4, 2048, 7168, 4096): 900,
                  (4, 7168, 4096, 8192): 1044, (4, 2048, 7168, 8192): 1033,
                  (8, 7168, 4096, 4096): 942}
E4M3_MAX = 448.0


def blocks():
    """[(name, experts, topk, tokens, [(proj, K, N)])] of moe_shapes.lua"""
    text = open(os.path.join(HERE, "moe_shapes.lua")).read()
    body = text[text.index("local blocks"):text.index("for _, b")]
    out = []
    heads = list(re.finditer(r'\{"(model\.layers\.\d+\.[^"]+)",\s*(\d+),', body))
    for i, h in enumerate(heads):
        seg = body[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(body)]
        name, experts = h.group(1), int(h.group(2))
        topk = int(re.search(r"_top(\d+)", name).group(1))
        fixed = re.search(r"_t(\d+)$", name)
        projs = [(p, int(k), int(n)) for p, k, n in re.findall(r'\{"(\w+)",\s*(\d+),\s*(\d+)\}', seg)]
        out.append((name, experts, topk, (int(fixed.group(1)),) if fixed else None, projs))
    return out


def configs(tokens=TOKENS):
    """every (block, experts, topk, T, routing, N, K, counts), one per
    distinct expert shape of a block"""
    out = []
    for name, ne, topk, fixed, projs in blocks():
        seen = set()
        for proj, k, n in projs:
            if (n, k) in seen:
                continue
            seen.add((n, k))
            for t in fixed or tokens:
                for skewed in ((False,) if fixed else (False, True)):
                    m = t * topk
                    out.append({"block": name, "proj": proj, "experts": ne, "topk": topk, "tokens": t,
                                "routing": "skewed" if skewed else "balanced", "m": m, "n": n, "k": k,
                                "counts": route(m, ne, skewed)})
    return out


def grouped_ops(x, w, dy, offs):
    """fprop, dgrad, wgrad through torch._grouped_mm: x [M,K], w [E,N,K],
    dy [M,N], offs int32 END offsets [E]. Every operand is given with its
    contraction dimension contiguous (CUTLASS's K-major layout), the
    transposes made once here, outside the timed calls, as precc's GEMM
    steps read the transposes its quantize steps wrote: fprop x . W^T,
    dgrad dY . W (W^T stored [E,K,N]), wgrad dY^T . x over each expert's
    rows (dY^T [N,M] and x^T [K,M] stored)."""
    wk = w.transpose(1, 2).contiguous()       # [E, K, N]

    def t16(a):   # a^T, its rows 16-byte aligned (M padded to 8 elements)
        m = a.shape[0]
        out = a.new_zeros((a.shape[1], -(-m // 8) * 8))
        out[:, :m] = a.t()
        return out[:, :m]
    dyt, xt = t16(dy), t16(x)
    return {"fprop": lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs),
            "dgrad": lambda: torch._grouped_mm(dy, wk.transpose(-2, -1), offs=offs),
            "wgrad": lambda: torch._grouped_mm(dyt, xt.t(), offs=offs)}


def check_ops(ops, x, w, dy, counts, experts):
    """each op against torch.matmul on the rows of the given experts:
    max relative error per op"""
    out = {k: f() for k, f in ops.items()}
    start = [0]
    for c in counts:
        start.append(start[-1] + c)
    err = {}
    for what, got in out.items():
        worst = 0.0
        for e in experts:
            lo, hi = start[e], start[e + 1]
            if what == "fprop":
                ref, g = x[lo:hi].float() @ w[e].float().t(), got[lo:hi]
            elif what == "dgrad":
                ref, g = dy[lo:hi].float() @ w[e].float(), got[lo:hi]
            else:
                ref, g = dy[lo:hi].float().t() @ x[lo:hi].float(), got[e]
            den = ref.norm().item()
            worst = max(worst, (g.float() - ref).norm().item() / den if den else (g.float() - ref).norm().item())
        err[what] = worst
    return err


def schema():
    try:
        return str(torch.ops.aten._grouped_mm.default._schema)
    except Exception as e:  # a torch without it
        return "no aten::_grouped_mm (%s)" % str(e).splitlines()[0][:80]


def estimate(cfgs):
    """seconds of device time: every op (20 + 3 + 1 runs) at a pessimistic
    300 TFLOP/s, the E-launch loop at 10 us a launch more"""
    t = 0.0
    for c in cfgs:
        flop = 2.0 * c["m"] * c["n"] * c["k"]
        t += (REPS + WARMUP + 1) * (4 * flop / 300e12 + c["experts"] * 10e-6)
    return t


def dry_run(cfgs):
    print("grouped_ref.py --dry-run: torch %s, %s" % (torch.__version__, schema()))
    print("%-40s %5s %4s %6s %-8s %7s %6s %6s  %s" % ("block", "E", "top", "T", "routing", "M", "N", "K",
                                                      "rows per expert (min/max)"))
    for c in cfgs:
        assert sum(c["counts"]) == c["m"] and len(c["counts"]) == c["experts"]
        print("%-40s %5d %4d %6d %-8s %7d %6d %6d  %d/%d" % (c["block"], c["experts"], c["topk"], c["tokens"],
                                                            c["routing"], c["m"], c["n"], c["k"],
                                                            min(c["counts"]), max(c["counts"])))
    # the ops' semantics at a small shape, on the CPU where this torch has it
    torch.manual_seed(0)
    counts = route(37, 4, True)   # M not a multiple of 8: the transposes padded
    x, w, dy = rand((37, 32), "cpu"), rand((4, 16, 32), "cpu"), rand((37, 16), "cpu")
    offs = torch.tensor(counts, dtype=torch.int32).cumsum(0).to(torch.int32)
    try:
        err = check_ops(grouped_ops(x, w, dy, offs), x, w, dy, counts, range(4))
        bad = {k: v for k, v in err.items() if not v < 1e-2}
        print("dry-run: torch._grouped_mm on the CPU, 4 experts %s rows: fprop/dgrad/wgrad against "
              "torch.matmul per expert: %s" % (counts, ", ".join("%s %.1e" % kv for kv in err.items())))
        if bad:
            print("dry-run: FAIL: %s" % bad)
            return 1
    except Exception as e:
        print("dry-run: torch._grouped_mm does not run on the CPU here (%s): its calls are checked on "
              "the GPU" % str(e).splitlines()[0][:120])
    # measure() and the side-by-side table on the CPU, timing stubbed (1 ms
    # a call): the code paths a lease runs, at a small shape
    global timed
    real = timed
    timed = lambda fn, reps=REPS, warmup=WARMUP: (fn(), 1.0)[1]
    try:
        c = {"block": "model.layers.9.dry_top2", "proj": "w1", "experts": 4, "topk": 2, "tokens": 50,
             "routing": "skewed", "m": 100, "n": 32, "k": 64, "counts": route(100, 4, True)}
        r = measure(c, "cpu")
    finally:
        timed = real
    r["config"] = {k: v for k, v in c.items() if k != "counts"}
    fake = [{"recipe": rec, "experts": 4, "tokens": 50, "routing": "skewed", "n": 32, "k": 64, "what": w,
             "tflops": 1.0, "ok": True} for rec in ("bf16", "deepseek_v3") for w in ("fprop", "dgrad", "wgrad")]
    side_by_side({"dry": r}, fake, [{"recipe": "bf16", "m": 100, "n": 32, "k": 64, "what": "fprop",
                                     "tflops": 2.0, "ok": True}])
    if any("tflops" not in r[x] for x in ("grouped_bf16_fprop", "grouped_bf16_dgrad", "grouped_bf16_wgrad",
                                          "loop_bf16_fprop")):
        print("dry-run: FAIL: measure() on the CPU: %s" % r)
        return 1
    print("dry-run: %d configurations, est. %.0f s of device time (at 300 TFLOP/s)" % (len(cfgs), estimate(cfgs)))
    return 0


def measure(c, dev):
    torch.manual_seed(1)
    m, n, k, ne = c["m"], c["n"], c["k"], c["experts"]
    x, w, dy = rand((m, k), dev), rand((ne, n, k), dev), rand((m, n), dev)
    offs = torch.tensor(c["counts"], dtype=torch.int64).cumsum(0).to(torch.int32).to(dev)
    flop = 2.0 * m * n * k
    out = {}

    def rec(name, fn):
        try:
            ms = timed(fn)
            out[name] = {"ms": ms, "tflops": flop / ms / 1e9}
        except Exception as e:
            out[name] = {"error": str(e).splitlines()[0][:160]}

    ops = grouped_ops(x, w, dy, offs)
    busy = [e for e in range(ne) if c["counts"][e]]
    try:
        err = check_ops(ops, x, w, dy, c["counts"], [busy[0], busy[-1]])
        out["check"] = err
    except Exception as e:
        out["check"] = {"error": str(e).splitlines()[0][:160]}
    for what, fn in ops.items():
        rec("grouped_bf16_" + what, fn)
    # fp8 rowwise: x per row, W per output row of each expert; each
    # expert's rows padded to 16 (CUTLASS's alignment), zero rows between
    pc = [-(-cnt // 16) * 16 for cnt in c["counts"]]
    rows = torch.cat([torch.arange(s0, s0 + cnt, device=dev) for s0, cnt in
                      zip([sum(pc[:e]) for e in range(ne)], c["counts"]) if cnt])
    xp = x.new_zeros((sum(pc), k)).index_copy(0, rows, x)
    sa = xp.abs().amax(1).float().clamp(min=1e-12) / E4M3_MAX
    sb = w.abs().amax(2).float().clamp(min=1e-12) / E4M3_MAX
    xq = (xp.float() / sa[:, None]).to(torch.float8_e4m3fn)
    wq = torch.empty(w.shape, dtype=torch.float8_e4m3fn, device=dev)
    for e in range(ne):   # one expert at a time: no f32 copy of every W (15 GB)
        wq[e] = (w[e].float() / sb[e][:, None]).to(torch.float8_e4m3fn)
    offp = torch.tensor(pc, dtype=torch.int64).cumsum(0).to(torch.int32).to(dev)
    if hasattr(torch, "_scaled_grouped_mm"):
        rec("grouped_fp8_fprop", lambda: torch._scaled_grouped_mm(
            xq, wq.transpose(-2, -1), sa, sb, offs=offp, out_dtype=torch.bfloat16))
    else:
        out["grouped_fp8_fprop"] = {"error": "this torch has no _scaled_grouped_mm"}
    starts = [0]
    for cnt in c["counts"]:
        starts.append(starts[-1] + cnt)

    def loop():
        for e in busy:
            torch.matmul(x[starts[e]:starts[e + 1]], w[e].t())
    rec("loop_bf16_fprop", loop)
    del x, w, dy, xp, xq, wq
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


def fmt(v, w=7):
    return ("%*.1f" % (w, v)) if isinstance(v, (int, float)) else "%*s" % (w, "n/a")


def ratio(a, b):
    return "%5.2fx" % (a / b) if a and b else "%6s" % "-"


def side_by_side(refs, grouped, dense):
    """one line per configuration and recipe: precc beside the references"""
    g = {}
    for r in grouped:
        g[(r["recipe"], r["experts"], r["tokens"], r["routing"], r["n"], r["k"], r["what"])] = r
    d = {(r["recipe"], r["m"], r["n"], r["k"], r["what"]): r for r in dense}
    recipes = sorted({r["recipe"] for r in grouped})
    print("\nprecc's grouped GEMMs against the references, same run (TFLOP/s on the routed rows; "
          "ratio = precc / reference)")
    print("%-12s %5s %6s %-8s %6s %6s | %7s %7s %7s | %7s %7s %7s | %-16s | %-16s | %s" % (
        "recipe", "E", "T", "routing", "N", "K", "fprop", "dgrad", "wgrad", "torch f", "torch d", "torch w",
        "dense fprop", "DeepGEMM fprop", "DeepGEMM wgrad"))
    met = {"dense": [], "deepgemm": [], "torch": []}
    for key, ref in refs.items():
        c = ref["config"]
        for rec in recipes:
            p = {w: g.get((rec, c["experts"], c["tokens"], c["routing"], c["n"], c["k"], w)) for w in
                 ("fprop", "dgrad", "wgrad")}
            if not any(p.values()):
                continue
            pt = {w: (v["tflops"] if v and v.get("ok", True) else None) for w, v in p.items()}
            tt = {w: ref.get("grouped_bf16_" + w, {}).get("tflops") for w in ("fprop", "dgrad", "wgrad")}
            dn = d.get((rec, c["m"], c["n"], c["k"], "fprop"))
            dt = dn["tflops"] if dn and dn.get("ok", True) else None
            per = c["m"] // c["experts"] if c["routing"] == "balanced" else None
            dgf = DEEPGEMM_FPROP.get((c["experts"], per, c["n"], c["k"])) if rec == "deepseek_v3" else None
            dgw = DEEPGEMM_WGRAD.get((c["experts"], c["n"], c["k"], per)) if rec == "deepseek_v3" else None
            if pt["fprop"] and dt:
                met["dense"].append(pt["fprop"] / dt)
            if dgf and pt["fprop"]:
                met["deepgemm"].append(pt["fprop"] / dgf)
            if dgw and pt["wgrad"]:
                met["deepgemm"].append(pt["wgrad"] / dgw)
            if rec == "bf16" and pt["fprop"] and tt["fprop"]:
                met["torch"].append(pt["fprop"] / tt["fprop"])
            print("%-12s %5d %6d %-8s %6d %6d | %s %s %s | %s %s %s | %s %s | %s | %s" % (
                rec, c["experts"], c["tokens"], c["routing"], c["n"], c["k"],
                fmt(pt["fprop"]), fmt(pt["dgrad"]), fmt(pt["wgrad"]),
                fmt(tt["fprop"]), fmt(tt["dgrad"]), fmt(tt["wgrad"]),
                fmt(dt), ratio(pt["fprop"], dt),
                ("%4d %s" % (dgf, ratio(pt["fprop"], dgf))) if dgf else "%16s" % "",
                ("%4d %s" % (dgw, ratio(pt["wgrad"], dgw))) if dgw else ""))
    if met["dense"]:
        lo = min(met["dense"])
        print("#29: grouped fprop / dense fprop of the same M: min %.2fx, median %.2fx (target >= 0.9x) %s"
              % (lo, statistics.median(met["dense"]), "MET" if lo >= 0.9 else "missed"))
    if met["deepgemm"]:
        lo = min(met["deepgemm"])
        print("#29: deepseek_v3 grouped / DeepGEMM's published H800 figures: min %.2fx (target >= 0.9x) %s"
              % (lo, "MET" if lo >= 0.9 else "missed"))
    if met["torch"]:
        print("bf16 grouped fprop / torch._grouped_mm: median %.2fx" % statistics.median(met["torch"]))


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("grouped", nargs="?", help="bench_grouped_gpu's JSONL")
    ap.add_argument("--dense", help="bench_gemm_gpu's JSONL (the dense GEMMs of moe_shapes.lua)")
    ap.add_argument("--json", help="the references as JSON")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    ap.add_argument("--budget", type=float, default=0, help="stop starting configurations past it")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    try:
        tokens = tuple(int(t) for t in a.tokens.split(","))
        if any(t < 1 for t in tokens):
            raise ValueError
    except ValueError:
        ap.error("--tokens: a comma-separated list of token counts, not %r" % a.tokens)
    cfgs = configs(tokens)
    if a.dry_run:
        return dry_run(cfgs)
    if not torch.cuda.is_available():
        print("grouped_ref.py: SKIP: torch sees no CUDA device")
        return 77
    import time
    t0 = time.time()
    dev = torch.device("cuda")
    print("grouped_ref.py: torch %s, %s, %s; median of %d after %d warm-ups (TFLOP/s)"
          % (torch.__version__, torch.cuda.get_device_name(), schema(), REPS, WARMUP))
    cols = ["grouped_bf16_fprop", "grouped_bf16_dgrad", "grouped_bf16_wgrad", "grouped_fp8_fprop",
            "loop_bf16_fprop"]
    print("%5s %6s %-8s %6s %6s " % ("E", "T", "routing", "N", "K") + " ".join("%18s" % c for c in cols)
          + "  check (rel. error)")
    refs = {}
    for c in cfgs:
        if a.budget and time.time() - t0 > a.budget:
            print("grouped_ref.py: budget spent: the other configurations not run")
            break
        r = measure(c, dev)
        r["config"] = {k: v for k, v in c.items() if k != "counts"}
        key = "%s/%s/%d/%s" % (c["block"], c["proj"], c["tokens"], c["routing"])
        refs[key] = r
        chk = r["check"]
        print("%5d %6d %-8s %6d %6d " % (c["experts"], c["tokens"], c["routing"], c["n"], c["k"])
              + " ".join("%18s" % ("%.1f" % r[x]["tflops"] if "tflops" in r[x] else "n/a") for x in cols)
              + "  " + (", ".join("%s %.1e" % kv for kv in chk.items()) if "error" not in chk
                        else "n/a: " + chk["error"]), flush=True)
    for x in cols:
        for e in sorted({r[x]["error"] for r in refs.values() if "error" in r.get(x, {})}):
            print("  %s: n/a: %s" % (x, e))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(refs, f, indent=1)
    if a.grouped and os.path.exists(a.grouped):
        grouped = [json.loads(l) for l in open(a.grouped) if l.strip()]
        dense = [json.loads(l) for l in open(a.dense) if l.strip()] if a.dense and os.path.exists(a.dense) else []
        side_by_side(refs, grouped, dense)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
