"""precc for PyTorch: convert(model, recipe=...) swaps nn.Linear modules
for precc.torch.Linear, whose forward and backward run precc's kernels
(the cpu backend for CPU tensors, cuda for CUDA tensors) through the
custom ops precc::linear and precc::linear_backward. docs/pytorch.md."""
import torch

from .._lib import Error
from ._convert import Decision, convert, default_targets
from ._module import Linear
from ._state import flush, load_state, save_state
from . import _ops

__all__ = ["Decision", "Error", "Linear", "convert", "default_targets", "flush",
           "load_state", "save_state"]
