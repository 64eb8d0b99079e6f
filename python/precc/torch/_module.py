"""precc.torch.Linear: an nn.Linear whose GEMMs run precc's kernels."""
import torch
from torch import nn

from .._lib import Error
from . import _ops


class Linear(nn.Linear):
    """nn.Linear with the same weight and bias Parameters, run by one precc
    layer (`fqn` in the artifacts). Its `precc_state` buffer holds the
    layer's delayed-scaling state (amax histories, scales), so it is part
    of state_dict; it is empty for recipes without state."""

    @classmethod
    def from_linear(cls, mod, group, fqn):
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = mod.in_features, mod.out_features
        new.weight = mod.weight
        new.bias = mod.bias
        new.precc_fqn = fqn
        new._precc_group = group
        new._precc_key = _ops.register(group, fqn)
        layout = group.layouts[fqn]
        new.register_buffer("precc_state", layout.new(mod.weight.device))
        # What forward checks, read once here (plain ints and dtypes, which
        # torch.compile traces without looking into the runtime).
        prog = group.program(fqn, torch.device("cpu"))
        new._precc_K, new._precc_N = prog.K, prog.N
        new._precc_xdtype = _ops.torch_dtype(prog.x.format)
        new._precc_wdtype = _ops.torch_dtype(prog.w.format)
        new._precc_bdtype = _ops.torch_dtype(prog.bias.format) if prog.bias is not None else None
        # q, k and v read one x: k and v take q's quantized copy of it
        # (precc_rt_forward_shared) when q's last forward saw this very x
        new._precc_root = getattr(prog, "input_root", None)
        if new._precc_root is not None:
            group.sharers[new._precc_root] = group.sharers.get(new._precc_root, 0) + 1
        new.training = mod.training
        return new

    def forward(self, x):
        x_in = x   # what a sharer compares: the same tensor gives the same x2
        K = self._precc_K
        if x.dim() < 1 or x.shape[-1] != K:
            raise Error("precc: %s: input of shape %s; the layer takes [..., %d]"
                        % (self.precc_fqn, list(x.shape), K))
        compiling = torch.compiler.is_compiling()
        if compiling:
            weight, bias, state = self.weight, self.bias, self.precc_state
        else:
            # nn.Module.__getattr__ costs 0.6-0.8 us an attribute (three a
            # call); the dicts it reads, unless a parametrization moved one
            p = self._parameters
            weight = p.get("weight")
            if weight is None:
                weight = self.weight
            bias = p["bias"] if "bias" in p else self.bias
            state = self._buffers.get("precc_state")
            if state is None:
                state = self.precc_state
        dev = x.device
        if dev != weight.device:
            raise Error("precc: %s: input on %s, weight on %s" % (self.precc_fqn, dev,
                                                                  weight.device))
        if dev != state.device:
            raise Error("precc: %s: precc_state on %s, input on %s (move the whole module)"
                        % (self.precc_fqn, state.device, dev))
        want = self._precc_xdtype
        if x.dtype != want:
            dt = dev.type
            if torch.is_autocast_enabled(dt) and torch.get_autocast_dtype(dt) == want:
                x = x.to(want)
            else:
                raise Error("precc: %s: input is %s; the recipe runs this layer on %s "
                            "inputs (cast the model, or run under torch.autocast(%r, dtype=%s))"
                            % (self.precc_fqn, x.dtype, want, dt, want))
        # Master weights stay as they are (fp32, say); the kernels read the
        # recipe's format, and autograd casts dw back.
        w = weight if weight.dtype == self._precc_wdtype else weight.to(self._precc_wdtype)
        b = None
        if bias is not None:
            if self._precc_bdtype is None:
                raise Error("precc: %s has a bias; its artifacts were built without one"
                            % self.precc_fqn)
            b = bias.to(self._precc_bdtype)
        elif self._precc_bdtype is not None:
            raise Error("precc: %s: its artifacts have a bias; the module has none" % self.precc_fqn)
        flat = x.dim() == 2   # no reshape, no view node in the autograd graph
        x2 = x if flat else x.reshape(-1, K)
        needs_grad = torch.is_grad_enabled() and (x2.requires_grad or w.requires_grad or
                                                  (b is not None and b.requires_grad))
        group, fqn = self._precc_group, self.precc_fqn
        if compiling:
            out = torch.ops.precc.linear(x2, w, b, state, self._precc_key, needs_grad, None)
        else:
            plan = group.program(fqn, dev)
            root_saved = None
            # layers that share an input (a root or a sharer) need the padded M
            shares = self._precc_root is not None or fqn in group.sharers
            if shares:
                mp = plan.layer.padded_m(x2.shape[0])
                if self._precc_root is not None:
                    root_saved = group.shared_input(self._precc_root, x_in, mp)
            out = _ops.linear_eager(x2, w, b, state, self._precc_key, needs_grad, root_saved,
                                    group, plan)
            if shares and len(out) == 2 and fqn in group.sharers:
                group.offer_input(fqn, x_in, mp, out[1])
        return out[0] if flat else out[0].reshape(*x.shape[:-1], self._precc_N)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        # A plain nn.Linear checkpoint has no precc_state: keep the fresh one.
        key = prefix + "precc_state"
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)
        if key not in state_dict and key in missing_keys:
            missing_keys.remove(key)

    def extra_repr(self):
        return "%s, precc=%s (%s)" % (super().extra_repr(), self.precc_fqn,
                                      self._precc_group.recipe)
