"""The epoch driver: one row schema, best validation, cross-rank rows and resume for every trainer.

Here: the in-process cases (no process started); the others are in `tests/integration/test_driver.py`.
"""

from __future__ import annotations

from omegaconf import OmegaConf

from gnnq.report.curves import time_to_target
from gnnq.train.driver import early_stop, update_best


def test_update_best_needs_a_strictly_higher_val():
    best = {"val": None, "test": None, "epoch": None}
    for epoch, val in enumerate([None, 0.5, 0.7, 0.7, None, 0.6], start=1):
        best = update_best(best, {"epoch": epoch, "val": val, "test": epoch / 10})
    assert best == {"val": 0.7, "test": 0.3, "epoch": 3}


def _rows(vals, seconds=1.0):
    return [
        {"epoch": e, "val": v, "epoch_time_s": seconds, "overhead_time_s": 0.25 if e == 1 else 0.0}
        for e, v in enumerate(vals, start=1)
    ]


def test_early_stop_at_the_target_uses_the_reports_rule_and_skips_unevaluated_rows():
    tcfg = OmegaConf.create({"stop_at_val": 0.7, "stop_after_s": None})
    rows = _rows([0.5, None, 0.7 - 1e-12, 0.8])
    stops = [early_stop(tcfg, rows[:n]) for n in range(1, 5)]
    assert (
        stops[:2] == [None, None] and stops[2]["epoch"] == 3 and "reached trainer.stop_at_val=0.7" in stops[2]["reason"]
    )
    # the epoch the run stops after is the one the report's time to target counts to
    elapsed = [sum(r["epoch_time_s"] + r["overhead_time_s"] for r in rows[:n]) for n in range(1, 5)]
    curve = [(t, r["val"]) for t, r in zip(elapsed, rows) if r["val"] is not None]
    assert time_to_target(curve, 0.7) == elapsed[2]


def test_early_stop_after_the_time_budget_counts_overheads_and_nothing_stops_without_a_rule():
    tcfg = OmegaConf.create({"stop_at_val": None, "stop_after_s": 2.25})
    rows = _rows([0.1, 0.2, 0.3])
    assert early_stop(tcfg, rows[:2]) is None  # 1.25 + 1.0 = 2.25 s: not past it
    stop = early_stop(tcfg, rows)
    assert stop["epoch"] == 3 and stop["reason"] == "training time 3.25 s passed trainer.stop_after_s=2.25"
    assert early_stop(OmegaConf.create({"stop_at_val": None, "stop_after_s": None}), rows) is None
    assert early_stop(OmegaConf.create({}), rows) is None  # an older run's config has neither key
