"""gnnq-bench: real small runs side by side, interleaved and repeated; its table from their records.

Here: the in-process cases (no process started); the others are in `tests/e2e/test_bench_harness.py`.
"""

from __future__ import annotations

import pytest

from gnnq.bench.compare import speedup_bounds
from gnnq.bench.harness import parse_args, run_order


def test_speedup_bounds_by_hand():
    """T = 10 s: 6 s halo (M), 1 s all-reduce, 3 s compute; the method sends a quarter of the bytes, codec 0.5 s."""
    base = {0: {"epoch_time_s": 10.0, "comm_time_s": 7.0, "summary": {"halo_comm_time_s": 6.0}}}
    mine = {0: {"epoch_time_s": 6.0, "comm_time_s": 2.0, "summary": {"codec_time_s": 0.5}}}
    no_overlap, overlap = speedup_bounds(base, mine, 0.25)
    assert no_overlap == pytest.approx(10.0 / (3.0 + 1.0 + 0.5 + 1.5))  # the all-reduce is not shrunk by r
    assert overlap == pytest.approx(10.0 / 4.5)  # max(compute + all-reduce + codec, r·M)
    assert speedup_bounds(base, mine, None) == (None, None) and speedup_bounds({}, mine, 0.25) == (None, None)


def test_overrides_may_follow_the_options():
    args = parse_args(
        ["adaqp_emulated", "experiment=adaqp_vanilla,adaqp", "--repeats", "1", "trainer.epochs=20", "--out", "x"]
    )
    assert args.overrides == ["experiment=adaqp_vanilla,adaqp", "trainer.epochs=20"] and args.repeats == 1


def test_run_order_interleaves_and_rotates():
    order = run_order(3, 3)
    assert order == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (1, 0), (2, 2), (2, 0), (2, 1)]
    assert all(sorted(i for r, i in order if r == rep) == [0, 1, 2] for rep in range(3))
