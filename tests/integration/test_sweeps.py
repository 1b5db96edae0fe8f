"""Sweeps through the real command line: by name from any directory, resume, dry run, the end-of-sweep
summary, job directory names, the per-job cli.log, --help and --version, and a reader that goes away.

Here: the cases with real processes (gloo ranks, torchrun or gnnq);
the others are in `tests/e2e/test_sweeps.py`, `tests/unit/test_sweeps.py`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli_helpers import run_gnnq

REPO = Path(__file__).resolve().parents[2]


def test_help_and_version_are_gnnqs(tmp_path):
    res = run_gnnq(["--help"], tmp_path, tmp_path, timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("gnnq: ") and "Hydra" not in res.stdout.splitlines()[0]
    assert "powered by Hydra" not in res.stdout
    assert "  quantizer: adaptive, fp32, grid, uniform" in res.stdout  # the config groups and their options
    assert "schema/" not in res.stdout
    assert any(line.startswith("  peers ") for line in res.stdout.splitlines())  # the sweeps
    version = run_gnnq(["--version"], tmp_path, tmp_path, timeout=120)
    import torch

    import gnnq

    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith(f"gnnq {gnnq.__version__} (") and f"torch {torch.__version__}" in version.stdout
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # a checkout (an installed wheel says "commit unknown")
        assert f"commit {head.stdout.strip()[:12]}" in version.stdout
