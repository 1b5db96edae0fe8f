"""ogbn-arxiv and ogbn-products through OGB's ``NodePropPredDataset`` (numpy version).

OGB's loader has traps that this module keeps it away from:

* it asks ``input()`` when the dataset folder exists without ``RELEASE_v<version>.txt``
  and before downloading > 1 GB, and calls ``exit(-1)`` when declined: the folder and the
  files are checked here first, downloads are done here, and OGB only ever reads files
  that are already in place (with stdin empty, so a prompt fails instead of hanging);
* on a second load it ``torch.load``\\ s its own pickle (``processed/data_processed``), which
  torch >= 2.6 refuses under ``weights_only=True`` (and which should not be unpickled
  blindly anyway): the converted arrays are cached here as a plain ``.npz`` read with
  ``allow_pickle=False``, and a stale OGB pickle is removed before OGB is called again.

The raw files and that cache are checked against sha256 sums (gnnq.data.dataset_checksums): the
raw files when they are read, trusted on first use; the cache on every load, rebuilt if it fails.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from gnnq.data.dataset_checksums import CorruptRawFiles, DatasetChecksums, discard_corrupt
from gnnq.data.graph import Graph
from gnnq.data.loaders import (
    bounded_network,
    canonical_edges,
    dataset_lock,
    download_failed_hint,
    missing_files,
    missing_files_message,
    no_download_hint,
    one_line,
    quiet_and_non_interactive,
)
from gnnq.data.splits import masks_from_ids
from gnnq.errors import DatasetError

CACHE_FORMAT = 1
NUM_NODES = {"ogbn-arxiv": 169343, "ogbn-products": 2449029}
NAMES = tuple(NUM_NODES)


@dataclass(frozen=True)
class OgbLayout:
    """Where OGB keeps one dataset's files, from OGB's own ``master.csv``."""

    name: str
    dataset_dir: Path  # <root>/ogbn_arxiv
    version: int
    url: str
    download_name: str
    required: tuple[str, ...]  # relative to dataset_dir, including the RELEASE marker

    @property
    def release_marker(self) -> str:
        return f"RELEASE_v{self.version}.txt"

    @property
    def cache_name(self) -> str:  # relative to dataset_dir
        return f"processed/gnnq_arrays_v{CACHE_FORMAT}.npz"

    @property
    def cache_file(self) -> Path:
        return self.dataset_dir / self.cache_name


@lru_cache(maxsize=None)
def _meta(name: str) -> dict:
    import ogb.nodeproppred
    import pandas as pd

    master = Path(ogb.nodeproppred.__file__).parent / "master.csv"
    return dict(pd.read_csv(master, index_col=0, keep_default_na=False)[name])


def layout(name: str, root: Path) -> OgbLayout:
    meta = _meta(name)
    extra = [] if meta["additional node files"] == "None" else meta["additional node files"].split(",")
    raw = ["edge.csv.gz", "num-node-list.csv.gz", "num-edge-list.csv.gz", "node-feat.csv.gz", "node-label.csv.gz"]
    raw += [f"{f}.csv.gz" for f in extra]
    split = [f"split/{meta['split']}/{part}.csv.gz" for part in ("train", "valid", "test")]
    version = int(meta["version"])
    return OgbLayout(
        name=name,
        dataset_dir=root / name.replace("-", "_"),
        version=version,
        url=meta["url"],
        download_name=meta["download_name"],
        required=tuple(f"raw/{f}" for f in raw) + tuple(split) + (f"RELEASE_v{version}.txt",),
    )


def load_ogb(name: str, root: Path, download: bool) -> Graph:
    """Load ``ogbn-arxiv`` or ``ogbn-products`` from ``root`` with the official split."""
    lay = layout(name, root)
    if not lay.cache_file.is_file() and not download:
        _ensure_files(lay, download)  # fail fast, without creating any folder
    with dataset_lock(lay.dataset_dir):
        checks = DatasetChecksums(name, lay.dataset_dir)
        arrays = _read_cache(lay, checks)
        if arrays is None:
            _ensure_files(lay, download)
            raw_sums = _checked_raw(lay, checks, download)
            arrays = _read_with_ogb(lay)
            _write_cache(lay, arrays)
            checks.record(raw_sums, [lay.cache_name])
    return _to_graph(name, arrays)


def _checked_raw(lay: OgbLayout, checks: DatasetChecksums, download: bool) -> dict[str, str]:
    """The sha256 of the raw files, all as expected; with ``download`` the archive is fetched again
    when one is corrupt, else CorruptRawFiles names it."""
    try:
        return checks.check_raw(lay.required)
    except CorruptRawFiles as exc:
        if not download:
            raise
        discard_corrupt(exc)
    _ensure_files(lay, download)
    return checks.check_raw(lay.required, downloaded=True)


def _ensure_files(lay: OgbLayout, download: bool) -> None:
    missing = missing_files(lay.dataset_dir, lay.required)
    if not missing:
        return
    d = lay.dataset_dir
    if missing == [lay.release_marker]:
        raise DatasetError(
            f"{lay.name}: {d} has the data files but no {lay.release_marker} (an outdated or unfinished OGB download): "
            f"delete {d} to download version {lay.version} again, or create the marker if the files are version "
            f"{lay.version}"
        )
    if not download:
        raise DatasetError(missing_files_message(lay.name, d, lay.required, missing, no_download_hint()))
    try:
        _download(lay)
    except Exception as exc:
        raise DatasetError(
            missing_files_message(lay.name, d, lay.required, missing, download_failed_hint(one_line(exc)))
        ) from None
    still = missing_files(d, lay.required)
    if still:
        raise DatasetError(
            missing_files_message(
                lay.name, d, lay.required, still, download_failed_hint(f"the archive from {lay.url} lacks them")
            )
        )


def _download(lay: OgbLayout) -> None:
    """Fetch OGB's zip and move its content into the dataset folder (no prompts)."""
    from ogb.utils.url import download_url, extract_zip

    root = lay.dataset_dir.parent
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=f".{lay.dataset_dir.name}-download-") as tmp:
        with bounded_network(), quiet_and_non_interactive():
            archive = download_url(lay.url, tmp, log=False)
            extract_zip(archive, tmp, log=False)
        extracted = Path(tmp) / lay.download_name
        lay.dataset_dir.mkdir(parents=True, exist_ok=True)
        for item in extracted.iterdir():
            target = lay.dataset_dir / item.name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            shutil.move(str(item), str(target))


def _read_with_ogb(lay: OgbLayout) -> dict[str, np.ndarray]:
    from ogb.nodeproppred import NodePropPredDataset

    # OGB's own cache is a protocol-4 pickle that torch>=2.6 will not load; let OGB rebuild it.
    processed = lay.dataset_dir / "processed"
    (processed / "data_processed").unlink(missing_ok=True)
    processed.mkdir(exist_ok=True)  # OGB saves into it without creating it
    try:
        with quiet_and_non_interactive():
            dataset = NodePropPredDataset(name=lay.name, root=str(lay.dataset_dir.parent))
            split = dataset.get_idx_split()
        graph, labels = dataset[0]
        arrays = {
            "edge_index": np.asarray(graph["edge_index"], dtype=np.int64),
            "x": np.asarray(graph["node_feat"], dtype=np.float32),
            "y": _labels(labels),
            "train_idx": np.asarray(split["train"], dtype=np.int64),
            "valid_idx": np.asarray(split["valid"], dtype=np.int64),
            "test_idx": np.asarray(split["test"], dtype=np.int64),
        }
    except (Exception, SystemExit) as exc:
        raise DatasetError(
            f"{lay.name}: cannot read the OGB files in {lay.dataset_dir} ({one_line(exc)}); they look truncated "
            "or corrupt: "
            f"replace them, or delete {lay.dataset_dir} to download again"
        ) from None
    n = arrays["x"].shape[0]
    if arrays["y"].shape[0] != n or (arrays["edge_index"].size and arrays["edge_index"].max() >= n):
        raise DatasetError(
            f"{lay.name}: the OGB files in {lay.dataset_dir} disagree on the number of nodes ({n} feature rows)"
        )
    return arrays


def _labels(labels: np.ndarray) -> np.ndarray:
    """OGB's (N, 1) labels as int64 (N,); unlabeled (NaN) entries become 0 and stay outside the split."""
    y = np.asarray(labels).reshape(-1)
    if y.dtype.kind == "f":
        y = np.nan_to_num(y, nan=0.0)
    return y.astype(np.int64)


def _read_cache(lay: OgbLayout, checks: DatasetChecksums) -> dict[str, np.ndarray] | None:
    """The cached arrays; None (rebuild them) when absent, older than a raw file, or failing their checksum."""
    cache = lay.cache_file
    if not cache.is_file():
        return None
    sources = [lay.dataset_dir / f for f in lay.required]
    if any(p.is_file() and p.stat().st_mtime > cache.stat().st_mtime for p in sources):
        return None  # raw files changed since the cache was written
    if not checks.cache_intact([lay.cache_name]):
        return None
    try:
        with np.load(cache, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except Exception:
        return None  # unreadable cache: rebuild it from the raw files


def _write_cache(lay: OgbLayout, arrays: dict[str, np.ndarray]) -> None:
    cache = lay.cache_file
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(cache)


def _to_graph(name: str, arrays: dict[str, np.ndarray]) -> Graph:
    n = arrays["x"].shape[0]
    train, val, test = masks_from_ids(n, arrays["train_idx"], arrays["valid_idx"], arrays["test_idx"])
    return Graph(
        name=name,
        edge_index=canonical_edges(arrays["edge_index"], n),
        x=arrays["x"],
        y=arrays["y"],
        train_mask=train,
        val_mask=val,
        test_mask=test,
        num_classes=int(_meta(name)["num classes"]),
        multilabel=False,
        metric="accuracy",
    )


def ogb_evaluator_accuracy(name: str, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Accuracy as OGB's official ``Evaluator(name)`` computes it; labels of shape (N,) or (N, 1)."""
    from ogb.nodeproppred import Evaluator

    return float(Evaluator(name).eval({"y_true": _column(y_true), "y_pred": _column(y_pred)})["acc"])


def _column(a) -> np.ndarray:
    """A numpy array or torch tensor of labels as an (N, 1) numpy array."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a).reshape(-1, 1)
