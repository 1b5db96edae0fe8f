"""results/ holds benchmark outputs (tables, records, plots, each README with the command that made it), not
code: the scripts that made them live in benchmarks/ (``python -m benchmarks.<name>``), where lint and the
import check below see them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_no_python_file_under_results():
    scripts = sorted(str(p.relative_to(REPO)) for p in (REPO / "results").rglob("*.py"))
    assert not scripts, f"code under results/ (move it to benchmarks/, run as python -m benchmarks.<name>): {scripts}"


def test_one_generated_dashboard_is_committed():
    """gnnq-report --dashboard writes dashboard.html again from the records; results/ commits one example of it
    (results/dashboard/), the other reports a screenshot and the command (.gitignore keeps regenerated ones out)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--", "results"], capture_output=True, text=True, check=True
    ).stdout.split()
    dashboards = [p for p in listed if p.endswith("dashboard.html") and (REPO / p).exists()]
    assert dashboards == ["results/dashboard/report/dashboard.html"], dashboards
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "results/peers/x/dashboard.html"])
    assert ignored.returncode == 0, ".gitignore should keep regenerated dashboards under results/ out"
