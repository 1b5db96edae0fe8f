"""Amazon Computers / Photo and Coauthor CS / Physics from their npz files, split as pdADMM-G's authors split them.

The files are the ones PyG's ``Amazon`` and ``Coauthor`` classes read (Shchur et al., "Pitfalls of GNN
evaluation"), in PyG's layout ``<data root>/<Dir>/raw/<file>.npz``: CSR arrays ``adj_*`` (the graph)
and ``attr_*`` (bag-of-words features) and ``labels``. Read as PyG reads them: features binarized
(every non-zero entry becomes 1), self loops dropped. Nothing is downloaded.

The datasets come without a split; ``authors_split`` is the one of the authors' ``input_data.py``
(xianggebenben/pdADMM-G): per class, 20 training nodes drawn by a permutation seeded 100 (the seed
set again before each class), then of the other nodes, permuted with seed 100, the first 1000 test and
the next 1000 validation.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from gnnq.data.graph import Graph
from gnnq.data.loaders import canonical_edges, missing_files_message, one_line
from gnnq.errors import DatasetError

# dataset name -> (folder under the data root, file in its raw/), as PyG names them
NPZ_FILES = {
    "amazon-computers": ("Computers", "amazon_electronics_computers.npz"),
    "amazon-photo": ("Photo", "amazon_electronics_photo.npz"),
    "coauthor-cs": ("CS", "ms_academic_cs.npz"),
    "coauthor-physics": ("Physics", "ms_academic_phy.npz"),
}
NUM_NODES = {"amazon-computers": 13752, "amazon-photo": 7650, "coauthor-cs": 18333, "coauthor-physics": 34493}
SPLIT_SEED, TRAIN_PER_CLASS, NUM_TEST, NUM_VAL = 100, 20, 1000, 1000
_KEYS = (
    "adj_data",
    "adj_indices",
    "adj_indptr",
    "adj_shape",
    "attr_data",
    "attr_indices",
    "attr_indptr",
    "attr_shape",
    "labels",
)


def npz_path(name: str, root: Path) -> Path:
    folder, file_name = NPZ_FILES[name]
    return root / folder / "raw" / file_name


def authors_split(
    labels: np.ndarray,
    num_classes: int,
    per_class: int = TRAIN_PER_CLASS,
    num_test: int = NUM_TEST,
    num_val: int = NUM_VAL,
    seed: int = SPLIT_SEED,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, val, test) boolean masks by the authors' rule (module docstring)."""
    import torch  # here: the launcher imports the loaders without torch

    y = torch.as_tensor(labels)
    train = torch.zeros(y.shape[0], dtype=torch.bool)
    for c in range(num_classes):
        members = (y == c).nonzero().view(-1)
        order = torch.randperm(members.numel(), generator=torch.Generator().manual_seed(seed))
        train[members[order[:per_class]]] = True
    rest = (~train).nonzero().view(-1)
    rest = rest[torch.randperm(rest.numel(), generator=torch.Generator().manual_seed(seed))]
    test = torch.zeros_like(train)
    val = torch.zeros_like(train)
    test[rest[:num_test]] = True
    val[rest[num_test : num_test + num_val]] = True
    return train.numpy(), val.numpy(), test.numpy()


def _csr_dense(f, prefix: str) -> np.ndarray:
    rows, cols = (int(v) for v in f[f"{prefix}_shape"])
    indptr, indices, data = f[f"{prefix}_indptr"], f[f"{prefix}_indices"], f[f"{prefix}_data"]
    out = np.zeros((rows, cols), dtype=np.float32)
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    out[row_of, indices] = data
    return out


def load_npz(name: str, root: Path) -> Graph:
    """Read ``name`` (a key of NPZ_FILES) from ``root``; DatasetError naming the file when it cannot."""
    path = npz_path(name, root)
    if not path.is_file():
        raise DatasetError(
            missing_files_message(
                name,
                path.parent,
                [path.name],
                [path.name],
                "gnnq does not download it; PyG's Amazon / Coauthor classes do, into this layout",
            )
        )
    try:
        with np.load(path, allow_pickle=False) as f:
            absent = [k for k in _KEYS if k not in f.files]
            if absent:
                raise DatasetError(
                    f"{name}: {path} lacks the arrays {', '.join(absent)}; it is not in PyG's Amazon/Coauthor "
                    "npz format"
                )
            x = _csr_dense(f, "attr")
            adj_rows = np.repeat(np.arange(int(f["adj_shape"][0])), np.diff(f["adj_indptr"]))
            edges = np.stack([adj_rows, f["adj_indices"].astype(np.int64)])
            y = f["labels"].astype(np.int64).reshape(-1)
    except (OSError, ValueError, zipfile.BadZipFile, KeyError) as exc:
        raise DatasetError(
            f"{name}: cannot read {path} ({one_line(exc)}); it looks truncated or corrupt: replace it"
        ) from None
    x[x > 0] = 1.0  # PyG binarizes these features
    num_classes = int(y.max()) + 1 if y.size else 0
    return Graph.from_split(
        name,
        canonical_edges(edges, x.shape[0]),
        x,
        y,
        authors_split(y, num_classes),
        num_classes,
        sources={"features": str(path), "labels": str(path), "train": "authors' split, seed 100"},
    )
