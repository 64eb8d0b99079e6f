"""The torch side of a precc layer: one Program per (layer, runtime) that
runs the layer's steps on tensors, the custom ops torch.compile sees
(precc::linear, precc::linear_backward, with fake-tensor implementations),
and the Group that owns a converted model's runtimes and its delayed-
scaling updates.

Steps are split by dataflow: those y depends on run in forward, the
others in backward, except the state-update steps (every output a
next_state: the delayed-scaling amax/scale update), which the Group defers
to the end of the training step so that all layers' amaxes go through one
torch.distributed all_reduce(MAX) first (docs/pytorch.md, "Distributed").
The one place that knows how a layer is run is _Adapter: run_step today,
the train helper's precc_rt_forward/backward once libprecc_rt has them."""
import itertools
import threading
from typing import List, Optional

import torch

from .. import _lib
from .._lib import Error
from ..runtime import Runtime

DTYPES = {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16,
          "bf16": torch.bfloat16}


def torch_dtype(fmt):
    """The dtype a buffer of format fmt is held in (uint8 codes for every
    format of 8 bits or fewer, as the interpreter stores them)."""
    return DTYPES.get(fmt, torch.uint8)


class StateLayout:
    """Where each state buffer of a layer lives in the module's one f32
    `precc_state` tensor: 16-byte aligned slices (kernels use 16-byte
    access). Fresh state is the IR's: histories 0, scales 1 (docs/ir.md)."""

    def __init__(self, layer):
        self.pieces = []  # (name, offset, rows, cols, init)
        off = 0
        for b in layer.role("state"):
            if b.format != "f32":
                raise Error("precc: layer '%s' state '%s' is %s; precc.torch keeps f32 state only"
                            % (layer.fqn, b.name, b.type))
            r, c = b.shape(1)
            init = 1.0 if "{" in b.type else 0.0  # a scale tensor, else a history
            self.pieces.append((b.name, off, r, c, init))
            off += (r * c + 3) // 4 * 4
        self.size = off

    def new(self, device=None):
        t = torch.zeros(self.size, dtype=torch.float32, device=device)
        for _, off, r, c, init in self.pieces:
            t[off:off + r * c] = init
        return t

    def views(self, state):
        return {n: state[off:off + r * c].view(r, c) for n, off, r, c, _ in self.pieces}


class _Adapter:
    """How a layer's steps are run: precc_rt_run_step per step."""

    @staticmethod
    def run(layer, steps, m, bufs, seed, stream):
        ptrs = [0] * len(layer.buffers)
        for b in layer.buffers:
            t = bufs.get(b.name)
            if t is not None:
                ptrs[b.index] = t.data_ptr()
        for s in steps:
            layer.run_step(s.index, m, ptrs, seed, stream)

    @staticmethod
    def commit(layer, bufs):
        for state, nxt in layer.updates:
            bufs[state.name].copy_(bufs[nxt.name])


def self_index(layer, name):
    return layer.buffer(name).index


class Program:
    """One layer on one runtime: which buffers the forward makes and keeps
    for the backward, which steps run when."""

    def __init__(self, layer, layout):
        self.layer, self.layout = layer, layout
        need = {"x": "input", "w": "weight", "y": "output", "dy": "grad_output",
                "dx": "output", "dw": "output"}
        for n, role in need.items():
            b = layer.buffer(n)
            if b is None or b.role != role:
                raise Error("precc: layer '%s' has no %s buffer '%s' (a manifest precc.torch "
                            "cannot run)" % (layer.fqn, role, n))
        self.bias = layer.buffer("bias")
        names = {b.name for b in layer.buffers}
        missing = [p[0] for p in layout.pieces if p[0] not in names]
        if missing or len(layout.pieces) != len(layer.role("state")):
            raise Error("precc: layer '%s': the state of this target differs from the first "
                        "target's (%s)" % (layer.fqn, ", ".join(missing) or "count"))
        B = layer.buffers
        nxt = {b.index for b in layer.role("next_state")}
        # The forward is what y depends on, by dataflow: the manifest's gemm
        # tag names the GEMM a step prepares first in program order, and a
        # quantize of w that prepares dgrad may also make fprop's w.q.
        writer = {o: s for s in layer.steps for o in s.outs}
        fwd, todo = set(), [writer[self_index(layer, "y")]]
        while todo:
            s = todo.pop()
            if s.index not in fwd:
                fwd.add(s.index)
                todo += [writer[i] for i in s.ins if i in writer]
        self.fwd = [s for s in layer.steps if s.index in fwd]
        if any(layer.buffer("dy").index in s.ins for s in self.fwd):
            raise Error("precc: layer '%s': y depends on dy" % layer.fqn)
        self.upd = [s for s in layer.steps if s.index not in fwd and s.outs
                    and all(o in nxt for o in s.outs)]
        self.bwd = [s for s in layer.steps if s.index not in fwd and s not in self.upd]
        made_fwd = {o for s in self.fwd for o in s.outs}
        made_bwd = {o for s in self.bwd for o in s.outs}
        read_later = {i for s in self.bwd + self.upd for i in s.ins}
        # What the forward hands the backward: x and w when a backward step
        # reads them, and the scratch the forward wrote that later steps read.
        self.keep_inputs = [n for n in ("x", "w") if layer.buffer(n).index in read_later]
        self.saved = [B[i] for i in sorted(made_fwd & read_later) if B[i].role != "state"]
        self.fwd_new = [B[i] for i in sorted(made_fwd)]
        self.bwd_new = [B[i] for i in sorted(made_bwd)]
        self.upd_new = [B[i] for i in sorted({o for s in self.upd for o in s.outs})]
        upd_in = {i for s in self.upd for i in s.ins}
        # The amaxes an update reads (scratch written this step): reduced
        # across ranks before the update.
        self.amaxes = [B[i].name for i in sorted(upd_in & (made_fwd | made_bwd))
                       if B[i].format == "f32"]
        self.upd_keep = [B[i].name for i in sorted(upd_in) if B[i].role != "state"]
        self.commit_names = [n for u in layer.updates for n in (u[0].name, u[1].name)]
        self.x, self.w, self.y = layer.buffer("x"), layer.buffer("w"), layer.buffer("y")
        self.dy, self.dx, self.dw = layer.buffer("dy"), layer.buffer("dx"), layer.buffer("dw")
        self.K, self.N = self.x.shape(1)[1], self.w.shape(1)[0]

    def empty(self, b, m, like):
        return torch.empty(b.shape(m), dtype=torch_dtype(b.format), device=like.device)

    def pad(self, t, mp):
        if t.shape[0] == mp:
            return _aligned(t)
        p = t.new_zeros((mp,) + tuple(t.shape[1:]))
        p[:t.shape[0]] = t
        return p


def _aligned(t):
    t = t.contiguous()
    if t.data_ptr() % 16:
        t = t.clone()
    return t if t.data_ptr() % 16 == 0 else _copy16(t)


def _copy16(t):
    # A clone torch placed off 16 bytes (never seen): an over-allocation cut to 16.
    n = t.numel() * t.element_size()
    raw = torch.empty(n + 16, dtype=torch.uint8, device=t.device)
    off = (-raw.data_ptr()) % 16
    out = raw[off:off + n].view(t.dtype).view(t.shape)
    out.copy_(t)
    return out


class Group:
    """The runtimes of one converted model (one per device) and its
    deferred delayed-scaling updates."""

    _seq = itertools.count(1)

    def __init__(self, artifacts, layouts, seed=0):
        self.artifacts, self.layouts, self.seed = artifacts, layouts, seed
        self.runtimes, self.programs = {}, {}
        self.lock = threading.RLock()
        self.pending = []        # (program, bufs) awaiting the update
        self.forwards = 0        # forwards with grad since the last flush
        self.backwards = 0
        self.allreduce_calls = 0
        self.calls = 0

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
        rt = self.runtime(device)
        key = (id(rt), fqn)
        p = self.programs.get(key)
        if p is None:
            p = self.programs[key] = Program(rt.layer(fqn), self.layouts[fqn])
        return p

    def next_seed(self):
        self.calls += 1
        return (self.seed * 0x9E3779B97F4A7C15 + self.calls) & 0xFFFFFFFFFFFFFFFF

    # -- deferred updates --------------------------------------------------

    def add_forward(self):
        with self.lock:
            if self.backwards and self.pending:
                # A backward ran since the last flush and the step was not
                # closed (a forward whose backward never ran): close it now,
                # before this forward reads the scales.
                self.flush()
            self.forwards += 1

    def add_backward(self, prog, bufs):
        with self.lock:
            if prog.upd:
                self.pending.append((prog, bufs))
            self.backwards += 1
            if self.backwards >= self.forwards:
                self.flush()

    def flush(self):
        """All-reduce (MAX) the pending layers' amaxes in one call when
        torch.distributed is initialized, then run each layer's update steps
        and commit the new state."""
        with self.lock:
            pending, self.pending = self.pending, []
            self.forwards = self.backwards = 0
            if not pending:
                return
            amaxes = [bufs[n] for prog, bufs in pending for n in prog.amaxes]
            if amaxes and _distributed():
                flat = torch.cat([a.reshape(-1) for a in amaxes])
                torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.MAX)
                self.allreduce_calls += 1
                off = 0
                for a in amaxes:
                    n = a.numel()
                    a.copy_(flat[off:off + n].view_as(a))
                    off += n
            for prog, bufs in pending:
                like = bufs[prog.upd_keep[0]] if prog.upd_keep else None
                for b in prog.upd_new:
                    bufs[b.name] = prog.empty(b, 1, like)
                # State buffers never depend on M; any valid M will do.
                _Adapter.run(prog.layer, prog.upd, prog.layer.m_multiple, bufs, 0, _stream(like))
                _Adapter.commit(prog.layer, bufs)


def _distributed():
    d = torch.distributed
    return d.is_available() and d.is_initialized() and d.get_world_size() > 1


def _stream(t):
    if t is not None and t.device.type == "cuda":
        return torch.cuda.current_stream(t.device).cuda_stream
    return None


def _open_cuda(artifacts, device):
    # precc_rt uses the context current on the calling thread: PyTorch's
    # primary context of this device, made current by torch.cuda first.
    torch.cuda.init()
    idx = device.index if device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(idx):
        torch.empty(1, device="cuda:%d" % idx)
        return Runtime(artifacts, "cuda")


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


# ---- the custom ops ------------------------------------------------------

def _fwd_impl(x, w, bias, state, key, needs_grad):
    group, fqn = lookup(key)
    prog = group.program(fqn, x.device)
    m = x.shape[0]
    mp = prog.layer.padded_m(m)
    if m == 0:
        return [x.new_empty((0, prog.N), dtype=torch_dtype(prog.y.format))] + \
               [prog.empty(b, 0, x) for b in prog.saved]
    with group.lock:
        if needs_grad:
            group.add_forward()
        bufs = prog.layout.views(state)
        bufs["x"] = prog.pad(x, mp)
        bufs["w"] = _aligned(w)
        if prog.bias is not None:
            if bias is None:
                raise Error("precc: layer '%s' was built with a bias and got none" % fqn)
            bufs["bias"] = _aligned(bias)
        for b in prog.fwd_new:
            bufs[b.name] = prog.empty(b, mp, x)
        _Adapter.run(prog.layer, prog.fwd, mp, bufs, group.next_seed(), _stream(x))
    y = bufs["y"]
    if mp != m:
        y = y[:m].clone()
    return [y] + [bufs[b.name] for b in prog.saved]


def _fwd_fake(x, w, bias, state, key, needs_grad):
    group, fqn = lookup(key)
    prog = group.program(fqn, torch.device("cpu"))
    m = x.shape[0]
    mp = (m + prog.layer.m_multiple - 1) // prog.layer.m_multiple * prog.layer.m_multiple
    y = x.new_empty((m, prog.N), dtype=torch_dtype(prog.y.format))
    return [y] + [x.new_empty(b.shape(mp), dtype=torch_dtype(b.format)) for b in prog.saved]


def _bwd_impl(dy, state, kept, key, m):
    group, fqn = lookup(key)
    prog = group.program(fqn, dy.device)
    mp = prog.layer.padded_m(m)
    dxt = torch_dtype(prog.dx.format)
    if m == 0:
        return [dy.new_empty((0, prog.K), dtype=dxt),
                dy.new_zeros((prog.N, prog.K), dtype=torch_dtype(prog.dw.format))]
    with group.lock:
        bufs = prog.layout.views(state)
        names = prog.keep_inputs + [b.name for b in prog.saved]
        for n, t in zip(names, kept):
            bufs[n] = prog.pad(t, mp) if n == "x" else t
        bufs["dy"] = prog.pad(dy, mp)
        for b in prog.bwd_new:
            bufs[b.name] = prog.empty(b, mp, dy)
        _Adapter.run(prog.layer, prog.bwd, mp, bufs, group.next_seed(), _stream(dy))
        group.add_backward(prog, {n: bufs[n] for n in prog.upd_keep + prog.commit_names
                                  if n in bufs})
    dx, dw = bufs["dx"], bufs["dw"]
    if mp != m:
        dx = dx[:m].clone()
    return [dx, dw]


def _bwd_fake(dy, state, kept, key, m):
    group, fqn = lookup(key)
    prog = group.program(fqn, torch.device("cpu"))
    return [dy.new_empty((m, prog.K), dtype=torch_dtype(prog.dx.format)),
            dy.new_empty((prog.N, prog.K), dtype=torch_dtype(prog.dw.format))]


# precc::linear(x, w, bias, state, key, needs_grad) -> [y, saved...]
# precc::linear_backward(dy, state, kept, key, m) -> [dx, dw]
# The delayed-scaling state is read through `state` and written by the
# deferred update (Group.flush), inside the ops' implementations: no op
# that torch.compile sees reads it in between.
@torch.library.custom_op("precc::linear", mutates_args=())
def linear_op(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor],
              state: torch.Tensor, key: int, needs_grad: bool) -> List[torch.Tensor]:
    return _fwd_impl(x, w, bias, state, key, needs_grad)


linear_op.register_fake(_fwd_fake)


@torch.library.custom_op("precc::linear_backward", mutates_args=())
def linear_backward_op(dy: torch.Tensor, state: torch.Tensor, kept: List[torch.Tensor],
                       key: int, m: int) -> List[torch.Tensor]:
    return _bwd_impl(dy, state, kept, key, m)


linear_backward_op.register_fake(_bwd_fake)


def _setup_context(ctx, inputs, output):
    x, w, bias, state, key, needs_grad = inputs
    group, fqn = lookup(key)
    prog = group.program(fqn, x.device)
    kept = [{"x": x, "w": w}[n] for n in prog.keep_inputs] + list(output[1:])
    ctx.save_for_backward(state, *kept)
    ctx.key, ctx.m = key, x.shape[0]
    ctx.bias_dtype = bias.dtype if bias is not None else None


def _backward(ctx, grads):
    state, *kept = ctx.saved_tensors
    dy = grads[0]
    if dy is None:
        dy = torch.zeros(())  # never: y is the only differentiable output
    dy = dy.contiguous()
    dx, dw = torch.ops.precc.linear_backward(dy, state, kept, ctx.key, ctx.m)
    db = dy.sum(0, dtype=torch.float32).to(ctx.bias_dtype) if ctx.bias_dtype is not None else None
    return dx, dw, db, None, None, None


torch.library.register_autograd("precc::linear", _backward, setup_context=_setup_context)


def trace(prog, x, w, bias, state, dy=None, seed=0):
    """Every buffer of one run of the layer's steps on x (and dy: the
    backward and the update too), on a copy of state: the quantized
    operands, scales and amaxes as the kernels wrote them. The module, its
    state and the Group are untouched."""
    m = x.shape[0]
    mp = prog.layer.padded_m(m)
    bufs = prog.layout.views(state.detach().clone())
    bufs["x"], bufs["w"] = prog.pad(x.detach(), mp), _aligned(w.detach())
    if prog.bias is not None:
        bufs["bias"] = _aligned(bias.detach())
    steps = list(prog.fwd)
    if dy is not None:
        bufs["dy"] = prog.pad(dy.detach(), mp)
        steps += prog.bwd + prog.upd
    made = {prog.layer.buffers[o] for s in steps for o in s.outs}
    for b in sorted(made, key=lambda b: b.index):
        bufs[b.name] = prog.empty(b, mp, x)
    # One step at a time, in manifest order within each phase.
    _Adapter.run(prog.layer, steps, mp, bufs, seed, _stream(x))
    return bufs
