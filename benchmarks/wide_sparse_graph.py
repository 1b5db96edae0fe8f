"""Write a wide, sparse bag-of-words graph in the bring-your-own format (docs/datasets.md), twice: with
features.npz (SciPy CSR) and with the same features dense in features.npy.

The shape of issue 44's holdout: about 22k nodes, 4.7k binary features at about 0.3% density (about 14
non-zeros per row), 4 classes. Edges: a stochastic block model (most edges inside a class); features: each
row draws its words from its class's own vocabulary with probability ``--signal``, else from all words.

    python -m benchmarks.wide_sparse_graph OUT [--nodes 22000 --features 4714 --words 14 --classes 4]

writes OUT/sparse/ and OUT/dense/ (same edges.txt and labels.npy; only the feature file differs).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def make(
    nodes: int, features: int, words: int, classes: int, degree: float, homophily: float, signal: float, seed: int
):
    """(edges (E, 2), CSR features, labels) of the generated graph."""
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(nodes) % classes)
    # edges: each node sends degree/2 edges (made undirected by the loader), to its class with prob. homophily
    m = int(nodes * degree / 2)
    src = rng.integers(0, nodes, m)
    by_class = [np.flatnonzero(y == c) for c in range(classes)]
    inside = rng.random(m) < homophily
    dst = rng.integers(0, nodes, m)
    for c in range(classes):
        sel = inside & (y[src] == c)
        dst[sel] = by_class[c][rng.integers(0, by_class[c].size, int(sel.sum()))]
    keep = src != dst
    edges = np.stack([src[keep], dst[keep]], axis=1)
    # features: `words` distinct words per row, from the class vocabulary (features / classes / 4 words) or anywhere
    vocab = features // (4 * classes)
    rows, cols = [], []
    for c in range(classes):
        ids = by_class[c]
        own = rng.choice(features, vocab, replace=False)
        pick = np.where(
            rng.random((ids.size, words)) < signal,
            own[rng.integers(0, vocab, (ids.size, words))],
            rng.integers(0, features, (ids.size, words)),
        )
        rows.append(np.repeat(ids, words))
        cols.append(pick.reshape(-1))
    x = sp.csr_matrix(
        (np.ones(nodes * words, dtype=np.float32), (np.concatenate(rows), np.concatenate(cols))),
        shape=(nodes, features),
    )
    x.sum_duplicates()
    x.data[:] = 1.0  # binary: a word drawn twice is present once
    x.sort_indices()
    return edges, x, y.astype(np.int64)


def write(out: Path, edges, x, y) -> None:
    for kind in ("sparse", "dense"):
        d = out / kind
        d.mkdir(parents=True, exist_ok=True)
        np.savetxt(d / "edges.txt", edges, fmt="%d")
        np.save(d / "labels.npy", y)
        if kind == "sparse":
            sp.save_npz(d / "features.npz", x, compressed=False)
        else:
            np.save(d / "features.npy", x.toarray())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--nodes", type=int, default=22000)
    ap.add_argument("--features", type=int, default=4714)
    ap.add_argument("--words", type=int, default=14)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--degree", type=float, default=10.0)
    ap.add_argument("--homophily", type=float, default=0.7)
    ap.add_argument("--signal", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    edges, x, y = make(a.nodes, a.features, a.words, a.classes, a.degree, a.homophily, a.signal, a.seed)
    write(a.out, edges, x, y)
    density = x.nnz / (x.shape[0] * x.shape[1])
    print(f"{a.nodes} nodes, {len(edges)} edges, {a.features} features, density {density:.4%}, {a.classes} classes")


if __name__ == "__main__":
    main()
