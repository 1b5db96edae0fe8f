"""The run record: config.yaml, metrics.jsonl and, at the end, record.json."""

from __future__ import annotations

import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path

from gnnq.track.files import write_json_atomic

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
RECORD_FILE = "record.json"
INTERNAL_DIR = ".gnnq"  # rank-to-launcher handoff files (result, errors)
RESULT_FILE = "result.json"
RESUME_FILE = "resume.json"  # present while `gnnq resume=<run dir>` runs the job again: the ranks load their checkpoints

_PACKAGES = ("gnnq", "torch", "torch-geometric", "ogb", "pymetis", "numpy", "scipy", "hydra-core", "omegaconf", "wandb")


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit() -> str | None:
    repo = Path(__file__).resolve().parents[2]
    try:
        res = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None if res.returncode == 0 else None


def build_record(config: dict, status: str, summary: dict | None = None, error: str | None = None, extra: dict | None = None) -> dict:
    summary = summary or {}
    record = {
        "status": status,
        "error": error,
        "config": config,
        "best_val": summary.get("best_val"),
        "test": summary.get("test"),
        "epoch_time_s": summary.get("epoch_time_s"),
        "comm_time_s": summary.get("comm_time_s"),
        "comm_bytes_per_epoch": summary.get("comm_bytes_per_epoch"),
        "world_size": summary.get("world_size") or _planned_world_size(config),
        "summary": summary,
        "versions": versions(),
        "git_commit": git_commit(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if extra:
        record.update(extra)
    return record


def _planned_world_size(config: dict) -> int | None:
    cluster = config.get("cluster") or {}
    return cluster["nproc"] * cluster["hosts"] if "nproc" in cluster and "hosts" in cluster else None


def write_record(run_dir: Path, record: dict) -> Path:
    path = Path(run_dir) / RECORD_FILE
    write_json_atomic(path, record)
    return path

