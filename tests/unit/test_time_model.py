"""AdaQP time model: the constrained linear fit, and profiles of all channels at once on real gloo groups.

Here: the in-process cases (no process started); the others are in `tests/integration/test_time_model.py`.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnnq.adaptive.time_model import (
    MIN_PROFILE_BYTES,
    LinearFit,
    TimeModel,
    fit_linear,
    fit_time_model,
    profile_sizes,
    sent_sizes,
)
from gnnq.comm.accounting import OVERHEAD
from gnnq.comm.channel_profile import profile_channels
from gnnq.comm.communicator import Communicator

KIB, MIB = 1024, 1024 * 1024
SIZES = [8 * KIB, 64 * KIB, 1 * MIB, 8 * MIB]


def _line(a: float, c: float, sizes=SIZES) -> list[tuple[int, float]]:
    return [(n, a * n + c) for n in sizes]


def test_fit_recovers_exact_line():
    fit = fit_linear(_line(2e-9, 3e-4))
    assert fit.a == pytest.approx(2e-9, rel=1e-9)
    assert fit.c == pytest.approx(3e-4, rel=1e-9)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.samples == len(SIZES)
    assert fit.predict(10 * MIB) == pytest.approx(2e-9 * 10 * MIB + 3e-4)


def test_fit_recovers_noisy_line():
    rng = np.random.default_rng(0)
    sizes = np.repeat(np.linspace(1 * MIB, 20 * MIB, 8), 10).astype(int)
    times = (1e-9 * sizes + 5e-4) * rng.normal(1.0, 0.05, sizes.size)
    fit = fit_linear(list(zip(sizes.tolist(), times.tolist(), strict=True)))
    assert fit.a == pytest.approx(1e-9, rel=0.05)
    assert fit.c == pytest.approx(5e-4, abs=5e-4)
    assert 0.9 < fit.r2 < 1.0


def test_negative_intercept_is_clamped_through_origin():
    fit = fit_linear(_line(1e-9, -1e-4))
    assert fit.c == 0.0
    assert fit.a > 0
    assert fit.r2 < 1.0


def test_negative_slope_keeps_time_proportional_to_bytes():
    samples = [(1 * KIB, 3e-3), (1 * MIB, 2e-3), (2 * MIB, 1e-3)]
    fit = fit_linear(samples)
    x, y = np.array([s[0] for s in samples], float), np.array([s[1] for s in samples])
    assert fit.c == 0.0 and fit.a == pytest.approx(np.dot(x, y) / np.dot(x, x)) and fit.a > 0
    assert fit.r2 < 0  # worse than the mean: r2 is that of the returned (clamped) fit


def test_single_size_is_all_bandwidth():
    fit = fit_linear([(1 * MIB, 1e-3), (1 * MIB, 3e-3)])
    assert (fit.a, fit.c) == (pytest.approx(2e-3 / MIB), 0.0)
    assert fit.r2 == pytest.approx(0.0)  # the fit is the mean; nothing of the spread is explained
    assert fit_linear([(1 * MIB, 1e-3)] * 3).r2 == 1.0  # constant times, reproduced exactly


def test_no_positive_slope_is_constant():
    assert fit_linear([(0, 1e-3), (0, 3e-3)]) == LinearFit(
        a=0.0, c=pytest.approx(2e-3), r2=pytest.approx(0.0), samples=2
    )
    assert fit_linear([(1 * KIB, -1e-3), (2 * KIB, -2e-3)]) == LinearFit(
        a=0.0, c=0.0, r2=pytest.approx(1 - 5 / 0.5), samples=2
    )


def test_fit_needs_samples():
    with pytest.raises(ValueError):
        fit_linear([])


def test_profile_sizes():
    rounds = profile_sizes([0, 8 * MIB, 1000], steps=5)
    assert [r[1] for r in rounds] == [1 * MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB]
    floor = MIN_PROFILE_BYTES  # 1000 bytes is below it, so that channel is profiled from the floor
    assert [r[2] for r in rounds] == [floor // 8, floor // 4, floor // 2, floor, 2 * floor]
    assert all(r[0] == 0 for r in rounds)
    assert profile_sizes([4 * MIB], steps=1) == [[8 * MIB]]
    with pytest.raises(ValueError):
        profile_sizes([1], steps=0)


def test_sent_sizes_span_the_lowest_to_the_highest_width():
    """AdaQP's range: evenly spaced from low/2 to high + low/2; no floor; a channel that sends nothing stays 0."""
    rounds = sent_sizes([0, 8000, 1200], [0, 2000, 300], steps=5)
    assert [r[1] for r in rounds] == [1000, 3000, 5000, 7000, 9000]
    assert [r[2] for r in rounds] == [150, 450, 750, 1050, 1350]
    assert all(r[0] == 0 for r in rounds)
    with pytest.raises(ValueError, match="one low and one high size per peer"):
        sent_sizes([1, 2], [1])


def test_time_model_record_and_lookup():
    model = TimeModel({(1, 0): LinearFit(1e-9, 1e-4, 0.99, 5), (0, 1): LinearFit(2e-9, 0.0, 0.9, 5)})
    record = json.loads(json.dumps(model.to_record()))
    assert [(r["src"], r["dst"]) for r in record] == [(0, 1), (1, 0)]
    assert record[0] == {"src": 0, "dst": 1, "a_s_per_byte": 2e-9, "c_s": 0.0, "r2": 0.9, "samples": 5}
    assert model.channel(1, 0).a == 1e-9
    with pytest.raises(KeyError, match="0->2"):
        model.channel(0, 2)


def test_one_rank_has_no_channels():
    comm = Communicator()
    assert profile_channels(comm, [[1 * MIB]], repeats=2) == {}
    assert fit_time_model(comm, [1 * MIB]).fits == {}
    assert comm.stats.total_bytes(OVERHEAD) == 0
