"""cluster=local: the ranks on this machine, started by gnnq itself (gnnq.launch.ranks: no torchrun agent), their
store on loopback only; under a multirun, on the warm pool that keeps them across points (gnnq.launch.warm_pool)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gnnq.launch import warm_pool
from gnnq.launch.clusters.base import Cluster
from gnnq.launch.collect import collect_result
from gnnq.launch.ranks import run_local_ranks
from gnnq.launch.run_dir import ranks_log


class LocalCluster(Cluster):
    keeps_ranks_warm = True

    def torchrun_agents_here(self) -> int:
        return 0

    def start(self, run_dir: Path, parts_dir: Path, say: Callable[[str], None], follow: Callable[[dict], None]) -> dict:
        log = ranks_log(run_dir)
        pools = warm_pool.active()
        if pools is not None and pools.serves(self.cfg):  # a multirun under the warm launcher
            say(f"running {self.c.nproc} rank(s) on the warm pool {self.methods()}")
            log.parent.mkdir(parents=True, exist_ok=True)
            code, exits = pools.run(self.cfg, run_dir, parts_dir, log, follow)
            return collect_result(run_dir, code, [log], exits=exits)
        say(f"launching {self.c.nproc} rank(s) {self.methods()}")
        code = run_local_ranks(run_dir, parts_dir, self.c.nproc, log, follow)
        return collect_result(run_dir, code, [log])
