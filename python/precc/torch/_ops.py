"""The torch side of a precc layer: a plan per (layer, runtime) that runs
the layer on tensors, the custom ops torch.compile sees (precc::linear and
precc::linear_backward, with fake-tensor implementations), and the Group
that owns a converted model's runtimes and its deferred state commits.

Two plans, chosen per layer when it is converted:
- ApiPlan: libprecc_rt's layer API, precc_rt_forward / precc_rt_backward /
  precc_rt_commit on caller-owned state, saved and workspace regions;
- StepPlan: precc_rt_run_step per step, for a layer the layer API refuses
  to cut (rowwise today: its w quantize, tagged dgrad, also makes fprop's
  w.q). Steps are split by dataflow: what y depends on is the forward, the
  steps whose outputs are all next_state are the commit, the rest the
  backward.
Either way the commit (the delayed-scaling amax/scale update) waits for the
end of the training step, so that all layers' amaxes go through one
torch.distributed all_reduce(MAX) first (docs/pytorch.md, "Distributed")."""
import itertools
import os
import threading
from typing import List, Optional

import torch

from .._lib import Error, check
from ..runtime import BulkCommit, Runtime, sync_threads

DTYPES = {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16,
          "bf16": torch.bfloat16}
REGION_ALIGN, SAVED_HEADER = 256, 64   # runtime/layer.c's region layout
GRAD_SIDE = "dy."   # the state of the backward's operand (its amax history, scale)


def torch_dtype(fmt):
    """The dtype a buffer of format fmt is held in: uint8 codes for every
    other format of 8 bits or fewer, as the interpreter stores them, and for
    e2m1 torch.float4_e2m1fn_x2 (two codes a byte, element 2i in the low
    nibble: the same bytes), or uint8 where torch lacks it."""
    if fmt == "e2m1":
        return getattr(torch, "float4_e2m1fn_x2", torch.uint8)
    return DTYPES.get(fmt, torch.uint8)


def _aligned(t):
    t = t.contiguous()
    if t.data_ptr() % 16:
        t = t.clone()
    if t.data_ptr() % 16:  # torch placed a clone off 16 bytes (never seen)
        n = t.numel() * t.element_size()
        raw = torch.empty(n + 16, dtype=torch.uint8, device=t.device)
        off = (-raw.data_ptr()) % 16
        out = raw[off:off + n].view(t.dtype).view(t.shape)
        out.copy_(t)
        t = out
    return t


def _ptr(t):
    return t.data_ptr() if t is not None else None


_CONTIGUOUS = torch.contiguous_format

# torch's current cudaStream_t as an int, without building a Stream object
# (inductor's get_raw_stream); absent from CPU builds of torch
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream_of(dev):
    """The stream precc_rt launches on for tensors on dev: torch's current
    stream of that device (a cudaStream_t is a CUstream), None on the CPU."""
    if dev.type == "cuda":
        if _raw_stream is not None and dev.index is not None:
            return _raw_stream(dev.index)
        return torch.cuda.current_stream(dev).cuda_stream
    return None


def _stream(t):
    return _stream_of(t.device) if t is not None else None


def _distributed():
    d = torch.distributed
    return d.is_available() and d.is_initialized() and d.get_world_size() > 1


# ---- state layouts ----------------------------------------------------------

class ApiLayout:
    """The layer API's state region (state_bytes, M-independent), held as
    one f32 tensor; initialized by precc_rt_layer_state_init."""
    kind = "api"

    def __init__(self, layer):
        sz = layer.sizes(layer.m_multiple)
        self.size = sz["state_bytes"] // 4
        self.pieces = []
        for b in layer.buffers:
            pl, off = layer.place(b, layer.m_multiple)
            if pl == "state":
                r, c = b.shape(1)
                self.pieces.append((b.name, off // 4, r, c))
        host = torch.zeros(self.size, dtype=torch.float32)
        if self.size:
            layer.state_init(host.data_ptr())
        self.fresh = host

    def new(self, device=None):
        return self.fresh.clone().to(device)

    def views(self, state):
        return {n: state[o:o + r * c].view(r, c) for n, o, r, c in self.pieces}


class StepLayout:
    """StepPlan's state: every buffer of role state, 16-byte aligned in one
    f32 tensor; fresh state as the IR says: histories 0, scales 1."""
    kind = "step"

    def __init__(self, layer):
        self.pieces = []
        off = 0
        for b in layer.role("state"):
            if b.format != "f32":
                raise Error("precc: layer '%s' state '%s' is %s; precc.torch keeps f32 state only"
                            % (layer.fqn, b.name, b.type))
            r, c = b.shape(1)
            self.pieces.append((b.name, off, r, c))
            off += (r * c + 3) // 4 * 4
        self.size = off
        self.fresh = torch.zeros(self.size, dtype=torch.float32)
        for b, (n, o, r, c) in zip(layer.role("state"), self.pieces):
            if "{" in b.type:  # a scale tensor
                self.fresh[o:o + r * c] = 1.0

    def new(self, device=None):
        return self.fresh.clone().to(device)

    def views(self, state):
        return {n: state[o:o + r * c].view(r, c) for n, o, r, c in self.pieces}


def make_layout(layer):
    try:
        layer.sizes(layer.m_multiple)
    except Error:
        return StepLayout(layer)
    return ApiLayout(layer)


# ---- plans --------------------------------------------------------------------

class _Plan:
    ws_cache = {}   # the Group's workspaces (Group.program sets it)

    def __init__(self, layer, layout):
        self.layer, self.layout = layer, layout
        for n, role in (("x", "input"), ("w", "weight"), ("y", "output"), ("dy", "grad_output"),
                        ("dx", "output"), ("dw", "output")):
            b = layer.buffer(n)
            if b is None or b.role != role:
                raise Error("precc: layer '%s' has no %s buffer '%s' (a manifest precc.torch "
                            "cannot run)" % (layer.fqn, role, n))
        self.x, self.w, self.y = layer.buffer("x"), layer.buffer("w"), layer.buffer("y")
        self.dy, self.dx, self.dw = layer.buffer("dy"), layer.buffer("dx"), layer.buffer("dw")
        self.bias = layer.buffer("bias")
        self.K, self.N = self.x.shape(1)[1], self.w.shape(1)[0]
        self.m_multiple = layer.m_multiple   # the per-call path reads it here
        self.shapes = {}

    def empty(self, b, m, like):
        # (shape, dtype) per buffer and M, worked out once (the per-call path)
        key = (b.index, m)
        sd = self.shapes.get(key)
        if sd is None:
            sd = self.shapes[key] = (b.storage_shape(m), torch_dtype(b.format))
        return torch.empty(sd[0], dtype=sd[1], device=like.device)

    def pad(self, t, mp):
        if t.shape[0] == mp:
            return _aligned(t)
        p = t.new_zeros((mp,) + tuple(t.shape[1:]))
        p[:t.shape[0]] = t
        return p


class ApiPlan(_Plan):
    """precc_rt_forward / precc_rt_backward / precc_rt_commit."""

    def __init__(self, layer, layout):
        super().__init__(layer, layout)
        if not isinstance(layout, ApiLayout):
            raise Error("precc: layer '%s' was converted for run_step" % layer.fqn)
        m = layer.m_multiple
        sz = layer.sizes(m)
        if sz["state_bytes"] // 4 != layout.size:
            raise Error("precc: layer '%s': this target's state is %d bytes, the first "
                        "target's %d" % (layer.fqn, sz["state_bytes"], layout.size * 4))
        self.keep_inputs = [n for n, k in (("x", "backward_reads_x"), ("w", "backward_reads_w"))
                            if sz[k]]
        self.keep_x, self.keep_w = "x" in self.keep_inputs, "w" in self.keep_inputs
        places = {b.name: layer.place(b, m) for b in layer.buffers}
        self.saved_bufs = [b for b in layer.buffers if places[b.name][0] == "saved"]
        # The amaxes the commit reads from saved: what is reduced across ranks.
        commit_in = {i for s in layer.steps if layer.phase(s) == 2 for i in s.ins}
        self.amax_bufs = [b for b in self.saved_bufs if b.index in commit_in and b.format == "f32"]
        self.has_state = bool(sz["has_state"])
        # linears that read one tensor: the root whose saved region a shared
        # forward reads instead of quantizing x again (runtime/share.c)
        self.input_root = layer.input_root if layer.shared_steps else None
        self.phases = [[s for s in layer.steps if layer.phase(s) == p] for p in range(3)]
        self.at_m = {}   # at(): sizes and shapes per padded M
        # the amaxes' (offset, bytes) in saved per M, for the all-reduce
        self.amax_at = {}
        for mm in (m, 3 * m):  # our reading of the region layout vs precc_rt's
            if self.saved_bytes(mm) != layer.sizes(mm)["saved_bytes"]:
                raise Error("precc: layer '%s': saved region of %d bytes at M=%d, precc_rt "
                            "says %d" % (layer.fqn, self.saved_bytes(mm), mm,
                                         layer.sizes(mm)["saved_bytes"]))
        # dev -> [saved region, padded M, held, (runtime, M), layer << 64 | address]:
        # the region the eager path's forwards reuse, so that the Group can
        # commit every layer in one bulk call (its table of addresses is
        # written once); the last two are what the Group keys it by
        self.slots = {}
        self.fast = {}        # (padded M, device) -> _fast_at's tuple
        self._offers = None   # eager_forward: is this a root others share x with?
        self._bind()

    def saved_bytes(self, m):
        # SymInt-friendly (torch.compile's fake M): header + each buffer
        # rounded up to REGION_ALIGN.
        n = SAVED_HEADER
        for b in self.saved_bufs:
            n = n + (b.bytes(m) + REGION_ALIGN - 1) // REGION_ALIGN * REGION_ALIGN
        return n

    def saved_fake(self, x, mp):
        return [x.new_empty((self.saved_bytes(mp),), dtype=torch.uint8)]

    def at(self, mp):
        """What a call at padded M allocates, worked out once per M (the
        per-call path): (saved bytes, workspace bytes, y's shape and dtype,
        dx's, dw's)."""
        r = self.at_m.get(mp)
        if r is None:
            sb, wb = self.region_bytes(mp)
            r = self.at_m[mp] = (sb, wb) + tuple(
                (b.storage_shape(mp), torch_dtype(b.format)) for b in (self.y, self.dx, self.dw))
        return r

    def region_bytes(self, mp):
        return self.saved_bytes(mp), self.layer.sizes(mp)["workspace_bytes"]

    def _bind(self):
        # The ctypes entry points, handle and lock, looked up once: a call
        # is then one locked C call (runtime.Layer.forward/backward/commit
        # do the same through a Python frame more each)
        rt = self.layer.rt
        self._lock, self._h, self._i = rt.lock, rt.handle, self.layer.index
        self._cf = rt.lib.precc_rt_forward_shared
        self._cb = rt.lib.precc_rt_backward_shared
        self._cc = rt.lib.precc_rt_commit
        self._lib = rt.lib
        self._state_ptr = bool(self.layout.size)
        self._cpu = rt.backend == "cpu"   # torch.set_num_threads's count goes to it
        self._kx = self.keep_inputs.index("x") if "x" in self.keep_inputs else -1
        self._kw = self.keep_inputs.index("w") if "w" in self.keep_inputs else -1
        self._nk = len(self.keep_inputs)

    def workspace(self, dev, stream, nbytes):
        """The per-call scratch: one buffer per device and stream, reused by
        every layer of the Group (calls on one stream are ordered), grown
        when a call needs more. Under CUDA graph capture a fresh one from
        the graph's pool, so that no captured graph reads a buffer a later
        growth frees."""
        key = (dev, stream)
        t = self.ws_cache.get(key)
        if t is not None and t.numel() >= nbytes:
            if stream is None or not torch.cuda.is_current_stream_capturing():
                return t
        elif stream is None or not torch.cuda.is_current_stream_capturing():
            t = self.ws_cache[key] = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=dev)
            return t
        return torch.empty(max(nbytes, 1), dtype=torch.uint8, device=dev)

    def slot(self, dev, stream, mp, nbytes):
        """The layer's fixed saved region on dev at padded M, when free: no
        one but this plan holds it (autograd released the last forward's,
        and that forward's commit is done). Else None: a second forward
        before the first one's backward, retain_graph, an abandoned graph
        not yet freed. Under CUDA graph capture an existing one only (a
        region made during capture belongs to the graph's pool)."""
        e = self.slots.get(dev)
        if e is not None:
            if e[2] or e[0]._use_count() != 1:
                return None
            if e[1] == mp:
                return e[0]
        if stream is not None and torch.cuda.is_current_stream_capturing():
            return None
        t = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        # [4]: the layer and the region's address in one int (its bulk
        # table's key part: ints hash fast, 561 of them a step)
        self.slots[dev] = [t, mp, False, (self.layer.rt, mp), (self._i << 64) | t.data_ptr()]
        return t

    def forward(self, x, w, bias, state, mp, seed, root_saved=None, slot=False):
        sb, wb, ys, _, _ = self.at_m.get(mp) or self.at(mp)
        dev = x.device
        stream = _stream_of(dev)
        ws = self.workspace(dev, stream, wb)
        y = torch.empty(ys[0], dtype=ys[1], device=dev)
        saved = self.slot(dev, stream, mp, sb) if slot and self.has_state else None
        if saved is None:
            saved = torch.empty(sb, dtype=torch.uint8, device=dev)
        with self._lock:
            if self._cpu:
                sync_threads(self._lib)
            rc = self._cf(self._h, self._i, mp, x.data_ptr(), w.data_ptr(),
                          bias.data_ptr() if bias is not None else None, y.data_ptr(),
                          saved.data_ptr(), state.data_ptr() if self._state_ptr else None,
                          ws.data_ptr(), seed, stream,
                          root_saved.data_ptr() if root_saved is not None else None)
        if rc < 0:
            check(rc)
        return y, [saved]

    def backward(self, dy, state, kept, mp, seed, root_saved=None):
        _, wb, _, dxs, dws = self.at_m.get(mp) or self.at(mp)
        dev = dy.device
        saved = kept[self._nk]
        stream = _stream_of(dev)
        ws = self.workspace(dev, stream, wb)
        dx = torch.empty(dxs[0], dtype=dxs[1], device=dev)
        dw = torch.empty(dws[0], dtype=dws[1], device=dev)
        x = self.pad(kept[self._kx], mp) if self._kx >= 0 else None
        w = kept[self._kw] if self._kw >= 0 else None
        with self._lock:
            if self._cpu:
                sync_threads(self._lib)
            rc = self._cb(self._h, self._i, mp, x.data_ptr() if x is not None else None,
                          w.data_ptr() if w is not None else None, dy.data_ptr(),
                          dx.data_ptr(), dw.data_ptr(), None, saved.data_ptr(),
                          state.data_ptr() if self._state_ptr else None, ws.data_ptr(), seed,
                          stream, root_saved.data_ptr() if root_saved is not None else None)
        if rc < 0:
            check(rc)
        if not self.has_state:
            return dx, dw, None
        e = self.slots.get(dev)
        if e is not None and e[0] is saved:
            e[2] = True      # held until the commit
            return dx, dw, _ApiPending(self, saved, state, mp, e)
        return dx, dw, _ApiPending(self, saved, state, mp)

    # The eager path's common call, in one frame each way: M a multiple of
    # the plan's (no pad), x, w and dy contiguous and 16-byte aligned, no
    # shared input. _fwd_run + forward + _setup_by, and _backward_by +
    # _bwd_run + backward + Group.add_backward, inlined: at Llama-3-70B's
    # 561 linears a Python frame and a dict touched per call cost more than
    # the call's own work (bench/RESULTS.md, "One frame per call"). The
    # saved region is kept for the backward, not returned as an output.
    # None: not the common call; _EagerLinear takes the general path.
    def _fast_at(self, m, dev):
        """(saved bytes, workspace bytes, and y's, dx's and dw's templates)
        at padded M on dev. A template is one element expanded to the
        output's shape: torch.empty_like of it is a contiguous tensor of
        that shape, dtype and device without parsing a shape and a dtype
        (0.8 against 1.3 us a call)."""
        sb, wb, ys, dxs, dws = self.at(m)
        r = self.fast[(m, dev)] = (sb, wb) + tuple(
            torch.empty(1, dtype=d, device=dev).expand(sh) for sh, d in (ys, dxs, dws))
        return r

    def eager_forward(self, ctx, group, x, w, bias, state, key):
        m = x.shape[0]
        if not m or m % self.m_multiple or self._offers:
            return None
        if self._offers is None:   # a root offers its saved region (Module.forward)
            self._offers = self.layer.fqn in group.sharers
            if self._offers:
                return None
        xp, wp = x.data_ptr(), w.data_ptr()
        if (xp | wp) & 15 or not x.is_contiguous() or not w.is_contiguous():
            return None
        if bias is not None:
            bias = _aligned(bias)
        dev = x.device
        sb, wb, yt, _, _ = self.fast.get((m, dev)) or self._fast_at(m, dev)
        stream = _stream_of(dev)
        ws = self.ws_cache.get((dev, stream))
        if ws is None or ws.numel() < wb or stream is not None:
            ws = self.workspace(dev, stream, wb)
        g = group
        with g.lock:
            if g.backwards and g.pending:
                g.flush()    # Group.add_forward
            g.forwards += 1
            seed = g.next_seed()
            y = torch.empty_like(yt, memory_format=_CONTIGUOUS)
            # the fixed region when free: the bulk commit needs it, and it
            # is one torch.empty fewer for a recipe without state too
            saved = self.slot(dev, stream, m, sb) if g.bulk else None
            if saved is None:
                saved = torch.empty(sb, dtype=torch.uint8, device=dev)
            with self._lock:
                if self._cpu:
                    sync_threads(self._lib)
                rc = self._cf(self._h, self._i, m, xp, wp,
                              bias.data_ptr() if bias is not None else None, y.data_ptr(),
                              saved.data_ptr(), state.data_ptr() if self._state_ptr else None,
                              ws.data_ptr(), seed, stream, None)
        if rc < 0:
            check(rc)
        # state is the module's buffer, which the commit writes behind
        # autograd's back: held as it is, not as a saved tensor (whose
        # version check the commit would trip)
        if self._kx < 0:
            if self._kw < 0:
                ctx.save_for_backward(saved)
            else:
                ctx.save_for_backward(w, saved)
        elif self._kw < 0:
            ctx.save_for_backward(x, saved)
        else:
            ctx.save_for_backward(x, w, saved)
        ctx.state, ctx.m, ctx.group, ctx.plan, ctx.fast = state, m, group, self, True
        ctx.key, ctx.backwards, ctx.shared = key, 0, False
        ctx.bias_dtype = bias.dtype if bias is not None else None
        return y

    def eager_backward(self, ctx, dy):
        kept = ctx.saved_tensors   # [x], [w], saved
        m = ctx.m
        if dy.data_ptr() & 15 or not dy.is_contiguous():
            dy = _aligned(dy)
        dev = dy.device
        _, wb, _, dxt, dwt = self.fast.get((m, dev)) or self._fast_at(m, dev)
        stream = _stream_of(dev)
        ws = self.ws_cache.get((dev, stream))
        if ws is None or ws.numel() < wb or stream is not None:
            ws = self.workspace(dev, stream, wb)
        saved = kept[-1]
        again = ctx.backwards > 0     # retain_graph=True: this forward's second backward
        ctx.backwards += 1
        g = ctx.group
        with g.lock:
            seed = g.next_seed()
            dx = torch.empty_like(dxt, memory_format=_CONTIGUOUS)
            dw = torch.empty_like(dwt, memory_format=_CONTIGUOUS)
            with self._lock:
                if self._cpu:
                    sync_threads(self._lib)
                rc = self._cb(self._h, self._i, m,
                              kept[self._kx].data_ptr() if self._kx >= 0 else None,
                              kept[self._kw].data_ptr() if self._kw >= 0 else None,
                              dy.data_ptr(), dx.data_ptr(), dw.data_ptr(), None,
                              saved.data_ptr(),
                              ctx.state.data_ptr() if self._state_ptr else None,
                              ws.data_ptr(), seed, stream, None)
            if rc < 0:
                check(rc)
            if self.has_state:   # Group.add_backward
                e = self.slots.get(dev)
                if e is not None and e[0] is saved:
                    e[2] = True      # held until the commit
                else:
                    e = None
                g.pending.append(_ApiPending(self, saved, ctx.state, m, e, again))
            g.backwards += 1
            if g.backwards >= g.forwards:
                g.flush()
        if ctx.bias_dtype is None:
            return dx, dw, None, None, None, None, None, None
        return (dx, dw, dy.sum(0, dtype=torch.float32).to(ctx.bias_dtype), None, None, None,
                None, None)


class _ApiPending:
    __slots__ = ("plan", "saved", "state", "mp", "slot", "grad_only")

    def __init__(self, plan, saved, state, mp, slot=None, grad_only=False):
        self.plan, self.saved, self.state, self.mp = plan, saved, state, mp
        self.slot = slot            # the plan's slot entry when saved is its fixed region
        self.grad_only = grad_only  # a second backward over one forward: update dy's state alone

    def amaxes(self):
        p, mp = self.plan, self.mp
        at = p.amax_at.get(mp)
        if at is None:
            at = p.amax_at[mp] = [(p.layer.place(b, mp)[1], b.bytes(mp)) for b in p.amax_bufs]
        return [self.saved[off:off + n].view(torch.float32) for off, n in at]

    def commit(self):
        p = self.plan
        state = self.state
        if self.grad_only:   # on a copy, of which dy's part is kept
            state = self.state.clone()
        with p._lock:
            rc = p._cc(p._h, p._i, self.mp, self.saved.data_ptr(), state.data_ptr(),
                       _stream(state))
        if self.slot is not None:
            self.slot[2] = False
        if rc < 0:
            check(rc)
        if self.grad_only:
            # .data: autograd saved this tensor; the commit writes it behind
            # autograd's back, like precc_rt does, without a version bump
            for n, o, r, c in p.layout.pieces:
                if n.startswith(GRAD_SIDE):
                    self.state.data[o:o + r * c].copy_(state[o:o + r * c])


class StepPlan(_Plan):
    """precc_rt_run_step per step, split by dataflow."""

    def eager_forward(self, ctx, group, x, w, bias, state, key):
        return None

    def __init__(self, layer, layout):
        super().__init__(layer, layout)
        names = {b.name for b in layer.buffers}
        missing = [p[0] for p in layout.pieces if p[0] not in names]
        if missing or len(layout.pieces) != len(layer.role("state")):
            raise Error("precc: layer '%s': the state of this target differs from the first "
                        "target's (%s)" % (layer.fqn, ", ".join(missing) or "count"))
        B = layer.buffers
        nxt = {b.index for b in layer.role("next_state")}
        writer = {o: s for s in layer.steps for o in s.outs}
        fwd, todo = set(), [writer[self.y.index]]
        while todo:
            s = todo.pop()
            if s.index not in fwd:
                fwd.add(s.index)
                todo += [writer[i] for i in s.ins if i in writer]
        if any(self.dy.index in layer.steps[i].ins for i in fwd):
            raise Error("precc: layer '%s': y depends on dy" % layer.fqn)
        f = [s for s in layer.steps if s.index in fwd]
        u = [s for s in layer.steps if s.index not in fwd and s.outs
             and all(o in nxt for o in s.outs)]
        b = [s for s in layer.steps if s.index not in fwd and s not in u]
        self.phases = [f, b, u]
        made_f = {o for s in f for o in s.outs}
        made_b = {o for s in b for o in s.outs}
        read_later = {i for s in b + u for i in s.ins}
        self.keep_inputs = [n for n in ("x", "w") if layer.buffer(n).index in read_later]
        self.keep_x, self.keep_w = "x" in self.keep_inputs, "w" in self.keep_inputs
        self.saved_bufs = [B[i] for i in sorted(made_f & read_later) if B[i].role != "state"]
        self.fwd_new = [B[i] for i in sorted(made_f)]
        self.bwd_new = [B[i] for i in sorted(made_b)]
        self.upd_new = [B[i] for i in sorted({o for s in u for o in s.outs})]
        upd_in = {i for s in u for i in s.ins}
        self.amax_names = [B[i].name for i in sorted(upd_in & (made_f | made_b))
                           if B[i].format == "f32"]
        self.upd_keep = [B[i].name for i in sorted(upd_in) if B[i].role != "state"]
        self.commit_names = [n for st, nx in layer.updates for n in (st.name, nx.name)]

    def saved_fake(self, x, mp):
        return [x.new_empty(b.storage_shape(mp), dtype=torch_dtype(b.format))
                for b in self.saved_bufs]

    def _run(self, steps, m, bufs, seed, stream):
        ptrs = [0] * len(self.layer.buffers)
        for b in self.layer.buffers:
            t = bufs.get(b.name)
            if t is not None:
                ptrs[b.index] = t.data_ptr()
        for s in steps:
            self.layer.run_step(s.index, m, ptrs, seed, stream)

    def forward(self, x, w, bias, state, mp, seed, root_saved=None, slot=False):
        bufs = self.layout.views(state)
        bufs.update(x=x, w=w)
        if bias is not None:
            bufs["bias"] = bias
        for b in self.fwd_new:
            bufs[b.name] = self.empty(b, mp, x)
        self._run(self.phases[0], mp, bufs, seed, _stream(x))
        return bufs["y"], [bufs[b.name] for b in self.saved_bufs]

    def backward(self, dy, state, kept, mp, seed, root_saved=None):
        bufs = self.layout.views(state)
        names = self.keep_inputs + [b.name for b in self.saved_bufs]
        for n, t in zip(names, kept):
            bufs[n] = self.pad(t, mp) if n == "x" else t
        bufs["dy"] = dy
        for b in self.bwd_new:
            bufs[b.name] = self.empty(b, mp, dy)
        self._run(self.phases[1], mp, bufs, seed, _stream(dy))
        pend = None
        if self.phases[2]:
            pend = _StepPending(self, {n: bufs[n] for n in self.upd_keep + self.commit_names
                                       if n in bufs})
        return bufs["dx"], bufs["dw"], pend


class _StepPending:
    grad_only = False
    slot = None

    def __init__(self, plan, bufs):
        self.plan, self.bufs = plan, bufs

    def amaxes(self):
        return [self.bufs[n] for n in self.plan.amax_names]

    def commit(self):
        p, bufs = self.plan, self.bufs
        like = next(iter(bufs.values()))
        for b in p.upd_new:
            bufs[b.name] = p.empty(b, 1, like)
        # State buffers never depend on M; any valid M will do.
        p._run(p.phases[2], p.layer.m_multiple, bufs, 0, _stream(like))
        for st, nx in p.layer.updates:
            if not self.grad_only or st.name.startswith(GRAD_SIDE):
                bufs[st.name].data.copy_(bufs[nx.name])


def make_plan(layer, layout):
    return (ApiPlan if isinstance(layout, ApiLayout) else StepPlan)(layer, layout)


# ---- the group of a converted model ----------------------------------------------

class Group:
    """The runtimes of one converted model (one per device) and its
    deferred commits."""

    def __init__(self, artifacts, layouts, seed=0):
        self.artifacts, self.layouts, self.seed = artifacts, layouts, seed
        self.runtimes, self.plans = {}, {}
        self.fast = {}           # (fqn, device) -> plan: program()'s per-call lookup
        self.workspaces = {}     # (device, stream) -> the layers' shared scratch
        self.lock = threading.RLock()
        self.pending = []        # _ApiPending / _StepPending awaiting the commit
        self.forwards = 0        # forwards with grad since the last flush
        self.backwards = 0
        self.allreduce_calls = 0
        self.commits = 0
        self.calls = 0
        self.sharers = {}        # root fqn -> converted layers that share its input
        self.shared_inputs = {}  # root fqn -> [x, version, padded M, saved, uses left]
        self.shared_forwards = 0
        # The bulk commit: the eager path's forwards write each layer's fixed
        # saved region (ApiPlan.slot), and flush commits all those layers in
        # one precc_rt_bulk_commit_run, made once per set of addresses.
        # PRECC_TORCH_BULK=0: a precc_rt_commit per layer, as before.
        self.bulk = os.environ.get("PRECC_TORCH_BULK", "1") != "0"
        self.bulks = {}          # (runtime, M, layers and addresses) -> [BulkCommit, table]
        self.bulk_runs = 0       # bulk commits run, and the layers they committed
        self.bulk_layers = 0

    def __deepcopy__(self, memo):
        # A copied module (an EMA, say) runs the same artifacts: share them.
        return self

    def offer_input(self, fqn, x, mp, saved):
        """A root's forward: its saved region, for the layers that read the
        same x next (q's for k and v), until each has taken it."""
        n = self.sharers.get(fqn, 0)
        if n:
            self.shared_inputs[fqn] = [x, x._version, mp, saved, n]

    def shared_input(self, root, x, mp):
        """The root's saved region if its last forward took this very x (the
        same storage, shape, strides, dtype and version, at the same padded
        M: an autocast copy of it is then the same bytes too)."""
        e = self.shared_inputs.get(root)
        if e is None:
            return None
        rx, ver, rmp, saved, _ = e
        if (rx.data_ptr() != x.data_ptr() or rx.shape != x.shape or rx.stride() != x.stride()
                or rx.dtype != x.dtype or rx.device != x.device or x._version != ver
                or rmp != mp):
            return None
        e[4] -= 1
        if e[4] == 0:   # every sharer took it: drop the reference to x
            del self.shared_inputs[root]
        self.shared_forwards += 1
        return saved

    def runtime(self, device):
        key = (device.type, device.index)
        with self.lock:
            rt = self.runtimes.get(key)
            if rt is None:
                if device.type == "cpu":
                    rt = Runtime(self.artifacts, "cpu")
                elif device.type == "cuda":
                    rt = _open_cuda(self.artifacts, device)
                else:
                    raise Error("precc: tensors on %s: precc runs on cpu or cuda tensors" % device)
                self.runtimes[key] = rt
            return rt

    def program(self, fqn, device):
        p = self.fast.get((fqn, device))
        if p is None:
            rt = self.runtime(device)
            key = (id(rt), fqn)
            p = self.plans.get(key)
            if p is None:
                p = self.plans[key] = make_plan(rt.layer(fqn), self.layouts[fqn])
                p.ws_cache = self.workspaces
            self.fast[(fqn, device)] = p
        return p

    def reset_plans(self):
        """Forget the plans (after a runtime of self.runtimes was swapped)."""
        self.plans.clear()
        self.fast.clear()
        self.workspaces.clear()
        self.close_bulks()

    def close_bulks(self):
        for bc, _ in self.bulks.values():
            bc.close()
        self.bulks.clear()

    BULKS_KEPT = 4   # bulk commits kept (sets of addresses: M changes, state moved)

    def _commit_bulk(self, pending):
        """Commit, one bulk call per runtime and M, the pending layers whose
        saved region is their fixed one; returns those left to commit one
        by one. One pass over the pending list: this runs once a step over
        every layer of the model."""
        sets, rest = {}, []
        k0 = ps = None
        for p in pending:
            e = p.slot
            if e is None or p.grad_only:
                rest.append(p)
                continue
            k = e[3]
            if k != k0:   # most models: one (runtime, M) for every layer
                ps = sets.get(k)
                if ps is None:
                    ps = sets[k] = []
                k0 = k
            ps.append(p)
        if rest:
            # a layer committed twice (two forwards before the flush) rolls
            # its history twice, in the order of the backwards: one by one
            twice = {p.plan for p in rest}
            if any(p.plan in twice for ps in sets.values() for p in ps):
                rest = [p for p in pending
                        if p.slot is None or p.grad_only or p.plan in twice]
                sets = {gk: [p for p in ps if p.plan not in twice]
                        for gk, ps in sets.items()}
        for (rt, mp), ps in sets.items():
            if len(ps) < 2:
                rest += ps
                continue
            key = (id(rt), mp, tuple([p.slot[4] for p in ps]),
                   tuple([p.state.data_ptr() for p in ps]))
            e = self.bulks.get(key)
            if e is None:
                e = self._new_bulk(rt, mp, ps, key)
                if e is None:
                    rest += ps
                    continue
            with rt.lock:
                e[0].run(_stream(ps[0].state))
            for p in ps:
                p.slot[2] = False
            self.bulk_runs += 1
            self.bulk_layers += len(ps)
        return rest

    def _new_bulk(self, rt, mp, ps, key):
        dev = ps[0].state.device
        if dev.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return None   # _new writes its table with a synchronous copy
        layers = [p.plan._i for p in ps]
        nbytes = BulkCommit.table_bytes(rt, layers)
        if nbytes == 0:
            return None   # nothing to commit, or not bulk-committable: one by one
        table = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        with rt.lock:
            bc = BulkCommit(rt, layers, mp, [p.saved.data_ptr() for p in ps],
                            [p.state.data_ptr() for p in ps], table.data_ptr(), nbytes)
        if len(self.bulks) >= self.BULKS_KEPT:
            old = self.bulks.pop(next(iter(self.bulks)))
            old[0].close()
        e = self.bulks[key] = [bc, table]
        return e

    def next_seed(self):
        self.calls += 1
        return (self.seed * 0x9E3779B97F4A7C15 + self.calls) & 0xFFFFFFFFFFFFFFFF

    def add_forward(self):
        with self.lock:
            if self.backwards and self.pending:
                # A backward ran since the last flush and the step was not
                # closed (a forward whose backward never ran): close it now,
                # before this forward reads the scales.
                self.flush()
            self.forwards += 1

    def add_backward(self, pending):
        with self.lock:
            if pending is not None:
                self.pending.append(pending)
            self.backwards += 1
            if self.backwards >= self.forwards:
                self.flush()

    def flush(self):
        """All-reduce (MAX) the pending layers' amaxes in one call when
        torch.distributed is initialized, then commit each layer."""
        with self.lock:
            pending, self.pending = self.pending, []
            self.forwards = self.backwards = 0
            # the commit changes the scales a root's saved copy was made with
            self.shared_inputs.clear()
            if not pending:
                return
            amaxes = [a for p in pending for a in p.amaxes()] if _distributed() else []
            if amaxes:
                flat = torch.cat([a.reshape(-1) for a in amaxes])
                torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.MAX)
                self.allreduce_calls += 1
                # back into each layer's saved region: one multi-tensor copy
                # (one launch on CUDA for all layers, not one per amax)
                parts = torch.split(flat, [a.numel() for a in amaxes])
                torch._foreach_copy_(amaxes, [p.view_as(a) for p, a in zip(parts, amaxes)])
            if self.bulk:
                pending = self._commit_bulk(pending)
            for p in pending:
                p.commit()
            self.commits += 1


def _cuda_context(idx):
    """torch's primary context of device idx, current on this thread while
    precc_rt opens (precc_rt keeps the context current at open and makes
    it current around its own calls)."""
    torch.cuda.init()
    torch.empty(1, device="cuda:%d" % idx)
    return torch.cuda.device(idx)


def _open_cuda(artifacts, device):
    idx = device.index if device.index is not None else torch.cuda.current_device()
    with _cuda_context(idx):
        try:
            return Runtime(artifacts, "cuda")
        except Error as e:
            raise Error("precc: tensors on %s, but this libprecc_rt (%s) cannot run its cuda "
                        "backend: %s" % (device, _lib_path(), e)) from None


def _lib_path():
    from .. import _lib
    return getattr(_lib.load(), "path", "libprecc_rt.so")


_REGISTRY = {}
_keys = itertools.count(1)


def register(group, fqn):
    k = next(_keys)
    _REGISTRY[k] = (group, fqn)
    return k


def lookup(key):
    try:
        return _REGISTRY[key]
    except KeyError:
        raise Error("precc: layer key %d is not registered in this process" % key) from None


# ---- the custom ops ------------------------------------------------------------------

def _padded(plan, m):
    k = plan.layer.m_multiple
    return (m + k - 1) // k * k


def _fwd_impl(x, w, bias, state, key, needs_grad, root_saved=None):
    group, fqn = lookup(key)
    return _fwd_run(group, group.program(fqn, x.device), x, w, bias, state, needs_grad,
                    root_saved)


def _fwd_run(group, plan, x, w, bias, state, needs_grad, root_saved, slot=False):
    m = x.shape[0]
    k = plan.m_multiple
    mp = (m + k - 1) // k * k
    if m == 0:
        return [x.new_empty((0, plan.N), dtype=torch_dtype(plan.y.format))] + \
               plan.saved_fake(x, 0)
    with group.lock:
        if needs_grad:
            group.add_forward()
        y, saved = plan.forward(plan.pad(x, mp), _aligned(w),
                                _aligned(bias) if bias is not None else None,
                                state, mp, group.next_seed(), root_saved,
                                slot and group.bulk)
    if mp != m:
        y = y[:m].clone()
    return [y] + saved


def _fwd_fake(x, w, bias, state, key, needs_grad, root_saved=None):
    group, fqn = lookup(int(key))
    plan = group.program(fqn, torch.device("cpu"))
    mp = _padded(plan, x.shape[0])
    return [x.new_empty((x.shape[0], plan.N), dtype=torch_dtype(plan.y.format))] + \
        plan.saved_fake(x, mp)


def _bwd_impl(dy, state, kept, key, m, root_saved=None):
    # key < 0: the same layer, a second backward over one forward
    again = key < 0
    group, fqn = lookup(-key if again else key)
    return _bwd_run(group, group.program(fqn, dy.device), dy, state, kept, m, root_saved, again)


def _bwd_run(group, plan, dy, state, kept, m, root_saved, again=False):
    k = plan.m_multiple
    mp = (m + k - 1) // k * k
    if m == 0:
        return [dy.new_empty((0, plan.K), dtype=torch_dtype(plan.dx.format)),
                dy.new_zeros((plan.N, plan.K), dtype=torch_dtype(plan.dw.format))]
    with group.lock:
        dx, dw, pending = plan.backward(plan.pad(dy, mp), state, kept, mp, group.next_seed(),
                                        root_saved)
        if pending is not None and again:
            # a second backward over the same forward (retain_graph=True):
            # its commit updates dy's state alone (docs/pytorch.md)
            pending.grad_only = True
        group.add_backward(pending)
    if mp != m:
        dx = dx[:m].clone()
    return [dx, dw]


def _bwd_fake(dy, state, kept, key, m, root_saved=None):
    # int(): a traced backward (compiled autograd) may see the key as a
    # SymInt; it is a constant of the layer (a guard on it)
    group, fqn = lookup(abs(int(key)))
    plan = group.program(fqn, torch.device("cpu"))
    return [dy.new_empty((m, plan.K), dtype=torch_dtype(plan.dx.format)),
            dy.new_empty((plan.N, plan.K), dtype=torch_dtype(plan.dw.format))]


# precc::linear(x, w, bias, state, key, needs_grad, root_saved) -> [y, saved...]
# precc::linear_backward(dy, state, kept, key, m, root_saved) -> [dx, dw]
# root_saved: the input root's saved region of a forward on the same x
# (precc_rt_forward_shared), or None.
# The delayed-scaling state is read through `state` and written by the
# deferred commit (Group.flush), inside the ops' implementations: no op
# that torch.compile sees reads it in between.
@torch.library.custom_op("precc::linear", mutates_args=())
def linear_op(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor],
              state: torch.Tensor, key: int, needs_grad: bool,
              root_saved: Optional[torch.Tensor]) -> List[torch.Tensor]:
    return _fwd_impl(x, w, bias, state, key, needs_grad, root_saved)


linear_op.register_fake(_fwd_fake)


@torch.library.custom_op("precc::linear_backward", mutates_args=())
def linear_backward_op(dy: torch.Tensor, state: torch.Tensor, kept: List[torch.Tensor],
                       key: int, m: int,
                       root_saved: Optional[torch.Tensor]) -> List[torch.Tensor]:
    return _bwd_impl(dy, state, kept, key, m, root_saved)


linear_backward_op.register_fake(_bwd_fake)


def _setup_context(ctx, inputs, output):
    x, w, bias, state, key, needs_grad, root_saved = inputs
    group, fqn = lookup(key)
    _setup_by(ctx, group.program(fqn, x.device), x, w, bias, state, key, root_saved, output)


def _setup_by(ctx, plan, x, w, bias, state, key, root_saved, output):
    kept = [x, w] if plan.keep_x and plan.keep_w else [x] if plan.keep_x else \
        [w] if plan.keep_w else []
    kept += output[1:]
    ctx.shared = root_saved is not None     # kept until this layer's backward
    if ctx.shared:
        kept.append(root_saved)
    ctx.save_for_backward(state, *kept)
    ctx.key, ctx.m = key, x.shape[0]
    ctx.bias_dtype = bias.dtype if bias is not None else None
    ctx.backwards = 0


def _backward_by(ctx, grads, linear_backward):
    state, *kept = ctx.saved_tensors
    root_saved = kept.pop() if ctx.shared else None
    # the eager path's pad makes dy contiguous and aligned itself
    dy = grads[0] if linear_backward is None else grads[0].contiguous()
    again = ctx.backwards > 0     # retain_graph=True: this forward's second backward
    ctx.backwards += 1
    if linear_backward is None:   # eager: the plan the forward ran
        dx, dw = _bwd_run(ctx.group, ctx.plan, dy, state, kept, ctx.m, root_saved, again)
    elif again:
        dx, dw = linear_backward(dy, state, kept, -ctx.key, ctx.m, root_saved)
    else:
        dx, dw = linear_backward(dy, state, kept, ctx.key, ctx.m, root_saved)
    db = dy.sum(0, dtype=torch.float32).to(ctx.bias_dtype) if ctx.bias_dtype is not None else None
    return dx, dw, db, None, None, None, None


def _backward(ctx, grads):
    return _backward_by(ctx, grads, torch.ops.precc.linear_backward)


torch.library.register_autograd("precc::linear", _backward, setup_context=_setup_context)


class _EagerLinear(torch.autograd.Function):
    """precc::linear and its autograd in eager mode: the same forward,
    context and backward as the custom ops, without torch.library's
    per-call dispatch (its argument flattening, alias checks and autograd
    wrapper cost more host time than the layer's own work; bench/RESULTS.md,
    "Host overhead"), and with the plan looked up once per call, kept in
    ctx for the backward. torch.compile traces the custom ops."""

    @staticmethod
    def forward(ctx, x, w, bias, state, group, plan, key, root_saved):
        if root_saved is None:
            y = plan.eager_forward(ctx, group, x, w, bias, state, key)
            if y is not None:
                return y
        # the eager path's saved region is the layer's fixed one (slot),
        # which the Group's bulk commit needs; torch.compile's op allocates
        out = _fwd_run(group, plan, x, w, bias, state, True, root_saved, slot=True)
        _setup_by(ctx, plan, x, w, bias, state, key, root_saved, out)
        ctx.group, ctx.plan, ctx.fast = group, plan, False
        if len(out) > 1:
            ctx.mark_non_differentiable(*out[1:])
        ctx.set_materialize_grads(False)   # no zeros for saved's gradient
        return tuple(out)

    @staticmethod
    def backward(ctx, dy, *_):
        if ctx.fast:
            return ctx.plan.eager_backward(ctx, dy)
        return _backward_by(ctx, (dy,), None) + (None,)


# autograd.Function.apply without its Python wrapper (default-argument
# binding, and functorch's unwrapping of dead wrappers, which only matters
# while a functorch transform is active: then the wrapper is used)
_eager_apply = super(torch.autograd.Function, _EagerLinear).apply
_functorch_active = torch._C._are_functorch_transforms_active


def linear_eager(x, w, bias, state, key, needs_grad, root_saved, group=None, plan=None):
    """precc::linear outside torch.compile: the forward alone when no
    gradient is needed, else through _EagerLinear."""
    if plan is None:
        group, fqn = lookup(key)
        plan = group.program(fqn, x.device)
    if not needs_grad:
        return _fwd_run(group, plan, x, w, bias, state, False, root_saved)
    if _functorch_active():
        out = _EagerLinear.apply(x, w, bias, state, group, plan, key, root_saved)
    else:
        out = _eager_apply(x, w, bias, state, group, plan, key, root_saved)
    # y alone: the common call (ApiPlan.eager_forward), which keeps saved
    return (out,) if isinstance(out, torch.Tensor) else out


def trace(plan, x, w, bias, state, dy=None, seed=0):
    """Every buffer of one run of the layer's steps on x (and dy: the
    backward and the commit's update steps too), run step by step on a
    copy of state: the quantized operands, scales and amaxes as the kernels
    wrote them. The module, its state and the Group are untouched."""
    m = x.shape[0]
    mp = _padded(plan, m)
    bufs = plan.layout.views(state.detach().clone())
    bufs["x"], bufs["w"] = plan.pad(x.detach(), mp), _aligned(w.detach())
    if plan.bias is not None:
        bufs["bias"] = _aligned(bias.detach())
    steps = list(plan.phases[0])
    if dy is not None:
        bufs["dy"] = plan.pad(dy.detach(), mp)
        steps += plan.phases[1] + plan.phases[2]
    layer = plan.layer
    for b in layer.buffers:
        if b.name not in bufs and any(b.index in s.outs for s in steps):
            bufs[b.name] = plan.empty(b, mp, x)
    ptrs = [bufs[b.name].data_ptr() if b.name in bufs else 0 for b in layer.buffers]
    for s in steps:
        layer.run_step(s.index, mp, ptrs, seed, _stream(x))
    return bufs
