"""Faults in a running job, with the real CLI, torchrun and gloo: a rank killed by SIGKILL, a rank that hangs.

Each test starts ``gnnq`` as a user would, waits until training runs (rank 0 wrote a row of
metrics.jsonl), then breaks one rank and checks what the user gets: a prompt non-zero exit, a
record marked failed that names the rank and the cause, and no process of the run left behind.

Here: the in-process cases (no process started); the others are in `tests/e2e/test_faults.py`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def test_a_timeout_without_telling_heartbeats_says_so(tmp_path):
    """Every peer was in a collective until the end: which one stopped cannot be told, and the line says so."""
    from gnnq.launch.failure import describe_failure

    run_dir = _failed_job(
        tmp_path, [{"rank": 0, "message": "RuntimeError: Timed out waiting 10000ms for recv", "time": 100.0}]
    )
    (run_dir / ".gnnq" / "heartbeat-rank1.json").write_text(
        json.dumps({"rank": 1, "time": 99.5, "communicating": True, "since": 80.0, "where": "gnnq/comm/halo.py:1 in x"})
    )
    assert describe_failure(run_dir, 1).startswith(
        "rank 0 failed: RuntimeError: Timed out waiting 10000ms for recv; a peer stopped taking part in "
        "collectives for "
        "cluster.timeout_s, which one could not be told"
    )


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
    assert describe_failure(run_dir, 1).startswith(
        "rank 1 was killed by SIGKILL without reporting an error; rank 0 then lost"
    )


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
    """No gnnq error file for rank 1 (it died writing it): torch elastic's file of its latest torchrun names the
    exception."""
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
    _elastic_error(
        monkeypatch, elastic_log_dir(run_dir, 1) / "gnnq-abc_1" / "attempt_0" / "1" / "error.json", MemoryError()
    )
    logs = [run_dir / "logs" / "torchrun.log", run_dir / "logs" / "torchrun-h1.log"]
    assert describe_failure(run_dir, 1, logs, ranks_per_log=2) == f"rank 3 failed: MemoryError (traceback in {logs[1]})"


def test_progress_line_mixed_with_another_ranks_output():
    """Ranks share torchrun's stdout: a failing rank's text can land on rank 0's progress line."""
    from gnnq.contract import PROGRESS_PREFIX
    from gnnq.launch.torchrun import _progress_row

    assert _progress_row(PROGRESS_PREFIX + '{"epoch": 3}\n') == ({"epoch": 3}, "")
    assert _progress_row(PROGRESS_PREFIX + '{"epoch": 3}Traceback (most recent call last):\n') == (
        {"epoch": 3},
        "Traceback (most recent call last):\n",
    )
    assert _progress_row(PROGRESS_PREFIX + '{"epo\n') == (None, PROGRESS_PREFIX + '{"epo\n')
    assert _progress_row("[rank1]: RuntimeError\n") == (None, "[rank1]: RuntimeError\n")
