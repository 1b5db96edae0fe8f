"""Secrets and exposure: the W&B key never reaches a file or the output; a local job listens on loopback only.

One real ``gnnq`` run (2 ranks, W&B offline) with a fake WANDB_API_KEY in its environment and HOME,
XDG dirs, W&B dirs and TMPDIR all pointed into the test's directory, so every file the run, W&B,
torchrun and the report write lands where the test scans it. While the job runs, the test records
the TCP addresses that any process of the job listens on.

Here: the real command-line runs and system services; the others are in `tests/unit/test_exposure.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_helpers import read_record, run_dirs
from tests.unit.test_exposure import _listening, _tree

SECRET = "gnnq-fake-secret-0123456789abcdef"
ARGS = [
    "logger=wandb",
    "logger.mode=offline",
    "dataset.num_nodes=600",
    "model.hidden=16",
    "trainer.epochs=3",
    "cluster.nproc=2",
]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _is_loopback(ip) -> bool:
    return ip.is_loopback or bool(getattr(ip, "ipv4_mapped", None) and ip.ipv4_mapped.is_loopback)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("secrets")
    dirs = {name: root / name for name in ("runs", "data", "home", "config", "cache", "wandb", "tmp", "report")}
    for d in dirs.values():
        d.mkdir()
    env = {
        **os.environ,
        "WANDB_API_KEY": SECRET,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "GNNQ_RUNS": str(dirs["runs"]),
        "GNNQ_DATA": str(dirs["data"]),
        "HOME": str(dirs["home"]),
        "XDG_CONFIG_HOME": str(dirs["config"]),
        "XDG_CACHE_HOME": str(dirs["cache"]),
        "TMPDIR": str(dirs["tmp"]),
        "WANDB_DIR": str(dirs["wandb"]),
        "WANDB_CONFIG_DIR": str(dirs["config"] / "wandb"),
        "WANDB_CACHE_DIR": str(dirs["cache"] / "wandb"),
        "WANDB_DATA_DIR": str(dirs["wandb"] / "data"),
    }
    env.pop("GNNQ_FAULT_INJECT", None)
    env.pop("GLOO_SOCKET_IFNAME", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gnnq.cli", *ARGS], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    listening: set[tuple] = set()
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        listening |= _listening(_tree(proc.pid))
        time.sleep(0.1)
    out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    assert proc.returncode == 0, err
    report = Path(sys.executable).parent / "gnnq-report"
    rep = subprocess.run(
        [str(report), str(dirs["runs"]), "--out", str(dirs["report"]), "--dashboard"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert rep.returncode == 0, rep.stderr
    return {"root": root, "dirs": dirs, "output": out + err + rep.stdout + rep.stderr, "listening": listening}


def test_the_wandb_key_is_in_no_written_file_and_no_output(job):
    (run_dir,) = run_dirs(job["dirs"]["runs"])
    assert read_record(run_dir)["status"] == "ok"
    written = [p for p in job["root"].rglob("*") if p.is_file()]
    names = {p.name for p in written}
    # the scan covers what matters: config, record, logs, metrics, Hydra's files, W&B's offline run, the dashboard
    assert {"config.yaml", "record.json", "metrics.jsonl", "overrides.yaml", "dashboard.html"} <= names, sorted(names)
    assert list((run_dir / "wandb").glob("offline-run-*/*.wandb")), "W&B wrote no offline run under the run dir"
    assert list((run_dir / "logs").iterdir()), "the run wrote no logs"
    leaked = [str(p) for p in written if SECRET.encode() in p.read_bytes()]
    assert leaked == [], f"the W&B API key was written to {leaked}"
    assert SECRET not in job["output"]


def test_a_local_job_listens_on_loopback_only(job):
    listening = job["listening"]
    assert listening, "no listening socket of the job was seen (the rendezvous stores live for the whole job)"
    exposed = sorted(f"{ip}:{port}" for ip, port in listening if not _is_loopback(ip))
    assert exposed == [], f"the local job listens beyond loopback on {exposed}"
