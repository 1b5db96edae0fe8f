"""Corrupted caches are detected by checksum, never silently used.

Partition cache (gnnq.data.part_cache): ``prepare_parts`` (the launcher, before ranks start) rebuilds a
damaged entry with a one-line warning; ``load_part`` (a rank) raises CacheError naming the file.
GA-MLP feature cache (gnnq.data.gamlp): a damaged ``<key>.npy`` or ``<key>.sha256`` is recomputed and
rewritten with a one-line warning. A clean cache is reused untouched.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnq.data import gamlp, part_cache, partition
from gnnq.data.part_cache import cache_key, load_part, prepare_parts
from gnnq.errors import CacheError
from tests.helpers import flip_byte, random_graph

NPARTS = 3


def _stamps(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted(directory.iterdir())}


def _leftovers(root: Path) -> list[str]:
    return [p.name for p in root.iterdir() if p.name.startswith(".")]


def _warnings(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("[gnnq] warning:")]


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _into_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


DAMAGE = {
    "truncated": _truncate,
    "byte flipped": flip_byte,
    "emptied": lambda p: p.write_bytes(b""),
    "deleted": lambda p: p.unlink(),
    "replaced by a directory": _into_directory,
}


def _assert_same_part(a, b) -> None:
    for f in dataclasses.fields(a):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        assert torch.equal(va, vb) if isinstance(va, torch.Tensor) else va == vb, f.name


@pytest.fixture
def partitions(monkeypatch):
    """Counts the partitioner runs, i.e. how often prepare_parts builds an entry."""
    calls = []
    real = partition.partition_nodes  # part_cache imports it when it builds an entry
    monkeypatch.setattr(partition, "partition_nodes", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    return calls


@pytest.fixture
def built(tmp_path, partitions):
    graph = random_graph()
    root = tmp_path / "parts"
    entry, meta = prepare_parts(graph, "metis", 0, NPARTS, root)
    parts = [load_part(entry, r) for r in range(NPARTS)]
    assert len(partitions) == 1
    return graph, root, entry, meta, parts


# --- partition cache --------------------------------------------------------------------------


def test_meta_records_a_checksum_of_every_part_and_of_itself(built):
    _, _, entry, meta, _ = built
    assert meta["format"] == part_cache.FORMAT_VERSION >= 2
    assert sorted(meta["sha256"]) == [f"part{r}.pt" for r in range(NPARTS)]
    assert all(len(v) == 64 for v in meta["sha256"].values()) and len(meta["meta_sha256"]) == 64
    assert json.loads((entry / "meta.json").read_text()) == meta


def test_a_clean_entry_is_reused_untouched(built, partitions, capsys):
    graph, root, entry, meta, parts = built
    stamps = _stamps(entry)
    capsys.readouterr()
    again, meta2 = prepare_parts(graph, "metis", 0, NPARTS, root)
    assert (again, meta2) == (entry, meta)
    assert len(partitions) == 1, "a clean entry was rebuilt"
    assert _stamps(entry) == stamps
    assert _warnings(capsys) == []
    for r in range(NPARTS):
        _assert_same_part(load_part(entry, r), parts[r])


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_part_is_refused_by_ranks_and_rebuilt_by_the_launcher(built, partitions, capsys, damage):
    graph, root, entry, meta, parts = built
    bad = entry / "part1.pt"
    DAMAGE[damage](bad)
    capsys.readouterr()

    with pytest.raises(CacheError) as excinfo:
        load_part(entry, 1)
    msg = str(excinfo.value)
    assert str(bad) in msg and "\n" not in msg and "not used" in msg
    _assert_same_part(load_part(entry, 0), parts[0])  # an intact file of the same entry still loads

    again, meta2 = prepare_parts(graph, "metis", 0, NPARTS, root)
    assert again == entry and len(partitions) == 2, "the damaged entry was not rebuilt"
    (warning,) = _warnings(capsys)
    assert str(bad) in warning and str(entry) in warning
    assert meta2["sha256"] == meta["sha256"], "the rebuilt parts differ from the originals"
    for r in range(NPARTS):
        _assert_same_part(load_part(entry, r), parts[r])
    assert _leftovers(root) == [] and [p.name for p in root.iterdir()] == [entry.name]


META_DAMAGE = {
    "a digit changed (still valid JSON)": lambda p: p.write_text(p.read_text().replace('"seed": 0', '"seed": 1')),
    "a checksum changed": lambda p: p.write_text(
        p.read_text().replace(json.loads(p.read_text())["sha256"]["part0.pt"], "0" * 64)
    ),
    "not JSON": _truncate,
    "not UTF-8": lambda p: p.write_bytes(b"\xff\xfe" + p.read_bytes()),
    "deleted": lambda p: p.unlink(),
}


@pytest.mark.parametrize("damage", META_DAMAGE, ids=list(META_DAMAGE))
def test_a_damaged_meta_json_is_refused_by_ranks_and_rebuilt_by_the_launcher(built, partitions, capsys, damage):
    graph, root, entry, meta, parts = built
    bad = entry / "meta.json"
    META_DAMAGE[damage](bad)
    capsys.readouterr()

    for r in range(NPARTS):
        with pytest.raises(CacheError) as excinfo:
            load_part(entry, r)
        assert str(bad) in str(excinfo.value) and "\n" not in str(excinfo.value)

    again, meta2 = prepare_parts(graph, "metis", 0, NPARTS, root)
    assert again == entry and len(partitions) == 2
    (warning,) = _warnings(capsys)
    assert str(bad) in warning
    assert json.loads(bad.read_text()) == meta2 and meta2["sha256"] == meta["sha256"]
    for r in range(NPARTS):
        _assert_same_part(load_part(entry, r), parts[r])
    assert _leftovers(root) == []


def test_an_entry_without_checksums_is_rebuilt(built, partitions, capsys):
    """A format-1 entry (meta.json without checksums) is never used as it is."""
    graph, root, entry, meta, parts = built
    old = {k: v for k, v in meta.items() if k not in ("sha256", "meta_sha256")}
    (entry / "meta.json").write_text(json.dumps(old | {"format": 1}, indent=1))
    capsys.readouterr()
    with pytest.raises(CacheError, match="meta.json"):
        load_part(entry, 0)
    prepare_parts(graph, "metis", 0, NPARTS, root)
    assert len(partitions) == 2 and len(_warnings(capsys)) == 1
    # and format 1 had its own key, so old entries are not even looked up
    fingerprint = graph.fingerprint()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(part_cache, "FORMAT_VERSION", 1)
        assert cache_key(fingerprint, "metis", 0, NPARTS) != entry.name


def test_an_entry_directory_without_meta_json_is_rebuilt(built, partitions, capsys):
    graph, root, entry, _, parts = built
    shutil.rmtree(entry)
    entry.mkdir()  # e.g. an interrupted manual copy
    (entry / "part0.pt").write_bytes(b"junk")
    capsys.readouterr()
    prepare_parts(graph, "metis", 0, NPARTS, root)
    assert len(partitions) == 2 and len(_warnings(capsys)) == 1
    _assert_same_part(load_part(entry, 0), parts[0])


# --- GA-MLP feature cache -----------------------------------------------------------------------


@pytest.fixture
def propagations(monkeypatch):
    calls = []
    real = gamlp.propagated_features
    monkeypatch.setattr(gamlp, "propagated_features", lambda *a: calls.append(a) or real(*a))
    return calls


@pytest.fixture
def features(tmp_path, propagations):
    graph = random_graph(num_nodes=40, num_edges=120, num_features=5)
    first = gamlp.cached_features(graph, 2, tmp_path)
    path = tmp_path / f"{gamlp.cache_key(graph, 2)}.npy"
    assert path.is_file() and path.with_suffix(".sha256").is_file() and len(propagations) == 1
    return graph, tmp_path, path, first


def test_clean_features_are_reused_untouched(features, propagations, capsys):
    graph, root, path, first = features
    stamps = _stamps(root)
    capsys.readouterr()
    assert np.array_equal(gamlp.cached_features(graph, 2, root), first)
    assert len(propagations) == 1, "clean features were recomputed"
    assert _stamps(root) == stamps and _warnings(capsys) == []


FEATURE_DAMAGE = {
    "npy truncated": (".npy", _truncate),
    "npy byte flipped in the data": (".npy", lambda p: flip_byte(p, 0.9)),
    "npy byte flipped in the header": (".npy", lambda p: flip_byte(p, 0.05)),
    "npy emptied": (".npy", lambda p: p.write_bytes(b"")),
    "npy deleted": (".npy", lambda p: p.unlink()),
    "checksum deleted": (".sha256", lambda p: p.unlink()),
    "checksum changed": (".sha256", lambda p: p.write_text("0" * 64)),
    "checksum not UTF-8": (".sha256", lambda p: p.write_bytes(b"\xff\xfe")),
}


@pytest.mark.parametrize("damage", FEATURE_DAMAGE, ids=list(FEATURE_DAMAGE))
def test_damaged_features_are_recomputed_and_rewritten(features, propagations, capsys, damage):
    graph, root, path, first = features
    suffix, fn = FEATURE_DAMAGE[damage]
    bad = path.with_suffix(suffix)
    fn(bad)
    capsys.readouterr()
    assert np.array_equal(gamlp.cached_features(graph, 2, root), first)
    assert len(propagations) == 2
    (warning,) = _warnings(capsys)
    assert bad.name in warning
    # rewritten intact: the next call reads it without a warning
    assert np.array_equal(gamlp.cached_features(graph, 2, root), first)
    assert len(propagations) == 2 and _warnings(capsys) == []
    assert _leftovers(root) == []


def test_features_of_the_wrong_shape_are_recomputed(features, propagations, capsys):
    """A well-formed file with a matching checksum but another array (e.g. copied over by hand)."""
    graph, root, path, first = features
    np.save(path, np.zeros((3, 3), dtype=np.float32))
    path.with_suffix(".sha256").write_text(gamlp.file_sha256(path))
    capsys.readouterr()
    assert np.array_equal(gamlp.cached_features(graph, 2, root), first)
    assert len(propagations) == 2 and "shape" in _warnings(capsys)[0]
