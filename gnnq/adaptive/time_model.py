"""AdaQP's per-channel time model t = a * bytes + c, fitted from a profile of the real exchange.

AdaQP's public code profiled one rank pair at a time, but training posts all sends at once;
here every channel is profiled while all of them are active (gnnq.comm.channel_profile). The
sizes are AdaQP's (``sent_sizes``: the range of the messages adaptive widths produce, from the
lowest to the highest width) unless ``quantizer.profile_range=fp32`` asks for gnnq's earlier range
around the fp32 message (``profile_sizes``, at least 1 MiB), where low-width sizes are extrapolated, or
``published`` for AdaQP's code's own 200 sizes (``published_sizes``). The
profile uses point-to-point sends (to time each channel apart), while training moves the same
bytes with one all_to_all; the backends implement both over the same links, but not the same code.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gnnq.comm.accounting import OVERHEAD
from gnnq.comm.channel_profile import Channel, profile_channels
from gnnq.comm.communicator import Communicator

# Messages below this size are latency-bound; the profile scales this floor instead, so small
# channels still get several distinct sizes and a slope measured where transfer time stands out
# from scheduling noise (at 64 KiB, fits on a loaded 2-core machine were mostly noise).
MIN_PROFILE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class LinearFit:
    """t = a * bytes + c seconds, with a >= 0 (s/byte) and c >= 0 (s); r2 of the fit; samples fitted."""

    a: float
    c: float
    r2: float
    samples: int

    def predict(self, nbytes: float | np.ndarray) -> float | np.ndarray:
        """Seconds to send ``nbytes`` (a number or an array); a channel that carries nothing is not sent at all."""
        return self.a * nbytes + self.c


def fit_linear(samples: Sequence[tuple[int, float]]) -> LinearFit:
    """Least-squares fit of seconds = a * bytes + c with a >= 0 and c >= 0 ((bytes, seconds) samples).

    The ordinary fit when both are non-negative; otherwise the least-squares fit through the
    origin (c = 0), which also covers a single distinct size (a and c cannot be told apart).
    A negative slope means noise hid the per-byte cost, and the non-negative optimum a = 0
    would make the model blind to message size, the one thing the bit-width solver asks of
    it; so time stays proportional to bytes. Only when that slope is not positive either
    (all sizes 0, or no positive times) is the fit the constant c = max(mean, 0), a = 0.

    r2 = 1 - SS_res / SS_tot of the returned fit, so a clamp can make it negative. When the
    times are all equal (SS_tot = 0), r2 is 1.0 if the fit reproduces them exactly, else 0.0.
    """
    if not samples:
        raise ValueError("fit_linear needs at least one (bytes, seconds) sample")
    x = np.array([s[0] for s in samples], dtype=np.float64)
    y = np.array([s[1] for s in samples], dtype=np.float64)
    a, c = _nonnegative_fit(x, y)
    return LinearFit(a=a, c=c, r2=_r2(y, a * x + c), samples=len(samples))


def _nonnegative_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if np.ptp(x) > 0:
        xc = x - x.mean()
        a = float(np.dot(xc, y - y.mean()) / np.dot(xc, xc))
        c = float(y.mean() - a * x.mean())
        if a >= 0 and c >= 0:
            return a, c
    sxx = float(np.dot(x, x))
    a = float(np.dot(x, y)) / sxx if sxx > 0 else 0.0
    return (a, 0.0) if a > 0 else (0.0, max(float(y.mean()), 0.0))


def _r2(y: np.ndarray, predicted: np.ndarray) -> float:
    ss_res = float(np.sum((y - predicted) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0:
        return 1.0 if ss_res == 0 else 0.0
    return 1.0 - ss_res / ss_tot


@dataclass
class TimeModel:
    """One LinearFit per directed channel (src, dst) that carries bytes."""

    fits: dict[Channel, LinearFit]

    def channel(self, src: int, dst: int) -> LinearFit:
        try:
            return self.fits[(src, dst)]
        except KeyError:
            raise KeyError(f"no time model for channel {src}->{dst} (it carried no bytes when profiled)") from None

    @classmethod
    def from_record(cls, rows: list[dict]) -> "TimeModel":
        """The inverse of ``to_record``."""
        return cls({(r["src"], r["dst"]): LinearFit(r["a_s_per_byte"], r["c_s"], r["r2"], r["samples"]) for r in rows})

    def to_record(self) -> list[dict]:
        """JSON-able rows, one per channel, in (src, dst) order."""
        return [
            {"src": s, "dst": d, "a_s_per_byte": f.a, "c_s": f.c, "r2": f.r2, "samples": f.samples}
            for (s, d), f in sorted(self.fits.items())
        ]


def profile_sizes(message_bytes: list[int], steps: int = 5, floor: int = MIN_PROFILE_BYTES) -> list[list[int]]:
    """Profile rounds around one real exchange: ``steps`` rounds at 2**(i + 2 - steps) of each message.

    With steps=5 the fractions are 1/8, 1/4, 1/2, 1, 2 (covering 8-bit to 2x full precision).
    A message smaller than ``floor`` is scaled from ``floor`` instead; a 0 stays 0 (not sent).
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    bases = [max(int(b), floor) if b > 0 else 0 for b in message_bytes]
    return [[round(b * 2.0 ** (i + 2 - steps)) for b in bases] for i in range(steps)]


def sent_sizes(high_bytes: list[int], low_bytes: list[int], steps: int = 5) -> list[list[int]]:
    """AdaQP's profile range: ``steps`` sizes evenly spaced from low - low/2 to high + low/2 of each message.

    ``high_bytes[q]`` / ``low_bytes[q]``: the message to rank q with every row at the highest /
    lowest width (so the sizes adaptive widths produce lie inside); a 0 stays 0 (not sent).
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    if len(high_bytes) != len(low_bytes):
        raise ValueError(
            f"sent_sizes needs one low and one high size per peer, got {len(low_bytes)} and {len(high_bytes)}"
        )
    spans = [(lo - lo / 2, hi + lo / 2) if hi > 0 else (0, 0) for hi, lo in zip(high_bytes, low_bytes)]
    return [
        [round(float(v)) for v in column] for column in np.linspace([s[0] for s in spans], [s[1] for s in spans], steps)
    ]


# AdaQP's code profiles this many message sizes (profile_data_length in all four of its dataset configs).
PUBLISHED_STEPS = 200


def published_sizes(rows: list[int], feature_dim: int, hidden: int, bits: Sequence[int]) -> tuple[list[int], list[int]]:
    """AdaQP's profile range per peer as (high, low) bytes, for ``sent_sizes`` with PUBLISHED_STEPS steps.

    AdaQP/assigner/profile.py ``build_dummy``: low = rows * min(features, hidden) * lowest bits / 8 and
    high = rows * max(features, hidden) * highest bits / 8 (its exchange also quantizes layer 0's input
    features; no row parameters counted), both rounded; ``sent_sizes`` then spans low - low/2 to high + low/2."""
    lo_dim, hi_dim = min(feature_dim, hidden), max(feature_dim, hidden)
    low = [round(n * lo_dim * min(bits) / 8) for n in rows]
    high = [round(n * hi_dim * max(bits) / 8) for n in rows]
    return high, low


def fit_time_model(
    comm: Communicator, message_bytes: list[int], repeats: int = 3, steps: int = 5, low_bytes: list[int] | None = None
) -> TimeModel:
    """Profile all channels at once and fit each; every rank returns the same full TimeModel.

    ``message_bytes[q]`` is what this rank sends to rank q in one real exchange (its own entry
    is ignored): at full precision, profiled with ``profile_sizes``; or, with ``low_bytes`` (the
    same message at the lowest width), at the highest width, profiled with ``sent_sizes``.
    Collective: every rank calls it with the same ``repeats``, ``steps`` and kind of sizes. Each receiver fits its
    incoming channels on the median time
    per size (the scheduler's occasional stalls would otherwise pull a least-squares line),
    then all ranks exchange their fits. Call it again to refit.
    """
    own = [0 if q == comm.rank else int(b) for q, b in enumerate(message_bytes)]
    if low_bytes is None:
        rounds = profile_sizes(own, steps)
    else:
        rounds = sent_sizes(own, [0 if q == comm.rank else int(b) for q, b in enumerate(low_bytes)], steps)
    samples = profile_channels(comm, rounds, repeats)
    local = {channel: fit_linear(_median_per_size(s)) for channel, s in samples.items()}
    fits: dict[Channel, LinearFit] = {}
    for part in comm.all_gather_object(local, category=OVERHEAD):
        fits.update(part)
    return TimeModel(dict(sorted(fits.items())))


def fixed_link_model(comm: Communicator, message_bytes: list[int], gbit_per_s: float, latency_s: float) -> TimeModel:
    """t = bytes * 8 / (gbit_per_s * 1e9) + latency_s on every channel that carries bytes; nothing is timed.

    For reproducible assignments: the profile's timing noise on a loaded machine changes the
    widths from run to run, while with a fixed link model they depend only on the seeded
    training itself. Collective, like ``fit_time_model``.
    """
    own = [(comm.rank, q) for q, b in enumerate(message_bytes) if q != comm.rank and int(b) > 0]
    channels = sorted(c for part in comm.all_gather_object(own, category=OVERHEAD) for c in part)
    fit = LinearFit(a=8.0 / (gbit_per_s * 1e9), c=latency_s, r2=1.0, samples=0)
    return TimeModel({c: fit for c in channels})


def _median_per_size(samples: list[tuple[int, float]]) -> list[tuple[int, float]]:
    by_size: dict[int, list[float]] = defaultdict(list)
    for nbytes, seconds in samples:
        by_size[nbytes].append(seconds)
    return [(nbytes, statistics.median(times)) for nbytes, times in sorted(by_size.items())]
