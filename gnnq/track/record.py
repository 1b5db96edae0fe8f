"""The run record: config.yaml, metrics.jsonl and, at the end, record.json."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import time
from pathlib import Path

from gnnq.contract import METRICS_FILE, RECORD_FILE, RECORD_SCHEMA_VERSION
from gnnq.track.attempts import with_attempts
from gnnq.track.files import write_json_atomic
from gnnq.track.machine import hardware, package_version

_PACKAGES = (
    "gnnq",
    "torch",
    "torch-geometric",
    "ogb",
    "pymetis",
    "numpy",
    "scipy",
    "hydra-core",
    "omegaconf",
    "wandb",
    "triton",
)
GNNQ_SOURCE = Path(__file__).resolve().parents[1]  # the gnnq package directory


def versions() -> dict:
    """Python, every package a run's numbers depend on (None: not installed) and the CUDA torch was built for."""
    return {
        "python": platform.python_version(),
        **{name: package_version(name) for name in _PACKAGES},
        "cuda": torch_cuda(),
    }


def torch_cuda() -> str | None:
    """``torch.version.cuda``, read from torch/version.py without importing torch (the launcher does not)."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
        tree = ast.parse((Path(spec.origin).parent / "version.py").read_text())
    except (ImportError, AttributeError, TypeError, OSError, SyntaxError):
        return None
    for node in tree.body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) else None)
        )
        if isinstance(target, ast.Name) and target.id == "cuda" and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return value if isinstance(value, str) else None
    return None


def _git(*args: str) -> str | None:
    try:
        res = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(GNNQ_SOURCE), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def source_state() -> dict:
    """The git commit of the checkout gnnq runs from and whether it has changes (tracked or untracked, not
    ignored); both None when gnnq is not a git checkout (an installed wheel)."""
    if _git("ls-files", "--error-unmatch", "__init__.py") is None:  # not a checkout, or gnnq not tracked in it
        return {"git_commit": None, "git_dirty": None}
    commit, status = _git("rev-parse", "HEAD"), _git("status", "--porcelain")
    return {
        "git_commit": commit.strip() if commit else None,
        "git_dirty": None if status is None else bool(status.strip()),
    }


def build_record(
    config: dict, status: str, summary: dict | None = None, error: str | None = None, extra: dict | None = None
) -> dict:
    summary = dict(summary or {})
    gpu_names = summary.pop("gpu_names", None)  # rank 0's: the GPUs torch saw (the launcher imports no torch)
    record = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "status": status,
        "error": error,
        "config": config,
        "best_val": summary.get("best_val"),
        "test": summary.get("test"),
        "epoch_time_s": summary.get("epoch_time_s"),
        "comm_time_s": summary.get("comm_time_s"),
        "comm_bytes_per_epoch": summary.get("comm_bytes_per_epoch"),
        "world_size": summary.get("world_size") or _planned_world_size(config),
        "num_params": summary.get("num_params"),
        "summary": summary,
        "machine": hardware(gpu_names),
        "versions": versions(),
        **source_state(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    extra = dict(extra or {})
    earlier = extra.pop("earlier_attempts", None)  # a resumed run's (gnnq.track.attempts)
    record.update(extra)
    return record if earlier is None else with_attempts(record, earlier)


def _planned_world_size(config: dict) -> int | None:
    cluster = config.get("cluster") or {}
    return cluster["nproc"] * cluster["hosts"] if "nproc" in cluster and "hosts" in cluster else None


_SET_ASIDE = re.compile(r"\.failed-(\d+)(?:\.|$)")  # record.failed-2.json, logs.failed-2, wandb.failed-2


def set_aside_attempts(run_dir: Path) -> list[int]:
    """The numbers n of the earlier attempts a resumed sweep set aside in ``run_dir`` as ``*.failed-<n>*``."""
    run_dir = Path(run_dir)
    found = {int(m.group(1)) for p in run_dir.iterdir() if (m := _SET_ASIDE.search(p.name))} if run_dir.is_dir() else ()
    return sorted(found)


def read_metric_rows(run_dir: Path) -> list[dict]:
    """metrics.jsonl's rows ([] without the file); a last row cut short by a killed run is left out."""
    path = Path(run_dir) / METRICS_FILE
    rows = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            rows.append(json.loads(line))
        except ValueError:
            break
    return rows


def write_record(run_dir: Path, record: dict) -> Path:
    path = Path(run_dir) / RECORD_FILE
    write_json_atomic(path, record)
    return path
