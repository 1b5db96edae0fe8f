"""Training curves from a run's metrics.jsonl: validation metric against training time."""

from __future__ import annotations

import json
from pathlib import Path

from gnnq.contract import METRICS_FILE, TARGET_SLACK


def read_curve(run_dir: str | Path) -> list[tuple[float, float]]:
    """(cumulative training seconds, validation metric) at every evaluated epoch; [] without metrics.

    Training seconds are epoch times plus the overheads charged to each epoch (AdaQP's profile, α
    exchange and reassignments, checkpoint writes; the row's ``overhead_time_s``).
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return []
    elapsed, curve = 0.0, []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            break  # a partial last line of a run that was killed
        elapsed += (row.get("epoch_time_s") or 0.0) + (row.get("overhead_time_s") or 0.0)
        if row.get("val") is not None:
            curve.append((elapsed, row["val"]))
    return curve


def time_to_target(curve: list[tuple[float, float]], target: float) -> float | None:
    """Training seconds (epochs and overheads) until the validation metric first reaches ``target`` (None: never)."""
    return next((t for t, val in curve if val >= target - TARGET_SLACK), None)
