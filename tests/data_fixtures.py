"""Tiny copies of AdaQP's four datasets, written in each loader's real on-disk format (no binary blobs committed).

* Reddit: PyG's ``Reddit/raw/reddit_data.npz`` (``feature``, ``label``, ``node_types`` 1/2/3 = train/val/test) and
  ``reddit_graph.npz`` (a scipy COO matrix saved with ``scipy.sparse.save_npz``), as PyG's ``Reddit.process`` reads;
* Yelp and AmazonProducts: GraphSAINT's ``raw/adj_full.npz`` (a scipy CSR matrix), ``feats.npy``, ``class_map.json``
  (node id -> list of 0/1 labels) and ``role.json`` (``tr``, ``va``, ``te`` node ids), as PyG's ``Yelp`` and
  ``AmazonProducts`` read;
* ogbn-products: OGB's extracted zip, ``ogbn_products/raw/*.csv.gz`` (``edge``, ``num-node-list``,
  ``num-edge-list``, ``node-feat``, ``node-label``), ``split/sales_ranking/{train,valid,test}.csv.gz`` and
  ``RELEASE_v1.txt``, as OGB's ``NodePropPredDataset`` reads.

Each graph is a small stochastic block model (symmetric, class-correlated features) with the real dataset's feature
width and class count. The real loaders check the published node counts; ``GNNQ_FIXTURE_DATA=1`` (test-only,
gnnq/data/loaders/pyg.py) lets these smaller files through the same loaders.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from tests.helpers import write_csv_gz

# dataset -> (feature width, classes, multi-label) of the published data
SHAPES = {"reddit": (602, 41, False), "yelp": (300, 100, True), "ogbn-products": (100, 47, False),
          "amazon-products": (200, 107, True)}  # fmt: skip
FIXTURE_ENV = {"GNNQ_FIXTURE_DATA": "1"}


def _sbm(n: int, features: int, classes: int, seed: int, degree: float = 8.0):
    """(symmetric edges without self loops as a (2, E) array, features, one class per node, a 60/20/20 split)."""
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(n) % classes)  # every class has a node, as in the real data
    group = y % 4  # 4 blocks of classes: METIS cuts between them, so ranks have halo rows
    src = rng.integers(0, n, size=int(n * degree))
    same = rng.random(src.size) < 0.8
    dst = np.where(same, rng.permutation(n)[src % n], rng.integers(0, n, size=src.size))
    in_block = [np.flatnonzero(group == g) for g in range(4)]
    dst[same] = [rng.choice(in_block[group[s]]) for s in src[same]]
    keep = src != dst
    both = np.concatenate([np.stack([src, dst]), np.stack([dst, src])], axis=1)
    edges = np.unique(both[:, np.r_[keep, keep]], axis=1)
    x = rng.standard_normal((n, features)).astype(np.float32)
    x[np.arange(n), y % features] += 3.0
    role = rng.permutation(n)
    split = {"tr": role[: 3 * n // 5], "va": role[3 * n // 5 : 4 * n // 5], "te": role[4 * n // 5 :]}
    return edges, x, y, split


def write_reddit(root: Path, n: int = 160, seed: int = 0) -> None:
    f, c, _ = SHAPES["reddit"]
    edges, x, y, split = _sbm(n, f, c, seed)
    raw = root / "Reddit" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    node_types = np.zeros(n, dtype=np.int64)
    for code, key in ((1, "tr"), (2, "va"), (3, "te")):
        node_types[split[key]] = code
    np.savez(raw / "reddit_data.npz", feature=x, label=y.astype(np.int64), node_types=node_types)
    adj = sp.coo_matrix((np.ones(edges.shape[1], dtype=np.float32), (edges[0], edges[1])), shape=(n, n))
    sp.save_npz(raw / "reddit_graph.npz", adj)


def write_saint(root: Path, name: str, n: int = 160, seed: int = 0) -> None:
    """GraphSAINT's files for ``yelp`` or ``amazon-products`` under ``root/<Yelp|AmazonProducts>/raw``."""
    f, c, _ = SHAPES[name]
    edges, x, y, split = _sbm(n, f, c, seed)
    raw = root / {"yelp": "Yelp", "amazon-products": "AmazonProducts"}[name] / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    adj = sp.csr_matrix((np.ones(edges.shape[1], dtype=np.float32), (edges[0], edges[1])), shape=(n, n))
    sp.save_npz(raw / "adj_full.npz", adj)
    np.save(raw / "feats.npy", x)
    rng = np.random.default_rng(seed + 1)
    labels = (rng.random((n, c)) < 0.05).astype(int)
    labels[np.arange(n), y] = 1  # every node has its block's label, so the labels follow the graph
    (raw / "class_map.json").write_text(json.dumps({str(i): labels[i].tolist() for i in range(n)}))
    (raw / "role.json").write_text(json.dumps({k: v.tolist() for k, v in split.items()}))


def write_ogbn_products(root: Path, n: int = 160, seed: int = 0) -> None:
    f, c, _ = SHAPES["ogbn-products"]
    edges, x, y, split = _sbm(n, f, c, seed)
    one_way = edges[:, edges[0] < edges[1]]  # OGB stores each edge once and adds the inverse (add_inverse_edge)
    d = root / "ogbn_products"
    write_csv_gz(d / "raw" / "edge.csv.gz", one_way.T)
    write_csv_gz(d / "raw" / "num-node-list.csv.gz", [[n]])
    write_csv_gz(d / "raw" / "num-edge-list.csv.gz", [[one_way.shape[1]]])
    write_csv_gz(d / "raw" / "node-feat.csv.gz", x)
    write_csv_gz(d / "raw" / "node-label.csv.gz", y.reshape(-1, 1))
    for part, key in (("train", "tr"), ("valid", "va"), ("test", "te")):
        write_csv_gz(d / "split" / "sales_ranking" / f"{part}.csv.gz", split[key].reshape(-1, 1))
    (d / "RELEASE_v1.txt").write_text("ogbn-products v1 (test fixture)\n")


def write_adaqp_datasets(root: Path) -> Path:
    """All four under ``root`` (a data root: GNNQ_DATA or dataset.root); returns ``root``."""
    write_reddit(root)
    write_saint(root, "yelp")
    write_saint(root, "amazon-products")
    write_ogbn_products(root)
    return root
