"""A tiny ``dataset=files`` graph: edges.txt, features.npy, labels.npy (docs/datasets.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_files_graph(
    d: Path, n: int = 40, classes: int = 3, multilabel: bool = False, csv: bool = False, seed: int = 0
):
    """Write a random ``n``-node graph with every class present; returns (edges, features, labels)."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    edges = rng.integers(0, n, size=(120, 2))
    x = rng.standard_normal((n, 5)).astype(np.float32)
    y = (rng.random((n, classes)) < 0.4).astype(np.int64) if multilabel else rng.permutation(np.arange(n) % classes)
    if csv:
        lines = ["# an edge list with a header and a comment", "src,dst"] + [f"{a}, {b}" for a, b in edges]
        (d / "edges.csv").write_text("\n".join(lines) + "\n")
        np.savetxt(d / "features.csv", x, delimiter=",")
        np.savetxt(d / "labels.csv", y, delimiter=",", fmt="%d")
    else:
        (d / "edges.txt").write_text("# src dst\n" + "\n".join(f"{a}\t{b}" for a, b in edges) + "\n\n")
        np.save(d / "features.npy", x)
        np.save(d / "labels.npy", y)
    return edges, x, y
