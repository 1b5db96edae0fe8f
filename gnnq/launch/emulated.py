"""``cluster=emulated``: one torchrun per emulated host, rendezvous across hosts as on a real multi-node job.

Every host is a network namespace (``gnnq.launch.netns``); its torchrun runs inside it with
``--nnodes=H --node-rank=h``, a c10d rendezvous on host 0's address and ``--local-addr`` its own
address, and gloo bound to the host's shaped interface, so traffic between hosts crosses the
shaped links. The topology exists only while the job runs: it is torn down when the job ends,
fails or is interrupted.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig

from gnnq.contract import THREADS_ENV
from gnnq.launch import netns
from gnnq.launch.cores import HostCores, pinned_command, plan_host_cores
from gnnq.launch.failure import elastic_log_dir
from gnnq.launch.torchrun import multinode_torchrun_command, run_torchrun

RDZV_PORT = 29400  # on host 0's address, inside its own namespace: no other job can hold it
STOP_GRACE_S = 40.0  # torchrun gives its ranks up to 30 s after SIGTERM


def host_command(
    topo: netns.Topology, h: int, nproc: int, run_dir: Path, parts_dir: Path, join_timeout_s: int, cores: HostCores
) -> list[str]:
    """torchrun for host ``h``, run inside its namespace (on its own cores when they are pinned)."""
    extra = (
        f"--node-rank={h}",
        # the hosts share this machine's hostname, so torchrun cannot tell by name which one serves the rendezvous
        f"--rdzv-conf=is_host={int(h == 0)},join_timeout={join_timeout_s}",
        f"--local-addr={topo.host_addr(h)}",
        f"--log-dir={elastic_log_dir(run_dir, h)}",
    )
    endpoint = f"{topo.host_addr(0)}:{RDZV_PORT}"
    torchrun = multinode_torchrun_command(run_dir, parts_dir, nproc, topo.hosts, endpoint, f"gnnq-{topo.run_id}", extra)
    if cores.pinned:
        torchrun = pinned_command(cores.host_cpus[h], torchrun)
    return ["ip", "netns", "exec", topo.host_ns(h), *torchrun]


def host_log(run_dir: Path, h: int) -> Path:
    return run_dir / "logs" / f"torchrun-h{h}.log"


def run_hosts(
    topo: netns.Topology,
    cmds: list[list[str]],
    logs: list[Path],
    on_progress: Callable[[dict], None],
    env: dict[str, str],
) -> int:
    """Run one torchrun per host and follow them all; when one fails (or on Ctrl-C) all are stopped.

    Returns the exit code of the first host that failed, or 0.
    """
    codes: dict[int, int] = {}
    failed: list[int] = []  # hosts in the order their torchrun failed
    done = threading.Condition()

    def follow(h: int) -> None:
        code = 1
        try:
            code = run_torchrun(cmds[h], logs[h], on_progress, env={"GLOO_SOCKET_IFNAME": netns.HOST_IFNAME, **env})
        finally:
            with done:
                codes[h] = code
                if code != 0:
                    failed.append(h)
                done.notify_all()

    threads = [threading.Thread(target=follow, args=(h,), name=f"gnnq-host{h}", daemon=True) for h in range(topo.hosts)]
    hosts = [topo.host_ns(h) for h in range(topo.hosts)]
    for t in threads:
        t.start()
    stop_deadline = None
    try:
        while len(codes) < topo.hosts:
            with done:
                done.wait(timeout=0.2)
                first_failure = failed[0] if failed else None
            if first_failure is not None and stop_deadline is None:
                netns.signal_namespaces(hosts, signal.SIGTERM)  # the others would only wait for the failed host
                stop_deadline = time.monotonic() + STOP_GRACE_S
            if stop_deadline is not None and time.monotonic() > stop_deadline:
                netns.stop_processes(hosts)
    except BaseException:
        netns.stop_processes(hosts, grace_s=STOP_GRACE_S)
        raise
    finally:
        for t in threads:
            t.join(timeout=STOP_GRACE_S)
    return codes[failed[0]] if failed else 0


def run_emulated(
    cfg: DictConfig, run_dir: Path, parts_dir: Path, say: Callable[[str], None], on_progress: Callable[[dict], None]
) -> tuple[int, list[Path], dict]:
    """Set up the emulated hosts, run the job on them (rank 0's epoch rows to ``on_progress``), tear them down.

    Returns (exit code, torchrun's log per host, what to add to the run summary).
    """
    c = cfg.cluster
    link = netns.LinkSpec.from_cluster(c)
    cores = plan_host_cores(c.hosts, c.nproc, c.pin_cores, c.threads_per_rank)
    topo = netns.create(c.hosts, link)  # first: not root, or no iproute2, is a clear error
    try:
        say(f"emulated cluster: {c.hosts} host(s) in namespaces {topo.host_ns(0)}.., each link {link.describe()}")
        say(f"emulated cluster: {cores.describe()}")
        say(
            f"launching {c.hosts} x {c.nproc} rank(s) with torchrun ({cfg.model.name}, {cfg.parallel.name}, "
            f"{cfg.quantizer.name})"
        )
        cmds = [host_command(topo, h, c.nproc, run_dir, parts_dir, c.timeout_s, cores) for h in range(c.hosts)]
        logs = [host_log(run_dir, h) for h in range(c.hosts)]
        code = run_hosts(topo, cmds, logs, on_progress, {THREADS_ENV: str(cores.threads_per_rank)})
    finally:
        netns.teardown(topo)
    info = {
        "run_id": topo.run_id,
        "hosts": {topo.host_ns(h): topo.host_addr(h) for h in range(c.hosts)},
        "link": asdict(link),
        "cores": cores.summary(),
    }
    return code, logs, info
