"""How sure a ranking is: bootstrap confidence intervals of a mean over seeds, and ranks with ties.

Two neighbours of a leaderboard share a rank (a tie) when the data cannot tell them apart: their 95% bootstrap
intervals of the mean overlap, or Welch's t-test over seeds gives p >= ``NOISE_P``. A configuration joins the tie of
the block above it when it is not separated from the block's first (best) member; otherwise it starts a new rank
(competition ranking: 1, 1, 3). With fewer than two seeds on a side nothing is estimated and the order stands (the
leaderboard's noise notes say so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
RESAMPLES = 4000
NOISE_P = 0.05  # a lead is within the noise when Welch's t-test gives p >= NOISE_P


def finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and not isinstance(v, bool) and math.isfinite(float(v))]


def bootstrap_ci(values, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float] | None:
    """The percentile bootstrap interval of the mean of ``values`` (resampled with replacement, a fixed seed so a
    report is reproducible); None with fewer than two values."""
    xs = np.asarray(finite(values), dtype=float)
    if xs.size < 2:
        return None
    rng = np.random.default_rng(seed)
    means = xs[rng.integers(0, xs.size, size=(resamples, xs.size))].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


def welch_p(a, b) -> float | None:
    """Two-sided p of Welch's t-test that the means of two samples are equal; None without two values on a side."""
    from scipy.stats import ttest_ind

    xa, xb = finite(a), finite(b)
    if len(xa) < 2 or len(xb) < 2:
        return None
    if np.std(xa) == 0 and np.std(xb) == 0:
        return 1.0 if np.mean(xa) == np.mean(xb) else 0.0
    return float(ttest_ind(xa, xb, equal_var=False).pvalue)


@dataclass(frozen=True)
class Separation:
    """Whether two samples' means are told apart, and the evidence."""

    separated: bool
    p: float | None
    overlap: bool | None  # whether the bootstrap intervals overlap (None: a side has fewer than two values)

    def why(self) -> str:
        if self.p is None:
            return "fewer than two seeds on a side"
        parts = [f"Welch's t-test p = {self.p:.2f}"]
        if self.overlap is not None:
            parts.append(f"{LEVEL:.0%} bootstrap intervals {'overlap' if self.overlap else 'apart'}")
        return ", ".join(parts)


def separation(a, b) -> Separation:
    """Two samples are separated when Welch's p < NOISE_P and their bootstrap intervals do not overlap; with fewer
    than two values on a side the order is taken as it is (separated, nothing estimated)."""
    p = welch_p(a, b)
    ca, cb = bootstrap_ci(a), bootstrap_ci(b)
    if p is None or ca is None or cb is None:
        return Separation(True, None, None)
    overlap = ca[0] <= cb[1] and cb[0] <= ca[1]
    return Separation(p < NOISE_P and not overlap, p, overlap)


def tied_ranks(samples: list[list]) -> list[int]:
    """Competition ranks (1, 1, 3) of samples already sorted best first: a sample shares the rank of the block above
    it when it is not separated from that block's first sample."""
    ranks: list[int] = []
    leader = 0
    for i, sample in enumerate(samples):
        if i and not separation(samples[leader], sample).separated:
            ranks.append(ranks[leader])
        else:
            leader = i
            ranks.append(i + 1)
    return ranks


def ci_text(ci: tuple[float, float] | None, fmt: str = ".1f") -> str:
    """``[12.3, 15.0]`` or ``""`` without an interval."""
    return "" if ci is None else f"[{format(ci[0], fmt)}, {format(ci[1], fmt)}]"
