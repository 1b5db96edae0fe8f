"""AdaQP time model: the constrained linear fit, and profiles of all channels at once on real gloo groups."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from gnnq.adaptive.time_model import (
    MIN_PROFILE_BYTES,
    LinearFit,
    TimeModel,
    fit_linear,
    fit_time_model,
    fixed_link_model,
    profile_sizes,
    sent_sizes,
)
from gnnq.comm.accounting import OVERHEAD
from gnnq.comm.channel_profile import PROFILE_DIRECTION, profile_channels
from gnnq.comm.communicator import Communicator
from tests.helpers import run_distributed

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
    assert fit_linear([(0, 1e-3), (0, 3e-3)]) == LinearFit(a=0.0, c=pytest.approx(2e-3), r2=pytest.approx(0.0), samples=2)
    assert fit_linear([(1 * KIB, -1e-3), (2 * KIB, -2e-3)]) == LinearFit(a=0.0, c=0.0, r2=pytest.approx(1 - 5 / 0.5), samples=2)


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


# --- real gloo groups; functions passed to run_distributed are module-level ---

# Bytes rank src sends rank dst in one real exchange; 0 -> 2 carries nothing.
MESSAGE_BYTES = [[0, 2 * MIB, 0], [1 * MIB, 0, 3 * MIB], [500 * KIB, 4 * MIB, 0]]
SMALL, LARGE = 64 * KIB, 64 * MIB


def _low_bytes(rank: int, world_size: int, sent: bool) -> list[int] | None:
    """The messages at the lowest width (a quarter of the highest, as 2 of 8 bits) when profiling the sent range."""
    return [n // 4 for n in MESSAGE_BYTES[rank][:world_size]] if sent else None


def _fit_and_profile(world_size: int, repeats: int, steps: int, sent: bool = False):
    comm = Communicator()
    low = _low_bytes(comm.rank, world_size, sent)
    model = fit_time_model(comm, MESSAGE_BYTES[comm.rank][:world_size], repeats=repeats, steps=steps, low_bytes=low)
    fit_bytes = comm.stats.bytes[(OVERHEAD, -1, PROFILE_DIRECTION)]
    comm.stats.reset()
    rounds = [[0 if q == comm.rank else n for q in range(world_size)] for n in (SMALL, LARGE)]
    samples = profile_channels(comm, rounds, repeats=repeats)
    return model, fit_bytes, samples, comm.stats.bytes[(OVERHEAD, -1, PROFILE_DIRECTION)]


def _expected_fit_bytes(rank: int, world_size: int, repeats: int, steps: int, sent: bool) -> int:
    own = [0 if q == rank else n for q, n in enumerate(MESSAGE_BYTES[rank][:world_size])]
    if sent:
        low = [0 if q == rank else n for q, n in enumerate(_low_bytes(rank, world_size, sent))]
        return (repeats + 1) * sum(map(sum, sent_sizes(own, low, steps)))
    return (repeats + 1) * sum(map(sum, profile_sizes(own, steps)))  # + 1: the warm-up pass


@pytest.mark.parametrize(("world_size", "sent"), [(2, False), (3, False), (3, True)])
def test_profile_all_channels_at_once(world_size, sent):
    repeats, steps = 3, 4
    results = run_distributed(world_size, _fit_and_profile, world_size, repeats, steps, sent)
    models = [r[0] for r in results]
    expected_channels = {(s, d) for s in range(world_size) for d in range(world_size) if s != d and MESSAGE_BYTES[s][d] > 0}
    assert set(models[0].fits) == expected_channels
    assert all(m == models[0] for m in models)
    for fit in models[0].fits.values():
        assert fit.a >= 0 and fit.c >= 0 and fit.samples == steps  # one median per size
        assert fit.predict(1 * MIB) > 0
    for rank, (_, fit_bytes, samples, profile_bytes) in enumerate(results):
        assert fit_bytes == _expected_fit_bytes(rank, world_size, repeats, steps, sent)
        assert profile_bytes == (repeats + 1) * (world_size - 1) * (SMALL + LARGE)
        assert set(samples) == {(p, rank) for p in range(world_size) if p != rank}
        for channel_samples in samples.values():
            assert sorted(n for n, _ in channel_samples) == [SMALL] * repeats + [LARGE] * repeats
            assert all(t > 0 for _, t in channel_samples)
            small = statistics.median(t for n, t in channel_samples if n == SMALL)
            large = statistics.median(t for n, t in channel_samples if n == LARGE)
            assert large > 3 * small, (small, large)


def _fixed_links(world_size: int):
    comm = Communicator()
    return fixed_link_model(comm, MESSAGE_BYTES[comm.rank][:world_size], gbit_per_s=2.0, latency_s=1e-4)


def test_fixed_link_model_covers_every_channel_and_times_nothing():
    """quantizer.time_model=fixed: the same link on every channel that carries bytes, on every rank."""
    models = run_distributed(3, _fixed_links, 3)
    expected = {(s, d) for s in range(3) for d in range(3) if s != d and MESSAGE_BYTES[s][d] > 0}
    assert all(m == models[0] for m in models)
    assert set(models[0].fits) == expected
    fit = models[0].channel(1, 2)
    assert fit.samples == 0
    assert fit.predict(250_000_000) == pytest.approx(1.0 + 1e-4)  # 2 Gbit/s: 250 MB in one second
