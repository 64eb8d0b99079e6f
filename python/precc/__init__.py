"""precc from Python: the runtime (libprecc_rt) over ctypes and the
compiler as a subprocess. No build step: from a built tree,
PYTHONPATH=python finds build/libprecc_rt.so and build/precc; installed
(pip install ./python), it finds an installed precc through $PRECC_LIB /
$PRECC_BIN / $PRECC_RECIPES, precc.pc, the precc on PATH or its own
prefix (find_library, find_compiler, find_recipes_dir; docs/pytorch.md,
"Installing"). The PyTorch integration is precc.torch."""
from ._lib import Error, find_compiler, find_library, find_recipes_dir, last_error
from .runtime import Runtime, State
from . import compiler

__version__ = "0.1.0"
__all__ = ["Error", "Runtime", "State", "compiler", "find_compiler", "find_library",
           "find_recipes_dir", "last_error"]
