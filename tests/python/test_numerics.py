"""Every fp8 recipe's quantized operands against torch's own casts, the
way the recipe's reference computes them (each recipe file names it):
scale from the amax, `(x * scale).clamp(-max, max).to(torch.float8_*)`,
compared code for code, with the amaxes and scales bit for bit; MX and
NVFP4 against torchao's reference quantizers (to_mx RCEIL, nvfp4_quantize)
when torchao is installed, e2m1 as torchao's packed bytes (two codes a
byte, the torch.float4_e2m1fn_x2 layout). Inputs: bf16 with rows spread over 2^-6..2^6, a
zero row, and M = 64, which the blockwise and rowwise recipes pad."""
import os

import pytest

torch = pytest.importorskip("torch")
import precc.torch as pt  # noqa: E402

M, K, N = 64, 256, 128
E4M3, E5M2 = (torch.float8_e4m3fn, 448.0), (torch.float8_e5m2, 57344.0)


def data(rows, cols, seed):
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(rows, cols, generator=g) * 2.0 ** (torch.arange(rows) % 13 - 6).unsqueeze(1)
    v[5] = 0  # an all-zero row: amax 0
    return v.to(torch.bfloat16)


@pytest.fixture(scope="module")
def bufs_of():
    cache = {}

    def run(recipe):
        if recipe not in cache:
            torch.manual_seed(0)
            mod = pt.convert(torch.nn.Sequential(torch.nn.Linear(K, N)), recipe=recipe, warn=False)
            mod[0].weight.data = data(N, K, 2).float()
            x, dy = data(M, K, 1), data(M, N, 3)
            cache[recipe] = (pt.inspect(mod[0], x, dy), x, mod[0].weight.to(torch.bfloat16), dy,
                             mod[0])
        return cache[recipe]
    return run


def codes(v, scale, fmt):
    dt, fmax = fmt
    return (v.float() * scale).clamp(-fmax, fmax).to(dt).view(torch.uint8)


def same(a, b, what):
    """Bit equality, with the first differences named when not."""
    a, b = a.contiguous(), b.contiguous()
    if a.dtype != torch.uint8:
        a, b = a.view(torch.int32), b.float().view(torch.int32)
    bad = (a != b).nonzero()
    assert bad.numel() == 0, "%s: %d of %d differ, first at %s: precc %s, torch %s" % (
        what, bad.shape[0], a.numel(), bad[0].tolist(), a[tuple(bad[0])].item(), b[tuple(bad[0])].item())


# ---- tensorwise ----------------------------------------------------------

def torchao_tensorwise(v, fmt):
    # torchao/float8/float8_utils.py amax_to_scale: fp64 division, clamp at EPS.
    amax = v.float().abs().max()
    scale = (fmt[1] / amax.double().clamp(min=1e-12)).float()
    return amax, scale


def te_current_scale(v, fmt):
    # TE recipe_common.cuh compute_scale_from_amax: fp32; amax 0 -> 1.
    amax = v.float().abs().max()
    scale = torch.tensor(fmt[1], dtype=torch.float32) / amax if amax > 0 else torch.tensor(1.0)
    return amax, scale


@pytest.mark.parametrize("recipe,rule", [("current_tensorwise", torchao_tensorwise),
                                         ("te_current", te_current_scale)])
def test_current_tensorwise(bufs_of, recipe, rule):
    b, x, w, dy, _ = bufs_of(recipe)
    for name, v, fmt, has_amax in (("x", x, E4M3, True), ("w", w, E4M3, False),
                                   ("dy", dy, E5M2, True)):
        amax, scale = rule(v, fmt)
        if has_amax:
            same(b[name + ".amax"], amax.reshape(1, 1), name + ".amax")
        same(b[name + ".scale_inv"], scale.reciprocal().reshape(1, 1), name + ".scale_inv")
        q = codes(v, scale, fmt)
        same(b[name + ".q"][:v.shape[0]], q, name + ".q")
        same(b[name + ".q.t"][:, :v.shape[0]], q.t(), name + ".q.t")


def test_delayed_two_steps(bufs_of):
    """te_delayed_hybrid through the module: step 1 casts with the fresh
    scale 1; the deferred update then sets scale = fmax / max(history) in
    fp32 (TE delayed_scaling.cu), which step 2's casts use."""
    torch.manual_seed(0)
    mod = pt.convert(torch.nn.Sequential(torch.nn.Linear(K, N)), recipe="te_delayed_hybrid",
                     warn=False)[0]
    fmt = {"x": E4M3, "w": E4M3, "dy": E5M2}
    amaxes = {n: [] for n in fmt}
    for step in range(2):
        x = data(M, K, 10 + step)
        dy = data(M, N, 20 + step)
        w = mod.weight.to(torch.bfloat16)
        b = pt.inspect(mod, x, dy)
        vals = {"x": x, "w": w, "dy": dy}
        for n, v in vals.items():
            amaxes[n].append(v.float().abs().max())
            scale = 1.0 if step == 0 else torch.tensor(fmt[n][1]) / max(amaxes[n][:step])
            same(b[n + ".amax"], amaxes[n][-1].reshape(1, 1), "step %d %s.amax" % (step, n))
            same(b[n + ".q"][:v.shape[0]], codes(v, scale, fmt[n]), "step %d %s.q" % (step, n))
        # The real step: forward and backward, then the deferred update.
        xx = x.clone().requires_grad_(True)
        y = mod(xx)
        y.backward(dy)
        views = mod._precc_group.layouts[mod.precc_fqn].views(mod.precc_state)
        for n in fmt:
            hist = views[n + ".amax_history"].reshape(-1)
            nz = sorted(hist[hist != 0].tolist())
            assert nz == sorted(a.item() for a in amaxes[n]), (n, nz)
            same(views[n + ".scale"], (torch.tensor(fmt[n][1]) / max(amaxes[n])).reshape(1, 1),
                 n + ".scale after step %d" % step)
        mod.weight.grad = None


# ---- rowwise ---------------------------------------------------------------

def rowwise(v, fmt, pow2=True, dim=1):
    # torchao float8_utils: torch.amax(|x|, dim), fp64 division, then
    # _round_scale_down_to_power_of_2: exp2(floor(log2(scale))).
    amax = v.float().abs().amax(dim=dim, keepdim=True)
    scale = (fmt[1] / amax.double().clamp(min=1e-12)).float()
    if pow2:
        scale = torch.exp2(torch.floor(torch.log2(scale)))
    return scale


def check_rowwise(b, name, v, fmt, tname):
    rows = v.shape[0]
    s = rowwise(v, fmt)
    same(b[name + ".q"][:rows], codes(v, s, fmt), name + ".q")
    same(b[name + ".scale_inv"][:rows], s.reciprocal(), name + ".scale_inv")
    if tname:
        vt = v.t().contiguous()
        st = rowwise(vt, fmt)
        same(b[tname + ".q"][:, :rows], codes(vt, st, fmt), tname + ".q")
        same(b[tname + ".scale_inv"], st.reciprocal(), tname + ".scale_inv")


def test_rowwise(bufs_of):
    b, x, w, dy, _ = bufs_of("rowwise")
    # e4m3 for every operand; the transposes are scaled along the other dim.
    check_rowwise(b, "x", x, E4M3, "x.t")
    check_rowwise(b, "w", w, E4M3, "w.t")
    check_rowwise(b, "dy", dy, E4M3, "dy.t")
    same(b["x.t.amax.src"], x.float().abs().amax(0, keepdim=True), "x.t.amax.src")


def test_rowwise_gw_hp(bufs_of):
    b, x, w, dy, _ = bufs_of("rowwise_gw_hp")
    check_rowwise(b, "x", x, E4M3, None)
    check_rowwise(b, "w", w, E4M3, None)
    check_rowwise(b, "dy", dy, E4M3, None)
    # dgrad's weight: tensorwise power-of-two (torchao's cast_config_weight_for_grad_input).
    amax = w.float().abs().max()
    s = (448.0 / amax.double().clamp(min=1e-12)).float()
    s = torch.exp2(torch.floor(torch.log2(s)))
    same(b["w.dgrad.scale_inv"], s.reciprocal().reshape(1, 1), "w.dgrad.scale_inv")
    same(b["w.dgrad.q.t"], codes(w, s, E4M3).t(), "w.dgrad.q.t")
    # wgrad in high precision: dw = dy^T x, fp32 accumulation, bf16 out.
    ref = (dy.float().t() @ x.float())
    err = (b["dw"].float() - ref).norm() / ref.norm()
    assert err < 4e-3, err


# ---- blockwise (DeepSeek-V3) ------------------------------------------------

def deepgemm_blocks(v, br, bc):
    # DeepGEMM per_token_cast_to_fp8 / per_block_cast_to_fp8: sf = max(amax,
    # 1e-4) / 448 per block, codes of x * (1 / sf).
    r, c = v.shape
    vb = v.float().reshape(r // br, br, c // bc, bc)
    sf = vb.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-4) / 448.0
    q = (vb * (1.0 / sf)).to(torch.float8_e4m3fn).view(torch.uint8).reshape(r, c)
    return q, sf.reshape(r // br, c // bc)


def deepseek_pairs(b, x, w, dy):
    """(what, precc, DeepGEMM) for every code and scale tensor."""
    out = []
    for name, v in (("x", x), ("dy", dy)):
        q, sf = deepgemm_blocks(v, 1, 128)
        out += [(name + ".q", b[name + ".q"][:M], q), (name + ".scale_inv", b[name + ".scale_inv"][:M], sf)]
        # Backward's 128x1 tiles: the transpose, blocks of 128 along M (64 rows + zeros).
        vt = torch.zeros(v.shape[1], 128, dtype=v.dtype)
        vt[:, :M] = v.t()
        q, sf = deepgemm_blocks(vt, 1, 128)
        out += [(name + ".t.q", b[name + ".t.q"][:, :M], q[:, :M]),
                (name + ".t.scale_inv", b[name + ".t.scale_inv"], sf)]
    q, sf = deepgemm_blocks(w, 128, 128)
    out += [("w.q", b["w.q"], q), ("w.scale_inv", b["w.scale_inv"], sf),
            ("w.q.t", b["w.q.t"], q.t()), ("w.scale_inv.t", b["w.scale_inv.t"], sf.t())]
    return out


def test_deepseek_v3_close(bufs_of):
    """Blocks, layouts and padding right: scales within 1e-6 of DeepGEMM's,
    codes at most one step apart and equal but for a few in 10^3."""
    b, x, w, dy, mod = bufs_of("deepseek_v3")
    assert mod._precc_group.runtime(x.device).layer(mod.precc_fqn).m_multiple == 128  # M padded
    for what, got, ref in deepseek_pairs(b, x, w, dy):
        if got.dtype == torch.uint8:
            g = got.view(torch.float8_e4m3fn).float()
            r = ref.view(torch.float8_e4m3fn).float()
            step = (g - r).abs() <= torch.maximum(g.abs(), r.abs()) / 8 + 2.0 ** -9
            assert step.all(), what
            assert (got != ref).float().mean() < 1e-3, what
        else:
            assert torch.allclose(got, ref, rtol=1e-6, atol=0), what


def test_deepseek_v3_exact(bufs_of):
    b, x, w, dy, _ = bufs_of("deepseek_v3")
    for what, got, ref in deepseek_pairs(b, x, w, dy):
        same(got, ref, what)


# ---- blockwise (torchao) -----------------------------------------------------

def torchao_blocks(v, br, bc):
    # torchao v0.18.0 blockwise_fp8_training/kernels.py
    # torch_blockwise_scale_act_quant_lhs (:1031-1058) and
    # torch_blockwise_scale_weight_quant (:1121-1155), whose module needs
    # triton to import: amax in fp64 clamped at EPS = 1e-12, s = (448 /
    # amax).to(float32), codes of (x * s).clamp(-448, 448), scale 1.0 / s.
    r, c = v.shape
    vb = v.reshape(r // br, br, c // bc, bc)
    amax = vb.abs().amax(dim=(1, 3), keepdim=True).to(torch.float64).clamp(min=1e-12)
    s = (448.0 / amax).to(torch.float32)
    q = (vb * s).clamp(min=-448.0, max=448.0).to(torch.float8_e4m3fn)
    return q.view(torch.uint8).reshape(r, c), (1.0 / s).reshape(r // br, c // bc)


def test_torchao_blockwise_exact(bufs_of):
    """A recipe written as torchao's blockwise recipe is it, bit for bit
    (and precc check names it as that reference: tests/lit/recipe)."""
    b, x, w, dy, _ = bufs_of(os.path.join(os.path.dirname(__file__), "blockwise_torchao.lua"))
    for name, v in (("x", x), ("dy", dy)):
        q, si = torchao_blocks(v, 1, 128)
        same(b[name + ".q"][:M], q, name + ".q")
        same(b[name + ".scale_inv"][:M], si, name + ".scale_inv")
    q, si = torchao_blocks(w, 128, 128)
    same(b["w.q"], q, "w.q")
    same(b["w.scale_inv"], si, "w.scale_inv")


# ---- MX and NVFP4 against torchao ---------------------------------------------

def test_mxfp8_vs_torchao(bufs_of):
    mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor",
                             reason="torchao is not installed")
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    b, x, w, dy, _ = bufs_of("mxfp8")
    for name, v in (("x", x), ("w", w), ("dy", dy)):
        for suffix, t in (("", v), (".t", v.t().contiguous())):
            s, q = mx.to_mx(t, torch.float8_e4m3fn, 32, ScaleCalculationMode.RCEIL)
            r, c = t.shape
            same(b[name + suffix + ".q"][:r, :c], q.view(torch.uint8), name + suffix + ".q")
            same(b[name + suffix + ".scale_inv"][:r, :c // 32],
                 s.view(torch.uint8).reshape(r, c // 32), name + suffix + ".scale_inv")


def fp4_bytes(t):
    """An e2m1 buffer as its bytes: precc.torch holds it as
    torch.float4_e2m1fn_x2 [rows, cols / 2] (two codes a byte)."""
    assert t.dtype == getattr(torch, "float4_e2m1fn_x2", torch.uint8), t.dtype
    return t.view(torch.uint8)


def nvfp4_vs_torchao(nv, b, x, what=""):
    """x and its transpose (1x16 blocks, RNE) against torchao's
    nvfp4_quantize with per_tensor_amax_to_scale: the packed bytes (pack_uint4,
    the torch.float4_e2m1fn_x2 layout), the e4m3 block scales, all-zero
    blocks included (torchao clamps them to 2^-6), and the global decode
    scale, bit for bit."""
    for suffix, t in (("", x), (".t", x.t().contiguous())):
        pts = nv.per_tensor_amax_to_scale(t.float().abs().max())
        s, q = nv.nvfp4_quantize(t, 16, pts)
        r, c = t.shape
        name = what + "x" + suffix
        same(fp4_bytes(b["x" + suffix + ".q"])[:r, :c // 2], q.view(torch.uint8).reshape(r, c // 2),
             name + ".q")
        same(b["x" + suffix + ".scale_inv"][:r, :c // 16], s.view(torch.uint8).reshape(r, c // 16),
             name + ".scale_inv")
        same(b["x.global_scale_inv"], pts.reshape(1, 1), what + "x.global_scale_inv")


def test_nvfp4_vs_torchao(bufs_of):
    nv = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor",
                             reason="torchao is not installed")
    # torchao's arithmetic (nvfp4_scale = "torchao", no RHT); the shipped
    # nvfp4.lua follows TE >= 2.14, which tests/refsem checks
    b, x, w, dy, _ = bufs_of(os.path.join(os.path.dirname(__file__), "nvfp4_torchao.lua"))
    # w is quantized in 16x16 blocks and dy with stochastic rounding:
    # torchao has no reference for either, so only their global amaxes are
    # checked.
    nvfp4_vs_torchao(nv, b, x)
    same(b["x.global_amax"], x.float().abs().max().reshape(1, 1), "x.global_amax")
    same(b["dy.global_amax"], dy.float().abs().max().reshape(1, 1), "dy.global_amax")


def nvfp4_inputs(kind):
    # seed 1 for the heavy tail: there precc's old genc / dq and torchao's
    # (1 / gdec) / dq part on 14 codes with the same gdec
    g = torch.Generator().manual_seed(1 if kind == "heavy_tailed" else 7)
    v = torch.randn(M, K, generator=g)
    if kind == "heavy_tailed":      # z / sqrt(|z'|): a tail like Student's t with 1 dof
        v = v / torch.randn(M, K, generator=g).abs().clamp(min=1e-3).sqrt()
    elif kind == "zero_blocks":     # every third 16-block all zero
        v.view(M, K // 16, 16)[:, ::3] = 0
    elif kind == "subnormal_blocks":  # N(0,1) with blocks of bf16 subnormals
        v.view(M, K // 16, 16)[:, 1::4] *= 2.0 ** -130
    return v.to(torch.bfloat16)


@pytest.mark.parametrize("kind", ["normal", "heavy_tailed", "zero_blocks", "subnormal_blocks"])
def test_nvfp4_vs_torchao_data(kind):
    """torchao's nvfp4_quantize on N(0,1) (where 1 / (2688 / amax) is an ulp
    off amax / 2688), heavy tails (x * (1 / gdec / dq), not x * (genc / dq)),
    all-zero blocks and blocks of subnormals (block scales clamped at 2^-6)."""
    nv = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor",
                             reason="torchao is not installed")
    torch.manual_seed(0)
    lua = os.path.join(os.path.dirname(__file__), "nvfp4_torchao.lua")
    mod = pt.convert(torch.nn.Sequential(torch.nn.Linear(K, N)), recipe=lua, warn=False)
    x = nvfp4_inputs(kind)
    nvfp4_vs_torchao(nv, pt.inspect(mod[0], x), x, kind + ": ")
