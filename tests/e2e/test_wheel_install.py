"""A non-editable install: the wheel built from the checkout holds the top-level conf/ and sweeps/ (as gnnq.conf and
gnnq.sweeps), and its ``gnnq``, run from another directory with nothing of the checkout on the path, composes and runs
the main job."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.cli_helpers import gnnq_env, read_record, run_dirs

REPO = Path(__file__).resolve().parents[2]


def _shipped(top: str) -> set[str]:
    return {f"gnnq/{p.relative_to(REPO).as_posix()}" for p in (REPO / top).rglob("*.yaml")}


def test_a_wheel_install_runs_the_main_job_from_another_directory(tmp_path):
    wheels, target, elsewhere = tmp_path / "wheels", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)]
    built = subprocess.run(build, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("gnnq-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "gnnq/conf/config.yaml" in names and "gnnq/sweeps/peers.yaml" in names
    assert _shipped("conf") | _shipped("sweeps") <= names  # every config group file and sweep, subfolders too
    assert {f"{p.relative_to(REPO).as_posix()}" for p in (REPO / "gnnq").rglob("*.py")} <= names  # every module

    install = [*pip, "install", "--no-deps", "--target", str(target), str(wheel)]
    installed = subprocess.run(install, capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    env = gnnq_env(tmp_path / "runs", tmp_path / "data", {"PYTHONPATH": str(target)})  # the installed copy only

    def python(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=elsewhere, timeout=300)

    where = python("-c", "import gnnq, gnnq.config.compose as c; print(gnnq.__file__, c.CONF_DIR, c.SWEEPS_DIR)")
    assert where.returncode == 0, where.stderr
    module, conf, sweeps = where.stdout.split()
    assert Path(module).is_relative_to(target) and Path(conf) == target / "gnnq" / "conf"
    assert Path(sweeps) == target / "gnnq" / "sweeps"
    job = python("-m", "gnnq.cli", "--cfg", "job", "logger=none")
    assert job.returncode == 0, job.stderr
    assert "dataset:" in job.stdout and "name: synthetic" in job.stdout
    # `--config-dir sweeps` names the shipped sweeps from any directory
    sweep = python("-m", "gnnq.cli", "--config-dir", "sweeps", "--config-name", "bitwidths", "--cfg", "job")
    assert sweep.returncode == 0, sweep.stderr

    gnnq = target / "bin" / "gnnq"  # the console script the wheel installs
    cmd = [str(gnnq)] if os.access(gnnq, os.X_OK) else [sys.executable, "-m", "gnnq.cli"]
    args = ["logger=none", "trainer.epochs=1", "dataset.num_nodes=300", "model.hidden=8", "cluster.nproc=2"]
    res = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, cwd=elsewhere, timeout=600)
    assert res.returncode == 0, res.stderr
    (run,) = run_dirs(tmp_path / "runs")
    assert read_record(run)["status"] == "ok"
