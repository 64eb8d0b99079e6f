"""A second backward over one forward (backward(retain_graph=True)) under
delayed scaling, as Transformer Engine does it (docs/pytorch.md, "A second
backward"): the forward's operands keep the scales they were quantized with
(x.scale_inv and w.scale_inv live in the saved region, as TE saves
scale_inv's clone / the quantized tensors in ctx), dy is quantized with
dy's scale as it is now (the first backward's commit changed it), and the
second commit updates dy's amax history and scale alone: x's and w's rolled
once for their one forward."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import precc.torch as pt  # noqa: E402

K, N, M = 128, 128, 64


def _layer():
    torch.manual_seed(0)
    return pt.convert(nn.Sequential(nn.Linear(K, N, bias=False)), recipe="te_delayed_hybrid",
                      warn=False)


def _views(net):
    return net[0]._precc_group.layouts["0"].views(net[0].precc_state)


def _grads(net, x, dy, retain):
    xg = x.clone().requires_grad_()
    y = net(xg)
    out = []
    for _ in range(2 if retain else 1):
        xg.grad, net[0].weight.grad = None, None
        y.backward(dy, retain_graph=retain)
        out.append((xg.grad.clone(), net[0].weight.grad.clone(),
                    net[0].precc_state.detach().clone()))
    return out


def test_second_backward_is_te_delayed():
    x = torch.randn(M, K).to(torch.bfloat16)
    dy = (torch.randn(M, N) * 3).to(torch.bfloat16)
    a = _layer()
    (dx1, dw1, s1), (dx2, dw2, s2) = _grads(a, x, dy, retain=True)
    va = a[0]._precc_group.layouts["0"].views
    v1, v2 = va(s1), va(s2)
    # the first commit ran once, the second updated dy's state alone
    for n in ("x.amax_history", "x.scale", "w.amax_history", "w.scale"):
        assert torch.equal(v1[n], v2[n]), n
    h1 = v1["dy.amax_history"].reshape(-1)
    h2 = v2["dy.amax_history"].reshape(-1)
    assert int((h1 != 0).sum()) == 1 and int((h2 != 0).sum()) == 2
    assert not torch.equal(v1["dy.scale"], torch.ones_like(v1["dy.scale"]))

    # The reference: a fresh layer whose x and w scales are the forward's (1,
    # fresh) and whose dy scale is the one the first commit made.
    b = _layer()
    vb = _views(b)
    with torch.no_grad():
        vb["dy.scale"].copy_(v1["dy.scale"])
    (rdx, rdw, _), = _grads(b, x, dy, retain=False)
    assert torch.equal(dx2, rdx) and torch.equal(dw2, rdw)
    # and the first backward is that of a fresh layer
    c = _layer()
    (cdx, cdw, _), = _grads(c, x, dy, retain=False)
    assert torch.equal(dx1, cdx) and torch.equal(dw1, cdw)


def test_next_step_after_a_second_backward():
    """After forward, backward, backward (retained), the next step runs
    normally: one forward, one backward, one commit of everything."""
    a = _layer()
    x = torch.randn(M, K).to(torch.bfloat16)
    dy = torch.randn(M, N).to(torch.bfloat16)
    _grads(a, x, dy, retain=True)
    g = a[0]._precc_group
    commits = g.commits
    before = a[0].precc_state.detach().clone()
    y = a(x.clone().requires_grad_())
    y.backward(dy)
    assert g.commits == commits + 1 and not g.pending
    v0 = g.layouts["0"].views(before)
    v1 = _views(a)
    assert int((v1["x.amax_history"] != 0).sum()) == int((v0["x.amax_history"] != 0).sum()) + 1
