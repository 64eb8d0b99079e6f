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
