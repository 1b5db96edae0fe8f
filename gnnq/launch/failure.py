"""Why a torchrun job failed: one line naming the rank that caused it and how.

The evidence: the error files ranks write when they fail (``.gnnq/error-rank<r>.json``, from
gnnq.train.worker; a rank that torchrun stopped marks its file ``stopped``) and torchrun's
failure summary in ``logs/torchrun.log`` (every failed rank with its exit code; a negative code
is the signal that killed it). The cause is, in this order:

1. the earliest error a rank reported itself, unless it only says the rank lost its connection
   to a peer (a peer that vanishes resets its sockets, so the survivors report that);
2. a rank killed by a signal without reporting anything (SIGKILL, a segfault, the OOM killer),
   whose peers then lost their connection to it;
3. the earliest lost-connection error;
4. a rank that exited non-zero, a signal that killed torchrun itself, or torchrun's last line.

A collective that timed out (``cluster.timeout_s``) is reported with a hint that a peer stopped
taking part.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

from gnnq.track.record import INTERNAL_DIR

# strerror texts in the transport errors of a rank whose peer's process went away
LOST_PEER = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "Connection refused")
TIMED_OUT = re.compile(r"timed out|timeout", re.IGNORECASE)
_SUMMARY_ENTRY = re.compile(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")
_FIRST_FAILURE = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")


def describe_failure(run_dir: Path, code: int) -> str:
    """One line naming the rank that failed first and why; ``code`` is torchrun's exit code."""
    run_dir = Path(run_dir)
    log = run_dir / "logs" / "torchrun.log"
    text = log.read_text(errors="replace") if log.is_file() else ""
    reports = _error_reports(run_dir)
    reported = sorted((e for e in reports if not e.get("stopped")), key=lambda e: e["time"])
    own = [e for e in reported if not lost_peer(e["message"])]
    if own:
        return _reported(own[0], log)
    exits = failed_ranks(text)
    silent = {rank: c for rank, c in exits.items() if c < 0 and rank not in {e["rank"] for e in reports}}
    if silent:
        rank = min(silent)
        witnesses = f"; rank {reported[0]['rank']} then lost its connection to it" if reported else ""
        return f"rank {rank} was killed by {signal_name(silent[rank])} without reporting an error{witnesses} (full log: {log})"
    if reported:
        return _reported(reported[0], log)
    if exits:
        rank = min(exits)
        return f"rank {rank} exited with code {exits[rank]} without reporting an error (full log: {log})"
    if code < 0:
        return f"torchrun was killed by {signal_name(code)}; its ranks died with it (full log: {log})"
    tail = [line.strip() for line in text.splitlines() if line.strip()]
    return f"torchrun exited with code {code}: {tail[-1] if tail else 'no output'} (full log: {log})"


def lost_peer(message: str) -> bool:
    """Whether a rank's error only says that a peer's connection went away."""
    return any(s in message for s in LOST_PEER)


def failed_ranks(log_text: str) -> dict[int, int]:
    """{rank: exit code} of every failed rank in torchrun's log (negative: killed by that signal)."""
    exits = {int(rank): int(c) for rank, c in _SUMMARY_ENTRY.findall(log_text)}
    for c, rank in _FIRST_FAILURE.findall(log_text):  # one node: the local rank is the rank
        exits.setdefault(int(rank), int(c))
    return exits


def signal_name(exit_code: int) -> str:
    try:
        return signal.Signals(-exit_code).name
    except ValueError:
        return f"signal {-exit_code}"


def _error_reports(run_dir: Path) -> list[dict]:
    reports = []
    for path in sorted((run_dir / INTERNAL_DIR).glob("error-rank*.json")):
        try:
            report = json.loads(path.read_text())
            reports.append({"rank": int(report["rank"]), "message": str(report["message"]),
                            "time": float(report["time"]), "stopped": bool(report.get("stopped"))})  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a rank killed while writing it: the log still tells
    return reports


def _reported(error: dict, log: Path) -> str:
    hint = "; a peer stopped taking part in collectives for cluster.timeout_s" if TIMED_OUT.search(error["message"]) else ""
    return f"rank {error['rank']} failed: {error['message']}{hint} (traceback in {log})"
