"""precc for PyTorch: convert(model, recipe=...) swaps nn.Linear modules
for precc.torch.Linear, whose forward and backward run precc's kernels
(the cpu backend for CPU tensors, cuda for CUDA tensors) through the
custom ops precc::linear and precc::linear_backward. docs/pytorch.md."""
import torch

from .._lib import Error
from ._convert import Decision, convert, default_targets, plain_state_dict, unconvert
from ._experts import GroupedExperts
from ._module import Linear
from ._state import flush, load_state, save_state
from . import _ops


def inspect(module, x, dy=None, seed=0):
    """Runs one precc.torch.Linear's kernels on x (2-D, the recipe's input
    dtype) and, with dy, its backward and state update, on a copy of its
    state, and returns every layer buffer by name ("x.q", "x.scale_inv",
    "x.amax", "dw", "x.amax_history.next", ...): codes of formats of 8 bits
    or fewer as uint8, e2m1 as torch.float4_e2m1fn_x2 [rows, cols / 2] (two
    codes a byte, low nibble first; uint8 on a torch without it), at the
    padded M. Nothing of the module changes."""
    if not isinstance(module, Linear):
        raise Error("precc: inspect takes a precc.torch.Linear, not %s" % type(module).__name__)
    prog = module._precc_group.program(module.precc_fqn, x.device)
    w = module.weight.to(module._precc_wdtype)
    b = module.bias.to(module._precc_bdtype) if module.bias is not None else None
    return _ops.trace(prog, x, w, b, module.precc_state, dy, seed)

__all__ = ["Decision", "Error", "GroupedExperts", "Linear", "convert", "default_targets", "flush", "inspect",
           "load_state", "plain_state_dict", "save_state", "unconvert"]
