"""Start the ranks of a one-host job (``cluster=local``) without torchrun's agent, and follow them until they finish.

The launcher does the agent's job itself, so no process imports torch on the way to a rank: it starts
``python -m gnnq.rank`` once per rank with the environment torchrun would give it (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR/MASTER_PORT, TORCHELASTIC_ERROR_FILE), follows them
fail-fast and stops them all when one fails or the launcher is interrupted:

- the store the ranks meet at (torch's TCPStore) is served by rank 0 on a socket the launcher bound to
  127.0.0.1 and hands over (``STORE_FD_ENV``), so a local job listens on loopback only; gloo uses ``lo``;
- rank output shares one pipe, as under torchrun: progress lines go to ``on_progress``, everything to the
  log (``logs/torchrun.log``, the name kept), a rank's warning also to stderr;
- the first rank to exit non-zero (or be killed) is recorded in ``.gnnq/exits.json`` with its exit code, in
  the order the ranks ended; the others get SIGTERM and, ``STOP_GRACE_S`` later, SIGKILL;
- torch elastic's ``@record`` error files land where torchrun would put them (``elastic_log_dir``);
- each rank asks Linux for SIGKILL when the launcher dies (PR_SET_PDEATHSIG, in gnnq.rank), so even a
  launcher killed by SIGKILL leaves no rank behind.

Multi-node, Slurm and emulated jobs still start torchrun (gnnq.launch.torchrun): rendezvous across hosts is
its job.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

from gnnq.contract import EXITS_FILE, INTERNAL_DIR, LAUNCHER_PID_ENV, RANK_MODULE, STORE_FD_ENV
from gnnq.launch.failure import elastic_log_dir, signal_name
from gnnq.launch.torchrun import LOOPBACK, follow_line
from gnnq.track.files import write_text_atomic

STOP_GRACE_S = 5.0  # a rank told to stop (SIGTERM) gets this long to write its error file, then SIGKILL
INTERRUPT_GRACE_S = 2.0  # the same when the launcher itself is interrupted (Ctrl-C returns within seconds)
POLL_S = 0.1


def rank_command(run_dir: Path, parts_dir: Path) -> list[str]:
    return [sys.executable, "-m", RANK_MODULE, "--run-dir", str(run_dir), "--parts", str(parts_dir)]


def run_local_ranks(
    run_dir: Path, parts_dir: Path, nproc: int, log_path: Path, on_progress: Callable[[dict], None]
) -> int:
    """Run ``nproc`` ranks here; returns 0 when all finished, else 1 (the cause: gnnq.launch.failure)."""
    run_dir = Path(run_dir)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    exits_path = run_dir / INTERNAL_DIR / EXITS_FILE
    exits_path.parent.mkdir(parents=True, exist_ok=True)
    exits_path.unlink(missing_ok=True)
    attempt = elastic_log_dir(run_dir) / f"gnnq-local_{uuid.uuid4().hex[:8]}" / "attempt_0"
    cmd = rank_command(run_dir, parts_dir)
    with open(log_path, "w") as log:
        log.write(f"$ {' '.join(cmd)}  (x{nproc}: ranks started by gnnq itself, gnnq.launch.ranks)\n")
        log.flush()
        job = _Job(nproc, log, on_progress, exits_path)
        try:
            job.start(cmd, attempt)
            return job.follow()
        except BaseException:
            job.stop(INTERRUPT_GRACE_S)
            raise
        finally:
            job.close()


def loopback_server() -> socket.socket:
    """The listening socket of the ranks' store (torch's TCPStore, served by rank 0): 127.0.0.1 only, a free port."""
    return socket.create_server((LOOPBACK, 0))


def rank_env(rank: int, nproc: int, server: socket.socket) -> dict[str, str]:
    """The environment of local rank ``rank`` of ``nproc`` (as torchrun would set it): gloo on ``lo``, the store at
    ``server``, whose socket rank 0 inherits (``STORE_FD_ENV``; pass it with ``store_fds``), the launcher's pid for
    the rank's parent-death check (gnnq.rank.__main__)."""
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo"),
        "MASTER_ADDR": LOOPBACK,
        "MASTER_PORT": str(server.getsockname()[1]),
        "WORLD_SIZE": str(nproc),
        "LOCAL_WORLD_SIZE": str(nproc),
        "ROLE_WORLD_SIZE": str(nproc),
        "GROUP_RANK": "0",
        LAUNCHER_PID_ENV: str(os.getpid()),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "ROLE_RANK": str(rank),
    }
    env.pop(STORE_FD_ENV, None)
    if rank == 0:
        env[STORE_FD_ENV] = str(server.fileno())
    return env


def store_fds(rank: int, server: socket.socket) -> tuple[int, ...]:
    """The file descriptors rank ``rank`` inherits: the store's socket for rank 0."""
    return (server.fileno(),) if rank == 0 else ()


class _Job:
    def __init__(self, nproc: int, log, on_progress: Callable[[dict], None], exits_path: Path):
        self.nproc, self.log, self.on_progress, self.exits_path = nproc, log, on_progress, exits_path
        self.procs: list[subprocess.Popen] = []
        self.codes: dict[int, int] = {}
        self.exits: list[dict] = []  # in the order the ranks ended
        self.stop_sent: float | None = None
        self.killed = False
        self.read_fd = -1
        self.buf = b""

    def start(self, cmd: list[str], attempt: Path) -> None:
        server = loopback_server()
        read_fd, write_fd = os.pipe()
        self.read_fd = read_fd
        try:
            for rank in range(self.nproc):
                error_file = attempt / str(rank) / "error.json"
                error_file.parent.mkdir(parents=True, exist_ok=True)
                env = {**rank_env(rank, self.nproc, server), "TORCHELASTIC_ERROR_FILE": str(error_file)}
                self.procs.append(
                    subprocess.Popen(
                        cmd,
                        stdout=write_fd,
                        stderr=write_fd,
                        stdin=subprocess.DEVNULL,
                        env=env,
                        pass_fds=store_fds(rank, server),
                        start_new_session=True,  # a terminal's Ctrl-C reaches the launcher, which stops them
                    )
                )
        finally:
            server.close()  # rank 0 holds it now
            os.close(write_fd)

    def follow(self) -> int:
        sel = selectors.DefaultSelector()
        sel.register(self.read_fd, selectors.EVENT_READ)
        open_pipe = True
        while True:
            if open_pipe and sel.select(POLL_S):
                open_pipe = self._read()
            elif not open_pipe:
                time.sleep(POLL_S)
            self._reap()
            if len(self.codes) == self.nproc:
                while open_pipe and sel.select(0.2):  # what the last rank wrote before it exited
                    open_pipe = self._read()
                break
            if self.stop_sent is not None and not self.killed and time.monotonic() - self.stop_sent > STOP_GRACE_S:
                self._signal_all(signal.SIGKILL)
                self.killed = True
        sel.close()
        self._flush_partial()
        return 1 if self.exits else 0

    def _read(self) -> bool:
        chunk = os.read(self.read_fd, 65536)
        if not chunk:
            return False
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            follow_line(line.decode(errors="replace") + "\n", self.log, self.on_progress)
        return True

    def _flush_partial(self) -> None:
        if self.buf:
            follow_line(self.buf.decode(errors="replace") + "\n", self.log, self.on_progress)
            self.buf = b""

    def _reap(self) -> None:
        for rank, proc in enumerate(self.procs):
            if rank in self.codes or proc.poll() is None:
                continue
            code = self.codes[rank] = proc.returncode
            if code == 0:
                continue
            told = self.stop_sent is not None
            self.exits.append({"rank": rank, "code": code, "time": time.time(), "stopped_by_gnnq": told})
            how = f"was killed by {signal_name(code)}" if code < 0 else f"exited with code {code}"
            self.log.write(f"[gnnq] rank {rank} (pid {proc.pid}) {how}{' after gnnq stopped it' if told else ''}\n")
            self.log.flush()
            self._write_exits()
            if not told:
                self.log.write(f"[gnnq] stopping the other ranks (SIGTERM, SIGKILL after {STOP_GRACE_S:.0f} s)\n")
                self.log.flush()
                self._signal_all(signal.SIGTERM)
                self.stop_sent = time.monotonic()

    def _write_exits(self) -> None:
        """The ranks' exits for gnnq.launch.failure; a run dir that no longer takes writes (full, read-only) goes
        without them (the failure line names that instead: gnnq.launch.disk_failure)."""
        try:
            write_text_atomic(self.exits_path, json.dumps({"ranks": self.nproc, "exits": self.exits}))
        except OSError:
            pass

    def _signal_all(self, sig: signal.Signals) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, sig)  # its own session and group: also anything the rank started
                except ProcessLookupError:
                    pass

    def stop(self, grace_s: float) -> None:
        """Stop every rank still running: SIGTERM, then SIGKILL after ``grace_s``."""
        if self.stop_sent is None:
            self.stop_sent = time.monotonic()
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while any(p.poll() is None for p in self.procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._signal_all(signal.SIGKILL)
        for proc in self.procs:
            proc.wait()

    def close(self) -> None:
        if any(p.poll() is None for p in self.procs):
            self.stop(0)
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1
