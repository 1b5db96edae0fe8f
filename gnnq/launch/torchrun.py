"""Start the ranks of a multi-node, Slurm or emulated job with torchrun and follow them until they finish (a local
job's ranks are started by gnnq itself: gnnq.launch.ranks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

from gnnq import lifetime
from gnnq.contract import PROGRESS_PREFIX, RANK_MODULE, RANK_WARNING_PREFIX

LOOPBACK = "127.0.0.1"


def multinode_torchrun_command(
    run_dir: Path, parts_dir: Path, nproc: int, nnodes: int, endpoint: str, rdzv_id: str, extra: tuple[str, ...] = ()
) -> list[str]:
    """torchrun for one of ``nnodes`` hosts (run the same command on each): ``nproc`` ranks here, c10d
    rendezvous at ``endpoint`` (host:port), which the torchrun on that host serves on all its interfaces;
    ``extra`` torchrun options (e.g. a fixed --node-rank)."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nnodes}",
        f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={rdzv_id}",
        *extra,
        *_ranks(run_dir, parts_dir),
    ]


def _ranks(run_dir: Path, parts_dir: Path) -> list[str]:
    """The part every torchrun gnnq starts shares: no restarts, a fast monitor, the rank entry point."""
    return [
        "--max-restarts=0",
        "--monitor-interval=0.2",
        "-m",
        RANK_MODULE,
        "--run-dir",
        str(run_dir),
        "--parts",
        str(parts_dir),
    ]


def run_torchrun(cmd: list[str], log_path: Path, on_progress: Callable[[dict], None], env: dict | None = None) -> int:
    """Run ``cmd``; progress lines go to ``on_progress``, all output to ``log_path``. Returns the exit code.

    The job runs in its own process group; on Ctrl-C or any error here the whole group
    is terminated, so no rank outlives the launcher.
    """
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    if env:
        full_env.update(env)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=full_env,
            start_new_session=True,
            preexec_fn=die_with_parent,  # a launcher killed by SIGKILL takes torchrun (and so its ranks) along
        )
        try:
            for line in proc.stdout:
                follow_line(line, log, on_progress)
            return proc.wait()
        except BaseException:
            _terminate_group(proc)
            raise
        finally:
            if proc.poll() is None:
                _terminate_group(proc)


def follow_line(line: str, log, on_progress: Callable[[dict], None]) -> None:
    """One line of the ranks' shared output: a progress row to ``on_progress``, the rest to ``log``; a rank's
    warning is the user's to see too (stderr), not only the log's."""
    row, rest = _progress_row(line)
    if row is not None:
        on_progress(row)
    if rest:
        log.write(rest)
        log.flush()
        if rest.startswith(RANK_WARNING_PREFIX):
            sys.stderr.write(rest)
            sys.stderr.flush()


def die_with_parent() -> None:
    """In a child before exec: Linux sends it SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG)."""
    lifetime.die_with_parent(_PRCTL)


_PRCTL = lifetime.libc_prctl()  # loaded here: a forked child must not load libraries


def _progress_row(line: str) -> tuple[dict | None, str]:
    """(progress row, the rest of the line for the log). Ranks share one pipe, so another rank's
    output can end up on a progress line; what follows the row's JSON goes to the log."""
    if not line.startswith(PROGRESS_PREFIX):
        return None, line
    try:
        row, end = json.JSONDecoder().raw_decode(line, len(PROGRESS_PREFIX))
    except ValueError:
        return None, line
    rest = line[end:]
    return row, rest if rest.strip() else ""


def _terminate_group(proc: subprocess.Popen, grace_s: float = 40.0) -> None:
    # torchrun gives its ranks up to 30 s after SIGTERM; ranks also die with torchrun (PDEATHSIG), torchrun with
    # the launcher (die_with_parent).
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
