"""Sweeps through the real command line: by name from any directory, resume, dry run, the end-of-sweep
summary, job directory names, the per-job cli.log, --help and --version, and a reader that goes away.

Here: the in-process cases (no process started);
the others are in `tests/e2e/test_sweeps.py`, `tests/integration/test_sweeps.py`.
"""

from __future__ import annotations

import pytest

from gnnq.launch.job_names import MAX_NAME, job_dir_name, shared_keys


def test_a_key_of_the_group_a_swept_experiment_picks_composes_with_that_group_named():
    """Hydra composes a sweep's shared config without the swept experiment=..., where parallel is sync and
    has no rho: gnnq names the choice every point shares (parallel=admm), or says what to do in one line."""
    from gnnq.config.compose import shared_group_choices
    from gnnq.errors import ConfigError
    from gnnq.launch.preflight import plan

    overrides = ["experiment=pdadmm_g_paper,pdadmm_g_q_code", "parallel.rho=1e-3", "dataset=citeseer"]
    points = plan(overrides, True)
    assert shared_group_choices(overrides, points) == ["parallel=admm"]
    assert (
        shared_group_choices(
            ["experiment=pdadmm_g_paper", "parallel.rho=1e-3"], plan(["experiment=pdadmm_g_paper"], True)
        )
        == []
    )
    mixed = [(p, cfg) for p, cfg in points[:1]] + [(["experiment=adaqp"], plan(["experiment=adaqp"], True)[0][1])]
    with pytest.raises(ConfigError, match=r"parallel\.rho.*name it on the command line too, e\.g\. parallel=admm"):
        shared_group_choices(overrides, mixed)


def test_job_dir_names_are_short_safe_and_unique():
    assert job_dir_name(3, "model=sage,cluster.nproc=4") == "3_model=sage,cluster.nproc=4"
    assert job_dir_name(0, "") == "0"
    odd = job_dir_name(1, "dataset.root=/data/my graphs,+cluster.sbatch_extra.qos='x y'")
    assert "/" not in odd and " " not in odd and "'" not in odd
    long_a, long_b = job_dir_name(5, "a=" + "x" * 200), job_dir_name(5, "a=" + "x" * 199 + "y")
    assert len(long_a) == len(long_b) == MAX_NAME and long_a != long_b
    assert shared_keys([["a=1", "b=2"], ["a=1", "b=3"]]) == ["a"] and shared_keys([["+a@p=1", "b=2"]]) == ["a", "b"]
