"""The README's and docs' checked commands (marked ``<!-- checked-command -->``, tests/checked_commands.py) run
for real, from a directory outside the checkout, and their output has the quoted shape."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checked_commands import REPO, checked_commands, missing_lines
from tests.cli_helpers import gnnq_env

ENTRY = {
    "gnnq": "from gnnq.cli import main; main()",
    "gnnq-report": "from gnnq.cli import report_main; report_main()",
    "gnnq-bench": "from gnnq.bench.harness import main_exit; main_exit()",
}


@pytest.mark.parametrize("checked", checked_commands(), ids=lambda c: f"{c.where} {' '.join(c.command)}")
def test_a_quoted_command_prints_its_quoted_shape(checked, tmp_path):
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    code = f"import sys; sys.argv[0] = {checked.command[0]!r}; {ENTRY[checked.command[0]]}"
    env = gnnq_env(cwd / "runs", Path(os.environ.get("GNNQ_DATA", tmp_path / "data")), {"PYTHONPATH": str(REPO)})
    env.pop("GNNQ_RUNS")  # as a user runs it: runs/ under the working directory
    res = subprocess.run(
        [sys.executable, "-c", code, *checked.command[1:], *checked.extra],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )
    missing = missing_lines(checked.output, res.stdout + res.stderr)
    assert missing == [], f"{checked.where}: lines of another shape: {missing}\n--- output:\n{res.stdout}{res.stderr}"
