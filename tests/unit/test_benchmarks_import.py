"""Every name a benchmarks/ script imports from gnnq (or from benchmarks/ and tests/) exists, read from the
scripts' source without running them: most start work at import and some need tools the dev extra lacks
(psutil), yet a refactor of gnnq's internals must not leave one pointing nowhere."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIRST_PARTY = ("gnnq", "benchmarks", "tests")
SCRIPTS = sorted((REPO / "benchmarks").rglob("*.py"))


def imported_names(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) of every first-party ``from M import N`` and (module, None) of every ``import M`` in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] in FIRST_PARTY:
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name.split(".")[0] in FIRST_PARTY]
    return found


def test_the_benchmarks_are_found():
    assert len(SCRIPTS) >= 10 and REPO / "benchmarks" / "__init__.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_first_party_import_resolves(script):
    missing = []
    for module, name in imported_names(script):
        try:
            target = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            missing.append(f"{module}: {exc}")
            continue
        if name is not None and not hasattr(target, name):
            try:
                importlib.import_module(f"{module}.{name}")  # a submodule
            except ModuleNotFoundError:
                missing.append(f"{module}.{name}")
    assert not missing, f"{script.relative_to(REPO)} imports what does not exist: {missing}"
