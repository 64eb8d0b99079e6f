"""torch_ref.py — the GEMM benchmark's references, timed in the same run as
precc's kernels (bench/bench_gemm_gpu.c), and the side-by-side table.

For each shape of bench/gemm/shapes.lua (y[M,N] = x[M,K] w[N,K]^T):
  bf16        torch.matmul on bf16
  tensorwise  torch._scaled_mm, e4m3 x e4m3, one f32 scale each (cuBLASLt)
  rowwise     torch._scaled_mm, per-row scales of x, per-column of w^T
  blockwise   torch._scaled_mm with 1x128 (x) and 128x128 (w) scales,
              where this torch has it (else "n/a" and why)
  unfused     the chain a user writes without precc: amax op, scale and
              cast ops for x and w, then tensorwise _scaled_mm
Each: median of 20 repetitions between CUDA events after 3 warm-ups, on
random inputs. Then, when PRECC_JSONL (bench_gemm_gpu's output) is given,
one line per shape: precc's figure over the reference's, side by side:
  current_tensorwise fprop / tensorwise, rowwise fprop / rowwise,
  deepseek_v3 fprop / blockwise and / DeepGEMM's published H800 figure,
  bf16 fprop / torch.matmul, current_tensorwise chain / unfused.

  python3 bench/gemm/torch_ref.py [PRECC_JSONL] [--json OUT]
"""
import json
import os
import re
import sys

import torch

# DeepGEMM's README table (1x128 x 128x128 FP8, H800, M = 4096), TFLOP/s
DEEPGEMM_H800 = {(2112, 7168): 1009, (24576, 1536): 1125, (7168, 16384): 1426,
                 (4096, 7168): 1265, (7168, 2048): 1168}
E4M3_MAX = 448.0


def shapes():
    here = os.path.dirname(os.path.abspath(__file__))
    text = open(os.path.join(here, "shapes.lua")).read()
    body = text[text.index("local shapes"):]
    return [tuple(int(v) for v in t) for t in
            re.findall(r"\{(\d+),\s*(\d+),\s*(\d+)\}", body)]


REPS, WARMUP = 20, 3


def timed(fn, reps=REPS, warmup=WARMUP):
    for _ in range(warmup):
        fn()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    ev[0].record()
    for i in range(reps):
        fn()
        ev[i + 1].record()
    ev[-1].synchronize()
    ms = sorted(ev[i].elapsed_time(ev[i + 1]) for i in range(reps))
    return (ms[reps // 2 - 1] + ms[reps // 2]) / 2


def rand(shape, dev):
    # uniform in [-1, 1) times 2^e, e in -2..2, as bench_gemm_gpu draws
    e = torch.randint(-2, 3, shape, device=dev).float()
    return ((torch.rand(shape, device=dev) * 2 - 1) * torch.exp2(e)).bfloat16()


def measure(m, n, k, dev):
    x, w = rand((m, k), dev), rand((n, k), dev)
    flop = 2.0 * m * n * k
    out = {}

    def rec(name, fn):
        try:
            ms = timed(fn)
            out[name] = {"ms": ms, "tflops": flop / ms / 1e9}
        except Exception as e:  # a torch without this path: say why
            out[name] = {"error": str(e).splitlines()[0][:120]}

    rec("bf16", lambda: torch.matmul(x, w.t()))
    sx = (E4M3_MAX / x.abs().amax().float()).reshape(())
    sw = (E4M3_MAX / w.abs().amax().float()).reshape(())
    xq = (x.float() * sx).to(torch.float8_e4m3fn)
    wq = (w.float() * sw).to(torch.float8_e4m3fn)
    one = torch.ones((), device=dev)
    rec("tensorwise", lambda: torch._scaled_mm(xq, wq.t(), scale_a=one / sx,
                                               scale_b=one / sw, out_dtype=torch.bfloat16))
    ra = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / E4M3_MAX
    rb = w.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / E4M3_MAX
    xr = (x.float() / ra).to(torch.float8_e4m3fn)
    wr = (w.float() / rb).to(torch.float8_e4m3fn)
    rec("rowwise", lambda: torch._scaled_mm(xr, wr.t(), scale_a=ra, scale_b=rb.t(),
                                            out_dtype=torch.bfloat16))
    # 1x128 activations, 128x128 weights (DeepSeek-V3's recipe)
    ba = x.float().reshape(m, k // 128, 128).abs().amax(-1).clamp(min=1e-12) / E4M3_MAX
    xb = (x.float().reshape(m, k // 128, 128) / ba[..., None]).reshape(m, k)
    # 128x128 tiles of w: N need not be a multiple of 128 (2112): pad, then cut
    npad = -(-n // 128) * 128
    wp = torch.nn.functional.pad(w.float(), (0, 0, 0, npad - n))
    bb = wp.reshape(npad // 128, 128, k // 128, 128).abs().amax((1, 3)).clamp(min=1e-12) / E4M3_MAX
    wb = (wp.reshape(npad // 128, 128, k // 128, 128) / bb[:, None, :, None]).reshape(npad, k)[:n]
    del wp
    xb, wb = xb.to(torch.float8_e4m3fn), wb.to(torch.float8_e4m3fn)
    # cuBLASLt wants the 1x128 scales M-major (outer stride 1)
    ba_t = ba.t().contiguous().t()
    # which scale layouts this torch's checks take differs between versions:
    # the first that runs is timed, the errors of the others are kept
    errs = []
    for sa, sb in ((ba_t, bb.t()), (ba_t, bb.t().contiguous()), (ba, bb.t()),
                   (ba_t, bb)):
        rec("blockwise", lambda: torch._scaled_mm(xb, wb.t(), scale_a=sa, scale_b=sb,
                                                  out_dtype=torch.bfloat16))
        if "tflops" in out["blockwise"]:
            break
        errs.append(out["blockwise"]["error"])
    if "error" in out["blockwise"]:
        out["blockwise"]["error"] = " | ".join(errs)[:400]

    def unfused():
        a = (E4M3_MAX / x.abs().amax().float())
        b = (E4M3_MAX / w.abs().amax().float())
        qa = (x.float() * a).to(torch.float8_e4m3fn)
        qb = (w.float() * b).to(torch.float8_e4m3fn)
        return torch._scaled_mm(qa, qb.t(), scale_a=a.reciprocal(), scale_b=b.reciprocal(),
                                out_dtype=torch.bfloat16)
    rec("unfused", unfused)
    del x, w, xq, wq, xr, wr, xb, wb
    torch.cuda.empty_cache()
    return out


def fmt(v):
    return f"{v:7.1f}" if isinstance(v, (int, float)) else f"{'n/a':>7}"


def main():
    args = sys.argv[1:]
    jout = None
    if "--json" in args:
        i = args.index("--json")
        jout = args[i + 1]
        del args[i:i + 2]
    precc = {}
    if args and os.path.exists(args[0]):
        for line in open(args[0]):
            r = json.loads(line)
            precc[(r["recipe"], r["m"], r["n"], r["k"], r["what"])] = r
    if not torch.cuda.is_available():
        print("torch_ref.py: SKIP: torch sees no CUDA device")
        return 77
    dev = torch.device("cuda")
    print(f"torch_ref.py: torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          "median of 20 after 3 warm-ups (TFLOP/s)")
    refs = {}
    cols = ["bf16", "tensorwise", "rowwise", "blockwise", "unfused"]
    print(f"{'M':>6} {'N':>6} {'K':>6} " + " ".join(f"{c:>10}" for c in cols))
    for m, n, k in shapes():
        r = measure(m, n, k, dev)
        refs[(m, n, k)] = r
        print(f"{m:6d} {n:6d} {k:6d} " + " ".join(
            f"{r[c]['tflops']:10.1f}" if "tflops" in r[c] else f"{'n/a':>10}" for c in cols),
            flush=True)
    for c in cols:
        errs = {r[c]["error"] for r in refs.values() if "error" in r[c]}
        for e in errs:
            print(f"  {c}: n/a: {e}")
    if jout:
        with open(jout, "w") as f:
            json.dump({f"{m}x{n}x{k}": v for (m, n, k), v in refs.items()}, f, indent=1)
    if not precc:
        return 0

    def p(recipe, m, n, k, what="fprop"):
        r = precc.get((recipe, m, n, k, what))
        return r["tflops"] if r and r.get("ok", True) else None

    def ratio(a, b):
        return f"{a / b:5.2f}x" if a and b else f"{'-':>6}"

    print("\nprecc against the references, same run (TFLOP/s; ratio = precc / reference)")
    print(f"{'M':>6} {'N':>6} {'K':>6} | {'tensorwise':>22} | {'rowwise':>22} | "
          f"{'blockwise (DeepGEMM H800)':>32} | {'bf16':>22} | {'chain / unfused':>22}")
    for (m, n, k), r in refs.items():
        t = r["tensorwise"].get("tflops")
        rw = r["rowwise"].get("tflops")
        bw = r["blockwise"].get("tflops")
        bf = r["bf16"].get("tflops")
        uf = r["unfused"].get("tflops")
        pt, pr, pb = p("current_tensorwise", m, n, k), p("rowwise", m, n, k), p("deepseek_v3", m, n, k)
        pf, pc = p("bf16", m, n, k), p("current_tensorwise", m, n, k, "chain")
        dg = DEEPGEMM_H800.get((n, k)) if m == 4096 else None
        print(f"{m:6d} {n:6d} {k:6d} | {fmt(pt)} {fmt(t)} {ratio(pt, t)} | "
              f"{fmt(pr)} {fmt(rw)} {ratio(pr, rw)} | {fmt(pb)} {fmt(bw)} {ratio(pb, bw)} "
              f"{ratio(pb, dg) if dg else ' ' * 6:>6} {dg or '':>2} | "
              f"{fmt(pf)} {fmt(bf)} {ratio(pf, bf)} | {fmt(pc)} {fmt(uf)} {ratio(pc, uf)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
