"""PipeQS's rules (gnnq.parallel.pipeqs), each against the authors' code (PipeQS/helper/feature_buffer.py)."""

from __future__ import annotations

import pytest
import torch

from gnnq.parallel.pipeqs import WidthState, change, decide

TOP = 3  # bit_options [2, 4, 8, 32]


def test_change_is_half_one_minus_cosine():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert change(a, a) == pytest.approx(0.0, abs=1e-7)
    assert change(a, -a) == pytest.approx(1.0)
    assert change(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])) == pytest.approx(0.5)
    assert change(a, torch.zeros_like(a)) == pytest.approx(0.5)  # a zero copy (the code's first old gradients)


def test_a_large_change_steps_the_width_up_and_forbids_going_stale():
    s = WidthState()
    old, new = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])  # d = 0.5 > E
    assert [s.assign(old, new, 0.1, 10.0, TOP) for _ in range(5)] == [1, 2, 3, 3, 3]  # capped at the last option
    assert s.need_stale is False and s.q == 5


def test_a_small_change_keeps_the_width_and_allows_going_stale():
    s = WidthState(index=2, q=3, need_stale=False)
    x = torch.tensor([1.0, 2.0, 3.0])
    assert s.assign(x, x * 1.01, 0.1, 10.0, TOP) == 2
    assert s.need_stale is True and s.q == 3


def test_after_skips_a_large_change_falls_back_to_the_narrowest_width():
    s = WidthState(index=3, stale=4, q=1)
    assert s.assign(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), 0.1, 10.0, TOP) == 0
    assert (s.stale, s.q, s.need_stale) == (0, 4, False)


def test_no_copy_yet_keeps_the_width():
    s = WidthState(index=1)
    assert s.assign(None, torch.ones(3), 0.1, 10.0, TOP) == 1 and s.q == 0


def test_the_threshold_is_strict():
    s = WidthState()
    old, new = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])  # d = 0.5
    assert s.assign(old, new, 0.5, 10.0, TOP) == 0 and s.need_stale is True


@pytest.mark.parametrize(
    "arrived, need_stale, age, bound, expected",
    [
        (True, True, 5, 0, "assign"),  # arrived: the width rule runs, whatever the staleness
        (False, False, 0, 0, "wait"),  # rows changed a lot: wait for them
        (False, True, 0, 0, "skip"),
        (False, True, 10, 0, "skip"),  # no bound (the code): stale for ever
        (False, True, 1, 2, "skip"),  # younger than the bound: not refreshed yet
        (False, True, 2, 2, "wait"),  # at the bound: refreshed
    ],
)
def test_decision(arrived, need_stale, age, bound, expected):
    assert decide(arrived, need_stale, age, bound) == expected
