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
        d = _lib.find_recipes_dir()
        if d and os.path.isfile(os.path.join(d, r + ".lua")):
            return os.path.join(d, r + ".lua")
        names = sorted(f[:-4] for f in os.listdir(d) if f.endswith(".lua")) if d else []
        raise Error("precc: no recipe '%s': a .lua path or one of the shipped recipes (%s)"
                    % (r, ", ".join(names) or "none found: set PRECC_RECIPES"))
    raise Error("precc: recipe file '%s' does not exist" % r)


def _run(args, what):
    try:
        p = subprocess.run([_lib.find_compiler()] + args, capture_output=True, text=True)
    except OSError as e:
        raise Error("precc: cannot run %s: %s" % (_lib.find_compiler(), e)) from None
    if p.returncode != 0:
        # precc's stderr is `file:line: error: message` lines; keep them whole.
        msg = "\n".join(l for l in p.stderr.strip().splitlines() if l.strip())
        raise Error(msg or "precc %s exited %d" % (what, p.returncode))
    return p


def check(recipe, model_path):
    """`precc check RECIPE --model MODEL --json`: the plan, one dict per layer."""
    p = _run(["check", resolve_recipe(recipe), "--model", os.fspath(model_path), "--json"],
             "check")
    return json.loads(p.stdout)


def _cache_root():
    d = os.environ.get("PRECC_TORCH_CACHE")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "precc", "torch")


def version():
    return _run(["--version"], "--version").stdout.strip()


def build(recipe, model_path, targets="sm_90a", out=None, jobs=None):
    """`precc build` into out (with a copy of the model file as
    precc_model.lua), or into the cache: one directory per (recipe
    bytes, model file bytes, targets, compiler version), built in a
    temporary directory and renamed into place, so a directory there is
    always whole and a second convert of the same model reuses it."""
    recipe = resolve_recipe(recipe)
    args = ["build", recipe, "--model", os.fspath(model_path), "--target", targets]
    if jobs:
        args += ["--jobs", str(jobs)]
    if out is not None:
        _run(args + ["-o", os.fspath(out)], "build")
        shutil.copyfile(model_path, os.path.join(out, MODEL_FILE))
        return os.fspath(out)
    h = hashlib.sha256()
    for part in (open(recipe, "rb").read(), open(model_path, "rb").read(),
                 targets.encode(), version().encode(),
                 str(os.stat(_lib.find_compiler()).st_mtime_ns).encode()):
        h.update(hashlib.sha256(part).digest())
    name = "%s-%s" % (os.path.basename(recipe)[:-4], h.hexdigest()[:16])
    root = _cache_root()
    final = os.path.join(root, name)
    if os.path.isfile(os.path.join(final, "manifest.json")):
        return final
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + name + ".", dir=root)
    try:
        _run(args + ["-o", tmp], "build")
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
