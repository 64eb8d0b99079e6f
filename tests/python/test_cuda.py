"""On a GPU: CUDA tensors run on the cuda backend, on the current stream.
Skips, saying why, where torch sees no CUDA device (this project's
machines have the CPU wheel of torch and no GPU; the issue's section 4 —
Llama-3-8B-shaped blocks, step time against bf16 and a torch._scaled_mm
FP8 linear — runs here when a device is lent: PRECC_GPU_BENCH=1)."""
import os
import time

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import precc.torch as pt  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device: torch %s sees none (CPU build or no driver)" % torch.__version__,
                allow_module_level=True)


def _pair(recipe, k=256, n=128):
    torch.manual_seed(0)
    cpu = pt.convert(nn.Sequential(nn.Linear(k, n)), recipe=recipe, warn=False)
    gpu = pt.convert(nn.Sequential(nn.Linear(k, n)), recipe=recipe, warn=False,
                     targets=pt.default_targets(nn.Linear(1, 1).cuda()))
    gpu[0].weight.data.copy_(cpu[0].weight.data)
    gpu[0].bias.data.copy_(cpu[0].bias.data)
    return cpu, gpu.cuda()


@pytest.mark.parametrize("recipe", ["current_tensorwise", "te_delayed_hybrid", "mxfp8"])
def test_cuda_matches_cpu(recipe):
    """The quantized operands bit for bit, y/dx/dw within the accumulation
    order, and the training step on a side stream."""
    cpu, gpu = _pair(recipe)
    x = torch.randn(256, 256).to(torch.bfloat16)
    dy = torch.randn(256, 128).to(torch.bfloat16)
    bc = pt.inspect(cpu[0], x, dy)
    bg = pt.inspect(gpu[0], x.cuda(), dy.cuda())
    torch.cuda.synchronize()
    for n in bc:
        if n.endswith(".q") or n.endswith(".q.t") or n.endswith(".amax"):
            assert torch.equal(bc[n], bg[n].cpu()), n
    for n in ("y", "dx", "dw"):
        a, b = bc[n].float(), bg[n].float().cpu()
        assert (a - b).norm() <= 1e-2 * a.norm(), n
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        xg = x.cuda().requires_grad_()
        y = gpu(xg)
        y.backward(dy.cuda())
    s.synchronize()
    xc = x.clone().requires_grad_()
    cpu(xc).backward(dy)
    assert (xg.grad.cpu().float() - xc.grad.float()).norm() <= 1e-2 * xc.grad.float().norm()


@pytest.mark.parametrize("recipe", ["current_tensorwise", "te_delayed_hybrid"])
def test_step_without_sync_and_in_a_graph(recipe):
    """A training step makes no host sync (torch's sync debug mode raises
    on one), and a CUDA graph of the whole step replays it bit for bit
    against the same steps run eagerly from the same state."""
    import copy
    _, gpu = _pair(recipe)
    opt = torch.optim.SGD(gpu.parameters(), lr=0.01)
    x = torch.randn(256, 256, device="cuda").to(torch.bfloat16)

    def step(m, o):
        loss = m(x).float().pow(2).mean()
        loss.backward()
        o.step()
        return loss

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            step(gpu, opt)
            opt.zero_grad(set_to_none=True)
        torch.cuda.set_sync_debug_mode("error")
        try:
            step(gpu, opt)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        opt.zero_grad(set_to_none=True)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    twin = copy.deepcopy(gpu)
    topt = torch.optim.SGD(twin.parameters(), lr=0.01)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        sl = step(gpu, opt)
    lg, le = [], []
    for _ in range(3):
        g.replay()
        lg.append(sl.clone())
    for _ in range(3):
        le.append(step(twin, topt).detach())
        topt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(lg, le))
    for a, b in zip(gpu.parameters(), twin.parameters()):
        assert torch.equal(a, b)
    assert torch.equal(gpu[0].precc_state, twin[0].precc_state)


@pytest.mark.skipif(os.environ.get("PRECC_GPU_BENCH") != "1", reason="PRECC_GPU_BENCH=1 runs it")
def test_llama_block_step_time(capsys):
    """Llama-3-8B-shaped linears (4096 -> 4096/1024/14336), random weights:
    one step's time with precc (deepseek_v3, te_delayed_hybrid), bf16
    nn.Linear and an FP8 linear over torch._scaled_mm (torchao's design:
    tensorwise e4m3, fast accumulation)."""
    class FP8Linear(nn.Linear):
        def forward(self, x):
            def q(t):
                s = 448.0 / t.abs().max().float().clamp(min=1e-12)
                return (t.float() * s).clamp(-448, 448).to(torch.float8_e4m3fn), s.reciprocal()
            x2 = x.reshape(-1, x.shape[-1])
            xq, xs = q(x2)
            wq, ws = q(self.weight)
            y = torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16,
                                 use_fast_accum=True)
            return y.reshape(*x.shape[:-1], -1)

    def block(cls=nn.Linear):
        m = nn.ModuleDict({"q_proj": cls(4096, 4096, bias=False), "k_proj": cls(4096, 1024, bias=False),
                           "v_proj": cls(4096, 1024, bias=False), "o_proj": cls(4096, 4096, bias=False),
                           "gate_proj": cls(4096, 14336, bias=False), "up_proj": cls(4096, 14336, bias=False),
                           "down_proj": cls(14336, 4096, bias=False)})
        return m.cuda()

    def step(m, x):
        h = m["o_proj"](m["q_proj"](x) + 0 * m["k_proj"](x).sum() + 0 * m["v_proj"](x).sum())
        h = m["down_proj"](torch.nn.functional.silu(m["gate_proj"](h)) * m["up_proj"](h))
        h.float().pow(2).mean().backward()

    x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
    rows = []
    for name, make in (("bf16 nn.Linear", lambda: block()),
                       ("fp8 _scaled_mm", lambda: block(FP8Linear)),
                       ("precc deepseek_v3", lambda: pt.convert(block(), recipe="deepseek_v3", warn=False)),
                       ("precc te_delayed_hybrid", lambda: pt.convert(block(), recipe="te_delayed_hybrid", warn=False))):
        m = make()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            for _ in range(3):
                step(m, x)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(10):
                step(m, x)
            torch.cuda.synchronize()
        rows.append((name, (time.perf_counter() - t) / 10 * 1e3))
    with capsys.disabled():
        for name, ms in rows:
            print("%-26s %8.2f ms/step (M=8192)" % (name, ms))
