"""Time to target per seed, and why a configuration has none: ``not reached in 20 epochs: best 0.8900 < 0.8980``."""

from __future__ import annotations

from pathlib import Path

from gnnq.report import fields
from gnnq.report.curves import read_curve, time_to_target


def seed_times(runs: list[tuple[Path, dict]], target: float) -> list[float | None]:
    """Each run's training seconds (epochs and overheads) until validation first reaches ``target`` (None: never)."""
    return [time_to_target(read_curve(d), target) for d, _ in runs]


def _epochs(run_dir: Path, rec: dict) -> int | None:
    epochs = fields.summary(rec).get("epochs")
    if isinstance(epochs, int) and not isinstance(epochs, bool):
        return epochs
    return None


def _best_val(run_dir: Path, rec: dict) -> float | None:
    curve = read_curve(run_dir)
    return max(v for _, v in curve) if curve else fields.number(rec.get("best_val"))


def missing_reason(runs: list[tuple[Path, dict]], times: list[float | None], target: float) -> str | None:
    """Why the configuration has no time to target (None: every seed reached it): the seeds that did not reach
    ``target``, in how many epochs, and their best validation value (``not reached in 20 epochs: best 0.8900 <
    0.8980``; with several seeds ``2 of 3 seeds not reached in 20 epochs: best 0.8900, 0.8950 < 0.8980``)."""
    missed = [(d, rec) for (d, rec), t in zip(runs, times) if t is None]
    if not missed:
        return None
    epochs = sorted({e for d, r in missed if (e := _epochs(d, r)) is not None})
    within = f" in {'/'.join(map(str, epochs))} epochs" if epochs else ""
    bests = [b for d, r in missed if (b := _best_val(d, r)) is not None]
    best = f": best {', '.join(f'{b:.4f}' for b in bests)} < {target:.4f}" if bests else f": target {target:.4f}"
    who = "" if len(runs) == 1 else f"{len(missed)} of {len(runs)} seeds "
    return f"{who}not reached{within}{best}"
