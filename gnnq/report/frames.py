"""The report's tables as numeric DataFrames (CSV, W&B), and the text view Markdown shows of them.

A statistic over seeds is two numeric columns, ``<metric>_mean`` and ``<metric>_std``, in the
record's own units (seconds, bytes); only the text view scales, rounds and writes ``mean ± std``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from gnnq.report.aggregate import METRICS, Group, Leaderboard, Stat


@dataclass(frozen=True)
class Shown:
    """A column of the text view: ``column`` is a frame column, or a statistic shown as ``mean ± std``."""

    header: str
    column: str
    fmt: str | None = None  # None: the value as it is
    scale: float = 1.0


GROUPS_SHOWN = [
    Shown("dataset", "dataset"), Shown("config (overrides)", "config"), Shown("seeds", "seeds"), Shown("test", "test", ".4f"),
    Shown("best val", "best_val", ".4f"), Shown("epoch ms", "epoch_time_s", ".1f", 1e3),
    Shown("comm ms", "comm_time_s", ".1f", 1e3), Shown("halo MB/epoch", "comm_bytes_per_epoch", ".3f", 1e-6),
]  # fmt: skip
LEADERBOARD_SHOWN = [
    Shown("rank", "rank"), Shown("config (overrides)", "config"), Shown("seeds", "runs"), Shown("test", "test", ".4f"),
    Shown("epochs/s", "epochs_per_s", ".2f"), Shown("epoch ms", "epoch_time_s", ".1f", 1e3),
    Shown("halo MB/epoch", "comm_bytes_per_epoch", ".3f", 1e-6), Shown("time to target s", "time_to_target_s", ".1f"),
]  # fmt: skip


def stat_columns(name: str, stat: Stat | None) -> dict:
    return {f"{name}_mean": None if stat is None else stat.mean, f"{name}_std": None if stat is None else stat.std}


def groups_frame(groups: list[Group]) -> pd.DataFrame:
    """One row per configuration: dataset, config, seeds, runs, and mean and std of every metric."""
    rows = [{"dataset": g.dataset, "config": g.config, "seeds": ",".join(map(str, g.seeds)), "runs": len(g.runs),
             **{k: v for m in METRICS for k, v in stat_columns(m, g.stats[m]).items()}} for g in groups]  # fmt: skip
    columns = ["dataset", "config", "seeds", "runs", *(f"{m}_{s}" for m in METRICS for s in ("mean", "std"))]
    return _numeric(pd.DataFrame(rows, columns=columns), columns[3:])


def leaderboard_frame(board: Leaderboard) -> pd.DataFrame:
    """The ranked configurations, then the others (rank empty); epochs_per_s is 1 / epoch_time_s_mean."""
    rows = []
    for rank, g in [(i + 1, g) for i, g in enumerate(board.ranked)] + [(None, g) for g in board.others]:
        et = g.stats["epoch_time_s"].mean
        rows.append({"rank": rank, "config": g.config, "runs": len(g.runs), **stat_columns("test", g.stats["test"]),
                     "epochs_per_s": 1.0 / et if et else None, **stat_columns("epoch_time_s", g.stats["epoch_time_s"]),
                     **stat_columns("comm_bytes_per_epoch", g.stats["comm_bytes_per_epoch"]),
                     **stat_columns("time_to_target_s", g.time_to_target)})  # fmt: skip
    columns = ["rank", "config", "runs", "test_mean", "test_std", "epochs_per_s", "epoch_time_s_mean", "epoch_time_s_std",
               "comm_bytes_per_epoch_mean", "comm_bytes_per_epoch_std",
               "time_to_target_s_mean", "time_to_target_s_std"]  # fmt: skip
    frame = _numeric(pd.DataFrame(rows, columns=columns), columns[2:])
    frame["rank"] = frame["rank"].astype("Int64")
    return frame


def _numeric(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    frame[columns] = frame[columns].apply(pd.to_numeric)  # None -> NaN: an empty cell in CSV
    return frame


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _text(value, fmt: str | None, scale: float) -> str:
    if _missing(value):
        return "-"
    return str(value) if fmt is None else format(value * scale, fmt)


def text_view(frame: pd.DataFrame, shown: list[Shown], pm: str = " ± ") -> tuple[list[str], list[list[str]]]:
    """Headers and text rows: values formatted, '-' where missing, statistics as ``mean ± std``."""
    rows = []
    for record in frame.to_dict("records"):
        line = []
        for s in shown:
            if s.column in record:
                line.append(_text(record[s.column], s.fmt, s.scale))
                continue
            mean, std = record[f"{s.column}_mean"], record[f"{s.column}_std"]
            text = _text(mean, s.fmt, s.scale)
            line.append(text if _missing(mean) or _missing(std) else text + pm + _text(std, s.fmt, s.scale))
        rows.append(line)
    return [s.header for s in shown], rows


def json_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with NaN and NA as None (JSON null), numbers as numbers: for W&B tables and JSON files."""
    return frame.astype(object).where(frame.notna(), None)
