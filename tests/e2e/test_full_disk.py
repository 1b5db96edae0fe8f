"""A full filesystem where gnnq writes before any rank starts (issue 31 items 8, 9), on real small tmpfs mounts
(root only; GNNQ_REQUIRE_MOUNT=1 makes a missing permission a failure): the runs root and a dataset's processed
cache. One line naming the path and ENOSPC, nothing left behind, intact raw files neither blamed nor deleted."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from gnnq.data.loaders.pyg import load_pyg
from gnnq.errors import DatasetError
from gnnq.launch.run_dir import PlaceError, claim_run_dir
from tests.e2e.test_run_dir import mounted

pytestmark = pytest.mark.machine_wide  # a small tmpfs mounted to fill


def _fill(d: Path) -> None:
    with open(d / "fill", "wb", buffering=0) as f:  # unbuffered: nothing left to fail at close
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def test_a_runs_root_on_a_full_filesystem_is_named_and_nothing_is_left_there(tmp_path):
    with mounted(tmp_path / "full", ["-t", "tmpfs", "-o", "size=64k", "tmpfs"]) as full:
        _fill(full)
        with pytest.raises(PlaceError, match=r"GNNQ_RUNS: cannot write .*lock \(No space left on device \(ENOSPC\)\)"):
            claim_run_dir(full / "runs" / "2026-12-03" / "run", "GNNQ_RUNS")
        assert sorted(p.name for p in full.iterdir()) == ["fill"]


def test_a_full_disk_while_pyg_writes_processed_names_enospc_and_keeps_the_raw_files(tmp_path, planetoid_root):
    with mounted(tmp_path / "small", ["-t", "tmpfs", "-o", "size=2m", "tmpfs"]) as small:
        shutil.copytree(planetoid_root / "Cora" / "raw", small / "Cora" / "raw")
        raw = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (small / "Cora" / "raw").iterdir()}
        with pytest.raises(DatasetError) as err:
            load_pyg("cora", small, download=False)
        line = str(err.value)
        assert f"cannot write {small / 'Cora' / 'processed'} (No space left on device (ENOSPC))" in line
        assert "intact and kept" in line and "delete" not in line and "corrupt" not in line
        assert raw == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (small / "Cora" / "raw").iterdir()}
        assert not (small / "Cora" / "processed").exists(), "the half-written cache is gone"
