"""Run the real ``gnnq`` command line from a benchmark and read back its run records."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path


def run_gnnq(args: list[str], data: Path, runs: Path) -> list[dict]:
    """``gnnq ARGS`` with runs under ``runs``; every record it wrote (sorted, each with its ``run_dir``)."""
    env = {**os.environ, "GNNQ_DATA": str(data), "GNNQ_RUNS": str(runs)}
    res = subprocess.run([sys.executable, "-m", "gnnq.cli", *args], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"gnnq {' '.join(args)} failed: {res.stderr.strip()[-2000:]}")
    return [{**json.loads(p.read_text()), "run_dir": str(p.parent)} for p in sorted(Path(runs).rglob("record.json"))]


def command_line(module: str, argv: list[str] | None) -> str:
    """The command that ran this benchmark, for its results file."""
    return f"python -m {module} " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
