"""The scaling state beyond state_dict: precc's own state file (the
versioned, checksummed format of docs/runtime.md), and flushing the
deferred delayed-scaling update."""
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
    """Writes every layer's scaling state to path in precc's state file
    format, bound to the artifacts' recipe and model (precc_state_save)."""
    mods, group = _modules(model)
    group.flush()
    rt = group.runtime(torch.device("cpu"))
    st = State(rt)
    try:
        for fqn, state in mods:
            host = state.detach().to("cpu").contiguous()
            st.pull(rt.layer(fqn), _ptrs(rt.layer(fqn), group.layouts[fqn].views(host)))
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
    finally:
        st.close()
