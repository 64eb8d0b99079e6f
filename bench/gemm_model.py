#!/usr/bin/env python3
"""gemm_model.py — issue 28's cost model of the sm_90a wgmma GEMM, from the
kernel's SASS (bench/sass_audit.py) and its chosen shape, fitted to the
H200 table of bench/RESULTS.md ("First runs on a GPU", 2026-12-04).

Clocks of one GEMM on one SM (a persistent CTA per SM; H200, 132 SMs):

  clocks = waves * (kt * max(T / e / c1, I * W * a, L2 / beta) + E * acc / 64)

  waves  = ceil(tiles / 132), tiles = ceil(rows / bm) * ceil(cols / bn)
  kt     = K tiles of 128 bytes (K * element bytes / 128)
  T      = bm * bn / 32: tensor-clocks of one K tile at the dense rate
           (512 for 128 x 128; fp8 and bf16 alike per 128 bytes of K)
  c1     = 0.85 with one consumer warpgroup (64-row tiles), else 1 (an
           estimate, schedule.c's ONE_CONSUMER; not fitted: no such row ran)
  I      = the K loop's SASS instructions per K tile (the audit), W = the
           consumer warps per SM sub-partition (= consumer warpgroups)
  L2     = (bm + bn) * 128 bytes a K tile brings to the SM, beta = 46.6
           B/clk/SM (DeepGEMM's l2_bandwidth_per_cycle, as schedule.c; not
           fitted: every measured kernel had the same 128 x 128 tile); in
           clusters of cm CTAs along M (tile=BMxBN:2x1, TMA multicast of
           B) each CTA loads bn / cm of B's rows: (bm + bn / cm) * 128, and
           tiles = ceil(rows / (cm bm)) * cm * ceil(cols / bn) (a cluster's
           CTAs past M idle)
  acc    = f32 accumulators per consumer thread (bm * bn / 128 / consumers)
  TFLOP/s = 2 M N K / (clocks / f), f = 1.83 GHz (1979 TFLOP/s dense fp8
           = 132 SMs * 8192 FLOP/clk * f)

Three constants, fitted by least squares on the relative time error over
the 42 measured fprop rows (tensorwise, blockwise, bf16; 14 shapes each),
each row with the SASS of the kernel that ran (commit c2c6caa's build:
128 x 128, 4 stages, 2 consumers, an STG epilogue; the K loop's
instructions per K tile: 69 for tensorwise and bf16, 650-786 for
blockwise's 34 scale LDGs): e (the mainloop's share of the tensor rate),
a (issue clocks per K-loop instruction per warp: > 1 is latency the
warps do not hide), E (the epilogue's clocks per 64 accumulators a thread
holds). E is closed-form given e and a; e and a by a grid search.

  python3 bench/gemm_model.py --fit [--check PCT]   the fit and its error per row
        (--check: exit 1 when a row's error is over PCT %)
  python3 bench/gemm_model.py --predict AUDIT.json... [--label L] [--e E]
        [--hide-epilogue]
        [--cluster]
        predictions at bench/gemm/shapes.lua for the kernels the audit
        JSONs (sass_audit.py --json, built from shapes.lua) describe;
        --cluster: as if every bf16 and tensorwise wgmma GEMM ran in
        clusters of 2 along M (the kernels the cluster takes:
        k_gemm_sm90.c's cluster_check; blockwise keeps 1x1)
  python3 bench/gemm_model.py --precc build/precc   build shapes.lua for
        bf16, current_tensorwise, deepseek_v3 and nvfp4, audit, predict
        (nvfp4: I is 4 chunk loops of 16 K a 64-K bf16 K tile, plus its
        producer warp's stage loop, producer_e2m1; not fitted: no NVFP4
        row ran on a GPU)
  python3 bench/gemm_model.py --write PRED.json AUDIT.json...   predictions
        by recipe, shape and GEMM (and kernel name) for lease_gemm.sh
  python3 bench/gemm_model.py --grouped AUDIT.json...   PREDICTED TFLOP/s of the
        grouped GEMMs the audit JSONs describe (per expert tile and wave,
        balanced and skewed routing; n/m for the mma.sync family)
  python3 bench/gemm_model.py --grouped-check   the grouped prediction
        against the dense one where they must agree
  python3 bench/gemm_model.py --compare GEMM.jsonl PRED.json [TORCH.json]
        on the GPU: each measured row of bench_gemm_gpu beside its
        prediction, then #28's targets
"""
import json
import math
import os
import re
import statistics
import sys

SMS = 132
F_HZ = 1979e12 / (SMS * 8192)
BETA = 8e6 / 1.3e3 / SMS
ONE_CONSUMER = 0.85
PEAK = {1: 1979.0, 2: 989.0}

# The H200 table (bench/RESULTS.md, lease 2 of 2026-12-04): M, N, K, then
# TFLOP/s: precc tensorwise, cuBLASLt tensorwise, precc blockwise, cuBLASLt
# blockwise, precc bf16, torch.matmul bf16 (all fprop).
MEASURED = [
    (8192, 8192, 8192, 1181, 1469, 439, 1345, 637, 797),
    (4096, 2112, 7168, 882, 1194, 275, 1045, 530, 781),
    (4096, 24576, 1536, 596, 1252, 263, 1099, 451, 755),
    (4096, 7168, 16384, 1184, 1380, 460, 1131, 691, 808),
    (4096, 4096, 7168, 1105, 1342, 334, 1276, 622, 765),
    (4096, 7168, 2048, 679, 1068, 348, 1014, 463, 684),
    (4096, 14336, 4096, 997, 1390, 406, 1140, 588, 795),
    (16384, 14336, 4096, 1009, 1282, 422, 1094, 607, 727),
    (4096, 4096, 14336, 1260, 1376, 348, 1143, 687, 746),
    (16384, 4096, 14336, 1288, 1336, 352, 875, 703, 723),
    (4096, 28672, 8192, 1179, 1305, 443, 1100, 633, 749),
    (16384, 28672, 8192, 1077, 1250, 438, 1103, 581, 690),
    (4096, 8192, 28672, 1352, 1355, 349, 1083, 679, 732),
    (16384, 8192, 28672, 1213, 1184, 360, 1140, 623, 675),
]
# The K loop's SASS instructions per K tile of the fprop kernels that ran
# (sass_audit.py on c2c6caa's build of shapes.lua; every one 128 x 128,
# 168 registers, 64 STG): blockwise by (N, K)
RAN_LOOP = {"current_tensorwise": 69, "bf16": 69}
RAN_LOOP_BLOCKWISE = {(2112, 7168): 786, (4096, 7168): 786, (4096, 14336): 786, (7168, 2048): 682,
                      (7168, 16384): 650, (8192, 8192): 682, (8192, 28672): 786, (14336, 4096): 682,
                      (24576, 1536): 785, (28672, 8192): 682}
RECIPE_COLS = {"current_tensorwise": 3, "deepseek_v3": 5, "bf16": 7}   # MEASURED columns
EB = {"current_tensorwise": 1, "deepseek_v3": 1, "bf16": 2,
      "nvfp4": 2}   # NVFP4: the K tile is the producer's bf16 stage (64 K)
# NVFP4 (e2m1, the audit's "upcast"): promoted every 16 K (its scale blocks),
# so the K loop the audit counts is a chunk loop, CHUNKS_E2M1 a 64-K stage;
# its producer warpgroup (one warp per sub-partition, beside the consumer
# warps) runs the stage loop: the upcast loops 32 rows an iteration
E2M1_P = 16
CHUNKS_E2M1 = 64 // E2M1_P


def producer_e2m1(up, bm, bn):
    """a producer warp's instructions per stage: the stage loop's own plus
    the A and B upcast loops, ceil(rows / 32) iterations each"""
    inner = up["inner"] + [0] * (2 - len(up["inner"]))
    return up["stage"] - sum(inner) + inner[0] * math.ceil(bm / 32) + inner[1] * math.ceil(bn / 32)


def ran_kernel(recipe, n, k):
    loop = RAN_LOOP_BLOCKWISE[(n, k)] if recipe == "deepseek_v3" else RAN_LOOP[recipe]
    return {"bm": 128, "bn": 128, "consumers": 2, "loop": loop}


def cluster_m(kern):
    """CTAs of a cluster along M: the audit's cluster column "2x1", else 1"""
    m = re.match(r"(\d+)x1$", str(kern.get("cluster") or "1x1"))
    return int(m.group(1)) if m else 1


def parts(kern, rows, cols, red, eb, c):
    """(waves, kt, per-K-tile clocks, epilogue clocks per tile, which bound)"""
    bm, bn, cons = kern["bm"], kern["bn"], kern["consumers"]
    cm = cluster_m(kern)
    tiles = math.ceil(rows / (bm * cm)) * cm * math.ceil(cols / bn)
    waves = math.ceil(tiles / SMS)
    kt = math.ceil(red * eb / 128)
    issue, l2 = kern["loop"] * cons, (bm + bn) * 128
    if kern.get("upcast"):
        # e2m1: the stage's chunks and the producer warp on each SMSP; from
        # L2 half a byte a code and an e4m3 scale per 16 codes
        issue = CHUNKS_E2M1 * kern["loop"] * cons + producer_e2m1(kern["upcast"], bm, bn)
        l2 = (bm + bn) * (64 // 2 + 64 // E2M1_P)
    terms = {"tensor": bm * bn / 32 / c["e"] / (ONE_CONSUMER if cons == 1 else 1),
             "issue": issue * c["a"],
             "l2": (l2 if kern.get("upcast") else (bm + bn / cm) * 128) / BETA}
    bound = max(terms, key=terms.get)
    acc = bm * bn / 128 / cons
    return waves, kt, terms[bound], c["E"] * acc / 64, bound


def clocks(kern, rows, cols, red, eb, c):
    waves, kt, per_k, epi, _ = parts(kern, rows, cols, red, eb, c)
    return waves * (kt * per_k + epi)


def tflops(kern, rows, cols, red, eb, c):
    return 2.0 * rows * cols * red / (clocks(kern, rows, cols, red, eb, c) / F_HZ) / 1e12


def fit_rows():
    out = []
    for r in MEASURED:
        m, n, k = r[:3]
        for rec, col in RECIPE_COLS.items():
            out.append((rec, m, n, k, r[col]))
    return out


def fit_at(rows, e, a):
    """The squared relative error of the model at e and a over rows, with
    the epilogue constant E that minimises it (t_pred = A + E * B, linear in
    E), as (sse, E)."""
    c = {"e": e, "a": a, "E": 0.0}
    num = den = 0.0
    ab = []
    for rec, m, n, k, tf in rows:
        kern = ran_kernel(rec, n, k)
        waves, kt, per_k, _, _ = parts(kern, m, n, k, EB[rec], c)
        t = 2.0 * m * n * k / (tf * 1e12) * F_HZ
        A = waves * kt * per_k
        B = waves * (kern["bm"] * kern["bn"] / 128 / kern["consumers"]) / 64
        ab.append((A / t, B / t))
        num += B / t * (1 - A / t)
        den += (B / t) ** 2
    E = max(0.0, num / den)
    return sum((x + E * y - 1) ** 2 for x, y in ab), E


def fit():
    rows = fit_rows()
    best = None
    for ie in range(40, 101):
        for ia in range(50, 301, 2):
            e, a = ie / 100, ia / 100
            sse, E = fit_at(rows, e, a)
            if best is None or sse < best[0]:
                best = (sse, {"e": e, "a": a, "E": E})
    # refine e and a on a finer grid around the coarse best
    sse, c0 = best
    for ie in range(-10, 11):
        for ia in range(-10, 11):
            e, a = c0["e"] + ie / 1000, c0["a"] + ia / 500
            if e <= 0 or a <= 0:
                continue
            s, E = fit_at(rows, e, a)
            if s < best[0]:
                best = (s, {"e": e, "a": a, "E": E})
    return best[1]


# The constants of the last fit (python3 bench/gemm_model.py --fit prints
# them again; --predict uses these)
CONSTANTS = None


def constants():
    global CONSTANTS
    if CONSTANTS is None:
        CONSTANTS = fit()
    return CONSTANTS


def report_fit():
    c = constants()
    print("gemm_model: fitted to %d H200 fprop rows (bench/RESULTS.md, 2026-12-04):" % len(fit_rows()))
    print("  e = %.3f (mainloop share of the tensor rate), a = %.3f (issue clocks per K-loop instruction"
          " per warp), E = %.0f clocks per 64 accumulators a consumer thread holds (%.0f per 128x128 tile)"
          % (c["e"], c["a"], c["E"], c["E"]))
    print("| recipe | M | N | K | measured | model | error | bound |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    errs = {}
    for rec, m, n, k, tf in fit_rows():
        kern = ran_kernel(rec, n, k)
        p = tflops(kern, m, n, k, EB[rec], c)
        err = 100 * (p - tf) / tf
        errs.setdefault(rec, []).append(abs(err))
        print("| %s | %d | %d | %d | %d | %.0f | %+.1f %% | %s |"
              % (rec, m, n, k, tf, p, err, parts(kern, m, n, k, EB[rec], c)[4]))
    allerr = [x for v in errs.values() for x in v]
    for rec, v in errs.items():
        print("  %s: median |error| %.1f %%, max %.1f %%" % (rec, statistics.median(v), max(v)))
    print("  every measured kernel had the 128 x 128 tile, whose K tile needs 703 clocks of L2 feed at beta"
          " (%.1f B/clk/SM) against 512 / e of tensor time: the data bound e only below (e >= %.3f, where"
          " the two meet); predictions use the fit's e, the least it can be" % (BETA, 512 / (256 * 128 / BETA)))
    print("  all %d rows: median |error| %.1f %%, max %.1f %%, rms %.1f %%"
          % (len(allerr), statistics.median(allerr), max(allerr),
             math.sqrt(sum(x * x for x in allerr) / len(allerr))))
    return max(allerr)


def shapes():
    text = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gemm", "shapes.lua")).read()
    body = text[text.index("local shapes"):]
    return [tuple(int(v) for v in t) for t in re.findall(r"\{(\d+),\s*(\d+),\s*(\d+)\}", body)]


def gemm_dims(kind, m, n, k):
    """rows, cols, reduction of the GEMM kind of linear y[m,n] = x[m,k] w[n,k]^T"""
    return {"fprop": (m, n, k), "dgrad": (m, k, n), "wgrad": (n, k, m)}[kind]


def kernels_of(audit_rows):
    """{(recipe, kind, N, K): [kernel features]} from sass_audit --json rows
    of a shapes.lua build (N, K of the linear)."""
    out = {}
    for r in audit_rows:
        for lay in r.get("layers", []):
            mm = re.match(r"m(\d+)_n(\d+)_k(\d+)", lay)
            if not mm:
                continue
            n, k = int(mm.group(2)), int(mm.group(3))
            bm, bn = (int(v) for v in r["tile"].split("x"))
            kl = r.get("k_loop") or {}
            for kind in r["kinds"]:
                out.setdefault((r["recipe"], kind, n, k), []).append({
                    "bm": bm, "bn": bn, "consumers": r.get("consumers", 2 if bm > 64 else 1),
                    "loop": kl.get("instructions", 0), "wgmma": bool(r["gmma"]), "stages": r.get("stages"),
                    "kernel": r["kernel"], "regs": r["regs"], "m_min": r.get("m_min") or 0,
                    "cluster": r.get("cluster"), "upcast": r.get("upcast")})
    return out


def kernel_at(kerns, m):
    """the kernel the runtime launches at M: the m_variant with the largest
    m_min <= M (the base kernel has m_min 0)"""
    if not kerns:
        return None
    return max((x for x in kerns if x["m_min"] <= m), key=lambda x: x["m_min"], default=None)


def predict(audit_rows, c=None):
    """[{recipe, m, n, k, what, tflops, ...}] at every shape of shapes.lua"""
    c = dict(c or constants())
    if os.environ.get("GEMM_MODEL_E"):   # the sensitivity to e, which the fit bounds only below
        c["e"] = float(os.environ["GEMM_MODEL_E"])
    if os.environ.get("GEMM_MODEL_HIDE_EPILOGUE"):   # item 3's overlapped epilogue: E = 0
        c["E"] = 0.0
    ks = kernels_of(audit_rows)
    out = []
    for m, n, k in shapes():
        for rec in sorted({key[0] for key in ks}):
            for kind in ("fprop", "dgrad", "wgrad"):
                kern = kernel_at(ks.get((rec, kind, n, k)), m)
                if not kern:
                    continue
                if os.environ.get("GEMM_MODEL_CLUSTER") and kern["wgmma"] and rec != "deepseek_v3":
                    kern = dict(kern, cluster="2x1")
                rows, cols, red = gemm_dims(kind, m, n, k)
                p = {"recipe": rec, "m": m, "n": n, "k": k, "what": kind, "kernel": kern["kernel"],
                     "tile": "%dx%d" % (kern["bm"], kern["bn"])
                             + (":%dx1" % cluster_m(kern) if cluster_m(kern) > 1 else ""),
                     "stages": kern["stages"],
                     "loop": kern["loop"], "wgmma": kern["wgmma"]}
                if kern["wgmma"]:
                    p["tflops"] = round(tflops(kern, rows, cols, red, EB[rec], c), 1)
                    p["bound"] = parts(kern, rows, cols, red, EB[rec], c)[4]
                else:
                    p["tflops"] = None     # mma.sync: the model is of the wgmma family only
                out.append(p)
    return out


# ---- grouped GEMMs (issue 29): a prediction, per expert tile -------------

def route(m, ne, skewed):
    """Each expert's rows of M routed rows, as bench/bench_grouped_gpu.c
    routes them: balanced, or skewed (the first eighth of the experts, at
    least one, with 4 times the others' share); the remainder of the
    division to the first experts."""
    hot = max(1, ne // 8)
    wsum = 4 * hot + (ne - hot) if skewed else ne
    cnt = [m * (4 if skewed and e < hot else 1) // wsum for e in range(ne)]
    for e in range(m - sum(cnt)):
        cnt[e % ne] += 1
    return cnt


def grouped_clocks(kern, kind, counts, n, k, eb, c):
    """Clocks of a grouped GEMM of the wgmma family (a prediction): its
    tiles in the order the persistent kernel walks them (expert by expert;
    tile t on CTA t mod 132, the static stride of codegen's grouped and
    sm_90a schedulers), each tile the dense model's K loop and epilogue.
    m-grouped (fprop: expert e's rows x n over k; dgrad: rows x k over n):
    ceil(rows_e / bm) x ceil(cols / bn) tiles each. k-grouped (wgrad: dW_e
    [n, k] over expert e's rows): ceil(n / bm) x ceil(k / bn) tiles each,
    a K loop of rows_e (none for an expert without rows: its epilogue
    stores zeros). The busiest CTA's sum."""
    bm, bn = kern["bm"], kern["bn"]
    _, _, per_k, epi, _ = parts(kern, bm, bn, 128, eb, c)
    load = [0.0] * SMS
    t = 0
    for rows in counts:
        if kind == "wgrad":
            kt, nt = math.ceil(rows * eb / 128), math.ceil(n / bm) * math.ceil(k / bn)
        else:
            cols, red = (n, k) if kind == "fprop" else (k, n)
            kt, nt = math.ceil(red * eb / 128), math.ceil(rows / bm) * math.ceil(cols / bn)
        for _ in range(nt):
            load[t % SMS] += kt * per_k + epi
            t += 1
    return max(load)


def grouped_tflops(kern, kind, counts, n, k, eb, c=None):
    c = c or constants()
    clk = grouped_clocks(kern, kind, counts, n, k, eb, c)
    return 2.0 * sum(counts) * n * k / (clk / F_HZ) / 1e12 if clk else 0.0


def grouped_check():
    """The grouped prediction meets the dense one where they must agree:
    one expert with every row, and 8 experts whose rows fill whole tiles
    (for wgrad: the dense GEMM of the stacked dW [8 n, k] over one expert's
    rows); skewed routing is never faster. 0 or 1."""
    c = constants()
    kern = {"bm": 128, "bn": 128, "consumers": 2, "loop": 69}
    bad = 0
    for kind in ("fprop", "dgrad", "wgrad"):
        for counts in ([8192], [1024] * 8):
            m, n, k = sum(counts), 4096, 7168
            rows, cols, red = gemm_dims(kind, m, n, k)
            if kind == "wgrad":   # k-grouped: the experts' dW stacked, [E n, k] over one's rows
                rows, red = len(counts) * n, counts[0]
            dense, grouped = tflops(kern, rows, cols, red, 1, c), grouped_tflops(kern, kind, counts, n, k, 1, c)
            ok = abs(grouped - dense) <= 1e-9 * dense
            bad += not ok
            print("gemm_model: grouped %s, %d experts x %d rows: %.1f TFLOP/s, dense %.1f%s"
                  % (kind, len(counts), counts[0], grouped, dense, "" if ok else "  MISMATCH"))
        sk = grouped_tflops(kern, kind, route(8192, 8, True), 4096, 7168, 1, c)
        bal = grouped_tflops(kern, kind, route(8192, 8, False), 4096, 7168, 1, c)
        bad += sk > bal * (1 + 1e-9)
        print("gemm_model: grouped %s, 8 experts, skewed %.1f <= balanced %.1f TFLOP/s%s"
              % (kind, sk, bal, "" if sk <= bal * (1 + 1e-9) else "  WRONG"))
    return 1 if bad else 0


def predict_grouped(audit_rows, tokens=(4096, 16384)):
    """Predictions for the grouped GEMM kernels of sass_audit --json rows
    (those with "grouped": a build with expert groups), at T tokens x the
    group's top-k (its name's "_top8", else 2), balanced and skewed."""
    c = constants()
    out = []
    for r in audit_rows:
        g = r.get("grouped")
        if not g:
            continue
        name = ",".join(r.get("layers", []))
        tk = re.search(r"_top(\d+)", name)
        topk = int(tk.group(1)) if tk else 2
        fixed = re.search(r"_t(\d+)\.", name)
        eb = 2 if r.get("fmt") in ("bf16", "f16") else 1
        bm, bn = (int(v) for v in r["tile"].split("x"))
        kern = {"bm": bm, "bn": bn, "consumers": r.get("consumers", 2 if bm > 64 else 1),
                "loop": (r.get("k_loop") or {}).get("instructions", 0)}
        for t in ((int(fixed.group(1)),) if fixed else tokens):
            for skewed in (False, True):
                counts = route(t * topk, g["experts"], skewed)
                for kind in r["kinds"]:
                    p = {"recipe": r["recipe"], "group": name, "experts": g["experts"], "tokens": t,
                         "routing": "skewed" if skewed else "balanced", "n": g["n"], "k": g["k"],
                         "what": kind, "kernel": r["kernel"], "tile": r["tile"], "wgmma": bool(r["gmma"])}
                    p["tflops"] = round(grouped_tflops(kern, kind, counts, g["n"], g["k"], eb, c), 1) \
                        if r["gmma"] else None
                    out.append(p)
    return out


def print_grouped(pred):
    print("gemm_model: PREDICTED grouped GEMM TFLOP/s (the cost model, per expert tile and wave; "
          "not measured)")
    print("| recipe | group | E | T | routing | N | K | GEMM | tile | predicted |")
    print("|---|---|---:|---:|---|---:|---:|---|---|---:|")
    for p in pred:
        print("| %s | %s | %d | %d | %s | %d | %d | %s | %s | %s |" % (
            p["recipe"], p["group"], p["experts"], p["tokens"], p["routing"], p["n"], p["k"], p["what"],
            p["tile"], "%.0f" % p["tflops"] if p["tflops"] else "n/m (mma.sync: the model is of wgmma)"))


REFS = {}   # (M, N, K) -> (cuBLASLt tensorwise, cuBLASLt blockwise, torch.matmul) of the H200 run
for _r in MEASURED:
    REFS[_r[:3]] = {"tensorwise": _r[4], "blockwise": _r[6], "bf16": _r[8]}
REF_OF = {"current_tensorwise": "tensorwise", "deepseek_v3": "blockwise", "bf16": "bf16"}


def targets(pred, refs=REFS, label=""):
    """#28's GPU figures against predicted (or measured) rates: lines of text."""
    by = {(p["recipe"], p["m"], p["n"], p["k"], p["what"]): p.get("tflops") for p in pred}
    lines = []
    tw = [(by.get(("current_tensorwise",) + s + ("fprop",)), refs.get(s, {}).get("tensorwise")) for s in shapes()]
    ratios = sorted(a / b for a, b in tw if a and b)
    if ratios:
        med = statistics.median(ratios)
        lines.append("tensorwise fprop / cuBLASLt, median over %d shapes: %.2fx (target >= 1.0x) %s"
                     % (len(ratios), med, "MET" if med >= 1.0 else "missed"))
    t8 = by.get(("current_tensorwise", 8192, 8192, 8192, "fprop"))
    if t8:
        lines.append("tensorwise fprop 8192^3: %.0f TFLOP/s = %.0f %% of 1979 (target >= 75 %%) %s"
                     % (t8, 100 * t8 / 1979, "MET" if t8 >= 0.75 * 1979 else "missed"))
    b = by.get(("deepseek_v3", 4096, 7168, 16384, "fprop"))
    if b:
        lines.append("blockwise fprop 4096x7168x16384: %.0f TFLOP/s (target >= 1400) %s"
                     % (b, "MET" if b >= 1400 else "missed"))
    bw = sorted(a / r for a, r in ((by.get(("deepseek_v3",) + s + ("fprop",)), refs.get(s, {}).get("blockwise"))
                                   for s in shapes()) if a and r)
    if bw:
        lines.append("blockwise fprop / cuBLASLt blockwise, median: %.2fx (target >= 1.1x) %s"
                     % (statistics.median(bw), "MET" if statistics.median(bw) >= 1.1 else "missed"))
    bf = sorted(a / r for a, r in ((by.get(("bf16",) + s + ("fprop",)), refs.get(s, {}).get("bf16"))
                                   for s in shapes()) if a and r)
    if bf:
        lines.append("bf16 fprop / torch.matmul: median %.2fx, min %.2fx (target >= 0.95x) %s"
                     % (statistics.median(bf), bf[0], "MET" if bf[0] >= 0.95 else
                        "met at the median only" if statistics.median(bf) >= 0.95 else "missed"))
    for kind in ("fprop", "dgrad", "wgrad"):
        nv = sorted(by[("nvfp4",) + s + (kind,)] for s in shapes() if by.get(("nvfp4",) + s + (kind,)))
        if nv:
            lines.append("nvfp4 %s (on bf16 wgmma): median %.0f TFLOP/s = %.0f %% of bf16 peak (%.0f)"
                         % (kind, statistics.median(nv), 100 * statistics.median(nv) / PEAK[2], PEAK[2]))
    for rec in ("current_tensorwise", "deepseek_v3", "bf16"):
        for kind in ("dgrad", "wgrad"):
            rs = sorted(by[(rec,) + s + (kind,)] / by[(rec,) + s + ("fprop",)] for s in shapes()
                        if by.get((rec,) + s + (kind,)) and by.get((rec,) + s + ("fprop",)))
            if rs:
                lines.append("%s %s / fprop: min %.2fx, median %.2fx (target >= 0.9x) %s"
                             % (rec, kind, rs[0], statistics.median(rs), "MET" if rs[0] >= 0.9 else
                                "met at the median only" if statistics.median(rs) >= 0.9 else "missed"))
    return [(label + ": " if label else "") + x for x in lines]


def print_predictions(pred, label):
    print("\n%s: predicted TFLOP/s (H200), by GEMM" % label)
    print("| recipe | M | N | K | fprop tile | fprop | dgrad tile | dgrad | wgrad tile | wgrad | reference |")
    print("|---|---:|---:|---:|---|---:|---|---:|---|---:|---:|")
    by = {}
    for p in pred:
        by.setdefault((p["recipe"], p["m"], p["n"], p["k"]), {})[p["what"]] = p
    for (rec, m, n, k), g in by.items():
        cells = []
        for kind in ("fprop", "dgrad", "wgrad"):
            p = g.get(kind)
            if not p:
                cells += ["-", "-"]
            elif p["tflops"] is None:
                cells += [p["tile"] + " mma.sync", "n/m"]
            else:
                cells += ["%s/%s" % (p["tile"], p["stages"] or "-"), "%.0f" % p["tflops"]]
        ref = REFS.get((m, n, k), {}).get(REF_OF.get(rec, ""), "")
        print("| %s | %d | %d | %d | %s | %s |" % (rec, m, n, k, " | ".join(cells), ref))
    for line in targets(pred, label=label):
        print("  " + line)


def build_and_audit(precc, recipes=("bf16", "current_tensorwise", "deepseek_v3", "nvfp4")):
    import subprocess
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for rec in recipes:
            j = os.path.join(tmp, rec + ".json")
            subprocess.run([sys.executable, os.path.join(here, "sass_audit.py"), "--precc", precc,
                            "--recipes", rec, "--models", os.path.join(here, "gemm", "shapes.lua"),
                            "--json", j], stdout=subprocess.DEVNULL)
            if os.path.exists(j):
                rows += json.load(open(j))
    return rows


def compare(jsonl, predfile, torchfile=None):
    """bench_gemm_gpu's rows beside the predictions; #28's targets measured."""
    pred = json.load(open(predfile))
    pby = {(p["recipe"], p["m"], p["n"], p["k"], p["what"]): p for p in pred["rows"]}
    refs = dict(REFS)
    src = "the H200 run of 2026-12-04 (bench/RESULTS.md)"
    if torchfile and os.path.exists(torchfile):
        t = json.load(open(torchfile))
        refs = {}
        for key, v in t.items():
            m, n, k = (int(x) for x in key.split("x"))
            refs[(m, n, k)] = {c: v[c]["tflops"] for c in ("tensorwise", "blockwise", "bf16") if "tflops" in v.get(c, {})}
        src = "this run's torch_ref.py"
    print("gemm_model: measured beside predicted (model fitted %s; e %.3f, a %.3f, E %.0f)"
          % (pred.get("fitted", "?"), pred["constants"]["e"], pred["constants"]["a"], pred["constants"]["E"]))
    print("%-20s %6s %6s %6s %-6s %-22s %9s %9s %7s %s" % ("recipe", "M", "N", "K", "gemm", "tile/stages",
                                                         "measured", "predicted", "error", "kernel"))
    meas, errs = [], []
    for line in open(jsonl):
        r = json.loads(line)
        if r["what"] == "chain":
            continue
        key = (r["recipe"], r["m"], r["n"], r["k"], r["what"])
        p = pby.get(key, {})
        pt = p.get("tflops")
        stale = p and p.get("kernel") and p["kernel"] not in r.get("kernel", "")
        err = 100 * (pt - r["tflops"]) / r["tflops"] if pt and not stale else None
        if err is not None:
            errs.append(abs(err))
        meas.append(dict(r))
        print("%-20s %6d %6d %6d %-6s %-22s %9.1f %9s %7s %s%s"
              % (r["recipe"], r["m"], r["n"], r["k"], r["what"],
                 "%s/%s" % (p.get("tile", "?"), p.get("stages", "?")), r["tflops"],
                 "%.1f" % pt if pt else "n/m", "%+.1f%%" % err if err is not None else "-",
                 r.get("kernel", ""), "  (prediction of another kernel: stale)" if stale else ""))
    if errs:
        print("gemm_model: %d rows, |error| median %.1f %%, max %.1f %%"
              % (len(errs), statistics.median(errs), max(errs)))
    print("#28 targets, measured (references: %s):" % src)
    for line in targets(meas, refs):
        print("  " + line)
    print("#28 targets, predicted before the run:")
    for line in targets(pred["rows"]):
        print("  " + line)


def main(argv):
    if not argv or argv[0] == "--fit":
        worst = report_fit()
        if len(argv) > 2 and argv[1] == "--check":   # ctest: the fit's worst row within PCT
            return 0 if worst <= float(argv[2]) else 1
        return 0
    if argv[0] == "--grouped-check":
        return grouped_check()
    if argv[0] == "--grouped":
        rows = [r for f in argv[1:] for r in json.load(open(f))]
        print_grouped(predict_grouped(rows))
        return 0
    if argv[0] == "--compare":
        compare(argv[1], argv[2], argv[3] if len(argv) > 3 else None)
        return 0
    if argv[0] == "--write":
        rows = [r for f in argv[2:] for r in json.load(open(f))]
        c = constants()
        pred = predict(rows, c)
        json.dump({"constants": c, "fitted": "to the H200 table of 2026-12-04", "rows": pred},
                  open(argv[1], "w"), indent=1)
        print("gemm_model: %d predictions into %s" % (len(pred), argv[1]))
        return 0
    if argv[0] == "--predict":
        label = "predicted"
        files = argv[1:]
        if "--e" in files:
            i = files.index("--e")
            os.environ["GEMM_MODEL_E"] = files[i + 1]
            del files[i:i + 2]
        if "--hide-epilogue" in files:
            os.environ["GEMM_MODEL_HIDE_EPILOGUE"] = "1"
            files.remove("--hide-epilogue")
        if "--cluster" in files:
            os.environ["GEMM_MODEL_CLUSTER"] = "1"
            files.remove("--cluster")
        if "--label" in files:
            i = files.index("--label")
            label = files[i + 1]
            del files[i:i + 2]
        rows = [r for f in files for r in json.load(open(f))]
        print_predictions(predict(rows), label)
        return 0
    if argv[0] == "--precc":
        report_fit()
        rows = build_and_audit(argv[1])
        print_predictions(predict(rows), "this tree's kernels")
        # the lever of issue 28 §1: the same kernels in clusters of 2 along M
        os.environ["GEMM_MODEL_CLUSTER"] = "1"
        print_predictions(predict(rows), "the same, bf16 and tensorwise in clusters of 2x1 (multicast B)")
        del os.environ["GEMM_MODEL_CLUSTER"]
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
