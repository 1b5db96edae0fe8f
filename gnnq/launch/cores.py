"""Which of this machine's cores each emulated host gets, and how many intra-op threads its ranks run.

Emulated hosts share one machine. With at least as many usable cores as hosts, ``cluster.pin_cores``
(auto: yes) gives every host its own contiguous block of cores (``taskset``, inherited by its torchrun
and ranks), so one host's computation does not slow another's: an emulated 2-host run on 2 cores then
computes like two 1-core hosts. With fewer cores than hosts the hosts share all cores, each gets
``cores / hosts`` of them on average, and the run is marked oversubscribed: its compute is slower than
on real hosts, so speedups from cutting communication are understated (gnnq-bench and gnnq-report say so).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from gnnq.errors import ConfigError


@dataclass(frozen=True)
class HostCores:
    machine_cores: int  # cores this process may run on (its affinity mask)
    pinned: bool
    host_cpus: list[list[int]] | None  # the cores of each host when pinned
    cores_per_host: float  # a pinned host's core count; else machine_cores / hosts (shared)
    threads_per_rank: int
    oversubscribed: bool  # the ranks' threads exceed the cores they run on

    def describe(self) -> str:
        how = "own cores" if self.pinned else "shared cores"
        over = ", oversubscribed: compute slower than on real hosts" if self.oversubscribed else ""
        return (
            f"{self.cores_per_host:g} core(s) per host ({how}, {self.machine_cores} on this machine), "
            f"{self.threads_per_rank} thread(s) per rank{over}"
        )

    def summary(self) -> dict:
        return asdict(self)


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def plan_host_cores(
    hosts: int, nproc: int, pin: str, threads_per_rank: int = 0, cores: list[int] | None = None
) -> HostCores:
    """The cores of ``hosts`` emulated hosts of ``nproc`` ranks each, under ``cluster.pin_cores=pin`` (auto | on |
    off)."""
    cores = usable_cores() if cores is None else cores
    n = len(cores)
    if pin == "on" and n < hosts:
        raise ConfigError(
            f"cluster.pin_cores=on is not allowed with cluster.hosts={hosts} on {n} usable core(s): every host needs "
            "a core of its own; use cluster.pin_cores=auto or off, or at most that many hosts"
        )
    pinned = pin == "on" or (pin == "auto" and n >= hosts)
    if pinned:
        per, extra = divmod(n, hosts)  # the first `extra` hosts get one core more
        blocks, start = [], 0
        for h in range(hosts):
            size = per + (h < extra)
            blocks.append(cores[start : start + size])
            start += size
        smallest = min(len(b) for b in blocks)
        threads = threads_per_rank or max(1, smallest // nproc)
        return HostCores(n, True, blocks, float(smallest), threads, nproc * threads > smallest)
    threads = threads_per_rank or max(1, n // (hosts * nproc))
    return HostCores(n, False, None, n / hosts, threads, hosts * nproc * threads > n)


def pinned_command(cpus: list[int], cmd: list[str]) -> list[str]:
    """``cmd`` run on ``cpus`` only (its children inherit the mask)."""
    return ["taskset", "--cpu-list", ",".join(map(str, cpus)), *cmd]
