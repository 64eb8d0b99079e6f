"""ctypes bindings of libprecc_rt (include/precc/precc_rt.h), and where the
library and the precc compiler are found.

Search order, library: $PRECC_LIB (the .so itself or a directory holding
it), the build tree this package lies in (python/../build), an install
prefix (PREFIX/lib/pythonX/site-packages/precc -> PREFIX/lib), then the
loader's own path. Compiler: $PRECC_BIN (the executable or its directory),
the build tree, PATH.
"""
import ctypes
import os
import shutil
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_TREE = os.path.normpath(os.path.join(_HERE, "..", ".."))  # python/precc -> root

LIBNAME = "libprecc_rt.so"


class Error(RuntimeError):
    """An error from precc: the compiler's message (`recipe.lua:12: error:
    ...`) or the runtime's precc_rt_last_error()."""


def _candidates_lib():
    env = os.environ.get("PRECC_LIB")
    if env:
        return [os.path.join(env, LIBNAME) if os.path.isdir(env) else env], "PRECC_LIB"
    c = [os.path.join(_TREE, "build", LIBNAME)]
    # An installed package: PREFIX/lib/pythonX.Y/site-packages/precc.
    prefix = os.path.normpath(os.path.join(_HERE, "..", "..", "..", ".."))
    c += [os.path.join(prefix, d, LIBNAME) for d in ("lib", "lib64")]
    c.append(LIBNAME)  # the loader's path (LD_LIBRARY_PATH, ld.so.cache)
    return c, None


def find_library():
    """The path of libprecc_rt.so that `load()` uses."""
    cands, env = _candidates_lib()
    for p in cands:
        if os.sep not in p or os.path.isfile(p):
            return p
    raise Error("precc: cannot find %s (PRECC_LIB=%s)" % (LIBNAME, cands[0]) if env else
                "precc: cannot find %s: build precc (cmake --build build) or set "
                "PRECC_LIB to the library or its directory" % LIBNAME)


def find_compiler():
    """The path of the precc executable (for precc check/build)."""
    env = os.environ.get("PRECC_BIN")
    if env:
        p = os.path.join(env, "precc") if os.path.isdir(env) else env
        if os.access(p, os.X_OK):
            return p
        raise Error("precc: PRECC_BIN=%s is not an executable precc" % env)
    p = os.path.join(_TREE, "build", "precc")
    if os.access(p, os.X_OK):
        return p
    p = shutil.which("precc")
    if p:
        return p
    raise Error("precc: cannot find the precc compiler: build it, put it on PATH or "
                "set PRECC_BIN (or pass artifacts=DIR built elsewhere)")


def find_recipes_dir():
    """Where the shipped recipes are: $PRECC_RECIPES, the source tree, or
    PREFIX/share/precc/recipes next to the compiler."""
    env = os.environ.get("PRECC_RECIPES")
    if env:
        return env
    d = os.path.join(_TREE, "recipes")
    if os.path.isfile(os.path.join(d, "bf16.lua")):
        return d
    try:
        bindir = os.path.dirname(os.path.realpath(find_compiler()))
    except Error:
        return None
    d = os.path.join(bindir, "..", "share", "precc", "recipes")
    return os.path.normpath(d) if os.path.isdir(d) else None


# ---- the C API -----------------------------------------------------------

c_char_p, c_int, c_long, c_size_t = ctypes.c_char_p, ctypes.c_int, ctypes.c_long, ctypes.c_size_t
c_void_p, c_uint32, c_uint64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64

BACKEND = {"auto": 0, "cuda": 1, "cpu": 2}


class ArtifactInfo(ctypes.Structure):
    _fields_ = [("dir", c_char_p), ("precc_version", c_char_p), ("llvm_version", c_char_p),
                ("recipe_name", c_char_p), ("model_name", c_char_p),
                ("recipe_hash", c_uint64), ("model_hash", c_uint64),
                ("target", c_char_p), ("nkernels", c_int), ("nlayers", c_int)]


class BufferInfo(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("type", c_char_p), ("role", c_char_p),
                ("format", c_char_p), ("format_id", c_int), ("rows", c_long),
                ("cols", c_long), ("bytes", c_size_t), ("written", c_int)]


class StepInfo(ctypes.Structure):
    _fields_ = [("kernel", c_int), ("gemm", c_char_p), ("nargs", c_int),
                ("args", ctypes.POINTER(c_int)), ("out_mask", c_uint32)]


class KernelInfo(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("shape", c_char_p), ("entry", c_char_p),
                ("loaded", c_char_p), ("num_regs", c_int), ("spill_bytes", c_int),
                ("launches", c_long), ("elements", ctypes.c_double),
                ("seconds", ctypes.c_double)]


class StateTensor(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("history_len", c_uint32),
                ("pos", ctypes.POINTER(c_uint32)), ("amax_history", ctypes.POINTER(ctypes.c_float)),
                ("scale", ctypes.POINTER(ctypes.c_float)),
                ("scale_inv", ctypes.POINTER(ctypes.c_float))]


class LayerSizes(ctypes.Structure):
    _fields_ = [("state_bytes", c_size_t), ("saved_bytes", c_size_t),
                ("workspace_bytes", c_size_t), ("k", c_long), ("n", c_long),
                ("has_bias", c_int), ("backward_reads_x", c_int), ("backward_reads_w", c_int),
                ("has_state", c_int), ("x_format", c_int), ("w_format", c_int),
                ("y_format", c_int), ("dy_format", c_int), ("dx_format", c_int),
                ("dw_format", c_int)]


# precc_place
PLACES = ["x", "w", "bias", "y", "dy", "dx", "dw", "state", "saved", "workspace",
          "main_grad"]

_P = ctypes.POINTER
_PROTOS = {
    "precc_rt_last_error": (c_char_p, []),
    "precc_backend_name": (c_char_p, [c_int]),
    "precc_rt_open_backend": (c_void_p, [c_int, c_char_p, c_size_t]),
    "precc_rt_open": (c_void_p, [c_char_p, c_int, c_char_p, c_size_t]),
    "precc_rt_backend": (c_int, [c_void_p]),
    "precc_rt_close": (None, [c_void_p]),
    "precc_rt_load": (c_int, [c_void_p, c_char_p]),
    "precc_rt_load_target": (c_int, [c_void_p, c_char_p, c_char_p]),
    "precc_rt_artifact_info": (None, [c_void_p, _P(ArtifactInfo)]),
    "precc_rt_layer_count": (c_int, [c_void_p]),
    "precc_rt_layer_name": (c_char_p, [c_void_p, c_int]),
    "precc_rt_layer_find": (c_int, [c_void_p, c_char_p]),
    "precc_rt_layer_m_multiple": (c_long, [c_void_p, c_int]),
    "precc_rt_buffer_count": (c_int, [c_void_p, c_int]),
    "precc_rt_buffer_info": (c_int, [c_void_p, c_int, c_int, c_long, _P(BufferInfo)]),
    "precc_rt_step_count": (c_int, [c_void_p, c_int]),
    "precc_rt_step_info": (c_int, [c_void_p, c_int, c_int, _P(StepInfo)]),
    "precc_rt_run_layer": (c_int, [c_void_p, c_int, c_long, _P(c_void_p), c_uint64, c_void_p]),
    "precc_rt_run_layer_sized": (c_int, [c_void_p, c_int, c_long, _P(c_void_p), _P(c_size_t),
                                         c_uint64, c_void_p]),
    "precc_rt_run_step": (c_int, [c_void_p, c_int, c_int, c_long, _P(c_void_p), c_uint64,
                                  c_void_p]),
    "precc_rt_kernel_count": (c_int, [c_void_p]),
    "precc_rt_kernel_info": (c_int, [c_void_p, c_int, _P(KernelInfo)]),
    "precc_rt_sync": (c_int, [c_void_p, c_void_p]),
    # the layer API: forward, backward, commit on caller-owned regions
    "precc_rt_layer_sizes": (c_int, [c_void_p, c_int, c_long, _P(LayerSizes)]),
    "precc_rt_buffer_place": (c_int, [c_void_p, c_int, c_int, c_long, _P(c_int), _P(c_size_t)]),
    "precc_rt_layer_state_init": (c_int, [c_void_p, c_int, c_void_p]),
    "precc_rt_forward": (c_int, [c_void_p, c_int, c_long, c_void_p, c_void_p, c_void_p,
                                 c_void_p, c_void_p, c_void_p, c_void_p, c_uint64, c_void_p]),
    "precc_rt_backward": (c_int, [c_void_p, c_int, c_long, c_void_p, c_void_p, c_void_p,
                                  c_void_p, c_void_p, _P(ctypes.c_float), c_void_p, c_void_p,
                                  c_void_p, c_uint64, c_void_p]),
    "precc_rt_commit": (c_int, [c_void_p, c_int, c_long, c_void_p, c_void_p, c_void_p]),
    # linears that read one tensor: the root's saved region instead of a second quantize
    "precc_rt_layer_input_root": (c_int, [c_void_p, c_int]),
    "precc_rt_layer_shared_steps": (c_int, [c_void_p, c_int]),
    "precc_rt_forward_shared": (c_int, [c_void_p, c_int, c_long, c_void_p, c_void_p, c_void_p,
                                        c_void_p, c_void_p, c_void_p, c_void_p, c_uint64,
                                        c_void_p, c_void_p]),
    "precc_rt_backward_shared": (c_int, [c_void_p, c_int, c_long, c_void_p, c_void_p, c_void_p,
                                         c_void_p, c_void_p, _P(ctypes.c_float), c_void_p,
                                         c_void_p, c_void_p, c_uint64, c_void_p, c_void_p]),
    "precc_rt_step_phase": (c_int, [c_void_p, c_int, c_int]),
    "precc_state_free": (None, [c_void_p]),
    "precc_state_count": (c_size_t, [c_void_p]),
    "precc_state_find": (c_long, [c_void_p, c_char_p]),
    "precc_state_tensor_at": (c_int, [c_void_p, c_size_t, _P(StateTensor)]),
    "precc_state_save": (c_int, [c_void_p, c_char_p]),
    "precc_state_load": (c_int, [c_void_p, c_char_p]),
    "precc_rt_state_new": (c_void_p, [c_void_p]),
    "precc_rt_state_pull": (c_int, [c_void_p, c_void_p, c_int, _P(c_void_p)]),
    "precc_rt_state_push": (c_int, [c_void_p, c_void_p, c_int, _P(c_void_p)]),
}

_lib = None
_lock = threading.Lock()


def load():
    """The loaded libprecc_rt (ctypes.CDLL), with every prototype set."""
    global _lib
    with _lock:
        if _lib is None:
            path = find_library()
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise Error("precc: cannot load %s: %s" % (path, e)) from None
            for name, (res, args) in _PROTOS.items():
                try:
                    f = getattr(lib, name)
                except AttributeError:
                    raise Error("precc: %s has no %s (an older libprecc_rt?)" % (path, name)) from None
                f.restype, f.argtypes = res, args
            lib.path = path
            _lib = lib
        return _lib


def last_error():
    return (load().precc_rt_last_error() or b"").decode("utf-8", "replace")


def check(rc, what=None):
    """Raise Error(precc_rt_last_error()) when a call returned -1 / NULL."""
    if rc is None or (isinstance(rc, int) and rc < 0):
        msg = last_error() or (what or "precc_rt call failed")
        raise Error(msg)
    return rc
