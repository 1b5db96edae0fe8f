"""The code passes ruff's checks (the rules pinned in pyproject.toml): unused names, import order, syntax."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_ruff_finds_nothing():
    res = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "gnnq", "tests", "hydra_plugins", "tools"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-1000:]
