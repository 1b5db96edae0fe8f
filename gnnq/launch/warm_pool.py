"""A warm pool of ranks for a sweep on this host: start-up paid once, not once per point.

``warm_pools()`` (entered by the gnnq_warm Hydra launcher, hydra_plugins/gnnq_warm_launcher, around a local
multirun) makes ``active()`` return a ``Pools``; gnnq.launch.job.launch then runs every point it ``serves``
(``cluster=local``, one host, gloo) on a ``RankPool`` instead of a torchrun job: ``cluster.nproc`` processes of
``python -m gnnq.rank.serve`` in one gloo group whose store rank 0 serves on a socket the launcher bound on
127.0.0.1 (as for a local job's ranks, gnnq.launch.ranks). They keep
torch, PyG and gnnq imported, the group joined and the partitions read across points; each point is still a
run of its own (its run dir and files, config, seed, model and optimizer: gnnq.rank.serve).

A point on another world size or ``cluster.timeout_s`` replaces the pool. A point that fails (a rank raised,
or died) stops the pool as torchrun stops a job (the other ranks get SIGTERM, then SIGKILL), is described by
gnnq.launch.failure from the same error files, and the next point starts a fresh pool.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from gnnq.contract import WARM_DONE_PREFIX, WARM_RANK_MODULE, WARM_READY
from gnnq.errors import LaunchError
from gnnq.launch.clusters import cluster_class
from gnnq.launch.ranks import INTERRUPT_GRACE_S, loopback_server, rank_env, store_fds
from gnnq.launch.torchrun import follow_line
from gnnq.train.faults import FAULT_ENV

SETTLE_S = 1.0  # a failed point's ranks may take this long to end by themselves before gnnq stops them
STOP_GRACE_S = 10.0  # then they get this long after SIGTERM before SIGKILL
PASSED_ENV = (FAULT_ENV,)  # read by a rank at each run: passed with every point, as a new torchrun would inherit it

_ACTIVE: list["Pools"] = []


def active() -> "Pools | None":
    """The pools of the multirun in progress under the warm launcher, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextmanager
def warm_pools() -> Iterator["Pools"]:
    """Keep ranks warm across the runs inside; every rank is stopped on the way out (Ctrl-C too)."""
    pools = Pools()
    _ACTIVE.append(pools)
    try:
        yield pools
    finally:
        _ACTIVE.remove(pools)
        pools.close()


def pool_key(cfg) -> tuple | None:
    """What a pool's ranks are fixed to (world size, collective timeout); None for a run no pool serves."""
    c = cfg.cluster
    if not cluster_class(cfg).keeps_ranks_warm or c.hosts != 1 or c.backend not in ("auto", "gloo"):
        return None
    if c.backend == "auto" and _gpu_visible():  # auto may mean nccl there: ranks started one run at a time
        return None
    return (int(c.nproc), float(c.timeout_s))


def _gpu_visible() -> bool:
    """An NVIDIA device node here (checked without importing torch: a partition-cache hit loads none)."""
    return any(Path("/dev").glob("nvidia[0-9]*"))


class Pools:
    """The one pool kept at a time; replaced when a point needs another, or after a failed point."""

    def __init__(self):
        self.pool: RankPool | None = None

    def serves(self, cfg) -> bool:
        return pool_key(cfg) is not None

    def run(self, cfg, run_dir: Path, parts_dir: Path, log_path: Path, on_progress: Callable[[dict], None]):
        """Run one point; (exit code, {rank: exit code of a rank that died by itself}) as for a torchrun job."""
        key = pool_key(cfg)
        with open(log_path, "w") as log:
            if self.pool is not None and (self.pool.key != key or not self.pool.healthy()):
                self.pool.close()
                self.pool = None
            if self.pool is None:
                log.write(f"$ {WARM_RANK_MODULE}: starting a warm pool of {key[0]} rank(s)\n")
                self.pool = RankPool(key)
            else:
                log.write(f"$ {WARM_RANK_MODULE}: the warm pool of {key[0]} rank(s) started earlier\n")
            log.flush()
            try:
                code, exits = self.pool.run(run_dir, parts_dir, log, on_progress)
            except BaseException:
                self.close(INTERRUPT_GRACE_S)  # Ctrl-C returns within seconds
                raise
            if code != 0:
                self.close()  # the next point starts clean
            return code, exits

    def close(self, grace_s: float = 5.0) -> None:
        if self.pool is not None:
            self.pool.close(grace_s)
            self.pool = None


class RankPool:
    """``nproc`` rank processes of gnnq.rank.serve in one gloo group; its store listens on 127.0.0.1 only."""

    def __init__(self, key: tuple):
        self.key = key
        nproc, timeout_s = key
        self.nproc = nproc
        self.lines: queue.Queue = queue.Queue()
        self.early: list[str] = []  # what the ranks printed while starting: into the first point's log
        self.ended = [threading.Event() for _ in range(nproc)]  # a rank's output ended (its reader saw EOF)
        self.procs: list[subprocess.Popen] = []
        server = loopback_server()  # the store rank 0 serves: loopback only
        try:
            self.procs = _spawner().call(lambda: [self._spawn(rank, timeout_s, server) for rank in range(nproc)])
        finally:
            server.close()  # rank 0 holds it now
        self._wait_ready(timeout_s)

    def _spawn(self, rank: int, timeout_s: float, server) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-m", WARM_RANK_MODULE, f"--timeout-s={timeout_s}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=rank_env(rank, self.nproc, server),
            pass_fds=store_fds(rank, server),
            start_new_session=True,  # Ctrl-C reaches the launcher, which stops the ranks
        )

        def read() -> None:
            for line in proc.stdout:
                self.lines.put((rank, line))
            self.ended[rank].set()

        threading.Thread(target=read, name=f"gnnq-warm-rank{rank}", daemon=True).start()
        return proc

    def _wait_ready(self, timeout_s: float) -> None:
        ready: set[int] = set()
        deadline = time.monotonic() + timeout_s
        try:
            while len(ready) < self.nproc:
                try:
                    rank, line = self.lines.get(timeout=0.2)
                except queue.Empty:
                    dead = [r for r, p in enumerate(self.procs) if p.poll() is not None]
                    if dead or time.monotonic() > deadline:
                        what = (
                            f"rank {dead[0]} exited with code {self.procs[dead[0]].returncode}"
                            if dead
                            else f"its ranks did not join the group within cluster.timeout_s={timeout_s:g}"
                        )
                        tail = "".join(self.early[-20:]).strip()
                        raise LaunchError(f"the warm rank pool did not start: {what}" + (f"\n{tail}" if tail else ""))
                    continue
                if line.strip() == WARM_READY:
                    ready.add(rank)
                else:
                    self.early.append(line)
        except BaseException:
            self.close()
            raise

    def healthy(self) -> bool:
        return all(p.poll() is None for p in self.procs) and not any(e.is_set() for e in self.ended)

    def run(self, run_dir: Path, parts_dir: Path, log, on_progress: Callable[[dict], None]) -> tuple[int, dict]:
        """One point on the pool; (0, {}) when every rank finished it, else (1, ranks that died by themselves)."""
        for line in self.early:
            log.write(line)
        self.early = []
        job = {"run_dir": str(run_dir), "parts": str(parts_dir), "env": {k: os.environ.get(k) for k in PASSED_ENV}}
        message = json.dumps(job) + "\n"
        for proc in self.procs:
            try:
                proc.stdin.write(message)
                proc.stdin.flush()
            except OSError:  # it died between points: found below
                pass
        done: dict[int, bool] = {}
        while len(done) < self.nproc:
            try:
                rank, line = self.lines.get(timeout=0.2)
            except queue.Empty:
                died = {r: p.returncode for r, p in enumerate(self.procs) if r not in done and p.poll() is not None}
                if died:
                    return self._stop(log, died)
                continue
            if line.startswith(WARM_DONE_PREFIX):
                done[rank] = bool(json.loads(line[len(WARM_DONE_PREFIX) :]).get("ok"))
                if not done[rank]:
                    return self._stop(log, {})
                continue
            follow_line(line, log, on_progress if rank == 0 else _no_progress)
        return 0, {}

    def _stop(self, log, died: dict[int, int]) -> tuple[int, dict]:
        """A point failed: stop every rank as torchrun stops a failed job and keep all they printed in its log.

        The ranks get a moment to end by themselves first (a rank that raised exits; its peers then lose their
        connection and exit): which of them a signal killed is told only by exits before gnnq sends any."""
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline and any(p.poll() is None for p in self.procs):
            time.sleep(0.05)
        died = {**{r: p.poll() for r, p in enumerate(self.procs)}, **died}
        exits = {r: code for r, code in died.items() if code is not None and code < 0}  # killed by a signal
        self.close(grace_s=STOP_GRACE_S)
        while True:  # everything the ranks printed before they ended
            try:
                rank, line = self.lines.get_nowait()
            except queue.Empty:
                break
            if not line.startswith(WARM_DONE_PREFIX):
                log.write(line)
        log.flush()
        return 1, exits

    def close(self, grace_s: float = 5.0) -> None:
        """Stop the ranks: end of input (an idle rank exits), then SIGTERM, then SIGKILL; all reaped."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    proc.stdin.write(json.dumps({"stop": True}) + "\n")
                    proc.stdin.close()
                except OSError:
                    pass
        deadline = time.monotonic() + 1.0
        for proc in self.procs:
            _wait(proc, deadline)
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
            alive = [p for p in self.procs if p.poll() is None]
            for proc in alive:
                try:
                    os.kill(proc.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait_s
            for proc in alive:
                _wait(proc, deadline)
        # let the readers reach the end of each pipe, so nothing a rank printed is lost
        deadline = time.monotonic() + 2.0
        for ended in self.ended:
            ended.wait(max(0.0, deadline - time.monotonic()))


def _wait(proc: subprocess.Popen, deadline: float) -> None:
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass


def _no_progress(row: dict) -> None:
    """Only rank 0 reports progress rows."""


class _Spawner:
    """One thread that lives as long as the launcher and starts every pool rank.

    A rank asks Linux for SIGKILL when its parent dies (PR_SET_PDEATHSIG), and Linux sends it when the *thread*
    that started the rank ends: a pool started from a short-lived thread would lose its ranks with that thread.
    The main thread starts them itself; any other thread hands the start to this one."""

    def __init__(self):
        self.jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._serve, name="gnnq-warm-spawner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, done = self.jobs.get()
            try:
                done.put((True, fn()))
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                done.put((False, exc))

    def call(self, fn: Callable):
        if threading.current_thread() is threading.main_thread():
            return fn()
        done: queue.Queue = queue.Queue()
        self.jobs.put((fn, done))
        ok, value = done.get()
        if not ok:
            raise value
        return value


_SPAWNER: list[_Spawner] = []
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> _Spawner:
    with _SPAWNER_LOCK:
        if not _SPAWNER:
            _SPAWNER.append(_Spawner())
        return _SPAWNER[0]
