"""Why a torchrun job failed: one line naming the rank that caused it and how.

The evidence: the error files ranks write when they fail (``.gnnq/error-rank<r>.json``, from
gnnq.rank; a rank that was told to stop, by SIGTERM, marks its file ``stopped``), the ranks' exit codes in the
order they ended (``.gnnq/exits.json``, written by gnnq.launch.ranks for a local job), torch elastic's
per-rank error files (``@record`` on the worker's run, under ``elastic_log_dir``: a rank's
exception where gnnq's own file is missing) and torchrun's failure summary in
``logs/torchrun.log`` (every failed rank with its exit code; a negative code is the signal that
killed it). Under torchrun the exit codes are only in the summary: torch elastic writes them to no file. The
cause is, in this order:

0. the rank that ended first, when it was stopped by a signal from outside gnnq (``kill``, a scheduler):
   its error file says ``stopped`` and nothing had failed before it (a local job's exits.json tells);
1. the earliest error a rank reported itself, unless it only says the rank lost its connection
   to a peer (a peer that vanishes resets its sockets, so the survivors report that);
2. a rank killed by a signal without reporting anything (SIGKILL, a segfault, the OOM killer),
   whose peers then lost their connection to it: the first to die where exits.json tells the order, else
   the lowest such rank;
3. the earliest lost-connection error;
4. a rank that exited non-zero, a signal that killed torchrun itself, or torchrun's last line.

A collective that timed out (``cluster.timeout_s``) is blamed, where the ranks' heartbeats
(gnnq.rank.heartbeat) allow, on the rank that did not arrive: one whose heartbeat stopped well
before the timeout (its process was stopped, SIGSTOP, or frozen), else one that had stayed outside
any communication for that long (a hang in its own code); otherwise the line says that which peer
stopped could not be told.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

from gnnq.contract import CONFIG_FILE, ERROR_FILES, EXITS_FILE, HEARTBEAT_FILES, HEARTBEAT_INTERVAL_S, INTERNAL_DIR

# strerror texts in the transport errors of a rank whose peer's process went away
LOST_PEER = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "Connection refused")
TIMED_OUT = re.compile(r"timed out|timeout", re.IGNORECASE)
ELASTIC_DIR = "elastic"  # under INTERNAL_DIR, one folder per host (torchrun's --log-dir)
_SUMMARY_ENTRY = re.compile(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")
STOPPED_BY = re.compile(r"stopped by (SIG[A-Z]+)")  # a stopped rank's message (gnnq.rank.worker.StoppedBySignal)
_FIRST_FAILURE = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")


def elastic_log_dir(run_dir: Path, host: int = 0) -> Path:
    """torchrun's ``--log-dir`` on host ``host``.

    A rank that raised leaves <dir>/<rdzv id>_<random>/attempt_<n>/<local rank>/error.json there."""
    return Path(run_dir) / INTERNAL_DIR / ELASTIC_DIR / f"h{host}"


def describe_failure(
    run_dir: Path,
    code: int,
    logs: list[Path] | None = None,
    ranks_per_log: int = 0,
    exits: dict[int, int] | None = None,
) -> str:
    """One line naming the rank that failed first and why; ``code`` is torchrun's exit code.

    ``logs``: torchrun's logs, one per host in host order (default: ``logs/torchrun.log``), each
    for ``ranks_per_log`` consecutive ranks (0: one log for all); a rank is pointed at its host's log.
    ``exits``: {rank: exit code} the launcher saw itself (a warm pool's ranks, gnnq.launch.warm_pool), besides
    those torchrun's summary in the logs names.
    """
    run_dir = Path(run_dir)
    logs = [Path(p) for p in logs] if logs else [run_dir / "logs" / "torchrun.log"]

    def log_of(rank: int) -> Path:
        return logs[min(len(logs) - 1, rank // ranks_per_log)] if ranks_per_log else logs[0]

    texts = [log.read_text(errors="replace") if log.is_file() else "" for log in logs]
    reports = _error_reports(run_dir)
    known = {e["rank"] for e in reports}
    reports += [e for e in _elastic_reports(run_dir, ranks_per_log) if e["rank"] not in known]
    reported = sorted((e for e in reports if not e.get("stopped")), key=lambda e: e["time"])
    ended = local_exits(run_dir)  # a local job: every failed rank in the order it ended
    own = [e for e in reported if not lost_peer(e["message"])]
    first = _stopped_from_outside(ended, reports, others_failed=bool(own))
    if first is not None:
        how = STOPPED_BY.search(first["message"])
        return (
            f"rank {first['rank']} was stopped by {how.group(1) if how else 'a signal'} from outside gnnq (kill, "
            f"a scheduler) before any rank failed; the others were stopped after it (full log: "
            f"{log_of(first['rank'])})"
        )
    if own:
        return _reported(own[0], log_of(own[0]["rank"]), run_dir)
    seen = dict(exits or {})
    exits = {e["rank"]: e["code"] for e in ended}  # a local job's ranks, first to end first
    for rank, c in seen.items():
        exits.setdefault(rank, c)
    for host, text in enumerate(texts):
        for rank, c in failed_ranks(text, host * ranks_per_log).items():
            exits.setdefault(rank, c)
    silent = {rank: c for rank, c in exits.items() if c < 0 and rank not in {e["rank"] for e in reports}}
    if silent:
        rank = next(iter(silent)) if ended else min(silent)
        witnesses = f"; rank {reported[0]['rank']} then lost its connection to it" if reported else ""
        return (
            f"rank {rank} was killed by {signal_name(silent[rank])} without reporting an error{witnesses} (full "
            f"log: {log_of(rank)})"
        )
    if reported:
        return _reported(reported[0], log_of(reported[0]["rank"]), run_dir)
    if exits:
        rank = next(iter(exits)) if ended else min(exits)
        return f"rank {rank} exited with code {exits[rank]} without reporting an error (full log: {log_of(rank)})"
    if code < 0:
        return f"torchrun was killed by {signal_name(code)}; its ranks died with it (full log: {logs[0]})"
    tail = [line.strip() for line in texts[0].splitlines() if line.strip()]
    return f"torchrun exited with code {code}: {tail[-1] if tail else 'no output'} (full log: {logs[0]})"


def _stopped_from_outside(ended: list[dict], reports: list[dict], others_failed: bool) -> dict | None:
    """The report of a local job's rank that a signal from outside gnnq stopped, when that is what ended the job: it
    ended first, or it ended later but every other rank's error only says it lost a peer (a peer whose connection
    closed may end before the stopped rank's exit is seen, on a loaded machine)."""
    stopped = {e["rank"]: e for e in reports if e.get("stopped")}
    outside = [e for e in ended if not e.get("stopped_by_gnnq") and e["rank"] in stopped]
    if not outside:
        return None
    if outside[0] is ended[0] or not others_failed:
        return stopped[outside[0]["rank"]]
    return None


def local_exits(run_dir: Path) -> list[dict]:
    """The failed ranks of a local job in the order they ended ([] when the job had none, or ran under torchrun)."""
    try:
        data = json.loads((Path(run_dir) / INTERNAL_DIR / EXITS_FILE).read_text())
        return [
            {"rank": int(e["rank"]), "code": int(e["code"]), "stopped_by_gnnq": bool(e.get("stopped_by_gnnq"))}
            for e in data["exits"]
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def lost_peer(message: str) -> bool:
    """Whether a rank's error only says that a peer's connection went away."""
    return any(s in message for s in LOST_PEER)


def failed_ranks(log_text: str, first_rank: int = 0) -> dict[int, int]:
    """{rank: exit code} of every failed rank in one torchrun's log (negative: killed by that signal).

    torchrun's summary names global ranks; its first-failure line only the local rank, which is
    offset by ``first_rank``, the global rank of this torchrun's local rank 0."""
    exits = {int(rank): int(c) for rank, c in _SUMMARY_ENTRY.findall(log_text)}
    for c, rank in _FIRST_FAILURE.findall(log_text):
        exits.setdefault(first_rank + int(rank), int(c))
    return exits


def signal_name(exit_code: int) -> str:
    try:
        return signal.Signals(-exit_code).name
    except ValueError:
        return f"signal {-exit_code}"


def _error_reports(run_dir: Path) -> list[dict]:
    reports = []
    for path in sorted((run_dir / INTERNAL_DIR).glob(ERROR_FILES)):
        try:
            report = json.loads(path.read_text())
            reports.append(
                {
                    "rank": int(report["rank"]),
                    "message": str(report["message"]),
                    "time": float(report["time"]),
                    "stopped": bool(report.get("stopped")),
                }
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a rank killed while writing it: the log still tells
    return reports


def _elastic_reports(run_dir: Path, ranks_per_host: int) -> list[dict]:
    """Exceptions torch elastic recorded, from each host's latest torchrun (an earlier attempt's files stay beside it).

    The files name the local rank; host h's local rank r is global rank h * ranks_per_host + r
    (ranks_per_host 0: one host)."""
    reports = []
    for host_dir in sorted((run_dir / INTERNAL_DIR / ELASTIC_DIR).glob("h*")):
        host = int(host_dir.name[1:]) if host_dir.name[1:].isdigit() else -1
        runs = sorted(host_dir.glob("*/"), key=lambda d: d.stat().st_mtime)
        if not runs or host < 0 or (host > 0 and not ranks_per_host):
            continue
        for path in runs[-1].glob("attempt_*/*/error.json"):
            try:
                data = json.loads(path.read_text())
                error = data["message"]  # {"message", "extraInfo": {"timestamp", ...}}, or a string beside "timestamp"
                if isinstance(error, str):
                    message, stamp = error, data["timestamp"]
                else:
                    message, stamp = error["message"], error["extraInfo"]["timestamp"]
                reports.append(
                    {
                        "rank": host * ranks_per_host + int(path.parent.name),
                        "stopped": False,
                        "time": float(stamp),
                        "message": str(message).strip().splitlines()[0].removesuffix(":"),
                    }
                )
            except (OSError, ValueError, KeyError, TypeError, IndexError):
                continue
    return reports


def _reported(error: dict, log: Path, run_dir: Path) -> str:
    failed = f"rank {error['rank']} failed: {error['message']}"
    if not TIMED_OUT.search(error["message"]):
        return f"{failed} (traceback in {log})"
    culprit = stopped_rank(run_dir, error)
    if culprit:
        return f"{culprit}; {failed} (traceback in {log})"
    return (
        f"{failed}; a peer stopped taking part in collectives for cluster.timeout_s, which one could not be told "
        f"(no rank's heartbeat had stopped or stayed outside communication) (traceback in {log})"
    )


def stopped_rank(run_dir: Path, error: dict) -> str | None:
    """Which rank the timed-out collective of ``error`` waited for, from the heartbeats; None if they do not tell."""
    beats = [b for b in _heartbeats(run_dir) if b["rank"] != error["rank"]]
    at, waited = float(error["time"]), _timeout_s(run_dir)
    quiet_s = max(3 * HEARTBEAT_INTERVAL_S, waited / 2) if waited else 5 * HEARTBEAT_INTERVAL_S
    stale = sorted((b for b in beats if at - b["time"] > quiet_s), key=lambda b: b["time"])
    if stale:
        b = stale[0]
        place = f", last seen at {b['where']}" if b.get("where") else ""
        return (
            f"rank {b['rank']} stopped responding: its heartbeat stopped {at - b['time']:.0f} s before rank "
            f"{error['rank']}'s collective timed out (its process was stopped, e.g. by SIGSTOP, or frozen{place})"
        )
    stuck = sorted((b for b in beats if not b["communicating"] and at - b["since"] > quiet_s), key=lambda b: b["since"])
    if stuck:
        b = stuck[0]
        place = f" (at {b['where']})" if b.get("where") else ""
        return (
            f"rank {b['rank']} stopped taking part: it had been outside any collective for {at - b['since']:.0f} s"
            f"{place} when rank {error['rank']}'s collective timed out waiting for it"
        )
    return None


def _heartbeats(run_dir: Path) -> list[dict]:
    beats = []
    for path in sorted((Path(run_dir) / INTERNAL_DIR).glob(HEARTBEAT_FILES)):
        try:
            b = json.loads(path.read_text())
            beats.append(
                {
                    "rank": int(b["rank"]),
                    "time": float(b["time"]),
                    "since": float(b["since"]),
                    "communicating": bool(b["communicating"]),
                    "where": str(b.get("where") or ""),
                }
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return beats


def _timeout_s(run_dir: Path) -> float | None:
    """The run's cluster.timeout_s, from its config.yaml."""
    import yaml

    try:
        return float(yaml.safe_load((Path(run_dir) / CONFIG_FILE).read_text())["cluster"]["timeout_s"])
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return None
