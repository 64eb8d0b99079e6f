"""The precc compiler as a subprocess: `precc check --json` and `precc
build`, and the Lua model file precc reads (docs/models.md). Its errors
become precc.Error with precc's own message (`recipe.lua:12: error: ...`)."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from . import _lib
from ._lib import Error

# The model description, kept beside the manifest it was built from.
MODEL_FILE = "precc_model.lua"

# FQNs a model file takes (frontend/model.c).
FQN_RE = re.compile(r"^[A-Za-z0-9._-]+$")


class Linear:
    """One linear of a model description."""
    __slots__ = ("fqn", "in_features", "out_features", "bias", "tied", "shares_input")

    def __init__(self, fqn, in_features, out_features, bias=False, tied=False, shares_input=None):
        self.fqn, self.in_features, self.out_features = fqn, int(in_features), int(out_features)
        self.bias, self.tied, self.shares_input = bool(bias), bool(tied), shares_input


def _lua_str(s):
    """s as a Lua string literal: a name is data, never code, so a quote,
    a backslash, a control or a non-ASCII byte is a \\ddd escape."""
    return '"%s"' % "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else "\\%03d" % b
                            for b in s.encode("utf-8", "surrogateescape"))


def model_lua(name, linears):
    """A Lua model file: `model "NAME"` and one linear() per layer; a layer
    that reads the same tensor as an earlier one of the file says so
    (shares_input), so that `precc build --stats` counts that tensor once."""
    out = ["-- written by precc.torch from a module tree", "model " + _lua_str(name)]
    seen = set()
    for l in linears:
        opts = []
        if l.tied:
            opts.append("tied = true")
        if l.bias:
            opts.append("bias = true")
        if l.shares_input in seen:
            opts.append("shares_input = " + _lua_str(l.shares_input))
        o = ", {%s}" % ", ".join(opts) if opts else ""
        seen.add(l.fqn)
        out.append("linear(%s, %d, %d%s)" % (_lua_str(l.fqn), l.in_features, l.out_features, o))
    return "\n".join(out) + "\n"


def resolve_recipe(recipe):
    """A recipe path: an existing file, or the name of a shipped recipe
    ("deepseek_v3" -> recipes/deepseek_v3.lua)."""
    r = os.fspath(recipe)
    if os.path.isfile(r):
        return os.path.abspath(r)
    if os.sep not in r and not r.endswith(".lua"):
        d = _lib.find_recipes_dir(required=True)
        if os.path.isfile(os.path.join(d, r + ".lua")):
            return os.path.join(d, r + ".lua")
        names = sorted(f[:-4] for f in os.listdir(d) if f.endswith(".lua"))
        raise Error("precc: no recipe '%s': a .lua path or one of the shipped recipes in %s (%s)"
                    % (r, d, ", ".join(names)))
    raise Error("precc: recipe file '%s' does not exist" % r)


# Every precc process this package started: (subcommand, seconds), for the
# benches and the tests that count them (a warm convert starts none).
RUNS = []


def _run(args, what):
    t0 = time.perf_counter()
    try:
        p = subprocess.run([_lib.find_compiler()] + args, capture_output=True, text=True)
    except OSError as e:
        raise Error("precc: cannot run %s: %s" % (_lib.find_compiler(), e)) from None
    finally:
        RUNS.append((what, time.perf_counter() - t0))
    if p.returncode != 0:
        # precc's stderr is `file:line: error: message` lines; keep them whole.
        msg = "\n".join(l for l in p.stderr.strip().splitlines() if l.strip())
        raise Error(msg or "precc %s exited %d" % (what, p.returncode))
    return p


def _cache_root():
    d = os.environ.get("PRECC_TORCH_CACHE")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "precc", "torch")


_IDS = {}


def compiler_id():
    """The sha256 of the precc executable's bytes: what a cache entry made
    by it is keyed on (one hash per file state and process, no precc run)."""
    exe = _lib.find_compiler()
    st = os.stat(exe)
    key = (os.path.realpath(exe), st.st_size, st.st_mtime_ns, st.st_ino)
    h = _IDS.get(key)
    if h is None:
        with open(exe, "rb") as f:
            h = _IDS[key] = hashlib.sha256(f.read()).hexdigest()
    return h


def _key(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part if isinstance(part, bytes) else part.encode()).digest())
    return h.hexdigest()[:16]


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _publish(text, final):
    """Write text to final through a temporary file and a rename."""
    d = os.path.dirname(final)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, final)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check(recipe, model_path, cache=True):
    """`precc check RECIPE --model MODEL --json`: the plan, one dict per layer.
    Cached (cache=True) under the artifact cache's check/, keyed on the
    recipe's and the model file's bytes and the compiler's (compiler_id),
    so a second convert of a model starts no precc process."""
    recipe = resolve_recipe(recipe)
    args = ["check", recipe, "--model", os.fspath(model_path), "--json"]
    if not cache:
        return json.loads(_run(args, "check").stdout)
    path = os.path.join(_cache_root(), "check", "%s-%s.json" % (
        os.path.basename(recipe)[:-4],
        _key(_read(recipe), _read(model_path), compiler_id())))
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        pass
    out = _run(args, "check").stdout
    plan = json.loads(out)
    _publish(out, path)
    return plan


def version():
    return _run(["--version"], "--version").stdout.strip()


# The summary (precc build --json) of the last build this process ran:
# kernel_builds, cache_hits, layers, ... (docs/artifacts.md).
LAST_BUILD = None


def _build(args):
    global LAST_BUILD
    p = _run(args + ["--json"], "build")
    try:
        LAST_BUILD = json.loads(p.stdout)
    except ValueError:
        LAST_BUILD = None
    return p


def build(recipe, model_path, targets="sm_90a", out=None, jobs=None):
    """`precc build` into out (with a copy of the model file as
    precc_model.lua), or into the cache: one directory per (recipe
    bytes, model file bytes, targets, compiler bytes), built in a
    temporary directory and renamed into place, so a directory there is
    always whole and a second convert of the same model reuses it
    without running precc. The kernels themselves are cached by precc
    build ($PRECC_CACHE_DIR): a layer already built for another model is
    not compiled again."""
    recipe = resolve_recipe(recipe)
    args = ["build", recipe, "--model", os.fspath(model_path), "--target", targets]
    if jobs:
        args += ["--jobs", str(jobs)]
    if out is not None:
        _build(args + ["-o", os.fspath(out)])
        shutil.copyfile(model_path, os.path.join(out, MODEL_FILE))
        return os.fspath(out)
    name = "%s-%s" % (os.path.basename(recipe)[:-4],
                      _key(_read(recipe), _read(model_path), targets, compiler_id()))
    root = _cache_root()
    final = os.path.join(root, name)
    if os.path.isfile(os.path.join(final, "manifest.json")):
        return final
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + name + ".", dir=root)
    try:
        _build(args + ["-o", tmp])
        shutil.copyfile(model_path, os.path.join(tmp, MODEL_FILE))
        try:
            os.rename(tmp, final)
        except OSError:
            if not os.path.isfile(os.path.join(final, "manifest.json")):  # not a racing twin
                raise
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return final
