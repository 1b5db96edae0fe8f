"""Runs grouped by configuration minus the seed, mean ± std over seeds, and per-dataset leaderboards."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from gnnq.report.curves import read_curve, time_to_target
from gnnq.report.overrides import config_overrides

SEED_KEYS = frozenset({"trainer.seed"})
# record key -> how the aggregate calls it
METRICS = ("test", "best_val", "epoch_time_s", "comm_time_s", "comm_bytes_per_epoch")
CRITERIA = ("throughput", "time", "bytes")


@dataclass
class Stat:
    mean: float | None
    std: float | None  # sample standard deviation; None with fewer than two values
    n: int

    def text(self, fmt: str = ".4f", scale: float = 1.0, pm: str = " ± ") -> str:
        """``mean ± std`` (or ``mean``, or ``-`` without values)."""
        if self.mean is None:
            return "-"
        out = format(self.mean * scale, fmt)
        return out if self.std is None else out + pm + format(self.std * scale, fmt)

    @classmethod
    def of(cls, values: list) -> "Stat":
        """Over the finite numbers among ``values``."""
        series = pd.Series([_number(v) for v in values], dtype=float)
        return _stat(series.mean(), series.std(), series.count())


@dataclass
class Group:
    """Runs that differ only in their seed."""

    dataset: str
    overrides: list[str]
    runs: list[tuple[Path, dict]] = field(default_factory=list)
    stats: dict[str, Stat] = field(default_factory=dict)
    time_to_target: Stat | None = None

    @property
    def config(self) -> str:
        return " ".join(self.overrides) or "(defaults)"

    @property
    def seeds(self) -> list:
        return [rec["config"]["trainer"]["seed"] for _, rec in self.runs]


MISSING = object()


def lookup(tree: dict, dotted: str):
    """``tree["a"]["b"]`` for ``"a.b"``; MISSING where a part is absent."""
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def _number(value) -> float:
    """A record's metric as a float; NaN for a missing, non-numeric or non-finite value (left out of the statistics)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return np.nan
    return float(value)


def runs_frame(records: list[tuple[Path, dict]], seed_keys: frozenset[str] = SEED_KEYS) -> pd.DataFrame:
    """One row per successful run: dataset, config (its overrides minus ``seed_keys``), run_dir and each metric."""
    rows = [{"dataset": rec["config"]["dataset"]["name"], "config": tuple(config_overrides(rec["config"], exclude=seed_keys)),
             "run": i, **{m: _number(rec.get(m)) for m in METRICS}}
            for i, (_, rec) in enumerate(records) if rec.get("status") == "ok"]  # fmt: skip
    return pd.DataFrame(rows, columns=["dataset", "config", "run", *METRICS])


def _stat(mean: float, std: float, n: int) -> Stat:
    return Stat(None if n == 0 else float(mean), None if n < 2 else float(std), int(n))


def group_runs(records: list[tuple[Path, dict]], seed_keys: frozenset[str] = SEED_KEYS) -> list[Group]:
    """Successful runs grouped by config minus ``seed_keys``, in order of first appearance."""
    frame = runs_frame(records, seed_keys)
    by_config = frame.groupby(["dataset", "config"], sort=False)
    stats = by_config[list(METRICS)].agg(["mean", "std", "count"])  # std: sample standard deviation (ddof 1)
    groups = []
    for ((dataset, overrides), row), runs in zip(stats.iterrows(), by_config["run"].agg(list)):
        g = Group(dataset, list(overrides), [records[i] for i in runs])
        g.stats = {m: _stat(row[(m, "mean")], row[(m, "std")], row[(m, "count")]) for m in METRICS}
        groups.append(g)
    return groups


@dataclass
class Leaderboard:
    dataset: str
    criterion: str
    best_test: float
    tolerance: float
    ranked: list[Group]  # eligible configurations, best first
    others: list[Group]  # below the accuracy cut (or never reaching the target)
    target: float | None = None  # time criterion: validation target


def leaderboards(groups: list[Group], criterion: str = "throughput", tolerance: float = 0.003) -> list[Leaderboard]:
    """Per dataset, configurations ranked by ``criterion``.

    throughput: epochs per second (lowest mean over seeds of the runs' median epoch times) among
    configurations whose mean test
    metric is within ``tolerance`` of the best; bytes: halo bytes per epoch, same cut; time:
    training time until the validation metric first reaches the best configuration's mean best
    validation minus ``tolerance`` (every run of a configuration must reach it).
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion {criterion!r} is unknown; allowed: {', '.join(CRITERIA)}")
    boards = []
    for dataset in dict.fromkeys(g.dataset for g in groups):
        mine = [g for g in groups if g.dataset == dataset and g.stats["test"].mean is not None]
        if not mine:
            continue
        best = max(mine, key=lambda g: g.stats["test"].mean)
        best_test = best.stats["test"].mean
        board = Leaderboard(dataset, criterion, best_test, tolerance, [], [])
        for g in mine:
            g.time_to_target = None
        if criterion == "time" and best.stats["best_val"].mean is None:
            board.others = mine  # no validation metric: nothing to reach
        elif criterion == "time":
            board.target = best.stats["best_val"].mean - tolerance
            for g in mine:
                times = [time_to_target(read_curve(d), board.target) for d, _ in g.runs]
                g.time_to_target = Stat.of(times) if all(t is not None for t in times) else Stat(None, None, 0)
            board.ranked = sorted((g for g in mine if g.time_to_target.mean is not None), key=lambda g: g.time_to_target.mean)
            board.others = [g for g in mine if g.time_to_target.mean is None]
        else:
            key = "epoch_time_s" if criterion == "throughput" else "comm_bytes_per_epoch"
            eligible = [g for g in mine if g.stats["test"].mean >= best_test - tolerance - 1e-12]
            board.ranked = sorted(eligible, key=lambda g: (g.stats[key].mean is None, g.stats[key].mean or 0.0))
            board.others = [g for g in mine if all(g is not e for e in eligible)]
        boards.append(board)
    return boards
