"""torch_step.py — one training step of a converted Llama-style block on a
GPU, the way users run it: PyTorch's stream, caching allocator, autocast,
torch.compile for the reference, a CUDA graph of the whole step
(issue 31, section 1; docs/pytorch.md, "CUDA").

The block: RMSNorm, attention (q/k/v/o, GQA, RoPE, causal SDPA), RMSNorm,
SwiGLU MLP (gate/up/down), residuals; fp32 master weights under
torch.autocast(bf16), AdamW, an MSE loss against a fixed teacher block on
a few fixed batches. Every variant starts from the same weights and sees
the same data:

  bf16                      nn.Linear under autocast (the baseline)
  precc RECIPE              precc.torch.convert(recipe=RECIPE), eager
  torchao tensorwise|rowwise + compile
                            torchao.float8.convert_to_float8_training,
                            then torch.compile (what torchao recommends)
  bf16 + compile
  precc current_tensorwise + compile
                            the converted block under torch.compile (the
                            precc ops in the graph, the rest fused)

Reported per variant: ms per step (steps 10..N, CUDA-synchronized wall
time), the loss's mean over its last 5 steps against bf16's, peak memory.
Then, per delayed/current recipe, a CUDA graph of the whole step (forward,
backward, the precc commit, SGD) replayed against the same steps run
eagerly from the same state: losses, parameters and precc_state bit-equal;
and DDP over NCCL with world size 1 around the converted block against no
DDP, bit-equal.
PASS/FAIL lines against the targets (precc current_tensorwise >= 1.3x the
bf16 step and >= 1.1x torchao tensorwise + compile; loss within 1 % of
bf16 after 50 steps); a variant that cannot run prints SKIP/ERROR with the
reason, never a number.

  python3 tests/gpu/torch_step.py --artifacts tests/gpu/artifacts/torch_step
        on the GPU (precc's artifacts built here: --build, which
        tests/gpu/prepare.sh runs; the GPU machine has no LLVM or Lua)
  python3 tests/gpu/torch_step.py --build DIR [--recipes ...]
        the artifacts for the full-size block, sm_90a (needs only precc)
  python3 tests/gpu/torch_step.py --dry-run
        the same code on the CPU at tiny sizes (tests/python/
        test_torch_step.py runs it): no timing targets, no CUDA graph
"""
import argparse
import copy
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
if os.path.join(ROOT, "python") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "python"))

RECIPES = "current_tensorwise,rowwise,te_delayed_hybrid,deepseek_v3,mxfp8"
FULL = dict(hidden=4096, inter=14336, heads=32, kv_heads=8, seq=4096, batch=2)
TINY = dict(hidden=128, inter=256, heads=4, kv_heads=2, seq=32, batch=1)
# The 7 linears of the block, as precc's model file names them: k and v
# read q's input, up reads gate's.
LINEARS = [("attn.q_proj", "h", "q", None), ("attn.k_proj", "h", "kv", "attn.q_proj"),
           ("attn.v_proj", "h", "kv", "attn.q_proj"), ("attn.o_proj", "q", "h", None),
           ("mlp.gate_proj", "h", "i", None), ("mlp.up_proj", "h", "i", "mlp.gate_proj"),
           ("mlp.down_proj", "i", "h", None)]


def dims(cfg):
    hd = cfg["hidden"] // cfg["heads"]
    return {"h": cfg["hidden"], "q": cfg["heads"] * hd, "kv": cfg["kv_heads"] * hd,
            "i": cfg["inter"]}


def build(out, recipes, cfg, targets):
    """precc's artifacts of the block for each recipe, into OUT/RECIPE."""
    from precc import compiler
    d = dims(cfg)
    lin = [compiler.Linear(f, d[a], d[b], shares_input=s) for f, a, b, s in LINEARS]
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "block.lua")
    with open(path, "w") as f:
        f.write(compiler.model_lua("torch_Block", lin))
    failed = 0
    for r in recipes:
        t = time.time()
        try:
            compiler.build(r, path, targets, out=os.path.join(out, r))
            print("built  torch_step/%s (%.0f s)" % (r, time.time() - t))
        except Exception as e:   # noqa: BLE001 — reported, the others still built
            failed += 1
            print("FAILED torch_step/%s: %s" % (r, str(e).splitlines()[-1] if str(e) else e))
    return failed


# ---- the block -------------------------------------------------------------------

def make_block_classes(torch, nn, F):
    class RMSNorm(nn.Module):
        def __init__(self, n, eps=1e-5):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))
            self.eps = eps

        def forward(self, x):
            xf = x.float()
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            return (y * self.weight).to(x.dtype)

    class Attention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            d = dims(cfg)
            self.nh, self.nkv = cfg["heads"], cfg["kv_heads"]
            self.hd = cfg["hidden"] // cfg["heads"]
            self.q_proj = nn.Linear(d["h"], d["q"], bias=False)
            self.k_proj = nn.Linear(d["h"], d["kv"], bias=False)
            self.v_proj = nn.Linear(d["h"], d["kv"], bias=False)
            self.o_proj = nn.Linear(d["q"], d["h"], bias=False)
            inv = 1.0 / (500000.0 ** (torch.arange(0, self.hd, 2).float() / self.hd))
            ang = torch.outer(torch.arange(cfg["seq"]).float(), inv)
            self.register_buffer("cos", torch.cat([ang.cos(), ang.cos()], -1), persistent=False)
            self.register_buffer("sin", torch.cat([ang.sin(), ang.sin()], -1), persistent=False)

        def rope(self, t):
            T = t.shape[2]
            a, b = t[..., : self.hd // 2], t[..., self.hd // 2:]
            rot = torch.cat([-b, a], -1)
            return (t * self.cos[:T].to(t.dtype) + rot * self.sin[:T].to(t.dtype))

        def forward(self, x):
            B, T, _ = x.shape
            q = self.q_proj(x).view(B, T, self.nh, self.hd).transpose(1, 2)
            k = self.k_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
            v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
            q, k = self.rope(q), self.rope(k)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            return self.o_proj(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))

    class MLP(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            d = dims(cfg)
            self.gate_proj = nn.Linear(d["h"], d["i"], bias=False)
            self.up_proj = nn.Linear(d["h"], d["i"], bias=False)
            self.down_proj = nn.Linear(d["i"], d["h"], bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Block(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.attn_norm = RMSNorm(cfg["hidden"])
            self.attn = Attention(cfg)
            self.mlp_norm = RMSNorm(cfg["hidden"])
            self.mlp = MLP(cfg)

        def forward(self, x):
            h = x + self.attn(self.attn_norm(x))
            return h + self.mlp(self.mlp_norm(h))

    return Block


# ---- running a variant -------------------------------------------------------------

class Env:
    def __init__(self, args):
        import torch
        from torch import nn
        import torch.nn.functional as F
        self.torch, self.nn, self.F = torch, nn, F
        self.args = args
        self.cfg = dict(TINY if args.dry_run else FULL)
        for k in ("seq", "batch"):
            if getattr(args, k):
                self.cfg[k] = getattr(args, k)
        self.cuda = not args.dry_run
        self.dev = torch.device("cuda" if self.cuda else "cpu")
        self.Block = make_block_classes(torch, nn, F)
        self.t0 = time.time()

    def left(self):
        return self.args.budget - (time.time() - self.t0)

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def base_and_data(self, cfg, nbatch=4):
        torch = self.torch
        torch.manual_seed(0)
        base = self.Block(cfg).to(self.dev)
        for m in base.modules():   # Llama-style init: N(0, 0.02)
            if isinstance(m, self.nn.Linear):
                self.nn.init.normal_(m.weight, std=0.02)
        torch.manual_seed(1)
        teacher = self.Block(cfg).to(self.dev)
        for m in teacher.modules():
            if isinstance(m, self.nn.Linear):
                self.nn.init.normal_(m.weight, std=0.02)
        g = torch.Generator(device=self.dev).manual_seed(2)
        data = []
        with torch.no_grad(), torch.autocast(self.dev.type, dtype=torch.bfloat16):
            for _ in range(nbatch):
                x = torch.randn(cfg["batch"], cfg["seq"], cfg["hidden"], device=self.dev,
                                generator=g).to(torch.bfloat16)
                data.append((x, teacher(x).float()))
        del teacher
        return base, data

    def convert(self, model, recipe):
        import precc.torch as pt
        art = os.path.join(self.args.artifacts, recipe) if self.args.artifacts else None
        ex = self.torch.zeros(1, 8, self.cfg["hidden"], device=self.dev, dtype=self.torch.bfloat16)
        if art is None:
            with self.torch.autocast(self.dev.type, dtype=self.torch.bfloat16):
                return pt.convert(model, recipe=recipe, example_inputs=ex, warn=False)
        return pt.convert(model, recipe=recipe, artifacts=art, warn=False)

    def make(self, name, base):
        """The variant's model (from a copy of base) and its step function."""
        torch = self.torch
        m = copy.deepcopy(base)
        if name.startswith("precc "):
            m = self.convert(m, name.split()[1])
        elif name.startswith("torchao "):
            from torchao.float8 import Float8LinearConfig, convert_to_float8_training
            cfg = Float8LinearConfig.from_recipe_name(name.split()[1])
            convert_to_float8_training(m, config=cfg,
                                       module_filter_fn=lambda mod, fqn: fqn.startswith(("attn.", "mlp.")))
        fwd = m
        if name.endswith("+ compile"):
            fwd = torch.compile(m, backend=self.args.compile_backend)
        return m, fwd

    def step_fn(self, fwd, opt):
        torch, F = self.torch, self.F

        def step(x, t):
            with torch.autocast(self.dev.type, dtype=torch.bfloat16):
                y = fwd(x)
            loss = F.mse_loss(y.float(), t)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()
        return step

    def run(self, name, base, data, steps):
        torch = self.torch
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        m, fwd = self.make(name, base)
        opt = torch.optim.AdamW(m.parameters(), lr=self.args.lr)
        step = self.step_fn(fwd, opt)
        losses = []
        warm = min(10, steps // 2)
        t = None
        for i in range(steps):
            if i == warm:
                self.sync()
                t = time.perf_counter()
            x, tg = data[i % len(data)]
            losses.append(step(x, tg))
        self.sync()
        ms = (time.perf_counter() - t) / (steps - warm) * 1e3
        peak = torch.cuda.max_memory_allocated() / 2 ** 30 if self.cuda else float("nan")
        losses = torch.stack(losses).float().cpu()
        del m, fwd, opt, step
        if name.endswith("+ compile"):
            torch._dynamo.reset()   # its caches hold the compiled model
        import gc
        gc.collect()
        return ms, losses, peak

    def graph_check(self, recipe, base, data, n=5):
        """A CUDA graph of the whole step (forward, backward with the precc
        commit, SGD) replayed n times against the same n steps run eagerly
        from the same state: losses, parameters, precc_state bit for bit.
        Attention through SDPA's math backend (the flash/efficient backwards
        are not deterministic, which would say nothing about precc)."""
        torch, F = self.torch, self.F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        m = self.convert(copy.deepcopy(base), recipe)
        opt = torch.optim.SGD(m.parameters(), lr=self.args.lr)
        sx, st = data[0][0].clone(), data[0][1].clone()

        def body(model, o):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = model(sx)
            loss = F.mse_loss(y.float(), st)
            loss.backward()
            o.step()
            return loss

        with sdpa_kernel(SDPBackend.MATH):
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):   # warm up (and a delayed-scaling history)
                    body(m, opt)
                    opt.zero_grad(set_to_none=True)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            twin = copy.deepcopy(m)
            topt = torch.optim.SGD(twin.parameters(), lr=self.args.lr)
            g = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(g):
                sloss = body(m, opt)
            lg, le = [], []
            for i in range(n):
                x, t = data[(i + 1) % len(data)]
                sx.copy_(x)
                st.copy_(t)
                g.replay()
                lg.append(sloss.clone())
            for i in range(n):
                x, t = data[(i + 1) % len(data)]
                sx.copy_(x)
                st.copy_(t)
                le.append(body(twin, topt).detach())
                topt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
        same_loss = all(torch.equal(a, b) for a, b in zip(lg, le))
        same_par = all(torch.equal(a, b) for a, b in zip(m.parameters(), twin.parameters()))
        same_state = all(torch.equal(a, b) for (na, a), (nb, b) in
                         zip(m.named_buffers(), twin.named_buffers()) if na.endswith("precc_state"))
        return same_loss, same_par, same_state, float(lg[-1]), float(le[-1])


def ddp_check(env, recipe, base, data, steps=3):
    """DDP with one rank (NCCL on the GPU, gloo in a dry run) around a
    converted block against the same block without DDP: the same losses,
    parameters and precc_state bit for bit (one rank: DDP's reduction is
    the identity, and precc reduces no amax)."""
    import socket
    import torch.distributed as dist
    torch = env.torch
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    dist.init_process_group("nccl" if env.cuda else "gloo",
                            init_method="tcp://127.0.0.1:%d" % port, rank=0, world_size=1)
    try:
        a = env.convert(copy.deepcopy(base), recipe)
        b = env.convert(copy.deepcopy(base), recipe)
        ddp = torch.nn.parallel.DistributedDataParallel(
            a, device_ids=[env.dev.index or 0] if env.cuda else None)
        oa = torch.optim.SGD(ddp.parameters(), lr=env.args.lr)
        ob = torch.optim.SGD(b.parameters(), lr=env.args.lr)
        sa, sb = env.step_fn(ddp, oa), env.step_fn(b, ob)
        la, lb = [], []
        for i in range(steps):
            x, t = data[i % len(data)]
            la.append(sa(x, t))
            lb.append(sb(x, t))
        env.sync()
        same = (all(torch.equal(p, q) for p, q in zip(la, lb)),
                all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters())),
                all(torch.equal(p, q) for (n, p), (_, q) in zip(a.named_buffers(), b.named_buffers())
                    if n.endswith("precc_state")))
    finally:
        dist.destroy_process_group()
    return same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes, no targets")
    ap.add_argument("--build", metavar="DIR", help="build precc's artifacts of the block, and exit")
    ap.add_argument("--targets", default="sm_90a")
    ap.add_argument("--artifacts", metavar="DIR", help="precc's artifacts (DIR/RECIPE), from --build")
    ap.add_argument("--recipes", default=RECIPES)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--budget", type=float, default=280.0, help="seconds; later variants SKIP")
    ap.add_argument("--graph-seq", type=int, default=1024, help="sequence length of the graph check")
    ap.add_argument("--compile-backend", default=None)
    ap.add_argument("--no-torchao", action="store_true")
    a = ap.parse_args()
    recipes = [r for r in a.recipes.split(",") if r]
    if a.build:
        sys.exit(1 if build(a.build, recipes, FULL, a.targets) else 0)
    if a.dry_run:
        a.steps = min(a.steps, 4)
        a.compile_backend = a.compile_backend or "aot_eager"
        if a.recipes == RECIPES:
            recipes = ["current_tensorwise", "te_delayed_hybrid"]
    a.compile_backend = a.compile_backend or "inductor"

    env = Env(a)
    torch = env.torch
    if env.cuda and not torch.cuda.is_available():
        print("ERROR: torch %s sees no CUDA device (--dry-run runs on the CPU)" % torch.__version__)
        sys.exit(1)
    if env.cuda and not a.artifacts:
        print("note: no --artifacts: precc builds the block here (needs the compiler)")
    cfg = env.cfg
    print("torch_step: torch %s, %s, block hidden %d, intermediate %d, heads %d/%d, seq %d, "
          "batch %d, %d steps, AdamW lr %g%s" % (
              torch.__version__, torch.cuda.get_device_name() if env.cuda else "CPU (dry run)",
              cfg["hidden"], cfg["inter"], cfg["heads"], cfg["kv_heads"], cfg["seq"],
              cfg["batch"], a.steps, a.lr, ", torch.compile backend " + a.compile_backend))
    base, data = env.base_and_data(cfg)
    if env.cuda:
        print("resident before the variants (the base block, its data): %.2f GiB; each "
              "variant's peak includes it" % (torch.cuda.memory_allocated() / 2 ** 30))
    names = ["bf16"] + ["precc " + r for r in recipes[:1]]
    if not a.no_torchao:
        names += ["torchao tensorwise + compile", "torchao rowwise + compile"]
    names += ["precc " + r for r in recipes[1:]] + ["bf16 + compile"]
    names += ["precc " + r + " + compile" for r in recipes[:1]]
    res = {}
    print("%-32s %10s %12s %12s %10s" % ("variant", "ms/step", "loss (last 5)", "vs bf16",
                                         "peak GiB"))
    for name in names:
        if env.left() < 20:
            print("SKIP %s: out of time (--budget %.0f s)" % (name, a.budget))
            continue
        try:
            ms, losses, peak = env.run(name, base, data, a.steps)
        except Exception as e:   # noqa: BLE001 — one variant's failure is reported, not fatal
            msg = str(e).strip().splitlines()
            print("ERROR %s: %s: %s" % (name, type(e).__name__, msg[-1] if msg else ""))
            continue
        last = float(losses[-5:].mean())
        res[name] = (ms, last, losses, peak)
        ref = res.get("bf16")
        rel = (last - ref[1]) / ref[1] if ref else 0.0
        print("%-32s %10.2f %12.5f %+11.2f%% %10.2f%s" % (
            name, ms, last, 100 * rel, peak, "" if math.isfinite(last) else "  (not finite)"))
    print("losses by step (first, 10, 25, last):")
    for name, (_, _, losses, _) in res.items():
        pick = [losses[i] for i in (0, min(9, len(losses) - 1), min(24, len(losses) - 1), -1)]
        print("  %-30s %s" % (name, " ".join("%.5f" % float(v) for v in pick)))

    verdicts = []

    def verdict(ok, what):
        tag = ("PASS" if ok else "FAIL") if not a.dry_run else "DRY"
        verdicts.append(ok)
        print("%s %s" % (tag, what))

    bf = res.get("bf16")
    pt_ = res.get("precc current_tensorwise")
    ao = res.get("torchao tensorwise + compile")
    print("targets%s:" % (" (dry run: CPU, tiny sizes — no verdict)" if a.dry_run else ""))
    if bf and pt_:
        verdict(bf[0] / pt_[0] >= 1.3, "precc current_tensorwise step %.2f ms = %.2fx the bf16 "
                "step %.2f ms (target >= 1.3x)" % (pt_[0], bf[0] / pt_[0], bf[0]))
    else:
        print("SKIP precc tensorwise vs bf16: %s did not run" % ("bf16" if not bf else "precc"))
    if ao and pt_:
        verdict(ao[0] / pt_[0] >= 1.1, "precc current_tensorwise %.2f ms = %.2fx torchao tensorwise "
                "+ compile %.2f ms (target >= 1.1x)" % (pt_[0], ao[0] / pt_[0], ao[0]))
    else:
        print("SKIP precc tensorwise vs torchao + compile: %s did not run"
              % ("torchao" if not ao else "precc"))
    if bf:
        for name, (_, last, _, _) in res.items():
            if name.startswith("precc "):
                rel = abs(last - bf[1]) / bf[1]
                verdict(rel <= 0.01 and math.isfinite(last),
                        "%s loss %.5f vs bf16 %.5f after %d steps: %.2f%% (target <= 1%%)"
                        % (name, last, bf[1], a.steps, 100 * rel))
    if env.cuda:
        gcfg = dict(cfg, seq=min(cfg["seq"], a.graph_seq), batch=1)
        gbase, gdata = env.base_and_data(gcfg, nbatch=3)
        for r in [r for r in ("current_tensorwise", "te_delayed_hybrid") if r in recipes]:
            if env.left() < 15:
                print("SKIP cuda graph %s: out of time" % r)
                continue
            try:
                sl, sp, ss, lg, le = env.graph_check(r, gbase, gdata)
                verdict(sl and sp and ss, "cuda graph replay == eager, precc %s, 5 steps at seq %d: "
                        "losses %s, parameters %s, precc_state %s (last loss %.6f / %.6f)"
                        % (r, gcfg["seq"], *("equal" if v else "DIFFER" for v in (sl, sp, ss)),
                           lg, le))
            except Exception as e:   # noqa: BLE001
                msg = str(e).strip().splitlines()
                print("FAIL cuda graph %s: %s: %s" % (r, type(e).__name__, msg[-1] if msg else ""))
                verdicts.append(False)
    else:
        print("SKIP cuda graph replay: no GPU in a dry run")
    r = "te_delayed_hybrid" if "te_delayed_hybrid" in recipes else recipes[0]
    if env.left() < 15:
        print("SKIP ddp world 1: out of time")
    else:
        try:
            gcfg = dict(cfg, seq=min(cfg["seq"], a.graph_seq), batch=1)
            gbase, gdata = env.base_and_data(gcfg, nbatch=3)
            sl, sp, ss = ddp_check(env, r, gbase, gdata)
            verdict(sl and sp and ss, "DDP (%s, world size 1) around precc %s == no DDP, 3 steps: "
                    "losses %s, parameters %s, precc_state %s"
                    % ("nccl" if env.cuda else "gloo", r,
                       *("equal" if v else "DIFFER" for v in (sl, sp, ss))))
        except Exception as e:   # noqa: BLE001
            msg = str(e).strip().splitlines()
            print("FAIL ddp world 1: %s: %s" % (type(e).__name__, msg[-1] if msg else ""))
            verdicts.append(False)
    print("torch_step: %d checks, %d %s, %.0f s" % (
        len(verdicts), verdicts.count(False),
        "short of their targets in this dry run (CPU, tiny sizes: no verdict)" if a.dry_run
        else "failed", time.time() - env.t0))
    sys.exit(0 if a.dry_run or all(verdicts) else 1)


if __name__ == "__main__":
    main()
