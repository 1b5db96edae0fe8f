"""Shared fixtures: real data copied to a writable place, isolated caches and run dirs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# Triton kernels run on CPU tensors in the interpreter (CI has no GPU); set before triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parents[1]
_CANDIDATES = [os.environ.get("GNNQ_SHARED_DATASETS"), REPO.parent / "shared" / "datasets", "/work/shared/datasets"]
SHARED_DATASETS = next((Path(c) for c in _CANDIDATES if c and (Path(c) / "planetoid").is_dir()), Path(str(_CANDIDATES[1])))


@pytest.fixture(scope="session")
def planetoid_root(tmp_path_factory) -> Path:
    """A writable data root holding the raw Cora and CiteSeer files (PyG Planetoid layout)."""
    src = SHARED_DATASETS / "planetoid"
    if not (src / "Cora" / "raw").is_dir():
        message = f"raw Planetoid files not found under {src} (set GNNQ_SHARED_DATASETS)"
        if os.environ.get("GNNQ_REQUIRE_SHARED_DATA"):
            pytest.fail(message)
        pytest.skip(message)
    root = tmp_path_factory.mktemp("data")
    for name in ("Cora", "CiteSeer"):
        shutil.copytree(src / name / "raw", root / name / "raw")
    return root


@pytest.fixture(scope="session")
def report_runs(tmp_path_factory) -> Path:
    """Real runs for the report tests: two configurations (GCN, SAGE) x two seeds, 2 ranks, small graph."""
    from tests.cli_helpers import run_gnnq

    root = tmp_path_factory.mktemp("report")
    args = ["-m", "logger=none", "dataset.num_nodes=1500", "model.hidden=32", "trainer.epochs=3", "cluster.nproc=2",
            "model=gcn,sage", "trainer.seed=0,1"]  # fmt: skip
    res = run_gnnq(args, root / "runs", root / "data")
    assert res.returncode == 0, res.stderr
    return root / "runs"
