"""Faults in a running job, with the real CLI, torchrun and gloo: a rank killed by SIGKILL, a rank that hangs.

Each test starts ``gnnq`` as a user would, waits until training runs (rank 0 wrote a row of
metrics.jsonl), then breaks one rank and checks what the user gets: a prompt non-zero exit, a
record marked failed that names the rank and the cause, and no process of the run left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli_helpers import read_record, run_dirs, run_gnnq, start_gnnq

SMALL = ["logger=none", "dataset.num_nodes=1500", "model.hidden=32", "cluster.nproc=2"]
LONG = [*SMALL, "trainer.epochs=100000"]


def run_pids(run_dir: Path) -> list[int]:
    """Live processes whose arguments name ``run_dir``: torchrun (it holds the workers' arguments) and the ranks."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
        except OSError:
            continue  # exited meanwhile
        if str(run_dir).encode() in args:
            pids.append(int(proc.name))
    return pids


def rank_pid(run_dir: Path, rank: int) -> int:
    """The pid of the worker process of ``rank`` in ``run_dir`` (from its environment's RANK)."""
    for pid in run_pids(run_dir):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # exited meanwhile
        if b"gnnq.rank" in cmdline and f"RANK={rank}".encode() in environ:
            return pid
    raise AssertionError(f"no worker process of rank {rank} for {run_dir}")


def wait_for_training(proc: subprocess.Popen, runs: Path, timeout_s: float = 120) -> Path:
    """The run dir, once rank 0 has written its first metrics row."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"gnnq exited before training started: {proc.communicate()[1]}"
        assert time.monotonic() < deadline, "training never started"
        rows = [p for p in runs.rglob("metrics.jsonl") if p.stat().st_size]
        if rows:
            return rows[0].parent
        time.sleep(0.2)


def assert_nothing_left(run_dir: Path) -> None:
    left = run_pids(run_dir)
    assert left == [], f"processes of the run outlived it: {left}"


def torchrun_pid(run_dir: Path) -> int:
    (pid,) = [p for p in run_pids(run_dir) if b"gnnq.launch.loopback_run" in Path(f"/proc/{p}/cmdline").read_bytes()]
    return pid


@pytest.mark.parametrize("victim", [1, 0])
def test_a_rank_killed_by_sigkill_fails_the_job_fast(tmp_path, victim):
    runs = tmp_path / "runs"
    proc = start_gnnq(LONG, runs, tmp_path / "data")
    try:
        run_dir = wait_for_training(proc, runs)
        os.kill(rank_pid(run_dir, victim), signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=90)
        elapsed = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert elapsed < 60, f"the job took {elapsed:.0f} s to fail after the kill"
    record = read_record(run_dir)
    assert record["status"] == "failed"
    assert f"rank {victim} was killed by SIGKILL" in record["error"], record["error"]
    assert f"rank {victim} was killed by SIGKILL" in err and "Traceback" not in err
    assert_nothing_left(run_dir)


def test_torchrun_killed_by_sigkill_takes_its_ranks_along(tmp_path):
    runs = tmp_path / "runs"
    proc = start_gnnq(LONG, runs, tmp_path / "data")
    try:
        run_dir = wait_for_training(proc, runs)
        os.kill(torchrun_pid(run_dir), signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    record = read_record(run_dir)
    assert record["status"] == "failed" and "torchrun was killed by SIGKILL" in record["error"], record["error"]
    assert_nothing_left(run_dir)


def test_a_hanging_rank_fails_the_job_after_the_collective_timeout(tmp_path):
    timeout_s = 10
    runs = tmp_path / "runs"
    hang = {"GNNQ_FAULT_INJECT": "rank=1,epoch=3,mode=hang"}
    proc = start_gnnq([*LONG, f"cluster.timeout_s={timeout_s}"], runs, tmp_path / "data", env=hang)
    try:
        run_dir = wait_for_training(proc, runs)  # rank 1 stops taking part two epochs later
        started = time.monotonic()
        _, err = proc.communicate(timeout=timeout_s + 60)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert timeout_s - 1 < elapsed < timeout_s + 30, f"the job failed {elapsed:.0f} s after the hang, with cluster.timeout_s={timeout_s}"
    error = read_record(run_dir)["error"]
    assert read_record(run_dir)["status"] == "failed"
    assert error.startswith("rank 1 stopped taking part: it had been outside any collective for "), error
    assert "(at gnnq/train/faults.py:" in error and "when rank 0's collective timed out waiting for it; rank 0 failed" in error
    assert "Timed out" in error
    assert_nothing_left(run_dir)


def test_a_stopped_rank_is_named_not_the_peer_whose_collective_timed_out(tmp_path):
    """SIGSTOP freezes rank 1 (its heartbeat too); rank 0's collective times out; torchrun then needs its
    30 s grace before it SIGKILLs the stopped rank."""
    timeout_s = 10
    runs = tmp_path / "runs"
    proc = start_gnnq([*LONG, f"cluster.timeout_s={timeout_s}"], runs, tmp_path / "data")
    try:
        run_dir = wait_for_training(proc, runs)
        os.kill(rank_pid(run_dir, 1), signal.SIGSTOP)
        _, err = proc.communicate(timeout=timeout_s + 120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    record = read_record(run_dir)
    assert record["status"] == "failed"
    assert record["error"].startswith("rank 1 stopped responding: its heartbeat stopped "), record["error"]
    assert "s before rank 0's collective timed out (its process was stopped, e.g. by SIGSTOP, or frozen" in record["error"]
    assert err.strip().splitlines()[-1] == f"gnnq: error: {record['error']}"
    assert_nothing_left(run_dir)


def test_a_timeout_without_telling_heartbeats_says_so(tmp_path):
    """Every peer was in a collective until the end: which one stopped cannot be told, and the line says so."""
    from gnnq.launch.failure import describe_failure

    run_dir = _failed_job(tmp_path, [{"rank": 0, "message": "RuntimeError: Timed out waiting 10000ms for recv", "time": 100.0}])
    (run_dir / ".gnnq" / "heartbeat-rank1.json").write_text(
        json.dumps({"rank": 1, "time": 99.5, "communicating": True, "since": 80.0, "where": "gnnq/comm/halo.py:1 in x"}))
    assert describe_failure(run_dir, 1).startswith(
        "rank 0 failed: RuntimeError: Timed out waiting 10000ms for recv; a peer stopped taking part in collectives for "
        "cluster.timeout_s, which one could not be told")  # fmt: skip


def test_a_multirun_goes_on_after_a_point_whose_rank_was_killed(tmp_path):
    runs = tmp_path / "runs"
    proc = start_gnnq(["-m", *SMALL, "trainer.epochs=100000,3"], runs, tmp_path / "data")  # the first point runs until killed
    try:
        first = wait_for_training(proc, runs)
        os.kill(rank_pid(first, 1), signal.SIGKILL)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    records = {d: read_record(d) for d in run_dirs(runs)}
    assert [r["config"]["trainer"]["epochs"] for r in records.values()] == [100000, 3]
    assert records[first]["status"] == "failed" and "rank 1 was killed by SIGKILL" in records[first]["error"]
    (second,) = [d for d in records if d != first]
    assert records[second]["status"] == "ok"
    assert f"1 of 2 runs failed: {first}" in err.splitlines()[-1], err
    assert_nothing_left(first)


# --- which rank is named: describe_failure on the files a failed job leaves --------------------

# torchrun's failure summary as it wrote it for the SIGKILL test above (rank 1 killed, rank 0 lost it)
SUMMARY = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
gnnq.rank FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-30_15:50:30
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 27667)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 27667
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-30_15:50:30
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 27666)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""
RESET = "RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:8591: Connection reset by peer."


def _failed_job(tmp_path: Path, reports: list[dict]) -> Path:
    from gnnq.track.files import write_json_atomic

    (tmp_path / "logs").mkdir(parents=True)
    (tmp_path / "logs" / "torchrun.log").write_text(SUMMARY)
    for r in reports:
        write_json_atomic(tmp_path / ".gnnq" / f"error-rank{r['rank']}.json", {"traceback": "", "stopped": False, **r})
    return tmp_path


def test_a_killed_rank_is_named_before_the_peer_that_lost_its_connection(tmp_path):
    from gnnq.launch.failure import describe_failure

    run_dir = _failed_job(tmp_path, [{"rank": 0, "message": RESET, "time": 1.0}])
    assert describe_failure(run_dir, 1).startswith("rank 1 was killed by SIGKILL without reporting an error; rank 0 then lost")


def test_an_error_a_rank_reported_is_named_before_a_rank_killed_while_stopping(tmp_path):
    """torchrun SIGKILLs a rank that ignores its SIGTERM for 30 s: the cause is the error that started it."""
    from gnnq.launch.failure import describe_failure

    run_dir = _failed_job(tmp_path, [{"rank": 0, "message": "RuntimeError: CUDA out of memory", "time": 1.0}])
    assert describe_failure(run_dir, 1).startswith("rank 0 failed: RuntimeError: CUDA out of memory (traceback in")


def _elastic_error(monkeypatch, path: Path, exc: Exception) -> None:
    """The error file torch elastic's @record writes for a rank that raised ``exc`` (its own ErrorHandler)."""
    from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

    path.parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    try:
        raise exc
    except type(exc) as raised:
        ErrorHandler().record_exception(raised)


def test_a_rank_only_torch_elastic_recorded_is_named_with_its_exception(tmp_path, monkeypatch):
    """No gnnq error file for rank 1 (it died writing it): torch elastic's file of its latest torchrun names the exception."""
    from gnnq.launch.failure import describe_failure, elastic_log_dir

    run_dir = _failed_job(tmp_path, [{"rank": 0, "message": RESET, "time": 1.0}])
    earlier = elastic_log_dir(run_dir) / "gnnq-local_old" / "attempt_0" / "1" / "error.json"
    _elastic_error(monkeypatch, earlier, KeyError("an earlier attempt's"))
    os.utime(earlier.parents[2], (1.0, 1.0))
    latest = elastic_log_dir(run_dir) / "gnnq-local_new" / "attempt_0" / "1" / "error.json"
    _elastic_error(monkeypatch, latest, ValueError("bad shard\nmore"))
    assert describe_failure(run_dir, 1).startswith("rank 1 failed: ValueError: bad shard (traceback in")
    # gnnq's own file, where there is one, speaks for its rank
    run_dir = _failed_job(tmp_path / "both", [{"rank": 1, "message": "RuntimeError: its own words", "time": 1.0}])
    both = elastic_log_dir(run_dir) / "gnnq-local_x" / "attempt_0" / "1" / "error.json"
    _elastic_error(monkeypatch, both, ValueError("bad shard"))
    assert describe_failure(run_dir, 1).startswith("rank 1 failed: RuntimeError: its own words")


def test_torch_elastic_files_of_a_second_host_name_its_global_rank(tmp_path, monkeypatch):
    from gnnq.launch.failure import describe_failure, elastic_log_dir

    run_dir = _failed_job(tmp_path, [])
    _elastic_error(monkeypatch, elastic_log_dir(run_dir, 1) / "gnnq-abc_1" / "attempt_0" / "1" / "error.json", MemoryError())
    logs = [run_dir / "logs" / "torchrun.log", run_dir / "logs" / "torchrun-h1.log"]
    assert describe_failure(run_dir, 1, logs, ranks_per_log=2) == f"rank 3 failed: MemoryError (traceback in {logs[1]})"


def test_a_rank_that_raised_leaves_gnnqs_and_torch_elastics_error_files(tmp_path):
    fault = {"GNNQ_FAULT_INJECT": "rank=1,epoch=2"}
    res = run_gnnq([*SMALL, "trainer.epochs=3"], tmp_path / "runs", tmp_path / "data", env=fault)
    assert res.returncode == 1
    (run_dir,) = run_dirs(tmp_path / "runs")
    assert read_record(run_dir)["error"].startswith("rank 1 failed: RuntimeError: injected fault at epoch 2 (traceback in")
    from gnnq.launch.failure import elastic_log_dir, lost_peer

    paths = elastic_log_dir(run_dir).glob("*/attempt_0/*/error.json")
    files = {int(p.parent.name): json.loads(p.read_text())["message"] for p in paths}  # local rank -> its error
    assert files[1]["message"] == "RuntimeError: injected fault at epoch 2"
    assert "faults.py" in files[1]["extraInfo"]["py_callstack"]
    own = json.loads((run_dir / ".gnnq" / "error-rank1.json").read_text())
    assert own["message"] == files[1]["message"] and abs(own["time"] - float(files[1]["extraInfo"]["timestamp"])) < 2
    if 0 in files:  # rank 0 raised too only if its peer's exit broke its collective before torchrun stopped it
        assert lost_peer(files[0]["message"]), files[0]["message"]


def test_progress_line_mixed_with_another_ranks_output():
    """Ranks share torchrun's stdout: a failing rank's text can land on rank 0's progress line."""
    from gnnq.contract import PROGRESS_PREFIX
    from gnnq.launch.torchrun import _progress_row

    assert _progress_row(PROGRESS_PREFIX + '{"epoch": 3}\n') == ({"epoch": 3}, "")
    assert _progress_row(PROGRESS_PREFIX + '{"epoch": 3}Traceback (most recent call last):\n') == (
        {"epoch": 3}, "Traceback (most recent call last):\n")  # fmt: skip
    assert _progress_row(PROGRESS_PREFIX + '{"epo\n') == (None, PROGRESS_PREFIX + '{"epo\n')
    assert _progress_row("[rank1]: RuntimeError\n") == (None, "[rank1]: RuntimeError\n")
