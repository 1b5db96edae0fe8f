"""Where a run's ranks start, by ``cluster.name``: the command that starts them and what to say about it.

- local: the ranks on this machine, started by gnnq itself (gnnq.launch.ranks: no torchrun agent), their
  store on loopback only.
- slurm: inside the run's Slurm job, srun starts one torchrun per node (``gnnq.launch.slurm``).
- multinode: machines you start yourself: a torchrun here serves the rendezvous at
  ``cluster.rendezvous``; the same torchrun command, printed, is run by hand on each other node.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig

from gnnq.launch.ranks import rank_command
from gnnq.launch.slurm import current_job, srun_command
from gnnq.launch.torchrun import multinode_torchrun_command


@dataclass
class Placement:
    cmd: list[str]  # what gnnq runs here (local: one rank's command, started ``local_ranks`` times)
    how: str  # "2 rank(s) with torchrun"
    notes: list[str] = field(default_factory=list)  # to show before starting
    summary: dict = field(default_factory=dict)  # added to the run's summary
    local_ranks: int = 0  # > 0: gnnq starts this many ranks itself (gnnq.launch.ranks), no torchrun


def place(cfg: DictConfig, run_dir: Path, parts_dir: Path) -> Placement:
    c = cfg.cluster
    if c.name == "slurm":
        job = current_job(c.hosts)
        how = f"{c.hosts} node(s) x {c.nproc} rank(s) with srun and torchrun (Slurm job {job.job_id})"
        return Placement(srun_command(c, job, run_dir, parts_dir), how, summary={"slurm": job.describe()})
    if c.name == "multinode":
        cmd = multinode_torchrun_command(run_dir, parts_dir, c.nproc, c.hosts, c.rendezvous, rendezvous_id(run_dir))
        notes = [f"on each of the other {c.hosts - 1} node(s), run: {shlex.join(cmd)}"] if c.hosts > 1 else []
        return Placement(
            cmd, f"{c.nproc} of {c.hosts} x {c.nproc} rank(s) with torchrun (rendezvous {c.rendezvous})", notes
        )
    return Placement(rank_command(run_dir, parts_dir), f"{c.nproc} rank(s)", local_ranks=c.nproc)


def rendezvous_id(run_dir: Path) -> str:
    """The same on every node for one run, different for every run."""
    return "gnnq-" + hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:16]
