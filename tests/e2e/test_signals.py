"""Signals to a real ``gnnq`` and its ranks (issue 31 items 10-13, issue 32 item 5): every stop signal ends in
exit 128 + its number, one line, a failed record and no process left; a killed launcher takes its ranks along;
a rank stopped or killed first is the one named; a resumed run whose checkpoint no longer fits its config says so.

Each starts ``gnnq`` as a user would (tests/cli_helpers), waits for the moment (training, partitioning, the
ranks starting) and sends the signal.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import read_record, run_dirs, run_gnnq, start_gnnq
from tests.e2e.test_faults import LONG, rank_pid, run_pids, wait_for_training

pytestmark = pytest.mark.machine_wide  # signals sent at moments timed against the clock


def _gone_within(run_dir: Path, seconds: float) -> list[int]:
    """The run's processes still alive after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := run_pids(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _finish(proc, timeout: float = 90) -> tuple[str, float]:
    started = time.monotonic()
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return err, time.monotonic() - started


def _interrupted(proc, run_dir: Path, err: str, sig: signal.Signals) -> None:
    assert proc.returncode == 128 + sig, (proc.returncode, err)  # exited, not killed by the signal (negative)
    assert err.strip().splitlines()[-1].startswith(f"gnnq: interrupted ({sig.name}); all ranks stopped"), err
    assert "Traceback" not in err
    record = read_record(run_dir)
    assert record["status"] == "failed" and record["error"].startswith(f"interrupted ({sig.name})"), record["error"]
    assert _gone_within(run_dir, 10) == []


def test_sighup_to_the_launcher_stops_the_run_like_sigterm(tmp_path):
    runs = tmp_path / "runs"
    proc = start_gnnq(LONG, runs, tmp_path / "data")
    run_dir = wait_for_training(proc, runs)
    proc.send_signal(signal.SIGHUP)
    err, _ = _finish(proc)
    _interrupted(proc, run_dir, err, signal.SIGHUP)


def test_two_sigints_within_two_seconds_still_exit_130(tmp_path):
    runs = tmp_path / "runs"
    proc = start_gnnq(LONG, runs, tmp_path / "data")
    run_dir = wait_for_training(proc, runs)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    err, _ = _finish(proc)
    _interrupted(proc, run_dir, err, signal.SIGINT)


def test_ctrl_c_while_the_ranks_start_returns_within_5_s(tmp_path):
    runs = tmp_path / "runs"
    proc = start_gnnq(LONG, runs, tmp_path / "data")
    deadline = time.monotonic() + 120
    while not (dirs := run_dirs(runs)) or not any(b"gnnq.rank" in _cmd(p) for p in run_pids(dirs[0])):
        assert proc.poll() is None and time.monotonic() < deadline, "the ranks never started"
        time.sleep(0.05)
    (run_dir,) = dirs
    assert not (run_dir / "metrics.jsonl").exists()  # still starting
    proc.send_signal(signal.SIGINT)
    err, took = _finish(proc)
    assert took < 5, f"gnnq took {took:.1f} s to return after Ctrl-C"
    _interrupted(proc, run_dir, err, signal.SIGINT)


def _cmd(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_sigterm_during_partitioning_exits_143_with_a_failed_record(tmp_path):
    runs = tmp_path / "runs"
    big = ["logger=none", "dataset.num_nodes=300000", "dataset.avg_degree=20", "cluster.nproc=2", "trainer.epochs=1"]
    proc = start_gnnq(big, runs, tmp_path / "data")
    deadline = time.monotonic() + 240
    line = ""
    while "memory estimate: launcher" not in line:  # said just before METIS starts
        line = proc.stdout.readline()
        assert line or proc.poll() is None, "gnnq ended before partitioning"
        assert time.monotonic() < deadline, "partitioning never started"
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    err, _ = _finish(proc)
    (run_dir,) = run_dirs(runs)
    _interrupted(proc, run_dir, err, signal.SIGTERM)


def test_a_launcher_killed_by_sigkill_leaves_no_rank_behind(tmp_path):
    runs = tmp_path / "runs"
    proc = start_gnnq(LONG, runs, tmp_path / "data")
    run_dir = wait_for_training(proc, runs)
    assert len(run_pids(run_dir)) == 2  # the two ranks: no agent between them and the launcher
    proc.kill()
    proc.communicate()
    assert _gone_within(run_dir, 10) == []


def test_a_rank_stopped_by_sigterm_is_named_with_the_signal(tmp_path):
    runs = tmp_path / "runs"
    proc = start_gnnq(LONG, runs, tmp_path / "data")
    run_dir = wait_for_training(proc, runs)
    os.kill(rank_pid(run_dir, 1), signal.SIGTERM)
    err, _ = _finish(proc)
    assert proc.returncode == 1, err
    error = read_record(run_dir)["error"]
    assert error.startswith("rank 1 was stopped by SIGTERM from outside gnnq"), error
    assert err.strip().splitlines()[-1] == f"gnnq: error: {error}"
    assert _gone_within(run_dir, 10) == []


def test_the_rank_killed_first_is_named_even_before_the_first_epoch(tmp_path):
    """Rank 1 dies while the ranks start; rank 0, blocked waiting for it, is stopped within seconds."""
    runs = tmp_path / "runs"
    proc = start_gnnq(LONG, runs, tmp_path / "data")
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, "the ranks never started"
        dirs = run_dirs(runs)
        try:
            victim = rank_pid(dirs[0], 1) if dirs else None
        except AssertionError:
            victim = None
        if victim:
            break
        time.sleep(0.05)
    (run_dir,) = dirs
    os.kill(victim, signal.SIGKILL)
    err, took = _finish(proc)
    assert proc.returncode == 1, err
    assert took < 20, f"the job took {took:.0f} s to end after rank 1 died"
    error = read_record(run_dir)["error"]
    assert error.startswith("rank 1 was killed by SIGKILL"), error
    assert _gone_within(run_dir, 10) == []


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def test_resuming_with_a_changed_model_hidden_names_the_key_and_both_shapes(tmp_path):
    runs = tmp_path / "runs"
    args = [
        "logger=none",
        "dataset.num_nodes=1500",
        "model.hidden=32",
        "trainer.epochs=2",
        "trainer.checkpoint_every=1",
    ]
    res = run_gnnq(args, runs, tmp_path / "data", env={"GNNQ_FAULT_INJECT": "rank=0,epoch=2"})
    assert res.returncode == 1, res.stderr
    (run_dir,) = run_dirs(runs)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["model"]["hidden"] = 48
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    before = _digests(run_dir / "checkpoints")
    res = run_gnnq([f"resume={run_dir}"], runs, tmp_path / "data")
    assert res.returncode == 1, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert "does not match the run's config" in line and "[32" in line and "[48" in line, line
    assert "model." in line and "Traceback" not in res.stderr, res.stderr
    assert _digests(run_dir / "checkpoints") == before


@pytest.fixture(autouse=True)
def _no_fault_env(monkeypatch):
    monkeypatch.delenv("GNNQ_FAULT_INJECT", raising=False)
