"""AdaQP time model: the constrained linear fit, and profiles of all channels at once on real gloo groups.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_time_model.py`.
"""

from __future__ import annotations

import statistics

import pytest

from gnnq.adaptive.time_model import (
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
    expected_channels = {
        (s, d) for s in range(world_size) for d in range(world_size) if s != d and MESSAGE_BYTES[s][d] > 0
    }
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
