"""The epoch driver: one row schema, best validation, cross-rank rows and resume for every trainer.

Here: the in-process cases (no process started); the others are in `tests/integration/test_driver.py`.
"""

from __future__ import annotations

from gnnq.train.driver import update_best


def test_update_best_needs_a_strictly_higher_val():
    best = {"val": None, "test": None, "epoch": None}
    for epoch, val in enumerate([None, 0.5, 0.7, 0.7, None, 0.6], start=1):
        best = update_best(best, {"epoch": epoch, "val": val, "test": epoch / 10})
    assert best == {"val": 0.7, "test": 0.3, "epoch": 3}
