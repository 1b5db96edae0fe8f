"""Content checks of a loaded graph, whatever loader made it, before any rank starts.

Data that cannot give an honest result stops here with one DatasetError line naming the file
(or the config keys) it came from: NaN or infinite features, an empty train/val/test split,
labels outside ``0..C-1``, a single class. Data that trains but may not be what was meant
(classes without a node) gives one warning line. Every check is one cheap pass: features are
scanned in blocks, so no N x F temporary is allocated.
"""

from __future__ import annotations

import numpy as np

from gnnq.data.graph import Graph
from gnnq.errors import DatasetError

SPLITS = ("train", "val", "test")
_BLOCK_ELEMENTS = 1 << 22  # features scanned this many values at a time
_SHOWN_CLASSES = 5


def check_graph(graph: Graph) -> list[str]:
    """Raise DatasetError (one line) for content no run can learn or be scored on; return one-line warnings."""
    _check_features(graph)
    _check_splits(graph)
    return _check_labels(graph)


def _source(graph: Graph, part: str, default: str) -> str:
    return graph.sources.get(part, default)


# --- features ----------------------------------------------------------------------------------


def first_nonfinite(x: np.ndarray) -> tuple[int, int, int] | None:
    """(count, row, column) of the non-finite values of the 2-D ``x`` (the first in row order), or None."""
    rows = max(1, _BLOCK_ELEMENTS // max(1, x.shape[1]))
    count, first = 0, None
    for start in range(0, x.shape[0], rows):
        bad = ~np.isfinite(x[start : start + rows])
        n = int(np.count_nonzero(bad))
        if n and first is None:
            r, c = np.unravel_index(int(np.argmax(bad)), bad.shape)
            first = (start + int(r), int(c))
        count += n
    return None if first is None else (count, *first)


def first_nonfinite_sparse(x) -> tuple[int, int, int] | None:
    """``first_nonfinite`` of a SciPy CSR matrix (only stored values can be non-finite)."""
    bad = ~np.isfinite(x.data)
    if not bad.any():
        return None
    at = int(np.argmax(bad))
    return int(bad.sum()), int(np.searchsorted(x.indptr, at, side="right") - 1), int(x.indices[at])


def _check_features(graph: Graph) -> None:
    where = _source(graph, "features", "the feature matrix")
    if graph.num_features == 0:
        raise DatasetError(f"{graph.name}: {where} has no feature columns; every node needs at least one feature")
    bad = first_nonfinite_sparse(graph.x) if graph.sparse_features else first_nonfinite(graph.x)
    if bad:
        count, row, col = bad
        raise DatasetError(
            f"{graph.name}: {where} holds {count:,} NaN or infinite value(s) (first: node {row}, feature {col}, "
            f"{graph.x[row, col]}); every feature must be a finite number"
        )


# --- splits --------------------------------------------------------------------------------------


def _check_splits(graph: Graph) -> None:
    sizes = {s: int(np.count_nonzero(getattr(graph, f"{s}_mask"))) for s in SPLITS}
    for split, size in sizes.items():
        if size:
            continue
        why = _source(graph, split, f"the split shipped with dataset {graph.name}")
        counts = ", ".join(f"{s} {n:,}" for s, n in sizes.items())
        raise DatasetError(
            f"{graph.name}: the {split} split is empty ({why}); train, val and test each need at least one node "
            f"(now: {counts} of {graph.num_nodes:,} nodes)"
        )


# --- labels --------------------------------------------------------------------------------------


def _check_labels(graph: Graph) -> list[str]:
    where = _source(graph, "labels", "the label array")
    c = graph.num_classes
    if graph.multilabel:
        per_class = graph.y.sum(axis=0, dtype=np.float64)
        if not np.all(np.isfinite(per_class)):
            raise DatasetError(f"{graph.name}: {where} holds NaN or infinite values; multi-label rows must be 0/1")
        if not per_class.any():
            raise DatasetError(f"{graph.name}: {where} has no positive label at all; at least one node needs a 1")
    else:
        y = graph.y
        if y.size and (y.min() < 0 or y.max() >= c):
            bad = int(y.min()) if y.min() < 0 else int(y.max())
            raise DatasetError(f"{graph.name}: {where} holds class id {bad}; class ids must be 0..{c - 1}")
        per_class = np.bincount(y, minlength=c)
        present = np.flatnonzero(per_class)
        if present.size < 2:
            only = f"class {int(present[0])} for all {graph.num_nodes:,} nodes" if present.size else "no node"
            raise DatasetError(
                f"{graph.name}: {where} has a single class ({only}); classification needs at least 2 classes, "
                "else every metric is trivially perfect"
            )
    empty = np.flatnonzero(per_class == 0)
    if not empty.size:
        return []
    shown = ", ".join(map(str, empty[:_SHOWN_CLASSES].tolist())) + (", ..." if empty.size > _SHOWN_CLASSES else "")
    return [
        f"{graph.name}: {empty.size:,} of {c:,} classes have no node ({shown}); the model still gets {c:,} outputs: "
        f"{'drop the empty columns' if graph.multilabel else f'renumber the labels 0..{c - empty.size - 1}'} if "
        "that is not intended"
    ]
