"""Runs grouped by configuration minus the seed, mean ± std over seeds, and per-dataset leaderboards."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from gnnq.report import confidence, fields
from gnnq.report.overrides import config_overrides
from gnnq.report.progress import steps
from gnnq.report.target import missing_reason, seed_times

SEED_KEYS = frozenset({"trainer.seed"})
# Aggregated over seeds: the record's metrics, wall-clock throughput (epochs / (epoch times + overheads)),
# overhead seconds outside epochs and the parameter count.
METRICS = fields.RECORD_METRICS + fields.DERIVED_METRICS
CRITERIA = ("throughput", "time", "bytes", "test", "val")
# criterion -> (metric, higher is better); time ranks by Group.time_to_target
RANK_BY = {
    "throughput": ("throughput", True),
    "bytes": ("comm_bytes_per_epoch", False),
    "test": ("test", True),
    "val": ("best_val", True),
    "time": ("time_to_target_s", False),
}


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
    label: str | None = None  # its name in legends and leaderboards (gnnq.report.labels)
    tta_seeds: list[float | None] = field(default_factory=list)  # each seed's time to target (None: not reached)
    tta_ci: tuple[float, float] | None = None  # bootstrap interval of the mean time to target (gnnq.report.confidence)
    tta_why: str | None = None  # why there is no time to target (gnnq.report.target.missing_reason)

    @property
    def config(self) -> str:
        return " ".join(self.overrides) or "(defaults)"

    @property
    def command(self) -> str:
        """The command that reruns it (add ``trainer.seed=N`` for one seed)."""
        return shlex.join(["gnnq", *self.overrides])

    @property
    def seeds(self) -> list:
        return [(rec["config"].get("trainer") or {}).get("seed") for _, rec in self.runs]

    @property
    def throughput_measured(self) -> bool:
        """Whether every run's throughput counts its overheads (records without it: 1 / epoch time)."""
        return all(fields.throughput(rec)[1] for _, rec in self.runs)

    @property
    def hardware(self) -> str | None:
        return "; ".join(dict.fromkeys(h for _, rec in self.runs if (h := fields.hardware(rec)))) or None

    def _distinct(self, read) -> str | None:
        """The runs' distinct values of ``read(record)``, in order, joined by ``; `` (None: no run has one)."""
        return "; ".join(dict.fromkeys(str(v) for _, rec in self.runs if (v := read(rec)) is not None)) or None

    @property
    def ranks(self) -> str | None:
        return self._distinct(fields.ranks)

    @property
    def hosts(self) -> str | None:
        return self._distinct(fields.hosts)

    @property
    def commit(self) -> str | None:
        return self._distinct(fields.git_commit)

    @property
    def torch(self) -> str | None:
        return self._distinct(fields.torch_version)

    @property
    def date(self) -> str | None:
        """The day the last of its runs finished."""
        return max((d for _, rec in self.runs if (d := fields.date(rec))), default=None)

    def value(self, criterion: str) -> float | None:
        """The mean the criterion ranks by (time: time to target)."""
        if criterion == "time":
            return None if self.time_to_target is None else self.time_to_target.mean
        return self.stats[RANK_BY[criterion][0]].mean


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
    number = fields.number(value)
    return np.nan if number is None else number


def runs_frame(records: list[tuple[Path, dict]], seed_keys: frozenset[str] = SEED_KEYS) -> pd.DataFrame:
    """One row per successful run: dataset, config (its overrides minus ``seed_keys``), run_dir and each metric."""
    rows = [
        {
            "dataset": fields.dataset(rec),
            "config": tuple(config_overrides(rec["config"], exclude=seed_keys)),
            "run": i,
            **{m: _number(v) for m, v in fields.metrics(rec).items()},
        }
        for i, (_, rec) in enumerate(steps(records, "grouping runs"))
        if rec.get("status") == "ok"
    ]
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
    others: list[
        Group
    ]  # not ranked (below the accuracy cut, never reaching the target, no value), sorted by the criterion
    target: float | None = None  # the validation target of time to target (best mean best-val minus tolerance)
    reasons: list[str] = field(default_factory=list)  # why each of ``others`` is not ranked
    noise: list[str] = field(default_factory=list)  # where the order rests on differences within the noise
    rank_numbers: list[int] = field(default_factory=list)  # of ``ranked``: competition ranks, ties share one

    @property
    def accuracy_cut(self) -> bool:
        """Whether only configurations within ``tolerance`` of the best mean test metric are ranked."""
        return self.criterion in ("throughput", "bytes")


def _sorted(groups: list[Group], criterion: str) -> list[Group]:
    """Best value first, configurations without one last (for time: closest best validation first)."""
    if criterion == "time" and all(g.value("time") is None for g in groups):
        criterion = "val"
    higher = RANK_BY[criterion][1]
    return sorted(
        groups,
        key=lambda g: (
            g.value(criterion) is None,
            -(g.value(criterion) or 0.0) if higher else g.value(criterion) or 0.0,
        ),
    )


def _time_to_target(g: Group, target: float) -> tuple[Stat, int]:
    """Mean time over seeds (every seed must reach the target), and how many seeds reached it; sets the group's
    per-seed times, their bootstrap interval and, where a seed missed, why."""
    times = seed_times(g.runs, target)
    reached = sum(t is not None for t in times)
    g.tta_seeds, g.tta_why = times, missing_reason(g.runs, times, target)
    g.tta_ci = confidence.bootstrap_ci(times) if reached == len(times) else None
    return (Stat.of(times) if reached == len(times) else Stat(None, None, 0)), reached


def seed_values(g: Group, criterion: str) -> list:
    """The per-seed values a criterion ranks by (time: time to target)."""
    if criterion == "time":
        return list(g.tta_seeds)
    return [fields.metrics(rec)[RANK_BY[criterion][0]] for _, rec in g.runs]


NOISE_P = confidence.NOISE_P  # a neighbour's lead is within the noise when Welch's t-test gives p >= NOISE_P
CRITERION_NAMES = {
    "throughput": "epochs/s",
    "bytes": "halo bytes/epoch",
    "test": "test",
    "val": "best val",
    "time": "time to target s",
}


def _ranked_stat(g: Group, criterion: str) -> Stat:
    if criterion == "time":
        return g.time_to_target or Stat(None, None, 0)
    return g.stats[RANK_BY[criterion][0]]


def welch_p(a: Stat, b: Stat) -> float | None:
    """Two-sided p of Welch's t-test that two means over seeds are equal; None without two values on each side."""
    from scipy.stats import ttest_ind_from_stats

    if a.mean is None or b.mean is None or a.std is None or b.std is None:
        return None
    if a.std == 0 and b.std == 0:
        return 1.0 if a.mean == b.mean else 0.0
    return float(ttest_ind_from_stats(a.mean, a.std, a.n, b.mean, b.std, b.n, equal_var=False).pvalue)


def _pm(stat: Stat) -> str:
    """``4.34 ± 0.06``: the mean to 4 significant digits, the std to as many decimals."""
    size = abs(stat.mean) if stat.mean else 1.0
    decimals = max(0, 3 - int(np.floor(np.log10(size))))
    return stat.text(f".{decimals}f")


def noise_notes(ranked: list[Group], criterion: str) -> list[str]:
    """Where the order of ranked neighbours is within the noise: one line per pair whose lead Welch's t-test over
    seeds does not separate (p >= NOISE_P), and one line naming the ranks that have fewer than two seeds (no noise
    estimate at all)."""
    out, what, single = [], CRITERION_NAMES[criterion], []
    for rank, (above, below) in enumerate(zip(ranked, ranked[1:]), start=1):
        a, b = _ranked_stat(above, criterion), _ranked_stat(below, criterion)
        if a.mean is None or b.mean is None:
            continue
        p = welch_p(a, b)
        if p is None:
            single += [r for r in (rank, rank + 1) if r not in single]
        elif p >= NOISE_P:
            out.append(
                f"rank {rank} ({above.label or above.config}) over {rank + 1} ({below.label or below.config}): "
                f"{what} {_pm(a)} vs {_pm(b)} over {a.n} and {b.n} seeds is within the noise "
                f"(Welch's t-test p = {p:.2f})"
            )
    if single:
        out.append(
            f"ranks {', '.join(map(str, single))}: fewer than two seeds on one side, so no noise estimate; "
            "their order may be noise (run more seeds: trainer.seed=0,1,2)"
        )
    return out


def leaderboards(groups: list[Group], criterion: str = "throughput", tolerance: float = 0.003) -> list[Leaderboard]:
    """Per dataset, configurations ranked by ``criterion``.

    throughput: wall-clock epochs per second (epochs over epoch times plus overheads, mean over
    seeds), bytes: halo bytes per epoch, both among configurations whose mean test metric is within
    ``tolerance`` of the best; test, val: mean test or best validation metric (every configuration
    ranked); time: training time (epochs and overheads) until the validation metric first reaches
    the best configuration's mean best validation minus ``tolerance`` (every seed must reach it; computed and shown
    under every criterion). Configurations not ranked follow, sorted by the criterion, each with the reason.
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion {criterion!r} is unknown; allowed: {', '.join(CRITERIA)}")
    metric = RANK_BY[criterion][0]
    boards = []
    for dataset in dict.fromkeys(g.dataset for g in groups):
        mine = [g for g in groups if g.dataset == dataset and g.stats["test"].mean is not None]
        if not mine:
            continue
        best_test = max(g.stats["test"].mean for g in mine)
        board = Leaderboard(dataset, criterion, best_test, tolerance, [], [])
        why: dict[int, str] = {}
        # time to target is shown under every criterion; only the time criterion ranks by it
        vals = [g.stats["best_val"].mean for g in mine if g.stats["best_val"].mean is not None]
        board.target = max(vals) - tolerance if vals else None
        reached = {}
        for g in mine:
            g.time_to_target, g.tta_seeds, g.tta_ci, g.tta_why = None, [], None, None
            if board.target is not None:
                g.time_to_target, reached[id(g)] = _time_to_target(g, board.target)
        if criterion == "time":
            for g in mine:
                if board.target is None:
                    why[id(g)] = "no validation metric"
                    continue
                if g.time_to_target.mean is None:
                    why[id(g)] = (
                        f"{reached[id(g)]} of {len(g.runs)} seeds reached val {board.target:.4f} (best val "
                        f"{g.stats['best_val'].text()})"
                    )
        else:
            cut = best_test - tolerance - 1e-12
            for g in mine:
                if board.accuracy_cut and g.stats["test"].mean < cut:
                    why[id(g)] = f"test {g.stats['test'].mean:.4f} below the cut {best_test - tolerance:.4f}"
                elif g.stats[metric].mean is None:
                    why[id(g)] = f"no {metric}"
        board.ranked = _sorted([g for g in mine if id(g) not in why], criterion)
        board.others = _sorted([g for g in mine if id(g) in why], criterion)
        board.reasons = [why[id(g)] for g in board.others]
        board.noise = noise_notes(board.ranked, criterion)
        board.rank_numbers = confidence.tied_ranks([seed_values(g, criterion) for g in board.ranked])
        boards.append(board)
    return boards
