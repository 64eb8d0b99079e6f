"""torch.set_num_threads reaches the cpu backend (precc.runtime passes
torch.get_num_threads() to precc_interp_set_threads before a call when it
changed), and a training step is bit for bit the same at 1, 2 and 3
threads (threads own output tiles and rows; K is never split)."""
import copy
import ctypes

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import precc.torch as pt  # noqa: E402
from precc import _lib  # noqa: E402


def _step(net, x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = net(x)
    y.float().square().mean().backward()
    return [y.detach().clone()] + [p.grad.clone() for p in net.parameters()]


@pytest.mark.parametrize("recipe", ["current_tensorwise", "rowwise"])
def test_threads_bit_identical(recipe):
    lib = _lib.load()
    lib.precc_interp_threads.restype = ctypes.c_int
    lib.precc_interp_threads.argtypes = [ctypes.c_int]
    saved = torch.get_num_threads()
    torch.manual_seed(2)
    # large enough that the GEMMs and element-wise kernels split
    base = nn.Sequential(nn.Linear(512, 768, bias=False), nn.Linear(768, 512, bias=False))
    x = torch.randn(512, 512)
    outs = []
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            net = pt.convert(copy.deepcopy(base), recipe=recipe, warn=False)
            outs.append(_step(net, x))
            assert lib.precc_interp_threads(0) == n
    finally:
        torch.set_num_threads(saved)
    for o in outs[1:]:
        for a, b in zip(outs[0], o):
            assert torch.equal(a, b)
