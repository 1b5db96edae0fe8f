"""cluster=multinode: machines you start yourself. A torchrun here serves the rendezvous at ``cluster.rendezvous``;
the same torchrun command, printed, is run by hand on each other node."""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path
from typing import Callable

from gnnq.launch.clusters.base import Cluster
from gnnq.launch.collect import collect_result
from gnnq.launch.run_dir import ranks_log
from gnnq.launch.torchrun import multinode_torchrun_command, run_torchrun


class MultinodeCluster(Cluster):
    def start(self, run_dir: Path, parts_dir: Path, say: Callable[[str], None], follow: Callable[[dict], None]) -> dict:
        c = self.c
        cmd = multinode_torchrun_command(run_dir, parts_dir, c.nproc, c.hosts, c.rendezvous, rendezvous_id(run_dir))
        if c.hosts > 1:
            say(f"on each of the other {c.hosts - 1} node(s), run: {shlex.join(cmd)}")
        say(
            f"launching {c.nproc} of {c.hosts} x {c.nproc} rank(s) with torchrun (rendezvous {c.rendezvous}) "
            f"{self.methods()}"
        )
        log = ranks_log(run_dir)
        return collect_result(run_dir, run_torchrun(cmd, log, follow), [log])


def rendezvous_id(run_dir: Path) -> str:
    """The same on every node for one run, different for every run."""
    return "gnnq-" + hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:16]
