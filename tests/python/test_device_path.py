"""The CUDA path of precc.torch.Linear, as far as a machine without a GPU
can check it (test_cuda.py runs it for real where torch sees a device):

- the runtime is chosen by the tensors' device (one per device), and the
  stream precc_rt launches on is torch's current stream of that device,
  passed to every forward, backward and commit;
- a training step only enqueues work: over tests/runtime's counting fake
  driver (the cuda backend with FAKE_CUDA_ANY_POINTER=1, the CPU tensors'
  addresses taken as device memory) forward, backward and the commit make
  no allocation, synchronous copy or sync of the driver, and torch no host
  sync (no .item(), no bool of a tensor: aten._local_scalar_dense);
- the workspace is shared on a stream, and fresh under CUDA graph capture;
- bad input: a CUDA tensor for a libprecc_rt that cannot run its cuda
  backend, tensors on another device than the layer's state or weight, a
  device precc has no backend for."""
import contextlib
import os
import subprocess
import sys
import types

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import precc.torch as pt  # noqa: E402
from precc import _lib  # noqa: E402
from precc.torch import _ops  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _net(recipe="te_delayed_hybrid"):
    torch.manual_seed(0)
    return pt.convert(nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128)),
                      recipe=recipe, warn=False)


def _fake_driver():
    lib = os.path.dirname(_lib.find_library())
    return os.path.join(lib, "tests", "runtime", "libprecc_fake_cuda_count.so")


def test_stream_of_device(monkeypatch):
    asked = []

    def current_stream(dev=None):
        asked.append(dev)
        return types.SimpleNamespace(cuda_stream=0x5EED0 + (dev.index or 0))
    monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
    assert _ops._stream_of(torch.device("cuda", 1)) == 0x5EED1
    assert asked == [torch.device("cuda", 1)]
    assert _ops._stream_of(torch.device("cpu")) is None and len(asked) == 1


@pytest.mark.parametrize("bulk", [False, True])
def test_stream_reaches_every_entry(monkeypatch, bulk):
    """forward, backward and commit each get the stream of their tensors'
    device, in the argument precc_rt reads it from; the commit of both
    layers is one bulk call (Group._commit_bulk) unless bulk is off."""
    net = _net()
    net.precc_group.bulk = bulk
    seen = {"forward": [], "backward": [], "commit": []}
    real_run = _ops.BulkCommit.run

    def bulk_run(self, stream=None):
        seen["commit"].append(stream)
        return real_run(self, None)
    monkeypatch.setattr(_ops.BulkCommit, "run", bulk_run)
    for lin in (net[0], net[2]):
        plan = lin._precc_group.program(lin.precc_fqn, torch.device("cpu"))
        for attr, name, pos in (("_cf", "forward", 11), ("_cb", "backward", 13),
                                ("_cc", "commit", 5)):
            real = getattr(plan, attr)

            def rec(*a, real=real, name=name, pos=pos):
                seen[name].append(a[pos])
                a = list(a)
                a[pos] = None    # the cpu backend runs it
                return real(*a)
            monkeypatch.setattr(plan, attr, rec)
    monkeypatch.setattr(_ops, "_stream_of", lambda dev: 0xC0FFEE)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    x = torch.randn(32, 128, dtype=torch.bfloat16, requires_grad=True)
    net(x).float().sum().backward()
    assert seen == {"forward": [0xC0FFEE] * 2, "backward": [0xC0FFEE] * 2,
                    "commit": [0xC0FFEE] * (1 if bulk else 2)}
    assert net.precc_group.bulk_runs == (1 if bulk else 0)


def test_runtime_by_device(monkeypatch):
    """A CUDA tensor opens the cuda backend for its own device, once."""
    net = _net("current_tensorwise")
    g = net.precc_group
    opened = []

    def open_cuda(artifacts, device):
        opened.append(device)
        return _ops.Runtime(artifacts, "cpu")
    monkeypatch.setattr(_ops, "_open_cuda", open_cuda)
    p1 = g.program("0", torch.device("cuda", 1))
    assert g.program("0", torch.device("cuda", 1)) is p1
    assert opened == [torch.device("cuda", 1)]
    assert p1 is not g.program("0", torch.device("cpu"))
    g.program("2", torch.device("cuda", 1))
    assert opened == [torch.device("cuda", 1)]


def test_cuda_tensor_for_a_cpu_only_precc_rt(monkeypatch):
    """precc_rt cannot open its cuda backend (no driver here; a build
    without cuda.h says so the same way): refused, naming the device, the
    library and the reason. Run in a process of its own, where no driver
    was loaded before."""
    code = ("import torch, contextlib, precc.torch as pt\n"
            "from precc.torch import _ops\n"
            "from torch import nn\n"
            "_ops._cuda_context = lambda idx: contextlib.nullcontext()\n"
            "net = pt.convert(nn.Sequential(nn.Linear(64, 64)), recipe='current_tensorwise', "
            "warn=False)\n"
            "try:\n"
            "    net.precc_group.runtime(torch.device('cuda', 0))\n"
            "except pt.Error as e:\n"
            "    print('ERROR', e)\n")
    env = dict(os.environ, PRECC_LIBCUDA="/nonexistent/libcuda.so.1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    line = [l for l in r.stdout.splitlines() if l.startswith("ERROR")]
    assert line, r.stdout + r.stderr
    msg = line[0]
    assert "tensors on cuda:0, but this libprecc_rt" in msg, msg
    assert "cannot run its cuda backend" in msg and "cannot load" in msg, msg


def test_tensors_on_another_device():
    net = _net("current_tensorwise")
    lin = net[0]
    x = torch.randn(8, 128, dtype=torch.bfloat16)
    with pytest.raises(pt.Error, match=r"input on meta, weight on cpu"):
        lin(x.to("meta"))
    state = lin.precc_state
    lin.precc_state = state.to("meta")
    with pytest.raises(pt.Error, match=r"precc_state on meta, input on cpu \(move the whole module\)"):
        lin(x)
    lin.precc_state = state
    lin(x)   # back on one device: runs
    # a device precc has no backend for
    with pytest.raises(pt.Error, match=r"tensors on meta: precc runs on cpu or cuda tensors"):
        net.precc_group.runtime(torch.device("meta"))


def test_workspace_shared_and_fresh_under_capture(monkeypatch):
    net = _net("current_tensorwise")
    plan = net.precc_group.program("0", torch.device("cpu"))
    dev = torch.device("cpu")
    a = plan.workspace(dev, None, 1000)
    assert plan.workspace(dev, None, 500) is a
    b = plan.workspace(dev, None, 4000)          # grows
    assert b.numel() >= 4000 and plan.workspace(dev, None, 1000) is b
    # a CUDA stream being captured: a fresh buffer (the graph's pool), the
    # cached one untouched
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    c = plan.workspace(dev, 0x1234, 100)
    d = plan.workspace(dev, 0x1234, 100)
    assert c is not d and (dev, 0x1234) not in plan.ws_cache
    assert plan.workspace(dev, None, 1000) is b   # no stream: no capture


class _NoHostSync(torch.utils._python_dispatch.TorchDispatchMode):
    """Fails on the one op every host read of a tensor's value goes
    through (.item(), bool(t), int(t), .tolist() of a scalar...)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            raise AssertionError("host sync: %s" % func)
        return func(*args, **(kwargs or {}))


def _cuda_on_fake(g):
    """Swaps group g's cpu runtime for the cuda backend, which this process
    runs over the counting fake driver; returns it."""
    cpu = g.runtimes[("cpu", None)]
    rt = _ops.Runtime(cpu.dir, "cuda")
    assert "fake" in rt.why, rt.why
    g.runtimes[("cpu", None)] = rt
    g.reset_plans()
    return rt


def _counts_on_fake(fn, recipe):
    """Runs this module's fn(recipe) in a process on the counting fake
    driver (skips where it was not built); returns its COUNTS line."""
    fake = _fake_driver()
    if not os.path.isfile(fake):
        pytest.skip("no %s (built only where cuda.h was found)" % fake)
    env = dict(os.environ, PRECC_LIBCUDA=fake, FAKE_CUDA_ANY_POINTER="1",
               PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("FAKE_CUDA_MANIFEST", None)
    r = subprocess.run([sys.executable, "-c", "import test_device_path as t; t.%s(%r)" % (fn, recipe)],
                       env=env, capture_output=True, text=True, timeout=300, cwd=HERE)
    line = [l for l in r.stdout.splitlines() if l.startswith("COUNTS")]
    assert r.returncode == 0 and line, r.stdout + r.stderr
    return line[0]


def _fake_step(recipe):
    """In a process with PRECC_LIBCUDA=the counting fake: three training
    steps over the cuda backend; prints the blocking driver calls and the
    launches of steps 2-3, the commits and the bulk commits."""
    import ctypes
    fake = ctypes.CDLL(os.environ["PRECC_LIBCUDA"])
    net = _net(recipe)
    g = net.precc_group
    rt = _cuda_on_fake(g)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(64, 128, dtype=torch.bfloat16)

    def boom(*a, **k):
        raise AssertionError("torch.cuda.synchronize in a step")
    torch.cuda.synchronize = boom
    for i in range(3):
        if i == 1:
            fake.fake_count_reset()
        with _NoHostSync():
            loss = net(x).float().pow(2).mean()
            loss.backward()
        opt.step()
        opt.zero_grad()
    print("COUNTS", fake.fake_count_blocking(), fake.fake_count_launches(), g.commits,
          g.bulk_runs)


@pytest.mark.parametrize("recipe", ["te_delayed_hybrid", "current_tensorwise"])
def test_step_only_enqueues(recipe):
    line = _counts_on_fake("_fake_step", recipe)
    blocking, launches, commits, bulk_runs = map(int, line.split()[1:])
    assert blocking == 0, line
    assert launches > 0
    assert commits == (3 if recipe == "te_delayed_hybrid" else 0)
    # the commits were bulk ones: the table written in step 1, steps 2-3 only launch
    assert bulk_runs == commits, line


def _fake_experts_step(recipe):
    """In a process with PRECC_LIBCUDA=the counting fake: a Mixtral block's
    GroupedExperts on the cuda backend, three training steps through the
    grouped calls; prints the blocking driver calls of steps 2-3 and the
    grouped forwards."""
    import ctypes
    from test_experts import Block, FusedExperts
    fake = ctypes.CDLL(os.environ["PRECC_LIBCUDA"])
    torch.manual_seed(0)
    blk = pt.convert(Block(FusedExperts(8, 128, 128)), recipe=recipe, warn=False)
    g = blk.precc_group
    rt = _cuda_on_fake(g)
    steps = blk.experts.grouped_steps(torch.device("cpu"))
    assert not isinstance(steps, str) and steps[0].rt is rt, steps
    x = torch.randn(2, 37, 128)
    for i in range(3):
        if i == 1:
            fake.fake_count_reset()
        with _NoHostSync():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = blk(x)
            y.float().pow(2).mean().backward()
        blk.zero_grad()
    counts = fake.fake_count_blocking(), fake.fake_count_launches()
    rt.sync()
    rt.grouped_check()   # the offsets the calls enqueued, checked after the sync
    print("COUNTS", counts[0], counts[1], blk.experts.precc_grouped_calls)


@pytest.mark.parametrize("recipe", ["bf16", "deepseek_v3"])
def test_grouped_experts_only_enqueue(recipe):
    """GroupedExperts' grouped path on the cuda backend: no host read of a
    tensor (the offsets and rows computed on the device), no allocation,
    synchronous copy or sync of the driver; the offsets well formed
    (precc_rt_grouped_check after the sync)."""
    line = _counts_on_fake("_fake_experts_step", recipe)
    blocking, launches, grouped = map(int, line.split()[1:])
    assert blocking == 0, line
    assert launches > 0 and grouped == 3, line
