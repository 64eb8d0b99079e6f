"""The precc package without torch: discovery, the ctypes runtime, the
compiler as a subprocess, precc.Error, and `pip install ./python`."""
import ctypes
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, RECIPES
import precc
from precc import compiler


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    compiler.build("current_tensorwise", os.path.join(ROOT, "recipes/models/tiny.lua"),
                   out=str(out / "art"))
    return str(out / "art")


def test_discovery_from_env(tmp_path, monkeypatch):
    lib = precc.find_library()
    assert os.path.isfile(lib) and lib.endswith("libprecc_rt.so")
    monkeypatch.setenv("PRECC_LIB", str(tmp_path / "nope.so"))
    with pytest.raises(precc.Error, match="PRECC_LIB"):
        precc.find_library()
    monkeypatch.setenv("PRECC_LIB", os.path.dirname(lib))  # a directory works too
    assert precc.find_library() == lib
    monkeypatch.setenv("PRECC_BIN", str(tmp_path))
    with pytest.raises(precc.Error, match="PRECC_BIN=.* is not an executable precc"):
        precc.find_compiler()


def test_recipe_names():
    assert compiler.resolve_recipe("deepseek_v3").endswith("recipes/deepseek_v3.lua")
    with pytest.raises(precc.Error) as e:
        compiler.resolve_recipe("deepseek_v4")
    # The message lists what is shipped.
    for r in RECIPES:
        assert r in str(e.value)


def test_compiler_error_is_precc_message(tmp_path):
    bad = tmp_path / "my.lua"
    bad.write_text('recipe "x" {\n  format = e4m4,\n}\n')
    with pytest.raises(precc.Error) as e:
        compiler.check(str(bad), os.path.join(ROOT, "recipes/models/tiny.lua"))
    assert str(e.value).startswith(str(bad) + ":2: error: unknown name 'e4m4'")
    assert "did you mean 'e4m3'" in str(e.value)


def test_model_description_reads_back(tmp_path):
    ls = [compiler.Linear("enc.0.q", 64, 128, bias=True),
          compiler.Linear("head", 128, 256, tied=True),
          compiler.Linear("enc.0.k", 64, 128, shares_input="enc.0.q")]
    p = tmp_path / "m.lua"
    p.write_text(compiler.model_lua("mine", ls))
    plan = compiler.check("bf16", str(p))
    assert plan["model"]["name"] == "mine" if isinstance(plan["model"], dict) else True
    got = {l["fqn"]: (l["in_features"], l["out_features"], l["bias"], l["tied"])
           for l in plan["layers"]}
    assert got == {"enc.0.q": (64, 128, True, False), "head": (128, 256, False, True),
                   "enc.0.k": (64, 128, False, False)}


def test_model_lua_names_are_data(tmp_path):
    # A module's class name becomes the model's name: a quote in it must not
    # end the Lua string (issue 30); precc reads the name back byte for byte.
    name = 'torch_x" .. error("boom") .. "é */ \\'
    p = tmp_path / "m.lua"
    p.write_text(compiler.model_lua(name, [compiler.Linear("enc.0.q", 64, 128)]))
    plan = compiler.check("bf16", str(p))
    assert plan["model"]["name"] == name


def test_runtime_layers_and_run(tiny):
    rt = precc.Runtime(tiny, "cpu")
    assert rt.backend == "cpu" and rt.why == "cpu: requested"
    assert rt.info["recipe"] == "current_tensorwise" and rt.info["model"] == "tiny"
    with open(os.path.join(tiny, "manifest.json")) as f:
        man = json.load(f)
    assert [l.fqn for l in rt.layers] == [l["fqn"] for l in man["layers"]]
    l = rt.layer("model.layers.0.self_attn.q_proj")
    body = precc.runtime.layer_body(man, man["layers"][0])
    assert [b.name for b in l.buffers] == [b["name"] for b in body["buffers"]]
    # Buffer sizes as precc.runtime reads the types == precc_rt_buffer_info (checked in
    # Layer()), at another M too.
    bi = precc._lib.BufferInfo()
    for b in l.buffers:
        assert rt.lib.precc_rt_buffer_info(rt.handle, l.index, b.index, 48, ctypes.byref(bi)) == 0
        assert b.bytes(48) == bi.bytes, b
    # A whole layer on zeros: y, dx, dw are zeros, written (they start 0xa5).
    m = l.m_multiple
    bufs = [ctypes.create_string_buffer(b.bytes(m) + 16) for b in l.buffers]
    ptrs = []
    for b, raw in zip(l.buffers, bufs):
        ctypes.memset(raw, 0 if b.role in ("input", "weight", "grad_output") else 0xa5, len(raw))
        a = ctypes.addressof(raw)
        ptrs.append(a + (-a) % 16)
    l.run(m, ptrs)
    for n in ("y", "dx", "dw"):
        b = l.buffer(n)
        assert ctypes.string_at(ptrs[b.index], b.bytes(m)) == bytes(b.bytes(m)), n
    with pytest.raises(precc.Error, match="not a multiple of"):
        l.run(m + 1, ptrs)
    with pytest.raises(precc.Error, match="no layer 'nope'"):
        rt.layer("nope")


def test_runtime_errors_are_last_error(tiny, tmp_path):
    with pytest.raises(precc.Error, match="manifest.json: error: cannot read"):
        precc.Runtime(str(tmp_path / "none"), "cpu")
    d = tmp_path / "old"
    shutil.copytree(tiny, d)
    man = json.loads((d / "manifest.json").read_text())
    man["precc_version"] = "0.0.9"
    (d / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(precc.Error, match=r"written by precc 0\.0\.9.*rebuild the artifacts"):
        precc.Runtime(str(d), "cpu")
    assert "written by precc 0.0.9" in precc.last_error()
    with pytest.raises(precc.Error, match="unknown backend"):
        precc.Runtime(tiny, "tpu")


def test_state_file_round_trip(tiny, tmp_path):
    rt = precc.Runtime(tiny, "cpu")
    st = precc.State(rt)
    assert len(st) == 0  # current scaling keeps no state
    st.save(str(tmp_path / "s.pst"))
    st.load(str(tmp_path / "s.pst"))
    (tmp_path / "bad.pst").write_bytes(b"nonsense" * 10)
    with pytest.raises(precc.Error, match="bad magic"):
        st.load(str(tmp_path / "bad.pst"))


def test_pip_install(tmp_path):
    """`pip install ./python` gives a package that finds the library through
    PRECC_LIB (an installed package has no build tree beside it)."""
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    target = tmp_path / "site"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
           "--disable-pip-version-check", "--target", str(target), str(src)]
    try:
        import setuptools  # noqa: F401
        cmd.insert(4, "--no-build-isolation")
    except ImportError:
        pytest.skip("setuptools is not installed in this venv, and pip may not fetch it")
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (target / "precc" / "torch" / "__init__.py").is_file()
    env = dict(os.environ, PYTHONPATH=str(target), PRECC_LIB=precc.find_library())
    p = subprocess.run([sys.executable, "-c", "import precc; print(precc.__file__); "
                        "print(precc.find_library())"], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    f, lib = p.stdout.split()
    assert f.startswith(str(target)) and lib == precc.find_library()


# ---- where an installed package finds precc (docs/pytorch.md, "Installing") ----
#
# Each case runs a copy of the package outside the source tree (as pip
# installs it) in a fresh python with a controlled environment: no PRECC_*,
# no PYTHONPATH but the copy, PKG_CONFIG_LIBDIR empty (no system .pc).

_LOOKUP = r"""
import json, precc
out = {"file": precc.__file__}
for f, a in (("find_library", ()), ("find_compiler", ()), ("find_recipes_dir", (True,))):
    try:
        out[f] = getattr(precc, f)(*a)
    except precc.Error as e:
        out[f] = "Error: " + str(e)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def built():
    """The library and compiler under test (run.sh's PRECC_LIB, PRECC_BIN)."""
    return precc.find_library(), precc.find_compiler()


def _site(dest):
    shutil.copytree(os.path.join(ROOT, "python", "precc"), dest,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _prefix(p, built, pc=True):
    """An install prefix: a copy of the library, a precc (a script running
    the real one), the recipes, and precc.pc."""
    lib, exe = built
    (p / "lib" / "pkgconfig").mkdir(parents=True)
    shutil.copyfile(lib, p / "lib" / "libprecc_rt.so")
    (p / "bin").mkdir()
    (p / "bin" / "precc").write_text('#!/bin/sh\nexec "%s" "$@"\n' % exe)
    (p / "bin" / "precc").chmod(0o755)
    (p / "share" / "precc").mkdir(parents=True)
    os.symlink(os.path.join(ROOT, "recipes"), p / "share" / "precc" / "recipes")
    if pc:
        (p / "lib" / "pkgconfig" / "precc.pc").write_text(
            "prefix=${pcfiledir}/../..\nbindir=${prefix}/bin\nlibdir=${prefix}/lib\n"
            "recipedir=${prefix}/share/precc/recipes\n\nName: precc\nDescription: x\n"
            "Version: 0.1.0\nLibs: -L${libdir} -lprecc_rt\n")
    return p


def _lookup(tmp_path, site, **env):
    (tmp_path / "empty").mkdir(exist_ok=True)
    e = {"PATH": "/usr/bin:/bin", "PKG_CONFIG_LIBDIR": str(tmp_path / "empty"),
         "HOME": str(tmp_path), "PYTHONPATH": str(site.parent)}
    e.update({k: str(v) for k, v in env.items() if v is not None})
    e = {k: v for k, v in e.items() if v != "<unset>"}
    p = subprocess.run([sys.executable, "-c", _LOOKUP], capture_output=True, text=True, env=e,
                       cwd=str(tmp_path / "empty"))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["file"].startswith(str(site))
    return out


def _at(out, p):
    real = os.path.realpath
    return (real(out["find_library"]) == real(p / "lib" / "libprecc_rt.so")
            and out["find_compiler"] == str(p / "bin" / "precc")
            and out["find_recipes_dir"] == str(p / "share" / "precc" / "recipes"))


def test_lookup_nothing_names_every_place(tmp_path):
    out = _lookup(tmp_path, _site(tmp_path / "site" / "precc"))
    lib = out["find_library"]
    assert lib.startswith("Error: precc: cannot find libprecc_rt.so; looked in, in order:")
    for line in ("$PRECC_LIB: not set", "the source tree this package lies in: none",
                 "pkg-config precc: pkg-config has no precc", "the prefix of the precc on PATH: "
                 "no precc on PATH", "the prefix this package is installed in: none",
                 "the loader's path (LD_LIBRARY_PATH, ld.so.cache): libprecc_rt.so: cannot open"):
        assert "\n  " + line in lib, line
    assert "set PRECC_LIB" in lib
    cc = out["find_compiler"]
    assert cc.startswith("Error: precc: cannot find the precc compiler") and "set PRECC_BIN" in cc
    assert "\n  the prefix of the precc on PATH: no precc on PATH" in cc
    r = out["find_recipes_dir"]
    assert r.startswith("Error: precc: cannot find the shipped recipes") and "beside $PRECC_BIN: not set" in r


def test_lookup_pkg_config(tmp_path, built):
    p = _prefix(tmp_path / "p", built)
    site = _site(tmp_path / "site" / "precc")
    assert _at(_lookup(tmp_path, site, PKG_CONFIG_PATH=p / "lib" / "pkgconfig"), p)
    # without the pkg-config program: precc.pc read from PKG_CONFIG_PATH
    (tmp_path / "nobin").mkdir()
    assert _at(_lookup(tmp_path, site, PATH=tmp_path / "nobin",
                       PKG_CONFIG_PATH=p / "lib" / "pkgconfig"), p)


def test_lookup_path_and_order(tmp_path, built):
    a = _prefix(tmp_path / "a", built)
    b = _prefix(tmp_path / "b", built, pc=False)
    site = _site(tmp_path / "site" / "precc")
    assert _at(_lookup(tmp_path, site, PATH="%s:/usr/bin:/bin" % (b / "bin")), b)
    # pkg-config's precc.pc comes before the precc on PATH
    assert _at(_lookup(tmp_path, site, PATH="%s:/usr/bin:/bin" % (b / "bin"),
                       PKG_CONFIG_PATH=a / "lib" / "pkgconfig"), a)


def test_lookup_package_prefix(tmp_path, built):
    p = _prefix(tmp_path / "p", built, pc=False)
    site = _site(p / "lib" / "python3" / "site-packages" / "precc")
    assert _at(_lookup(tmp_path, site), p)


def test_lookup_loader_path(tmp_path, built):
    p = _prefix(tmp_path / "p", built, pc=False)
    out = _lookup(tmp_path, _site(tmp_path / "site" / "precc"), LD_LIBRARY_PATH=p / "lib")
    # the path the loader really took, never the bare name
    assert os.path.realpath(out["find_library"]) == os.path.realpath(p / "lib" / "libprecc_rt.so")
    assert out["find_compiler"].startswith("Error: precc: cannot find the precc compiler")


def test_lookup_variables(tmp_path, built):
    lib, exe = built
    site = _site(tmp_path / "site" / "precc")
    # a build tree's PRECC_LIB and PRECC_BIN: the recipes are its source tree's
    # (they were looked for at build/../share/precc/recipes)
    out = _lookup(tmp_path, site, PRECC_LIB=lib, PRECC_BIN=exe)
    assert out["find_library"] == lib and out["find_compiler"] == exe
    assert os.path.realpath(out["find_recipes_dir"]) == os.path.realpath(os.path.join(ROOT, "recipes"))
    # set but wrong: an error naming the variable, never a fall-through
    p = _prefix(tmp_path / "p", built)
    out = _lookup(tmp_path, site, PKG_CONFIG_PATH=p / "lib" / "pkgconfig",
                  PRECC_LIB=tmp_path / "nope.so", PRECC_BIN=tmp_path, PRECC_RECIPES=tmp_path / "empty")
    assert out["find_library"].startswith("Error: precc: PRECC_LIB=%s" % (tmp_path / "nope.so"))
    assert "PRECC_BIN=%s is not an executable precc" % tmp_path in out["find_compiler"]
    assert "PRECC_RECIPES=%s is not a directory of .lua recipes" % (tmp_path / "empty") \
        in out["find_recipes_dir"]
    out = _lookup(tmp_path, site, PRECC_RECIPES=os.path.join(ROOT, "recipes"))
    assert out["find_recipes_dir"] == os.path.join(ROOT, "recipes")


def test_recipe_name_without_recipes(tmp_path, built, monkeypatch):
    monkeypatch.setattr(precc._lib, "_TREE", str(tmp_path))   # not a source tree
    monkeypatch.setattr(precc._lib, "_HERE", str(tmp_path / "site" / "precc"))
    monkeypatch.setenv("PRECC_BIN", str(tmp_path))            # a directory without precc
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PKG_CONFIG_PATH", str(tmp_path))
    monkeypatch.delenv("PRECC_LIB", raising=False)
    with pytest.raises(precc.Error, match=r"cannot find the shipped recipes; looked in, in order:"
                       r"\n  \$PRECC_RECIPES: not set\n  beside \$PRECC_BIN="):
        compiler.resolve_recipe("deepseek_v3")
