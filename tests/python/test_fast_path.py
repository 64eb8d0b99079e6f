"""The eager path's one-frame call (python/precc/torch/_ops.py,
ApiPlan.eager_forward / eager_backward): the common call (M a multiple of
the plan's, contiguous aligned x, w and dy, no shared input) skips the
general path's frames. Each test runs the same steps on two copies of a
model, one with the one-frame call and one forced onto the general path,
and asserts the same outputs, gradients and state bit for bit, and that
each copy took the path it should (the autograd node says which)."""
import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import precc.torch as pt  # noqa: E402
from precc.torch import _ops  # noqa: E402

K, L = 128, 3


def _general(monkeypatch):
    monkeypatch.setattr(_ops.ApiPlan, "eager_forward", lambda *a: None)


def _nets(recipe, bias=False):
    torch.manual_seed(0)
    base = nn.Sequential(*[nn.Linear(K, K, bias=bias) for _ in range(L)]).to(torch.bfloat16)
    return (pt.convert(copy.deepcopy(base), recipe=recipe, warn=False),
            pt.convert(copy.deepcopy(base), recipe=recipe, warn=False))


def _run(net, x, dy, fast):
    xg = x.clone().requires_grad_()
    y = net(xg)
    assert y.grad_fn.fast is fast
    y.backward(dy)
    return y.detach(), xg.grad


@pytest.mark.parametrize("recipe", ["te_delayed_hybrid", "current_tensorwise", "deepseek_v3",
                                    "bf16"])
@pytest.mark.parametrize("m", [32, 128, 37])
def test_fast_equals_general(monkeypatch, recipe, m):
    a, b = _nets(recipe, bias=recipe == "bf16")
    mult = a[0]._precc_group.program(a[0].precc_fqn, torch.device("cpu")).m_multiple
    fast = m % mult == 0     # else a pad: the general path
    for i in range(3):
        x = torch.randn(m, K).to(torch.bfloat16)
        dy = (torch.randn(m, K) * (i + 1)).to(torch.bfloat16)
        ya, ga = _run(a, x, dy, fast)
        with monkeypatch.context() as mp:
            _general(mp)
            yb, gb = _run(b, x, dy, False)
        assert torch.equal(ya, yb) and torch.equal(ga, gb)
        for u, v in zip(a.parameters(), b.parameters()):
            assert torch.equal(u.grad, v.grad)
        for u, v in zip(a.buffers(), b.buffers()):
            assert torch.equal(u, v)


def test_unaligned_input_takes_general_path():
    a, _ = _nets("current_tensorwise")
    x = torch.randn(32 * K + 1, dtype=torch.bfloat16)[1:].view(32, K)   # 2 bytes off
    assert x.data_ptr() % 16
    y = a[0](x.requires_grad_())
    assert y.grad_fn.fast is False
    xt = torch.randn(K, 32, dtype=torch.bfloat16).t().requires_grad_()   # not contiguous
    assert a[0](xt).grad_fn.fast is False
