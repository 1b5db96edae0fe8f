"""Seeded train/val/test splits for data that comes without one."""

from __future__ import annotations

import numpy as np

from gnnq.config.validate import check_fractions


def seeded_split_source(train_frac: float, val_frac: float) -> str:
    """How a seeded split came about, for error lines that name an empty split."""
    return (
        f"the seeded split with dataset.train_frac={train_frac} and dataset.val_frac={val_frac}, rounded per class, "
        "gives it no node: use more nodes or larger fractions"
    )


def strata(y: np.ndarray) -> np.ndarray:
    """The class each node is stratified by: its label, or its first positive label (multi-hot)."""
    y = np.asarray(y)
    if y.ndim == 2:
        return np.argmax(y > 0, axis=1).astype(np.int64)
    return y.astype(np.int64, copy=False)


def stratified_split(
    y: np.ndarray, train_frac: float, val_frac: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boolean (train, val, test) masks that keep each class's share in every part.

    Within each class the nodes are shuffled with ``np.random.default_rng(seed)``; the first
    ``round(n_c * train_frac)`` (half up, at least one) go to train, the next ``round(n_c * val_frac)``
    to val and the rest to test. ``y`` is (N,) labels or (N, C) multi-hot rows.
    """
    check_fractions(train_frac, val_frac)
    s = strata(y)
    n = s.shape[0]
    if n == 0:
        empty = np.zeros(0, dtype=bool)
        return empty, empty.copy(), empty.copy()
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    order = perm[np.argsort(s[perm], kind="stable")]  # grouped by class, shuffled within
    counts = np.bincount(s)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    n_train = np.where(counts > 0, np.maximum(1, _round_half_up(counts * train_frac)), 0)
    n_val = np.minimum(_round_half_up(counts * val_frac), counts - n_train)
    cls = s[order]
    rank = np.arange(n) - starts[cls]
    train = np.zeros(n, dtype=bool)
    val = np.zeros(n, dtype=bool)
    train[order] = rank < n_train[cls]
    val[order] = (rank >= n_train[cls]) & (rank < n_train[cls] + n_val[cls])
    test = ~(train | val)
    return train, val, test


def _round_half_up(a: np.ndarray) -> np.ndarray:
    return np.floor(a + 0.5).astype(np.int64)


def masks_from_ids(num_nodes: int, *id_lists: np.ndarray) -> tuple[np.ndarray, ...]:
    """One boolean (N,) mask per array of node ids."""
    masks = []
    for ids in id_lists:
        m = np.zeros(num_nodes, dtype=bool)
        m[np.asarray(ids, dtype=np.int64)] = True
        masks.append(m)
    return tuple(masks)
