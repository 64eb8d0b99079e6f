"""torch.compile captures a converted model whole: the precc custom ops and
their fake-tensor implementations, no graph breaks, the same numbers as
eager."""
import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import precc.torch as pt  # noqa: E402


def model(recipe):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128, bias=False))
    return pt.convert(net, recipe=recipe, warn=False)


@pytest.mark.parametrize("recipe", ["current_tensorwise", "rowwise"])
def test_no_graph_breaks(recipe):
    net = model(recipe)
    x = torch.randn(64, 128, dtype=torch.bfloat16)
    ex = torch._dynamo.explain(lambda t: net(t).float().sum())(x)
    assert ex.graph_break_count == 0 and ex.graph_count == 1, ex.break_reasons
    code = ex.graphs[0].code
    assert code.count("torch.ops.precc.linear") == 2, code


def test_fullgraph_matches_eager():
    torch._dynamo.reset()
    a, b = model("current_tensorwise"), model("current_tensorwise")
    f = torch.compile(lambda t: a(t).float().pow(2).mean(), fullgraph=True, backend="aot_eager")
    for m in (48, 64, 80):  # new M values: the fake impls under dynamic shapes
        x = torch.randn(m, 128, dtype=torch.bfloat16)
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        l1 = f(x1)
        l2 = b(x2).float().pow(2).mean()
        l1.backward()
        l2.backward()
        assert torch.equal(l1, l2)
        assert torch.equal(x1.grad, x2.grad)
        for p, q in zip(a.parameters(), b.parameters()):
            assert torch.equal(p.grad, q.grad)
            p.grad = q.grad = None


def test_compiled_delayed_scaling_updates_state():
    """The deferred commit runs inside the backward op, under compile too."""
    torch._dynamo.reset()
    a, b = model("te_delayed_hybrid"), model("te_delayed_hybrid")
    f = torch.compile(lambda t: a(t).float().pow(2).mean(), fullgraph=True, backend="aot_eager")
    for i in range(3):
        x = torch.randn(64, 128, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(i))
        l1, l2 = f(x), b(x).float().pow(2).mean()
        l1.backward()
        l2.backward()
        assert torch.equal(l1, l2), i
    assert torch.equal(a[0].precc_state, b[0].precc_state)
    assert a[0]._precc_group.commits == 3
