"""A stochastic block model with class-correlated noisy features (``dataset=synthetic``).

Every node gets a class (balanced, shuffled) and draws about ``avg_degree / 2`` out-edges:
with probability ``homophily`` the target is a uniformly random node of its own class,
otherwise a uniformly random node of the whole graph. The edges are then symmetrized,
deduplicated and stripped of self loops, so the mean degree is close to ``avg_degree``.
Features are the class centroid (a random direction of norm ``CENTROID_NORM``) plus
Gaussian noise of std ``feature_noise`` per dimension: alone they separate the classes
poorly, averaged over neighbors well, so a GCN beats an MLP. Deterministic per ``seed``;
everything is vectorized numpy (10^6 nodes / 10^7 edges in seconds).
"""

from __future__ import annotations

import numpy as np

from gnnq.data.graph import Graph
from gnnq.data.loaders import edge_keys, edges_from_keys
from gnnq.data.sanity import SPLITS
from gnnq.data.splits import seeded_split_source, stratified_split
from gnnq.errors import ConfigError

CENTROID_NORM = 3.0
NAME = "synthetic"


def generate_sbm(
    num_nodes: int,
    avg_degree: float,
    num_classes: int,
    feature_dim: int,
    homophily: float,
    feature_noise: float,
    seed: int,
    train_frac: float = 0.6,
    val_frac: float = 0.2,
) -> Graph:
    """Generate the graph; the split is stratified by class with ``train_frac`` / ``val_frac``."""
    _check(num_nodes, avg_degree, num_classes, feature_dim, homophily, feature_noise)
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(num_nodes, dtype=np.int64) % num_classes)
    src, dst = _sbm_edges(rng, y, num_classes, avg_degree, homophily)
    keys = edge_keys(src, dst, num_nodes, undirected=True)
    del src, dst  # the keys alone go on: the directed draws are as large as the result
    edge_index = edges_from_keys(keys, num_nodes)
    del keys
    x = _class_features(rng, y, num_classes, feature_dim, feature_noise)
    return Graph.from_split(
        NAME,
        edge_index,
        x,
        y,
        stratified_split(y, train_frac, val_frac, seed),
        num_classes,
        sources=dict.fromkeys(SPLITS, seeded_split_source(train_frac, val_frac)),
    )


def _check(num_nodes, avg_degree, num_classes, feature_dim, homophily, feature_noise) -> None:
    problems = []
    if num_nodes < 1:
        problems.append(f"dataset.num_nodes must be >= 1 (got {num_nodes})")
    if num_classes < 1 or num_classes > num_nodes:
        problems.append(f"dataset.num_classes must be in 1..num_nodes (got {num_classes})")
    if avg_degree < 0:
        problems.append(f"dataset.avg_degree must be >= 0 (got {avg_degree})")
    if feature_dim < 1:
        problems.append(f"dataset.feature_dim must be >= 1 (got {feature_dim})")
    if not 0.0 <= homophily <= 1.0:
        problems.append(f"dataset.homophily must be in [0, 1] (got {homophily})")
    if feature_noise < 0:
        problems.append(f"dataset.feature_noise must be >= 0 (got {feature_noise})")
    if problems:
        raise ConfigError(f"{NAME}: " + "; ".join(problems))


def _sbm_edges(rng: np.random.Generator, y: np.ndarray, num_classes: int, avg_degree: float, homophily: float):
    """(src, dst) of the directed draws: ``avg_degree / 2`` per node on average."""
    n = y.shape[0]
    per_node = avg_degree / 2.0
    whole = int(np.floor(per_node))
    extra = np.flatnonzero(rng.random(n) < per_node - whole)  # the fractional part
    src = np.concatenate([np.repeat(np.arange(n, dtype=np.int64), whole), extra])
    e = src.shape[0]

    by_class = np.argsort(y, kind="stable")
    counts = np.bincount(y, minlength=num_classes)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])

    dst = rng.integers(0, n, size=e, dtype=np.int64)  # the random-target draws
    same = np.flatnonzero(rng.random(e) < homophily)
    c = y[src[same]]
    offset = (rng.random(same.shape[0]) * counts[c]).astype(np.int64)
    dst[same] = by_class[starts[c] + offset]
    return src, dst


def _class_features(
    rng: np.random.Generator, y: np.ndarray, num_classes: int, feature_dim: int, noise: float
) -> np.ndarray:
    centroids = rng.standard_normal((num_classes, feature_dim), dtype=np.float32)
    centroids *= np.float32(CENTROID_NORM / np.sqrt(feature_dim))
    x = rng.standard_normal((y.shape[0], feature_dim), dtype=np.float32)
    x *= np.float32(noise)
    x += centroids[y]
    return x
