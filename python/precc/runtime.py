"""The runtime over ctypes: an artifact directory opened on a backend, its
layers (buffers, steps, updates) and their scaling state. Torch-free: the
buffers are raw addresses (ints); precc.torch passes tensors' data_ptr()."""
import ctypes
import json
import os
import re
import sys
import threading

from . import _lib
from ._lib import Error, check

# Storage bytes per element (precc_interp_elem_bytes: one byte for every
# other format of 8 bits or fewer); e2m1 is two codes a byte (PACKED).
ELEM_BYTES = {"f32": 4, "tf32": 4, "f16": 2, "bf16": 2}
PACKED = {"e2m1": 2}

# The interpreter's thread count as last set (precc_interp_set_threads, one
# per process): torch.get_num_threads() where torch is imported, passed on
# before a call whenever it changed; 0 = not set (PRECC_NUM_THREADS, or
# every core). Results are the same for any count.
_threads = [0]


def sync_threads(lib):
    """Passes torch.set_num_threads's count to the cpu backend if it changed
    since the last call; precc.torch's calls reach it through Layer."""
    t = sys.modules.get("torch")
    n = t.get_num_threads() if t is not None else 0
    if n != _threads[0]:
        f = lib.precc_interp_set_threads
        f.restype, f.argtypes = None, [ctypes.c_int]
        f(n)
        _threads[0] = n


_TYPE = re.compile(r"^([a-z0-9]+)\[([^\]]*)\](\{[^}]*\})?$")


def layer_body(manifest, layer):
    """A manifest layer's buffers, steps and updates: its layer_classes entry,
    or the layer itself when it carries them inline (docs/artifacts.md)."""
    if "class" in layer:
        return manifest["layer_classes"][layer["class"]]
    return layer


class Dim:
    """One dimension of a buffer type: an integer, M, or M/k (M is a
    multiple of k: the layer's m_multiple)."""
    __slots__ = ("const", "div")

    def __init__(self, text):
        text = text.strip()
        if text == "M":
            self.const, self.div = None, 1
        elif text.startswith("M/"):
            self.const, self.div = None, int(text[2:])
        else:
            self.const, self.div = int(text), 0

    def at(self, m):
        return self.const if self.const is not None else m // self.div

    def __repr__(self):
        return str(self.const) if self.const is not None else ("M" if self.div == 1 else "M/%d" % self.div)


class Buffer:
    """A layer buffer as the manifest types it: name, format, dims, role."""

    def __init__(self, index, name, type_, role):
        mt = _TYPE.match(type_)
        if not mt:
            raise Error("precc: buffer '%s' has a type precc.runtime cannot read: %s" % (name, type_))
        self.index, self.name, self.type, self.role = index, name, type_, role
        self.format = mt.group(1)
        self.dims = [Dim(d) for d in mt.group(2).split(",")]
        self.elem_bytes = ELEM_BYTES.get(self.format, 1)

    def shape(self, m):
        """(rows, cols) at M; rank 1 is 1 x n, as precc_rt_buffer_info."""
        d = [x.at(m) for x in self.dims]
        return (1, d[0]) if len(d) == 1 else tuple(d)

    def storage_shape(self, m):
        """(rows, bytes-or-elements per row) as stored at M: e2m1 holds two
        codes a byte, element 2i in the low nibble of byte i (the layout of
        torch.float4_e2m1fn_x2), so its rows are cols / 2 bytes."""
        r, c = self.shape(m)
        return (r, c // PACKED.get(self.format, 1))

    def bytes(self, m):
        r, c = self.storage_shape(m)
        return r * c * self.elem_bytes

    def __repr__(self):
        return "Buffer(%s %s %s)" % (self.name, self.type, self.role)


class Step:
    def __init__(self, index, kernel, shape, gemm, args, out_mask):
        self.index, self.kernel, self.shape, self.gemm = index, kernel, shape, gemm
        self.args = args                                   # buffer indices
        self.outs = [a for p, a in enumerate(args) if out_mask >> p & 1]
        self.ins = [a for p, a in enumerate(args) if not out_mask >> p & 1]

    def __repr__(self):
        return "Step(%d %s %s)" % (self.index, self.shape, self.gemm)


class Layer:
    """One layer of a loaded artifact: buffers, steps and state updates."""

    def __init__(self, rt, index, updates):
        lib, h = rt.lib, rt.handle
        self.rt, self.index = rt, index
        self.fqn = lib.precc_rt_layer_name(h, index).decode()
        self.m_multiple = lib.precc_rt_layer_m_multiple(h, index)
        self.buffers = []
        bi = _lib.BufferInfo()
        for i in range(check(lib.precc_rt_buffer_count(h, index))):
            check(lib.precc_rt_buffer_info(h, index, i, self.m_multiple, ctypes.byref(bi)))
            b = Buffer(i, bi.name.decode(), bi.type.decode(), bi.role.decode())
            if b.bytes(self.m_multiple) != bi.bytes:  # our reading of the type vs precc_rt's
                raise Error("precc: buffer '%s' %s: %d bytes at M=%d, precc_rt says %d"
                            % (b.name, b.type, b.bytes(self.m_multiple), self.m_multiple, bi.bytes))
            self.buffers.append(b)
        self.by_name = {b.name: b for b in self.buffers}
        self.steps = []
        si = _lib.StepInfo()
        for s in range(check(lib.precc_rt_step_count(h, index))):
            check(lib.precc_rt_step_info(h, index, s, ctypes.byref(si)))
            args = [si.args[p] for p in range(si.nargs)]
            self.steps.append(Step(s, si.kernel, rt.kernel_shapes[si.kernel],
                                   si.gemm.decode() if si.gemm else None, args, si.out_mask))
        self.updates = [(self.by_name[u["state"]], self.by_name[u["next"]]) for u in updates]

    # -- the layer API (precc_rt_forward / backward / commit) --------------

    def sizes(self, m):
        """precc_rt_layer_sizes at M: state/saved/workspace bytes, k, n, ..."""
        s = _lib.LayerSizes()
        check(self.rt.lib.precc_rt_layer_sizes(self.rt.handle, self.index, m, ctypes.byref(s)))
        return {f: getattr(s, f) for f, _ in _lib.LayerSizes._fields_}

    def place(self, buffer, m):
        """(place, offset) of a buffer at M: "x", "w", ..., "state", "saved"
        or "workspace" (precc_rt_buffer_place)."""
        pl, off = ctypes.c_int(), ctypes.c_size_t()
        check(self.rt.lib.precc_rt_buffer_place(self.rt.handle, self.index, buffer.index, m,
                                                ctypes.byref(pl), ctypes.byref(off)))
        return _lib.PLACES[pl.value], off.value

    def phase(self, step):
        """0 forward, 1 backward, 2 commit (precc_rt_step_phase)."""
        return check(self.rt.lib.precc_rt_step_phase(self.rt.handle, self.index, step.index))

    def state_init(self, state):
        with self.rt.lock:
            sync_threads(self.rt.lib)
            check(self.rt.lib.precc_rt_layer_state_init(self.rt.handle, self.index, state))

    def forward(self, m, x, w, bias, y, saved, state, workspace, seed=0, stream=None,
                root_saved=None):
        """precc_rt_forward, or with root_saved (the input root's saved region
        of a forward on the same x) precc_rt_forward_shared."""
        with self.rt.lock:
            sync_threads(self.rt.lib)
            check(self.rt.lib.precc_rt_forward_shared(self.rt.handle, self.index, m, x, w, bias,
                                                      y, saved, state, workspace, seed, stream,
                                                      root_saved))

    def backward(self, m, x, w, dy, dx, dw, saved, state, workspace, seed=0, stream=None,
                 root_saved=None):
        with self.rt.lock:
            sync_threads(self.rt.lib)
            check(self.rt.lib.precc_rt_backward_shared(self.rt.handle, self.index, m, x, w, dy,
                                                       dx, dw, None, saved, state, workspace,
                                                       seed, stream, root_saved))

    @property
    def input_root(self):
        """The fqn of the layer whose input this one reads (shares_input), or None."""
        r = self.rt.lib.precc_rt_layer_input_root(self.rt.handle, self.index)
        return self.rt.layers[r].fqn if r >= 0 else None

    @property
    def shared_steps(self):
        """Forward steps a shared forward skips (the root runs them alike)."""
        return max(0, self.rt.lib.precc_rt_layer_shared_steps(self.rt.handle, self.index))

    def commit(self, m, saved, state, stream=None):
        """1 when the cpu backend skipped it (nonfinite=skip), else 0."""
        with self.rt.lock:
            sync_threads(self.rt.lib)
            return check(self.rt.lib.precc_rt_commit(self.rt.handle, self.index, m, saved,
                                                     state, stream))

    def role(self, role):
        return [b for b in self.buffers if b.role == role]

    def buffer(self, name):
        return self.by_name.get(name)

    def padded_m(self, m):
        k = self.m_multiple
        return (m + k - 1) // k * k

    def run_step(self, step, m, ptrs, seed=0, stream=None):
        """Runs step `step` at M with ptrs[i] the address of buffer i (0 for
        buffers the step does not touch)."""
        arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
        with self.rt.lock:
            sync_threads(self.rt.lib)
            check(self.rt.lib.precc_rt_run_step(self.rt.handle, self.index, step, m, arr,
                                                seed, stream))

    def run(self, m, ptrs, seed=0, stream=None):
        """precc_rt_run_layer: every step, then the updates."""
        arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
        with self.rt.lock:
            sync_threads(self.rt.lib)
            check(self.rt.lib.precc_rt_run_layer(self.rt.handle, self.index, m, arr, seed, stream))

    def __repr__(self):
        return "Layer(%s)" % self.fqn


class GroupStep:
    """An expert group of a loaded artifact (precc_rt.h, "expert groups"):
    its experts' GEMMs as one step on the tokens sorted by expert, with the
    experts' END offsets (int32, in the backend's memory)."""

    def __init__(self, rt, index):
        lib, h = rt.lib, rt.handle
        gi = _lib.GroupInfo()
        check(lib.precc_rt_group_info(h, index, ctypes.byref(gi)))
        self.rt, self.index = rt, index
        self.name = gi.name.decode()
        self.experts, self.n, self.k = gi.experts, gi.n, gi.k
        self.grouped = tuple(bool(gi.grouped[i]) for i in range(3))   # fprop, dgrad, wgrad
        self.token_align = gi.token_align
        self.layer = gi.layer
        self.m_multiple = lib.precc_rt_layer_m_multiple(h, gi.layer)
        # the step's buffers' formats by name (x, w, y, dy, dx, dw, offs)
        bi = _lib.BufferInfo()
        self.formats = {}
        for i in range(check(lib.precc_rt_buffer_count(h, gi.layer))):
            check(lib.precc_rt_buffer_info(h, gi.layer, i, self.m_multiple, ctypes.byref(bi)))
            self.formats[bi.name.decode()] = bi.format.decode()
        self.at_m = {}     # sizes() per m_total, for the per-call path

    def sizes(self, m):
        """precc_rt_group_sizes at m_total (the layer API's sizes)."""
        r = self.at_m.get(m)
        if r is not None:
            return r
        s = _lib.LayerSizes()
        check(self.rt.lib.precc_rt_group_sizes(self.rt.handle, self.index, m, ctypes.byref(s)))
        r = self.at_m[m] = {f: getattr(s, f) for f, _ in _lib.LayerSizes._fields_}
        return r

    def forward(self, m, offsets, x, w, y, saved, state, workspace, seed=0, stream=None):
        with self.rt.lock:
            sync_threads(self.rt.lib)
            check(self.rt.lib.precc_rt_forward_grouped(self.rt.handle, self.index, m, offsets,
                                                       self.experts, x, w, y, saved, state,
                                                       workspace, seed, stream))

    def backward(self, m, offsets, x, w, dy, dx, dw, saved, state, workspace, seed=0,
                 stream=None):
        with self.rt.lock:
            sync_threads(self.rt.lib)
            check(self.rt.lib.precc_rt_backward_grouped(self.rt.handle, self.index, m, offsets,
                                                        self.experts, x, w, dy, dx, dw, None,
                                                        saved, state, workspace, seed, stream))

    def __repr__(self):
        return "GroupStep(%s: %d experts of [%d, %d])" % (self.name, self.experts, self.n,
                                                          self.k)


class _Owned:
    """A C object the wrapper owns: close() frees it once, through the
    library function named by _free, and the garbage collector closes what
    the caller did not."""
    _free = None
    handle = None

    def close(self):
        if self.handle:
            getattr(self.lib, self._free)(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Runtime(_Owned):
    """precc_rt_open(DIR, backend): one artifact directory on one backend.

    backend: "cpu", "cuda" or "auto". `why` says what was opened and why."""
    _free = "precc_rt_close"

    def __init__(self, artifacts, backend="auto"):
        self.lib = lib = _lib.load()
        self.dir = os.fspath(artifacts)
        if backend not in _lib.BACKEND:
            raise Error("precc: unknown backend '%s' (auto, cuda or cpu)" % backend)
        why = ctypes.create_string_buffer(1024)
        h = lib.precc_rt_open(self.dir.encode(), _lib.BACKEND[backend], why, len(why))
        if not h:
            raise Error(_lib.last_error() or why.value.decode())
        self.handle, self.why = h, why.value.decode()
        self.lock = threading.Lock()  # one precc_rt is not for two threads at once
        self.backend = lib.precc_backend_name(lib.precc_rt_backend(h)).decode()
        ai = _lib.ArtifactInfo()
        lib.precc_rt_artifact_info(h, ctypes.byref(ai))
        s = lambda v: v.decode() if v else None
        self.info = {"dir": s(ai.dir), "precc_version": s(ai.precc_version),
                     "llvm_version": s(ai.llvm_version), "recipe": s(ai.recipe_name),
                     "model": s(ai.model_name), "recipe_hash": ai.recipe_hash,
                     "model_hash": ai.model_hash, "target": s(ai.target)}
        ki = _lib.KernelInfo()
        self.kernel_shapes = []
        for k in range(lib.precc_rt_kernel_count(h)):
            check(lib.precc_rt_kernel_info(h, k, ctypes.byref(ki)))
            self.kernel_shapes.append(ki.shape.decode())
        updates = self._manifest_updates()
        self.layers = []
        for i in range(lib.precc_rt_layer_count(h)):
            fqn = lib.precc_rt_layer_name(h, i).decode()
            self.layers.append(Layer(self, i, updates.get(fqn, [])))
        self.by_fqn = {l.fqn: l for l in self.layers}
        self.groups = {}   # expert groups by name (the fused parameter's key)
        for g in range(lib.precc_rt_group_count(h)):
            gs = GroupStep(self, g)
            self.groups[gs.name] = gs

    def _manifest_updates(self):
        # precc_rt runs a layer's updates in run_layer but does not list them;
        # run_step callers commit them, so read them from the manifest.
        with open(os.path.join(self.dir, "manifest.json"), encoding="utf-8") as f:
            man = json.load(f)
        layers = man["layers"]
        t = self.info["target"]
        if man.get("targets") and t != man["targets"][0]:
            layers = man.get("target_layers", {}).get(t, layers)
        return {l["fqn"]: layer_body(man, l).get("updates", []) for l in layers}

    def layer(self, fqn):
        l = self.by_fqn.get(fqn)
        if l is None:
            raise Error("precc: no layer '%s' in %s" % (fqn, self.dir))
        return l

    def grouped_check(self):
        """precc_rt_grouped_check: bad offsets of the grouped calls since the
        last check (cuda checks them after the fact: call it after a sync)."""
        check(self.lib.precc_rt_grouped_check(self.handle))

    def kernel_stats(self):
        ki = _lib.KernelInfo()
        out = []
        for k in range(self.lib.precc_rt_kernel_count(self.handle)):
            check(self.lib.precc_rt_kernel_info(self.handle, k, ctypes.byref(ki)))
            out.append({"name": ki.name.decode(), "shape": ki.shape.decode(),
                        "launches": ki.launches, "seconds": ki.seconds})
        return out

    def sync(self, stream=None):
        check(self.lib.precc_rt_sync(self.handle, stream))

    def __repr__(self):
        return "Runtime(%s, %s: %s x %s)" % (self.dir, self.backend, self.info["recipe"],
                                             self.info["model"])


class BulkCommit(_Owned):
    """precc_rt_bulk_commit_*: the delayed-scaling commit of many layers in
    one launch per update kernel, for saved and state regions that stay
    where they are (the table of their addresses is written once, here).
    `table` is the address of table_bytes(rt, layers) bytes of device
    memory (host memory on the cpu backend), 16-byte aligned, which the
    caller keeps alive as long as this object."""
    _free = "precc_rt_bulk_commit_free"

    @staticmethod
    def table_bytes(rt, layers):
        arr = (ctypes.c_int * len(layers))(*layers)
        return rt.lib.precc_rt_bulk_commit_table_bytes(rt.handle, len(layers), arr)

    def __init__(self, rt, layers, m, saved, state, table, table_bytes):
        n = len(layers)
        self.rt, self.lib = rt, rt.lib   # the runtime outlives its bulk commits
        self.handle = check(self.lib.precc_rt_bulk_commit_new(
            rt.handle, n, (ctypes.c_int * n)(*layers), m, (ctypes.c_void_p * n)(*saved),
            (ctypes.c_void_p * n)(*state), table, table_bytes))
        self.layers = self.lib.precc_rt_bulk_commit_layers(self.handle)

    def run(self, stream=None):
        check(self.lib.precc_rt_bulk_commit_run(self.rt.handle, self.handle, stream))



class State(_Owned):
    """precc_rt_state_new: the scaling state of every layer of a runtime, as
    precc's versioned, checksummed file (save / load)."""
    _free = "precc_state_free"

    def __init__(self, rt):
        self.rt, self.lib = rt, rt.lib
        self.handle = check(self.lib.precc_rt_state_new(rt.handle))

    def pull(self, layer, ptrs):
        arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
        check(self.lib.precc_rt_state_pull(self.rt.handle, self.handle, layer.index, arr))

    def push(self, layer, ptrs):
        arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
        check(self.lib.precc_rt_state_push(self.rt.handle, self.handle, layer.index, arr))

    def save(self, path):
        check(self.lib.precc_state_save(self.handle, os.fspath(path).encode()))

    def load(self, path):
        check(self.lib.precc_state_load(self.handle, os.fspath(path).encode()))

    def __len__(self):
        return self.lib.precc_state_count(self.handle)
