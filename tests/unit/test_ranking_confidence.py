"""Ranking by time to accuracy with confidence (gnnq.report.confidence): bootstrap intervals over seeds, ties where
the intervals overlap or Welch's test calls the lead noise, and a method that never reaches the target, on synthetic
records whose times are known."""

from __future__ import annotations

import pytest

from gnnq.report import confidence
from gnnq.report.aggregate import group_runs, leaderboards
from gnnq.report.summary import find_records
from tests.report_records import write_run


def test_bootstrap_interval_covers_the_mean_and_is_reproducible():
    values = [10.0, 11.0, 12.0, 13.0]
    lo, hi = confidence.bootstrap_ci(values)
    assert lo < 11.5 < hi and 10.0 <= lo and hi <= 13.0
    assert confidence.bootstrap_ci(values) == (lo, hi)  # a fixed seed: the same report twice
    assert confidence.bootstrap_ci([10.0]) is None and confidence.bootstrap_ci([None, 3.0]) is None


def test_tied_ranks_share_a_rank_and_a_clear_gap_starts_a_new_one():
    a, b, c = [10.0, 10.5, 11.0], [10.2, 10.8, 11.1], [20.0, 21.0, 22.0]
    assert confidence.separation(a, c).separated and confidence.separation(a, c).p < 0.05
    tie = confidence.separation(a, b)
    assert not tie.separated and tie.overlap and tie.p >= 0.05
    assert confidence.tied_ranks([a, b, c]) == [1, 1, 3]
    assert confidence.tied_ranks([a, c]) == [1, 2]
    # one seed: nothing estimated, the order stands (the leaderboard's noise note says so)
    assert confidence.tied_ranks([[10.0], [10.1]]) == [1, 2]


def _sweep(tmp_path):
    """Cora at 2 ranks: Vanilla and PipeGCN tie, SANCUS is clearly slower, BNS-GCN never reaches the target."""
    curves = {  # method -> per seed (epoch seconds, validation curve)
        ("parallel=sync",): [(1.0, [0.5, 0.7, 0.8, 0.8]), (1.05, [0.5, 0.7, 0.8, 0.8]), (0.95, [0.5, 0.7, 0.8, 0.8])],
        ("parallel=stale",): [(1.0, [0.5, 0.7, 0.8, 0.8]), (0.98, [0.5, 0.7, 0.8, 0.8]), (1.04, [0.5, 0.7, 0.8, 0.8])],
        ("parallel=sancus",): [(2.0, [0.5, 0.7, 0.8, 0.8]), (2.1, [0.5, 0.7, 0.8, 0.8]), (2.2, [0.5, 0.7, 0.8, 0.8])],
        ("parallel=sampling",): [(0.5, [0.5, 0.6, 0.7, 0.75])] * 3,
    }
    for overrides, seeds in curves.items():
        for seed, (epoch_s, vals) in enumerate(seeds):
            write_run(tmp_path, ["dataset=cora", *overrides], seed, vals, epoch_s=epoch_s)
    records, _ = find_records([tmp_path])
    return group_runs(records)


def test_leaderboard_by_time_to_target_with_intervals_ties_and_a_method_that_never_reaches_it(tmp_path):
    groups = _sweep(tmp_path)
    (board,) = leaderboards(groups, "time", tolerance=0.0)
    assert board.target == pytest.approx(0.8)
    names = [g.config for g in board.ranked]
    assert names[2] == "dataset=cora parallel=sancus" and set(names[:2]) == {
        "dataset=cora",
        "dataset=cora parallel=stale",
    }
    assert board.rank_numbers == [1, 1, 3]  # Vanilla and PipeGCN tie; SANCUS is clearly third
    sancus = board.ranked[2]
    assert sancus.time_to_target.mean == pytest.approx(3 * 2.1)  # reached at epoch 3
    lo, hi = sancus.tta_ci
    assert 3 * 2.0 <= lo < 3 * 2.1 < hi <= 3 * 2.2
    (never,) = board.others
    assert never.overrides[-1] == "parallel=sampling" and never.time_to_target.mean is None
    assert never.tta_why == "3 of 3 seeds not reached in 4 epochs: best 0.7500, 0.7500, 0.7500 < 0.8000"


def test_the_leaderboard_text_shows_the_interval_the_tie_and_the_reason(tmp_path):
    from gnnq.report.frames import leaderboard_frame, leaderboard_shown, text_view

    (board,) = leaderboards(_sweep(tmp_path), "time", tolerance=0.0)
    frame = leaderboard_frame(board)
    headers, rows = text_view(frame, leaderboard_shown(frame))
    table = [dict(zip(headers, row)) for row in rows]
    assert [r["rank"] for r in table] == ["1", "1", "3", "-"]
    tta = table[2]["time to target s [95% CI]"]
    assert tta.startswith("6.3 ± 0.3 [") and tta.endswith("]")
    assert table[3]["time to target s [95% CI]"].startswith("3 of 3 seeds not reached in 4 epochs")
