"""ctypes bindings of libprecc_rt (include/precc/precc_rt.h), and where the
library, the precc compiler and the shipped recipes are found
(docs/pytorch.md, "Installing").

Each of the three is looked for in these places, in order; the first that
has it wins, and when none has it the error names every place looked:

  1. its own variable: $PRECC_LIB (the .so or its directory), $PRECC_BIN
     (the executable or its directory), $PRECC_RECIPES. Set but wrong is an
     error, never a fall-through. Recipes are also looked for beside the
     $PRECC_BIN / $PRECC_LIB given: PREFIX/share/precc/recipes of an
     install, the source tree's recipes/ of a build tree (its CMakeCache.txt);
  2. the source tree this package lies in: ../build, ../recipes;
  3. pkg-config's precc.pc (`pkg-config --path precc`: $PKG_CONFIG_PATH,
     then pkg-config's own path; without pkg-config, $PKG_CONFIG_PATH):
     its libdir, bindir (else PREFIX/bin) and recipedir;
  4. the prefix of the precc on PATH (PREFIX/bin/precc): PREFIX/lib (lib64,
     lib/<multiarch>), PREFIX/share/precc/recipes;
  5. the prefix this package is installed in
     (PREFIX/lib/pythonX.Y/site-packages/precc), the same three places;
  6. the library only: the dynamic loader's own path (LD_LIBRARY_PATH,
     ld.so.cache), when dlopen finds it there, under its real path.
"""
import ctypes
import itertools
import os
import shutil
import subprocess
import sysconfig
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_TREE = os.path.normpath(os.path.join(_HERE, "..", ".."))  # python/precc -> root

LIBNAME = "libprecc_rt.so"
BINNAME = "precc"
RECIPE_PROBE = "bf16.lua"   # a shipped recipe: a directory with it is the recipes


class Error(RuntimeError):
    """An error from precc: the compiler's message (`recipe.lua:12: error:
    ...`) or the runtime's precc_rt_last_error()."""


# ---- where precc is ------------------------------------------------------------
#
# A place is (what it is, {"lib": [paths], "bin": [paths], "recipes":
# [dirs]} or a string saying why it has nothing). Each find_* walks the
# places and keeps a line per place for the error.

_HOW = ("then: build precc (cmake --build build), or install it (make install PREFIX=P) "
        "and put P/bin on PATH or P/lib/pkgconfig on PKG_CONFIG_PATH, or set %s")


def _libdirs(prefix):
    dirs = [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append(os.path.join(prefix, "lib", multiarch))
    return dirs


def _prefix_place(prefix):
    prefix = os.path.normpath(prefix)
    return {"lib": [os.path.join(d, LIBNAME) for d in _libdirs(prefix)],
            "bin": [os.path.join(prefix, "bin", BINNAME)],
            "recipes": [os.path.join(prefix, "share", "precc", "recipes")]}


def _source_of_build(d):
    """The source tree of a CMake build directory d (CMakeCache.txt), or None."""
    try:
        with open(os.path.join(d, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def _beside(path):
    """Recipe directories that belong with a library or compiler at path:
    its prefix's share/precc/recipes, or its build tree's source recipes."""
    d = os.path.dirname(os.path.realpath(path))
    out = [os.path.normpath(os.path.join(d, "..", "share", "precc", "recipes"))]
    src = _source_of_build(d)
    if src:
        out.append(os.path.join(src, "recipes"))
    return out


def _pc_read(path):
    """The variables of a .pc file, ${...} expanded (pcfiledir included)."""
    var = {"pcfiledir": os.path.dirname(os.path.abspath(path))}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            k, v = line.split("=", 1)
            if ":" in k or not k.replace("_", "").isalnum():
                continue
            for _ in range(16):  # ${a} inside ${b}: a few rounds settle it
                n = v
                for name, val in var.items():
                    n = n.replace("${%s}" % name, val)
                if n == v:
                    break
                v = n
            var[k.strip()] = v.strip()
    return var


_PC_FOUND = {}


def _pc_file():
    """(path of precc.pc or None, how it was looked for). A path found is
    kept for this environment (one pkg-config run a process)."""
    env = tuple(os.environ.get(v) for v in ("PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "PATH"))
    path = _PC_FOUND.get(env)
    if path and os.path.isfile(path):
        return path, None
    path, why = _pc_lookup()
    if path:
        _PC_FOUND[env] = path
    return path, why


def _pc_lookup():
    exe = shutil.which("pkg-config")
    if exe:
        try:
            p = subprocess.run([exe, "--path", "precc"], capture_output=True, text=True,
                               timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, "pkg-config --path precc failed: %s" % e
        path = p.stdout.strip()
        if p.returncode == 0 and path:
            return path, None
        return None, "pkg-config has no precc (PKG_CONFIG_PATH=%s)" % (
            os.environ.get("PKG_CONFIG_PATH", ""))
    for d in filter(None, os.environ.get("PKG_CONFIG_PATH", "").split(os.pathsep)):
        f = os.path.join(d, "precc.pc")
        if os.path.isfile(f):
            return f, None
    return None, "no pkg-config, and no precc.pc in PKG_CONFIG_PATH=%s" % (
        os.environ.get("PKG_CONFIG_PATH", ""))


def _pc_place():
    path, why = _pc_file()
    if path is None:
        return "pkg-config precc", why
    try:
        v = _pc_read(path)
    except OSError as e:
        return "pkg-config precc (%s)" % path, "cannot read it: %s" % e
    prefix = v.get("prefix", os.path.join(os.path.dirname(path), "..", ".."))
    libdir = v.get("libdir", os.path.join(prefix, "lib"))
    bindir = v.get("bindir", os.path.join(prefix, "bin"))
    recipedir = v.get("recipedir", os.path.join(prefix, "share", "precc", "recipes"))
    norm = os.path.normpath
    return "pkg-config precc (%s)" % path, {
        "lib": [norm(os.path.join(libdir, LIBNAME))], "bin": [norm(os.path.join(bindir, BINNAME))],
        "recipes": [norm(recipedir)]}


def _path_place():
    exe = shutil.which(BINNAME)
    if not exe:
        return "the prefix of the precc on PATH", "no precc on PATH"
    real = os.path.realpath(exe)
    prefix = os.path.dirname(os.path.dirname(real))
    place = _prefix_place(prefix)
    place["bin"] = [exe]
    if _source_of_build(os.path.dirname(real)):   # a build tree's precc
        place["lib"].insert(0, os.path.join(os.path.dirname(real), LIBNAME))
    place["recipes"] = _beside(real)
    return "the prefix of the precc on PATH (%s)" % exe, place


def _package_prefix():
    """PREFIX when this package is PREFIX/lib*/pythonX.Y/{site,dist}-packages/precc."""
    site = os.path.dirname(_HERE)
    py = os.path.dirname(site)
    lib = os.path.dirname(py)
    if (os.path.basename(site) in ("site-packages", "dist-packages")
            and os.path.basename(py).startswith("python")
            and os.path.basename(lib).startswith("lib")):
        return os.path.dirname(lib)
    return None


def _places():
    """The places after the variables, in order (1 is per item), each
    looked at only when the ones before had nothing."""
    if os.path.isfile(os.path.join(_TREE, "CMakeLists.txt")):
        yield ("the source tree this package lies in (%s)" % _TREE, {
            "lib": [os.path.join(_TREE, "build", LIBNAME)],
            "bin": [os.path.join(_TREE, "build", BINNAME)],
            "recipes": [os.path.join(_TREE, "recipes")]})
    else:
        yield ("the source tree this package lies in",
               "none (%s is an installed package)" % _HERE)
    yield _pc_place()
    yield _path_place()
    prefix = _package_prefix()
    if prefix:
        yield ("the prefix this package is installed in (%s)" % prefix, _prefix_place(prefix))
    else:
        yield ("the prefix this package is installed in",
               "none (%s is not under PREFIX/lib/pythonX.Y/site-packages)" % _HERE)


def _is(what, p):
    if what == "lib":
        return os.path.isfile(p)
    if what == "bin":
        return os.path.isfile(p) and os.access(p, os.X_OK)
    return os.path.isfile(os.path.join(p, RECIPE_PROBE))


def _search(what, places):
    """The first path of kind `what` (lib, bin, recipes) in places, and the
    lines saying what each place had."""
    tried = []
    for name, place in places:
        if isinstance(place, str):
            tried.append("%s: %s" % (name, place))
            continue
        for p in place[what]:
            if _is(what, p):
                return p, tried
        tried.append("%s: %s" % (name, ", ".join(place[what]) + (
            " (no %s there)" % RECIPE_PROBE if what == "recipes" else ": not there")))
    return None, tried


def _not_found(thing, var, tried):
    return Error("precc: cannot find %s; looked in, in order:\n  %s\n%s"
                 % (thing, "\n  ".join(tried), _HOW % var))


def _loaded_path(name):
    """Where the loader took the library called name from (/proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split(None, 5)[-1].strip()
                if os.path.basename(p).startswith(name):
                    return p
    except OSError:
        pass
    return None


def find_library():
    """The path of libprecc_rt.so that `load()` uses (the order above)."""
    env = os.environ.get("PRECC_LIB")
    if env:
        p = os.path.join(env, LIBNAME) if os.path.isdir(env) else env
        if os.path.isfile(p):
            return p
        raise Error("precc: PRECC_LIB=%s: %s does not exist" % (env, p))
    p, tried = _search("lib", itertools.chain([("$PRECC_LIB", "not set")], _places()))
    if p:
        return p
    try:
        ctypes.CDLL(LIBNAME)
        p = _loaded_path(LIBNAME)
        if p:
            return p
        tried.append("the loader's path: dlopen(%s) worked but /proc/self/maps does not "
                     "say from where" % LIBNAME)
    except OSError as e:
        tried.append("the loader's path (LD_LIBRARY_PATH, ld.so.cache): %s" % e)
    raise _not_found(LIBNAME, "PRECC_LIB", tried)


def find_compiler():
    """The path of the precc executable (for precc check/build)."""
    env = os.environ.get("PRECC_BIN")
    if env:
        p = os.path.join(env, BINNAME) if os.path.isdir(env) else env
        if _is("bin", p):
            return p
        raise Error("precc: PRECC_BIN=%s is not an executable precc" % env)
    p, tried = _search("bin", itertools.chain([("$PRECC_BIN", "not set")], _places()))
    if p:
        return p
    raise _not_found("the precc compiler (or pass artifacts=DIR built elsewhere)",
                     "PRECC_BIN", tried)


def find_recipes_dir(required=False):
    """The directory of the shipped recipes (the order above); None when
    there is none, or with required=True an Error naming every place."""
    env = os.environ.get("PRECC_RECIPES")
    if env:
        if os.path.isdir(env) and any(f.endswith(".lua") for f in os.listdir(env)):
            return env
        raise Error("precc: PRECC_RECIPES=%s is not a directory of .lua recipes" % env)
    given = []
    for var in ("PRECC_BIN", "PRECC_LIB"):
        v = os.environ.get(var)
        if v:
            exe = os.path.join(v, BINNAME if var == "PRECC_BIN" else LIBNAME) \
                if os.path.isdir(v) else v
            given.append(("beside $%s=%s" % (var, v), {"recipes": _beside(exe)}))
        else:
            given.append(("beside $%s" % var, "not set"))
    p, tried = _search("recipes", itertools.chain([("$PRECC_RECIPES", "not set")], given,
                                                  _places()))
    if p or not required:
        return p
    raise _not_found("the shipped recipes", "PRECC_RECIPES", tried)


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


class GroupInfo(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("experts", c_int), ("grouped", c_int * 3),
                ("n", c_long), ("k", c_long), ("layer", c_int), ("token_align", c_long),
                ("token_align_fwd", c_long)]


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
    # the commit of many layers in one launch per update kernel (saved, state fixed)
    "precc_rt_bulk_commit_table_bytes": (c_size_t, [c_void_p, c_int, _P(c_int)]),
    "precc_rt_bulk_commit_new": (c_void_p, [c_void_p, c_int, _P(c_int), c_long, _P(c_void_p),
                                            _P(c_void_p), c_void_p, c_size_t]),
    "precc_rt_bulk_commit_run": (c_int, [c_void_p, c_void_p, c_void_p]),
    "precc_rt_bulk_commit_layers": (c_int, [c_void_p]),
    "precc_rt_bulk_commit_free": (None, [c_void_p]),
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
    # expert groups: an MoE block's experts as one plan (runtime/grouped.c)
    "precc_rt_group_count": (c_int, [c_void_p]),
    "precc_rt_group_find": (c_int, [c_void_p, c_char_p]),
    "precc_rt_group_info": (c_int, [c_void_p, c_int, _P(GroupInfo)]),
    "precc_rt_group_sizes": (c_int, [c_void_p, c_int, c_long, _P(LayerSizes)]),
    "precc_rt_forward_grouped": (c_int, [c_void_p, c_int, c_long, c_void_p, c_int, c_void_p,
                                         c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,
                                         c_uint64, c_void_p]),
    "precc_rt_backward_grouped": (c_int, [c_void_p, c_int, c_long, c_void_p, c_int, c_void_p,
                                          c_void_p, c_void_p, c_void_p, c_void_p,
                                          _P(ctypes.c_float), c_void_p, c_void_p, c_void_p,
                                          c_uint64, c_void_p]),
    "precc_rt_grouped_check": (c_int, [c_void_p]),
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
