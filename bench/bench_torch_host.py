"""bench_torch_host.py — host time per precc.torch.Linear call, forward and
backward, beside torch's own nn.Linear (issue 31, "Host overhead").

    PRECC_LIB=build PRECC_BIN=build/precc PYTHONPATH=python \\
    PRECC_LIBCUDA=build/tests/runtime/libprecc_fake_cuda_count.so \\
    python bench/bench_torch_host.py [--recipes a,b] [--m 128] [--k 128] [--n 128] [--calls 2000]

torch here is the CPU build, and a CPU tensor runs precc's kernels on the
interpreter, whose compute would swamp the host time. So each converted
Linear's runtime is swapped (bench only) for one of the same artifacts on
the cuda backend over tests/runtime's fake driver, which computes nothing
and, with FAKE_CUDA_ANY_POINTER=1 (set here), takes the CPU tensors'
addresses as device memory; its launch checks are off (no
FAKE_CUDA_MANIFEST: they need the fake's own allocations). What is timed
is then everything of a call but the kernels: the Module's checks and
casts, the custom op's dispatch, autograd, the torch.empty of y, saved,
workspace, dX and dW (the CPU allocator: malloc, where CUDA would use its
caching allocator), the ctypes call and precc_rt's checks and launches,
and the fake's own launch records, memsets and state copies.

Per call, in thread CPU time (time.thread_time_ns) and wall time
(perf_counter_ns), median and min over --calls calls after warm-ups:
  forward          y = lin(x) under torch.no_grad()
  forward (grad)   y = lin(x) with x and the weight requiring grad
  fwd+bwd          y = lin(x); y.backward(dy): the backward and the
                   deferred commit (Group.flush after the step's last backward)
  backward         fwd+bwd - forward (grad)
torch's nn.Linear is timed the same way at the same shape (real CPU
compute: at 128 x 128 x 128 it is mostly GEMM) and at 16 x 16, M = 16,
where its compute is small and what remains is its own per-call cost;
and an autograd.Function that computes nothing (torch.empty outputs):
the floor of any layer defined in Python, gradient accumulation into
x.grad and weight.grad included.

A single layer's backward carries the whole start of autograd's engine
(about 30 us here); in a model it is paid once per backward, not per
layer. So --chain L (default 32) also times a Sequential of L linears,
one step = forward with grad + backward, per layer (the forward's and
the backward's times of each step apart, / L, median over --chain-steps
steps; the backward includes the step's deferred commit), for precc, torch's nn.Linear and the
do-nothing Function: the per-call cost at a model's scale (Llama-3-70B's
561 linears run the same per-layer path). Each recipe's chain is timed
between two runs of the do-nothing Function's, and precc's part above that
floor is printed too: on a shared VM the absolute figures drift by a
fifth between runs, the floor with them.
"""
import argparse
import gc
import os
import statistics
import sys
import time

os.environ.setdefault("FAKE_CUDA_ANY_POINTER", "1")
os.environ.pop("FAKE_CUDA_MANIFEST", None)

import torch                      # noqa: E402
from torch import nn              # noqa: E402

import precc.torch as pt          # noqa: E402
from precc.runtime import Runtime  # noqa: E402


def timed(fn, calls, warm=50):
    for _ in range(warm):
        fn()
    cpu, wall = [], []
    for _ in range(calls):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        fn()
        c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
        cpu.append((c1 - c0) / 1e3)
        wall.append((w1 - w0) / 1e3)
    return statistics.median(cpu), min(cpu), statistics.median(wall), min(wall)


def measure(lin, m, k, n, dtype, calls):
    x = torch.randn(m, k, dtype=dtype)
    xg = x.clone().requires_grad_(True)
    gc.collect()   # as in measure_chain
    dy = torch.randn(m, n, dtype=dtype)

    def fwd():
        with torch.no_grad():
            lin(x)

    def fwd_grad():
        lin(xg)

    def fwd_bwd():
        lin(xg).backward(dy)

    out = {"forward": timed(fwd, calls), "forward (grad)": timed(fwd_grad, calls)}
    # a forward with grad whose backward never runs leaves the step open:
    # close it (precc: Group.flush) before timing whole steps
    lin.zero_grad(set_to_none=True)
    flush = getattr(getattr(lin, "precc_group", None), "flush", None)
    if flush:
        flush()
    out["fwd+bwd"] = timed(fwd_bwd, calls)
    out["backward"] = tuple(a - b for a, b in zip(out["fwd+bwd"], out["forward (grad)"]))
    return out


class _Nothing(torch.autograd.Function):
    """A Linear that computes nothing: torch.empty outputs of the right
    shapes. What torch's autograd alone costs a Python-defined layer."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.shapes = x.shape, w.shape, x.dtype
        return torch.empty(x.shape[0], w.shape[0], dtype=x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xs, ws, dt = ctx.shapes
        return torch.empty(xs, dtype=dt), torch.empty(ws, dtype=dt)


class NothingLinear(nn.Linear):
    def forward(self, x):
        return _Nothing.apply(x, self.weight)


def to_fake_cuda(lin):
    """The bench-only hook: the Group's runtime for CPU tensors becomes the
    same artifacts on the cuda backend (the fake driver)."""
    g = lin.precc_group
    cpu = g.runtimes[("cpu", None)]
    rt = Runtime(cpu.dir, "cuda")
    if "fake" not in rt.why:
        raise SystemExit("bench_torch_host: PRECC_LIBCUDA is not the fake driver: %s" % rt.why)
    g.runtimes[("cpu", None)] = rt
    if hasattr(g, "reset_plans"):
        g.reset_plans()
    else:   # the package before reset_plans (to time "before" with this script)
        g.plans.clear()
    return rt


def measure_chain(net, L, m, k, dtype, calls, warm=5):
    """Per layer of a chain of L linears, one forward and one backward each
    step (as in a model: autograd's engine starts once per backward, not
    once per layer): the forward and the backward of each step timed apart
    (the backward with the step's deferred commit), / L."""
    xg = torch.randn(m, k, dtype=dtype).requires_grad_(True)
    dy = torch.randn(m, k, dtype=dtype)
    # the garbage of the chains timed before (a converted model's runtime
    # and plans are freed by the cycle collector) would be traversed by
    # every collection during this one's steps: 22 -> 40 us per layer
    gc.collect()
    t = {"forward (grad)": ([], []), "backward": ([], []), "fwd+bwd": ([], [])}
    for i in range(warm + calls):
        # as a training loop's optimizer.zero_grad() (set_to_none, torch's
        # default): each step's gradients are fresh tensors, not a CPU add
        # into last step's (a GPU's add runs on the device; on this CPU
        # its 54 MB a step at 561 layers would also flush the host caches)
        net.zero_grad(set_to_none=True)
        xg.grad = None
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        y = net(xg)
        c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
        y.backward(dy)
        c2, w2 = time.thread_time_ns(), time.perf_counter_ns()
        del y
        if i < warm:
            continue
        for ph, c, w in (("forward (grad)", c1 - c0, w1 - w0), ("backward", c2 - c1, w2 - w1),
                         ("fwd+bwd", c2 - c0, w2 - w0)):
            t[ph][0].append(c / 1e3 / L)
            t[ph][1].append(w / 1e3 / L)
    return {ph: (statistics.median(c), min(c), statistics.median(w), min(w))
            for ph, (c, w) in t.items()}


def chain(L, k, dtype, cls=nn.Linear):
    return nn.Sequential(*[cls(k, k, bias=False, dtype=dtype) for _ in range(L)])


def show(name, res):
    for ph in ("forward", "forward (grad)", "backward", "fwd+bwd"):
        if ph not in res:
            continue
        cm, cmin, wm, wmin = res[ph]
        print("  %-32s %-15s %8.1f us %8.1f us %8.1f us %8.1f us" % (name, ph, cm, cmin, wm, wmin))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipes", default="te_delayed_hybrid,current_tensorwise,deepseek_v3")
    ap.add_argument("--m", type=int, default=128)
    ap.add_argument("--k", type=int, default=128)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--chain", type=int, default=32,
                    help="layers of the chain whose step is timed per layer (0: none)")
    ap.add_argument("--chain-steps", type=int, default=200)
    a = ap.parse_args()
    if not os.environ.get("PRECC_LIBCUDA"):
        sys.exit("bench_torch_host: set PRECC_LIBCUDA to tests/runtime's libprecc_fake_cuda_count.so")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    m, k, n = a.m, a.k, a.n
    print("bench_torch_host: torch %s, 1 thread, M=%d, K=%d, N=%d, %d calls (median / min), "
          "load %s" % (torch.__version__, m, k, n, a.calls, " ".join("%.2f" % v for v in os.getloadavg())))
    print("  %-32s %-15s %11s %11s %11s %11s" % ("", "", "cpu med", "cpu min", "wall med", "wall min"))
    for recipe in a.recipes.split(","):
        lin = pt.convert(nn.Linear(k, n, bias=False, dtype=torch.bfloat16), recipe=recipe)
        rt = to_fake_cuda(lin)
        launches0 = sum(s["launches"] for s in rt.kernel_stats())
        show("precc.torch.Linear %s" % recipe, measure(lin, m, k, n, torch.bfloat16, a.calls))
        launches = sum(s["launches"] for s in rt.kernel_stats()) - launches0
        print("  %-32s (%d launches in all on the fake driver)" % ("", launches))
    for dt in (torch.bfloat16, torch.float32):
        lin = nn.Linear(k, n, bias=False, dtype=dt)
        show("torch nn.Linear %s" % str(dt)[6:], measure(lin, m, k, n, dt, a.calls))
    show("autograd.Function, no work", measure(NothingLinear(k, n, bias=False, dtype=torch.bfloat16),
                                               m, k, n, torch.bfloat16, a.calls))
    for dt in (torch.bfloat16, torch.float32):
        lin = nn.Linear(16, 16, bias=False, dtype=dt)
        show("torch nn.Linear %s 16x16 M=16" % str(dt)[6:], measure(lin, 16, 16, 16, dt, a.calls))
    L = a.chain
    if L:
        steps = a.chain_steps
        print("a chain of %d linears %d x %d, M=%d: per layer of a step (its forward with grad "
              "and its backward timed apart), %d steps" % (L, k, k, m, steps))
        # torch's floor (a Python Function computing nothing) beside each
        # recipe: this VM's per-layer figures drift 20-30 % between runs
        # minutes apart, the floor with them, so precc's own part is the
        # difference of two figures taken back to back
        def floor():
            return measure_chain(chain(L, k, torch.bfloat16, NothingLinear), L, m, k,
                                 torch.bfloat16, steps)
        for recipe in a.recipes.split(","):
            net = pt.convert(chain(L, k, torch.bfloat16), recipe=recipe, warn=False)
            to_fake_cuda(net)
            f0 = floor()
            res = measure_chain(net, L, m, k, torch.bfloat16, steps)
            f1 = floor()
            del net
            show("precc %s, per layer" % recipe, res)
            print("  %-32s %-15s %8.1f us %8.1f us   (median - the floor's, before / after)"
                  % ("  above the floor", "forward (grad)",
                     res["forward (grad)"][0] - f0["forward (grad)"][0],
                     res["forward (grad)"][0] - f1["forward (grad)"][0]))
            print("  %-32s %-15s %8.1f us %8.1f us"
                  % ("", "backward", res["backward"][0] - f0["backward"][0],
                     res["backward"][0] - f1["backward"][0]))
        show("torch nn.Linear bf16, per layer",
             measure_chain(chain(L, k, torch.bfloat16), L, m, k, torch.bfloat16, steps))
        show("torch nn.Linear bf16 16x16, M=16",
             measure_chain(chain(L, 16, torch.bfloat16), L, 16, 16, torch.bfloat16, steps))
        show("autograd.Function, no work",
             measure_chain(chain(L, k, torch.bfloat16, NothingLinear), L, m, k, torch.bfloat16,
                           steps))


if __name__ == "__main__":
    main()
