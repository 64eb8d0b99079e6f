"""Linears that read one tensor (q, k and v): k and v take q's quantized
copy of x (precc_rt_forward_shared, runtime/share.c) when q's last forward
saw this very x, and training comes out bit for bit as without sharing."""
import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import precc.torch as pt  # noqa: E402


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(128, 128, bias=False)
        self.k = nn.Linear(128, 128, bias=False)
        self.v = nn.Linear(128, 256, bias=False)
        self.o = nn.Linear(128, 128, bias=False)

    def forward(self, h):
        q, k, v = self.q(h), self.k(h), self.v(h)
        return self.o(q * k + v[..., :128] - v[..., 128:])


class VFirst(Attn):
    """v runs before q, its root in the model description: v quantizes x
    itself (q has not yet), k shares."""

    def forward(self, h):
        v = self.v(h)
        return self.o(self.q(h) * self.k(h) + v[..., :128] - v[..., 128:])


def _train(net, x, steps=3):
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    ys, grads = [], []
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = net(x)
        y.float().square().mean().backward()
        ys.append(y.detach().clone())
        grads.append([p.grad.clone() for p in net.parameters()])
        opt.step()
    return ys, grads


@pytest.mark.parametrize("recipe", ["te_delayed_hybrid", "current_tensorwise", "deepseek_v3",
                                    "mxfp8", "bf16"])
def test_shared_equals_unshared(recipe):
    torch.manual_seed(1)
    base = Attn()
    x = torch.randn(4, 32, 128) * 3
    nets = [copy.deepcopy(base), copy.deepcopy(base)]
    for n in nets:
        pt.convert(n, recipe=recipe, example_inputs=x)
    g0, g1 = nets[0].q._precc_group, nets[1].q._precc_group
    assert g0 is not g1
    sharing = recipe != "bf16"   # bf16 quantizes no x: nothing to share
    assert nets[0].k._precc_root == ("q" if sharing else None)
    assert nets[0].v._precc_root == ("q" if sharing else None)
    assert nets[0].o._precc_root is None and nets[0].q._precc_root is None
    g1.sharers.clear()           # the second net never shares
    a, b = _train(nets[0], x), _train(nets[1], x)
    assert g0.shared_forwards == (2 * 3 if sharing else 0)
    assert g1.shared_forwards == 0
    for ya, yb in zip(a[0], b[0]):
        assert torch.equal(ya, yb)
    for ga, gb in zip(a[1], b[1]):
        for p, q in zip(ga, gb):
            assert torch.equal(p, q)
    for m in ("q", "k", "v", "o"):
        assert torch.equal(getattr(nets[0], m).precc_state, getattr(nets[1], m).precc_state)
    # every sharer took q's x: the group holds no reference to it
    assert not g0.shared_inputs


def test_root_runs_later():
    torch.manual_seed(3)
    net = VFirst()
    x = torch.randn(2, 64, 128)
    pt.convert(net, recipe="deepseek_v3", example_inputs=x)
    assert (net.k._precc_root, net.v._precc_root) == ("q", "q")
    g = net.q._precc_group
    _train(net, x, steps=2)
    assert g.shared_forwards == 2        # k, each step; v ran before q
    # q's x waits for v (its use count): one tensor per root at most
    assert set(g.shared_inputs) <= {"q"}


def test_other_x_is_not_shared():
    torch.manual_seed(2)
    net = Attn()
    x = torch.randn(64, 128)
    pt.convert(net, recipe="current_tensorwise", example_inputs=x)
    g = net.q._precc_group
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        xb = x.to(torch.bfloat16)
        net.q(xb)
        yk = net.k(xb.clone())           # another tensor: quantized again
        assert g.shared_forwards == 0
        yk2 = net.k(xb)                  # q's x: shared
        assert g.shared_forwards == 1
        assert torch.equal(yk, yk2)
        xb.add_(1)                       # changed in place since q saw it
        net.v(xb)
        assert g.shared_forwards == 1
