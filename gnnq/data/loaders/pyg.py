"""Datasets read through PyG's dataset classes: Planetoid, Reddit, Flickr, Yelp, AmazonProducts.

Files live under ``<data root>/<DirName>/raw`` (PyG's layout); PyG writes its processed
cache next to them in ``<DirName>/processed``. Both are checked against sha256 sums
(gnnq.data.dataset_checksums) before PyG reads them: a processed cache that fails is rebuilt,
a raw file that fails is reported or, with ``download``, downloaded again.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gnnq.data.dataset_checksums import CorruptRawFiles, DatasetChecksums, discard_corrupt, files_under
from gnnq.data.graph import Graph
from gnnq.data.integrity import warn
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
    write_failure,
)
from gnnq.errors import DatasetError, describe_os_error

_PLANETOID_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
_SAINT_FILES = ("adj_full.npz", "feats.npy", "class_map.json", "role.json")
FIXTURE_ENV = "GNNQ_FIXTURE_DATA"  # test-only: see _fixture_data


@dataclass(frozen=True)
class PygSpec:
    cls_name: str  # class in torch_geometric.datasets
    dir_name: str  # folder under the data root
    raw_files: tuple[str, ...]
    num_nodes: int
    multilabel: bool = False
    kwargs: dict = field(default_factory=dict)


def _planetoid(dir_name: str, num_nodes: int) -> PygSpec:
    raw = tuple(f"ind.{dir_name.lower()}.{part}" for part in _PLANETOID_PARTS)
    return PygSpec("Planetoid", dir_name, raw, num_nodes, kwargs={"name": dir_name, "split": "public"})


SPECS: dict[str, PygSpec] = {
    "cora": _planetoid("Cora", 2708),
    "citeseer": _planetoid("CiteSeer", 3327),
    "pubmed": _planetoid("PubMed", 19717),
    "reddit": PygSpec("Reddit", "Reddit", ("reddit_data.npz", "reddit_graph.npz"), 232965),
    "flickr": PygSpec("Flickr", "Flickr", _SAINT_FILES, 89250),
    "yelp": PygSpec("Yelp", "Yelp", _SAINT_FILES, 716847, multilabel=True),
    "amazon-products": PygSpec("AmazonProducts", "AmazonProducts", _SAINT_FILES, 1569960, multilabel=True),
}


def raw_dir(name: str, root: Path) -> Path:
    return root / SPECS[name].dir_name / "raw"


def load_pyg(name: str, root: Path, download: bool) -> Graph:
    """Load ``name`` (a key of :data:`SPECS`) with PyG from ``root``; DatasetError when it cannot."""
    spec = SPECS[name]
    raw = raw_dir(name, root)
    missing = missing_files(raw, spec.raw_files)
    if missing and not download:
        raise DatasetError(missing_files_message(name, raw, spec.raw_files, missing, no_download_hint()))
    with dataset_lock(root / spec.dir_name):
        return _load_locked(name, spec, root, raw, download)


def _load_locked(name: str, spec: PygSpec, root: Path, raw: Path, download: bool) -> Graph:
    folder = root / spec.dir_name
    checks = DatasetChecksums(name, folder)
    processed = folder / "processed"
    if processed.is_dir() and not checks.cache_intact(files_under(folder, "processed")):
        shutil.rmtree(processed)
    building = not processed.is_dir()  # then PyG reads the raw files: check those that are there first
    raw_names = [f"raw/{f}" for f in spec.raw_files]
    raw_sums = _checked_raw(checks, [n for n in raw_names if (folder / n).is_file()], download) if building else {}
    missing = missing_files(raw, spec.raw_files)
    verified = sorted(raw_sums) == sorted(raw_names)  # every raw file passed its sha256 just now
    data = _construct_or_explain(name, spec, root, raw, missing, processed_before=not building, verified=verified)
    if int(data.num_nodes) != spec.num_nodes and not _fixture_data(name, raw, int(data.num_nodes)):
        raise DatasetError(
            f"{name}: the files in {raw} give {int(data.num_nodes)} nodes, not {spec.num_nodes}; they look truncated "
            f"or from another dataset: replace them, or delete {raw.parent} to download again"
        )
    if building:
        try:  # PyG has downloaded the missing files (Planetoid: all of them again)
            raw_sums = checks.check_raw(raw_names, downloaded=True) if missing else raw_sums
        except CorruptRawFiles:
            shutil.rmtree(processed, ignore_errors=True)  # built from them: never to be used
            raise
        try:
            checks.record(raw_sums, files_under(folder, "processed"))
        except OSError as exc:
            raise DatasetError(_write_failed_message(name, folder / "gnnq_sha256.json", exc, raw)) from None
    return _to_graph(name, spec, data)


def _fixture_data(name: str, raw: Path, num_nodes: int) -> bool:
    """Test-only: with ``GNNQ_FIXTURE_DATA=1`` files of another node count than the published dataset's are read
    (with a warning), so that tests run tiny files in the dataset's real format through this same loader
    (tests/data_fixtures.py); every other check (checksums, PyG's reader, the graph's sanity) still applies."""
    if os.environ.get(FIXTURE_ENV) != "1":
        return False
    warn(f"{name}: reading {num_nodes} nodes from {raw}, not the published {SPECS[name].num_nodes} ({FIXTURE_ENV}=1)")
    return True


def _checked_raw(checks: DatasetChecksums, names: list[str], download: bool) -> dict[str, str]:
    """The sha256 of the raw files ``names``, all as expected; with ``download`` the corrupt ones are
    deleted (PyG downloads them again), else CorruptRawFiles names the first."""
    try:
        return checks.check_raw(names)
    except CorruptRawFiles as exc:
        if not download:
            raise
        return discard_corrupt(exc)


def _construct_or_explain(
    name: str, spec: PygSpec, root: Path, raw: Path, missing: list[str], processed_before: bool, verified: bool
):
    """PyG's dataset object for ``spec``; DatasetError naming what is missing or unreadable when PyG fails, or the
    file it could not write (a full disk: the raw files are not blamed)."""
    present_before = {p.name for p in raw.iterdir()} if raw.is_dir() else set()
    try:
        data = _construct(spec, root)[0]
    except Exception as exc:  # PyG raises whatever its download or reader hits
        still_missing = missing_files(raw, spec.raw_files)
        full = write_failure(exc)
        if full is not None:
            _remove_partial_downloads(raw, present_before)
            processed = raw.parent / "processed"
            if not processed_before:
                shutil.rmtree(processed, ignore_errors=True)  # half written: never to be read
            where = Path(full.filename) if full.filename else (raw if still_missing else processed)
            raise DatasetError(_write_failed_message(name, where, full, raw)) from None
        if verified and not missing:  # the raw files match their sha256: PyG's failure is not theirs
            raise DatasetError(
                f"{name}: PyG could not build its processed cache in {raw.parent / 'processed'} ({one_line(exc)}); "
                f"the raw files in {raw} match their sha256 and are kept"
            ) from None
        if missing and still_missing:
            _remove_partial_downloads(raw, present_before)
            raise DatasetError(
                missing_files_message(name, raw, spec.raw_files, still_missing, download_failed_hint(one_line(exc)))
            ) from None
        raise DatasetError(_unreadable_message(name, spec, raw, processed_before, exc)) from None
    return data


def _write_failed_message(name: str, where: Path, exc: OSError, raw: Path) -> str:
    """A write that found no room: the path and the errno; the raw files are not the problem and are kept."""
    return (
        f"{name}: cannot write {where} ({describe_os_error(exc)}); the raw files in {raw} are intact and kept: "
        f"free space on that filesystem, or move {raw.parent} to a root with room (dataset.root / GNNQ_DATA)"
    )


def _unreadable_message(name: str, spec: PygSpec, raw: Path, processed_before: bool, exc: Exception) -> str:
    culprit = _first_unreadable(raw, spec)
    if culprit is not None:
        what = f"{raw / culprit[0]} ({one_line(culprit[1])}); it looks truncated or corrupt: replace it"
    else:
        where = f"{raw} or {raw.parent / 'processed'}" if processed_before else str(raw)
        what = f"the files in {where} ({one_line(exc)}); they look truncated or corrupt: replace them"
    return f"{name}: cannot read {what}, or delete {raw.parent} to download again"


def _first_unreadable(raw: Path, spec: PygSpec) -> tuple[str, Exception] | None:
    """The first raw file that fails a standalone read, with its error (None: all read)."""
    for file_name in spec.raw_files:
        try:
            _probe(raw / file_name, spec)
        except Exception as exc:
            return file_name, exc
    return None


def _probe(path: Path, spec: PygSpec) -> None:
    if spec.cls_name == "Planetoid":
        from torch_geometric.io.planetoid import read_file

        prefix = spec.dir_name.lower()
        read_file(str(path.parent), prefix, path.name[len(f"ind.{prefix}.") :])
    elif path.suffix == ".npz":
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
        if bad is not None:
            raise ValueError(f"member {bad} fails its CRC check")
    elif path.suffix == ".npy":
        np.load(path, mmap_mode="r", allow_pickle=False)
    elif path.suffix == ".json":
        with open(path, encoding="utf-8") as f:
            json.load(f)


def _construct(spec: PygSpec, root: Path):
    import torch_geometric.datasets as pyg_datasets

    cls = getattr(pyg_datasets, spec.cls_name)
    dataset_root = root if spec.cls_name == "Planetoid" else root / spec.dir_name
    with bounded_network(), quiet_and_non_interactive():
        return cls(root=str(dataset_root), **spec.kwargs)


def _remove_partial_downloads(raw: Path, present_before: set[str]) -> None:
    """Drop files a failed download left behind so a later run does not take them as complete."""
    if not raw.is_dir():
        return
    for p in raw.iterdir():
        if p.name not in present_before and p.is_file():
            p.unlink(missing_ok=True)


def _to_graph(name: str, spec: PygSpec, data) -> Graph:
    num_nodes = int(data.num_nodes)
    y = data.y.numpy()
    if spec.multilabel:
        y = y.astype(np.float32)
        num_classes = int(y.shape[1])
    else:
        y = y.reshape(-1).astype(np.int64)
        num_classes = int(y.max()) + 1 if y.size else 0
    return Graph(
        name=name,
        edge_index=canonical_edges(data.edge_index.numpy(), num_nodes),
        x=np.ascontiguousarray(data.x.numpy(), dtype=np.float32),
        y=y,
        train_mask=data.train_mask.numpy().astype(bool),
        val_mask=data.val_mask.numpy().astype(bool),
        test_mask=data.test_mask.numpy().astype(bool),
        num_classes=num_classes,
        multilabel=spec.multilabel,
        metric="micro_f1" if spec.multilabel else "accuracy",
    )
