"""On-disk cache of per-rank parts, keyed by everything the parts depend on.

Layout: ``<data_root>/parts/<key>/part<r>.pt`` plus ``meta.json``. The key hashes the
dataset's content fingerprint, the partitioner and its seed, the number of parts and
the format version, so a change to any of them builds a fresh entry. Entries are
written to a temporary directory and renamed into place, so a killed build never
leaves a half-written entry behind. Parts are loaded with ``weights_only=True``.

meta.json records the sha256 of every part file and of its own content. ``prepare_parts``
(the launcher, before any rank starts) verifies an existing entry and rebuilds it, with a
one-line warning, when anything is missing, unreadable or fails its checksum;
``load_part`` (a rank) raises CacheError naming the file instead of using it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from gnnq.data.integrity import check_sha256, file_sha256, warn
from gnnq.errors import CacheError

if TYPE_CHECKING:
    from gnnq.data.graph import Graph
    from gnnq.data.part import Part

FORMAT_VERSION = 2  # 2: checksums in meta.json


def cache_key(dataset_fingerprint: str, partitioner: str, seed: int, nparts: int) -> str:
    ident = json.dumps(
        {
            "data": dataset_fingerprint,
            "partitioner": partitioner,
            "seed": seed,
            "nparts": nparts,
            "format": FORMAT_VERSION,
        },
        sort_keys=True,
    )
    return hashlib.sha256(ident.encode()).hexdigest()[:24]


def prepare_parts(
    graph: Graph,
    partitioner: str,
    seed: int,
    nparts: int,
    cache_root: Path,
    before_partition: Callable[[], None] | None = None,
) -> tuple[Path, dict]:
    """Return the cache directory holding the parts (building it if needed) and its metadata.

    ``before_partition`` runs only when the parts must be built, before the partitioner (a memory check)."""
    key = cache_key(graph.fingerprint(), partitioner, seed, nparts)
    entry = Path(cache_root) / key
    found = cached_parts(graph.fingerprint(), partitioner, seed, nparts, cache_root)
    if found is not None:
        return found

    if before_partition is not None:
        before_partition()
    import torch  # here, as below: a cached entry is found and checked without torch (the launcher's start)

    from gnnq.data.part import iter_parts
    from gnnq.data.partition import partition_nodes

    t0 = time.perf_counter()
    assignment = partition_nodes(graph.edge_index, graph.num_nodes, nparts, partitioner, seed)
    t_partition = time.perf_counter() - t0
    meta = {
        "key": key,
        "format": FORMAT_VERSION,
        "dataset": graph.name,
        "partitioner": partitioner,
        "seed": seed,
        "nparts": nparts,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "edge_cut": _edge_cut(graph.edge_index, assignment, nparts),
        "inner_nodes": [],
        "halo_nodes": [],
        "partition_time_s": round(t_partition, 4),
        "sha256": {},
    }
    Path(cache_root).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=cache_root))
    try:
        for p in iter_parts(graph, assignment, nparts):  # each part written as it is built, then dropped
            name = f"part{p.rank}.pt"
            torch.save(p.to_dict(), tmp / name)
            meta["inner_nodes"].append(p.num_inner)
            meta["halo_nodes"].append(p.num_halo)
            meta["sha256"][name] = file_sha256(tmp / name)
            del p
        meta["meta_sha256"] = _meta_digest(meta)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        try:
            os.rename(tmp, entry)
        except OSError:  # the entry exists: a concurrent builder's (keep it) or the corrupt one (replace it)
            try:
                return entry, verify_entry(entry, key, nparts)
            except CacheError:
                aside = Path(tempfile.mkdtemp(prefix=f".{key}.corrupt.", dir=cache_root))
                os.rename(entry, aside / key)
                os.rename(tmp, entry)
                shutil.rmtree(aside, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return entry, meta


def cached_parts(
    fingerprint: str, partitioner: str, seed: int, nparts: int, cache_root: Path, quiet: bool = False
) -> tuple[Path, dict] | None:
    """The verified cache entry for these parts and its metadata; None when there is none (unless ``quiet``, a
    warning when the one there fails its checks: prepare_parts then rebuilds it)."""
    key = cache_key(fingerprint, partitioner, seed, nparts)
    entry = Path(cache_root) / key
    if not entry.exists():
        return None
    try:
        return entry, verify_entry(entry, key, nparts)
    except CacheError as exc:
        if not quiet:
            warn(f"rebuilding the partition cache entry {entry}: {exc}")
        return None


def read_meta(entry: Path) -> dict:
    """``entry``'s meta.json, checked against the checksum of its content it carries."""
    path = Path(entry) / "meta.json"
    try:
        meta = json.loads(path.read_text())
    except OSError as exc:
        raise CacheError(f"{path} is unreadable ({exc.strerror or type(exc).__name__})") from None
    except ValueError as exc:  # not JSON, or not UTF-8
        raise CacheError(f"{path} is corrupt: not valid JSON ({type(exc).__name__})") from None
    if not isinstance(meta, dict) or meta.get("meta_sha256") != _meta_digest(meta):
        raise CacheError(f"{path} is corrupt: its content does not match the checksum it carries")
    return meta


def verify_entry(entry: Path, key: str, nparts: int) -> dict:
    """The metadata of a complete, intact entry; CacheError naming the first file that is not."""
    meta = read_meta(entry)
    if (meta.get("key"), meta.get("format"), meta.get("nparts")) != (key, FORMAT_VERSION, nparts):
        raise CacheError(f"{Path(entry) / 'meta.json'} describes another entry (key, format or number of parts differ)")
    for rank in range(nparts):
        _check_part(Path(entry), meta, rank)
    return meta


def load_part(entry: Path, rank: int) -> Part:
    """Rank ``rank``'s part, after checking it against the checksum recorded when the entry was built."""
    try:
        path = _check_part(Path(entry), read_meta(entry), rank)
    except CacheError as exc:
        raise CacheError(f"{exc}; not used (run gnnq again: the launcher rebuilds the entry)") from None
    import torch

    from gnnq.data.part import Part

    return Part.from_dict(torch.load(path, weights_only=True))


def _check_part(entry: Path, meta: dict, rank: int) -> Path:
    path = entry / f"part{rank}.pt"
    sums = meta.get("sha256")
    expected = sums.get(path.name) if isinstance(sums, dict) else None
    if not isinstance(expected, str):
        raise CacheError(f"{path} has no checksum in {entry / 'meta.json'}")
    check_sha256(path, expected, entry / "meta.json")
    return path


def _meta_digest(meta: dict) -> str:
    body = {k: v for k, v in meta.items() if k != "meta_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _edge_cut(edge_index: np.ndarray, assignment: np.ndarray, nparts: int) -> int:
    from gnnq.data.part import part_dtype

    owner = assignment.astype(part_dtype(nparts))  # one byte per edge, not eight, for each side
    return int(np.count_nonzero(owner[edge_index[0]] != owner[edge_index[1]]))
