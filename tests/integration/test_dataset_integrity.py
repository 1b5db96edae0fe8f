"""Corrupted dataset files are detected by sha256, never silently used (gnnq.data.dataset_checksums).

Raw files: Cora's are checked against gnnq's manifest of the published files, datasets outside it
(here a tiny ogbn-arxiv) against the hashes recorded when they were first read. Processed caches
(PyG's ``processed/``, gnnq's OGB arrays) are checked on every load and rebuilt when they fail. The
damage flips a bit and keeps the size: PyG's own readers load such files without complaint.

Here: the cases with real processes (gloo ranks, torchrun or gnnq);
the others are in `tests/unit/test_dataset_integrity.py`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gnnq.data.integrity import file_sha256
from gnnq.data.raw_manifest import PUBLISHED_SHA256
from tests.cli_helpers import read_record, run_dirs, run_gnnq
from tests.helpers import flip_byte


@pytest.fixture
def cora(tmp_path, planetoid_root) -> Path:
    """A data root holding a fresh copy of Cora's raw files, nothing processed yet."""
    root = tmp_path / "data"
    shutil.copytree(planetoid_root / "Cora" / "raw", root / "Cora" / "raw")
    return root


def test_the_cli_reports_a_corrupt_raw_file_in_one_line(cora, tmp_path):
    path = cora / "Cora" / "raw" / "ind.cora.allx"
    flip_byte(path, 0.7)
    res = run_gnnq(["logger=none", "dataset=cora", "dataset.download=false"], tmp_path / "runs", cora, timeout=120)
    assert res.returncode == 1
    errors = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr
    assert (
        str(path) in errors[0]
        and file_sha256(path) in errors[0]
        and PUBLISHED_SHA256["cora"]["raw/ind.cora.allx"] in errors[0]
    )
    record = read_record(run_dirs(tmp_path / "runs")[0])
    assert record["status"] == "failed" and str(path) in record["error"]
