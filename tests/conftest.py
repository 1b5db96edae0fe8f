"""Shared fixtures (real data copied to a writable place, isolated caches and run dirs), and the test
run's rules: which tests are ``quick``, skips for a missing extra or system service, the CI skip log."""

from __future__ import annotations

import dis
import importlib.util
import inspect
import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import pytest

# Triton kernels run on CPU tensors in the interpreter (CI has no GPU); set before triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parents[1]
_CANDIDATES = [os.environ.get("GNNQ_SHARED_DATASETS"), REPO.parent / "shared" / "datasets", "/work/shared/datasets"]
SHARED_DATASETS = next((Path(c) for c in _CANDIDATES if c and (Path(c) / "planetoid").is_dir()), Path(str(_CANDIDATES[1])))


def skip_or_fail(env_var: str, reason: str) -> NoReturn:
    """Skip a test whose extra or system service is missing; where ``env_var`` is set (.ci/run), fail instead."""
    if os.environ.get(env_var):
        pytest.fail(f"{env_var} is set, but {reason}")
    pytest.skip(f"{reason} ({env_var}=1 makes this a failure)")


# The optional extras of pyproject.toml that tests need, by the module each one installs.
EXTRAS = {"gpu": "triton", "slurm": "hydra_plugins.hydra_submitit_launcher"}


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


# ---- `pytest -m quick`: the inner loop, every test that starts no process and takes seconds at most ----
# A test is `multiprocess` when its function or one of its fixtures, or a function or class of tests/ that
# they use (followed transitively), names one of these: the helpers that run gnnq or torchrun in a subprocess
# or gloo ranks (run_distributed), or a module that starts processes. Every other test not slow nor HEAVY is `quick`.
# The slowest single-process tests (seconds per case even on an idle 2-core machine: model training,
# hypothesis searches, every sweep point or allowed combination composed, Triton's interpreter, iterative
# solvers) are left out of `quick` too, by id (a prefix: a parametrized test's every case). The rest of their
# modules stays in.
HEAVY = (
    "tests/test_datasets.py::test_synthetic_default_gcn_beats_mlp",
    "tests/test_codec.py::test_triton_kernels_equal_torch_bit_for_bit",
    "tests/test_admm_updates.py::test_update_z_out_converges",
    "tests/test_admm_updates.py::test_z_out_grad_matches_autograd_and_minimizer_is_kept",
    "tests/test_solver.py::test_greedy_within_two_percent_of_milp",
    "tests/test_configs.py::test_every_sweep_file_composes_at_every_point",
    "tests/test_configs.py::test_preflight_composes_every_sweep_point",
    "tests/test_config_properties.py::test_any_overrides_compose_or_fail_with_one_line_naming_the_key",
    "tests/test_config_properties.py::test_group_combinations_compose_exactly_when_allowed",
    "tests/test_config_properties.py::test_allowed_combinations_with_in_range_values_compose",
    "tests/test_config_properties.py::test_every_allowed_combination_of_model_parallel_quantizer_composes",
    "tests/test_minibatch.py::test_sampled_aggregate_is_unbiased",
)
PROCESS_HELPERS = {"run_distributed", "run_gnnq", "start_gnnq", "run_case"}
PROCESS_MODULES = {"subprocess", "multiprocessing", "torch.multiprocessing", "concurrent.futures"}


def _referenced(code) -> list[tuple[str, str]]:
    """(opcode, name) of every global, import and imported name in ``code`` and the code nested in it."""
    found = []
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "IMPORT_NAME", "IMPORT_FROM"):
            found.append((ins.opname, ins.argval))
    for const in code.co_consts:
        if inspect.iscode(const):
            found += _referenced(const)
    return found


def _starts_processes(obj, seen: set) -> bool:
    obj = getattr(getattr(obj, "hypothesis", None), "inner_test", None) or inspect.unwrap(obj)
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if inspect.isclass(obj):
        return any(_starts_processes(f, seen) for f in vars(obj).values() if inspect.isfunction(f))
    code, scope = getattr(obj, "__code__", None), getattr(obj, "__globals__", {})
    if code is None:
        return False
    module = None
    for op, name in _referenced(code):
        if op == "IMPORT_NAME":
            module = name
            if name in PROCESS_MODULES:
                return True
            continue
        if name in PROCESS_HELPERS:
            return True
        target = getattr(sys.modules.get(module or ""), name, None) if op == "IMPORT_FROM" else scope.get(name)
        if inspect.ismodule(target):
            if target.__name__ in PROCESS_MODULES:
                return True
        elif (inspect.isfunction(target) or inspect.isclass(target)) and target.__module__.split(".")[0] == "tests":
            if _starts_processes(target, seen):
                return True
    return False


def starts_processes(item) -> bool:
    """Whether ``item`` (a test), one of its fixtures or a tests/ helper they use starts a process."""
    info = getattr(item, "_fixtureinfo", None)
    fixtures = [d.func for defs in info.name2fixturedefs.values() for d in defs] if info else []
    seen: set = set()
    return any(_starts_processes(f, seen) for f in [item.function, *fixtures] if f.__module__.split(".")[0] == "tests")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if starts_processes(item):
            item.add_marker(pytest.mark.multiprocess)
        elif item.get_closest_marker("slow") is None and not item.nodeid.startswith(HEAVY):
            item.add_marker(pytest.mark.quick)


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
    if os.environ.get("GNNQ_SKIP_LOG"):
        Path(os.environ["GNNQ_SKIP_LOG"]).write_text("".join(f"{nodeid}\n" for nodeid in sorted(_SKIPPED)))


@pytest.fixture(scope="session")
def planetoid_root(tmp_path_factory) -> Path:
    """A writable data root holding the raw Cora and CiteSeer files (PyG Planetoid layout)."""
    src = SHARED_DATASETS / "planetoid"
    if not (src / "Cora" / "raw").is_dir():
        skip_or_fail("GNNQ_REQUIRE_SHARED_DATA", f"raw Planetoid files not found under {src} (set GNNQ_SHARED_DATASETS)")
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
