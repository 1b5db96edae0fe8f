"""cluster=slurm: what a run's Slurm job asks for, and the srun + torchrun it starts inside the job.

Each run (each point of a multirun) is submitted as one sbatch job by Hydra's submitit launcher
(``hydra_plugins.gnnq_slurm_launcher``). The job's batch script runs the gnnq run once, on the first of its
``cluster.hosts`` nodes: it prepares data and parts (on a file system every node sees), then starts
one torchrun per node with srun. The torchruns meet at a c10d rendezvous served by the torchrun on
the first node, on all its interfaces, at a port derived from the job id.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from gnnq.errors import LaunchError
from gnnq.launch.torchrun import multinode_torchrun_command

# Rendezvous ports: PORT_BASE + job id mod PORT_SPAN, below Linux's ephemeral range (32768-60999),
# so two jobs whose first node is the same machine do not collide.
PORT_BASE = 20000
PORT_SPAN = 10000

# Slurm sends the job's steps (the torchruns) SIGTERM this long before the time limit, so that the ranks
# stop and the run's record is written before the job is killed (instead of submitit's USR2, which would
# kill torchrun outright: gnnq does not requeue).
STOP_BEFORE_LIMIT_S = 60


def gpus_per_node(cluster: Mapping) -> int:
    """GPUs a job asks for on each node: ``cluster.gpus_per_node``, else one per rank unless the backend is gloo."""
    if cluster["gpus_per_node"] is not None:
        return cluster["gpus_per_node"]
    return 0 if cluster["backend"] == "gloo" else cluster["nproc"]


def cpus_per_node(cluster: Mapping) -> int:
    """CPUs for the one task per node (its torchrun and ranks): ``cluster.cpus_per_node``, else
    ``nproc`` x ``threads_per_rank`` (at least one per rank)."""
    if cluster["cpus_per_node"] is not None:
        return cluster["cpus_per_node"]
    return cluster["nproc"] * max(1, cluster["threads_per_rank"])


def submitit_parameters(cluster: Mapping) -> dict:
    """hydra-submitit-launcher's parameters (its SlurmQueueConf keys) for a run on ``cluster``.

    The batch script itself runs the gnnq run (``use_srun: false``), once, and gnnq starts the
    per-node torchruns with srun. submitit counts a job's results as nodes x tasks_per_node, so it
    is told 1 x 1 and the node count goes to sbatch directly (``additional_parameters``), as does
    the signal before the time limit (STOP_BEFORE_LIMIT_S).
    """
    gpus = gpus_per_node(cluster)
    return {
        "name": "gnnq",
        "timeout_min": cluster["time_limit_min"],
        "nodes": 1,
        "tasks_per_node": 1,
        "cpus_per_task": cpus_per_node(cluster),
        "gpus_per_node": gpus or None,  # none asked for on CPU nodes: a gres request fails where there are no GPUs
        "partition": cluster["partition"],
        "account": cluster["account"],
        "use_srun": False,
        "max_num_timeout": 0,
        "stderr_to_stdout": True,
        "additional_parameters": {
            **cluster["sbatch_extra"],
            "nodes": cluster["hosts"],
            "signal": f"TERM@{STOP_BEFORE_LIMIT_S}",
        },
    }


def rendezvous_port(job_id: str) -> int:
    return PORT_BASE + int(job_id) % PORT_SPAN


@dataclass(frozen=True)
class SlurmJob:
    """The Slurm job this process runs in."""

    job_id: str
    nodes: list[str]

    @property
    def rendezvous(self) -> str:
        return f"{self.nodes[0]}:{rendezvous_port(self.job_id)}"

    def describe(self) -> dict:
        return {"job_id": self.job_id, "nodes": self.nodes, "rendezvous": self.rendezvous}


def current_job(hosts: int, env: Mapping[str, str] = os.environ) -> SlurmJob:
    """The job from SLURM_JOB_ID, SLURM_JOB_NODELIST (expanded by ``scontrol show hostnames``) and SLURM_NNODES."""
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        raise LaunchError(
            "cluster=slurm starts its ranks inside a Slurm job, but SLURM_JOB_ID is not set: "
            "`gnnq cluster=slurm ...` submits each run with sbatch (Hydra's submitit launcher)"
        )
    nnodes = int(env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES") or 0)
    if nnodes != hosts:
        raise LaunchError(f"Slurm job {job_id} has {nnodes} node(s), but cluster.hosts={hosts}")
    nodes = expand_nodelist(env.get("SLURM_JOB_NODELIST", ""), env)
    if len(nodes) != nnodes:
        raise LaunchError(f"Slurm job {job_id}: SLURM_JOB_NODELIST names {len(nodes)} node(s), SLURM_NNODES={nnodes}")
    return SlurmJob(job_id, nodes)


def expand_nodelist(nodelist: str, env: Mapping[str, str] = os.environ) -> list[str]:
    """``node[01-03],gpu7`` -> ``[node01, node02, node03, gpu7]``, as Slurm itself expands it."""
    try:
        cmd = ["scontrol", "show", "hostnames", nodelist]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=dict(env))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"cannot expand SLURM_JOB_NODELIST={nodelist!r} with scontrol: {exc}") from None
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
        raise LaunchError(f"scontrol show hostnames {nodelist!r} failed: {why}")
    return out.stdout.split()


def srun_command(cluster: Mapping, job: SlurmJob, run_dir: Path, parts_dir: Path) -> list[str]:
    """srun starting one torchrun on each node of ``job``, with ``cluster.nproc`` ranks each.

    Any node's torchrun failing stops the others (--kill-on-bad-exit); the torchruns find each other
    at ``job.rendezvous`` and use the job id as rendezvous id.
    """
    hosts, gpus = cluster["hosts"], gpus_per_node(cluster)
    torchrun = multinode_torchrun_command(run_dir, parts_dir, cluster["nproc"], hosts, job.rendezvous, job.job_id)
    return [
        "srun",
        f"--nodes={hosts}",
        f"--ntasks={hosts}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={cpus_per_node(cluster)}",
        *([f"--gpus-per-node={gpus}"] if gpus else []),
        "--kill-on-bad-exit=1",
        *torchrun,
    ]
