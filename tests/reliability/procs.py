"""A case's processes, found in /proc: by the marker in their environment (inherited by every process gnnq
starts) or by the case's directory in their command line."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

MARKER_ENV = "GNNQ_RELIABILITY_CASE"


def _read(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""  # exited meanwhile, or not ours to read


def _state(pid: int) -> str:
    stat = _read(pid, "stat").decode(errors="replace")
    return stat.rsplit(")", 1)[1].split()[0] if ")" in stat else ""


def case_pids(marker: str, root: Path) -> list[int]:
    """Live (not zombie) processes that carry ``marker`` in their environment or name ``root`` in their arguments."""
    me, env_tag, dir_tag = os.getpid(), f"{MARKER_ENV}={marker}".encode(), str(root).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        if env_tag in _read(pid, "environ").split(b"\0") or dir_tag in _read(pid, "cmdline"):
            if _state(pid) not in ("Z", "X", ""):
                found.append(pid)
    return sorted(found)


def cmdline(pid: int) -> str:
    return _read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()


def rank_pid(marker: str, root: Path, rank: int) -> int:
    """The worker process of ``rank`` (its environment's RANK)."""
    for pid in case_pids(marker, root):
        if "gnnq.rank" in cmdline(pid) and f"RANK={rank}".encode() in _read(pid, "environ").split(b"\0"):
            return pid
    raise LookupError(f"no worker process of rank {rank}")


def torchrun_pid(marker: str, root: Path) -> int:
    for pid in case_pids(marker, root):
        if "torch.distributed.run" in cmdline(pid):  # cluster=multinode, slurm, emulated (local jobs have none)
            return pid
    raise LookupError("no torchrun process")


def outliving(marker: str, root: Path, grace_s: float = 10.0) -> list[int]:
    """The case's processes still alive ``grace_s`` after its command ended."""
    deadline = time.monotonic() + grace_s
    while True:
        left = case_pids(marker, root)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def kill_all(pids: list[int]) -> None:
    """SIGKILL each of ``pids`` (the case's own leftovers, named by id) so they cannot disturb the next case."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
