"""convert(): a model description from the module tree, precc check and
build, and the swap of each selected nn.Linear; unconvert() and
plain_state_dict(): back to plain nn.Linear modules and their keys."""
import json
import os
import tempfile
import warnings

import torch
from torch import nn

from .. import compiler
from .._lib import Error
from ..runtime import Runtime
from . import _ops, _state
from . import _experts
from ._experts import GroupedExperts
from ._module import Linear


class Decision:
    """What convert did with one nn.Linear, or with one fused expert
    Parameter (BLOCK.experts.gate_up_proj: every expert's GEMM of it)."""
    __slots__ = ("fqn", "converted", "reason", "in_features", "out_features", "kept_as")

    def __init__(self, fqn, converted, reason, mod, kept_as="nn.Linear"):
        self.fqn, self.converted, self.reason = fqn, converted, reason
        self.in_features, self.out_features = mod.in_features, mod.out_features
        self.kept_as = kept_as

    def __repr__(self):
        return "%s %d->%d: %s" % (self.fqn, self.in_features, self.out_features,
                                  "precc" if self.converted
                                  else "stays %s: %s" % (self.kept_as, self.reason))


def _linears(model):
    """Each nn.Linear once (first FQN), with every place it is attached."""
    found, places = {}, {}
    for name, mod in model.named_modules(remove_duplicate=False):
        for cname, child in mod.named_children():
            if type(child) is nn.Linear or (isinstance(child, nn.Linear)
                                            and not isinstance(child, Linear)
                                            and type(child).forward is nn.Linear.forward):
                fqn = name + "." + cname if name else cname
                places.setdefault(id(child), []).append((mod, cname))
                found.setdefault(id(child), (fqn, child))
    if isinstance(model, nn.Linear) and not isinstance(model, Linear):
        found.setdefault(id(model), ("linear", model))
    return list(found.values()), places


class _Shape:
    """in/out features for a Decision about a fused expert parameter."""
    def __init__(self, kd):
        self.in_features, self.out_features = kd.K, kd.N


class _Dims:
    def __init__(self, p):
        self.in_features, self.out_features = p.shape[1], p.shape[2]


EXPERT_PARAMS = ("gate_up_proj", "up_proj", "down_proj")
UNKNOWN_EXPERTS = ("3-D expert parameters of a module that is not a transformers 5 experts "
                   "module (@use_experts_implementation: forward(hidden_states, top_k_index, "
                   "top_k_weights)); precc.torch does not know its contract")


def _fused_experts(model):
    """Each transformers 5 fused experts module once (first FQN), with every
    place it is attached."""
    found, places, other = {}, {}, {}
    for name, mod in model.named_modules(remove_duplicate=False):
        for cname, child in mod.named_children():
            fqn = name + "." + cname if name else cname
            if _experts.is_fused_experts(child):
                places.setdefault(id(child), []).append((mod, cname))
                found.setdefault(id(child), (fqn, child))
            elif not isinstance(child, GroupedExperts) and any(
                    isinstance(getattr(child, n, None), nn.Parameter)
                    and getattr(child, n).dim() == 3 for n in EXPERT_PARAMS):
                other.setdefault(id(child), (fqn, child))     # Llama-4's, say
    return list(found.values()), places, list(other.values())


def _tied(model):
    """ids of Parameters reachable under more than one name."""
    seen, tied = {}, set()
    for n, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen and seen[id(p)] != n:
            tied.add(id(p))
        seen.setdefault(id(p), n)
    return tied


def _shared_inputs(model, mods, example_inputs):
    """fqn -> the first fqn that took the same input tensor, from one
    forward on example_inputs under no_grad."""
    first, shared, hooks, alive = {}, {}, [], []
    for fqn, mod in mods:
        def hook(m, args, fqn=fqn):
            if not args or not torch.is_tensor(args[0]):
                return
            alive.append(args[0])  # so no later tensor reuses its id
            k = id(args[0])
            if k in first and first[k] != fqn:
                shared[fqn] = first[k]
            first.setdefault(k, fqn)
        hooks.append(mod.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            ex = example_inputs if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
            model(*ex)
    finally:
        for h in hooks:
            h.remove()
    return shared


def _plan_reasons(plan):
    """fqn -> why precc's plan does not take the layer (a fallback or a pad)."""
    out = {}
    for l in plan["layers"]:
        why = []
        if l.get("pad"):
            why.append("padded: %s" % (l["pad"],))
        for g in ("fprop", "dgrad", "wgrad"):
            fb = l[g].get("fallback")
            if fb and fb not in why:
                why.append(fb)
        for dim in ("in_features", "out_features"):
            if l[dim] % 8:
                why.append("%s %d %% 8 != 0: precc's GEMM kernels load 16 bytes along K"
                           % (dim, l[dim]))
        if why:
            out[l["fqn"]] = "; ".join(why)
    return out


def _layouts(rt, artifacts, fqns):
    """fqn -> its state layout, one per layer class of the manifest: the
    layers precc build found identical (one set of kernels, one body)
    share one layout object."""
    try:
        with open(os.path.join(artifacts, "manifest.json"), encoding="utf-8") as f:
            cls = {l["fqn"]: ("class", l["class"]) for l in json.load(f)["layers"]
                   if "class" in l}
    except (OSError, ValueError, KeyError, TypeError):
        cls = {}
    made, out = {}, {}
    for fqn in fqns:
        k = cls.get(fqn, ("fqn", fqn))
        if k not in made:
            made[k] = _ops.make_layout(rt.layer(fqn))
        out[fqn] = made[k]
    return out


def default_targets(model):
    dev = next((p.device for p in model.parameters()), torch.device("cpu"))
    if dev.type != "cuda":
        return "sm_90a"
    major, minor = torch.cuda.get_device_capability(dev)
    if (major, minor) == (9, 0):
        return "sm_90a"
    return "sm_90" if major >= 9 else "sm_89"


def convert(model, recipe="current_tensorwise", module_filter_fn=None, artifacts=None,
            targets=None, example_inputs=None, seed=0, warn=True):
    """Swap each selected nn.Linear of model for a precc.torch.Linear with
    the same Parameters and return the model (converted in place; a bare
    nn.Linear is returned as a new module).

    recipe: a shipped recipe's name ("deepseek_v3") or a .lua path.
    module_filter_fn(module, fqn) -> bool: which linears to consider (as
    torchao's convert_to_float8_training).
    artifacts: a directory precc build wrote for this model (GPU machines
    without LLVM/Lua); else the model is described, checked and built into
    the cache ($PRECC_TORCH_CACHE, default ~/.cache/precc/torch).
    example_inputs: optional; one no_grad forward finds linears that share
    an input (recorded in the model description).
    Linears no policy takes stay nn.Linear; model.precc_report lists every
    linear with what happened and why, and a warning names those kept."""
    mods, places = _linears(model)
    report = {}
    tied = _tied(model)
    cands = []
    for fqn, mod in mods:
        if module_filter_fn is not None and not module_filter_fn(mod, fqn):
            report[fqn] = Decision(fqn, False, "module_filter_fn said no", mod)
        elif not compiler.FQN_RE.match(fqn):
            report[fqn] = Decision(fqn, False, "its name has characters precc model files do "
                                   "not take (letters, digits, '.', '_', '-')", mod)
        elif mod.weight.device.type == "meta":
            report[fqn] = Decision(fqn, False, "its weight is on the meta device", mod)
        else:
            cands.append((fqn, mod))
    shared = _shared_inputs(model, cands, example_inputs) if example_inputs is not None else {}
    # transformers 5's fused experts: one precc layer per expert and GEMM
    # (up or gate_up, down), named BLOCK.experts.E.PARAM as precc check names them
    exps, exp_places, unknown = _fused_experts(model)
    exp_cands = []     # (fqn, module, [Kind up, Kind down])
    for fqn, mod in exps:
        kinds = [_experts.Kind(mod, _experts.up_name(mod), fqn), _experts.Kind(mod, "down_proj", fqn)]
        why = None
        if module_filter_fn is not None and not module_filter_fn(mod, fqn):
            why = "module_filter_fn said no"
        elif not compiler.FQN_RE.match(fqn):
            why = ("its name has characters precc model files do not take (letters, digits, "
                   "'.', '_', '-')")
        else:
            why = _experts.why_not(mod)
        if why is not None:
            for kd in kinds:
                f = fqn + "." + kd.param
                report[f] = Decision(f, False, why, _Shape(kd), "as it is")
            continue
        exp_cands.append((fqn, mod, kinds))

    def exp_desc():
        return [compiler.Linear(f, kd.K, kd.N, kd.bias is not None)
                for _, _, kinds in exp_cands for kd in kinds if kd.precc is not None
                for f in kd.fqns]

    for _, _, kinds in exp_cands:
        for kd in kinds:
            kd.precc = True     # until the plan or the artifacts say otherwise

    def desc(sel):
        # linears that took one tensor share it with the first of them in
        # the file (the runtime's root: q for k and v, whoever ran first)
        root = {}
        for f, _ in sel:
            root.setdefault(shared.get(f, f), f)
        return [compiler.Linear(f, m.in_features, m.out_features, m.bias is not None,
                                id(m.weight) in tied,
                                root[shared.get(f, f)] if root[shared.get(f, f)] != f else None)
                for f, m in sel]

    name = "torch_" + type(model).__name__
    def n_exp():
        return sum(1 for _, _, kinds in exp_cands for kd in kinds if kd.precc)

    with tempfile.TemporaryDirectory(prefix="precc-convert-") as tmp:
        if artifacts is None:
            path = os.path.join(tmp, "model.lua")
            with open(path, "w") as f:
                f.write(compiler.model_lua(name, desc(cands) + exp_desc()))
            why = _plan_reasons(compiler.check(recipe, path)) if cands or exp_cands else {}
            for fqn, mod in cands:
                if fqn in why:
                    report[fqn] = Decision(fqn, False, why[fqn], mod)
            cands = [(f, m) for f, m in cands if f not in why]
            for _, _, kinds in exp_cands:
                for kd in kinds:   # a kind runs in precc for every expert or none
                    r = next((why[f] for f in kd.fqns if f in why), None)
                    if r is not None:
                        kd.precc, kd.reason = None, r
            if cands or n_exp():
                with open(path, "w") as f:
                    f.write(compiler.model_lua(name, desc(cands) + exp_desc()))
                artifacts = compiler.build(recipe, path, targets or default_targets(model))
        if cands or n_exp():
            rt = Runtime(artifacts, "cpu")
            for _, _, kinds in exp_cands:
                for kd in kinds:
                    if not kd.precc:
                        continue
                    for f in kd.fqns:
                        l = rt.by_fqn.get(f)
                        if l is None:
                            kd.precc, kd.reason = None, "%s is not a layer of %s" % (f, artifacts)
                            break
                        K, N = l.buffer("x").shape(1)[1], l.buffer("w").shape(1)[0]
                        if (K, N) != (kd.K, kd.N):
                            raise Error("precc: %s is %d->%d; in %s it is %d->%d (artifacts of "
                                        "another model?)" % (f, kd.K, kd.N, artifacts, K, N))
            sel = []
            for fqn, mod in cands:
                l = rt.by_fqn.get(fqn)
                if l is None:
                    report[fqn] = Decision(fqn, False, "not a layer of %s" % artifacts, mod)
                    continue
                K, N = l.buffer("x").shape(1)[1], l.buffer("w").shape(1)[0]
                if (K, N) != (mod.in_features, mod.out_features):
                    raise Error("precc: %s is %d->%d; in %s it is %d->%d (artifacts of another "
                                "model?)" % (fqn, mod.in_features, mod.out_features, artifacts, K, N))
                sel.append((fqn, mod))
            cands = sel
    # a block whose GEMMs precc takes none of stays as it is
    for fqn, mod, kinds in exp_cands:
        for kd in kinds:
            f = fqn + "." + kd.param
            if kd.precc:
                report[f] = Decision(f, True, "", _Shape(kd))
            else:   # the other kind runs in precc, or the block stays as it is
                report[f] = Decision(f, False, kd.reason, _Shape(kd),
                                     "torch (F.linear on each expert's slice)"
                                     if any(k.precc for k in kinds) else "as it is")
    exp_cands = [c for c in exp_cands if any(kd.precc for kd in c[2])]
    exp_report = [fqn + "." + kd.param for fqn, mod in exps
                  for kd in (_experts.Kind(mod, _experts.up_name(mod), fqn),
                             _experts.Kind(mod, "down_proj", fqn))]
    for fqn, mod in unknown:
        for n in EXPERT_PARAMS:
            p = getattr(mod, n, None)
            if isinstance(p, nn.Parameter) and p.dim() == 3:
                f = fqn + "." + n
                report[f] = Decision(f, False, UNKNOWN_EXPERTS, _Dims(p), "as it is")
                exp_report.append(f)
    if not cands and not exp_cands:
        if warn:
            warnings.warn("precc: convert took no linear layer of %s" % name)
        model.precc_report = [report[f] for f, _ in mods] + [report[f] for f in exp_report]
        return model
    layouts = _layouts(rt, artifacts, [f for f, _ in cands] +
                       [f for _, _, kinds in exp_cands for kd in kinds if kd.precc
                        for f in kd.fqns])
    group = _ops.Group(artifacts, layouts, seed)
    group.runtimes[("cpu", None)] = rt
    group.recipe = rt.info["recipe"]
    new_root = model
    for fqn, mod in cands:
        new = Linear.from_linear(mod, group, fqn)
        for parent, attr in places.get(id(mod), []):
            setattr(parent, attr, new)
        if mod is model:
            new_root = new
        report[fqn] = Decision(fqn, True, "", mod)
    for fqn, mod, kinds in exp_cands:
        for kd in kinds:
            kd.precc = bool(kd.precc)
        new = GroupedExperts.from_experts(mod, group, fqn, kinds)
        for parent, attr in exp_places.get(id(mod), []):
            setattr(parent, attr, new)
    new_root.precc_report = [report[f] for f, _ in mods] + [report[f] for f in exp_report]
    new_root.precc_group = group
    _state.track(new_root, group)
    kept = [d for d in new_root.precc_report
            if not d.converted and d.reason != "module_filter_fn said no"]
    if warn and kept:
        warnings.warn("precc: %d linear(s) stay nn.Linear:\n  %s" % (
            len(kept), "\n  ".join("%s: %s" % (d.fqn, d.reason) for d in kept)))
    return new_root


def _to_linear(mod):
    """A plain nn.Linear holding mod's own weight and bias Parameters."""
    new = nn.Linear(mod.in_features, mod.out_features, bias=mod.bias is not None,
                    device="meta", dtype=mod.weight.dtype)
    new.weight = mod.weight
    new.bias = mod.bias
    new.train(mod.training)
    return new


def unconvert(model):
    """convert() undone: each precc.torch.Linear of model becomes a plain
    nn.Linear holding the same weight and bias Parameters (an optimizer
    keeps working; ties stay tied), as torchao's QAT convert step swaps a
    FakeQuantizedLinear back with to_linear(). The model's state_dict then
    has no precc_state keys and loads with strict=True into the model as it
    was before convert. The scaling state is dropped: keep a state_dict of
    the converted model (or save_state) to resume precc training. In place
    and returned; a bare precc.torch.Linear is returned as a new nn.Linear."""
    if isinstance(model, Linear):
        return _to_linear(model)
    if isinstance(model, GroupedExperts):
        return _experts.to_experts(model)
    done = {}
    for mod in list(model.modules()):
        for cname, child in list(mod.named_children()):
            if isinstance(child, (Linear, GroupedExperts)):
                new = done.get(id(child))
                if new is None:
                    new = done[id(child)] = (_to_linear(child) if isinstance(child, Linear)
                                             else _experts.to_experts(child))
                setattr(mod, cname, new)
    for h in model.__dict__.pop("precc_state_hooks", ()):
        h.remove()   # the stochastic-rounding counter's state_dict key
    for attr in ("precc_group", "precc_report"):
        if attr in model.__dict__:
            delattr(model, attr)
    return model


def plain_state_dict(state):
    """A state_dict (or a module's) without precc's keys (each Linear's
    precc_state, the model's precc_sr_counter): what a plain copy of the
    model loads with strict=True."""
    if isinstance(state, nn.Module):
        state = state.state_dict()
    out = type(state)((k, v) for k, v in state.items()
                      if k.rsplit(".", 1)[-1] not in ("precc_state", "precc_sr_counter")
                      and not k.rsplit(".", 1)[-1].startswith(_experts.STATE_PREFIX))
    meta = getattr(state, "_metadata", None)
    if meta is not None:
        out._metadata = meta
    return out
