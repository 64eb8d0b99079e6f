"""Shared by the Python tests: the package from the source tree, caches in
a temporary directory unless run.sh set them, and small helpers."""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
_tmp = tempfile.mkdtemp(prefix="precc-pytest-")
os.environ.setdefault("PRECC_TORCH_CACHE", os.path.join(_tmp, "artifacts"))
os.environ.setdefault("PRECC_CACHE_DIR", os.path.join(_tmp, "kernels"))

RECIPES = sorted(f[:-4] for f in os.listdir(os.path.join(ROOT, "recipes")) if f.endswith(".lua"))
