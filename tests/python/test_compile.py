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


def _block(recipe):
    """tests/gpu/torch_step.py's Llama-style block (RMSNorm, GQA attention
    with RoPE, SwiGLU) at its dry-run size, bf16, converted."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
    import torch_step
    Block = torch_step.make_block_classes(torch, nn, torch.nn.functional)
    torch.manual_seed(0)
    b = Block(dict(torch_step.TINY)).to(torch.bfloat16)
    x = torch.randn(1, 32, 128, dtype=torch.bfloat16)
    return pt.convert(b, recipe=recipe, warn=False, example_inputs=x)


def test_block_step_no_graph_breaks():
    """A converted block's forward and backward in one traced function:
    dynamo captures it whole (with trace_autograd_ops, the backward inside
    the function), every linear as precc::linear; compiled (fullgraph,
    aot_eager) it gives the eager losses, gradients and delayed-scaling
    state bit for bit."""
    import copy
    torch._dynamo.reset()
    a = _block("te_delayed_hybrid")
    b = copy.deepcopy(a)    # the same Group: one model's artifacts

    def step_of(m):
        def step(t):
            loss = m(t).float().pow(2).mean()
            loss.backward()
            return loss.detach()
        return step

    x = torch.randn(1, 32, 128, dtype=torch.bfloat16)
    with torch._dynamo.config.patch(trace_autograd_ops=True):
        ex = torch._dynamo.explain(step_of(copy.deepcopy(a)))(x)
        assert ex.graph_break_count == 0 and ex.graph_count == 1, ex.break_reasons
        assert ex.graphs[0].code.count("precc.linear(") == 7, ex.graphs[0].code
        torch._dynamo.reset()
        f = torch.compile(step_of(a), backend="aot_eager", fullgraph=True)
        g = step_of(b)
        for i in range(3):
            xi = torch.randn(1, 32, 128, dtype=torch.bfloat16,
                             generator=torch.Generator().manual_seed(i))
            assert torch.equal(f(xi), g(xi)), i
            for p, q in zip(a.parameters(), b.parameters()):
                assert torch.equal(p.grad, q.grad), i
                p.grad = q.grad = None
    for (n, s), (_, t) in zip(a.named_buffers(), b.named_buffers()):
        if n.endswith("precc_state"):
            assert torch.equal(s, t), n
