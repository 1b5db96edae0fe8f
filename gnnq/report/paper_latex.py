"""The leaderboard as LaTeX for a paper: a narrow table that fits a column (rank, method, test ± std, time to target
with its 95% bootstrap interval, speedup in time to target, bytes against the baseline) and a second table with the
rest; the hardware goes to the caption. A value is set in bold only where the report does not call its lead noise:
the column's best is separated (``gnnq.report.confidence.separation``) from every other row's value over seeds."""

from __future__ import annotations

import pandas as pd

from gnnq.report import confidence, fields, latex
from gnnq.report.aggregate import Group, Leaderboard
from gnnq.report.frames import LEADERBOARD_SHOWN, WIDE_COLUMNS, Shown, _missing, _value, text_view

NARROW = [
    Shown("rank", "rank"),
    Shown("method", "method"),
    Shown("test", "test", ".4f", best="max"),
    Shown("TTA s [95% CI]", "time_to_target_s", ".1f", best="min", interval="tta_ci", fallback="tta_short"),
    Shown("TTA speedup", "tta_speedup", ".2f"),
    Shown("bytes vs base", "bytes_vs_base", ".3f"),
]
# Frame column -> the record metric whose per-seed values decide whether its best is set in bold.
SEED_METRIC = {"epochs_per_s": "throughput"}
LEFT_OUT = {*WIDE_COLUMNS, "hardware", "command", "config"}  # the hardware goes to the caption


def _samples(g: Group, column: str) -> list | None:
    """The per-seed values behind a frame column (None: the column has none, e.g. a ratio)."""
    if column == "time_to_target_s":
        return list(g.tta_seeds)
    metric = SEED_METRIC.get(column, column)
    if metric not in fields.RECORD_METRICS + fields.DERIVED_METRICS:
        return None
    return [fields.metrics(rec)[metric] for _, rec in g.runs]


def separated_best(samples: list[list | None], how: str | None) -> set[int]:
    """The index of the best mean where it is separated from every other row's values (two seeds or more on each
    side, Welch's p < 0.05 and bootstrap intervals apart); else none: a lead within the noise is not bolded."""
    values = [confidence.finite(s or []) for s in samples]
    means = [sum(v) / len(v) if v else None for v in values]
    present = [i for i, m in enumerate(means) if m is not None]
    if how is None or len(present) < 2:
        return set()
    best = (max if how == "max" else min)(present, key=lambda i: means[i])
    for i in present:
        if i != best:
            sep = confidence.separation(samples[best], samples[i])
            if sep.p is None or not sep.separated:
                return set()
    return {best}


def _render(frame: pd.DataFrame, groups: list[Group], shown: list[Shown], caption: str) -> str:
    headers, rows = text_view(frame, shown)
    bold = [separated_best([_samples(g, s.column) for g in groups], s.best) if s.best else set() for s in shown]
    return latex.render(headers, rows, caption, bold)


def _hardware(frame: pd.DataFrame) -> str:
    found = [h for h in dict.fromkeys(frame["hardware"]) if not _missing(h)]
    return f" Hardware: {'; '.join(found)}." if found else ""


def narrow_latex(board: Leaderboard, frame: pd.DataFrame, caption: str) -> str:
    """The column-wide table: rank, method, test, time to target [CI], TTA speedup, bytes vs base."""
    narrow = frame.copy()
    narrow["tta_short"] = narrow["tta_why"].map(lambda why: None if _missing(why) else "not reached")
    note = (
        " Ties share a rank (overlapping 95% bootstrap intervals or Welch's p >= 0.05); bold: separated from every "
        "other row. TTA speedup and bytes (all traffic per epoch) against Vanilla."
    )
    return _render(narrow, board.ranked + board.others, NARROW, caption + "." + note + _hardware(frame))


def details_latex(board: Leaderboard, frame: pd.DataFrame, caption: str) -> str:
    """The rest of the leaderboard's columns (not those of the narrow table, nor commands, commits or hardware)."""
    narrow = {s.column for s in NARROW} - {"rank", "method"}
    shown = [
        s for s in LEADERBOARD_SHOWN if s.column not in narrow and s.column not in LEFT_OUT and _value_exists(frame, s)
    ]
    return _render(frame, board.ranked + board.others, shown, caption + " (details)." + _hardware(frame))


def _value_exists(frame: pd.DataFrame, s: Shown) -> bool:
    record = frame.iloc[0].to_dict() if len(frame) else {}
    try:
        _value(record, s)
    except KeyError:
        return False
    return True
