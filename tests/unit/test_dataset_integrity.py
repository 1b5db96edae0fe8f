"""Corrupted dataset files are detected by sha256, never silently used (gnnq.data.dataset_checksums).

Raw files: Cora's are checked against gnnq's manifest of the published files, datasets outside it
(here a tiny ogbn-arxiv) against the hashes recorded when they were first read. Processed caches
(PyG's ``processed/``, gnnq's OGB arrays) are checked on every load and rebuilt when they fail. The
damage flips a bit and keeps the size: PyG's own readers load such files without complaint.

Here: the in-process cases (no process started); the others are in `tests/integration/test_dataset_integrity.py`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

from gnnq.config.schema import DatasetConfig
from gnnq.data.dataset_checksums import SIDECAR
from gnnq.data.integrity import file_sha256
from gnnq.data.loaders import ogb as ogb_loader
from gnnq.data.loaders.pyg import SPECS
from gnnq.data.raw_manifest import PUBLISHED_SHA256
from gnnq.data.registry import load_dataset
from gnnq.errors import DatasetError
from tests.helpers import flip_byte, make_ogbn_arxiv

CORA_X = "raw/ind.cora.x"


def load(name: str, root: Path, download: bool = False):
    return load_dataset(DatasetConfig(name=name, root=str(root), download=download))


def warnings(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("[gnnq] warning:")]


def error_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert msg and "\n" not in msg, f"error message must be one line: {msg!r}"
    return msg


def stamps(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted(directory.iterdir())}


@pytest.fixture
def cora(tmp_path, planetoid_root) -> Path:
    """A data root holding a fresh copy of Cora's raw files, nothing processed yet."""
    root = tmp_path / "data"
    shutil.copytree(planetoid_root / "Cora" / "raw", root / "Cora" / "raw")
    return root


@pytest.fixture(scope="module")
def clean_cora(tmp_path_factory, planetoid_root):
    """Cora loaded from intact files in a data root of its own."""
    root = tmp_path_factory.mktemp("clean")
    shutil.copytree(planetoid_root / "Cora" / "raw", root / "Cora" / "raw")
    return load("cora", root)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def upstream(tmp_path, planetoid_root, monkeypatch) -> Path:
    """A local HTTP server with Cora's intact files; PyG's Planetoid downloads from it. Returns its folder."""
    from torch_geometric.datasets import Planetoid

    served = tmp_path / "upstream"
    shutil.copytree(planetoid_root / "Cora" / "raw", served)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(Planetoid, "url", f"http://127.0.0.1:{server.server_port}")
    yield served
    server.shutdown()
    server.server_close()


# --- raw files against the manifest (Cora) ------------------------------------------------------


def test_the_manifest_lists_every_raw_file_of_cora_and_citeseer(planetoid_root):
    for name, folder in (("cora", "Cora"), ("citeseer", "CiteSeer")):
        listed = PUBLISHED_SHA256[name]
        assert sorted(listed) == sorted(f"raw/{f}" for f in SPECS[name].raw_files)
        assert all(file_sha256(planetoid_root / folder / rel) == sha for rel, sha in listed.items())


def test_a_raw_file_with_a_flipped_bit_is_reported_with_both_hashes(cora):
    path = cora / "Cora" / CORA_X
    flip_byte(path)
    from torch_geometric.io.planetoid import read_file

    read_file(str(path.parent), "cora", "x")  # PyG reads it: only the checksum can tell
    with pytest.raises(DatasetError) as e:
        load("cora", cora)
    msg = error_line(e)
    assert msg.startswith(f"cora: {path} is corrupt")
    assert PUBLISHED_SHA256["cora"][CORA_X] in msg and file_sha256(path) in msg
    assert "manifest" in msg and "dataset.download=true" in msg
    assert not (cora / "Cora" / "processed").exists(), "nothing may be built from a corrupt file"


def test_with_download_a_corrupt_raw_file_is_downloaded_again(cora, upstream, clean_cora, capsys):
    path = cora / "Cora" / CORA_X
    flip_byte(path)
    graph = load("cora", cora, download=True)
    (warning,) = warnings(capsys)
    assert str(path) in warning and "download it again" in warning
    assert file_sha256(path) == PUBLISHED_SHA256["cora"][CORA_X]
    assert graph.fingerprint() == clean_cora.fingerprint()


def test_a_corrupt_download_is_reported_and_nothing_built_from_it_is_kept(cora, upstream):
    flip_byte(upstream / "ind.cora.x")  # the server's copy is damaged too
    path = cora / "Cora" / CORA_X
    flip_byte(path, 0.3)
    with pytest.raises(DatasetError) as e:
        load("cora", cora, download=True)
    msg = error_line(e)
    assert f"{path} was downloaded again, but its sha256 {file_sha256(path)}" in msg
    assert not (cora / "Cora" / "processed").exists()


# --- raw files trusted on first use (ogbn-arxiv) ------------------------------------------------


def test_raw_files_outside_the_manifest_are_recorded_on_first_use_then_checked(tmp_path):
    make_ogbn_arxiv(tmp_path)
    folder = tmp_path / "ogbn_arxiv"
    load("ogbn-arxiv", tmp_path)
    sidecar = folder / SIDECAR
    recorded = json.loads(sidecar.read_text())["raw"]
    assert sorted(recorded) == sorted(ogb_loader.layout("ogbn-arxiv", tmp_path).required)

    path = folder / "raw" / "node-feat.csv.gz"
    make_ogbn_arxiv(tmp_path / "other", seed=1)  # a well-formed file with other features
    shutil.copy(
        tmp_path / "other" / "ogbn_arxiv" / "raw" / "node-feat.csv.gz", path
    )  # newer than the cache: read again
    with pytest.raises(DatasetError) as e:
        load("ogbn-arxiv", tmp_path)
    msg = error_line(e)
    assert str(path) in msg and recorded["raw/node-feat.csv.gz"] in msg and file_sha256(path) in msg
    assert f"recorded in {sidecar}" in msg and f"delete {sidecar}" in msg

    sidecar.unlink()  # the user replaced it on purpose: trust the new file
    load("ogbn-arxiv", tmp_path)
    assert json.loads(sidecar.read_text())["raw"]["raw/node-feat.csv.gz"] == file_sha256(path)


# --- processed caches ---------------------------------------------------------------------------


def test_a_clean_load_hashes_only_the_processed_cache(cora, monkeypatch):
    load("cora", cora)
    hashed = []
    real = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda f, *a: hashed.append(Path(f.name).name) or real(f, *a))
    load("cora", cora)
    assert sorted(hashed) == ["data.pt", "pre_filter.pt", "pre_transform.pt"], "raw files are not read, so not hashed"


def _damage_processed(what: str, folder: Path) -> Path:
    """Damage Cora's processed cache or its record; returns the file named in the warning."""
    processed = folder / "processed"
    if what == "data.pt bit flipped":
        flip_byte(processed / "data.pt")
        return processed / "data.pt"
    if what == "pre_transform.pt bit flipped (PyG unpickles it)":
        flip_byte(processed / "pre_transform.pt", 0.9)
        return processed / "pre_transform.pt"
    if what == "a file added":
        (processed / "extra.pt").write_bytes(b"not from PyG")
        return folder / SIDECAR
    if what == "record bit flipped":
        flip_byte(folder / SIDECAR, 0.7)
        return folder / SIDECAR
    if what == "record deleted (a cache from before checksums)":
        (folder / SIDECAR).unlink()
        return folder / SIDECAR
    raise ValueError(what)


PROCESSED_DAMAGE = [
    "data.pt bit flipped",
    "pre_transform.pt bit flipped (PyG unpickles it)",
    "a file added",
    "record bit flipped",
    "record deleted (a cache from before checksums)",
]


@pytest.mark.parametrize("damage", PROCESSED_DAMAGE)
def test_a_damaged_processed_cache_is_rebuilt(cora, clean_cora, capsys, damage):
    folder = cora / "Cora"
    load("cora", cora)
    named = _damage_processed(damage, folder)
    capsys.readouterr()

    graph = load("cora", cora)
    assert graph.fingerprint() == clean_cora.fingerprint()
    found = warnings(capsys)
    assert found and str(named) in found[0] and "rebuilding the processed cache of cora" in found[-1], found
    assert not (folder / "processed" / "extra.pt").exists()

    before = stamps(folder / "processed")  # rebuilt and recorded: the next load uses it as it is
    assert load("cora", cora).fingerprint() == clean_cora.fingerprint()
    assert warnings(capsys) == [] and stamps(folder / "processed") == before


def _tensors(obj, at: str = "") -> dict:
    """Every tensor in PyG's nested (dict, tuple) processed-file structure, by its path."""
    if isinstance(obj, torch.Tensor):
        return {at: obj}
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (tuple, list)) else []
    return {k: v for key, value in items for k, v in _tensors(value, f"{at}/{key}").items()}


def test_pyg_itself_would_load_the_damaged_processed_file(cora, clean_cora):
    """Why the check is needed: PyG reads a data.pt with a flipped bit and returns other numbers."""
    from torch_geometric.io import fs

    load("cora", cora)
    data_pt = cora / "Cora" / "processed" / "data.pt"
    clean = _tensors(fs.torch_load(str(data_pt)))
    flip_byte(data_pt)
    damaged = _tensors(fs.torch_load(str(data_pt)))  # no error
    assert "/0/x" in clean and clean.keys() == damaged.keys()
    assert all(damaged[k].shape == t.shape and damaged[k].dtype == t.dtype for k, t in clean.items()), (
        "same arrays, same shapes"
    )
    changed = {k: int((damaged[k] != t).sum()) for k, t in clean.items() if not torch.equal(damaged[k], t)}
    assert list(changed.values()) == [1], f"one value must differ, silently: {changed}"


def test_a_damaged_ogb_array_cache_is_rebuilt(tmp_path, capsys):
    make_ogbn_arxiv(tmp_path)
    clean = load("ogbn-arxiv", tmp_path)
    cache = ogb_loader.layout("ogbn-arxiv", tmp_path).cache_file
    flip_byte(cache, 0.7)
    capsys.readouterr()
    assert load("ogbn-arxiv", tmp_path).fingerprint() == clean.fingerprint()
    (warning,) = warnings(capsys)
    assert str(cache) in warning
    assert load("ogbn-arxiv", tmp_path).fingerprint() == clean.fingerprint()
    assert warnings(capsys) == []
