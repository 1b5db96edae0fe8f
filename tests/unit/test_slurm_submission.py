"""cluster=slurm without a Slurm cluster: the sbatch script submitit writes (needs srun on PATH), the srun + torchrun
command, config checks.

Here: the in-process cases (no process started); the others are in `tests/integration/test_slurm_submission.py`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf, open_dict

from gnnq.config.compose import CONF_DIR, compose_config, register_configs
from gnnq.config.validate import validate
from gnnq.errors import ConfigError, LaunchError
from gnnq.launch.preflight import preflight
from gnnq.launch.slurm import SlurmJob, current_job, srun_command, submitit_parameters
from tests.conftest import skip_or_fail

needs_submitit = pytest.mark.needs_extra("slurm")  # skips without hydra-submitit-launcher (tests/conftest.py)

BIG = [
    "cluster=slurm",
    "cluster.hosts=4",
    "cluster.nproc=8",
    "cluster.partition=gpu",
    "cluster.account=proj42",
    "cluster.time_limit_min=120",
    "+cluster.sbatch_extra.mem=64G",
    "+cluster.sbatch_extra.exclusive=true",
]


def sbatch_script(cluster, folder: Path) -> str:
    """The batch script submitit writes for these parameters, as hydra-submitit-launcher hands them over."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    if shutil.which("srun") is None:  # submitit's Slurm executor refuses to start without it
        skip_or_fail(
            "GNNQ_REQUIRE_SLURM",
            "submitit writes sbatch scripts only where Slurm's srun is installed (apt-get install slurm-client)",
        )
    params = submitit_parameters(OmegaConf.to_container(cluster, resolve=True))
    executor = submitit.AutoExecutor(
        folder=folder, cluster="slurm", slurm_max_num_timeout=params.pop("max_num_timeout")
    )
    generic = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in generic else f"slurm_{k}": v for k, v in params.items()})
    return executor._executor._make_submission_file_text("python -u -m submitit.core._submit FOLDER", "uid")


def sbatch_options(script: str) -> dict[str, str]:
    lines = [line.removeprefix("#SBATCH --") for line in script.splitlines() if line.startswith("#SBATCH --")]
    return dict(line.split("=", 1) if "=" in line else (line, "") for line in lines)


@needs_submitit
def test_a_4_node_x_8_gpu_run_asks_sbatch_for_4_nodes_of_8_gpus_and_runs_once_in_the_batch_script(tmp_path):
    script = sbatch_script(compose_config(BIG).cluster, tmp_path)
    options = sbatch_options(script)
    expected = {
        "nodes": "4",
        "ntasks-per-node": "1",
        "gpus-per-node": "8",
        "cpus-per-task": "8",
        "partition": "gpu",
        "account": "proj42",
        "time": "120",
        "mem": "64G",
        "exclusive": "",
        "job-name": "gnnq",
        "signal": "TERM@60",
    }  # the ranks stop a minute before the limit, and the record is written
    assert {k: options.get(k) for k in expected} == expected
    command = [line for line in script.splitlines() if "submitit.core._submit" in line]
    assert command == ["python -u -m submitit.core._submit FOLDER"], (
        "the run starts once, in the batch script (no srun)"
    )


def test_a_4_node_x_8_gpu_job_starts_one_torchrun_per_node_with_srun():
    cluster = compose_config(BIG).cluster
    job = SlurmJob("73", ["gpu-a01", "gpu-a02", "gpu-b01", "gpu-b02"])
    cmd = srun_command(cluster, job, Path("/shared/runs/r"), Path("/shared/data/parts/p"))
    assert cmd == [
        "srun",
        "--nodes=4",
        "--ntasks=4",
        "--ntasks-per-node=1",
        "--cpus-per-task=8",
        "--gpus-per-node=8",
        "--kill-on-bad-exit=1",
        sys.executable,
        "-m",
        "torch.distributed.run",  # plain torchrun: its rendezvous serves every interface
        "--nnodes=4",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=gpu-a01:20073",
        "--rdzv-id=73",
        "--max-restarts=0",
        "--monitor-interval=0.2",
        "-m",
        "gnnq.rank",
        "--run-dir",
        "/shared/runs/r",
        "--parts",
        "/shared/data/parts/p",
    ]


@needs_submitit
@pytest.mark.parametrize(
    "overrides, gpus, cpus",
    [
        (["cluster.backend=gloo"], None, "2"),  # CPU nodes: no GPUs asked for
        (["cluster.backend=nccl", "cluster.nproc=4"], "4", "4"),
        (["cluster.gpus_per_node=2", "cluster.cpus_per_node=16"], "2", "16"),
        (["cluster.nproc=3", "cluster.threads_per_rank=4"], "3", "12"),
    ],
)
def test_gpus_and_cpus_per_node(tmp_path, overrides, gpus, cpus):
    cluster = compose_config(["cluster=slurm", *overrides]).cluster
    cmd = srun_command(cluster, SlurmJob("5", ["n1"]), Path("/r"), Path("/p"))
    assert (f"--gpus-per-node={gpus}" in cmd) == (gpus is not None) and f"--cpus-per-task={cpus}" in cmd
    options = sbatch_options(sbatch_script(cluster, tmp_path))
    assert options.get("gpus-per-node") == gpus and options["cpus-per-task"] == cpus


@needs_submitit
def test_cluster_slurm_selects_the_gnnq_launcher_and_multirun_mode():
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            slurm = compose("config", overrides=["cluster=slurm"], return_hydra_config=True)
            local = compose("config", overrides=[], return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()
    target = slurm.hydra.launcher._target_
    assert target == "hydra_plugins.gnnq_slurm_launcher.gnnq_slurm_launcher.GnnqSlurmLauncher"
    assert str(slurm.hydra.mode) == "RunMode.MULTIRUN"  # a plain `gnnq cluster=slurm` is submitted too
    # cluster=local keeps its ranks warm across a multirun's points (hydra_plugins/gnnq_warm_launcher)
    assert local.hydra.launcher._target_.endswith("GnnqWarmLauncher") and local.hydra.mode is None
    from hydra.core.plugins import Plugins

    assert target in Plugins.instance().class_name_to_class, "Hydra must find the launcher in the hydra_plugins package"


@pytest.mark.parametrize(
    "args, needles",
    [
        (["cluster.name=cloud"], ["cluster.name", "local, emulated, slurm, multinode"]),
        (["cluster.gpus_per_node=-1"], ["cluster.gpus_per_node=-1", ">= 0"]),
        (["cluster.cpus_per_node=0"], ["cluster.cpus_per_node=0", ">= 1"]),
        (
            ["cluster.backend=nccl", "cluster.nproc=4", "cluster.gpus_per_node=2"],
            ["cluster.gpus_per_node=2", "nccl", ">= 4"],
        ),
        (["cluster.time_limit_min=0"], ["cluster.time_limit_min", ">= 1"]),
        (["+cluster.sbatch_extra.nodes=3"], ["cluster.sbatch_extra.nodes", "cluster.hosts"]),
        (["+cluster.sbatch_extra.ntasks-per-node=2"], ["cluster.sbatch_extra.ntasks-per-node", "cluster.hosts"]),
        (["+cluster.sbatch_extra.time=10"], ["cluster.sbatch_extra.time", "cluster.time_limit_min"]),
        (["+cluster.sbatch_extra.signal=USR1@30"], ["cluster.sbatch_extra.signal", "the launcher"]),
        (["+cluster.sbatch_extra.qos=[a,b]"], ["cluster.sbatch_extra.qos", "a string, a number or true"]),
        (["+cluster.sbatch_extra.exclusive=false"], ["cluster.sbatch_extra.exclusive=False", "leave the key out"]),
        (["cluster.sbatch_extra={mem: 4G}"], ["cluster.sbatch_extra.mem", "+cluster.sbatch_extra.mem="]),
        (["cluster.sbatch_extra=64G"], ["cluster.sbatch_extra"]),
    ],
)
def test_bad_slurm_config_is_named(args, needles):
    with pytest.raises(ConfigError) as excinfo:
        compose_config(["cluster=slurm", *args])
    msg = str(excinfo.value)
    assert "\n" not in msg and all(n in msg for n in needles), msg


def test_sbatch_extra_from_a_yaml_file_with_dashes_is_named():
    cfg = compose_config(["cluster=slurm"])
    with open_dict(cfg):
        cfg.cluster.sbatch_extra["--mem"] = "4G"  # what `sbatch_extra: {--mem: 4G}` in a preset gives
    with pytest.raises(
        ConfigError, match=r"cluster.sbatch_extra.--mem is not allowed; name the option without leading dashes"
    ):
        validate(cfg)


@needs_submitit  # cluster=slurm's preflight first checks that the launcher is installed
def test_a_sweep_may_not_vary_what_its_jobs_ask_slurm_for():
    assert preflight(["cluster=slurm", "trainer.seed=0,1", "cluster.timeout_s=60,90"], multirun=True) == 4
    with pytest.raises(ConfigError, match=r"cluster.nproc=4 in a sweep point, 2 outside the sweep"):
        preflight(["cluster=slurm", "cluster.nproc=2,4"], multirun=True)
    with pytest.raises(ConfigError, match=r"cluster=slurm in a sweep point, local outside"):
        preflight(["cluster=local,slurm"], multirun=True)
    assert preflight(["cluster.nproc=1,2"], multirun=True) == 2  # local sweeps may


def test_the_job_side_names_a_missing_or_mismatched_allocation():
    with pytest.raises(LaunchError, match="SLURM_JOB_ID is not set"):
        current_job(2, {})
    with pytest.raises(LaunchError, match=r"Slurm job 9 has 1 node\(s\), but cluster.hosts=2"):
        current_job(2, {"SLURM_JOB_ID": "9", "SLURM_NNODES": "1", "SLURM_JOB_NODELIST": "n1"})
