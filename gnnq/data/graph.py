"""The in-memory form every dataset loader returns."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

METRICS = ("accuracy", "micro_f1")


@dataclass
class Graph:
    """A node-classification graph.

    ``edge_index[0]`` holds message sources and ``edge_index[1]`` destinations. Edges are
    deduplicated and carry no self loops (models add their own); undirected graphs hold
    both directions. ``y`` is int64 of shape (N,) for single-label data, float32 {0,1} of
    shape (N, C) for multi-label data.
    """

    name: str
    edge_index: np.ndarray
    x: np.ndarray  # float32 (N, F); or a float32 SciPy CSR matrix (sparse features, sorted unique indices)
    y: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    num_classes: int
    multilabel: bool = False
    metric: str = "accuracy"
    # Where a part came from, for error lines: "features", "labels", "train", "val", "test" -> a file or
    # the config keys that made it (loaders fill in what they know; not part of the fingerprint).
    sources: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_split(
        cls, name: str, edge_index: np.ndarray, x: np.ndarray, y: np.ndarray, masks, num_classes: int, **more
    ):
        """A graph whose (train, val, test) masks come as one triple, as every loader's split returns them."""
        train, val, test = masks
        return cls(name, edge_index, x, y, train, val, test, num_classes, **more)

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])

    @property
    def sparse_features(self) -> bool:
        """Whether ``x`` is a SciPy CSR matrix (features.npz of the files format) rather than a dense array."""
        return sp.issparse(self.x)

    @property
    def feature_nonzeros(self) -> int | None:
        """The stored entries of sparse features (None for dense ones): what a rank's memory holds of them."""
        return int(self.x.nnz) if self.sparse_features else None

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    def validate(self) -> None:
        """Check shapes and dtypes; raise ValueError naming the broken field."""
        n = self.num_nodes
        if sp.issparse(self.x) and (self.x.format != "csr" or self.x.dtype != np.float32):
            raise ValueError(f"{self.name}: sparse x must be float32 CSR, got {self.x.dtype} {self.x.format}")
        if self.x.ndim != 2 or self.x.dtype != np.float32:
            raise ValueError(f"{self.name}: x must be float32 (N, F), got {self.x.dtype} {self.x.shape}")
        if self.edge_index.ndim != 2 or self.edge_index.shape[0] != 2 or self.edge_index.dtype != np.int64:
            raise ValueError(
                f"{self.name}: edge_index must be int64 (2, E), got {self.edge_index.dtype} {self.edge_index.shape}"
            )
        if self.num_edges and (self.edge_index.min() < 0 or self.edge_index.max() >= n):
            raise ValueError(f"{self.name}: edge_index refers to nodes outside 0..{n - 1}")
        if self.multilabel:
            if self.y.shape != (n, self.num_classes) or self.y.dtype != np.float32:
                raise ValueError(
                    f"{self.name}: multi-label y must be float32 (N, C), got {self.y.dtype} {self.y.shape}"
                )
        elif self.y.shape != (n,) or self.y.dtype != np.int64:
            raise ValueError(f"{self.name}: y must be int64 (N,), got {self.y.dtype} {self.y.shape}")
        for mask in ("train_mask", "val_mask", "test_mask"):
            m = getattr(self, mask)
            if m.shape != (n,) or m.dtype != np.bool_:
                raise ValueError(f"{self.name}: {mask} must be bool (N,), got {m.dtype} {m.shape}")
        if self.metric not in METRICS:
            raise ValueError(f"{self.name}: metric must be one of {METRICS}, got {self.metric!r}")

    def fingerprint(self) -> str:
        """A content hash: equal graphs (structure, features, labels, splits) hash equally."""
        h = hashlib.blake2b(digest_size=16)
        x = (
            (self.x.indptr, self.x.indices, self.x.data, np.asarray(self.x.shape))
            if self.sparse_features
            else (self.x,)
        )
        for arr in (self.edge_index, *x, self.y, self.train_mask, self.val_mask, self.test_mask):
            a = np.ascontiguousarray(arr)
            h.update(str((a.dtype.str, a.shape)).encode())
            if a.size:  # memoryview cannot cast an empty array (a GA-MLP graph has no edges)
                h.update(memoryview(a).cast("B"))
        h.update(f"{self.num_classes}|{self.multilabel}|{self.metric}".encode())
        return h.hexdigest()
