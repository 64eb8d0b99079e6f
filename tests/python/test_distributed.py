"""Delayed-scaling amaxes reduced across data-parallel ranks: 2 processes
over gloo on the CPU, DDP around a converted model, different data per
rank. Each training step makes exactly one all_reduce(MAX) for all layers'
amaxes, and both ranks end with the same state, whose amax history holds
the larger of the two ranks' amaxes."""
import os
import socket

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402

STEPS = 3


def _worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        import precc.torch as pt
        torch.manual_seed(0)
        net = pt.convert(nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128)),
                         recipe="te_delayed_hybrid", warn=False)
        model = nn.parallel.DistributedDataParallel(net)
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
            opt.step()
        dist.all_reduce = real
        views = net[0]._precc_group.layouts["0"].views(net[0].precc_state)
        torch.save({"state": [m.precc_state for m in (net[0], net[2])],
                    "hist": views["x.amax_history"].clone(), "x_amax": x_amax,
                    "per_step": per_step, "calls": calls,
                    "group_calls": net[0]._precc_group.allreduce_calls},
                   os.path.join(out, "rank%d.pt" % rank))
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_amax_all_reduce(tmp_path):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    mp.start_processes(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2,
                       start_method="spawn")
    r = [torch.load(tmp_path / ("rank%d.pt" % i)) for i in range(2)]
    for i in range(2):
        # One all_reduce per step, of every layer's x, w and dy amaxes (2 layers x 3).
        assert r[i]["per_step"] == [1] * STEPS, r[i]["per_step"]
        assert r[i]["calls"] == [6] * STEPS and r[i]["group_calls"] == STEPS
    for a, b in zip(r[0]["state"], r[1]["state"]):
        assert torch.equal(a, b)
    hist = r[0]["hist"].reshape(-1)
    want = sorted(max(a, b) for a, b in zip(r[0]["x_amax"], r[1]["x_amax"]))
    assert sorted(hist[hist != 0].tolist()) == want
    assert want != sorted(r[0]["x_amax"])  # rank 0 alone would have recorded less
