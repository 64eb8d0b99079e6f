"""precc.torch.convert: what it swaps, what it keeps and why, the model
description it writes, prebuilt artifacts, bad input, and the layer's
results against torch's own linear."""
import json
import os
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import precc  # noqa: E402
import precc.torch as pt  # noqa: E402
from precc import compiler  # noqa: E402
from precc.torch import _ops  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(256, 128)
        self.q = nn.Linear(128, 128, bias=False)
        self.k = nn.Linear(128, 128, bias=False)
        self.up = nn.Linear(128, 256)
        self.odd = nn.Linear(256, 100)          # 100: no fp8 policy takes it
        self.down = nn.Linear(100, 128)
        self.head = nn.Linear(128, 256, bias=False)
        self.head.weight = self.emb.weight      # tied

    def forward(self, t):
        h = self.emb(t)
        h = self.q(h) + self.k(h)
        return self.head(self.down(self.odd(F.gelu(self.up(h)))))


def test_swap_and_report():
    torch.manual_seed(0)
    net = Net()
    params = {n: p for n, p in net.named_parameters()}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = pt.convert(net, recipe="current_tensorwise",
                         example_inputs=torch.randint(0, 256, (2, 8)))
    assert out is net
    assert {n for n, m in net.named_modules() if isinstance(m, pt.Linear)} == {"q", "k", "up", "head"}
    assert type(net.odd) is nn.Linear and type(net.down) is nn.Linear
    # The same Parameters (an optimizer made before convert still works), tie kept.
    assert all(p is params[n] for n, p in net.named_parameters())
    assert net.head.weight is net.emb.weight
    rep = {d.fqn: d for d in net.precc_report}
    assert rep["odd"].reason.startswith("out_features 100 % 16 != 0 → bf16")
    assert "in_features 100 % 16 != 0 → bf16" in rep["down"].reason
    assert rep["q"].converted and rep["q"].reason == ""
    assert any("stay nn.Linear" in str(x.message) and "odd: out_features 100" in str(x.message)
               for x in w)
    # The model description: tied, bias, the shared input (q and k read the same h).
    desc = open(os.path.join(net.precc_group.artifacts, compiler.MODEL_FILE)).read()
    assert 'linear("head", 128, 256, {tied = true})' in desc
    assert 'linear("up", 128, 256, {bias = true})' in desc
    assert 'linear("k", 128, 128, {shares_input = "q"})' in desc
    assert "odd" not in desc


def test_filter_fn_and_bare_linear():
    net = nn.Sequential(nn.Linear(128, 128), nn.Linear(128, 128))
    pt.convert(net, recipe="bf16", module_filter_fn=lambda m, fqn: fqn != "1")
    assert isinstance(net[0], pt.Linear) and type(net[1]) is nn.Linear
    assert net.precc_report[1].reason == "module_filter_fn said no"
    lin = nn.Linear(128, 64)
    new = pt.convert(lin, recipe="bf16")
    assert isinstance(new, pt.Linear) and new.weight is lin.weight


def test_bad_recipe_is_precc_error(tmp_path):
    r = tmp_path / "mine.lua"
    r.write_text('recipe "mine" {\n  format = e4m3,\n  scaling = delayed { history = 0 },\n}\n')
    with pytest.raises(precc.Error, match=r"mine\.lua:3: error: .*history"):
        pt.convert(nn.Sequential(nn.Linear(128, 128)), recipe=str(r))


def test_prebuilt_artifacts(tmp_path, monkeypatch):
    desc = tmp_path / "m.lua"
    desc.write_text(compiler.model_lua("m", [compiler.Linear("0", 128, 128, bias=True)]))
    art = compiler.build("te_delayed_hybrid", str(desc), out=str(tmp_path / "art"))
    monkeypatch.setenv("PRECC_BIN", "/nonexistent/precc")  # no compiler needed
    net = pt.convert(nn.Sequential(nn.Linear(128, 128)), artifacts=art)
    assert isinstance(net[0], pt.Linear) and net[0]._precc_group.recipe == "te_delayed_hybrid"
    with pytest.raises(precc.Error, match=r"0 is 64->128; in .* it is 128->128"):
        pt.convert(nn.Sequential(nn.Linear(64, 128)), artifacts=art)


def test_bad_tensors_fail_before_any_kernel():
    net = pt.convert(nn.Sequential(nn.Linear(128, 64)), recipe="current_tensorwise")
    lin = net[0]
    rt = lin._precc_group.runtime(torch.device("cpu"))

    def launches():
        return sum(k["launches"] for k in rt.kernel_stats())
    before = launches()
    with pytest.raises(precc.Error, match=r"input is torch.float32; the recipe runs this layer "
                       r"on torch.bfloat16 inputs"):
        lin(torch.randn(16, 128))
    with pytest.raises(precc.Error, match=r"input of shape \[16, 96\]; the layer takes \[..., 128\]"):
        lin(torch.randn(16, 96, dtype=torch.bfloat16))
    with pytest.raises(precc.Error, match="input on meta"):
        lin(torch.empty(16, 128, dtype=torch.bfloat16, device="meta"))
    assert launches() == before
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts the input
        assert lin(torch.randn(16, 128)).dtype == torch.bfloat16
    assert launches() > before


@pytest.mark.parametrize("recipe", ["bf16", "fp16_dynamic_loss_scale"])
def test_high_precision_recipes_equal_torch(recipe):
    """bf16/fp16 recipes: y, dx, dw, db as torch's linear (fp32 accumulation,
    one rounding), on a 3-D input whose M = 2*25 is no multiple of 16."""
    torch.manual_seed(0)
    dt = torch.bfloat16 if recipe == "bf16" else torch.float16
    ref = nn.Linear(128, 64).to(dt)
    net = pt.convert(nn.Sequential(nn.Linear(128, 64)), recipe=recipe)
    net[0].weight.data, net[0].bias.data = ref.weight.data.clone(), ref.bias.data.clone()
    x = torch.randn(2, 25, 128, dtype=dt)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y1, y2 = net(x1), ref(x2)
    assert y1.shape == (2, 25, 64) and y1.dtype == dt
    dy = torch.randn_like(y1)
    y1.backward(dy)
    y2.backward(dy)

    def rel(a, b):
        return ((a.float() - b.float()).norm() / b.float().norm()).item()
    assert rel(y1, y2) < 2e-3
    assert rel(x1.grad, x2.grad) < 2e-3
    assert rel(net[0].weight.grad, ref.weight.grad) < 2e-3
    assert rel(net[0].bias.grad, ref.bias.grad) < 2e-3


def test_padding_is_exact():
    """M = 50 for deepseek_v3 (M a multiple of 128): y equals the first 50
    rows of the run on the input padded with zero rows by hand."""
    torch.manual_seed(0)
    net = pt.convert(nn.Sequential(nn.Linear(256, 128)), recipe="deepseek_v3")
    x = torch.randn(50, 256, dtype=torch.bfloat16)
    xp = torch.cat([x, torch.zeros(78, 256, dtype=torch.bfloat16)])
    with torch.no_grad():
        assert torch.equal(net(x), net(xp)[:50])


def test_plans():
    """Layers run on the layer API, rowwise too (its fprop reads a w.q made
    by a step tagged dgrad: the runtime cuts a plan by its dataflow, not by
    the tags)."""
    a = pt.convert(nn.Sequential(nn.Linear(128, 128)), recipe="te_delayed_hybrid")
    b = pt.convert(nn.Sequential(nn.Linear(128, 128)), recipe="rowwise")
    cpu = torch.device("cpu")
    assert isinstance(a[0]._precc_group.program("0", cpu), _ops.ApiPlan)
    assert isinstance(b[0]._precc_group.program("0", cpu), _ops.ApiPlan)


def test_deepcopy_shares_artifacts_keeps_state():
    import copy
    a = pt.convert(nn.Sequential(nn.Linear(128, 128)), recipe="te_delayed_hybrid")
    b = copy.deepcopy(a)
    assert b[0]._precc_group is a[0]._precc_group
    assert b[0].precc_state is not a[0].precc_state
    x = torch.randn(32, 128, dtype=torch.bfloat16, requires_grad=True)
    b(x).float().sum().backward()
    assert not torch.equal(a[0].precc_state, b[0].precc_state)  # only b's state moved


def test_convert_compiles_nothing_twice(tmp_path, monkeypatch):
    """Identical layers share kernels and a state layout, and a second
    convert runs no precc: three identical blocks are compiled as one
    (precc build's layer classes), a one-block model then finds every
    kernel in the kernel cache, and converting the three-block model again
    starts no precc process (check and build come from convert's cache)."""
    monkeypatch.setenv("PRECC_TORCH_CACHE", str(tmp_path / "artifacts"))
    monkeypatch.setenv("PRECC_CACHE_DIR", str(tmp_path / "kernels"))

    def blocks(n):
        return nn.Sequential(*[nn.Sequential(nn.Linear(128, 256, bias=False),
                                             nn.Linear(256, 128, bias=False)) for _ in range(n)])
    runs = compiler.RUNS
    n = len(runs)
    a = pt.convert(blocks(3), recipe="te_delayed_hybrid")
    assert [w for w, _ in runs[n:]] == ["check", "build"]
    cold = compiler.LAST_BUILD
    assert cold["layers"] == 6 and cold["cache_hits"] == 0
    with open(os.path.join(a.precc_group.artifacts, "manifest.json")) as f:
        man = json.load(f)
    assert len(man["layer_classes"]) == 2
    assert cold["kernel_builds"] == len(man["kernels"])      # each distinct kernel once
    lay = a.precc_group.layouts
    assert lay["0.0"] is lay["1.0"] is lay["2.0"] and lay["0.1"] is lay["2.1"]
    assert lay["0.0"] is not lay["0.1"]
    # another model of the same layers: every kernel from the cache
    n = len(runs)
    pt.convert(blocks(1), recipe="te_delayed_hybrid")
    assert [w for w, _ in runs[n:]] == ["check", "build"]
    assert compiler.LAST_BUILD["kernel_builds"] == cold["kernel_builds"]
    assert compiler.LAST_BUILD["cache_hits"] == cold["kernel_builds"]
    # the same model again: no precc process at all
    n = len(runs)
    b = pt.convert(blocks(3), recipe="te_delayed_hybrid")
    assert runs[n:] == [] and b.precc_group.artifacts == a.precc_group.artifacts


def test_unconvert_round_trip():
    """convert -> train -> unconvert gives plain nn.Linear modules with the
    same Parameters, whose state_dict loads with strict=True into the model
    as built (plain_state_dict does the same for the converted model's);
    converting again and loading the converted checkpoint resumes the
    precc model exactly."""
    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128, bias=False))
    plain, net = make(), make()
    params = list(net.parameters())
    pt.convert(net, recipe="te_delayed_hybrid")
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(32, 128)
    for _ in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = net(x).float().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        y_precc = net(x)
    sd = {k: v.clone() for k, v in net.state_dict().items()}   # not the live tensors
    assert sorted(k for k in sd if k.endswith("precc_state")) == ["0.precc_state", "2.precc_state"]
    with pytest.raises(RuntimeError, match="Unexpected key"):
        plain.load_state_dict(sd)
    plain.load_state_dict(pt.plain_state_dict(sd), strict=True)
    assert list(pt.plain_state_dict(net)) == list(plain.state_dict())

    assert pt.unconvert(net) is net
    assert [type(m) for m in net] == [nn.Linear, nn.GELU, nn.Linear]
    assert all(p is q for p, q in zip(net.parameters(), params))   # the optimizer's own
    assert not hasattr(net, "precc_group") and not hasattr(net, "precc_report")
    assert list(net.state_dict()) == list(plain.state_dict())
    plain.load_state_dict(net.state_dict(), strict=True)
    with torch.no_grad():
        assert torch.equal(net(x), plain(x))
        assert torch.equal(net(x), F.linear(F.gelu(F.linear(x, params[0], params[1])), params[2]))
    opt.step()   # still the model's Parameters

    # and back: the converted checkpoint loads strictly and resumes bit for bit
    plain2 = make()
    plain2.load_state_dict(pt.plain_state_dict(sd), strict=True)
    pt.convert(plain2, recipe="te_delayed_hybrid")
    plain2.load_state_dict(sd, strict=True)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(plain2(x), y_precc)


def test_unconvert_ties_and_bare_linear():
    torch.manual_seed(0)
    net = Net()
    pt.convert(net, recipe="current_tensorwise", warn=False)
    pt.unconvert(net)
    assert not any(isinstance(m, pt.Linear) for m in net.modules())
    assert net.head.weight is net.emb.weight
    assert list(net.state_dict()) == list(Net().state_dict())
    lin = pt.convert(nn.Linear(128, 64), recipe="bf16")
    back = pt.unconvert(lin)
    assert type(back) is nn.Linear and back.weight is lin.weight and back.bias is lin.bias
