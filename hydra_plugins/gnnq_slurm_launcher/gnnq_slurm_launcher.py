"""Hydra launcher for cluster=slurm: hydra-submitit-launcher's, with its sbatch parameters taken from ``cluster.*``.

Hydra instantiates launchers only from the ``hydra_plugins`` package, so this class lives here.
conf/cluster/slurm.yaml selects it (``hydra/launcher=gnnq_slurm``, registered in gnnq.config.schema).
It submits every point of the (multi)run as one job of a Slurm job array, waits for all of them,
then shows each run's result as a local run would and counts failed runs into gnnq's exit code.
Without hydra-submitit-launcher installed it defines nothing (gnnq's preflight names the extra).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from omegaconf import OmegaConf

# the resolver of hydra.sweep.subdir, on the Slurm node that unpickles this launcher
import gnnq.launch.job_names  # noqa: F401

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
except ImportError:  # the slurm extra is not installed
    SlurmLauncher = None


def report(run_dir: Path) -> None:
    """Print a finished run's summary table (or its error) from its record, and note a failure."""
    from gnnq.contract import RECORD_FILE
    from gnnq.launch.outcome import FAILED_RUNS, RUNS
    from gnnq.track.progress import summary_table

    RUNS.append(str(run_dir))
    try:
        record = json.loads((run_dir / RECORD_FILE).read_text())
    except (OSError, ValueError) as exc:
        record = {"status": "failed", "error": f"the Slurm job left no readable record ({exc})"}
    if record.get("status") == "ok":
        job = (record.get("summary") or {}).get("slurm", {}).get("job_id")
        print(f"[gnnq] {run_dir} (Slurm job {job})", flush=True)
        print(summary_table(record), flush=True)
    else:
        FAILED_RUNS.append(str(run_dir))
        print(f"gnnq: error: {run_dir}: {record.get('error')}", file=sys.stderr, flush=True)


if SlurmLauncher is not None:

    class GnnqSlurmLauncher(SlurmLauncher):
        def setup(self, *, hydra_context, task_function, config) -> None:
            from gnnq.launch.slurm import submitit_parameters

            super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
            self.params.update(submitit_parameters(OmegaConf.to_container(config.cluster, resolve=True)))

        def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
            try:
                returns = super().launch(job_overrides, initial_job_idx)
            except KeyboardInterrupt:  # Ctrl-C (or SIGTERM) while waiting stops the jobs, as it stops local ranks
                cancel_submitted(Path(str(self.config.hydra.sweep.dir)) / ".submitit")
                raise
            for ret in returns:
                report(Path(ret.hydra_cfg.hydra.runtime.output_dir))
            return returns


def cancel_submitted(submitit_dir: Path) -> None:
    """scancel the jobs submitit submitted into ``submitit_dir`` (one folder per job: <id> or <array id>_<index>)."""
    ids = sorted(
        {p.name.split("_")[0] for p in submitit_dir.glob("*") if p.is_dir() and p.name.split("_")[0].isdigit()}
    )
    if ids:
        subprocess.run(["scancel", *ids], timeout=60, check=False)
        print(f"gnnq: cancelled Slurm job(s) {', '.join(ids)}", file=sys.stderr, flush=True)
