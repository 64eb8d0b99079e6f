"""Delayed-scaling state: part of state_dict, round trips through
torch.save/load and precc's own state file, and a run resumed from it
continues bit for bit."""
import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import precc  # noqa: E402
import precc.torch as pt  # noqa: E402


def make(recipe="te_delayed_hybrid", seed=0):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128))
    return pt.convert(net, recipe=recipe, warn=False)


def step(net, opt, i):
    g = torch.Generator().manual_seed(100 + i)
    x = torch.randn(32, 128, generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = net(x).float().pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def test_state_dict_round_trip(tmp_path):
    a = make()
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
    for i in range(3):
        step(a, opt_a, i)
    sd = a.state_dict()
    assert {"0.precc_state", "2.precc_state"} <= set(sd)
    views = a[0]._precc_group.layouts["0"].views(a[0].precc_state)
    assert (views["x.amax_history"] != 0).sum() == 3 and views["x.scale"].item() != 1.0
    torch.save({"model": sd, "opt": opt_a.state_dict()}, tmp_path / "ck.pt")
    b = make(seed=1)  # other weights, fresh state
    assert not torch.equal(b[0].precc_state, a[0].precc_state)
    ck = torch.load(tmp_path / "ck.pt")
    b.load_state_dict(ck["model"])
    opt_b = torch.optim.SGD(b.parameters(), lr=0.1)
    opt_b.load_state_dict(ck["opt"])
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k
    # Resumed: the same losses, weights and state, bit for bit.
    for i in range(3, 5):
        assert step(a, opt_a, i) == step(b, opt_b, i)
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k


def test_plain_checkpoint_loads():
    """A plain nn.Linear checkpoint has no precc_state: strict load works
    and the state stays fresh."""
    plain = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128))
    net = make()
    fresh = net[0].precc_state.clone()
    net.load_state_dict(plain.state_dict(), strict=True)
    assert torch.equal(net[0].weight, plain[0].weight) and torch.equal(net[0].precc_state, fresh)


def test_precc_state_file(tmp_path):
    a = make()
    opt = torch.optim.SGD(a.parameters(), lr=0.1)
    for i in range(2):
        step(a, opt, i)
    p = tmp_path / "scaling.pst"
    pt.save_state(a, str(p))
    b = make()
    pt.load_state(b, str(p))
    vb, va = (m[0]._precc_group.layouts["0"].views(m[0].precc_state) for m in (b, a))
    for n in ("x.amax_history", "x.scale", "w.scale", "dy.amax_history", "dy.scale"):
        assert torch.equal(va[n], vb[n]), n
    # One flipped byte: the checksum catches it and nothing is changed.
    raw = bytearray(p.read_bytes())
    raw[100] ^= 1
    (tmp_path / "bad.pst").write_bytes(bytes(raw))
    c = make()
    before = c[0].precc_state.clone()
    with pytest.raises(precc.Error, match="checksum mismatch"):
        pt.load_state(c, str(tmp_path / "bad.pst"))
    assert torch.equal(c[0].precc_state, before)
    # Another model's file is refused by name.
    torch.manual_seed(0)
    other = pt.convert(nn.Sequential(nn.Linear(128, 128)), recipe="te_delayed_hybrid")
    with pytest.raises(precc.Error, match="model mismatch"):
        pt.load_state(other, str(p))


def _nvfp4_run(net, opt, steps):
    return [step(net, opt, i) for i in steps]


def _same_model(a, b):
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k


@pytest.mark.parametrize("via", ["state_dict", "state_file"])
def test_nvfp4_resume_bit_exact(tmp_path, via):
    """nvfp4 rounds gradients stochastically with a seed per call drawn from
    the model's counter: a run resumed from a checkpoint (state_dict, or
    precc's state file beside the weights) continues bit for bit, and the
    counter is what makes it so (without it the resumed run differs)."""
    a = make("nvfp4")
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
    _nvfp4_run(a, opt_a, range(3))
    assert a.precc_group.calls > 0
    sd = {k: v.clone() for k, v in a.state_dict().items()}
    calls = a.precc_group.calls
    ck = {"model": sd, "opt": copy.deepcopy(opt_a.state_dict())}
    if via == "state_file":
        pt.save_state(a, str(tmp_path / "s.pst"))
    want = _nvfp4_run(a, opt_a, range(3, 6))

    def resumed(counter):
        b = make("nvfp4", seed=1)
        model = dict(ck["model"])
        if via == "state_file":
            model.pop("precc_sr_counter", None)
        b.load_state_dict(model)
        if via == "state_file":
            pt.load_state(b, str(tmp_path / "s.pst"))
        if not counter:
            b.precc_group.calls = 0   # what a checkpoint without it restored
        opt_b = torch.optim.SGD(b.parameters(), lr=0.1)
        opt_b.load_state_dict(ck["opt"])
        return b, _nvfp4_run(b, opt_b, range(3, 6))

    b, got = resumed(True)
    assert got == want
    _same_model(a, b)
    assert sd["precc_sr_counter"].item() == calls
    c, lost = resumed(False)
    assert lost != want or any(not torch.equal(v, c.state_dict()[k])
                               for k, v in a.state_dict().items())
