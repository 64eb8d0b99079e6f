"""precc.torch.GroupedExperts: transformers 5's fused MoE experts swapped by
convert, against the per-expert nn.Linear path bit for bit for every
shipped recipe; zero-token experts, one token, the state_dict round trip,
bad routing, the permutation, torch.compile.

The Mixtral block here is a faithful copy of transformers 5.25.0's
MixtralExperts / MixtralTopKRouter / MixtralSparseMoeBlock
(models/mixtral/modeling_mixtral.py:57-131: gate_up_proj [E, 2I, H],
down_proj [E, H, I], and the attributes @use_experts_implementation sets,
integrations/moe.py:621-630), so that the test needs no transformers; with
transformers importable, test_transformers_* run on its own modules."""
import os
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import precc  # noqa: E402
import precc.torch as pt  # noqa: E402
from precc.torch import _experts  # noqa: E402
from conftest import RECIPES  # noqa: E402

H, I, E, TOPK = 64, 128, 8, 2


class FusedExperts(nn.Module):
    """transformers 5.25.0 MixtralExperts (eager forward)."""

    def __init__(self, E=E, H=H, I=I):
        super().__init__()
        self.num_experts, self.hidden_dim, self.intermediate_dim = E, H, I
        self.gate_up_proj = nn.Parameter(torch.randn(E, 2 * I, H) / H ** 0.5)
        self.down_proj = nn.Parameter(torch.randn(E, H, I) / I ** 0.5)
        self.act_fn = nn.SiLU()
        # what use_experts_implementation's __init__ adds
        self.has_gate, self.has_bias, self.has_post_expert_norm = True, False, False
        self.is_transposed, self.is_concatenated, self._is_expert_parallel = False, True, False

    def _apply_gate(self, gate_up_out):
        gate, up = gate_up_out.chunk(2, dim=-1)
        return self.act_fn(gate) * up

    def forward(self, hidden_states, top_k_index, top_k_weights):
        final = torch.zeros_like(hidden_states)
        with torch.no_grad():
            mask = F.one_hot(top_k_index, num_classes=self.num_experts + 1).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit:
            e = e[0]
            if e == self.num_experts:
                continue
            pos, tok = torch.where(mask[e])
            gate, up = F.linear(hidden_states[tok], self.gate_up_proj[e]).chunk(2, dim=-1)
            h = F.linear(self.act_fn(gate) * up, self.down_proj[e])
            h = h * top_k_weights[tok, pos, None]
            final.index_add_(0, tok, h.to(final.dtype))
        return final


class Router(nn.Module):
    """MixtralTopKRouter: a bare [E, H] weight (no nn.Linear: convert leaves it)."""

    def __init__(self, E=E, H=H):
        super().__init__()
        self.top_k, self.num_experts, self.hidden_dim = TOPK, E, H
        self.weight = nn.Parameter(torch.randn(E, H) / H ** 0.5)

    def forward(self, h):
        h = h.reshape(-1, self.hidden_dim)
        logits = F.linear(h, self.weight)
        probs = F.softmax(logits.float(), dim=-1)
        top, idx = torch.topk(probs, self.top_k, dim=-1)
        top = top / top.sum(dim=-1, keepdim=True)
        return logits, top, idx


class Block(nn.Module):
    """MixtralSparseMoeBlock."""

    def __init__(self, experts):
        super().__init__()
        self.gate = Router(experts.num_experts, experts.hidden_dim)
        self.experts = experts

    def forward(self, x):
        b, s, h = x.shape
        x = x.view(-1, h)
        _, w, idx = self.gate(x)
        return self.experts(x, idx, w).reshape(b, s, h)


class Expert(nn.Module):
    def __init__(self, H, I):
        super().__init__()
        self.gate_up_proj = nn.Linear(H, 2 * I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)


class PerExpert(nn.Module):
    """The per-expert nn.Linear path (Mixtral 4.x's ModuleList of expert
    MLPs), routed exactly as transformers' grouped_mm implementation routes:
    (token, k) pairs sorted stably by expert, unpermuted, summed over k."""

    def __init__(self, fused):
        super().__init__()
        self.num_experts = fused.num_experts
        self.experts = nn.ModuleList(Expert(fused.hidden_dim, fused.intermediate_dim)
                                     for _ in range(self.num_experts))
        with torch.no_grad():
            for e, m in enumerate(self.experts):
                m.gate_up_proj.weight.copy_(fused.gate_up_proj[e])
                m.down_proj.weight.copy_(fused.down_proj[e])

    def forward(self, x, idx, w):
        T, k = idx.shape
        flat = idx.reshape(-1)
        order = torch.sort(flat, stable=True).indices
        counts = torch.bincount(flat, minlength=self.num_experts).tolist()
        xs, ws = x[order // k], w.reshape(-1)[order]
        outs = []
        for e, rows in enumerate(torch.split(xs, counts)):
            if counts[e]:
                g, u = self.experts[e].gate_up_proj(rows).chunk(2, dim=-1)
                outs.append(self.experts[e].down_proj(F.silu(g) * u))
        weighted = torch.cat(outs) * ws.unsqueeze(-1)
        inv = torch.empty_like(order)
        inv[order] = torch.arange(order.numel())
        return weighted[inv].view(T, k, -1).sum(1).to(x.dtype)

    def __getitem__(self, e):
        return self.experts[e]

    @property
    def hidden_dim(self):
        return self.experts[0].gate_up_proj.in_features


def pair(seed=0, H=H, I=I):
    torch.manual_seed(seed)
    fused = Block(FusedExperts(E, H, I))
    ref = Block(PerExpert(fused.experts))
    ref.gate.weight = nn.Parameter(fused.gate.weight.detach().clone())
    return fused, ref


def grad_or_zeros(lin):
    # an expert without tokens: no gradient for its Linear, zeros in the 3-D one
    g = lin.weight.grad
    return g if g is not None else torch.zeros_like(lin.weight)


def dtype_of(recipe):
    return torch.float16 if recipe == "fp16_dynamic_loss_scale" else torch.bfloat16


def step(block, x, recipe):
    x = x.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=dtype_of(recipe)):
        y = block(x)
    loss = y.float().pow(2).mean()
    loss.backward()
    return loss.detach(), x.grad


def convert(block, recipe):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pt.convert(block, recipe=recipe, warn=False)


# hidden 64; where a recipe's plan takes no expert GEMM at 64 (1x128 and
# 128x128 blocks need K and N multiples of 128), hidden and I = 128 too
DIMS = [(64, 128)] + [(128, 128)]


@pytest.mark.parametrize("dims", DIMS, ids=["h64", "h128"])
@pytest.mark.parametrize("recipe", RECIPES)
def test_same_as_per_expert_linears(recipe, dims):
    """Two training steps: the same losses, input, router and expert
    gradients, and scaling state as the per-expert nn.Linear path, bit for bit."""
    H, I = dims
    fused, ref = pair(0, H, I)
    gu, dn = fused.experts.gate_up_proj, fused.experts.down_proj
    convert(fused, recipe)
    convert(ref, recipe)
    if not any(d.converted for d in fused.precc_report):
        # nothing for precc: the block stays as it was, and so do the Linears
        assert type(fused.experts) is FusedExperts
        assert not any(d.converted for d in ref.precc_report)
        pytest.skip("%s takes no expert GEMM at hidden %d: %s" % (
            recipe, H, fused.precc_report[0].reason))
    assert isinstance(fused.experts, pt.GroupedExperts)
    assert fused.experts.gate_up_proj is gu and fused.experts.down_proj is dn
    rep = {d.fqn: d for d in fused.precc_report}
    rrep = {d.fqn: d for d in ref.precc_report}
    for p in ("gate_up_proj", "down_proj"):
        # a kind runs in precc exactly where the per-expert Linears were converted
        assert rep["experts." + p].converted == rrep["experts.experts.0." + p].converted, \
            (rep["experts." + p], rrep["experts.experts.0." + p])
    torch.manual_seed(1)
    for it in range(2):
        x = torch.randn(3, 11, H)
        lf, gf = step(fused, x, recipe)
        lr, gr = step(ref, x, recipe)
        assert torch.equal(lf, lr), (it, lf, lr)
        assert torch.equal(gf, gr)
        assert torch.equal(fused.gate.weight.grad, ref.gate.weight.grad)
        for e in range(E):
            assert torch.equal(gu.grad[e], grad_or_zeros(ref.experts[e].gate_up_proj)), e
            assert torch.equal(dn.grad[e], grad_or_zeros(ref.experts[e].down_proj)), e
        for kd in fused.experts._precc_kinds:
            if not kd.precc:
                continue
            st = getattr(fused.experts, "precc_state_" + kd.param)
            for e in range(E):
                assert torch.equal(st[e, :kd.size],
                                   getattr(ref.experts[e], kd.param).precc_state), (kd.param, e)
        for m in (fused, ref):
            m.zero_grad()


def test_report_and_kinds():
    fused, ref = pair(0, 128, 64)
    convert(fused, "deepseek_v3")
    rep = {d.fqn: d for d in fused.precc_report}
    # 1x128 blocks: down's K = I = 64 cannot take them, so down runs in
    # torch (and says why), gate_up (128 -> 128) in precc
    assert not rep["experts.down_proj"].converted
    assert "in_features 64 % 128" in rep["experts.down_proj"].reason
    assert rep["experts.gate_up_proj"].converted
    assert (rep["experts.gate_up_proj"].in_features,
            rep["experts.gate_up_proj"].out_features) == (128, 128)
    assert "experts=8" in repr(fused.experts) and "down_proj 64->128 torch" in repr(fused.experts)
    # and a block with one kind in torch is still the per-expert path, bit for bit
    convert(ref, "deepseek_v3")
    x = torch.randn(2, 5, 128)
    lf, gf = step(fused, x, "deepseek_v3")
    lr, gr = step(ref, x, "deepseek_v3")
    assert torch.equal(lf, lr) and torch.equal(gf, gr)


def route_by_hand(T, pattern):
    idx = torch.tensor([[pattern[(t * TOPK + j) % len(pattern)] for j in range(TOPK)]
                        for t in range(T)])
    w = torch.rand(T, TOPK).softmax(-1).requires_grad_(True)
    return idx, w


def test_zero_token_expert_never_launches():
    fused, _ = pair()
    convert(fused, "te_delayed_hybrid")
    ex = fused.experts
    idx, w = route_by_hand(6, [0, 1, 2, 4, 5, 6, 7])     # expert 3 gets nothing
    st0 = ex.precc_state_gate_up_proj.clone()
    x = torch.randn(6, H, requires_grad=True)
    calls = fused.precc_group.calls
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = ex(x, idx, w)
    hit = len(set(idx.reshape(-1).tolist()))
    assert fused.precc_group.calls - calls == 2 * hit       # gate_up and down per expert hit
    y.float().sum().backward()
    assert torch.count_nonzero(ex.gate_up_proj.grad[3]) == 0
    assert torch.count_nonzero(ex.down_proj.grad[3]) == 0
    assert torch.count_nonzero(ex.gate_up_proj.grad[0]) > 0
    assert w.grad is not None and torch.count_nonzero(w.grad) > 0
    # the commit ran: experts with tokens moved their amax history, expert 3's state is as it was
    st = ex.precc_state_gate_up_proj
    assert torch.equal(st[3], st0[3]) and not torch.equal(st[0], st0[0])


def test_single_token_and_no_token():
    fused, ref = pair()
    convert(fused, "current_tensorwise")
    convert(ref, "current_tensorwise")
    x = torch.randn(1, 1, H)
    lf, gf = step(fused, x, "current_tensorwise")
    lr, gr = step(ref, x, "current_tensorwise")
    assert torch.equal(lf, lr) and torch.equal(gf, gr)
    empty = fused.experts(torch.randn(0, H), torch.zeros(0, TOPK, dtype=torch.long),
                          torch.zeros(0, TOPK))
    assert empty.shape == (0, H)


def test_state_dict_round_trip():
    fused, _ = pair()
    plain_keys = set(fused.state_dict())
    convert(fused, "te_delayed_hybrid")
    sd = fused.state_dict()
    assert set(pt.plain_state_dict(sd)) == plain_keys
    assert {"experts.precc_state_gate_up_proj", "experts.precc_state_down_proj"} <= set(sd)
    assert sd["experts.gate_up_proj"].shape == (E, 2 * I, H)
    step(fused, torch.randn(2, 5, H), "te_delayed_hybrid")
    # a converted model loads its own state_dict, and a plain one (fresh state kept)
    sd = {k: v.clone() for k, v in fused.state_dict().items()}
    fused2, _ = pair(seed=5)
    convert(fused2, "te_delayed_hybrid")
    fused2.load_state_dict(sd, strict=True)
    assert torch.equal(fused2.experts.precc_state_down_proj, sd["experts.precc_state_down_proj"])
    fused2.load_state_dict(pt.plain_state_dict(sd), strict=True)
    # unconvert: the HF module again, the same Parameters, loads strict into a plain block
    gu = fused.experts.gate_up_proj
    pt.unconvert(fused)
    assert type(fused.experts) is FusedExperts and fused.experts.gate_up_proj is gu
    assert set(fused.state_dict()) == plain_keys
    plain, _ = pair(seed=7)
    plain.load_state_dict(fused.state_dict(), strict=True)
    x = torch.randn(2, 3, H)
    assert torch.equal(plain(x), fused(x))


def test_save_and_load_state(tmp_path):
    fused, _ = pair()
    convert(fused, "te_delayed_hybrid")
    step(fused, torch.randn(2, 5, H), "te_delayed_hybrid")
    pt.save_state(fused, str(tmp_path / "s.bin"))
    before = [fused.experts.precc_state_gate_up_proj.clone(),
              fused.experts.precc_state_down_proj.clone()]
    step(fused, torch.randn(2, 5, H), "te_delayed_hybrid")
    assert not torch.equal(fused.experts.precc_state_gate_up_proj, before[0])
    pt.load_state(fused, str(tmp_path / "s.bin"))
    # what the state file holds (the region's other bytes are the runtime's scratch)
    g = fused.precc_group
    for kd, old in zip(fused.experts._precc_kinds, before):
        new = getattr(fused.experts, "precc_state_" + kd.param)
        for e, f in enumerate(kd.fqns):
            vn, vo = g.layouts[f].views(new[e, :kd.size]), g.layouts[f].views(old[e, :kd.size])
            for n in ("x.amax_history", "x.scale", "w.scale", "dy.amax_history", "dy.scale"):
                assert torch.equal(vn[n], vo[n]), (f, n)


def test_bad_routing_refused():
    fused, _ = pair()
    convert(fused, "current_tensorwise")
    ex = fused.experts
    x, w = torch.randn(4, H), torch.rand(4, TOPK)
    ok = torch.zeros(4, TOPK, dtype=torch.long)
    with pytest.raises(precc.Error, match=r"holds expert 8; the module has experts 0\.\.7 "
                                          r"\(an expert-parallel sentinel is not taken\)"):
        ex(x, torch.full((4, TOPK), E), w)
    with pytest.raises(precc.Error, match=r"holds expert 9"):
        ex(x, torch.full((4, TOPK), E + 1), w)
    with pytest.raises(precc.Error, match=r"holds expert -1"):
        ex(x, torch.tensor([[0, 1], [2, -1], [0, 0], [1, 1]]), w)
    with pytest.raises(precc.Error, match=r"top_k_index must be a 2-D tensor \[tokens, top_k\], "
                                          r"not \[8\]"):
        ex(x, ok.reshape(-1), w)
    with pytest.raises(precc.Error, match=r"must hold integers, not torch.float32"):
        ex(x, ok.float(), w)
    with pytest.raises(precc.Error, match=r"top_k_index is \[3, 2\] for 4 tokens"):
        ex(x, ok[:3], w)
    with pytest.raises(precc.Error, match=r"top_k_weights must be \[4, 2\] like top_k_index"):
        ex(x, ok, w[:, :1])
    with pytest.raises(precc.Error, match=r"hidden_states of shape \[4, 32\]; the experts take "
                                          r"\[tokens, 64\]"):
        ex(x[:, :32], ok, w)
    with pytest.raises(precc.Error, match=r"input is torch.float32; the recipe runs"):
        ex(x, ok, w)      # no autocast, fp32 input


@pytest.mark.parametrize("T,pattern", [(16, list(range(E))), (7, [5, 5, 1]), (1, [3, 2]),
                                       (33, [7, 0, 7, 2, 2, 6])])
def test_permutation_covers_every_pair_once(T, pattern):
    idx = torch.tensor([[pattern[(t * TOPK + j) % len(pattern)] for j in range(TOPK)]
                        for t in range(T)])
    order, counts = _experts.route(idx, E)
    flat = idx.reshape(-1)
    assert sorted(order.tolist()) == list(range(T * TOPK))      # no pair dropped or duplicated
    assert sum(counts) == T * TOPK
    assert counts == [int((flat == e).sum()) for e in range(E)]
    s = flat[order].tolist()
    assert s == sorted(s)
    # stable: within an expert, (token, k) pairs in their original order
    off = 0
    for c in counts:
        seg = order[off:off + c].tolist()
        assert seg == sorted(seg)
        off += c


def test_compile_matches_eager():
    """torch.compile (aot_eager): the routing prologue and the combine are
    compiled; the expert loop is a graph break (torch.compiler.disable)."""
    fused, ref = pair()
    convert(fused, "te_delayed_hybrid")
    convert(ref, "te_delayed_hybrid")
    comp = torch.compile(fused, backend="aot_eager")
    torch.manual_seed(3)
    for _ in range(2):
        x = torch.randn(2, 9, H)
        lf, gf = step(comp, x, "te_delayed_hybrid")
        lr, gr = step(ref, x, "te_delayed_hybrid")
        assert torch.equal(lf, lr) and torch.equal(gf, gr)
        for e in range(E):
            assert torch.equal(fused.experts.down_proj.grad[e], grad_or_zeros(ref.experts[e].down_proj))
        fused.zero_grad()
        ref.zero_grad()


def test_per_expert_linears_still_convert():
    """The 4.x layout (a ModuleList of expert MLPs of nn.Linear) converts as before."""
    fused, ref = pair()
    convert(ref, "current_tensorwise")
    assert all(isinstance(ref.experts[e].gate_up_proj, pt.Linear) for e in range(E))
    assert not any(isinstance(m, pt.GroupedExperts) for m in ref.modules())


def test_filter_and_kept_reasons():
    fused, _ = pair()
    pt.convert(fused, recipe="current_tensorwise", warn=False,
               module_filter_fn=lambda m, fqn: fqn != "experts")
    assert type(fused.experts) is FusedExperts
    rep = {d.fqn: d for d in fused.precc_report}
    assert rep["experts.gate_up_proj"].reason == "module_filter_fn said no"
    ex = FusedExperts()
    ex.has_post_expert_norm = True
    blk = Block(ex)
    pt.convert(blk, recipe="current_tensorwise", warn=False)
    assert type(blk.experts) is FusedExperts
    assert "post-expert norm" in {d.fqn: d for d in blk.precc_report}["experts.down_proj"].reason


# ---- with transformers itself (skipped where it is not installed) ----------------

def _tf():
    return pytest.importorskip("transformers")


def test_transformers_mixtral_block():
    tf = _tf()
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
    cfg = tf.MixtralConfig(hidden_size=H, intermediate_size=I, num_local_experts=E,
                           num_experts_per_tok=TOPK)
    cfg._experts_implementation = "eager"
    torch.manual_seed(0)
    blk = MixtralSparseMoeBlock(cfg)
    for p in blk.parameters():
        nn.init.normal_(p, std=0.05)
    keys = set(blk.state_dict())
    x = torch.randn(2, 7, H)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = blk(x)
    pt.convert(blk, recipe="bf16", warn=False)
    assert isinstance(blk.experts, pt.GroupedExperts)
    assert set(pt.plain_state_dict(blk)) == keys
    xg = x.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = blk(xg)
    torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)
    got.float().sum().backward()
    assert blk.experts.gate_up_proj.grad.shape == (E, 2 * I, H) and xg.grad is not None
    pt.unconvert(blk)
    assert type(blk.experts).__name__ == "MixtralExperts"


def test_transformers_gpt_oss_experts():
    """gpt-oss: [E, in, out] (transposed), biases, interleaved gate/up with its clamp."""
    tf = _tf()
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts
    cfg = tf.GptOssConfig(hidden_size=H, intermediate_size=I, num_local_experts=4,
                          num_experts_per_tok=TOPK)
    cfg._experts_implementation = "eager"
    torch.manual_seed(0)
    ex = GptOssExperts(cfg)
    for p in ex.parameters():
        nn.init.normal_(p, std=0.05)
    x, idx = torch.randn(9, H), torch.randint(0, 4, (9, TOPK))
    w = torch.rand(9, TOPK)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = ex(x, idx, w)
    root = nn.ModuleDict({"experts": ex})
    pt.convert(root, recipe="bf16", warn=False)
    g = root["experts"]
    assert isinstance(g, pt.GroupedExperts)
    assert [(k.K, k.N) for k in g._precc_kinds] == [(H, 2 * I), (I, H)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = g(x, router_indices=idx, routing_weights=w)
    torch.testing.assert_close(got.float(), want.float(), atol=3e-2, rtol=3e-2)
    got.float().sum().backward()
    assert g.gate_up_proj_bias.grad is not None and g.down_proj.grad.shape == (4, I, H)


# ---- DDP: 2 processes over gloo, different tokens per rank -----------------------

def _ddp_worker(rank, world, port, out):
    import os
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        fused, _ = pair()
        convert(fused, "te_delayed_hybrid")
        model = nn.parallel.DistributedDataParallel(fused)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        calls, real = [], dist.all_reduce

        def counting(t, op=dist.ReduceOp.SUM, *a, **k):
            if op == dist.ReduceOp.MAX:
                calls.append(t.numel())
            return real(t, op, *a, **k)
        dist.all_reduce = counting
        hit, grads = [], []
        for i in range(3):
            g = torch.Generator().manual_seed(10 * i + rank)
            x = torch.randn(1, 3, H, generator=g) * (1 + 3 * rank)   # 6 pairs: experts idle
            with torch.no_grad():
                hit.append(sorted(set(fused.gate(x)[2].reshape(-1).tolist())))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            opt.zero_grad()
            loss.backward()
            grads.append([p.grad.clone() for p in model.parameters()])
            opt.step()
        dist.all_reduce = real
        torch.save({"hit": hit, "calls": calls, "grads": grads,
                    "state": [fused.experts.precc_state_gate_up_proj.clone(),
                              fused.experts.precc_state_down_proj.clone()]},
                   os.path.join(out, "rank%d.pt" % rank))
    finally:
        dist.destroy_process_group()
    from test_distributed import _leave   # the same exit, and why
    _leave()


def test_ddp_delayed_scaling_lines_up(tmp_path):
    """Under DDP each rank routes its own tokens (different experts idle on
    each); every expert still runs and commits on every rank, so the one
    MAX all_reduce a step lines up and both ranks keep the same state."""
    import socket
    import torch.distributed as dist
    import torch.multiprocessing as mp
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_ddp_worker, args=(2, port, str(tmp_path)), nprocs=2, start_method="spawn")
    r = [torch.load(tmp_path / ("rank%d.pt" % i)) for i in range(2)]
    assert r[0]["hit"] != r[1]["hit"]                  # the ranks route differently
    assert any(len(h) < E for h in r[0]["hit"] + r[1]["hit"])
    assert len(r[0]["calls"]) == len(r[1]["calls"]) == 3
    assert r[0]["calls"] == r[1]["calls"]
    for a, b in zip(r[0]["state"], r[1]["state"]):
        assert torch.equal(a, b)
    for ga, gb in zip(r[0]["grads"], r[1]["grads"]):
        for a, b in zip(ga, gb):
            assert torch.equal(a, b)


class AllExperts(nn.Module):
    """Llama-4's experts' shape: 3-D parameters, but forward takes every
    expert's rows at once (no top_k_index): not a contract precc knows."""

    def __init__(self):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.randn(4, H, 2 * I))
        self.down_proj = nn.Parameter(torch.randn(4, I, H))

    def forward(self, x):
        return torch.bmm(x, self.gate_up_proj)


def test_unknown_3d_experts_reported():
    root = nn.ModuleDict({"experts": AllExperts(), "lin": nn.Linear(H, H)})
    pt.convert(root, recipe="current_tensorwise", warn=False)
    assert type(root["experts"]) is AllExperts
    rep = {d.fqn: d for d in root.precc_report}
    assert "not a transformers 5 experts module" in rep["experts.gate_up_proj"].reason
    assert repr(rep["experts.down_proj"]).startswith("experts.down_proj 128->64: stays as it is")


class UpExperts(FusedExperts):
    """has_gate=False (nemotron_h's @use_experts_implementation(has_gate=False)):
    up_proj [E, I, H], act_fn, down_proj."""

    def __init__(self):
        super().__init__()
        del self.gate_up_proj
        self.up_proj = nn.Parameter(torch.randn(E, I, H) / H ** 0.5)
        self.act_fn = nn.GELU()
        self.has_gate = False


class UpPerExpert(nn.Module):
    def __init__(self, fused):
        super().__init__()
        self.num_experts = E
        self.experts = nn.ModuleList(nn.ModuleDict({"up_proj": nn.Linear(H, I, bias=False),
                                                    "down_proj": nn.Linear(I, H, bias=False)})
                                     for _ in range(E))
        with torch.no_grad():
            for e, m in enumerate(self.experts):
                m["up_proj"].weight.copy_(fused.up_proj[e])
                m["down_proj"].weight.copy_(fused.down_proj[e])

    def forward(self, x, idx, w):
        T, k = idx.shape
        order = torch.sort(idx.reshape(-1), stable=True).indices
        counts = torch.bincount(idx.reshape(-1), minlength=E).tolist()
        outs = [self.experts[e]["down_proj"](F.gelu(self.experts[e]["up_proj"](rows)))
                for e, rows in enumerate(torch.split(x[order // k], counts)) if counts[e]]
        weighted = torch.cat(outs) * w.reshape(-1)[order].unsqueeze(-1)
        inv = torch.empty_like(order)
        inv[order] = torch.arange(order.numel())
        return weighted[inv].view(T, k, -1).sum(1).to(x.dtype)


def test_no_gate_experts():
    torch.manual_seed(0)
    ex = UpExperts()
    ref = UpPerExpert(ex)
    a, b = nn.ModuleDict({"experts": ex}), nn.ModuleDict({"experts": ref})
    convert(a, "te_delayed_hybrid")
    convert(b, "te_delayed_hybrid")
    g = a["experts"]
    assert isinstance(g, pt.GroupedExperts) and [k.param for k in g._precc_kinds] == \
        ["up_proj", "down_proj"]
    x, idx, w = torch.randn(10, H), torch.randint(0, E, (10, TOPK)), torch.rand(10, TOPK)
    for m in (g, b["experts"]):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            m(x, idx, w).float().pow(2).sum().backward()
    for e in range(E):
        assert torch.equal(g.up_proj.grad[e], grad_or_zeros(ref.experts[e]["up_proj"]))
        assert torch.equal(g.down_proj.grad[e], grad_or_zeros(ref.experts[e]["down_proj"]))


TF_MODELS = ["mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "olmoe", "phimoe",
             "granitemoe", "gpt_oss"]


@pytest.mark.parametrize("kind", TF_MODELS)
def test_transformers_models_convert(kind):
    """A tiny AutoModelForCausalLM of each fused-MoE type: its experts
    swapped, the same state_dict keys, logits near the unconverted model's,
    a backward reaching the 3-D parameters."""
    tf = _tf()
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=128, head_dim=16,
                  num_experts_per_tok=2)
    cfg = {
        "mixtral": lambda: tf.MixtralConfig(num_local_experts=4, **common),
        "qwen2_moe": lambda: tf.Qwen2MoeConfig(num_experts=4, moe_intermediate_size=64,
                                               shared_expert_intermediate_size=64, **common),
        "qwen3_moe": lambda: tf.Qwen3MoeConfig(num_experts=4, moe_intermediate_size=64, **common),
        "deepseek_v3": lambda: tf.DeepseekV3Config(
            n_routed_experts=8, moe_intermediate_size=64, first_k_dense_replace=0, n_group=1,
            topk_group=1, q_lora_rank=None, kv_lora_rank=32, qk_rope_head_dim=16,
            qk_nope_head_dim=16, v_head_dim=16,
            **dict(common, num_key_value_heads=4, head_dim=None)),
        "olmoe": lambda: tf.OlmoeConfig(num_experts=4, **common),
        "phimoe": lambda: tf.PhimoeConfig(num_local_experts=4, **common),
        "granitemoe": lambda: tf.GraniteMoeConfig(num_local_experts=4, **common),
        "gpt_oss": lambda: tf.GptOssConfig(num_local_experts=4, layer_types=["full_attention"],
                                           **common),
    }[kind]()
    cfg._experts_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = tf.AutoModelForCausalLM.from_config(cfg)
    keys = set(m.state_dict())
    t = torch.randint(0, 128, (2, 8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = m(t).logits.float()
    convert(m, "current_tensorwise")
    grouped = [x for x in m.modules() if isinstance(x, pt.GroupedExperts)]
    assert len(grouped) == 1
    assert set(pt.plain_state_dict(m)) == keys
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = m(t).logits.float()
    assert (got - want).abs().max() < 0.2
    got.sum().backward()
    assert all(x.grad is not None for x in grouped[0].parameters())


@pytest.mark.parametrize("recipe", ["bf16", "deepseek_v3", "mxfp8", "rowwise_gw_hp",
                                    "current_tensorwise", "te_current"])
def test_grouped_path_same_as_per_expert_plans(recipe):
    """Where the artifacts group fprop, dgrad and wgrad of both projections,
    GroupedExperts runs one precc_rt_forward_grouped and one
    precc_rt_backward_grouped per projection (the tokens sorted by expert,
    offsets on the device): the same loss, input, router and expert
    gradients, bit for bit, as the module's own per-expert plans
    (precc_grouped = False), over zero-token experts, a single token and
    token counts that are no multiple of anything; and the grouped path was
    taken (precc_grouped_calls)."""
    import copy
    H2 = I2 = 128       # deepseek_v3's 128x128 weight blocks: K and N multiples of 128
    torch.manual_seed(0)
    grouped = Block(FusedExperts(E, H2, I2))
    per = copy.deepcopy(grouped)
    convert(grouped, recipe)
    convert(per, recipe)
    per.experts.precc_grouped = False
    ex, pex = grouped.experts, per.experts
    steps = ex.grouped_steps(torch.device("cpu"))
    assert not isinstance(steps, str), steps
    assert [gs.name for gs in steps] == ["experts.gate_up_proj", "experts.down_proj"]
    torch.manual_seed(1)
    calls = 0
    for x in (torch.randn(3, 11, H2), torch.randn(1, 1, H2), torch.randn(2, 37, H2)):
        lg, gg = step(grouped, x, recipe)
        lp, gp = step(per, x, recipe)
        calls += 1
        assert torch.equal(lg, lp), (x.shape, lg, lp)
        assert torch.equal(gg, gp), x.shape
        assert torch.equal(grouped.gate.weight.grad, per.gate.weight.grad)
        for p in ("gate_up_proj", "down_proj"):
            assert torch.equal(getattr(ex, p).grad, getattr(pex, p).grad), (x.shape, p)
        grouped.zero_grad()
        per.zero_grad()
    # routed by hand: expert 3 gets no token, expert 6 one
    idx, w = route_by_hand(9, [0, 1, 2, 4, 5, 7, 0, 1, 2, 4, 5, 7, 6, 0, 0, 1, 2, 5])
    assert int((idx == 6).sum()) == 1 and int((idx == 3).sum()) == 0
    xs = torch.randn(9, H2)
    outs = []
    for m in (ex, pex):
        xi, wi = xs.clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = m(xi, idx, wi)
        y.float().pow(2).sum().backward()
        outs.append((y, xi.grad, wi.grad, m.gate_up_proj.grad.clone(), m.down_proj.grad.clone()))
    calls += 1
    for a, b in zip(*outs):
        assert torch.equal(a, b)
    assert torch.count_nonzero(ex.gate_up_proj.grad[3]) == 0
    assert torch.count_nonzero(ex.down_proj.grad[6]) > 0
    assert ex.precc_grouped_calls == calls and pex.precc_grouped_calls == 0
    # without grad: the forward alone
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(ex(xs, idx, w), pex(xs, idx, w))
    assert ex.precc_grouped_calls == calls + 1


def test_grouped_path_not_taken_says_why():
    """rowwise.lua's groups leave wgrad per expert (its scales span every
    expert's tokens), te_delayed_hybrid has no groups: the per-expert plans
    run, and grouped_steps says why."""
    for recipe, why in (("rowwise", "runs only fprop grouped"),
                        ("te_delayed_hybrid", "has scaling state")):
        torch.manual_seed(0)
        blk = Block(FusedExperts(E, 128, 128))
        convert(blk, recipe)
        r = blk.experts.grouped_steps(torch.device("cpu"))
        assert isinstance(r, str) and why in r, (recipe, r)
        step(blk, torch.randn(2, 5, 128), recipe)
        assert blk.experts.precc_grouped_calls == 0
