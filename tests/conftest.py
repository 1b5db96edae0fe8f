"""Shared fixtures (real data copied to a writable place, isolated caches and run dirs), and the test
run's rules: markers from the folder a test sits in, skips for a missing extra or system service, the CI skip log."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import NoReturn

import pytest

# Triton kernels run on CPU tensors in the interpreter (CI has no GPU); set before triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parents[1]
_CANDIDATES = [os.environ.get("GNNQ_SHARED_DATASETS"), REPO.parent / "shared" / "datasets", "/work/shared/datasets"]
SHARED_DATASETS = next(
    (Path(c) for c in _CANDIDATES if c and (Path(c) / "planetoid").is_dir()), Path(str(_CANDIDATES[1]))
)


def skip_or_fail(env_var: str, reason: str) -> NoReturn:
    """Skip a test whose extra or system service is missing; where ``env_var`` is set (.ci/run), fail instead."""
    if os.environ.get(env_var):
        pytest.fail(f"{env_var} is set, but {reason}")
    pytest.skip(f"{reason} ({env_var}=1 makes this a failure)")


# The optional extras of pyproject.toml that tests need, by the module each one installs.
EXTRAS = {
    "gpu": "triton",
    "slurm": "hydra_plugins.hydra_submitit_launcher",
    "tune": "hydra_plugins.hydra_optuna_sweeper",
}


def missing_extra(name: str) -> str | None:
    """Why the optional extra ``name`` is not usable here, or None."""
    if importlib.util.find_spec(EXTRAS[name]) is None:
        return f"needs the {name} extra ({EXTRAS[name]} is not installed): pip install -e '.[{name}]'"
    return None


def require_extra(name: str) -> None:
    """Skip without the optional extra ``name``; fail instead with GNNQ_REQUIRE_<NAME>_EXTRA=1."""
    reason = missing_extra(name)
    if reason:
        skip_or_fail(f"GNNQ_REQUIRE_{name.upper()}_EXTRA", reason)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs_extra"):
        require_extra(*mark.args)


# ---- Markers from the folder a test sits in: what it costs (tests/README.md) ----
# tests/unit: in-process, seconds; `quick`, its older name, leaves out its slow cases (`pytest -m quick` is
# `pytest tests/unit`). tests/integration: real processes on small graphs (gloo ranks, torchrun, gnnq).
# tests/e2e: the heavy real command lines and system services (CI's phase 2). A folder not named here
# (tests/reliability, tests/gpu) sets its own markers.
FOLDER_MARKERS = {"unit": ("unit", "quick"), "integration": ("integration",), "e2e": ("e2e",)}
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts if item.path.resolve().is_relative_to(TESTS) else ()
        for name in FOLDER_MARKERS.get(parts[0], ()) if len(parts) > 1 else ():
            if name != "quick" or item.get_closest_marker("slow") is None:
                item.add_marker(name)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the order it collects is the order files are handed out
        items.sort(key=lambda item: 0 if item.get_closest_marker("slow") else 1)


# ---- Under pytest-xdist (pyproject's addopts: `-n auto --dist loadfile --no-loadscope-reorder`): a file's tests
# share a worker, so its module fixtures (real runs, often a minute) are built once; the files holding slow cases
# are handed out first, so that no long one starts last and leaves the other workers idle. A test marked
# machine_wide (network namespaces, mounts, Slurm daemons, timeouts timed against the clock) holds a lock that
# every other such test waits for, on any worker and in any pytest session on this machine. ----
MACHINE_WIDE_LOCK = Path(tempfile.gettempdir()) / "gnnq-tests-machine-wide.lock"


@pytest.fixture(autouse=True)
def _one_machine_wide_test_at_a_time(request):
    if request.node.get_closest_marker("machine_wide") is None:
        yield
        return
    with open(MACHINE_WIDE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# ---- The skip log of .ci/run: with GNNQ_SKIP_LOG=FILE the ids of the skipped tests are written there, so that
# CI's second run (with the extras and system services installed) runs exactly those again. ----
_SKIPPED: set[str] = set()


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPPED.add(report.nodeid)


def pytest_collectreport(report):
    if report.skipped:  # a whole module skipped when collected (a module-level pytest.importorskip)
        _SKIPPED.add(report.nodeid)


def pytest_sessionfinish(session):
    if not os.environ.get("GNNQ_SKIP_LOG"):
        return
    log = Path(os.environ["GNNQ_SKIP_LOG"])
    worker = getattr(session.config, "workerinput", None)
    if worker is not None:  # a pytest-xdist worker: it alone saw its collection skips, so it writes its own part
        log = Path(f"{log}.{worker['workerid']}")
    else:
        for part in log.parent.glob(f"{log.name}.gw*"):  # the workers' parts (written before they said finished)
            _SKIPPED.update(part.read_text().splitlines())
            part.unlink()
    log.write_text("".join(f"{nodeid}\n" for nodeid in sorted(_SKIPPED)))


@pytest.fixture(scope="session")
def planetoid_root(tmp_path_factory) -> Path:
    """A writable data root holding the raw Cora and CiteSeer files (PyG Planetoid layout)."""
    src = SHARED_DATASETS / "planetoid"
    if not (src / "Cora" / "raw").is_dir():
        skip_or_fail(
            "GNNQ_REQUIRE_SHARED_DATA", f"raw Planetoid files not found under {src} (set GNNQ_SHARED_DATASETS)"
        )
    root = tmp_path_factory.mktemp("data")
    for name in ("Cora", "CiteSeer"):
        shutil.copytree(src / name / "raw", root / name / "raw")
    return root


@pytest.fixture(scope="session")
def report_runs(tmp_path_factory) -> Path:
    """Real runs for the report tests: two configurations (GCN, SAGE) x two seeds, 2 ranks, small graph."""
    from tests.cli_helpers import run_gnnq

    root = tmp_path_factory.mktemp("report")
    args = [
        "-m",
        "logger=none",
        "dataset.num_nodes=1500",
        "model.hidden=32",
        "trainer.epochs=3",
        "cluster.nproc=2",
        "model=gcn,sage",
        "trainer.seed=0,1",
    ]
    res = run_gnnq(args, root / "runs", root / "data", timeout=900)  # 4 runs; a hang guard, also on a busy machine
    assert res.returncode == 0, res.stderr
    return root / "runs"
