"""results/ holds benchmark outputs (tables, records, plots, each README with the command that made it), not
code: the scripts that made them live in benchmarks/ (``python -m benchmarks.<name>``), where lint and the
import check below see them."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_no_python_file_under_results():
    scripts = sorted(str(p.relative_to(REPO)) for p in (REPO / "results").rglob("*.py"))
    assert not scripts, f"code under results/ (move it to benchmarks/, run as python -m benchmarks.<name>): {scripts}"
