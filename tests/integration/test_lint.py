"""The code passes ruff's checks (the rules pinned in pyproject.toml: unused names, import order, syntax, lines over
120 columns) and is ruff-formatted, over every Python tree of the repository."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

TREES = ["gnnq", "tests", "hydra_plugins", "tools", "benchmarks"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args, *TREES], cwd=REPO, capture_output=True, text=True)


def test_ruff_finds_nothing():
    res = _ruff("check")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-1000:]


def test_the_tree_is_ruff_formatted():
    res = _ruff("format", "--check")
    assert res.returncode == 0, "run `ruff format " + " ".join(TREES) + "`:\n" + res.stdout[-3000:] + res.stderr[-1000:]
