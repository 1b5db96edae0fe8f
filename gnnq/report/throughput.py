"""Throughput and epoch time reconciled: why epochs/s is not 1 / median epoch time.

Throughput (what the ``throughput`` criterion ranks) is a run's epochs over its training time, the sum of every
epoch time and every overhead outside epochs (AdaQP's profile, α exchange and reassignments, checkpoint writes):
``1 / throughput = mean epoch time + overheads / epochs``. The epoch time the report shows is the *median* epoch,
which leaves out slow epochs (the first, a reassignment's) and every overhead. So the two can disagree by much more
than the epochs do; the gap is the sum of the two terms below, shown per configuration.
"""

from __future__ import annotations

import statistics

from gnnq.report import fields
from gnnq.report.aggregate import Group


def parts(rec: dict) -> dict[str, float] | None:
    """One run's time per epoch, split: ``per_epoch_s`` (1 / throughput) = ``mean_epoch_s`` + ``overhead_per_epoch_s``,
    beside ``median_epoch_s``; None where the record lacks the training time or the epochs."""
    s = fields.summary(rec)
    total, epochs = fields.number(s.get("training_time_s")), fields.number(s.get("epochs"))
    overhead, median = fields.number(s.get("overhead_time_s")) or 0.0, fields.number(rec.get("epoch_time_s"))
    if total is None or not epochs or median is None:
        return None
    return {
        "per_epoch_s": total / epochs,
        "mean_epoch_s": (total - overhead) / epochs,
        "overhead_per_epoch_s": overhead / epochs,
        "median_epoch_s": median,
    }


def reconcile(g: Group) -> dict[str, float] | None:
    """The mean over seeds of each part (None: a run lacks them)."""
    found = [parts(rec) for _, rec in g.runs]
    if not found or any(p is None for p in found):
        return None
    return {k: statistics.mean(p[k] for p in found) for k in found[0]}


def reconciliation_lines(groups: list[Group]) -> list[str]:
    """One line per configuration: 1 / throughput = mean epoch + overheads per epoch, against the median epoch."""
    lines = []
    for g in groups:
        r = reconcile(g)
        if r is None:
            continue
        ms = {k: v * 1e3 for k, v in r.items()}
        gap = ms["mean_epoch_s"] - ms["median_epoch_s"]
        lines.append(
            f"- {g.label or g.config}: 1 / ({1 / r['per_epoch_s']:.2f} epochs/s) = {ms['per_epoch_s']:.1f} ms per "
            f"epoch = mean epoch {ms['mean_epoch_s']:.1f} ms + overheads {ms['overhead_per_epoch_s']:.1f} ms/epoch; "
            f"median epoch {ms['median_epoch_s']:.1f} ms (mean - median: {gap:+.1f} ms, "
            "slow epochs such as the first)"
        )
    return lines


SECTION_INTRO = (
    "Throughput (epochs/s, what `--criterion throughput` ranks) = epochs / (sum of epoch times + overheads), so "
    "1 / throughput = mean epoch time + overheads per epoch; the epoch ms column is the median epoch, which leaves "
    "out slow epochs and overheads. Per configuration (mean over seeds):"
)
