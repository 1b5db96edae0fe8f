"""Run the real ``gnnq`` command line in a subprocess and read what it left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Keys that hold wall-clock times (rows and summaries): they differ between otherwise identical runs.
TIME_KEYS = (
    "epoch_time_s",
    "comm_time_s",
    "compute_time_s",
    "transfer_time_s",
    "codec_time_s",
    "halo_comm_time_s",
    "overhead_time_s",
    "overhead_by_kind",
    "training_time_s",
    "throughput_epochs_per_s",
)


def run_gnnq(
    args: list[str], runs: Path, data: Path, env: dict | None = None, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """``gnnq ARGS`` (in ``cwd``: e.g. a directory outside the checkout)."""
    cmd = [sys.executable, "-m", "gnnq.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=gnnq_env(runs, data, env), timeout=timeout, cwd=cwd)


def run_dirs(runs: Path) -> list[Path]:
    return sorted(p.parent for p in Path(runs).rglob("config.yaml") if p.parent.name != ".hydra")


def read_record(run_dir: Path) -> dict:
    return json.loads((run_dir / "record.json").read_text())


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def without_times(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIME_KEYS} for r in rows]


def gnnq_env(runs: Path, data: Path, env: dict | None = None) -> dict:
    """The environment of a test run of ``gnnq``: its own runs and data roots, no injected faults."""
    full_env = {**os.environ, "GNNQ_RUNS": str(runs), "GNNQ_DATA": str(data), "WANDB_SILENT": "true"}
    full_env.pop("GNNQ_FAULT_INJECT", None)
    return {**full_env, **(env or {})}


def start_gnnq(args: list[str], runs: Path, data: Path, env: dict | None = None) -> subprocess.Popen:
    """``gnnq ARGS`` started in the background (stdout and stderr piped, text)."""
    cmd = [sys.executable, "-m", "gnnq.cli", *args]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=gnnq_env(runs, data, env)
    )
