"""gnnq's imports only point down (tools/check_layers.py): no circle between files, no import from a lower layer
to a higher one; and the check fails on a planted upward import and a planted circle."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import check_layers

REPO = Path(__file__).resolve().parents[2]


def test_gnnq_has_no_circle_and_no_upward_import():
    violations = check_layers.check(REPO / "gnnq")
    assert not violations, "\n".join(map(str, violations))


def test_every_package_has_a_layer():
    packages = {p.name for p in (REPO / "gnnq").iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in (REPO / "gnnq").glob("*.py") if p.stem != "__init__"}
    placed = {name for layer in check_layers.LAYERS for name in layer}
    assert packages | modules <= placed, sorted((packages | modules) - placed)


@pytest.fixture
def package(tmp_path) -> Path:
    """A copy of gnnq's sources to plant imports in."""
    root = tmp_path / "gnnq"
    shutil.copytree(REPO / "gnnq", root, ignore=shutil.ignore_patterns("__pycache__", "*.yaml", "*.c"))
    return root


def _plant(path: Path, line: str, inside_function: bool = False) -> None:
    text = path.read_text()
    if inside_function:
        path.write_text(text + f"\n\ndef _planted():\n    {line}\n")
    else:
        head, sep, rest = text.partition("from __future__ import annotations\n")
        path.write_text(head + sep + line + "\n" + rest if sep else line + "\n" + text)


def _run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools.check_layers", "--root", str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_command_passes_on_gnnq():
    res = _run(REPO / "gnnq")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout == ""


def test_a_planted_upward_import_fails_naming_it(package):
    _plant(package / "config" / "schema.py", "import gnnq.cli  # noqa")
    res = _run(package)
    assert res.returncode == 1
    assert "upward: gnnq.config.schema -> gnnq.cli (layer config is below layer cli)" in res.stdout.splitlines()


def test_an_upward_import_inside_a_function_counts_too(package):
    _plant(package / "data" / "splits.py", "from gnnq.launch.job import say", inside_function=True)
    res = _run(package)
    assert res.returncode == 1
    assert "upward: gnnq.data.splits -> gnnq.launch.job (layer data is below layer launch)" in res.stdout


def test_a_relative_import_is_resolved(package):
    _plant(package / "track" / "record.py", "from ..train import driver", inside_function=True)
    violations = [str(v) for v in check_layers.check(package)]
    assert "upward: gnnq.track.record -> gnnq.train.driver (layer track is below layer train)" in violations


def test_a_planted_circle_fails_naming_its_files(package):
    _plant(package / "launch" / "outcome.py", "import gnnq.launch.job_names  # noqa")
    _plant(package / "launch" / "job_names.py", "from gnnq.launch import outcome", inside_function=True)
    res = _run(package)
    assert res.returncode == 1
    [line] = [line for line in res.stdout.splitlines() if line.startswith("circle:")]
    assert "2 files (gnnq.launch.job_names, gnnq.launch.outcome)" in line


def test_packages_of_one_layer_may_not_import_each_other(package):
    _plant(package / "contract.py", "from gnnq.errors import GnnqError  # noqa")
    violations = [str(v) for v in check_layers.check(package)]
    assert "sideways: gnnq.contract -> gnnq.errors (contract and errors share a layer)" in violations


def test_a_type_checking_import_makes_no_circle_but_counts_for_the_layers(package):
    planted = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gnnq.cli import main  # noqa"
    _plant(package / "errors.py", planted)
    violations = [str(v) for v in check_layers.check(package)]
    assert violations == ["upward: gnnq.errors -> gnnq.cli (layer errors is below layer cli)"]
