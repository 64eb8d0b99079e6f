"""The package as a user installs it (issue 31 §5): `make install
PREFIX=$tmp` (cmake --install), `pip install --no-deps --no-build-isolation
--no-index ./python` into a fresh venv that sees the test venv's packages
(torch), offline, then from a directory outside the tree, with no PRECC_*
variable, no PYTHONPATH and no LD_LIBRARY_PATH: the package finds the
installed precc through the precc on PATH or through pkg-config, converts
a tiny model, trains it and converts it back."""
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from conftest import ROOT

BUILD = os.environ.get("PRECC_TEST_BUILD")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(prefix, venv python, work directory outside the tree)."""
    if not BUILD or not os.path.isfile(os.path.join(BUILD, "CMakeCache.txt")):
        pytest.skip("PRECC_TEST_BUILD names no build directory (run.sh sets it)")
    try:
        import setuptools  # noqa: F401
    except ImportError:
        pytest.skip("setuptools is not installed in the test venv, and pip may not fetch it "
                    "(--no-build-isolation, offline)")
    tmp = tmp_path_factory.mktemp("install")
    prefix = tmp / "prefix"
    cmake = os.environ.get("PRECC_CMAKE") or shutil.which("cmake")
    p = subprocess.run([cmake, "--install", BUILD, "--prefix", str(prefix)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    # A venv of its own whose site-packages points at the test venv's (torch,
    # pip, setuptools): a .pth file, as --system-site-packages does for the
    # system's.
    venv = tmp / "venv"
    p = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("python -m venv failed: %s" % p.stderr.strip().splitlines()[-1:])
    vpy = venv / "bin" / "python"
    site = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    parents = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    with open(os.path.join(site, "_precc_test_parent.pth"), "w") as f:
        f.write("\n".join(sorted(parents)) + "\n")
    # pip builds in the source directory: a copy, so the tree stays clean.
    src = tmp / "python"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    env = _clean_env(tmp)
    # Offline: no index, and any network access would hit a dead proxy.
    env.update(http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
               HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    p = subprocess.run([str(vpy), "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "--no-index", "--disable-pip-version-check",
                        str(src)], capture_output=True, text=True, env=env, cwd=str(tmp))
    assert p.returncode == 0, p.stdout + p.stderr
    work = tmp / "work"
    work.mkdir()
    return prefix, vpy, work


def _clean_env(tmp):
    """The environment of a user's shell: none of run.sh's variables."""
    drop = ("PRECC_LIB", "PRECC_BIN", "PRECC_RECIPES", "PYTHONPATH", "LD_LIBRARY_PATH",
            "PKG_CONFIG_PATH", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    (tmp / "no-pc").mkdir(exist_ok=True)
    env["PKG_CONFIG_LIBDIR"] = str(tmp / "no-pc")   # no system .pc files
    env["PATH"] = "/usr/bin:/bin"
    env["PRECC_TORCH_CACHE"] = str(tmp / "cache" / "artifacts")
    return env


_TRAIN = r"""
import json, os, sys
import torch
from torch import nn
import precc, precc.torch as pt
out = {"file": precc.__file__, "lib": precc.find_library(), "bin": precc.find_compiler(),
       "recipes": precc.find_recipes_dir()}
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 64, bias=False), nn.ReLU(), nn.Linear(64, 32, bias=False))
pt.convert(net, recipe="current_tensorwise")
out["converted"] = [type(m).__name__ for m in net]
opt = torch.optim.SGD(net.parameters(), lr=0.5)
x, t = torch.randn(32, 64), torch.randn(32, 32)
losses = []
for _ in range(4):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = (net(x).float() - t).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
out["losses"] = losses
pt.unconvert(net)
out["back"] = [type(m).__name__ for m in net]
print(json.dumps(out))
"""


def _run(vpy, work, env, code):
    p = subprocess.run([str(vpy), "-c", code], capture_output=True, text=True, env=env,
                       cwd=str(work))
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_installed_precc_on_path_converts_and_trains(installed):
    prefix, vpy, work = installed
    env = _clean_env(work.parent)
    env["PATH"] = "%s:/usr/bin:/bin" % (prefix / "bin")
    out = _run(vpy, work, env, _TRAIN)
    assert out["file"].startswith(str(vpy.parent.parent))     # the installed copy
    assert os.path.realpath(out["lib"]) == os.path.realpath(prefix / "lib" / "libprecc_rt.so")
    assert out["bin"] == str(prefix / "bin" / "precc")
    assert out["recipes"] == str(prefix / "share" / "precc" / "recipes")
    assert out["converted"] == ["Linear", "ReLU", "Linear"] and out["back"] == out["converted"]
    assert out["losses"][-1] < out["losses"][0], out["losses"]


def test_installed_precc_through_pkg_config(installed):
    prefix, vpy, work = installed
    env = _clean_env(work.parent)
    env["PKG_CONFIG_PATH"] = str(prefix / "lib" / "pkgconfig")
    out = _run(vpy, work, env, "import json, precc; print(json.dumps([precc.find_library(), "
               "precc.find_compiler(), precc.find_recipes_dir()]))")
    assert [os.path.realpath(p) for p in out] == [
        os.path.realpath(p) for p in (prefix / "lib" / "libprecc_rt.so", prefix / "bin" / "precc",
                                      prefix / "share" / "precc" / "recipes")]


def test_installed_package_without_precc_says_where_it_looked(installed):
    prefix, vpy, work = installed
    p = subprocess.run([str(vpy), "-c", "import precc; precc.find_library()"], capture_output=True,
                       text=True, env=_clean_env(work.parent), cwd=str(work))
    assert p.returncode != 0
    err = p.stderr.strip().splitlines()
    assert "Error: precc: cannot find libprecc_rt.so; looked in, in order:" in p.stderr
    assert any("the prefix this package is installed in (%s)" % vpy.parent.parent in l for l in err)
    assert any(l.startswith("  the loader's path") for l in err)


def test_installed_tools_need_no_ld_library_path(installed):
    prefix, vpy, work = installed
    env = _clean_env(work.parent)
    for tool, arg in (("precc", "--version"), ("precc-run", "--help")):
        p = subprocess.run([str(prefix / "bin" / tool), arg], capture_output=True, text=True,
                           env=env)
        assert p.returncode == 0, (tool, p.stderr)
    readelf = shutil.which("readelf")
    if readelf:
        for tool in ("precc", "precc-run"):
            d = subprocess.run([readelf, "-d", str(prefix / "bin" / tool)], capture_output=True,
                               text=True).stdout
            assert "$ORIGIN/../lib" in d, (tool, d)
