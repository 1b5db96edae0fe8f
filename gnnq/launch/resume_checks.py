"""What ``gnnq resume=<dir>`` checks before it continues a run: the code it runs now against the earlier attempt's
(a new commit: one warning naming both, both kept in the record's ``attempts``), and the dataset against the one
the checkpoint was trained on (changed: refused, unless ``allow_changed_data=true``)."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig

from gnnq.config.dataset_name import graph_name
from gnnq.contract import RECORD_FILE
from gnnq.data.integrity import warn
from gnnq.errors import ConfigError, GnnqError
from gnnq.track.attempts import earlier_attempts
from gnnq.track.record import source_state

ALLOW_CHANGED_DATA = "allow_changed_data"  # resume=<dir> allow_changed_data=true: resume on changed data


def earlier_record(run_dir: Path) -> dict | None:
    """The record the earlier attempt left (None: none, or unreadable)."""
    try:
        record = json.loads((run_dir / RECORD_FILE).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def check_resume(cfg: DictConfig, run_dir: Path, record: dict | None, allow_changed_data: bool) -> list[dict]:
    """Warn about new code, refuse changed data; returns the earlier attempts for the new record."""
    attempts = earlier_attempts(record)
    _check_code(run_dir, attempts)
    if record and record.get("dataset_fingerprint"):
        _check_data(cfg, run_dir, record["dataset_fingerprint"], allow_changed_data)
    return attempts


def _check_code(run_dir: Path, attempts: list[dict]) -> None:
    then = next((a["git_commit"] for a in reversed(attempts) if a.get("git_commit")), None)
    now = source_state()["git_commit"]
    if then and now and then != now:
        warn(
            f"resume={run_dir}: the code changed since the run's earlier attempt: it ran at commit {then[:12]}, "
            f"this attempt runs at {now[:12]}; the record keeps both (attempts)"
        )


def _check_data(cfg: DictConfig, run_dir: Path, then: str, allow: bool) -> None:
    from gnnq.data.registry import load_dataset  # here: the other checks need no dataset code

    try:
        now = load_dataset(cfg.dataset, []).fingerprint()
    except GnnqError:  # bad data: the run itself fails on it, with its record (docs/runs.md "Bad data")
        return
    if now == then:
        return
    name = graph_name(cfg.dataset)
    if allow:
        warn(
            f"resume={run_dir}: dataset {name} changed since the checkpoint was trained (fingerprint {then} -> "
            f"{now}); resuming on the new data as {ALLOW_CHANGED_DATA}=true asks"
        )
        return
    raise ConfigError(
        f"resume={run_dir}: dataset {name} changed since the checkpoint was trained on it: its fingerprint was "
        f"{then}, it is {now} now; restore its files, or resume on the new data with gnnq resume={run_dir} "
        f"{ALLOW_CHANGED_DATA}=true"
    )
