"""parallel=sampling (BNS-GCN) on real gloo groups: p = 1 is sync, bytes scale with p, the aggregate is unbiased.

Here: the in-process cases (no process started); the others are in `tests/integration/test_sampling.py`.
"""

from __future__ import annotations

import pytest
import torch

from gnnq.parallel.sampling import sampled_positions


def test_sample_sizes_and_shared_draws():
    assert sampled_positions(0, 0.3, 0, 1, 0, 1).numel() == 0
    assert sampled_positions(3, 0.01, 0, 1, 0, 1).numel() == 1  # every channel keeps at least one row
    assert torch.equal(sampled_positions(7, 1.0, 0, 1, 0, 1), torch.arange(7))
    a = sampled_positions(1000, 0.1, 5, 3, 0, 1)
    assert a.numel() == 100 and torch.equal(a, a.sort().values) and a.unique().numel() == 100
    assert torch.equal(a, sampled_positions(1000, 0.1, 5, 3, 0, 1))  # deterministic (owner/receiver agreement: below)
    assert not torch.equal(a, sampled_positions(1000, 0.1, 5, 4, 0, 1))  # a new subset every epoch


@pytest.mark.parametrize(
    ("count", "rate", "at_least_one", "floor"),
    [(3, 0.01, 1, 0), (9, 0.1, 1, 0), (27, 0.1, 3, 2), (29, 0.1, 3, 2), (100, 0.1, 10, 10)],
)
def test_sample_size_rules(count, rate, at_least_one, floor):
    """floor: int(rate * c) as BNS-GCN's code (a small channel sends nothing); at_least_one: max(1, round(rate * c))."""
    assert sampled_positions(count, rate, 0, 1, 0, 1, "at_least_one").numel() == at_least_one
    assert sampled_positions(count, rate, 0, 1, 0, 1, "floor").numel() == floor
