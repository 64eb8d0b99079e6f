"""The scaling state beyond the layers' precc_state buffers: the
stochastic-rounding counter of a converted model (in its state_dict as
`precc_sr_counter`, and in precc's own state file), precc's state file (the
versioned, checksummed format of docs/runtime.md), and flushing the
deferred delayed-scaling update."""
import ctypes

import torch

from .._lib import Error
from ..runtime import State
from ._experts import STATE_PREFIX, GroupedExperts
from ._module import Linear


def _modules(model):
    """[(layer fqn, its state tensor)] of every precc layer of model (a
    GroupedExperts' experts one row each), and their Group."""
    mods = [m for m in model.modules() if isinstance(m, (Linear, GroupedExperts))]
    if not mods:
        raise Error("precc: the model has no precc.torch.Linear (convert it first)")
    groups = {id(m._precc_group): m._precc_group for m in mods}
    if len(groups) != 1:
        raise Error("precc: the model holds layers of %d convert() calls; save each part"
                    % len(groups))
    layers = []
    for m in mods:
        if isinstance(m, Linear):
            layers.append((m.precc_fqn, m.precc_state))
            continue
        for kd in m._precc_kinds:
            if kd.precc:
                buf = getattr(m, STATE_PREFIX + kd.param)
                layers += [(f, buf[e, :kd.size]) for e, f in enumerate(kd.fqns)]
    return layers, next(iter(groups.values()))


SR_COUNTER_KEY = "precc_sr_counter"


def track(model, group):
    """Puts group's stochastic-rounding counter (the calls each seed is drawn
    from: _ops.Group.next_seed) into model's state_dict and takes it back on
    load_state_dict, so that a resumed run draws the same seeds and rounds
    bit for bit as one that never stopped. A checkpoint without the key
    (older precc, plain models) leaves the counter as it is."""
    def save(module, state_dict, prefix, local_metadata):
        state_dict[prefix + SR_COUNTER_KEY] = torch.tensor(group.calls, dtype=torch.int64)

    def load(state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        v = state_dict.pop(prefix + SR_COUNTER_KEY, None)
        if v is not None:
            group.calls = int(v)

    # kept on the model so that unconvert() can take them off again
    model.__dict__["precc_state_hooks"] = (model._register_state_dict_hook(save),
                                           model._register_load_state_dict_pre_hook(load))


def _sr_counter(st, value=None):
    """precc_state_sr_counter, or with value precc_state_set_sr_counter, of
    a runtime State (the C API; declared here, where it is used)."""
    lib = st.lib
    if value is None:
        f = lib.precc_state_sr_counter
        f.restype, f.argtypes = ctypes.c_uint64, [ctypes.c_void_p]
        return int(f(st.handle))
    f = lib.precc_state_set_sr_counter
    f.restype, f.argtypes = None, [ctypes.c_void_p, ctypes.c_uint64]
    f(st.handle, value)
    return value


def flush(model):
    """Runs the delayed-scaling updates still pending (the amax all-reduce
    included). convert's layers do this themselves after the last backward
    of a step; call it after a step whose backward covered only some layers."""
    seen = set()
    for m in model.modules():
        if isinstance(m, (Linear, GroupedExperts)) and id(m._precc_group) not in seen:
            seen.add(id(m._precc_group))
            m._precc_group.flush()


def _ptrs(layer, views):
    ptrs = [0] * len(layer.buffers)
    for b in layer.role("state"):
        ptrs[b.index] = views[b.name].data_ptr()
    return ptrs


def save_state(model, path):
    """Writes every layer's scaling state and the stochastic-rounding counter
    to path in precc's state file format, bound to the artifacts' recipe and
    model (precc_state_save)."""
    mods, group = _modules(model)
    group.flush()
    rt = group.runtime(torch.device("cpu"))
    st = State(rt)
    try:
        for fqn, state in mods:
            host = state.detach().to("cpu").contiguous()
            st.pull(rt.layer(fqn), _ptrs(rt.layer(fqn), group.layouts[fqn].views(host)))
        _sr_counter(st, group.calls)
        st.save(path)
    finally:
        st.close()


def load_state(model, path):
    """Reads a file save_state wrote into the model's layers. The file is
    checked whole first (precc_state_load): another recipe, model or a
    corrupt file raises precc.Error and changes nothing."""
    mods, group = _modules(model)
    group.flush()
    rt = group.runtime(torch.device("cpu"))
    st = State(rt)
    try:
        st.load(path)
        hosts = []
        for fqn, state in mods:
            host = state.detach().to("cpu").clone()  # the region's padding kept
            st.push(rt.layer(fqn), _ptrs(rt.layer(fqn), group.layouts[fqn].views(host)))
            hosts.append(host)
        with torch.no_grad():
            for (_, state), h in zip(mods, hosts):
                state.copy_(h)
        group.calls = _sr_counter(st)   # 0 from a format 1 file, which has none
    finally:
        st.close()
