"""cluster=emulated: N hosts on this machine in network namespaces with shaped links, one torchrun per host
(gnnq.launch.emulated, gnnq.launch.netns); every host's ranks share this machine's memory."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gnnq.launch.clusters.base import Cluster
from gnnq.launch.collect import collect_result
from gnnq.launch.emulated import run_emulated


class EmulatedCluster(Cluster):
    def ranks_here(self, estimates: list[float]) -> list[float]:
        return estimates

    def torchrun_agents_here(self) -> int:
        return self.c.hosts

    def start(self, run_dir: Path, parts_dir: Path, say: Callable[[str], None], follow: Callable[[dict], None]) -> dict:
        code, logs, info = run_emulated(self.cfg, run_dir, parts_dir, say, follow)
        return {**collect_result(run_dir, code, logs, self.c.nproc), "emulated": info}
