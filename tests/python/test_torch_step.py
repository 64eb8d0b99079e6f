"""tests/gpu/torch_step.py --dry-run: the GPU script's own code (the block,
convert with shared inputs, every variant's step, the report and its
targets) on the CPU at tiny sizes, so that it cannot rot between GPU
leases. No timing verdicts and no CUDA graph here: the script says so."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "gpu", "torch_step.py")


def test_dry_run():
    args = [sys.executable, SCRIPT, "--dry-run", "--steps", "3"]
    try:
        import torchao.float8  # noqa: F401
    except Exception:   # noqa: BLE001 — the venv may lack torchao: precc and bf16 still run
        args.append("--no-torchao")
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr[-3000:]
    assert "ERROR" not in out and "FAIL" not in out and "Traceback" not in r.stderr, out
    rows = {l.split("  ")[0] for l in out.splitlines()}
    for v in ("bf16", "precc current_tensorwise", "precc te_delayed_hybrid", "bf16 + compile",
              "precc current_tensorwise + compile"):
        assert v in rows, (v, out)
    if "--no-torchao" not in args:
        assert "torchao tensorwise + compile" in rows and "torchao rowwise + compile" in rows, out
    assert "DRY precc current_tensorwise step" in out
    assert "DRY precc te_delayed_hybrid loss" in out
    assert "SKIP cuda graph replay: no GPU in a dry run" in out
    assert ("DRY DDP (gloo, world size 1) around precc te_delayed_hybrid == no DDP, 3 steps: "
            "losses equal, parameters equal, precc_state equal") in out, out
