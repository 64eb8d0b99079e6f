"""Delayed-scaling amaxes reduced across data-parallel ranks: 2 processes
over gloo on the CPU, DDP or FSDP2 (fully_shard) around a converted model,
different data per rank. Each training step makes exactly one
all_reduce(MAX) for all layers' amaxes, both ranks end with the same state,
whose amax history holds the larger of the two ranks' amaxes, and the same
gradients and parameters; FSDP2 (each rank quantizes the all-gathered
weight) trains as DDP does (docs/pytorch.md, "Distributed")."""
import os
import socket

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402

STEPS = 3


def _full(t):
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _leave():
    """A worker's end once its results are written: os._exit, without the
    interpreter's teardown. There torch's gloo ProcessGroup (held by DDP's
    Reducer) can deadlock in its destructor: the main thread, holding the
    GIL, waits for the group's worker thread, which waits for the GIL to
    drop a Python object of an AsyncWork's ThreadLocalState (seen once in
    ctest: one rank hung in ~ProcessGroupGloo for 10 minutes, py-spy)."""
    import sys
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _worker(rank, world, port, out, mode="ddp", recipe="te_delayed_hybrid"):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        import precc.torch as pt
        torch.manual_seed(0)
        net = pt.convert(nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128)),
                         recipe=recipe, warn=False)
        if mode == "ddp":
            model = nn.parallel.DistributedDataParallel(net)
        else:   # FSDP2: each linear its own unit, then the root
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard
            mesh = init_device_mesh("cpu", (world,))
            fully_shard(net[0], mesh=mesh)
            fully_shard(net[2], mesh=mesh)
            model = fully_shard(net, mesh=mesh)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        # Count our all_reduces: MAX ones (DDP's gradient buckets are SUM).
        calls = []
        real = dist.all_reduce

        def counting(t, op=dist.ReduceOp.SUM, *a, **k):
            if op == dist.ReduceOp.MAX:
                calls.append(t.numel())
            return real(t, op, *a, **k)
        dist.all_reduce = counting
        x_amax = []
        per_step = []
        grads = []
        for i in range(STEPS):
            g = torch.Generator().manual_seed(10 * i + rank)
            x = torch.randn(32, 128, generator=g) * (1 + 3 * rank)  # rank 1: larger amaxes
            x_amax.append(x.to(torch.bfloat16).float().abs().max().item())
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            opt.zero_grad()
            n0 = len(calls)
            loss.backward()
            per_step.append(len(calls) - n0)
            dist.all_reduce = real   # (FSDP2's full_tensor gathers)
            grads.append([_full(p.grad).clone() for p in model.parameters()])
            dist.all_reduce = counting
            opt.step()
        dist.all_reduce = real
        views = net[0]._precc_group.layouts["0"].views(net[0].precc_state)
        torch.save({"state": [m.precc_state.clone() for m in (net[0], net[2])],
                    "hist": views.get("x.amax_history", torch.zeros(0)).clone(), "x_amax": x_amax,
                    "per_step": per_step, "calls": calls, "grads": grads,
                    "params": [_full(p.detach()).clone() for p in model.parameters()],
                    "group_calls": net[0]._precc_group.allreduce_calls},
                   os.path.join(out, "rank%d.pt" % rank))
    finally:
        dist.destroy_process_group()
    _leave()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path, mode, recipe="te_delayed_hybrid"):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    out = tmp_path / mode
    out.mkdir()
    mp.start_processes(_worker, args=(2, _free_port(), str(out), mode, recipe), nprocs=2,
                       start_method="spawn")
    return [torch.load(out / ("rank%d.pt" % i)) for i in range(2)]


def _agree(r):
    """Both ranks: the same state, gradients at every step, parameters."""
    for a, b in zip(r[0]["state"], r[1]["state"]):
        assert torch.equal(a, b)
    for s in range(STEPS):
        for a, b in zip(r[0]["grads"][s], r[1]["grads"][s]):
            assert torch.equal(a, b), s
    for a, b in zip(r[0]["params"], r[1]["params"]):
        assert torch.equal(a, b)


def _amax_reduced(r, layers=2):
    for i in range(2):
        # One all_reduce per step, of every layer's x, w and dy amaxes (2 layers x 3).
        assert r[i]["per_step"] == [1] * STEPS, r[i]["per_step"]
        assert r[i]["calls"] == [3 * layers] * STEPS and r[i]["group_calls"] == STEPS
    hist = r[0]["hist"].reshape(-1)
    want = sorted(max(a, b) for a, b in zip(r[0]["x_amax"], r[1]["x_amax"]))
    assert sorted(hist[hist != 0].tolist()) == want
    assert want != sorted(r[0]["x_amax"])  # rank 0 alone would have recorded less


def test_ddp_amax_all_reduce(tmp_path):
    r = _run(tmp_path, "ddp")
    _amax_reduced(r)
    _agree(r)


def test_fsdp2_amax_all_reduce(tmp_path):
    """FSDP2 shards the weights; each rank's forward quantizes the
    all-gathered weight, so the scaling state is DDP's, and the steps
    agree with DDP's to fp32 rounding of the gradient reduction."""
    pytest.importorskip("torch.distributed.fsdp").fully_shard
    r = _run(tmp_path, "fsdp2")
    _amax_reduced(r)
    _agree(r)
    d = _run(tmp_path, "ddp")
    for a, b in zip(r[0]["state"], d[0]["state"]):
        assert torch.equal(a, b)
    for a, b in zip(r[0]["params"], d[0]["params"]):
        assert (a - b).abs().max() <= 1e-6 * b.abs().max(), (a - b).abs().max()


def test_fsdp2_current_scaling(tmp_path):
    """Current scaling keeps no state and reduces nothing; FSDP2 trains as
    DDP does."""
    r = _run(tmp_path, "fsdp2", "current_tensorwise")
    for i in range(2):
        assert r[i]["calls"] == [] and r[i]["group_calls"] == 0
    _agree(r)
    d = _run(tmp_path, "ddp", "current_tensorwise")
    for a, b in zip(r[0]["params"], d[0]["params"]):
        assert (a - b).abs().max() <= 1e-6 * b.abs().max(), (a - b).abs().max()
