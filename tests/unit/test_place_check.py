"""PlaceCheck, the callback that claims a sweep's directory before Hydra writes into it, on a sweep whose overrides
hold an interpolation only a job can resolve (the tuning sweeps' ``hydra.sweep.subdir=attempt0-${hydra.job.num}``)."""

from __future__ import annotations

from omegaconf import OmegaConf

from gnnq.contract import INTERNAL_DIR
from gnnq.launch.outcome import SWEEP_DIR
from gnnq.launch.run_dir import LOCK_FILE, PlaceCheck


def test_a_sweep_whose_subdir_names_the_job_number_is_claimed_before_any_job_runs(tmp_path):
    sweep = tmp_path / "tune" / "cora" / "pipegcn"
    subdir = "attempt0-${hydra.job.num}"
    config = OmegaConf.create(
        {
            "hydra": {
                "sweep": {"dir": str(sweep), "subdir": subdir},
                "job": {"num": "???"},  # as at on_multirun_start: no job yet
                "overrides": {"hydra": [f"hydra.sweep.dir={sweep}", f"hydra.sweep.subdir={subdir}"], "task": []},
            }
        }
    )
    saved = list(SWEEP_DIR)  # the process's sweep, which gnnq.cli reads: restored for the tests after this one
    try:
        PlaceCheck().on_multirun_start(config)  # raised InterpolationToMissingValueError (Hydra only warned)
        assert (sweep / INTERNAL_DIR / LOCK_FILE).is_file() and SWEEP_DIR == [str(sweep)]
    finally:
        SWEEP_DIR[:] = saved
