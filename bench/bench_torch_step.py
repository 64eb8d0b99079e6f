"""bench_torch_step.py — one training step of a toy Llama on the CPU: fp32
nn.Linear, torchao.float8 (tensorwise, rowwise) and precc.torch
(current_tensorwise, rowwise), side by side in one run (issue 31 §3).

    PRECC_LIB=build/libprecc_rt.so PRECC_BIN=build/precc PYTHONPATH=python \\
    PRECC_TORCH_CACHE=/tmp/precc-bench-cache \\
    python bench/bench_torch_step.py [--threads N] [--steps 5] [--variants a,b]

The model: Llama's shape without its weights' origin (no transformers
here): token embedding, 4 blocks of RMSNorm, attention (q/k/v/o, 4 heads,
causal scaled_dot_product_attention, no RoPE), RMSNorm, SwiGLU MLP
(gate/up/down), final RMSNorm and an lm_head; hidden 256, intermediate
704, vocab 1024, one sequence of 512 tokens, fp32 parameters, the forward under
torch.autocast("cpu", bfloat16) (precc's recipes take bf16 inputs), so
the "fp32" variant is torch's own bf16 autocast. Both fp8 libraries
convert the 28 linears of the blocks and leave the lm_head alone. A
step: forward, cross-entropy, backward, SGD update, zero_grad.

Variants run in turn, one step each per round, after two warm-up steps
each (so background load hits them alike); per variant the median and
the min of --steps rounds, wall time and process CPU time (all threads).
torch.set_num_threads(--threads) governs torch and, through precc.runtime,
the interpreter. OMP_WAIT_POLICY defaults to PASSIVE here (see below).
"""
import argparse
import copy
import os
import statistics
import sys
import time

# torch's OpenMP workers spin after each parallel region by default; on a
# shared 2-core machine that spinning takes the cores from whatever runs
# next (the interpreter's threads, the next op) and inflates every
# variant's time several-fold. Passive unless told otherwise; printed.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = (p(x).view(b, t, h, d // h).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, d, f, heads):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = Attention(d, heads)
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = MLP(d, f)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class ToyLlama(nn.Module):
    def __init__(self, vocab=1024, d=256, f=704, layers=4, heads=4):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Block(d, f, heads) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for blk in self.layers:
            x = blk(x)
        return self.lm_head(self.norm(x))


def in_blocks(mod, fqn):
    return fqn.startswith("layers.") and isinstance(mod, nn.Linear)


def make(variant, base):
    m = copy.deepcopy(base)
    if variant == "fp32":
        return m
    lib, recipe = variant.split(":")
    if lib == "torchao":
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        cfg = Float8LinearConfig.from_recipe_name(recipe)
        return convert_to_float8_training(m, config=cfg, module_filter_fn=in_blocks)
    import precc.torch as pt
    t = time.perf_counter()
    m = pt.convert(m, recipe=recipe, module_filter_fn=in_blocks, warn=False)
    n = sum(1 for d in m.precc_report if d.converted)
    print("# precc %s: convert %.2f s, %d linears converted" % (recipe, time.perf_counter() - t, n),
          flush=True)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--variants", default="fp32,torchao:tensorwise,precc:current_tensorwise,"
                    "torchao:rowwise,precc:rowwise")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    base = ToyLlama()
    ids = torch.randint(0, 1024, (1, a.tokens))
    target = torch.randint(0, 1024, (1, a.tokens))
    variants = a.variants.split(",")
    models = {v: make(v, base) for v in variants}
    opts = {v: torch.optim.SGD(models[v].parameters(), lr=1e-3) for v in variants}

    def step(v):
        m, o = models[v], opts[v]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = m(ids)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), target.view(-1))
        loss.backward()
        o.step()
        o.zero_grad(set_to_none=True)
        return loss.item()

    loss = {}
    for v in variants:
        for _ in range(2):
            loss[v] = step(v)
    wall = {v: [] for v in variants}
    cpu = {v: [] for v in variants}
    for _ in range(a.steps):
        for v in variants:
            w0, c0 = time.perf_counter(), time.process_time()
            loss[v] = step(v)
            wall[v].append(time.perf_counter() - w0)
            cpu[v].append(time.process_time() - c0)
    load = os.getloadavg()
    print("# toy Llama: hidden 256, intermediate 704, 4 layers, 4 heads, vocab 1024, "
          "%d tokens, fp32 parameters, bf16 autocast, SGD" % a.tokens)
    print("# torch %s, threads %d, OMP_WAIT_POLICY=%s, load average %.1f %.1f %.1f, "
          "%d rounds" % (torch.__version__, torch.get_num_threads(),
                         os.environ["OMP_WAIT_POLICY"], load[0], load[1], load[2], a.steps))
    print("%-28s %10s %10s %10s %10s %9s %9s" % ("variant", "wall med", "wall min", "cpu med",
                                                 "cpu min", "vs fp32", "loss"))
    ref = statistics.median(wall[variants[0]])
    for v in variants:
        print("%-28s %9.3fs %9.3fs %9.3fs %9.3fs %8.2fx %9.4f" % (
            v, statistics.median(wall[v]), min(wall[v]), statistics.median(cpu[v]), min(cpu[v]),
            statistics.median(wall[v]) / ref, loss[v]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
