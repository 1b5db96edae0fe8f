"""The report's tables as numeric DataFrames (CSV, JSON, W&B), and the text views Markdown and LaTeX show of them.

A statistic over seeds is two numeric columns, ``<metric>_mean`` and ``<metric>_std``, in the
record's own units (seconds, bytes); only the text views scale, round and write ``mean ± std``.
Column names mean one thing everywhere: ``seeds`` is the list of seeds, ``runs`` their number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from gnnq.report import fields, latex
from gnnq.report.aggregate import METRICS, Group, Leaderboard, Stat
from gnnq.report.baseline import baseline_of, comparison


@dataclass(frozen=True)
class Shown:
    """A column of the text view: ``column`` is a frame column, or a statistic shown as ``mean ± std``."""

    header: str
    column: str
    fmt: str | None = None  # None: the value as it is
    scale: float = 1.0
    best: str | None = None  # "max" or "min": which value LaTeX sets in bold
    mark: str | None = None  # a boolean frame column: '*' after the value where it is False
    interval: str | None = None  # <interval>_low/_high frame columns: ' [low, high]' after the value
    fallback: str | None = None  # a text frame column shown instead of '-' where the value is missing


THROUGHPUT_NOTE = (
    "* epochs/s as 1 / median epoch time: these records have no wall-clock throughput (overheads not counted)."
)
# Against the baseline (gnnq.report.baseline): shown by default, no table spec needed.
COMPARISON_SHOWN = [
    Shown("speedup (epochs/s)", "speedup", ".2f"),
    Shown("TTA speedup", "tta_speedup", ".2f"),
    Shown("halo vs base", "halo_vs_base", ".3f"),
    Shown("bytes vs base", "bytes_vs_base", ".3f"),
]
# Every byte a run moves besides the halo messages (gnnq.report.fields.TRAFFIC_KINDS).
TRAFFIC_SHOWN = [
    Shown("grad MB/epoch", "grad_sync_bytes_per_epoch", ".3f", 1e-6),
    Shown("eval MB/epoch", "eval_bytes_per_epoch", ".3f", 1e-6),
    Shown("setup+profiling MB", "once_bytes", ".3f", 1e-6),
    Shown("all MB/epoch", "all_bytes_per_epoch", ".3f", 1e-6),
]
GROUPS_SHOWN = [
    Shown("dataset", "dataset"),
    Shown("method", "method"),
    Shown("config (overrides)", "config"),
    Shown("seeds", "seeds"),
    Shown("test", "test", ".4f", best="max"),
    Shown("best val", "best_val", ".4f", best="max"),
    Shown("epochs/s", "throughput", ".2f", best="max", mark="throughput_measured"),
    Shown("epoch ms", "epoch_time_s", ".1f", 1e3, best="min"),
    Shown("overhead s", "overhead_time_s", ".2f", best="min"),
    Shown("comm ms", "comm_time_s", ".1f", 1e3, best="min"),
    Shown("halo MB/epoch", "comm_bytes_per_epoch", ".3f", 1e-6, best="min"),
    Shown("grad MB/epoch", "grad_sync_bytes_per_epoch", ".3f", 1e-6, best="min"),
    Shown("wire MB/epoch", "wire_bytes_per_epoch", ".3f", 1e-6, best="min"),
    *TRAFFIC_SHOWN,
    Shown("ranks", "ranks"),
    Shown("hosts", "hosts"),
]
LEADERBOARD_SHOWN = [
    Shown("rank", "rank"),
    Shown("method", "method"),
    Shown("test", "test", ".4f", best="max"),
    Shown("val", "best_val", ".4f", best="max"),
    Shown("#params", "num_params", ",.0f"),
    Shown("epochs/s", "epochs_per_s", ".2f", best="max", mark="throughput_measured"),
    Shown("epoch ms", "epoch_time_s", ".1f", 1e3, best="min"),
    Shown("overhead s", "overhead_time_s", ".2f", best="min"),
    Shown("halo MB/epoch", "comm_bytes_per_epoch", ".3f", 1e-6, best="min"),
    Shown("wire MB/epoch", "wire_bytes_per_epoch", ".3f", 1e-6, best="min"),
    Shown("time to target s [95% CI]", "time_to_target_s", ".1f", best="min", interval="tta_ci", fallback="tta_why"),
    *COMPARISON_SHOWN,
    *TRAFFIC_SHOWN,
    Shown("runs", "runs"),
    Shown("ranks", "ranks"),
    Shown("hosts", "hosts"),
    Shown("hardware", "hardware"),
    Shown("commit", "commit"),
    Shown("torch", "torch"),
    Shown("date", "date"),
    Shown("command", "command"),
]
# Too wide for a page (LaTeX): left out of the LaTeX leaderboard.
WIDE_COLUMNS = ("command", "why_unranked", "commit", "torch")
UNRANKED_SHOWN = Shown("not ranked because", "why_unranked")


def stat_columns(name: str, stat: Stat | None) -> dict:
    return {f"{name}_mean": None if stat is None else stat.mean, f"{name}_std": None if stat is None else stat.std}


def _about(g: Group) -> dict:
    """What names a configuration and where it ran: method, config, seeds, runs, hardware, date, command."""
    return {
        "method": g.label or g.config,
        "config": g.config,
        "runs": len(g.runs),
        "seeds": ",".join(map(str, g.seeds)),
        "throughput_measured": g.throughput_measured,
        "ranks": g.ranks,
        "hosts": g.hosts,
        "hardware": g.hardware,
        "commit": g.commit,
        "torch": g.torch,
        "date": g.date,
        "command": g.command,
    }


def groups_frame(groups: list[Group]) -> pd.DataFrame:
    """One row per configuration: who it is (``_about``), and mean and std of every metric."""
    rows = [
        {"dataset": g.dataset, **_about(g), **{k: v for m in METRICS for k, v in stat_columns(m, g.stats[m]).items()}}
        for g in groups
    ]
    columns = [
        "dataset",
        "method",
        "config",
        "seeds",
        "runs",
        *(f"{m}_{s}" for m in METRICS for s in ("mean", "std")),
        "throughput_measured",
        "ranks",
        "hosts",
        "hardware",
        "commit",
        "torch",
        "date",
        "command",
    ]
    return _numeric(pd.DataFrame(rows, columns=columns), columns[4:-8])


def leaderboard_frame(board: Leaderboard) -> pd.DataFrame:
    """The ranked configurations, then the others (rank empty, with why); epochs_per_s is the wall-clock throughput."""
    rows = []
    why = [None] * len(board.ranked) + list(board.reasons)
    numbers = board.rank_numbers or list(range(1, len(board.ranked) + 1))
    everyone = board.ranked + board.others
    for (rank, g), reason in zip(list(zip(numbers, board.ranked)) + [(None, g) for g in board.others], why):
        s = g.stats
        rows.append(
            {
                "rank": rank,
                **_about(g),
                **stat_columns("test", s["test"]),
                **stat_columns("best_val", s["best_val"]),
                "num_params": s["num_params"].mean,
                "epochs_per_s": s["throughput"].mean,
                "epochs_per_s_std": s["throughput"].std,
                **stat_columns("epoch_time_s", s["epoch_time_s"]),
                **stat_columns("overhead_time_s", s["overhead_time_s"]),
                **stat_columns("comm_bytes_per_epoch", s["comm_bytes_per_epoch"]),
                **stat_columns("wire_bytes_per_epoch", s["wire_bytes_per_epoch"]),
                **stat_columns("time_to_target_s", g.time_to_target),
                "why_unranked": reason,
                **extra_columns(g, everyone),
            }
        )
    columns = [
        "rank",
        "method",
        "config",
        "runs",
        "seeds",
        "test_mean",
        "test_std",
        "best_val_mean",
        "best_val_std",
        "num_params",
        "epochs_per_s",
        "epochs_per_s_std",
        "epoch_time_s_mean",
        "epoch_time_s_std",
        "overhead_time_s_mean",
        "overhead_time_s_std",
        "comm_bytes_per_epoch_mean",
        "comm_bytes_per_epoch_std",
        "wire_bytes_per_epoch_mean",
        "wire_bytes_per_epoch_std",
        "time_to_target_s_mean",
        "time_to_target_s_std",
        "throughput_measured",
        "ranks",
        "hosts",
        "hardware",
        "commit",
        "torch",
        "date",
        "command",
        "why_unranked",
    ]
    columns += EXTRA_COLUMNS
    frame = _numeric(pd.DataFrame(rows, columns=columns), ["runs", *columns[5:22], *EXTRA_NUMERIC])
    frame["rank"] = frame["rank"].astype("Int64")
    return frame


# Leaderboard columns beyond the record's metrics: the time to target's interval and reason, the comparison with
# the baseline, and every kind of traffic.
EXTRA_NUMERIC = [
    "tta_ci_low",
    "tta_ci_high",
    "speedup",
    "tta_speedup",
    "halo_vs_base",
    "bytes_vs_base",
    *(f"{m}_{s}" for m in fields.TRAFFIC_METRICS for s in ("mean", "std")),
]
EXTRA_COLUMNS = [*EXTRA_NUMERIC, "tta_why", "baseline"]


def extra_columns(g: Group, groups: list[Group]) -> dict:
    ci = g.tta_ci or (None, None)
    return {
        "tta_ci_low": ci[0],
        "tta_ci_high": ci[1],
        "tta_why": g.tta_why,
        **comparison(g, baseline_of(g, groups)),
        **{k: v for m in fields.TRAFFIC_METRICS for k, v in stat_columns(m, g.stats[m]).items()},
    }


def leaderboard_shown(frame: pd.DataFrame) -> list[Shown]:
    """The leaderboard's text columns; 'not ranked because' where some configuration is not ranked."""
    return LEADERBOARD_SHOWN + ([UNRANKED_SHOWN] if frame["why_unranked"].notna().any() else [])


def _numeric(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    frame[columns] = frame[columns].apply(pd.to_numeric)  # None -> NaN: an empty cell in CSV
    return frame


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _text(value, fmt: str | None, scale: float) -> str:
    if _missing(value):
        return "-"
    return str(value) if fmt is None else format(value * scale, fmt)


def _value(record: dict, s: Shown):
    return record[s.column] if s.column in record else record[f"{s.column}_mean"]


def text_view(frame: pd.DataFrame, shown: list[Shown], pm: str = " ± ") -> tuple[list[str], list[list[str]]]:
    """Headers and text rows: values formatted, '-' where missing, statistics as ``mean ± std``."""
    rows = []
    for record in frame.to_dict("records"):
        line = []
        for s in shown:
            value, std = _value(record, s), record.get(f"{s.column}_std")
            text = _text(value, s.fmt, s.scale)
            if not _missing(value) and not _missing(std):
                text += pm + _text(std, s.fmt, s.scale)
            if s.interval and not _missing(value) and not _missing(record.get(f"{s.interval}_low")):
                low, high = (_text(record[f"{s.interval}_{e}"], s.fmt, s.scale) for e in ("low", "high"))
                text += f" [{low}, {high}]"
            if s.fallback and _missing(value) and not _missing(record.get(s.fallback)):
                text = str(record[s.fallback])
            if s.mark and not _missing(record.get(s.mark)) and not bool(record[s.mark]) and text != "-":
                text += "*"
            line.append(text)
        rows.append(line)
    return [s.header for s in shown], rows


def notes(frame: pd.DataFrame) -> list[str]:
    """Footnotes the text view's marks need."""
    measured = frame["throughput_measured"] if "throughput_measured" in frame else pd.Series(dtype=bool)
    return [THROUGHPUT_NOTE] if (~measured.astype(bool)).any() else []


def latex_view(frame: pd.DataFrame, shown: list[Shown], caption: str) -> str:
    """The text view as a booktabs LaTeX table, each column's best value in bold."""
    headers, rows = text_view(frame, shown)
    records = frame.to_dict("records")
    bold = []
    for s in shown:
        values = [None if s.best is None or _missing(v := _value(r, s)) else float(v) for r in records]
        bold.append(latex.best_rows(values, s.best))
    return latex.render(headers, rows, caption, bold)


def json_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with NaN and NA as None (JSON null), numbers as numbers: for W&B tables and JSON files."""
    return frame.astype(object).where(frame.notna(), None)
