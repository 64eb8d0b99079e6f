"""bench_convert_torch.py — how long precc.torch.convert takes on a toy
Llama (issue 31 §3: "convert of a 4-layer toy Llama <= 2 s warm"), and
where the time goes.

    PRECC_LIB=build PRECC_BIN=build/precc PYTHONPATH=python \\
    python bench/bench_convert_torch.py [--layers 4] [--hidden 256] [--ffn 512]
        [--recipe current_tensorwise] [--runs 3] [--cold] [--profile]

or `make bench-convert` (a process on empty caches, then a warm one).

The model: an embedding, `layers` decoder blocks of q, k, v, o, gate, up,
down linears (Llama's names) and an lm_head: 7 * layers + 1 linears
(29 at 4 layers). Each run converts a fresh copy of the model in this
process. --cold points PRECC_TORCH_CACHE and PRECC_CACHE_DIR at a new
empty directory first, so the first run builds every kernel (what a user's
very first convert pays); later runs are warm (the artifact cache).
Printed: the import of torch and precc.torch; per run, wall and CPU
seconds (this process + its children: the precc compiler and ptxas), the
precc processes it started and, for a build, how many kernels precc
compiled and how many came from its kernel cache; with --profile the top
functions (cProfile, cumulative) of the last run. Runs on an older
precc.torch too (processes then print "?"), for before/after figures.
"""
import argparse
import os
import resource
import sys
import tempfile
import time

_T0, _C0 = time.perf_counter(), time.process_time()
import torch                 # noqa: E402
from torch import nn         # noqa: E402

import precc.torch as pt     # noqa: E402
from precc import compiler   # noqa: E402
_IMPORT = (time.perf_counter() - _T0, time.process_time() - _C0)


class Block(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.self_attn = nn.Module()
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(self.self_attn, n, nn.Linear(d, d, bias=False))
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(d, f, bias=False)
        self.mlp.up_proj = nn.Linear(d, f, bias=False)
        self.mlp.down_proj = nn.Linear(f, d, bias=False)


class ToyLlama(nn.Module):
    """The module tree of a Llama (names and shapes); its forward is a
    plain residual MLP-ish pass, enough for a training step."""

    def __init__(self, layers=4, d=256, f=512, vocab=256):
        super().__init__()
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(vocab, d)
        self.model.layers = nn.ModuleList(Block(d, f) for _ in range(layers))
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        h = self.model.embed_tokens(ids)
        for b in self.model.layers:
            a = b.self_attn
            h = h + a.o_proj(a.q_proj(h) * torch.sigmoid(a.k_proj(h)) + a.v_proj(h))
            m = b.mlp
            h = h + m.down_proj(torch.nn.functional.silu(m.gate_proj(h)) * m.up_proj(h))
        return self.lm_head(h)


def cpu_seconds():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--recipe", default="current_tensorwise")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    if a.cold:
        d = tempfile.mkdtemp(prefix="precc-bench-convert-")
        os.environ["PRECC_TORCH_CACHE"] = os.path.join(d, "artifacts")
        os.environ["PRECC_CACHE_DIR"] = os.path.join(d, "kernels")
    torch.manual_seed(0)
    print("convert %s: %d layers, hidden %d, ffn %d; load %s; cache %s; import torch + "
          "precc.torch took %.2f s wall, %.2f s CPU"
          % (a.recipe, a.layers, a.hidden, a.ffn,
             " ".join("%.2f" % x for x in os.getloadavg()),
             os.environ.get("PRECC_TORCH_CACHE", "(default)"), _IMPORT[0], _IMPORT[1]))
    runs = getattr(compiler, "RUNS", None)   # None: a precc.torch before it counted them
    for i in range(a.runs):
        model = ToyLlama(a.layers, a.hidden, a.ffn)
        n0, c0, w0 = len(runs or ()), cpu_seconds(), time.perf_counter()
        if a.profile and i == a.runs - 1:
            import cProfile
            import pstats
            pr = cProfile.Profile()
            pr.enable()
            pt.convert(model, recipe=a.recipe)
            pr.disable()
        else:
            pt.convert(model, recipe=a.recipe)
        w, c = time.perf_counter() - w0, cpu_seconds() - c0
        conv = sum(d.converted for d in model.precc_report)
        procs = "?" if runs is None else "%d %s" % (len(runs) - n0, [r[0] for r in runs[n0:]])
        built = getattr(compiler, "LAST_BUILD", None) if runs and len(runs) > n0 else None
        kern = (", %d kernel builds, %d from the kernel cache" % (
            built["kernel_builds"], built["cache_hits"])) if built and runs[-1][0] == "build" else ""
        print("run %d: %.3f s wall, %.3f s CPU, precc processes: %s%s; %d/%d linears converted"
              % (i + 1, w, c, procs, kern, conv, len(model.precc_report)))
        sys.stdout.flush()
    if a.profile:
        pstats.Stats(pr).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
