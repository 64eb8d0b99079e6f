"""precc.torch.GroupedExperts: transformers 5's fused MoE experts module
(3-D gate_up_proj / up_proj and down_proj Parameters, the classes that
@use_experts_implementation decorates) with every expert's GEMMs run by
precc: where the artifacts have an expert group for a projection that
groups fprop, dgrad and wgrad (precc_rt_forward_grouped /
precc_rt_backward_grouped, issue 29), one grouped call per projection on
the tokens sorted by expert, the offsets computed on the device; else each
expert's GEMMs by its own per-expert plan.

The forward contract is the experts module's own: hidden_states [T, H],
top_k_index [T, k] (integers in [0, E)) and top_k_weights [T, k] in, [T, H]
out, computed as transformers' grouped_mm implementation does
(integrations/moe.py, grouped_mm_experts_forward): (token, k) pairs sorted
stably by expert, each expert's up (gate_up) GEMM, the module's own gate
(_apply_gate) or act_fn, its down GEMM, the rows scaled by their top-k
weight, unpermuted and summed over k. docs/pytorch.md, "Mixture of experts"."""
import math

import torch
from torch import nn
import torch.nn.functional as F

from .._lib import Error
from . import _ops

STATE_PREFIX = "precc_state_"   # + the parameter's name: one buffer per GEMM kind, [E, S]


def up_name(mod):
    return "gate_up_proj" if getattr(mod, "has_gate", True) else "up_proj"


def is_fused_experts(mod):
    """A transformers 5 experts module: the attributes use_experts_implementation
    sets, and 3-D up and down Parameters of one expert count."""
    if isinstance(mod, GroupedExperts):
        return False
    if not all(hasattr(mod, a) for a in ("has_gate", "has_bias", "is_transposed", "num_experts")):
        return False
    up, down = getattr(mod, up_name(mod), None), getattr(mod, "down_proj", None)
    return (isinstance(up, nn.Parameter) and isinstance(down, nn.Parameter)
            and up.dim() == 3 and down.dim() == 3)


class Kind:
    """One GEMM of every expert (the up or the down projection): the 3-D
    Parameter's name, its per-expert K (in) and N (out), and, when precc runs
    it, each expert's layer FQN, key and plan facts."""
    __slots__ = ("param", "bias", "K", "N", "fqns", "precc", "reason", "keys", "size",
                 "stride", "xdtype", "wdtype", "bdtype")

    def __init__(self, mod, param, fqn):
        p = getattr(mod, param)
        E = p.shape[0]
        self.param = param
        self.bias = param + "_bias" if mod.has_bias else None
        # [E, in, out] when transposed (x @ W[e]), else nn.Linear's [E, out, in]
        self.K, self.N = (p.shape[1], p.shape[2]) if mod.is_transposed else (p.shape[2], p.shape[1])
        self.fqns = ["%s.%d.%s" % (fqn, e, param) for e in range(E)]
        self.precc, self.reason, self.keys = False, "", None
        self.size = self.stride = 0
        self.xdtype = self.wdtype = self.bdtype = None


def why_not(mod):
    """Why a fused experts module is not swapped, or None."""
    if getattr(mod, "has_post_expert_norm", False):
        return "a post-expert norm (not handled by precc.torch.GroupedExperts yet)"
    if getattr(mod, "_is_expert_parallel", False):
        return "expert parallel (sentinel routing is not handled by precc.torch.GroupedExperts)"
    up, down = getattr(mod, up_name(mod)), mod.down_proj
    E = mod.num_experts
    if up.shape[0] != E or down.shape[0] != E:
        return "num_experts %d, parameters of %d and %d experts" % (E, up.shape[0], down.shape[0])
    if up.device.type == "meta":
        return "its weights are on the meta device"
    if not mod.has_gate and not hasattr(mod, "act_fn"):
        return "no act_fn"
    return None


class GroupedExperts(nn.Module):
    """The experts module it replaces, with the same Parameters (the same
    objects, the same 3-D layout), buffers and children, so the same
    state_dict keys, plus one `precc_state_<param>` buffer [E, S] per GEMM
    precc runs (each expert's scaling state, a row each). forward takes what
    the module took: (hidden_states [T, H], top_k_index [T, k],
    top_k_weights [T, k])."""

    @classmethod
    def from_experts(cls, mod, group, fqn, kinds):
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        for n, p in mod._parameters.items():
            new.register_parameter(n, p)
        for n, b in mod._buffers.items():
            new.register_buffer(n, b, persistent=n not in mod._non_persistent_buffers_set)
        for n, c in mod._modules.items():
            new.add_module(n, c)
        for k, v in vars(mod).items():   # config, num_experts, alpha, limit, has_gate, ...
            if k not in new.__dict__ and not (k.startswith("_") and k != "_is_expert_parallel"):
                setattr(new, k, v)
        new.training = mod.training
        new.__dict__["_precc_orig"] = mod         # what unconvert gives back
        new._precc_gate = getattr(type(mod), "_apply_gate", None)
        new._precc_group = group
        new.precc_fqn = fqn
        new._precc_kinds = kinds
        new.precc_grouped = True       # False: always the per-expert plans
        new.precc_grouped_calls = 0    # forwards that took the grouped path
        new._precc_steps = {}          # device -> (up, down) GroupSteps, or why not
        dev = getattr(mod, up_name(mod)).device
        for kd in kinds:
            if not kd.precc:
                continue
            layout = group.layouts[kd.fqns[0]]
            kd.size = layout.size
            kd.stride = (layout.size + 3) // 4 * 4     # each row 16-byte aligned
            st = torch.zeros(len(kd.fqns), kd.stride, dtype=torch.float32)
            for e, f in enumerate(kd.fqns):
                if group.layouts[f].size != kd.size:
                    raise Error("precc: %s: experts with state of different sizes" % f)
                st[e, :kd.size] = group.layouts[f].new()
            new.register_buffer(STATE_PREFIX + kd.param, st.to(dev))
            kd.keys = [_ops.register(group, f) for f in kd.fqns]
            prog = group.program(kd.fqns[0], torch.device("cpu"))
            kd.xdtype = _ops.torch_dtype(prog.x.format)
            kd.wdtype = _ops.torch_dtype(prog.w.format)
            kd.bdtype = _ops.torch_dtype(prog.bias.format) if prog.bias is not None else None
            if (kd.bdtype is None) != (kd.bias is None):
                raise Error("precc: %s: the module %s a bias; its artifacts %s" % (
                    kd.fqns[0], "has" if kd.bias else "has no",
                    "were built without one" if kd.bias else "have one"))
        return new

    # ---- the contract ---------------------------------------------------------

    def forward(self, hidden_states, top_k_index=None, top_k_weights=None, **kw):
        # gpt-oss names them router_indices and routing_weights
        if top_k_index is None:
            top_k_index = kw.pop("router_indices", None)
        if top_k_weights is None:
            top_k_weights = kw.pop("routing_weights", None)
        if kw:
            raise Error("precc: %s: unexpected arguments %s" % (self.precc_fqn, sorted(kw)))
        return _grouped_forward(self, hidden_states, top_k_index, top_k_weights)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        # A plain checkpoint has no precc_state_*: keep the fresh state.
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)
        for n in self._buffers:
            key = prefix + n
            if n.startswith(STATE_PREFIX) and key not in state_dict and key in missing_keys:
                missing_keys.remove(key)

    def extra_repr(self):
        return "experts=%d, %s, precc=%s (%s)" % (
            self.num_experts, ", ".join("%s %d->%d %s" % (k.param, k.K, k.N,
                                                          "precc" if k.precc else "torch")
                                        for k in self._precc_kinds),
            self.precc_fqn, self._precc_group.recipe)

    # ---- the grouped GEMMs -----------------------------------------------------

    def grouped_steps(self, device):
        """The (up, down) expert groups (runtime.GroupStep) the grouped path
        runs on device, or a str: why this module runs per expert there."""
        r = self._precc_steps.get(device)
        if r is None:
            r = self._precc_steps[device] = self._find_steps(device)
        return r

    def _find_steps(self, device):
        steps = []
        for kd in self._precc_kinds:
            if not kd.precc:
                return "%s runs in torch" % kd.param
            if kd.size:
                return "%s has scaling state (a commit per expert)" % kd.param
            if kd.bias:
                return "%s has a bias" % kd.param
            rt = self._precc_group.runtime(device)
            gs = rt.groups.get("%s.%s" % (self.precc_fqn, kd.param))
            if gs is None:
                return "the artifacts have no group %s.%s" % (self.precc_fqn, kd.param)
            if not all(gs.grouped):
                return "%s: the group runs only %s grouped" % (gs.name, ", ".join(
                    g for g, on in zip(("fprop", "dgrad", "wgrad"), gs.grouped) if on))
            if (gs.experts, gs.n, gs.k) != (self.num_experts, kd.N, kd.K):
                return "%s: %d experts of [%d, %d], the module's %d of [%d, %d]" % (
                    gs.name, gs.experts, gs.n, gs.k, self.num_experts, kd.N, kd.K)
            if (_ops.torch_dtype(gs.formats.get("x")) != kd.xdtype or
                    _ops.torch_dtype(gs.formats.get("w")) != kd.wdtype):
                return "%s: its x and w are not the expert layers'" % gs.name
            steps.append(gs)
        return tuple(steps)

    # ---- the per-expert GEMMs --------------------------------------------------

    def _activate(self, h):
        """The up projection's output through the activation, gated or not:
        the grouped and the per-expert paths' one rule."""
        if not self.has_gate:
            return self.act_fn(h)
        if self._precc_gate is not None:
            return self._precc_gate(self, h)
        g, u = h.chunk(2, dim=-1)                     # transformers' _default_apply_gate
        return self.act_fn(g) * u

    def _gemm(self, kd, e, x, w, b):
        """One expert's GEMM of kind kd on its rows x (2-D): precc's layer
        kd.fqns[e], or torch's F.linear where the recipe's plan did not take
        the kind (a fallback; convert's report says why)."""
        if not kd.precc:
            return F.linear(x, w, b)
        if x.dtype != kd.xdtype:
            dt = x.device.type
            if torch.is_autocast_enabled(dt) and torch.get_autocast_dtype(dt) == kd.xdtype:
                x = x.to(kd.xdtype)
            else:
                raise Error("precc: %s: input is %s; the recipe runs this layer on %s "
                            "inputs (cast the model, or run under torch.autocast(%r, dtype=%s))"
                            % (kd.fqns[e], x.dtype, kd.xdtype, dt, kd.xdtype))
        w = w.to(kd.wdtype)
        if b is not None:
            b = b.to(kd.bdtype)
        state = getattr(self, STATE_PREFIX + kd.param)[e, :kd.size]
        if state.device != x.device:
            raise Error("precc: %s: precc state on %s, input on %s (move the whole module)"
                        % (kd.fqns[e], state.device, x.device))
        needs_grad = torch.is_grad_enabled() and (x.requires_grad or w.requires_grad or
                                                  (b is not None and b.requires_grad))
        group = self._precc_group
        plan = group.program(kd.fqns[e], x.device)
        return _ops.linear_eager(x, w, b, state, kd.keys[e], needs_grad, None, group, plan)[0]


def route(top_k_index, num_experts, what="precc"):
    """The permutation of the (token, k) pairs, sorted stably by expert, and
    the tokens per expert (a host list: the per-expert launches need it).
    Refuses indices that are not integers of shape [T, k], negative or >= E."""
    idx = top_k_index
    if not torch.is_tensor(idx) or idx.dim() != 2:
        raise Error("%s: top_k_index must be a 2-D tensor [tokens, top_k], not %s" % (
            what, list(idx.shape) if torch.is_tensor(idx) else type(idx).__name__))
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        raise Error("%s: top_k_index must hold integers, not %s" % (what, idx.dtype))
    flat = idx.reshape(-1).long()
    if flat.numel():
        lo, hi = int(flat.min()), int(flat.max())
        if lo < 0 or hi >= num_experts:
            raise Error("%s: top_k_index holds expert %d; the module has experts 0..%d%s" % (
                what, lo if lo < 0 else hi, num_experts - 1,
                " (an expert-parallel sentinel is not taken)" if hi == num_experts else ""))
    order = torch.sort(flat, stable=True).indices
    counts = torch.bincount(flat, minlength=num_experts).tolist()
    return order, counts


class _GroupedGemm(torch.autograd.Function):
    """One projection of every expert at once: x [m, K] the (token, k) rows
    sorted by expert, each expert's rows padded to the group's token_align
    (zero rows), offs the experts' END offsets (int32, x's device), w the
    experts' weights stacked [E * N, K]. precc_rt_forward_grouped, and in
    the backward one precc_rt_backward_grouped for dX and dW."""

    @staticmethod
    def forward(ctx, x, w, offs, gs, m, group):
        sz = gs.sizes(m)
        dev = x.device
        y = torch.empty((m, gs.n), dtype=_ops.torch_dtype(gs.formats["y"]), device=dev)
        saved = torch.empty(max(sz["saved_bytes"], 1), dtype=torch.uint8, device=dev)
        ws = torch.empty(max(sz["workspace_bytes"], 1), dtype=torch.uint8, device=dev)
        with group.lock:
            seed = group.next_seed()
        gs.forward(m, offs.data_ptr(), x.data_ptr(), w.data_ptr(), y.data_ptr(),
                   saved.data_ptr(), None, ws.data_ptr(), seed, _ops._stream_of(dev))
        ctx.save_for_backward(x, w, offs, saved)
        ctx.gs, ctx.m, ctx.group = gs, m, group
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w, offs, saved = ctx.saved_tensors
        gs, m, group = ctx.gs, ctx.m, ctx.group
        dev = dy.device
        dy = _ops._aligned(dy.to(_ops.torch_dtype(gs.formats["dy"])))
        sz = gs.sizes(m)
        ws = torch.empty(max(sz["workspace_bytes"], 1), dtype=torch.uint8, device=dev)
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = torch.empty((m, gs.k), dtype=_ops.torch_dtype(gs.formats["dx"]), device=dev)
        if ctx.needs_input_grad[1]:
            dw = torch.empty((gs.experts * gs.n, gs.k), dtype=_ops.torch_dtype(gs.formats["dw"]),
                             device=dev)
        with group.lock:
            seed = group.next_seed()
        gs.backward(m, offs.data_ptr(), x.data_ptr(), w.data_ptr(), dy.data_ptr(),
                    dx.data_ptr() if dx is not None else None,
                    dw.data_ptr() if dw is not None else None, saved.data_ptr(), None,
                    ws.data_ptr(), seed, _ops._stream_of(dev))
        return dx, dw, None, None, None, None


def _check_index(idx, num_experts, what, device_side):
    """top_k_index's values in [0, E): refused with the reason (route's
    message), or, device_side (the cuda backend), asserted on the device:
    no host sync."""
    flat = idx.reshape(-1)
    if (not device_side or idx.dtype.is_floating_point or idx.dtype.is_complex
            or idx.dtype == torch.bool):
        route(idx, num_experts, what)   # device_side: only a bad dtype comes here, no sync
    elif flat.numel():
        torch._assert_async(((flat >= 0) & (flat < num_experts)).all(),
                            "%s: top_k_index holds an expert outside 0..%d" % (
                                what, num_experts - 1))


def _grouped_path(self, steps, x, top_k_index, top_k_weights):
    """The experts' GEMMs as one grouped call per projection (and one per
    projection in the backward): the (token, k) pairs sorted stably by
    expert, as the per-expert path orders them, each expert's rows starting
    on the groups' token_align (zero rows between), m_total a static bound
    (T*k + E*(align-1), up to the steps' M multiple), so nothing waits for
    the counts on the host (test_device_path's fake-driver step checks
    that no op reads a tensor on the host). The same bits as the per-expert plans: each
    expert's rows, zero padded, go through the same kernels."""
    up, down = self._precc_kinds
    gu, gd = steps
    E = self.num_experts
    T, k = top_k_index.shape
    dev = x.device
    flat = top_k_index.reshape(-1).long()
    n = flat.numel()
    a = max(gu.token_align, gd.token_align, 1)
    mm = gu.m_multiple * gd.m_multiple // math.gcd(gu.m_multiple, gd.m_multiple)
    m = -(-(n + E * (a - 1)) // mm) * mm
    order = torch.sort(flat, stable=True).indices
    s = flat[order]                                   # each sorted pair's expert
    # (bincount reads its max on the host under CUDA; index_add_ does not)
    counts = torch.zeros(E, dtype=torch.long, device=dev).index_add_(0, flat,
                                                                     torch.ones_like(flat))
    padded = (counts + a - 1) // a * a
    ends = torch.cumsum(padded, 0)
    first = torch.cumsum(counts, 0) - counts          # an expert's first sorted pair
    pos = (ends - padded)[s] + torch.arange(n, device=dev) - first[s]
    offs = ends.to(torch.int32)                       # the experts' END offsets
    tr = self.is_transposed

    def stacked(kd):
        p = getattr(self, kd.param)                   # [E, N, K] ([E, K, N] transposed)
        p = p.transpose(1, 2) if tr else p
        return _ops._aligned(p.to(kd.wdtype).reshape(E * kd.N, kd.K))

    xs = x[order // k]
    if xs.dtype != up.xdtype:                         # autocast (checked by _grouped_forward)
        xs = xs.to(up.xdtype)
    xp = xs.new_zeros((m, up.K)).index_copy(0, pos, xs)
    h = _GroupedGemm.apply(xp, stacked(up), offs, gu, m, self._precc_group)
    h = self._activate(h)
    # the rows of no token stay 0 (an activation need not map 0 to 0)
    real = torch.zeros(m, dtype=torch.bool, device=dev).index_fill_(0, pos, True)
    h = torch.where(real.unsqueeze(1), h, h.new_zeros(()))
    if h.dtype != down.xdtype:
        h = h.to(down.xdtype)
    y = _GroupedGemm.apply(_ops._aligned(h), stacked(down), offs, gd, m, self._precc_group)
    self.precc_grouped_calls += 1
    ys = y[pos]
    weighted = ys * top_k_weights.reshape(-1)[order].unsqueeze(-1)
    inv = torch.empty_like(order)
    inv[order] = torch.arange(n, device=dev)
    return weighted[inv].view(T, k, -1).sum(dim=1).to(x.dtype)


def _input_ok(kd, x):
    """x's dtype is what the recipe runs kd on, or autocast casts it so."""
    if x.dtype == kd.xdtype:
        return True
    dt = x.device.type
    return torch.is_autocast_enabled(dt) and torch.get_autocast_dtype(dt) == kd.xdtype


@torch.compiler.disable
def _grouped_forward(self, x, top_k_index, top_k_weights):
    # Outside torch.compile's graphs: the tokens per expert are host ints
    # (one launch per expert with tokens), a data-dependent loop no graph
    # holds until the grouped kernels take the offsets on the device.
    fqn, E = self.precc_fqn, self.num_experts
    up, down = self._precc_kinds
    if not torch.is_tensor(x) or x.dim() != 2 or x.shape[1] != up.K:
        raise Error("precc: %s: hidden_states of shape %s; the experts take [tokens, %d]" % (
            fqn, list(x.shape) if torch.is_tensor(x) else type(x).__name__, up.K))
    if not torch.is_tensor(top_k_index) or top_k_index.dim() != 2:
        route(top_k_index, E, "precc: " + fqn)        # refuses it with the reason
    T, k = top_k_index.shape
    if T != x.shape[0]:
        raise Error("precc: %s: top_k_index is %s for %d tokens" % (fqn, list(top_k_index.shape),
                                                                    x.shape[0]))
    if not torch.is_tensor(top_k_weights) or tuple(top_k_weights.shape) != (T, k):
        raise Error("precc: %s: top_k_weights must be %s like top_k_index, not %s" % (
            fqn, [T, k], list(top_k_weights.shape) if torch.is_tensor(top_k_weights)
            else type(top_k_weights).__name__))
    if T * k == 0:
        route(top_k_index, E, "precc: " + fqn)
        return torch.zeros_like(x)
    steps = self.grouped_steps(x.device) if self.precc_grouped else "precc_grouped is False"
    if not isinstance(steps, str) and _input_ok(up, x):
        _check_index(top_k_index, E, "precc: " + fqn, steps[0].rt.backend == "cuda")
        return _grouped_path(self, steps, x, top_k_index, top_k_weights)
    order, counts = route(top_k_index, E, "precc: " + fqn)
    tok = order // k
    xs = x[tok]                                   # [T*k, H], sorted by expert
    ws = top_k_weights.reshape(-1)[order]
    w_up, w_down = getattr(self, up.param).unbind(0), getattr(self, down.param).unbind(0)
    b_up = getattr(self, up.bias).unbind(0) if up.bias else None
    b_down = getattr(self, down.bias).unbind(0) if down.bias else None
    tr = self.is_transposed
    # Under torch.distributed a recipe with state commits every pending
    # layer after one all_reduce of their amaxes, which must line up across
    # ranks: there every expert runs, one with no tokens on one zero row
    # (its amaxes 0, so the MAX is the other ranks'; its output times 0).
    # (Without grad nothing is committed: idle experts are skipped.)
    every = (torch.is_grad_enabled() and _ops._distributed()
             and any(kd.precc and kd.size for kd in (up, down)))
    outs, idle = [], []
    for e, rows in enumerate(torch.split(xs, counts)):
        if counts[e] == 0:
            if not every:                         # no tokens: no launch, no state change
                continue
            rows = xs.new_zeros((1, xs.shape[1]))
        h = self._gemm(up, e, rows, w_up[e].t() if tr else w_up[e],
                       b_up[e] if b_up is not None else None)
        h = self._activate(h)
        y = self._gemm(down, e, h, w_down[e].t() if tr else w_down[e],
                       b_down[e] if b_down is not None else None)
        (idle if counts[e] == 0 else outs).append(y)
    ys = torch.cat(outs) if len(outs) > 1 else outs[0]
    weighted = ys * ws.unsqueeze(-1)
    inv = torch.empty_like(order)
    inv[order] = torch.arange(order.numel(), device=order.device)
    out = weighted[inv].view(T, k, -1).sum(dim=1).to(x.dtype)
    if idle:   # so that their backward runs (on zeros) and commits too
        out = out + sum(y.float().sum() for y in idle).to(x.dtype) * 0
    return out


def to_experts(mod):
    """The module GroupedExperts.from_experts was made from, holding mod's
    Parameters, buffers (without precc's state) and children as they are now."""
    orig = mod._precc_orig
    for n, p in mod._parameters.items():
        orig._parameters[n] = p
    for n, b in mod._buffers.items():
        if not n.startswith(STATE_PREFIX):
            orig._buffers[n] = b
    for n, c in mod._modules.items():
        orig._modules[n] = c
    orig.train(mod.training)
    return orig
