"""Bring-your-own graph: a directory of plain files (format in docs/datasets.md).

    edges.txt | edges.csv        two integer columns: src dst (whitespace or comma separated)
    features.npy | features.csv  N x F numbers
    features.npz                 or N x F sparse: a SciPy CSR matrix (scipy.sparse.save_npz), kept sparse
    labels.npy | labels.csv      N integers, or N x C 0/1 multi-hot rows (multi-label)
    train.txt val.txt test.txt   optional node ids, one per line (all three or none)

Text files may hold ``#`` comments, blank lines and one header line (a first line that holds no number;
it is dropped with a warning that says so). A UTF-8 byte-order mark, as spreadsheets write it, is read as one.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from gnnq.data.graph import Graph
from gnnq.data.integrity import warn
from gnnq.data.loaders import canonical_edges, one_line
from gnnq.data.loaders.sparse_features import read_sparse_features
from gnnq.data.sanity import SPLITS
from gnnq.data.splits import masks_from_ids, seeded_split_source, stratified_split
from gnnq.errors import DatasetError

EDGE_FILES = ("edges.txt", "edges.csv")
FEATURE_FILES = ("features.npy", "features.csv", "features.npz")
LABEL_FILES = ("labels.npy", "labels.csv")
SPLIT_FILES = ("train.txt", "val.txt", "test.txt")
NPY_MAGIC = b"\x93NUMPY"
NAME = "files"
TEXT_ENCODING = "utf-8-sig"  # UTF-8, with the byte-order mark a spreadsheet may write read as one, not as text
EXACT_INTEGERS = 2**53  # float values at or above this are not exact integers: named as read, never cast
FLOAT32_MAX = float(np.finfo(np.float32).max)
MAX_CLASSES_WITHOUT_NODES = 1024  # class ids may exceed the node count up to this (C classes cost O(C) memory)


def load_files(path: str | Path | None, train_frac: float, val_frac: float, seed: int) -> Graph:
    """Read the graph in directory ``path``; split it (seeded, stratified) when it has no split."""
    d = _directory(path)
    x_path, y_path, e_path = (
        _pick(d, FEATURE_FILES, "features"),
        _pick(d, LABEL_FILES, "labels"),
        _pick(d, EDGE_FILES, "edge list"),
    )
    x = read_sparse_features(x_path, NAME) if x_path.suffix == ".npz" else _features(_read_table(x_path), x_path)
    y, num_classes, multilabel = _labels(_read_table(y_path), y_path)
    n = x.shape[0]
    if y.shape[0] != n:
        raise DatasetError(
            f"{NAME}: {x_path.name} has {n} rows but {y_path.name} has {y.shape[0]}; both need one row per node "
            f"(in {d})"
        )
    edges = _edges(_read_table(e_path), e_path, n, x_path.name)
    split = _split(d, n, x_path.name)
    if split is None:
        split = stratified_split(y, train_frac, val_frac, seed)
        made = f"{seeded_split_source(train_frac, val_frac)}, or give {', '.join(SPLIT_FILES)} in {d}"
        split_sources = dict.fromkeys(SPLITS, made)
    else:
        split_sources = {s: f"{d / f} lists no node" for s, f in zip(SPLITS, SPLIT_FILES)}
    return Graph.from_split(
        NAME,
        canonical_edges(edges, n),
        x,
        y,
        split,
        num_classes,
        multilabel=multilabel,
        metric="micro_f1" if multilabel else "accuracy",
        sources={"features": str(x_path), "labels": str(y_path), **split_sources},
    )


def _directory(path: str | Path | None) -> Path:
    accepted = (
        f"{' or '.join(EDGE_FILES)}, {' or '.join(FEATURE_FILES)}, {' or '.join(LABEL_FILES)} (see docs/datasets.md)"
    )
    if not path:
        raise DatasetError(f"{NAME}: dataset.path is not set: point it at a directory holding {accepted}")
    d = Path(path).expanduser()
    if not d.is_dir():
        raise DatasetError(f"{NAME}: dataset.path {d} is not a directory: it must hold {accepted}")
    return d


def _pick(d: Path, names: tuple[str, ...], what: str) -> Path:
    found = [d / n for n in names if (d / n).is_file()]
    if not found:
        raise DatasetError(f"{NAME}: no {what} file in {d}: expected {' or '.join(names)}")
    if len(found) > 1:
        raise DatasetError(f"{NAME}: both {' and '.join(p.name for p in found)} in {d}: keep only one")
    return found[0]


# --- reading -----------------------------------------------------------------------------


def _read_table(path: Path) -> np.ndarray:
    """A numeric 2-D array (1-D for .npy vectors) from a .npy or text file."""
    try:
        if path.suffix == ".npy":
            return _read_npy(path)
        return _read_text(path)
    except DatasetError:
        raise
    except Exception as exc:
        raise DatasetError(f"{NAME}: cannot read {path} ({one_line(exc)})") from None


def _read_npy(path: Path) -> np.ndarray:
    """A numeric array from a .npy file; DatasetError saying what is wrong with anything else."""
    with open(path, "rb") as f:
        magic = f.read(len(NPY_MAGIC))
    if magic != NPY_MAGIC:  # np.load would try it as a pickle and blame "pickled data"
        raise DatasetError(
            f"{NAME}: {path} is not a valid .npy file (it does not start with the .npy magic bytes); write it "
            "with numpy.save"
        )
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc):  # a real .npy of Python objects
            raise DatasetError(f"{NAME}: {path} holds Python objects (dtype object); save a numeric array") from None
        raise DatasetError(
            f"{NAME}: {path} is not a valid .npy file ({one_line(exc)}); write it with numpy.save"
        ) from None
    if arr.dtype.kind not in "biuf":
        raise DatasetError(f"{NAME}: {path} holds dtype {arr.dtype}; save a numeric array (integers or floats)")
    return arr


def _read_text(path: Path) -> np.ndarray:
    import pandas as pd

    first = _first_data_line(path)
    if first is None:
        return np.empty((0, 0))
    sep = "," if "," in first else r"\s+"
    header = 0 if not any(_is_number(t) for t in _tokens(first, sep)) else None  # a header holds no number
    df = pd.read_csv(
        path, sep=sep, header=header, comment="#", skipinitialspace=True, skip_blank_lines=True, encoding=TEXT_ENCODING
    )
    values = df.to_numpy()
    if values.size == 0:
        return np.empty((0, values.shape[1]))
    if values.dtype.kind not in "biuf":
        bad = _first_bad_token(path, sep, header)
        if bad is None:  # every cell is a number; some integer is beyond int64 (pandas keeps those as objects)
            return values.astype(np.float64)
        raise DatasetError(f"{NAME}: {path} holds a value that is not a number: {bad}")
    if header is not None:
        warn(f"{NAME}: {path.name}: its first line {first.strip()!r} is not numbers; dropped 1 header line")
    return values


def _tokens(line: str, sep: str) -> list[str]:
    return [t for t in re.split(sep, line.strip()) if t]


def _data_lines(path: Path):
    """(line number, text without its comment) of every line that holds data."""
    with open(path, "r", encoding=TEXT_ENCODING, errors="replace") as f:
        for number, line in enumerate(f, start=1):
            line = line.split("#", 1)[0]
            if line.strip():
                yield number, line


def _first_data_line(path: Path) -> str | None:
    return next((line for _, line in _data_lines(path)), None)


def _first_bad_token(path: Path, sep: str, header: int | None) -> str | None:
    """Where the first token that is not a number is: "line 50001: 'x7'" (the header line not counted); None when
    every token is a number."""
    lines = _data_lines(path)
    if header is not None:
        next(lines, None)
    for number, line in lines:
        bad = [t for t in _tokens(line, sep) if not _is_number(t)]
        if bad:
            return f"line {number}: {bad[0]!r}"
    return None


def _as_written(path: Path, value) -> str:
    """``value`` as the file writes it, and where: "1e20 (line 7)" for a text file; "1e+20" for a .npy file."""
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    if path.suffix == ".npy":
        return shown
    first = _first_data_line(path) or ""
    sep = "," if "," in first else r"\s+"
    for number, line in _data_lines(path):
        for token in _tokens(line, sep):
            if _is_number(token) and float(token) == float(value):
                return f"{token} (line {number})"
    return shown


def _is_number(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


def _integers(arr: np.ndarray, path: Path, what: str) -> np.ndarray:
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise DatasetError(f"{NAME}: {path} must hold integer {what}")
        if arr.size and np.abs(arr).max() >= EXACT_INTEGERS:  # the cast below would wrap it
            value = arr.reshape(-1)[np.argmax(np.abs(arr).reshape(-1))]
            raise DatasetError(f"{NAME}: {path} holds {what[:-1]} {value:g}, far beyond any graph's size")
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise DatasetError(f"{NAME}: {path} holds {what[:-1]} {int(arr.max())}, far beyond any graph's size")
    return arr.astype(np.int64)


# --- the parts of a graph --------------------------------------------------------------------


def _features(arr: np.ndarray, path: Path) -> np.ndarray:
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise DatasetError(f"{NAME}: {path} must be an N x F table with at least one row, got shape {arr.shape}")
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 4:
        finite = np.isfinite(arr)
        too_big = finite & (np.abs(arr, where=finite, out=np.zeros(arr.shape)) > FLOAT32_MAX)
        if too_big.any():
            row, col = (int(i) for i in np.argwhere(too_big)[0])
            raise DatasetError(
                f"{NAME}: {path} holds {arr[row, col]:g} (node {row}, feature {col}), beyond float32's range "
                f"(±{FLOAT32_MAX:.1e}), in which gnnq trains: rescale the features"
            )
    return np.ascontiguousarray(arr, dtype=np.float32)


def _labels(arr: np.ndarray, path: Path) -> tuple[np.ndarray, int, bool]:
    """(y, num_classes, multilabel): one integer per node, or 0/1 multi-hot rows."""
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim == 1:
        y = _integers(arr, path, "class ids")
        if y.size and y.min() < 0:
            raise DatasetError(f"{NAME}: {path} holds a negative class id ({int(y.min())}); class ids must be 0..C-1")
        if y.size and y.max() >= max(y.size, MAX_CLASSES_WITHOUT_NODES):  # arrays of one entry per class follow
            raise DatasetError(
                f"{NAME}: {path} holds class id {int(y.max())}, but the graph has {y.size:,} nodes: class ids must be "
                f"0..C-1 with C at most the number of nodes (or {MAX_CLASSES_WITHOUT_NODES:,})"
            )
        return y, int(y.max()) + 1 if y.size else 0, False
    if arr.ndim == 2:
        if not np.isin(arr, (0, 1)).all():
            raise DatasetError(
                f"{NAME}: {path} has {arr.shape[1]} columns, so it must be 0/1 multi-hot rows (one column per class)"
            )
        return np.ascontiguousarray(arr, dtype=np.float32), int(arr.shape[1]), True
    raise DatasetError(f"{NAME}: {path} must hold N class ids or an N x C 0/1 table, got shape {arr.shape}")


def _edges(arr: np.ndarray, path: Path, n: int, rows_from: str) -> np.ndarray:
    if arr.size == 0:
        return np.empty((2, 0), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        cols = arr.shape[1] if arr.ndim == 2 else 1
        raise DatasetError(f"{NAME}: {path} must have two columns (src dst), found {cols}")
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and (arr.min() < 0 or arr.max() >= n):  # before a cast
        bad = arr.min() if arr.min() < 0 else arr.max()
        _out_of_range(
            float(bad) if bad != np.round(bad) or abs(bad) >= EXACT_INTEGERS else int(bad), path, n, rows_from
        )
    e = _integers(arr, path, "node ids")
    _check_ids(e, path, n, rows_from)
    return e.T


def _split(d: Path, n: int, rows_from: str):
    present = [name for name in SPLIT_FILES if (d / name).is_file()]
    if not present:
        return None
    if len(present) != len(SPLIT_FILES):
        absent = [name for name in SPLIT_FILES if name not in present]
        raise DatasetError(
            f"{NAME}: {d} has {', '.join(present)} but not {', '.join(absent)}: give all of "
            f"{', '.join(SPLIT_FILES)} or none"
        )
    ids = []
    for name in SPLIT_FILES:
        path = d / name
        arr = _read_table(path)
        if arr.ndim == 2 and arr.shape[1] > 1:
            raise DatasetError(f"{NAME}: {path} must hold one node id per line")
        part = _integers(arr.reshape(-1), path, "node ids")
        _check_ids(part, path, n, rows_from)
        ids.append(part)
    masks = masks_from_ids(n, *ids)
    for i in range(3):
        for j in range(i + 1, 3):
            if (masks[i] & masks[j]).any():
                node = int(np.flatnonzero(masks[i] & masks[j])[0])
                raise DatasetError(f"{NAME}: node {node} is in both {SPLIT_FILES[i]} and {SPLIT_FILES[j]} (in {d})")
    return masks


def _check_ids(ids: np.ndarray, path: Path, n: int, rows_from: str) -> None:
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        _out_of_range(int(ids.min()) if ids.min() < 0 else int(ids.max()), path, n, rows_from)


def _out_of_range(bad, path: Path, n: int, rows_from: str) -> None:
    raise DatasetError(
        f"{NAME}: {path} refers to node {_as_written(path, bad)}, but {rows_from} has {n} rows (node ids must be "
        f"0..{n - 1})"
    )
