"""The Group's bulk commit (python/precc/torch/_ops.py, Group._commit_bulk):
the eager path's forwards write each layer's fixed saved region, and the
step's commit of every delayed-scaling layer is one
precc_rt_bulk_commit_run over a table of those addresses, made once. Each
test runs the same steps on two copies of a model, one with the bulk
commit and one committing layer by layer (Group.bulk = False, as
PRECC_TORCH_BULK=0), and asserts the same gradients and state, bit for
bit, and that the bulk path ran where it should (or fell back where it
must: a layer run twice in a step, a second backward, an abandoned
forward whose graph still holds the region)."""
import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import precc.torch as pt  # noqa: E402

K, M, L = 64, 32, 4


def _pair(recipe="te_delayed_hybrid"):
    torch.manual_seed(0)
    base = nn.Sequential(*[nn.Linear(K, K, bias=False) for _ in range(L)]).to(torch.bfloat16)
    a = pt.convert(copy.deepcopy(base), recipe=recipe, warn=False)
    b = pt.convert(copy.deepcopy(base), recipe=recipe, warn=False)
    b.precc_group.bulk = False
    return a, b


def _state(net):
    return [m.precc_state.detach().clone() for m in net]


def _equal(a, b):
    for u, v in zip(_state(a), _state(b)):
        assert torch.equal(u, v)
    for u, v in zip(a.parameters(), b.parameters()):
        assert (u.grad is None) == (v.grad is None)
        if u.grad is not None:
            assert torch.equal(u.grad, v.grad)


def _step(net, x, dy, retain=False, backwards=1):
    xg = x.clone().requires_grad_()
    y = net(xg)
    for _ in range(backwards):
        y.backward(dy, retain_graph=retain)
    return xg.grad


def test_bulk_matches_layer_by_layer():
    a, b = _pair()
    ga, gb = a.precc_group, b.precc_group
    for i in range(4):
        x = torch.randn(M, K).to(torch.bfloat16)
        dy = (torch.randn(M, K) * (i + 1)).to(torch.bfloat16)
        assert torch.equal(_step(a, x, dy), _step(b, x, dy))
        _equal(a, b)
    assert ga.bulk_runs == 4 and ga.bulk_layers == 4 * L
    assert gb.bulk_runs == 0 and ga.commits == gb.commits == 4
    assert len(ga.bulks) == 1           # one table, made once, run 4 times
    # the commit did move the state: a test of equal unchanged states proves nothing
    fresh = pt.convert(nn.Sequential(*[nn.Linear(K, K, bias=False) for _ in range(L)])
                       .to(torch.bfloat16), recipe="te_delayed_hybrid", warn=False)
    assert not all(torch.equal(u, v) for u, v in zip(_state(a), _state(fresh)))


def test_two_forwards_of_a_step_commit_in_order():
    """Gradient accumulation in one graph: each layer runs twice before the
    backward; its second forward finds its region taken (a fresh one), and
    its two commits run one by one in the order of the backwards."""
    a, b = _pair()
    for _ in range(2):
        x1, x2 = (torch.randn(M, K).to(torch.bfloat16) for _ in range(2))
        dy = torch.randn(M, K).to(torch.bfloat16)
        for net in (a, b):
            (net(x1.clone().requires_grad_()) + 2 * net(x2.clone().requires_grad_())).backward(dy)
        _equal(a, b)
    assert a.precc_group.bulk_runs == 0


def test_second_backward_then_bulk_again():
    a, b = _pair()
    x = torch.randn(M, K).to(torch.bfloat16)
    dy = torch.randn(M, K).to(torch.bfloat16)
    assert torch.equal(_step(a, x, dy, retain=True, backwards=2),
                       _step(b, x, dy, retain=True, backwards=2))
    _equal(a, b)
    runs = a.precc_group.bulk_runs
    assert runs == 1      # the first backward's commit; the second updates dy's state alone
    for _ in range(2):
        assert torch.equal(_step(a, x, dy), _step(b, x, dy))
        _equal(a, b)
    assert a.precc_group.bulk_runs == runs + 2


def test_abandoned_forward_region_comes_back():
    a, b = _pair()
    x = torch.randn(M, K).to(torch.bfloat16)
    dy = torch.randn(M, K).to(torch.bfloat16)
    for net in (a, b):
        _step(net, x, dy)
        y = net(x.clone().requires_grad_())   # no backward: its graph holds the regions
        if net is a:
            held = [m._precc_group.program(m.precc_fqn, x.device).slots[x.device][0]
                    ._use_count() for m in net]
        _step(net, x, dy)                     # fresh regions, commits one by one
        del y                                 # the graph goes: the regions are free again
        _step(net, x, dy)
        _step(net, x, dy)
    assert held == [2] * L
    _equal(a, b)
    assert a.precc_group.bulk_runs >= 2


def test_recipe_without_state_makes_no_bulk():
    a, _ = _pair("current_tensorwise")
    x = torch.randn(M, K).to(torch.bfloat16)
    _step(a, x, torch.randn(M, K).to(torch.bfloat16))
    assert a.precc_group.bulk_runs == 0 and not a.precc_group.bulks
