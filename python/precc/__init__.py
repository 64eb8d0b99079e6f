"""precc from Python: the runtime (libprecc_rt) over ctypes and the
compiler as a subprocess. No build step: from a built tree,
PYTHONPATH=python finds build/libprecc_rt.so and build/precc (or
$PRECC_LIB and $PRECC_BIN). The PyTorch integration is precc.torch."""
from ._lib import Error, find_compiler, find_library, find_recipes_dir, last_error
from .runtime import Runtime, State
from . import compiler

__version__ = "0.1.0"
__all__ = ["Error", "Runtime", "State", "compiler", "find_compiler", "find_library",
           "find_recipes_dir", "last_error"]
